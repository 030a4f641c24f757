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
from typing import Callable, Sequence

import llvmlite.ir as ir

from tilelang.codegen.layouts.distributed import Layout, linear_index, log2, thread_bits
from tilelang.codegen.emit.kernel import I32, KernelEmitter, TileVal
from tilelang.codegen.emit.sync import convert, storage_bytes
from tilelang.codegen.lower.table import lowers
from tilelang.codegen.emit.warp import shuffle_down, shuffle_up
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
    L = scan_target(kern, x.layout, tuple(x.shape), axis)
    x = convert(kern, x, L)
    acc_dt = _acc_dtype(x.dtype, rt.dtype)
    se = kern.se
    vals = [[r if x.dtype == acc_dt else se.cast(r, x.dtype, acc_dt)] for r in x.regs]

    def comb(p, q):      # p: the earlier elements, q: the later ones
        return [se.combine(kind, p[0], q[0], acc_dt)]

    out = scan_states(kern, L, vals, [acc_dt], axis, comb, [_identity(kern, kind, acc_dt)])
    return _finish(kern, rt, L, [s[0] for s in out], acc_dt)


def scan_target(kern: KernelEmitter, L: Layout, shape: tuple[int, ...], axis: int) -> Layout:
    """The layout the scan works in (module docstring); exact mode when threads share rows."""
    L = L if scan_friendly(L, axis) else scan_layout(shape, axis, kern.threads)
    if any(bs[axis] for bs in L.thread_bases):
        kern.require_exact()
    return L


def scan_states(kern: KernelEmitter, L: Layout, vals: list, dtypes: Sequence[DType], axis: int,
                comb: Callable, ident: list | None, reverse: bool = False) -> list:
    """The three levels over per-register states (lists of LLVM values of `dtypes`) of a tile
    in layout L (`scan_friendly`). `comb(p, q)` combines a state of lower indices `p` with one
    of higher indices `q`. With an identity state (cumsum's −0.0, cumprod's 1) a missing prefix
    is the identity; without one (a user's combine) each prefix carries a flag and a `select`
    keeps the element alone where nothing comes before it. `reverse` runs from the end: each
    output combines its element with those after it (`shfl.sync.down`, warps after)."""
    b = kern.builder
    vals = list(vals)

    def sel(flag, p, q):
        return [b.select(flag, u, v) for u, v in zip(p, q)]

    def later(acc, cur):       # acc already covers the indices on the scan's near side
        return comb(cur, acc) if reverse else comb(acc, cur)

    # 1. in-thread: each row's registers in scan order.
    rows = [r[::-1] if reverse else r for r in _rows(L, axis)]
    for regs in rows:
        for k in range(1, len(regs)):
            vals[regs[k]] = later(vals[regs[k - 1]], vals[regs[k]])
    if not any(bs[axis] for bs in L.thread_bases):
        return vals

    totals = [vals[regs[-1]] for regs in rows]
    lane_axis = [k for k, bs in enumerate(L.lane) if bs[axis]]
    warp_axis = [k for k, bs in enumerate(L.warp) if bs[axis]]

    # 2. in-warp: the axis lanes are lane bits 0..la-1 (scan_layout).
    la = len(lane_axis)
    assert lane_axis == list(range(la))
    seg = b.and_(kern.lane(), ir.Constant(I32, (1 << la) - 1))
    last_lane = (1 << la) - 1
    move = shuffle_down if reverse else shuffle_up
    incl = list(totals)
    d = 1
    while d < (1 << la):
        has = b.icmp_unsigned("<", seg, ir.Constant(I32, (1 << la) - d)) if reverse else \
            b.icmp_unsigned(">=", seg, ir.Constant(I32, d))
        incl = [sel(has, later([move(kern, c, d) for c in v], v), v) for v in incl]
        d *= 2
    first = b.icmp_unsigned("==", seg, ir.Constant(I32, last_lane if reverse else 0))
    if ident is not None:
        prefix = [sel(first, ident, [move(kern, c, 1) for c in v]) for v in incl]
        valid = None
    else:
        prefix, valid = [[move(kern, c, 1) for c in v] for v in incl], b.not_(first)

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
        n_slots = prod(other_shape) * nw
        ptrs, offset = [], 0
        for dt in dtypes:           # one buffer per state component, one after the other
            nbytes = n_slots * storage_bytes(kern, dt)
            ptrs.append(kern.smem(nbytes, kern.storage_type(dt), offset) if offset else
                        kern.smem(nbytes, kern.storage_type(dt)))
            offset += -(-nbytes // 8) * 8
            kern.stats.exchanges += 1
        rbase = kern.thread_linear(thread_row_w)
        widx = kern.thread_linear(tuple(widx_w))
        kern.barrier()
        # the lane that holds its warp's row total writes it
        last = b.icmp_unsigned("==", seg, ir.Constant(I32, 0 if reverse else last_lane))
        then = kern.fn.append_basic_block("scan.total")
        done = kern.fn.append_basic_block("scan.total.end")
        b.cbranch(last, then, done)
        b.position_at_end(then)
        for row in range(len(rows)):
            i = b.add(b.add(rbase, ir.Constant(I32, row_off[row])), widx)
            for c, (ptr, dt) in enumerate(zip(ptrs, dtypes)):
                v = incl[row][c]
                b.store(v if ident is not None else kern.to_storage(v, dt), b.gep(ptr, [i]))
        b.branch(done)
        b.position_at_end(done)
        kern.barrier()
        order = range(nw - 1, 0, -1) if reverse else range(nw - 1)
        for row in range(len(rows)):
            base = b.add(rbase, ir.Constant(I32, row_off[row]))

            def load(w):
                vs = [b.load(b.gep(ptr, [b.add(base, ir.Constant(I32, w))])) for ptr in ptrs]
                return vs if ident is not None else \
                    [kern.from_storage(v, dt) for v, dt in zip(vs, dtypes)]

            def before(w):
                return b.icmp_unsigned(">" if reverse else "<", ir.Constant(I32, w), widx)

            def step(wp, w):
                v = load(w)
                return sel(before(w), later(wp, v), wp)

            if ident is not None:
                wp = ident
                for w in order:
                    wp = step(wp, w)
                prefix[row] = later(wp, prefix[row])
                continue
            ws = list(order)
            wp = load(ws[0])
            wv = before(ws[0])
            for w in ws[1:]:
                wp = step(wp, w)
            lp = prefix[row]
            prefix[row] = sel(wv, sel(valid, later(wp, lp), wp), lp)
        if valid is not None:
            valid = b.or_(valid, before_any(b, widx, reverse, nw))

    for row, regs in enumerate(rows):
        for r in regs:
            got = later(prefix[row], vals[r])
            vals[r] = got if valid is None else sel(valid, got, vals[r])
    return vals


def before_any(b, widx, reverse: bool, nw: int):
    """Whether any warp comes before this one in scan order."""
    if reverse:
        return b.icmp_unsigned("<", widx, ir.Constant(I32, nw - 1))
    return b.icmp_unsigned(">", widx, ir.Constant(I32, 0))


def _finish(kern: KernelEmitter, rt, L: Layout, vals, acc_dt: DType) -> TileVal:
    if acc_dt != rt.dtype:
        vals = [kern.se.cast(v, acc_dt, rt.dtype) for v in vals]
    return TileVal(rt.dtype, L, tuple(vals))
