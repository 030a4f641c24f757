"""mbarrier objects in shared memory (sm_80+ arrive/wait barriers, used by pipelined kernels).

The object's encoding and the arithmetic of arrivals and transactions live in completion.py,
beside the copies that complete on it. A wait that is not yet complete parks the thread (the
executor re-runs the wait after the next phase completes), so spin loops on try_wait/test_wait
do not starve the threads that would arrive.
"""

from __future__ import annotations

import numpy as np

from .addressing import Address
from .completion import (arrive, barrier_fields, barrier_tx, barrier_word, complete,
                         expect_tx, land_on)
from .decode import op
from .ptx_ast import Sink
from .ptx_types import type_info
from .tmem import land_commits, pending_on

def _locate(st, addr, idx):
    from .access import locate
    groups = locate(st, addr.space, np.broadcast_to(np.asarray(addr.get(st), np.uint64),
                                                    (st.T,))[idx], idx, 8, 8)
    region, gidx, off, _ = groups[0]
    if len(groups) != 1 or region != "shared":
        from .errors import MemoryFault
        raise st.error(MemoryFault, "mbarrier objects must be in shared memory", idx[0])
    return st.shared_view(np.uint64), off // 8


def _check_quiet(st, view, elem, thread):
    """mbarrier.inval of an object no transaction is still due on: a bulk copy in flight
    towards it, or a tx-count other than zero (bytes announced that never came, or bytes
    completed that no expect_tx announced, e.g. a copy issued twice), would complete on
    whatever the memory holds next on a GPU."""
    from .errors import ExecutionError
    for p in st.tma_pending:
        if p.mbar == elem:
            raise st.error(ExecutionError, f"mbarrier.inval while the bulk copy at PTX line "
                           f"{p.line} is still to complete on it", thread)
    line = pending_on(st, elem)
    if line is not None:
        raise st.error(ExecutionError, f"mbarrier.inval while the tcgen05.commit at PTX line "
                       f"{line} is still to arrive on it", thread)
    tx = barrier_tx(view[elem])
    if tx > 0:
        raise st.error(ExecutionError, f"mbarrier.inval with {tx} transaction bytes announced "
                       f"by expect_tx that no copy completed", thread)
    if tx < 0:
        raise st.error(ExecutionError, f"mbarrier.inval with {-tx} transaction bytes completed "
                       f"that no expect_tx announced (a copy issued twice?)", thread)


@op("mbarrier")
def build_mbarrier(ctx, ins, parts):
    kind = parts[1]
    ops = ins.operands
    space = "shared_cluster" if "shared::cluster" in parts else "shared"
    u32, b64 = type_info("u32"), type_info("b64")
    if kind == "init":
        addr, gc = Address(ctx, ops[0], space), ctx.src(ops[1], u32)

        def run(st, m):
            idx = st.active_index(m)
            view, elem = _locate(st, addr, idx)
            c = np.broadcast_to(np.asarray(gc(st), np.int64), (st.T,))[idx]
            view[elem] = barrier_word(c, c, 0)
        return run
    if kind == "inval":
        addr = Address(ctx, ops[0], space)

        def run(st, m):
            idx = st.active_index(m)
            view, elem = _locate(st, addr, idx)
            for t, e in zip(idx, elem):
                _check_quiet(st, view, int(e), int(t))
            view[elem] = 0
        return run
    if kind == "expect_tx":
        addr = Address(ctx, ops[0], space)
        gb = ctx.src(ops[1], u32)

        def run(st, m):
            idx = st.active_index(m)
            view, elem = _locate(st, addr, idx)
            nb = np.broadcast_to(np.asarray(gb(st), np.int64), (st.T,))[idx]
            expect_tx(st, view, elem, nb, idx)
        return run
    if kind in ("arrive", "arrive_drop"):
        with_tx = "expect_tx" in parts
        put = None if isinstance(ops[0], Sink) else ctx.dst(ops[0], b64)
        addr = Address(ctx, ops[1], space)
        gc = gtx = None
        if with_tx:                 # arrive.expect_tx state, [addr], tx_count
            if len(ops) != 3:
                ctx.error(f"{ins.opcode} takes state, [addr], tx-count")
            gtx = ctx.src(ops[2], u32)
        elif len(ops) > 2:
            gc = ctx.src(ops[2], u32)
        drop = kind == "arrive_drop"

        def run(st, m):
            idx = st.active_index(m)
            view, elem = _locate(st, addr, idx)
            counts = np.ones(idx.size, np.int64) if gc is None else \
                np.broadcast_to(np.asarray(gc(st), np.int64), (st.T,))[idx]
            txb = None if gtx is None else \
                np.broadcast_to(np.asarray(gtx(st), np.int64), (st.T,))[idx]
            if st.races is not None:            # a release into the mbarrier
                st.races.mbar_arrive(st, idx, elem)
            tokens, flipped = arrive(st, view, elem, counts, drop, txb, idx)
            st.mbar_flipped |= flipped
            if put is not None:
                full = np.zeros(st.T, np.uint64)
                full[idx] = tokens.astype(np.uint64) << np.uint64(63)
                put(st, full, m)
        return {"run": run, "sync": "mbar_arrive"}
    if kind in ("test_wait", "try_wait"):
        parity = "parity" in parts
        pred = ctx.dst(ops[0], type_info("pred"))
        addr = Address(ctx, ops[1], space)
        gs = ctx.src(ops[2], u32 if parity else b64)

        def complete(st, sel):
            idx = np.flatnonzero(sel)
            view, elem = _locate(st, addr, idx)
            if st.tma_pending:                 # bulk copies land when their barrier is polled
                land_on(st, np.unique(elem))
            if st.tc_commits:                  # so do tcgen05 operations and their commits
                land_commits(st, np.unique(elem))
            _, _, phase = barrier_fields(view[elem])
            want = np.broadcast_to(np.asarray(gs(st)), (st.T,))[idx]
            want = (want & 1).astype(np.int64) if parity else \
                (np.asarray(want, np.uint64) >> np.uint64(63)).astype(np.int64)
            ok = np.zeros(st.T, bool)
            ok[idx] = phase != want            # the awaited phase has completed
            if st.races is not None:           # an acquire of what the phase published
                seen = phase != want
                st.races.mbar_observed(st, idx[seen], elem[seen])
            return ok

        return {"run": lambda st, m: pred(st, np.bool_(True), m), "sync": "mbar_wait",
                "extra": (complete, lambda st, m: pred(st, np.bool_(False), m))}
    ctx.error(f"{ins.opcode} is not supported")


def build_cp_async_arrive(ctx, ins, parts):
    """cp.async.mbarrier.arrive[.noinc]: the thread's copies land now, then the arrive happens;
    without .noinc the pending count was raised by one first (net effect: none)."""
    if "noinc" not in parts:
        return lambda st, m: complete(st, st.active_index(m))
    addr = Address(ctx, ins.operands[0], "shared")

    def run(st, m):
        idx = st.active_index(m)
        complete(st, idx)
        view, elem = _locate(st, addr, idx)
        if st.races is not None:
            st.races.mbar_arrive(st, idx, elem)
        _, flipped = arrive(st, view, elem, np.ones(idx.size, np.int64))
        st.mbar_flipped |= flipped
    return {"run": run, "sync": "mbar_arrive"}
