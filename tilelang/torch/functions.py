"""Operators written as functions that launch Tile kernels, in the shape of
torch.library.triton_op and wrap_triton: `custom_op` registers the function (also its own fake
implementation) and `wrap(kernel)[grid](...)` launches inside it, doing nothing on fake tensors
and checking each launch's writes against the declared mutations (docs/torch.md)."""

from __future__ import annotations

import contextvars
import inspect
from dataclasses import dataclass
from typing import Callable

from .support import TileOpError, import_torch, launch, written_arrays

# The operator whose real implementation is running in this thread or task (None outside).
_CURRENT: contextvars.ContextVar = contextvars.ContextVar("tilelang_torch_call", default=None)


@dataclass(frozen=True)
class _Call:
    """The operator a real call is running: its name and its input tensors by name, with
    which of them it declared mutated (what `wrap`'s launches are checked against)."""
    name: str
    tensors: tuple
    mutates: frozenset


def custom_op(name: str, fn: Callable | None = None, /, *, mutates_args, device_types=None,
              schema: str | None = None):
    """`torch.library.custom_op` for a function that allocates its outputs and launches Tile
    kernels through `wrap(kernel)[grid](...)`: as `torch.library.triton_op`, the function is
    also the fake implementation (under fake tensors the launches do nothing), and each launch
    checks that the inputs its kernel writes are in `mutates_args` (a `TileOpError` if not)."""
    torch = import_torch()
    declared = frozenset((mutates_args,) if isinstance(mutates_args, str) else mutates_args)

    def decorate(f):
        try:                      # string annotations (`from __future__ import annotations`)
            sig = inspect.signature(f, eval_str=True)         # are resolved in f's module
        except (NameError, TypeError, SyntaxError):
            sig = inspect.signature(f)
        params = list(sig.parameters)
        # "unknown" is torch's "every input may be mutated": no launch can contradict it
        mutable = frozenset(params) if mutates_args == "unknown" else declared

        def real(*args, **kwargs):
            bound = dict(zip(params, args), **kwargs)
            tensors = tuple((n, v) for n, v in bound.items() if isinstance(v, torch.Tensor))
            token = _CURRENT.set(_Call(name, tensors, mutable))
            try:
                return f(*args, **kwargs)
            finally:
                _CURRENT.reset(token)
        real.__signature__ = sig
        real.__name__ = f.__name__
        result = torch.library.custom_op(name, real, mutates_args=mutates_args,
                                         device_types=device_types, schema=schema)
        result.register_fake(f)
        return result
    return decorate if fn is None else decorate(fn)


class wrap:
    """`wrap(kernel)[grid](*args, **consts)`: a launch inside a `custom_op` function (as
    `torch.library.wrap_triton`). On fake or meta tensors it does nothing; on CUDA tensors it
    runs on their device and current stream; its writes are checked against the operator's
    `mutates_args`."""

    def __init__(self, kernel):
        self.kernel = kernel

    def __getitem__(self, grid):
        return lambda *args, stream=None, block=None, **consts: \
            self._launch(grid, args, stream, block, consts)

    def _launch(self, grid, args, stream, block, consts):
        torch = import_torch()
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        if any(_is_fake(t) for t in tensors):
            return None
        kernel = self.kernel.specialize(**consts)
        if kernel.open_types:            # a generic kernel: its arrays fix its dtypes
            from tilelang.runtime.module import infer_types
            kernel = kernel.specialize(**infer_types(kernel, tuple(args)))
        call = _CURRENT.get()
        if call is not None:
            _check_launch_writes(call, kernel, args, torch)
        if callable(grid):
            grid = grid(_launch_meta(kernel, args))
        where = f"Tile operator `{call.name}`" if call else f"kernel `{kernel.name}`"
        return launch(kernel, grid, args, where, stream=stream, block=block)


def _is_fake(t) -> bool:
    from torch._subclasses.fake_tensor import is_fake
    return t.device.type == "meta" or is_fake(t)


def _launch_meta(kernel, args) -> dict:
    meta = {p.name: p.default for p in kernel.info.const_params if p.default is not None}
    meta.update(kernel.consts)
    meta.update(zip((p.name for p in kernel.params), args))
    return meta


def _check_launch_writes(call: _Call, kernel, args, torch) -> None:
    if kernel.module.backend.name == "interp":
        return                                   # nothing compiled to read the writes from
    written = written_arrays(kernel)
    for p, a in zip(kernel.params, args):
        if p.name not in written or not isinstance(a, torch.Tensor):
            continue
        ptr = a.untyped_storage().data_ptr()
        for n, t in call.tensors:
            if n not in call.mutates and t.untyped_storage().data_ptr() == ptr and ptr:
                raise TileOpError(f"Tile operator `{call.name}`: kernel `{kernel.name}` "
                                  f"writes `{p.name}`, which is the memory of input `{n}`, "
                                  f"and mutates_args leaves `{n}` out; declare it")
