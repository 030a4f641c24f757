"""Scans: `cumsum`, `cumprod` (inclusive, along one axis; builtins_reduce.py).

The scan works on a layout where each thread holds a contiguous run of every row it owns: the
axis's register bits are below its lane bits (the low lane bits), which are below its warp
bits. A tile already laid out so is scanned in place (`scan_friendly`, e.g. a row held in
registers); otherwise it is first converted to the *scan layout* (`scan_layout`): the thread
bits go to the other axes first (independent scans need no communication), what is left goes
to the scanned axis, lanes before warps, and the remaining axis bits are register bits. Then three levels, each only where the layout
needs it:
1. in-thread: a sequential running combine over each run (NumPy's order);
2. in-warp: the runs' totals are scanned over the axis's lane bits (Hillis-Steele with
   `shfl.sync.up`; the axis lanes are the low lane bits, so a row's lanes are one segment),
   and each thread takes the inclusive total of the lanes before it;
3. across warps: the last lane of each warp's segment writes its row total to shared memory,
   a barrier, and every thread combines the totals of the warps before it, in warp order.
Each output is prefix(warps) + prefix(lanes) + running value. The result keeps the scan layout
(consumers convert). Integer results wrap and are exact in any order; float results round
differently from NumPy's strictly sequential order (within normal float tolerance). bool, i8,
i16 widen to i32 and u8, u16 to u32; f16/bf16 accumulate in f32 and round each output once.
"""

from __future__ import annotations

from math import prod

import llvmlite.ir as ir

from tilelang.codegen.layouts.distributed import Layout, linear_index, log2, thread_bits
from tilelang.codegen.emit.kernel import I32, KernelEmitter, TileVal
from tilelang.codegen.emit.sync import convert, storage_bytes
from tilelang.codegen.lower.table import lowers
from tilelang.codegen.emit.warp import shuffle_up
from tilelang.ir.ops import BuiltinOp
from tilelang.sema.types import F32, F64, DType

KIND = {"cumsum": "sum", "cumprod": "prod"}


def scan_layout(shape: tuple[int, ...], axis: int, threads: int) -> Layout:
    """The layout described in the module docstring."""
    rank = len(shape)

    def unit(d: int, bit: int) -> tuple[int, ...]:
        return tuple(1 << bit if k == d else 0 for k in range(rank))

    zero = (0,) * rank
    a = log2(shape[axis])
    # Other axes' coordinate bits, fastest (last axis, low bit) first.
    other = [unit(d, i) for d in range(rank - 1, -1, -1) if d != axis
             for i in range(log2(shape[d]))]
    nl, nw = thread_bits(threads)
    t = nl + nw
    t_other = min(t, len(other))
    t_axis = min(a, t - t_other)
    la = min(t_axis, nl)
    wa = t_axis - la
    ra = a - t_axis
    axis_bits = [unit(axis, i) for i in range(a)]
    reg_axis, lane_axis, warp_axis = axis_bits[:ra], axis_bits[ra:ra + la], axis_bits[ra + la:]
    other_thread, other_reg = other[:t_other], other[t_other:]
    spare = [zero] * (t - t_other - t_axis)
    # Lanes: the axis's first, then other axes, then replicas; warps likewise.
    thread_slots = other_thread + spare
    lane = lane_axis + thread_slots[:nl - la]
    warp = warp_axis + thread_slots[nl - la:]
    assert len(lane) == nl and len(warp) == nw
    return Layout(tuple(shape), tuple(reg_axis + other_reg), tuple(lane), tuple(warp))


def _bit(basis, axis: int) -> int:
    return basis[axis].bit_length() - 1


def scan_friendly(L: Layout, axis: int) -> bool:
    """The levels below work on L as it is: the axis's register bits are below its lane bits,
    which are the low lane bits, below its warp bits, which are the low warp bits (and only
    once every lane is along the axis)."""
    reg = [_bit(bs, axis) for bs in L.reg if bs[axis]]
    lane = [(k, _bit(bs, axis)) for k, bs in enumerate(L.lane) if bs[axis]]
    warp = [(k, _bit(bs, axis)) for k, bs in enumerate(L.warp) if bs[axis]]
    if [k for k, _ in lane] != list(range(len(lane))):
        return False
    if warp and (len(lane) != len(L.lane) or [k for k, _ in warp] != list(range(len(warp)))):
        return False
    thread = [p for _, p in lane + warp]
    return thread == sorted(thread) and (not reg or not thread or max(reg) < min(thread))


def _rows(L: Layout, axis: int) -> list[list[int]]:
    """The registers of each row (same coordinates off the axis), in axis order."""
    along = [i for i, bs in enumerate(L.reg) if bs[axis]]
    other = [i for i, bs in enumerate(L.reg) if not bs[axis]]
    rows = []
    for ro in range(1 << len(other)):
        base = sum(1 << other[k] for k in range(len(other)) if ro >> k & 1)
        regs = [base + sum(1 << along[k] for k in range(len(along)) if j >> k & 1)
                for j in range(1 << len(along))]
        rows.append(sorted(regs, key=lambda r: L.reg_coord(r)[axis]))
    return rows


def _acc_dtype(x: DType, result: DType) -> DType:
    if x.is_float:
        return F64 if x.bits == 64 else F32
    return result


def _identity(kern: KernelEmitter, kind: str, dt: DType) -> ir.Value:
    if kind == "sum" and dt.is_float:
        return kern.se.constant(-0.0, dt)      # -0 + x == x for every x, signed zeros too
    return kern.se.constant(kern.se.identity(kind, dt), dt)


@lowers("cumsum", "cumprod")
def scan(kern: KernelEmitter, op: BuiltinOp) -> TileVal:
    x = kern.tile(op.arg_map["x"])
    rt = op.result.type
    kind = KIND[op.name]
    rank = len(x.shape)
    axis = kern.const_ints(op.arg_map["axis"])[0] % rank if "axis" in op.arg_map else 0
    L = x.layout if scan_friendly(x.layout, axis) else \
        scan_layout(tuple(x.shape), axis, kern.threads)
    n_axis_threads = sum(1 for bs in L.thread_bases if bs[axis])
    if n_axis_threads:
        kern.require_exact()
    x = convert(kern, x, L)
    acc_dt = _acc_dtype(x.dtype, rt.dtype)
    se, b = kern.se, kern.builder
    vals = [r if x.dtype == acc_dt else se.cast(r, x.dtype, acc_dt) for r in x.regs]

    def comb(p, q):      # p: the earlier elements, q: the later ones
        return se.combine(kind, p, q, acc_dt)

    # 1. in-thread: each row's registers in axis order.
    rows = _rows(L, axis)
    for regs in rows:
        for k in range(1, len(regs)):
            vals[regs[k]] = comb(vals[regs[k - 1]], vals[regs[k]])
    if not n_axis_threads:
        return _finish(kern, rt, L, vals, acc_dt)

    totals = [vals[regs[-1]] for regs in rows]
    lane_axis = [k for k, bs in enumerate(L.lane) if bs[axis]]
    warp_axis = [k for k, bs in enumerate(L.warp) if bs[axis]]
    ident = _identity(kern, kind, acc_dt)
    prefix = [ident] * len(rows)

    # 2. in-warp: the axis lanes are lane bits 0..la-1 (scan_layout).
    la = len(lane_axis)
    assert lane_axis == list(range(la))
    seg = b.and_(kern.lane(), ir.Constant(I32, (1 << la) - 1))
    incl = list(totals)
    d = 1
    while d < (1 << la):
        has = b.icmp_unsigned(">=", seg, ir.Constant(I32, d))
        incl = [b.select(has, comb(shuffle_up(kern, v, d), v), v) for v in incl]
        d *= 2
    first = b.icmp_unsigned("==", seg, ir.Constant(I32, 0))
    prefix = [b.select(first, ident, shuffle_up(kern, v, 1)) for v in incl]

    # 3. across warps: slot(row, w) = row-major index over (other axes..., warp bits).
    if warp_axis:
        wa = len(warp_axis)
        nw = 1 << wa
        other_shape = tuple(s for d_, s in enumerate(L.shape) if d_ != axis)

        def other_lin(bs) -> int:
            if bs[axis]:
                return 0
            return linear_index(other_shape, tuple(c for d_, c in enumerate(bs) if d_ != axis))

        thread_row_w = tuple(other_lin(bs) * nw for bs in L.thread_bases)
        nlane = len(L.lane)
        widx_w = [0] * len(L.thread_bases)
        for k, wb in enumerate(warp_axis):
            widx_w[nlane + wb] = 1 << k
        row_off = [other_lin(L.reg_coord(regs[0])) * nw for regs in rows]
        stype = kern.storage_type(acc_dt)
        n_slots = prod(other_shape) * nw
        ptr = kern.smem(n_slots * storage_bytes(kern, acc_dt), stype)
        kern.stats.exchanges += 1
        rbase = kern.thread_linear(thread_row_w)
        widx = kern.thread_linear(tuple(widx_w))
        kern.barrier()
        last = b.icmp_unsigned("==", seg, ir.Constant(I32, (1 << la) - 1))
        then = kern.fn.append_basic_block("scan.total")
        done = kern.fn.append_basic_block("scan.total.end")
        b.cbranch(last, then, done)
        b.position_at_end(then)
        for row in range(len(rows)):
            i = b.add(b.add(rbase, ir.Constant(I32, row_off[row])), widx)
            b.store(incl[row], b.gep(ptr, [i]))
        b.branch(done)
        b.position_at_end(done)
        kern.barrier()
        for row in range(len(rows)):
            wp = ident
            base = b.add(rbase, ir.Constant(I32, row_off[row]))
            for w in range(nw - 1):
                v = b.load(b.gep(ptr, [b.add(base, ir.Constant(I32, w))]))
                before = b.icmp_unsigned("<", ir.Constant(I32, w), widx)
                wp = b.select(before, comb(wp, v), wp)
            prefix[row] = comb(wp, prefix[row])

    for row, regs in enumerate(rows):
        for r in regs:
            vals[r] = comb(prefix[row], vals[r])
    return _finish(kern, rt, L, vals, acc_dt)


def _finish(kern: KernelEmitter, rt, L: Layout, vals, acc_dt: DType) -> TileVal:
    if acc_dt != rt.dtype:
        vals = [kern.se.cast(v, acc_dt, rt.dtype) for v in vals]
    return TileVal(rt.dtype, L, tuple(vals))
