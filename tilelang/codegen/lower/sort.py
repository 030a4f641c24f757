"""`sort`, `argsort` and `topk` along an axis: a bitonic network (docs/codegen.md, "Sorting").

Each element travels with its index along the axis, and the network sorts (key, index) pairs
in one strict total order (builtins_sort.py: keys ascending or descending, NaN the largest,
equal keys by ascending index), so the result is the stable sort whatever the network's
shape. Stage (k, j) of the network compares the elements whose positions differ in bit j and
orders each pair ascending or descending by bit k of the position. The tile is held in a layout
whose bases along the axis are single axis bits (`sortable`; otherwise it is converted to
`sort_layout`: the low axis bits in registers, the next five in lanes, the other axes over the
remaining lanes and the warps, and an axis of more than 32 × 32 elements also over warps): a
register bit is a compare-exchange between two registers of one thread, a lane bit a
`shfl.sync.bfly` exchange after which each of the two threads keeps its half, a warp bit the
same exchange through shared memory between barriers (`_Exchange`). So a row of up to 1024
elements is sorted by one warp without shared memory, and the warps sort other rows.
`topk` is the descending sort's first `k` along the axis (`shape.sub_tile`).
"""

from __future__ import annotations

from math import prod

import llvmlite.ir as ir

from tilelang.codegen.layouts.distributed import Layout, log2, thread_bits
from tilelang.codegen.emit.kernel import I32, KernelEmitter, TileVal
from tilelang.codegen.emit.sync import convert, shuffle_xor, storage_bytes
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
    wa = min(nw, max(0, a - la - MAX_AXIS_REG_BITS))    # a long axis spills into the warps
    ra = a - la - wa
    axis_bits = [unit(axis, i) for i in range(a)]
    reg_axis, lane_axis, warp_axis = axis_bits[:ra], axis_bits[ra:ra + la], axis_bits[ra + la:]
    other = [unit(d, i) for d in range(rank - 1, -1, -1) if d != axis
             for i in range(log2(shape[d]))]
    nlo, nwo = nl - la, nw - wa          # thread bits left for the other axes
    slots = other + [zero] * max(0, nlo + nwo - len(other))
    lane = lane_axis + slots[:nlo]
    warp = warp_axis + slots[nlo:nlo + nwo]
    rest = [bs for bs in slots[nlo + nwo:] if any(bs)]
    return Layout(tuple(shape), tuple(reg_axis + rest), tuple(lane), tuple(warp))


# Axis bits a thread holds in registers before `sort_layout` gives the warps the rest (32
# registers of keys and 32 of indices).
MAX_AXIS_REG_BITS = 5


def sortable(L: Layout, axis: int) -> bool:
    """Each basis along the axis (register, lane or warp) is one axis bit and nothing else."""
    for bs in L.reg + L.lane + L.warp:
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
    exchange = _Exchange(kern, L, cmp_dt)

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
                hi = bit(0, t)
                if t in lane_of:
                    mask = 1 << lane_of[t]

                    def partner(r, mask=mask):
                        return shuffle_xor(kern, keys[r], mask), shuffle_xor(kern, idx[r], mask)
                else:
                    partner = exchange.partners(keys, idx, L.linear(
                        tuple(1 << t if d == axis else 0 for d in range(L.rank))))
                for r in range(L.num_regs):
                    ok, oi = partner(r)
                    take = xor(xor(before(ok, oi, keys[r], idx[r]), hi), down(r))
                    keys[r] = b.select(take, ok, keys[r])
                    idx[r] = b.select(take, oi, idx[r])
    vals = [k if x.dtype == cmp_dt else se.cast(k, cmp_dt, x.dtype) for k in keys]
    return L, vals, idx


class _Exchange:
    """A stage along a warp bit: every thread writes its keys and indices to shared memory at
    their elements' row-major offsets, and reads its partners' (offset XOR the bit's weight),
    between barriers."""

    def __init__(self, kern: KernelEmitter, L: Layout, dt: DType):
        self.kern, self.L, self.dt = kern, L, dt
        self.base: ir.Value | None = None

    def partners(self, keys: list, idx: list, weight: int):
        """After the writes: a function giving register r's partner (key, index)."""
        kern, L, dt, b = self.kern, self.L, self.dt, self.kern.builder
        n = prod(L.shape)
        kbytes = n * storage_bytes(kern, dt)
        pk = kern.smem(kbytes, kern.storage_type(dt))
        pi = kern.smem(n * 4, I32, -(-kbytes // 16) * 16)
        kern.stats.exchanges += 1
        if self.base is None:
            self.base = kern.thread_linear(L.thread_weights())
        at = [b.add(self.base, ir.Constant(I32, L.reg_linear(r))) for r in range(L.num_regs)]
        kern.barrier()                  # the buffer's previous readers are done
        for r, a in enumerate(at):
            b.store(kern.to_storage(keys[r], dt), b.gep(pk, [a]))
            b.store(idx[r], b.gep(pi, [a]))
        kern.barrier()

        def partner(r: int):
            p = b.xor(at[r], ir.Constant(I32, weight))
            return kern.from_storage(b.load(b.gep(pk, [p])), dt), b.load(b.gep(pi, [p]))
        return partner


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
