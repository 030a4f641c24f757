"""`sort`, `argsort` and `topk` along an axis: a bitonic network (docs/codegen.md, "Sorting").

Each element travels with its index along the axis, and the network sorts (key, index) pairs
in one strict total order (builtins_sort.py: keys ascending or descending, NaN the largest,
equal keys by ascending index), so the result is the stable sort whatever the network's
shape. Stage (k, j) of the network compares the elements whose positions differ in bit j and
orders each pair ascending or descending by bit k of the position. The tile is held in a layout
whose axis bits are register and lane bits only (`sortable`; otherwise it is converted to
`sort_layout`: the low axis bits in registers, the next five in lanes, the other axes over the
remaining lanes and the warps): a register bit is a compare-exchange between two registers of
one thread, a lane bit a `shfl.sync.bfly` exchange after which each of the two threads keeps
its half. So a row is sorted by one warp without shared memory, and the warps sort other rows.
`topk` is the descending sort's first `k` along the axis (`shape.sub_tile`).
"""

from __future__ import annotations

import llvmlite.ir as ir

from tilelang.codegen.layouts.distributed import Layout, log2, thread_bits
from tilelang.codegen.emit.kernel import I32, KernelEmitter, TileVal
from tilelang.codegen.emit.sync import convert, shuffle_xor
from tilelang.codegen.lower.combine import computed_once
from tilelang.codegen.lower.shape import sub_tile
from tilelang.codegen.lower.table import lowers
from tilelang.ir.ops import BuiltinOp
from tilelang.sema.types import F32, I32 as T_I32, DType


def sort_layout(shape: tuple[int, ...], axis: int, threads: int) -> Layout:
    """The layout described in the module docstring."""
    rank = len(shape)

    def unit(d: int, bit: int) -> tuple[int, ...]:
        return tuple(1 << bit if k == d else 0 for k in range(rank))

    zero = (0,) * rank
    a = log2(shape[axis])
    nl, nw = thread_bits(threads)
    la = min(a, nl)
    axis_bits = [unit(axis, i) for i in range(a)]
    reg_axis, lane_axis = axis_bits[:a - la], axis_bits[a - la:]
    other = [unit(d, i) for d in range(rank - 1, -1, -1) if d != axis
             for i in range(log2(shape[d]))]
    slots = other + [zero] * max(0, nl - la + nw - len(other))
    lane = lane_axis + slots[:nl - la]
    warp = slots[nl - la:nl - la + nw]
    rest = [bs for bs in slots[nl - la + nw:] if any(bs)]
    return Layout(tuple(shape), tuple(reg_axis + rest), tuple(lane), tuple(warp))


def sortable(L: Layout, axis: int) -> bool:
    """No warp bit along the axis, and each register or lane basis along it one axis bit."""
    if any(bs[axis] for bs in L.warp):
        return False
    for bs in L.reg + L.lane:
        c = bs[axis]
        if c and (c & (c - 1) or any(v for d, v in enumerate(bs) if d != axis)):
            return False
    return True


def sort_pairs(kern: KernelEmitter, x: TileVal, axis: int, descending: bool):
    """(layout, sorted keys in x's dtype, their i32 indices), per register."""
    L = x.layout if sortable(x.layout, axis) else sort_layout(tuple(x.shape), axis,
                                                               kern.threads)
    x = convert(kern, x, L)
    se, b = kern.se, kern.builder
    cmp_dt = F32 if x.dtype.is_float and x.dtype.bits < 32 else x.dtype
    keys = [r if x.dtype == cmp_dt else se.cast(r, x.dtype, cmp_dt) for r in x.regs]
    tbase = kern.thread_linear(tuple(bs[axis] for bs in L.thread_bases))
    pos = [L.reg_coord(r)[axis] for r in range(L.num_regs)]
    idx = [b.add(tbase, ir.Constant(I32, p)) for p in pos]
    reg_of = {log2(bs[axis]): i for i, bs in enumerate(L.reg) if bs[axis]}
    lane_of = {log2(bs[axis]): i for i, bs in enumerate(L.lane) if bs[axis]}
    thread_bit: dict[int, ir.Value] = {}

    def bit(r: int, t: int):
        """Bit t of register r's position: a constant, or an i1 of this thread."""
        if t in reg_of:
            return bool(pos[r] >> t & 1)
        if t not in thread_bit:
            thread_bit[t] = b.icmp_unsigned("!=", b.and_(tbase, ir.Constant(I32, 1 << t)),
                                            ir.Constant(I32, 0))
        return thread_bit[t]

    def xor(c: ir.Value, flag) -> ir.Value:
        if flag is False:
            return c
        return b.not_(c) if flag is True else b.xor(c, flag)

    def before(ka, ia, kb, ib) -> ir.Value:
        """(ka, ia) comes strictly before (kb, ib) in the sort's order."""
        if cmp_dt.is_float:
            na, nb = se.isnan(ka), se.isnan(kb)
            if descending:
                first = b.or_(b.fcmp_ordered(">", ka, kb), b.and_(na, b.not_(nb)))
            else:
                first = b.or_(b.fcmp_ordered("<", ka, kb), b.and_(b.not_(na), nb))
            same = b.or_(b.fcmp_ordered("==", ka, kb), b.and_(na, nb))
        else:
            first = se.compare(">" if descending else "<", ka, kb, cmp_dt)
            same = se.compare("==", ka, kb, cmp_dt)
        return b.or_(first, b.and_(same, b.icmp_signed("<", ia, ib)))

    m = log2(x.shape[axis])
    for s in range(1, m + 1):
        for t in range(s - 1, -1, -1):
            def down(r):   # the pair's direction: descending where bit s of the position is 1
                return bit(r, s) if s < m else False
            if t in reg_of:
                rb = reg_of[t]
                for r in range(L.num_regs):
                    if r >> rb & 1:
                        continue
                    h = r | 1 << rb
                    swap = xor(before(keys[h], idx[h], keys[r], idx[r]), down(r))
                    keys[r], keys[h] = (b.select(swap, keys[h], keys[r]),
                                        b.select(swap, keys[r], keys[h]))
                    idx[r], idx[h] = (b.select(swap, idx[h], idx[r]),
                                      b.select(swap, idx[r], idx[h]))
            else:
                mask = 1 << lane_of[t]
                hi = bit(0, t)
                for r in range(L.num_regs):
                    ok, oi = shuffle_xor(kern, keys[r], mask), shuffle_xor(kern, idx[r], mask)
                    take = xor(xor(before(ok, oi, keys[r], idx[r]), hi), down(r))
                    keys[r] = b.select(take, ok, keys[r])
                    idx[r] = b.select(take, oi, idx[r])
    vals = [k if x.dtype == cmp_dt else se.cast(k, cmp_dt, x.dtype) for k in keys]
    return L, vals, idx


def _axis(kern: KernelEmitter, op: BuiltinOp, rank: int) -> int:
    a = op.arg_map.get("axis")
    return (kern.const_ints(a)[0] if a is not None else -1) % rank


def _flag(op: BuiltinOp, name: str) -> bool:
    a = op.arg_map.get(name)
    return bool(a.value) if a is not None else False


@lowers("sort", "argsort")
def sort(kern: KernelEmitter, op: BuiltinOp) -> TileVal:
    x = kern.tile(op.arg_map["x"])
    L, vals, idx = sort_pairs(kern, x, _axis(kern, op, len(x.shape)), _flag(op, "descending"))
    if op.name == "argsort":
        return TileVal(T_I32, L, tuple(idx))
    return TileVal(x.dtype, L, tuple(vals))


def _topk(kern: KernelEmitter, op: BuiltinOp, xs: list[TileVal]) -> list[TileVal]:
    x = xs[0]
    axis = _axis(kern, op, len(x.shape))
    k = kern.const_ints(op.arg_map["k"])[0]
    L, vals, idx = sort_pairs(kern, x, axis, True)
    shape = tuple(k if d == axis else n for d, n in enumerate(x.shape))
    index = (0,) * len(shape)
    dts: tuple[DType, DType] = (x.dtype, T_I32)
    return [sub_tile(kern, TileVal(dt, L, tuple(regs)), index, shape)
            for dt, regs in zip(dts, (vals, idx))]


@lowers("topk")
def topk(kern: KernelEmitter, op: BuiltinOp) -> TileVal:
    return computed_once(kern, op, _topk)
