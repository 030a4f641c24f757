"""The completion protocol of asynchronous copies: when their data lands, and the mbarrier
arithmetic that their completion drives.

Three instruction families issue work that finishes later — `cp.async` (ops_async), the bulk and
tensor copies of TMA (ops_bulk) and the mbarrier operations that wait for them (ops_mbarrier).
Each issue appends a record to the state (`cp_pending`, `tma_pending`, `bulk_pending`); the
records land here, as late as the PTX memory model allows (see docs/emulator.md, "cp.async
lands late" and "TMA lands late too"): cp.async copies at the issuing thread's wait or
mbarrier arrive, bulk loads when their mbarrier is polled, bulk stores at the covering
`wait_group`. The instruction modules import this one and never each other.

The mbarrier's 64-bit object, as the emulator encodes it: pending arrivals (bits 0-20), the
expected count (bits 21-41), the transaction count (bits 42-62, signed) and the current phase
parity (bit 63). A phase completes when both the pending arrivals and the tx-count reach zero;
the tx-count going below zero once every arrival is in is an error (tx-count underflow).
"""

from __future__ import annotations

import numpy as np

from .access import locate, region_view
from .errors import ExecutionError

_CNT = np.uint64((1 << 21) - 1)
_PHASE = np.uint64(1 << 63)
TX_LIMIT = (1 << 20) - 1           # the PTX ISA's tx-count range is +-(2^20 - 1)


def barrier_fields(word):
    w = np.asarray(word, np.uint64)
    return (w & _CNT).astype(np.int64), ((w >> np.uint64(21)) & _CNT).astype(np.int64), \
        (w >> np.uint64(63)).astype(np.int64)


def barrier_tx(word):
    t = int((int(word) >> 42) & ((1 << 21) - 1))
    return t - (1 << 21) if t >= 1 << 20 else t


def barrier_word(pending, expected, phase, tx=0):
    return (np.asarray(pending, np.uint64) & _CNT) | \
        ((np.asarray(expected, np.uint64) & _CNT) << np.uint64(21)) | \
        (np.uint64(int(tx) % (1 << 21)) << np.uint64(42)) | \
        (np.asarray(phase, np.uint64) << np.uint64(63))



def _settle(st, pending, expected, phase, tx, thread, what):
    """After arrivals or transactions: complete the phase when both counts reached zero."""
    if pending <= 0 and tx < 0:
        raise st.error(ExecutionError, f"mbarrier tx-count underflow: {-tx} bytes more were "
                       f"completed than expect_tx announced for the phase ({what})", thread)
    if pending <= 0 and tx == 0:
        return expected, phase ^ 1, 0, True
    return max(pending, 0), phase, tx, False


def arrive(st, view, elem, counts, drop=False, tx_bytes=None, threads=None):
    """Arrivals in thread order (each after adding its tx_bytes to the tx-count); returns each
    thread's token (the phase it arrived in) and whether any phase completed."""
    tokens = np.zeros(elem.size, np.int64)
    flipped = False
    for e in np.unique(elem):
        sel = np.flatnonzero(elem == e)
        pending, expected, phase = (int(v) for v in barrier_fields(view[e]))
        tx = barrier_tx(view[e])
        for k in sel:                          # per object: few arrivals, keep it exact
            tokens[k] = phase
            if tx_bytes is not None:
                tx += int(tx_bytes[k])
                _check_tx_range(st, tx, None if threads is None else threads[k])
            if drop:
                expected -= int(counts[k])
            pending -= int(counts[k])
            pending, phase, tx, done = _settle(st, pending, expected, phase, tx,
                                               None if threads is None else threads[k],
                                               "at an arrive")
            flipped |= done
            if done and st.races is not None:
                st.races.mbar_completed(st, int(e))
        view[e] = barrier_word(pending, expected, phase, tx)
    return tokens, flipped


def _check_tx_range(st, tx, thread):
    if abs(tx) > TX_LIMIT:
        raise st.error(ExecutionError, f"mbarrier tx-count {tx} is outside the range "
                       f"+-(2^20 - 1) the PTX ISA allows", thread)


def expect_tx(st, view, elem, nbytes, threads=None):
    for k, e in enumerate(elem):
        w = view[e]
        pending, expected, phase = (int(v) for v in barrier_fields(w))
        tx = barrier_tx(w) + int(nbytes[k])
        _check_tx_range(st, tx, None if threads is None else threads[k])
        view[e] = barrier_word(pending, expected, phase, tx)


def complete_tx(st, elem_abs, nbytes, thread, what):
    """A transaction of `nbytes` completing on the mbarrier at shared element `elem_abs`;
    returns whether the phase completed."""
    view = st.shared_view(np.uint64)
    w = view[elem_abs]
    pending, expected, phase = (int(v) for v in barrier_fields(w))
    tx = barrier_tx(w) - int(nbytes)
    _check_tx_range(st, tx, thread)
    pending, phase, tx, done = _settle(st, pending, expected, phase, tx, thread, what)
    view[elem_abs] = barrier_word(pending, expected, phase, tx)
    if done and st.races is not None:
        st.races.mbar_completed(st, int(elem_abs))
    return done



# -- cp.async -----------------------------------------------------------------------------------
class Pending:
    """The copies one cp.async instruction issued that have not landed yet."""
    __slots__ = ("idx", "group", "dst", "data")

    def __init__(self, idx, group, dst, data):
        self.idx, self.group, self.dst, self.data = idx, group, dst, data


def _land(st, pending: Pending, done):
    """Write the rows of `pending` selected by `done` into shared memory."""
    if not done.any():
        return
    n = pending.data.shape[1]
    if st.races is not None:
        st.races.access(st, pending.idx[done], pending.dst[done], n, True,
                        pending.data[done])
    offs = pending.dst[done, None] + np.arange(n)[None, :]
    st.shared[offs] = pending.data[done]
    if st.proxy is not None:                   # cp.async writes through the generic proxy
        st.proxy.wrote(st, pending.dst[done], n)


def due_test(st, idx, limit=None):
    """Which pending work a wait of threads `idx` completes, as a test of (threads, groups):
    every group of those threads (limit None), or the groups below each one's `limit` (the
    `wait_group N` forms). Shared by cp.async groups and wgmma groups."""
    sel = np.zeros(st.T, bool)
    sel[idx] = True
    if limit is None:
        return lambda threads, groups: sel[threads]
    lim = np.full(st.T, -1, np.int64)
    lim[idx] = limit
    return lambda threads, groups: sel[threads] & (groups < lim[threads])


def complete(st, idx, limit=None):
    """Land the pending copies of threads `idx`: all of them (limit None) or those whose
    group number is below the thread's `limit`."""
    if not st.cp_pending:
        return
    due = due_test(st, idx, limit)
    keep = []
    for p in st.cp_pending:
        done = due(p.idx, p.group)
        _land(st, p, done)
        if not done.all():
            left = ~done
            keep.append(Pending(p.idx[left], p.group[left], p.dst[left], p.data[left]))
    st.cp_pending = keep



# -- bulk copies (TMA) --------------------------------------------------------------------------
class TmaLoad:
    __slots__ = ("mbar", "dst", "data", "nbytes", "line", "thread", "seen")

    def __init__(self, mbar, dst, data, nbytes, line, thread, seen=None):
        self.mbar, self.dst, self.data, self.nbytes, self.line, self.thread = (
            mbar, dst, data, nbytes, line, thread)
        self.seen = seen            # the race check's view of the issuing warp (or None)


class BulkStore:
    __slots__ = ("thread", "group", "src", "gaddr", "line", "snap")

    def __init__(self, thread, group, src, gaddr, line, snap=None):
        self.thread, self.group, self.src, self.gaddr, self.line = (
            thread, group, src, gaddr, line)
        self.snap = snap            # the source bytes at issue (None: not checked)


def land_on(st, elems):
    """Land every pending bulk load completing on the mbarriers at shared elements `elems`."""
    keep = []
    want = set(int(e) for e in elems)
    for p in st.tma_pending:
        if p.mbar not in want:
            keep.append(p)
            continue
        if p.seen is not None:             # the bytes land now: a write again
            st.races.tma_write(st, p.seen, p.dst, p.mbar, p.thread, p.line)
        st.shared[p.dst] = p.data
        st.epoch += 1
        prev = st.ins
        try:
            st.mbar_flipped |= complete_tx(st, p.mbar, p.nbytes, p.thread,
                                           f"the bulk copy at PTX line {p.line}")
        finally:
            st.ins = prev
    st.tma_pending = keep


def finish_stores(st, idx=None, limit=None):
    """Do the pending bulk stores of threads `idx` (all threads: None) older than `limit`."""
    if not st.bulk_pending:
        return
    keep = []
    for p in st.bulk_pending:
        if idx is not None and (p.thread not in idx or
                                (limit is not None and p.group >= limit[p.thread])):
            keep.append(p)
            continue
        if st.races is not None and idx is not None:    # read until the wait covering it
            st.races.access(st, np.full(p.src.size, p.thread), p.src, 1, False)
        data = st.shared[p.src]
        if p.snap is not None and not np.array_equal(data, p.snap):
            when = "the block ended" if idx is None else \
                "a cp.async.bulk.wait_group covered the store"
            raise st.error(ExecutionError, f"shared memory that the bulk store at PTX line "
                           f"{p.line} reads was overwritten before {when} (a GPU may store "
                           f"either value)", p.thread)
        (region, _, off, _), = locate(st, "global", p.gaddr.astype(np.uint64),
                                      np.full(p.gaddr.size, p.thread), 1, 1)
        region_view(st, region, np.uint8)[off] = data
        st.epoch += 1
    st.bulk_pending = keep
