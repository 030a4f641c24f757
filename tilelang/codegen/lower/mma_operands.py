"""Operands of tensor-core products that go from global to shared memory without registers.

A `load` whose only use is as operand `a` or `b` of a matrix product in the same region, with
nothing but other loads and pure scalar ops in between (so no store can intervene) and zero
padding, is *deferred*: emit_region binds its result to a `DeferredLoad` instead of loading it
into registers. The product then copies the tile with 16-byte `cp.async` straight into its
swizzled shared-memory image (zero-filling what lies outside the array through the
instruction's src-size), or loads it the ordinary way when it cannot (a product that takes the
FMA path, an array without the 16-byte facts, an 8/32-bit operand whose contiguous axis is not
K). Keeping the tile out of registers is what lets a 128 x 128 f32 accumulator live in 168
registers without spills.
"""

from __future__ import annotations

from dataclasses import dataclass

import llvmlite.ir as ir

from tilelang.codegen.llvm.kernel import I32, KernelEmitter, TileVal
from tilelang.codegen.lower.memory import tile_indexed, vectorizable
from tilelang.codegen.lower.table import lookup
from tilelang.ir.ops import Block, BuiltinOp, ConstantOp, walk
from tilelang.ir.values import Value
from tilelang.sema.constants import ConstValue
from tilelang.sema.types import TileType

PRODUCTS = ("mma", "matmul", "@")
PURE_GROUPS = ("math", "dtype", "grid", "operator")
PURE_MEMORY = ("num_tiles", "dim", "stride")


@dataclass(frozen=True)
class DeferredLoad:
    """A `load` not emitted yet (see the module docstring)."""

    op: BuiltinOp


def is_pure_scalar(op) -> bool:
    """A constant or a side-effect-free op with a 0-d result."""
    if isinstance(op, ConstantOp):
        return True
    if not isinstance(op, BuiltinOp) or op.result is None:
        return False
    t = op.result.type
    if not isinstance(t, TileType) or t.shape:
        return False
    return op.builtin.group in PURE_GROUPS or op.name in PURE_MEMORY


def use_counts(kern: KernelEmitter) -> dict[int, int]:
    """How many times each value is used in the kernel (cached per emission)."""
    got = kern._cache.get("mma.uses")
    if got is None:
        got = {}
        for op in walk(kern.kernel.body):
            for v in op.operands:
                got[v.id] = got.get(v.id, 0) + 1
        kern._cache["mma.uses"] = got
    return got


def _zero_padding(op: BuiltinOp) -> bool:
    p = op.arg_map.get("padding")
    if not tile_indexed(op):
        return False        # a masked or offset load stays a plain load
    return p is None or (isinstance(p, ConstValue) and p.value == 0)


def deferrable(kern: KernelEmitter, block: Block) -> set[int]:
    """Result ids of the loads in `block` that may be deferred."""
    uses = use_counts(kern)
    out: set[int] = set()
    ops = block.ops
    pos = {op.result.id: i for i, op in enumerate(ops)
           if isinstance(op, BuiltinOp) and op.name == "load" and op.result is not None}
    for p, op in enumerate(ops):
        if not (isinstance(op, BuiltinOp) and op.name in PRODUCTS):
            continue
        args = op.arg_map
        for key in ("a", "b"):
            v = args.get(key)
            if not isinstance(v, Value) or v.id not in pos or uses.get(v.id) != 1:
                continue
            q = pos[v.id]
            if not _zero_padding(ops[q]):
                continue
            between = ops[q + 1:p]
            if all((isinstance(o, BuiltinOp) and o.name == "load") or is_pure_scalar(o)
                   for o in between):
                out.add(v.id)
    return out


def materialize(kern: KernelEmitter, v) -> TileVal:
    """The operand as registers: a deferred load is emitted here."""
    if isinstance(v, DeferredLoad):
        t = lookup("load", "memory")(kern, v.op)
        kern.env[v.op.result.id] = t
        return t
    return v


def async_axis(kern: KernelEmitter, d: DeferredLoad, k_axis: int, itemsize: int) -> int | None:
    """The tile axis that is contiguous in memory if `d` can be copied with 16-byte
    cp.async into a smem image with that axis as rows, else None."""
    args = d.op.arg_map
    arr = kern.array(args["A"])
    rank = arr.rank
    order = kern.const_ints(args["order"]) if "order" in args else None
    axes = order if order is not None else tuple(range(rank))
    if not vectorizable(arr, axes) or kern.threads < 1:
        return None
    cax = axes.index(rank - 1)
    if cax not in (rank - 1, rank - 2):
        return None
    if itemsize != 2 and cax != k_axis:
        return None
    shape = tuple(d.op.result.type.shape)
    if shape[cax] * itemsize < 32:
        return None
    return cax


def commit_group(kern: KernelEmitter) -> None:
    fn = kern.se.declare("llvm.nvvm.cp.async.commit.group", ir.VoidType(), [])
    kern.builder.call(fn, [])


def wait_group(kern: KernelEmitter, n: int) -> None:
    fn = kern.se.declare("llvm.nvvm.cp.async.wait.group", ir.VoidType(), [I32])
    kern.builder.call(fn, [ir.Constant(I32, n)])
