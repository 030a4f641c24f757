"""Shape ops. Most move no data: in a one-hot layout (layouts/distributed.py) `reshape`, `permute`,
`transpose` and `expand_dims` relabel coordinate bits, `cat` appends the second tile's
registers under a new register bit, and `extract` picks registers when the sub-tile's high
coordinate bits are register bits. `broadcast_to` renames registers into the target's default
layout; `extract` whose sub-tile spans other threads, and broadcasts that need elements of
other threads, go through shared memory (emit.sync.gather_elements)."""

from __future__ import annotations

from tilelang.codegen.layouts import distributed as L
from tilelang.codegen.emit.kernel import KernelEmitter, TileVal
from tilelang.codegen.emit.sync import broadcast, convert, gather_elements
from tilelang.codegen.lower.rearrange import cat_unequal
from tilelang.codegen.lower.table import lowers
from tilelang.ir.ops import BuiltinOp
from tilelang.sema.constants import ConstValue


def _x(kern: KernelEmitter, op: BuiltinOp) -> TileVal:
    a = op.arg_map["x"]
    if isinstance(a, ConstValue):
        # a loose constant given where a tile goes (`expand_dims(64, 0)`): the checker typed
        # it as a rank-0 tile of the result's dtype; make that tile here
        return kern.splat(a.value, op.result.type.dtype, kern.scalar_layout)
    return kern.tile(a)


@lowers("reshape")
def reshape(kern: KernelEmitter, op: BuiltinOp) -> TileVal:
    x = _x(kern, op)
    shape = tuple(op.result.type.shape)
    return TileVal(x.dtype, L.reshape(x.layout, shape), x.regs)


@lowers("permute")
def permute(kern: KernelEmitter, op: BuiltinOp) -> TileVal:
    x = _x(kern, op)
    dims = tuple(d % x.layout.rank for d in kern.const_ints(op.arg_map["dims"]))
    return TileVal(x.dtype, L.permute(x.layout, dims), x.regs)


@lowers("transpose")
def transpose(kern: KernelEmitter, op: BuiltinOp) -> TileVal:
    x = _x(kern, op)
    rank = x.layout.rank
    a0 = kern.const_ints(op.arg_map["axis0"])[0] % rank if "axis0" in op.arg_map else rank - 2
    a1 = kern.const_ints(op.arg_map["axis1"])[0] % rank if "axis1" in op.arg_map else rank - 1
    dims = list(range(rank))
    dims[a0], dims[a1] = dims[a1], dims[a0]
    return TileVal(x.dtype, L.permute(x.layout, tuple(dims)), x.regs)


@lowers("expand_dims")
def expand_dims(kern: KernelEmitter, op: BuiltinOp) -> TileVal:
    x = _x(kern, op)
    axis = kern.const_ints(op.arg_map["axis"])[0] % (x.layout.rank + 1)
    return TileVal(x.dtype, L.expand_dims(x.layout, axis), x.regs)


@lowers("broadcast_to")
def broadcast_to(kern: KernelEmitter, op: BuiltinOp) -> TileVal:
    x = _x(kern, op)
    rt = op.result.type
    if tuple(rt.shape) == x.shape:
        return x
    lay = kern.layout_for(rt)
    return TileVal(x.dtype, lay, broadcast(kern, x, lay))


@lowers("cat")
def cat(kern: KernelEmitter, op: BuiltinOp) -> TileVal:
    a, b = kern.tile(op.arg_map["a"]), kern.tile(op.arg_map["b"])
    rank = a.layout.rank
    axis = kern.const_ints(op.arg_map["axis"])[0] % rank if "axis" in op.arg_map else 0
    if a.shape != b.shape:                      # unequal extents (lower/rearrange.py)
        return cat_unequal(kern, op, axis)
    b = convert(kern, b, a.layout)
    la = a.layout
    shape = list(la.shape)
    top = L._unit(rank, axis, shape[axis])
    shape[axis] *= 2
    lay = L.Layout(tuple(shape), la.reg + (top,), la.lane, la.warp)
    return TileVal(a.dtype, lay, a.regs + b.regs)


@lowers("extract")
def extract(kern: KernelEmitter, op: BuiltinOp) -> TileVal:
    return sub_tile(kern, _x(kern, op), kern.const_ints(op.arg_map["index"]),
                    kern.const_ints(op.arg_map["shape"]))


def sub_tile(kern: KernelEmitter, x: TileVal, index: tuple[int, ...],
             shape: tuple[int, ...]) -> TileVal:
    """The `index`-th sub-tile of `shape` of x (`extract`; also topk's first k)."""
    lay = x.layout
    offset = tuple(i * s for i, s in zip(index, shape))

    def high(basis) -> bool:
        return any(c >= s for c, s in zip(basis, shape))

    if not any(high(bs) for bs in lay.lane + lay.warp):
        # Free: keep the low register bits; the high ones are fixed by `offset`.
        keep = [i for i, bs in enumerate(lay.reg) if not high(bs)]
        fixed = 0
        for i, bs in enumerate(lay.reg):
            if high(bs) and any(o & c for o, c in zip(offset, bs)):
                fixed |= 1 << i
        regs = []
        for r in range(1 << len(keep)):
            src = fixed | sum(1 << keep[k] for k in range(len(keep)) if r >> k & 1)
            regs.append(x.regs[src])
        out = L.Layout(tuple(shape), tuple(lay.reg[i] for i in keep), lay.lane, lay.warp)
        return TileVal(x.dtype, out, tuple(regs))
    out = kern.layout_for_shape(tuple(shape), x.dtype)
    base = lay.linear(offset)
    thread_w = tuple(lay.linear(bs) for bs in out.thread_bases)
    reg_lin = [base + lay.linear(out.reg_coord(r)) for r in range(out.num_regs)]
    return TileVal(x.dtype, out, gather_elements(kern, x, thread_w, reg_lin))
