"""Tensor memory's part of the race check (sm_100a; `EmulatorDevice(race_check=True)`).

The emulator performs `tcgen05.ld`/`st` at once and a `tcgen05.mma` when its commit's mbarrier
is polled, so a kernel that reads an accumulator without waiting for the product (another warp
polled), overwrites cells a `tcgen05.ld` may still be reading, or lets a product read cells a
`tcgen05.st` may still be writing, gets the right answer here by luck. This module reports such
a pair with the shared-memory check's vector clocks (races.py): the same agents (warps, and a
warp group's tensor-core agent for its `tcgen05.mma`/`cp`/`shift`), the same columns across a
cluster's CTAs (a pair's product writes the peer CTA's cells; its multicast commit publishes
that to the peer's mbarrier).

Per block, TMEM is kept in units of 16 lanes x 1 column (every shape reaches whole 16-lane
groups: 32x32b a warp's 32 lanes, 16x32bx2 and M = 64 sixteen of them) with the last writer
(agent column, clock, PTX line) and per reading agent the clock and line of its last read.
The PTX ISA's rules (tcgen05 chapter, "Memory consistency model"), as followed here:

* `tcgen05.ld` reads its cells until the warp's `tcgen05.wait::ld`, `tcgen05.st` writes them
  until `tcgen05.wait::st` (their clock is "unfinished" until then);
* `tcgen05.mma`/`cp`/`shift` read and write theirs as the issuing warp group's agent from the
  issue on; the `tcgen05.commit` covering them publishes their end through its mbarrier
  (races.tc_arrive), and a thread that sees that phase complete has seen it;
* strict mode (`race_check="strict"`) adds the thread-sync fences the ISA asks for between
  tcgen05 operations of different threads: a finished ld/st counts for others only after the
  warp's next `tcgen05.fence::before_thread_sync`, and a warp's (or its MMA's) TMEM access is
  ordered only after what the warp had seen at its last `tcgen05.fence::after_thread_sync`.
  Triton 3.9 emits none of these fences (its sm_100a kernels pass the default mode), which is
  why they are a separate, stricter level; Tile's kernels pass both (docs/emulator.md).
  Strict mode also holds a `tcgen05.ld`'s registers unwritten until the warp's
  `tcgen05.wait::ld`: an instruction reading one before is reported (the ISA leaves its
  value undefined until then; LLVM places Triton's wait after the reads, and ptxas orders
  them after the load, which is why only strict mode asks).
"""

from __future__ import annotations

import numpy as np

from .errors import TensorMemoryRace

NONE = -1
GROUP = 16                          # lanes per unit
UNITS, COLUMNS = 128 // GROUP, 512
INF = np.iinfo(np.int32).max        # not finished: no wait::ld / wait::st yet
UNFENCED = INF - 1                  # (strict) finished, no fence::before_thread_sync yet


def state_bytes(nc: int) -> int:
    """Bytes of TMEM race state per block with `nc` agent columns."""
    return UNITS * COLUMNS * (12 + 8 * nc)


class TmemRaces:
    def __init__(self, rc, st):
        self.rc = rc
        nb = st.nblk
        shape = (nb, UNITS, COLUMNS)
        self.w_ag = np.full(shape, NONE, np.int32)
        self.w_clk = np.zeros(shape, np.int32)
        self.w_line = np.zeros(shape, np.int32)
        self.r_clk = np.zeros(shape + (rc.nc,), np.int32)
        self.r_line = np.zeros(shape + (rc.nc,), np.int32)
        self.fenced: dict = {}          # (block, warp) -> its vector at fence::after (strict)
        self.loads: dict = {}           # (block, warp) -> [(groups, cols)] before wait::ld
        self.stores: dict = {}          # (block, warp) -> [(groups, cols)] before wait::st
        self.unfenced: dict = {}        # (block, warp) -> [(kind, groups, cols)] (strict)

    # -- views -----------------------------------------------------------------------------
    def after_fence(self, b: int, w: int):
        """What warp w of block b has seen as far as its tcgen05 operations are concerned."""
        rc = self.rc
        if not rc.strict:
            return rc.vc[b, w]
        v = self.fenced.get((b, w))
        if v is None:
            v = np.zeros(rc.vc.shape[2], np.int32)
            v[rc.own(b, w)] = rc.vc[b, w, rc.own(b, w)]
        return rc._vec(v)

    def reset(self, b: int, cols):
        """Freshly allocated columns: no earlier access to them counts."""
        self.w_ag[b, :, cols] = NONE
        self.r_clk[b, :, cols] = 0

    # -- accesses --------------------------------------------------------------------------
    def warp_access(self, st, t0: int, b: int, lanes, cols, write: bool, same=None):
        """tcgen05.st (`write`) or tcgen05.ld of warp (of thread `t0`) on cells of block b.
        `same` (stores): (lanes, cols, whether each cell keeps its value), both (lanes,
        columns) arrays: a write-write pair is a race only where a value changes."""
        rc = self.rc
        w = int(st.thread_linear[t0]) // 32
        col = int(rc.own(b, w))
        groups = np.unique(np.asarray(lanes) // GROUP)
        cols = np.unique(np.asarray(cols))
        view = self.after_fence(b, w).copy()
        view[col] = INF
        what = f"warp {w}'s tcgen05.{'st' if write else 'ld'}"
        benign = None
        if same is not None:
            keep = np.ones((UNITS, COLUMNS), bool)
            sl, sc, eq = same
            np.logical_and.at(keep, (np.broadcast_to(np.asarray(sl)[:, None] // GROUP,
                                                     eq.shape), sc), eq)
            benign = keep[np.ix_(groups, cols)]
        self._check(st, t0, b, groups, cols, view, col, write, what, benign)
        ix = np.ix_([b], groups, cols)
        line = st.ins.line if st.ins is not None else 0
        if write:
            self.w_ag[ix], self.w_clk[ix], self.w_line[ix] = col, INF, line
            self.stores.setdefault((b, w), []).append((groups, cols))
        else:
            self.r_clk[ix + (col,)] = INF
            self.r_line[ix + (col,)] = line
            self.loads.setdefault((b, w), []).append((groups, cols))

    def tc_access(self, st, t: int, b: int, lanes, cols, clk: int, write: bool, what: str):
        """An asynchronous tcgen05 operation of thread t (mma, cp, shift; clock `clk` of its
        warp group's agent) reading or writing cells of block b (the issuer's or the pair's
        peer)."""
        rc = self.rc
        bt, w, _, col = rc._tc_agent(st, t)
        groups = np.unique(np.asarray(lanes) // GROUP)
        cols = np.unique(np.asarray(cols))
        # the agent saw what its issuing warp had (strict: up to that warp's last
        # fence::after_thread_sync)
        view = (self.after_fence(bt, w) if rc.strict else rc.vc[bt, rc.nw + w // 4]).copy()
        view[col] = INF
        self._check(st, t, b, groups, cols, view, col, write, what)
        ix = np.ix_([b], groups, cols)
        line = st.ins.line if st.ins is not None else 0
        if write:
            self.w_ag[ix], self.w_clk[ix], self.w_line[ix] = col, clk, line
        else:
            self.r_clk[ix + (col,)] = np.maximum(self.r_clk[ix + (col,)], clk)
            self.r_line[ix + (col,)] = line

    # -- completion and fences -------------------------------------------------------------
    def wait(self, st, ths, kind: str):
        """tcgen05.wait::ld (kind "ld") or ::st of the warp of threads `ths`."""
        b, w = int(st.block_in_batch[ths[0]]), int(st.thread_linear[ths[0]]) // 32
        done = (self.loads if kind == "ld" else self.stores).pop((b, w), [])
        if not done:
            return
        if self.rc.strict:
            self.unfenced.setdefault((b, w), []).extend((kind, g, c) for g, c in done)
            self._stamp(b, w, [(kind, g, c) for g, c in done], UNFENCED)
        else:
            self._stamp(b, w, [(kind, g, c) for g, c in done], None)

    def fence_before(self, st, ths):
        b, w = int(st.block_in_batch[ths[0]]), int(st.thread_linear[ths[0]]) // 32
        self._stamp(b, w, self.unfenced.pop((b, w), []), None)

    def fence_after(self, st, ths):
        b, w = int(st.block_in_batch[ths[0]]), int(st.thread_linear[ths[0]]) // 32
        self.fenced[(b, w)] = self.rc.vc[b, w].copy()

    def _stamp(self, b, w, items, clk):
        """Finish the warp's ld reads / st writes of `items` at `clk` (None: its clock now,
        which others see after its next release)."""
        rc = self.rc
        col = int(rc.own(b, w))
        now = int(rc.vc[b, w, col]) if clk is None else clk
        for kind, g, c in items:
            ix = np.ix_([b], g, c)
            if kind == "ld":
                r = self.r_clk[ix + (col,)]
                self.r_clk[ix + (col,)] = np.where(r >= UNFENCED, now, r)
            else:
                mine = (self.w_ag[ix] == col) & (self.w_clk[ix] >= UNFENCED)
                self.w_clk[ix] = np.where(mine, now, self.w_clk[ix])

    # -- the check -------------------------------------------------------------------------
    def _check(self, st, t, b, groups, cols, view, col, write, what, benign=None):
        rc = self.rc
        ix = np.ix_([b], groups, cols)
        ww, wc = self.w_ag[ix][0], self.w_clk[ix][0]
        prev = (ww >= 0) & (ww != col)
        if benign is not None:
            prev &= ~benign
        if prev.any():
            bad = prev & (view[np.where(prev, ww, 0)] < wc)
            if bad.any():
                g, c = (int(v[0]) for v in np.nonzero(bad))
                other = int(ww[g, c])
                self._raise(st, t, b, groups[g], cols[c], what, "writes" if write else "reads",
                            f"{self._agent(other, b, 'st')} wrote "
                            f"(PTX line {int(self.w_line[b, groups[g], cols[c]])})",
                            self._hint(int(wc[g, c]), "st", other, view, t))
        if not write:
            return
        r = self.r_clk[ix][0]                               # (groups, cols, nc)
        seen = view[:rc.nc]
        bad = r > seen[None, None, :]
        bad[:, :, col] = False
        if bad.any():
            g, c, who = (int(v[0]) for v in np.nonzero(bad))
            self._raise(st, t, b, groups[g], cols[c], what, "writes",
                        f"{self._agent(who, b, 'ld')} read "
                        f"(PTX line {int(self.r_line[b, groups[g], cols[c], who])})",
                        self._hint(int(r[g, c, who]), "ld", who, view, t))

    def _agent(self, col, b, kind):
        rc = self.rc
        rank, a = divmod(col, rc.nr)
        where = "" if rank == b % rc.cs else f"cluster rank {rank}'s "
        if a < rc.nw:
            return f"{where}warp {a}'s tcgen05.{kind}"
        return f"the {where}tcgen05 operation of warp group {a - rc.nw}"

    def _hint(self, clk, kind, other, view, t):
        rc = self.rc
        if clk == INF:
            return f"no tcgen05.wait::{kind} of that warp before the thread sync"
        if clk == UNFENCED:
            return (f"tcgen05.wait::{kind} came, but no tcgen05.fence::before_thread_sync "
                    f"before the thread sync")
        if other % rc.nr >= rc.nw:
            return ("no wait on the mbarrier of its tcgen05.commit" +
                    (" followed by tcgen05.fence::after_thread_sync" if rc.strict else ""))
        return "no thread sync" + (" with tcgen05.fence::after_thread_sync after it"
                                   if rc.strict else "") + " between"

    def _raise(self, st, t, b, group, col, what, doing, done, hint):
        lane = int(group) * GROUP
        raise st.error(TensorMemoryRace,
                       f"tensor-memory race: {what} {doing} tensor memory (lanes "
                       f"{lane}..{lane + GROUP - 1}, column {int(col)}) that {done}, and "
                       f"nothing orders the two ({hint})", t)


# -- strict: registers of a tcgen05.ld before its wait::ld ----------------------------------------
def ld_issued(st, regs, idx, line: int):
    """A `tcgen05.ld` of threads `idx` wrote registers `regs` (register numbers): until the
    thread's `tcgen05.wait::ld` reading one is reported (check_ld_reads)."""
    for r in regs:
        pend = st.tc_ld_regs.get(r)
        if pend is None:
            pend = st.tc_ld_regs[r] = np.zeros(st.T, np.int32)
        pend[idx] = line


def ld_waited(st, idx):
    for pend in st.tc_ld_regs.values():
        pend[idx] = 0
    st.tc_ld_regs = {r: p for r, p in st.tc_ld_regs.items() if p.any()}


def check_ld_reads(st, ins, em):
    """An instruction (executed by `em`, None: every thread) reading a register whose
    tcgen05.ld the thread has not waited for."""
    for r in ins.reads:
        pend = st.tc_ld_regs.get(r)
        if pend is None:
            continue
        hit = pend != 0 if em is None else (pend != 0) & em
        if hit.any():
            t = int(np.flatnonzero(hit)[0])
            name = next((n for (_, n), i in st.prog.reg_index.items() if i == r), f"#{r}")
            raise st.error(TensorMemoryRace, f"tensor-memory race: {ins.opcode} reads "
                           f"{name}, which the tcgen05.ld at PTX line "
                           f"{int(pend[t])} writes, before the warp's tcgen05.wait::ld", t)
