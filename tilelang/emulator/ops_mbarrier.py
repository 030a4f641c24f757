"""mbarrier objects in shared memory (sm_80+ arrive/wait barriers, used by pipelined kernels).

The 64-bit object keeps, as the emulator encodes it: pending arrivals (bits 0-20), the expected
count (bits 21-41) and the current phase parity (bit 63). A wait that is not yet complete parks
the thread (the executor re-runs the wait after the next phase completes), so spin loops on
try_wait/test_wait do not starve the threads that would arrive.
"""

from __future__ import annotations

import numpy as np

from .decode import op
from .ops_mem import _Addr
from .ptx_ast import Sink
from .ptx_types import type_info

_CNT = np.uint64((1 << 21) - 1)
_PHASE = np.uint64(1 << 63)


def _fields(word):
    w = np.asarray(word, np.uint64)
    return (w & _CNT).astype(np.int64), ((w >> np.uint64(21)) & _CNT).astype(np.int64), \
        (w >> np.uint64(63)).astype(np.int64)


def _word(pending, expected, phase):
    return (np.asarray(pending, np.uint64) & _CNT) | \
        ((np.asarray(expected, np.uint64) & _CNT) << np.uint64(21)) | \
        (np.asarray(phase, np.uint64) << np.uint64(63))


def _locate(st, addr, idx):
    from .access import locate
    groups = locate(st, addr.space, np.broadcast_to(np.asarray(addr.get(st), np.uint64),
                                                    (st.T,))[idx], idx, 8, 8)
    region, gidx, off, _ = groups[0]
    if len(groups) != 1 or region != "shared":
        from .errors import MemoryFault
        raise st.error(MemoryFault, "mbarrier objects must be in shared memory", idx[0])
    return st.shared_view(np.uint64), off // 8


def arrive(st, view, elem, counts, drop=False):
    """Arrivals in thread order; returns each thread's token (the phase it arrived in) and
    whether any phase completed."""
    tokens = np.zeros(elem.size, np.int64)
    flipped = False
    for e in np.unique(elem):
        sel = np.flatnonzero(elem == e)
        pending, expected, phase = (int(v) for v in _fields(view[e]))
        for k in sel:                          # per object: few arrivals, keep it exact
            tokens[k] = phase
            if drop:
                expected -= int(counts[k])
            pending -= int(counts[k])
            if pending <= 0:
                phase ^= 1
                pending = expected
                flipped = True
        view[e] = _word(pending, expected, phase)
    return tokens, flipped


@op("mbarrier")
def build_mbarrier(ctx, ins, parts):
    kind = parts[1]
    ops = ins.operands
    u32, b64 = type_info("u32"), type_info("b64")
    if kind == "init":
        addr, gc = _Addr(ctx, ops[0], "shared"), ctx.src(ops[1], u32)

        def run(st, m):
            idx = st.active_index(m)
            view, elem = _locate(st, addr, idx)
            c = np.broadcast_to(np.asarray(gc(st), np.int64), (st.T,))[idx]
            view[elem] = _word(c, c, 0)
        return run
    if kind == "inval":
        addr = _Addr(ctx, ops[0], "shared")

        def run(st, m):
            idx = st.active_index(m)
            view, elem = _locate(st, addr, idx)
            view[elem] = 0
        return run
    if kind in ("arrive", "arrive_drop"):
        if "expect_tx" in parts:
            ctx.error("mbarrier transaction counts (expect_tx) are not supported")
        put = None if isinstance(ops[0], Sink) else ctx.dst(ops[0], b64)
        addr = _Addr(ctx, ops[1], "shared")
        gc = ctx.src(ops[2], u32) if len(ops) > 2 else None
        drop = kind == "arrive_drop"

        def run(st, m):
            idx = st.active_index(m)
            view, elem = _locate(st, addr, idx)
            counts = np.ones(idx.size, np.int64) if gc is None else \
                np.broadcast_to(np.asarray(gc(st), np.int64), (st.T,))[idx]
            tokens, flipped = arrive(st, view, elem, counts, drop)
            st.mbar_flipped |= flipped
            if put is not None:
                full = np.zeros(st.T, np.uint64)
                full[idx] = tokens.astype(np.uint64) << np.uint64(63)
                put(st, full, m)
        return {"run": run, "sync": "mbar_arrive"}
    if kind in ("test_wait", "try_wait"):
        parity = "parity" in parts
        pred = ctx.dst(ops[0], type_info("pred"))
        addr = _Addr(ctx, ops[1], "shared")
        gs = ctx.src(ops[2], u32 if parity else b64)

        def complete(st, sel):
            idx = np.flatnonzero(sel)
            view, elem = _locate(st, addr, idx)
            _, _, phase = _fields(view[elem])
            want = np.broadcast_to(np.asarray(gs(st)), (st.T,))[idx]
            want = (want & 1).astype(np.int64) if parity else \
                (np.asarray(want, np.uint64) >> np.uint64(63)).astype(np.int64)
            ok = np.zeros(st.T, bool)
            ok[idx] = phase != want            # the awaited phase has completed
            return ok

        return {"run": lambda st, m: pred(st, np.bool_(True), m), "sync": "mbar_wait",
                "extra": (complete, lambda st, m: pred(st, np.bool_(False), m))}
    ctx.error(f"{ins.opcode} is not supported")


def build_cp_async_arrive(ctx, ins, parts):
    """cp.async.mbarrier.arrive[.noinc]: the thread's copies land now, then the arrive happens;
    without .noinc the pending count was raised by one first (net effect: none)."""
    from .ops_async import complete
    if "noinc" not in parts:
        return lambda st, m: complete(st, st.active_index(m))
    addr = _Addr(ctx, ins.operands[0], "shared")

    def run(st, m):
        idx = st.active_index(m)
        complete(st, idx)
        view, elem = _locate(st, addr, idx)
        _, flipped = arrive(st, view, elem, np.ones(idx.size, np.int64))
        st.mbar_flipped |= flipped
    return {"run": run, "sync": "mbar_arrive"}
