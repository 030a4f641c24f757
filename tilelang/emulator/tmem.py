"""Tensor memory (TMEM, sm_100a) and the asynchronous completion of tcgen05 operations.

Each CTA has 128 lanes x 512 columns of 32-bit cells, its own state space. A TMEM address
is 32 bits: the lane in bits 16-31, the column in bits 0-15 (PTX ISA, "Tensor Memory
addressing"). Columns are allocated by `tcgen05.alloc` (a power of two from 32 to 512, all
128 lanes of each), freed by `tcgen05.dealloc`; after `tcgen05.relinquish_alloc_permit` the
CTA may not allocate again, and every column must be freed before the CTA exits.

`tcgen05.mma`, `tcgen05.cp` and `tcgen05.shift` are asynchronous: the emulator records each
as an `AsyncOp` of its issuing thread; `tcgen05.commit` gathers the thread's operations not yet
committed into a `Commit` that arrives (count 1) on an mbarrier once they complete. They
complete as late as the ISA allows: when a thread polls that mbarrier (`try_wait` /
`test_wait`), in the issuing thread's order (commits before it land first). Until then the
TMEM cells they write are *pending*: a `tcgen05.ld`/`st` touching one is an error naming the
operation (on a GPU it would read or race with a half-written accumulator), and so is freeing
them. An operation never committed, or whose mbarrier nobody polls, is never performed.
See docs/emulator.md, "tcgen05 and tensor memory".
"""

from __future__ import annotations

import numpy as np

from .completion import arrive
from .errors import ExecutionError

LANES, COLUMNS = 128, 512


class TensorMemory:
    """The TMEM of the batch's blocks: cells, allocation and the pending writes."""

    def __init__(self, nblk: int):
        self.cells = np.zeros((nblk, LANES, COLUMNS), np.uint32)
        self.allocated = np.zeros((nblk, COLUMNS), bool)
        self.relinquished = np.zeros(nblk, bool)
        # PTX line of the asynchronous operation still to write a cell (0: none)
        self.pending = np.zeros((nblk, LANES, COLUMNS), np.int32)


def tmem(st) -> TensorMemory:
    if st.tmem is None:
        st.tmem = TensorMemory(st.nblk)
    return st.tmem


def split(addr: int) -> tuple[int, int]:
    """(lane, column) of a TMEM address."""
    a = int(addr)
    return (a >> 16) & 0xFFFF, a & 0xFFFF


def check_cells(st, b, lanes, cols, thread, what, reading=True, pipelined=False):
    """Lanes/columns inside TMEM, allocated, and (for any access) not pending. `pipelined`:
    a tcgen05.mma's read, which may follow the same thread's tcgen05.cp and tcgen05.shift
    without a wait (PTX ISA, "Pipelined tcgen05 instructions": cp -> mma and shift -> mma of
    the same CTA group execute in issue order), so cells those write are not pending to it."""
    lanes, cols = np.asarray(lanes), np.asarray(cols)
    tm = tmem(st)
    if lanes.size and (lanes.min() < 0 or lanes.max() >= LANES):
        raise st.error(ExecutionError, f"{what}: tensor memory lane {int(lanes.max())} is "
                       f"outside the {LANES} lanes", thread)
    if cols.size and (cols.min() < 0 or cols.max() >= COLUMNS):
        raise st.error(ExecutionError, f"{what}: tensor memory column {int(cols.max())} is "
                       f"outside the {COLUMNS} columns", thread)
    free = ~tm.allocated[b, cols]
    if free.any():
        raise st.error(ExecutionError, f"{what}: tensor memory column "
                       f"{int(cols[np.flatnonzero(free)[0]])} is not allocated "
                       f"(tcgen05.alloc)", thread)
    pend = tm.pending[b][np.ix_(lanes, cols)]
    if pend.any() and pipelined:
        pend = np.where(_own_pipelined(st, b, lanes, cols, thread), 0, pend)
    if pend.any():
        i, j = (int(v[0]) for v in np.nonzero(pend))
        doing = "reads" if reading else "writes"
        raise st.error(ExecutionError, f"{what} {doing} tensor memory (lane {int(lanes[i])}, "
                       f"column {int(cols[j])}) that the asynchronous tcgen05 operation at PTX "
                       f"line {int(pend[i, j])} has not finished writing: wait on the "
                       f"mbarrier of its tcgen05.commit first", thread)


def _own_pipelined(st, b, lanes, cols, thread):
    """(lanes, cols) mask of the cells that `thread`'s outstanding tcgen05.cp / shift
    operations of block `b` write (issued, or committed and not yet landed)."""
    ops = list(st.tc_issued.get(thread, ()))
    ops += [op for c in st.tc_commits if c.thread == thread for op in c.ops]
    mask = np.zeros((len(lanes), len(cols)), bool)
    for op in ops:
        if op.pipe and op.block == b:
            mask |= np.isin(lanes, op.lanes)[:, None] & np.isin(cols, op.cols)[None, :]
    return mask


class AsyncOp:
    """One asynchronous tcgen05 operation of one thread: `compute(st)` performs it; `block`,
    `lanes`, `cols` are the TMEM cells it writes (pending until then); `pipe`: a tcgen05.cp
    or shift, which a later tcgen05.mma of the thread follows in order."""
    __slots__ = ("thread", "line", "compute", "block", "lanes", "cols", "clk", "pipe")

    def __init__(self, thread, line, compute, block, lanes, cols, clk=0, pipe=False):
        self.thread, self.line, self.compute = thread, line, compute
        self.block, self.lanes, self.cols = block, np.asarray(lanes), np.asarray(cols)
        self.clk = clk              # the race check's clock of its shared reads (0: none)
        self.pipe = pipe


class Commit:
    __slots__ = ("thread", "elem", "ops", "line", "clk")

    def __init__(self, thread, elem, ops, line, clk=0):
        self.thread, self.elem, self.ops, self.line = thread, elem, ops, line
        self.clk = clk          # race clock: the latest read of every op the thread issued


def issue(st, op: AsyncOp):
    st.tc_issued.setdefault(op.thread, []).append(op)
    tm = tmem(st)
    pend = tm.pending[op.block]
    sub = pend[np.ix_(op.lanes, op.cols)]
    pend[np.ix_(op.lanes, op.cols)] = np.where(sub == 0, op.line, sub)


def commit(st, thread: int, elem: int, line: int):
    """The thread's operations issued so far arrive on the mbarrier at shared element `elem`
    (of the batch) once they complete."""
    ops = st.tc_issued.pop(thread, [])
    # a commit tracks every earlier operation of the thread (PTX ISA, tcgen05.commit), also
    # those an earlier commit covered: its arrival publishes the end of all their reads
    clk = max([st.tc_clock.get(thread, 0)] + [getattr(op, "clk", 0) or 0 for op in ops])
    st.tc_clock[thread] = clk
    st.tc_commits.append(Commit(thread, elem, ops, line, clk))


def commit_many(st, thread: int, elems: list, line: int):
    """A multicast commit: one arrival on each of the mbarriers at `elems` once the thread's
    operations complete. The first commit carries the operations; the others, after it in
    the thread's order, land no earlier (land_commits performs a thread's commits in order)."""
    if not elems:
        return
    commit(st, thread, elems[0], line)
    for e in elems[1:]:
        st.tc_commits.append(Commit(thread, e, [], line, st.tc_clock.get(thread, 0)))


def _perform(st, op: AsyncOp):
    op.compute(st)
    pend = tmem(st).pending[op.block]
    sub = pend[np.ix_(op.lanes, op.cols)]
    pend[np.ix_(op.lanes, op.cols)] = np.where(sub == op.line, 0, sub)


def land_commits(st, elems):
    """Complete the commits arriving on the mbarriers at shared elements `elems`, each after
    the same thread's earlier commits."""
    want = set(int(e) for e in elems)
    last = {}                                  # thread -> index of its last due commit
    for k, c in enumerate(st.tc_commits):
        if c.elem in want:
            last[c.thread] = k
    if not last:
        return
    keep = []
    prev = st.ins
    try:
        for k, c in enumerate(st.tc_commits):
            if last.get(c.thread, -1) < k:
                keep.append(c)
                continue
            for op in c.ops:
                _perform(st, op)
            view = st.shared_view(np.uint64)
            idx = np.array([c.thread])
            if st.races is not None:
                clk = c.clk
                if clk:
                    st.races.tc_arrive(st, c.thread, c.elem, clk)
                st.races.mbar_arrive(st, idx, np.array([c.elem]))
            _, flipped = arrive(st, view, np.array([c.elem]), np.ones(1, np.int64),
                                threads=idx)
            st.mbar_flipped |= flipped
            st.epoch += 1
    finally:
        st.ins = prev
    st.tc_commits = keep


def pending_on(st, elem: int):
    """The line of a commit still to arrive on the mbarrier at `elem`, or None."""
    return next((c.line for c in st.tc_commits if c.elem == elem), None)


def check_released(st):
    """At the end of a batch: a CTA that exits with tensor memory allocated (PTX ISA: every
    allocation must be freed before the kernel exits)."""
    if st.tmem is None:
        return
    held = st.tmem.allocated.any(axis=1)
    if held.any():
        b = int(np.flatnonzero(held)[0])
        n = int(st.tmem.allocated[b].sum())
        raise st.error(ExecutionError, f"a CTA exited with {n} tensor memory column(s) still "
                       f"allocated: every tcgen05.alloc needs its tcgen05.dealloc before the "
                       f"kernel exits", b * st.tpb)


def uncommitted(st) -> str:
    """For a no-progress report: the PTX lines of tcgen05 operations issued and never
    committed (nothing will arrive on an mbarrier for them), or ""."""
    ops = sorted({op.line for v in st.tc_issued.values() for op in v})
    if not ops:
        return ""
    lines = ", ".join(map(str, ops[:6]))
    return (f" The tcgen05 operation(s) at PTX line(s) {lines} were issued but never "
            f"committed: no tcgen05.commit will arrive on an mbarrier for them")
