"""The declarations of tilelang.torch: an output shaped like an input, and the gradient of a
forward output in a backward binding (docs/torch.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable


@dataclass(frozen=True)
class like:
    """An output with the shape of the input array `name`. Its dtype is always the output
    parameter's (the kernel takes no other), so there is nothing else to declare."""
    name: str


@dataclass(frozen=True)
class grad:
    """In a backward binding: the gradient of the forward output `name`."""
    name: str


@dataclass(frozen=True)
class Output:
    """An output the operator allocates: rank and dtype from the kernel parameter, the shape
    from its declaration (None: the user's `fake` allocates it)."""
    name: str
    rank: int
    dtype: Any                       # torch dtype; None: the type variable's, per call
    shape: Callable | None           # meta -> shape; None: the user's fake allocates
    type_var: str | None = None      # `Array[T, n]` of a generic kernel: T
