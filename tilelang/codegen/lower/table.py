"""The lowering table: op name (or registry group) -> emitter function.

An op family is one module of `lower/` (the tensor-core ones in `lower/tensorcore/`) whose
functions are registered with `@lowers(...)` (by BuiltinOp name) or `@lowers_group(...)` (a
registry group, used when no name matches). generate.py imports every family once, but the
matrix products' (lower/tensorcore/matmul.py, which pulls in the tensor-core modules: ~16 ms of
CPU to import) only when a kernel has one: the dispatch (walk.py's `lowering_of`) imports it
on the first of `PRODUCTS`. An emitter is called as `fn(kern, op)` with the `KernelEmitter`
(emit/kernel.py) and the `BuiltinOp`, and returns the result `TileVal` (None for void ops). An
op with no entry is reported as unsupported (E0780) instead of a traceback.
"""

from __future__ import annotations

from typing import Callable

LOWERINGS: dict[str, Callable] = {}
GROUP_LOWERINGS: dict[str, Callable] = {}
PRODUCTS = ("mma", "matmul", "@", "mma_scaled")   # the matrix products: lower/tensorcore/
#                                                   matmul.py


def lowers(*names: str):
    def deco(fn):
        for n in names:
            LOWERINGS[n] = fn
        return fn
    return deco


def lowers_group(*groups: str):
    def deco(fn):
        for g in groups:
            GROUP_LOWERINGS[g] = fn
        return fn
    return deco


def lookup(name: str, group: str) -> Callable | None:
    return LOWERINGS.get(name) or GROUP_LOWERINGS.get(group)
