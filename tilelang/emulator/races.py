"""Shared-memory race check (`EmulatorDevice(race_check=True)`).

The emulator runs the warps of a block in lockstep, so a kernel that forgets a `bar.sync`
between one warp writing shared memory and another reading it (or overwriting what another
still reads: a pipeline stage reused too early) gets the right answer here by luck. This
check reports such a pair instead: two accesses to the same byte of a block's shared memory
by different agents, at least one a write, neither ordered before the other.

Order is happens-before, followed with vector clocks. The agents are each block's warps, one
per warp group for its in-flight `wgmma`/`tcgen05` operand reads, and one per mbarrier for the
TMA copies that complete on it; a cluster's CTAs share one column space (rank r's agent a is
column r * agents + a), so a CTA's clocks can say how far it has seen its peers'. A warp's
clock advances at each release (every barrier it passes, every arrive); its vector says how far
it has seen the others:

* a full-block barrier (`bar.sync`/`barrier.sync` without a count, `bar.red`) joins the
  vectors of all the block's warps, `barrier.cluster.wait` those of every warp of the cluster;
  a named barrier with a thread count joins those of the warps that arrived at it
  (`bar.arrive` only releases);
* `mbarrier.arrive` (any form, `cp.async.mbarrier.arrive`, a remote arrive on another CTA's
  mbarrier) releases the warp's vector into the mbarrier; a phase's completion publishes what
  arrived, and a `test_wait`/`try_wait` that sees the phase complete joins it;
* a TMA load (`cp.async.bulk{.tensor}` to shared memory) writes as the mbarrier's agent, with
  the clock of the phase it completes, ordered after what its issuing warp had seen; it
  counts as a write when issued and again when it lands (the hardware writes at any moment in
  between), and its complete-tx makes it part of the phase waiters see. A multicast into
  another CTA of the cluster, or a pair's copy completing on the peer's mbarrier, is checked
  in the CTA it writes;
* `wgmma.mma_async` reads its shared operands as its warp group's agent from the issue on;
  the warps of the group see those reads finished at the `wgmma.wait_group` that completes
  it (and others through them);
* `tcgen05.mma` and `tcgen05.cp` read theirs as the issuing thread's warp-group agent too,
  from the issue on (a `cta_group::2` product also the peer CTA's); the `tcgen05.commit`
  covering them publishes the end of those reads through its mbarrier — each CTA's of a
  multicast commit — and a `try_wait`/`test_wait` that sees the phase complete joins it;
  their tensor-memory accesses, and `tcgen05.ld`/`st`'s, are tmemrace.py's;
* a bulk store (`cp.async.bulk` to global) reads its source when issued and again at the
  issuing thread's `wait_group{.read}` that covers it;
* a `cp.async` writes when issued and when it lands.

Per byte it keeps the last writer (agent and clock) and, per reading agent, the clock of its
last read; an access is a race if the last write, or for a write any recorded read, is by
another agent and not yet seen by the accessing warp. Atomics are not checked; neither are
`ld`/`st` on `.shared::cluster` addresses (distributed shared memory: the kernel is reported
unchecked).
"""

from __future__ import annotations

import numpy as np

from .errors import SharedMemoryRace
from .tmemrace import TmemRaces, state_bytes as tmem_state_bytes

NONE = -1
BYTES_PER_SHARED_BYTE = 10         # w_ag, w_clk, lines; the read clocks come on top


def unchecked_reason(prog) -> str | None:
    """Why a program's shared memory cannot be race-checked, or None."""
    for ins in prog.code:
        if ins.root in ("ld", "st", "atom", "red", "ldu", "cp") and \
                "shared::cluster" in ins.opcode and "bulk" not in ins.opcode:
            return "the kernel accesses distributed shared memory"
    return None


def state_bytes(prog, tpb: int, shared_size: int, cluster: int = 1) -> int:
    """Bytes of race-check state per block (for the batch size)."""
    nw = -(-tpb // 32)
    nc = cluster * (nw + -(-nw // 4))
    tmem = tmem_state_bytes(nc) if any(d.root == "tcgen05" for d in prog.code) else 0
    return shared_size * (BYTES_PER_SHARED_BYTE + 4 * nc) + tmem


class RaceChecker:
    def __init__(self, st, strict: bool = False):
        n = (st.shared.size + 4) // 4 * 4            # whole words: accesses view them so
        self.stride = st.shared_stride        # bytes between blocks in the batch's array
        self.nw = nw = -(-st.tpb // 32)
        self.ng = ng = -(-nw // 4)
        self.nr = nw + ng                                   # agents of a block
        self.cs = cluster_size(st)
        # columns of the cluster's agents: CTA rank r's agent a is column r * nr + a (the
        # blocks of a cluster are consecutive in the batch), so one CTA's clocks can say how
        # far it has seen another's (the pair's tcgen05.mma, multicast copies and arrivals)
        self.nc = self.cs * self.nr
        self.w_ag = np.full(n, NONE, np.int32)
        self.w_clk = np.zeros(n, np.int32)
        self.r_clk = np.zeros((n, self.nc), np.int32)
        # vc[b, a, c]: how far agent a (a warp or a warp group's wgmma) of block b has seen
        # agent column c; columns past nc are the mbarriers' agents (added as they appear)
        self.vc = np.zeros((st.nblk, self.nr, self.nc), np.int32)
        ar = np.arange(self.nr)
        for b in range(st.nblk):
            self.vc[b, ar, self.own(b, ar)] = 1
        self.mcol: dict = {}                 # (rank, mbarrier offset) -> its column
        self.acc: dict = {}                  # (block, element) -> arrivals' vector so far
        self.pub: dict = {}                  # (block, element) -> what completions published
        self.phases: dict = {}               # (block, element) -> completed phases
        self.named: dict = {}                # (block, barrier id) -> arrivals' vector
        self.lines = np.zeros(n, np.int32)   # PTX line of the last write, for messages
        # a block with no write since its last full barrier has nothing a load can race
        # with (the barrier joined every warp); TMA writes are not ordered by barriers
        self.dirty = np.zeros(st.nblk, bool)
        self.tma_used = np.zeros(st.nblk, bool)
        self.tensor_core = "tcgen05 operation" if any(
            d.root == "tcgen05" for d in st.prog.code) else "wgmma"
        # tensor memory's happens-before (tmemrace.py); `strict`: tcgen05's thread-sync
        # fences are required where the PTX ISA asks for them
        self.strict = strict
        self.tmem = TmemRaces(self, st) if self.tensor_core != "wgmma" else None

    def own(self, b, a):
        """The column of block `b`'s agent `a` (either may be an array)."""
        return (np.asarray(b) % self.cs) * self.nr + a

    # -- agents and clocks -----------------------------------------------------------------
    def _warps(self, st, idx):
        return (st.thread_linear[idx] // 32).astype(np.int64)

    def _column(self, key) -> int:
        """The column of an mbarrier's agent, keyed by (its CTA's rank, its offset)."""
        c = self.mcol.get(key)
        if c is None:
            c = self.mcol[key] = self.vc.shape[2]
            self.vc = np.concatenate([self.vc, np.zeros(self.vc.shape[:2] + (1,), np.int32)],
                                     axis=2)
        return c

    def _mbar_column(self, elem: int) -> int:
        b = elem * 8 // self.stride
        return self._column((b % self.cs, elem * 8 - b * self.stride))

    def _vec(self, v):
        """A published vector padded to the current number of columns."""
        w = self.vc.shape[2]
        return v if v.size == w else np.concatenate([v, np.zeros(w - v.size, np.int32)])

    def _release(self, st, idx):
        """The warps of threads `idx` release: their later accesses get a new clock."""
        pairs = np.unique(st.block_in_batch[idx] * self.nw + self._warps(st, idx))
        b, w = pairs // self.nw, pairs % self.nw
        self.vc[b, w, self.own(b, w)] += 1

    # -- synchronization -------------------------------------------------------------------
    def barrier(self, st, m):
        """A barrier of the whole block completed for the threads `m`."""
        blocks = np.arange(st.nblk) if m is None else np.unique(st.block_in_batch[m])
        nw = self.nw
        for b in blocks.tolist():
            joined = self.vc[b, :nw].max(axis=0)
            self.vc[b, :nw] = joined
            self.vc[b, np.arange(nw), self.own(b, np.arange(nw))] += 1
            if not self.tma_used[b]:
                self.dirty[b] = False

    def cluster_barrier(self, st, m):
        """`barrier.cluster.wait` completed for the threads `m`: it joins the vectors of
        every warp of their clusters' CTAs, then acts as each CTA's full barrier."""
        blocks = np.arange(st.nblk) if m is None else np.unique(st.block_in_batch[m])
        for first in np.unique(blocks - blocks % self.cs).tolist():
            members = np.arange(first, min(first + self.cs, st.nblk))
            joined = self.vc[members, :self.nw].max(axis=(0, 1))
            self.vc[members, :self.nw] = joined
        self.barrier(st, m)

    def named_arrive(self, st, b: int, bar: int, members):
        w = np.unique(self._warps(st, members))
        v = self.vc[b, w].max(axis=0)
        old = self.named.get((b, bar))
        self.named[(b, bar)] = v if old is None else np.maximum(self._vec(old), v)
        self.vc[b, w, self.own(b, w)] += 1

    def named_done(self, st, b: int, bar: int, threads):
        v = self.named.pop((b, bar), None)
        if v is None or len(threads) == 0:
            return
        w = np.unique(self._warps(st, threads))
        self.vc[b, w] = np.maximum(self.vc[b, w], self._vec(v)[None, :])

    def mbar_arrive(self, st, idx, elem):
        """Threads `idx` arrive on the mbarriers at shared 8-byte elements `elem` (of the
        batch): a release of their warps' vectors into each (from any CTA of the cluster)."""
        blk = elem * 8 // self.stride
        warps = self._warps(st, idx)
        tblk = st.block_in_batch[idx]
        for key in set(zip(blk.tolist(), elem.tolist())):
            sel = elem == key[1]
            for src in np.unique(tblk[sel]).tolist():
                if src // self.cs != key[0] // self.cs:
                    continue                 # not in the cluster: no shared columns
                v = self.vc[src, np.unique(warps[sel][tblk[sel] == src])].max(axis=0)
                old = self.acc.get(key)
                self.acc[key] = v if old is None else np.maximum(self._vec(old), self._vec(v))
        self._release(st, idx)

    def mbar_completed(self, st, elem: int):
        """A phase of the mbarrier at element `elem` completed: publish what arrived and
        the phase's clock of its TMA agent."""
        b = elem * 8 // self.stride
        key = (b, elem)
        n = self.phases[key] = self.phases.get(key, 0) + 1
        v = self.acc.get(key)
        v = np.zeros(self.vc.shape[2], np.int32) if v is None else self._vec(v).copy()
        c = self._mbar_column(elem)
        v = self._vec(v)
        v[c] = max(v[c], n)
        self.pub[key] = v if key not in self.pub else np.maximum(self._vec(self.pub[key]), v)

    def mbar_observed(self, st, idx, elem):
        """Threads `idx` saw a phase of the mbarriers at `elem` complete (test/try_wait)."""
        warps = self._warps(st, idx)
        for e in np.unique(elem).tolist():
            b = e * 8 // self.stride
            v = self.pub.get((b, e))
            if v is None:
                continue
            v = self._vec(v)
            w = np.unique(warps[elem == e])
            self.vc[b, w] = np.maximum(self.vc[b, w], v[None, :])

    # -- TMA ---------------------------------------------------------------------------------
    def tma_snapshot(self, st, thread: int):
        """What the warp issuing a bulk copy had seen (its write is ordered after that)."""
        b = int(st.block_in_batch[thread])
        return b, self.vc[b, int(st.thread_linear[thread]) // 32].copy()

    def tma_write(self, st, snap, off, mbar_elem: int, thread: int, line: int):
        """A bulk copy's bytes `off` (of the batch), completing on the mbarrier at
        `mbar_elem`, written as that mbarrier's agent (a multicast's bytes in another CTA of
        the cluster, or a pair's copy completing on the peer's mbarrier, alike)."""
        b = int(mbar_elem * 8 // self.stride)
        key = (b, int(mbar_elem))
        col = self._mbar_column(int(mbar_elem))
        clk = self.phases.get(key, 0) + 1
        off = np.asarray(off, np.int64).reshape(-1)
        sb, vec = snap
        dst = np.unique(off // self.stride)
        self.dirty[dst] = self.tma_used[dst] = True
        if sb // self.cs == b // self.cs:
            vec = self._vec(vec).copy()
            vec[col] = clk
            self._check(st, off, vec, col, True, thread, line)
        self.w_ag[off] = col
        self.w_clk[off] = clk
        self.lines[off] = line

    # -- wgmma -----------------------------------------------------------------------------
    def _tc_agent(self, st, t: int):
        """(block, issuing warp, agent, its column) of the warp group of thread `t`."""
        b, w = int(st.block_in_batch[t]), int(st.thread_linear[t]) // 32
        a = self.nw + w // 4
        return b, w, a, int(self.own(b, a))

    def wgmma_issue(self, st, firsts):
        """Each warp group (by its first thread) issues a wgmma: its agent takes what the
        issuing warp has seen and a new clock; returns the clocks."""
        out = []
        for t in np.asarray(firsts).tolist():
            b, w, a, col = self._tc_agent(st, t)
            c = self.vc[b, a, col] + 1
            self.vc[b, a] = np.maximum(self.vc[b, a], self.vc[b, w])
            self.vc[b, a, col] = c
            out.append(c)
        return np.asarray(out, np.int64)

    def wgmma_read(self, st, first: int, off, nbytes: int, clk: int):
        off = np.asarray(off, np.int64).reshape(-1)
        b, w, a, col = self._tc_agent(st, first)
        byt = _bytes(off, nbytes)
        vec = self.vc[b, a].copy()
        vec[col] = clk
        self._check(st, byt, vec, col, False, first)
        self.r_clk[byt, col] = np.maximum(self.r_clk[byt, col], clk)

    def wgmma_done(self, st, firsts, clks):
        """The wgmma of each group (first thread, issue clock) completed: the group's warps
        have seen its reads end."""
        for t, c in zip(np.asarray(firsts).tolist(), np.asarray(clks).tolist()):
            b, w, a, col = self._tc_agent(st, t)
            g0 = (w // 4) * 4
            ws = np.arange(g0, min(g0 + 4, self.nw))
            self.vc[b, ws, col] = np.maximum(self.vc[b, ws, col], c)

    # -- tcgen05 ---------------------------------------------------------------------------
    def tc_read(self, st, thread: int, off, nbytes: int) -> int:
        """An asynchronous tcgen05 operation (mma, cp) issued by `thread` reads its shared
        operands as the agent of the thread's warp group from the issue on (the wgmma agent:
        a warp group issues either kind); returns the clock of the read."""
        clk = int(self.wgmma_issue(st, [thread])[0])
        self.wgmma_read(st, thread, off, nbytes, clk)
        return clk

    def tc_arrive(self, st, thread: int, elem: int, clk: int):
        """A tcgen05.commit of `thread` arrives on the mbarrier at `elem` (in its CTA or, a
        multicast commit, in another of the cluster) once its operations completed: whoever
        sees that phase complete has seen their reads and writes end."""
        b = elem * 8 // self.stride
        _, _, _, col = self._tc_agent(st, thread)
        v = np.zeros(self.vc.shape[2], np.int32)
        v[col] = clk
        old = self.acc.get((b, elem))
        self.acc[(b, elem)] = v if old is None else np.maximum(self._vec(old), v)

    # -- accesses --------------------------------------------------------------------------
    def access(self, st, idx, off, nbytes: int, write: bool, data=None):
        """Threads `idx` access `nbytes` at region byte offsets `off` of shared memory.

        `data` (writes; optional): the bytes each thread writes, (len(idx), nbytes) uint8. With
        it, a write-write pair is a race only where the values differ: several warps storing
        the same value to a byte in one instruction (a replicated layout's store), or a warp
        rewriting the value an unordered write of another warp left there, leave memory the
        same whatever the order (docs/emulator.md, "Race check")."""
        if idx.size == 0:
            return
        n = max(int(nbytes), 1)
        off = np.asarray(off, np.int64).reshape(-1)
        idx = np.asarray(idx, np.int64).reshape(-1)
        if data is not None:
            data = np.asarray(data, np.uint8).reshape(idx.size, n)
        warp = st.thread_linear[idx] // 32
        blk = st.block_in_batch[idx]
        pair = blk * self.nw + warp
        ocol = self.own(blk, warp)                      # the warps' own columns
        rows = self.vc[:, :self.nw].reshape(-1, self.vc.shape[2])   # (block, warp) -> seen
        clk = rows[pair, ocol]
        # the state is per byte; whole aligned words (the usual access) are handled as rows
        # of 4 bytes, others byte by byte
        width = 4 if n % 4 == 0 and not (off & 3).any() else 1
        per = n // width
        unit = off // width
        if per > 1:
            unit = (unit[:, None] + np.arange(per)[None, :]).reshape(-1)
            idx, warp, pair, clk, ocol, blk = (np.repeat(x, per) for x in
                                               (idx, warp, pair, clk, ocol, blk))
        if data is not None:
            data = data.reshape(-1, width)             # one row per unit, as `unit`
        W, C = self.w_ag.reshape(-1, width), self.w_clk.reshape(-1, width)
        R = self.r_clk.reshape(-1, width, self.nc)
        if write:
            self.dirty[blk] = True
        elif not self.dirty[blk].any():
            R[unit, :, ocol] = clk[:, None]
            return
        ww = W[unit]
        other = (ww >= 0) & (ww != ocol[:, None])
        if other.any():
            kr, kc = np.nonzero(other)
            bad = rows[pair[kr], ww[kr, kc]] < C[unit[kr], kc]
            if write and data is not None and bad.any():   # the same value again: benign
                bad &= data[kr, kc] != st.shared[unit[kr] * width + kc]
            if bad.any():
                j = int(np.flatnonzero(bad)[0])
                r, c = int(kr[j]), int(kc[j])
                byte = int(unit[r]) * width + c
                self._raise(st, int(idx[r]), byte, f"warp {int(warp[r])}",
                            "writes" if write else "reads",
                            self._writer(int(ww[r, c]), byte, int(blk[r])))
        if not write:
            R[unit, :, ocol] = clk[:, None]
            return
        badr = R[unit] > rows[pair, :self.nc][:, None, :]
        badr[np.arange(unit.size), :, ocol] = False
        if badr.any():
            r, c, who = (int(v[0]) for v in np.nonzero(badr))
            self._raise(st, int(idx[r]), int(unit[r]) * width + c, f"warp {int(warp[r])}",
                        "writes", f"{self._reader(who, int(blk[r]))} read")
        W[unit] = ocol[:, None]
        C[unit] = clk[:, None]
        self.lines.reshape(-1, width)[unit] = st.ins.line if st.ins is not None else 0
        clash = W[unit] != ocol[:, None]                # another warp, same instruction
        if clash.any() and data is not None:            # ... writing another value
            u, inv = np.unique(unit, return_inverse=True)
            last = np.zeros(u.size, np.int64)
            last[inv] = np.arange(unit.size)            # the row whose warp was recorded
            clash &= data != data[last[inv]]
        if clash.any():
            r, c = (int(v[0]) for v in np.nonzero(clash))
            self._raise(st, int(idx[r]), int(unit[r]) * width + c, f"warp {int(warp[r])}",
                        "writes", "another warp writes in the same instruction")

    def _check(self, st, byt, vec, agent, write, thread, line=None):
        """Accesses of bytes `byt` by one agent (its column) that has seen `vec`."""
        b = int(st.block_in_batch[thread])
        name = self._name(agent, b) if line is None else f"the TMA copy at PTX line {line}"
        ww = self.w_ag[byt]
        prev = ww >= 0
        bad = prev & (ww != agent)
        if bad.any():
            bad &= vec[np.where(prev, ww, 0)] < self.w_clk[byt]
        if bad.any():
            j = int(np.flatnonzero(bad)[0])
            self._raise(st, thread, int(byt[j]), name, "writes" if write else
                        "reads", self._writer(int(ww[j]), int(byt[j]), b))
        if write:
            r = self.r_clk[byt]
            seen = vec[:self.nc].copy()
            if 0 <= agent < self.nc:
                seen[agent] = np.iinfo(np.int32).max
            badr = (r > seen[None, :])
            if badr.any():
                j, who = (int(v[0]) for v in np.nonzero(badr))
                self._raise(st, thread, int(byt[j]), name, "writes",
                            f"{self._reader(who, b)} read")

    # -- messages --------------------------------------------------------------------------
    def name(self, col: int, b: int) -> str:
        """An agent column as seen from block `b` ("the peer CTA's" for another rank)."""
        return self._name(col, b)

    def _name(self, col, b):
        if col >= self.nc:
            return "a TMA copy"
        rank, agent = divmod(col, self.nr)
        where = "" if rank == b % self.cs else f"cluster rank {rank}'s "
        if agent < self.nw:
            return f"{where}warp {agent}"
        return f"the {where}{self.tensor_core} of warp group {agent - self.nw}"

    def _reader(self, col, b):
        if col % self.nr < self.nw:
            return self._name(col, b)
        rank, agent = divmod(col, self.nr)
        where = "" if rank == b % self.cs else f"cluster rank {rank}'s "
        return f"the in-flight {where}{self.tensor_core} of warp group {agent - self.nw}"

    def _writer(self, col, byte, b):
        if col < self.nc:
            return f"{self._name(col, b)} wrote (PTX line {int(self.lines[byte])})"
        return f"a TMA copy wrote (PTX line {int(self.lines[byte])})"

    def _raise(self, st, t, byte, who, doing, done):
        addr = byte - int(st.block_in_batch[t]) * self.stride
        raise st.error(SharedMemoryRace,
                       f"shared-memory race: {who} {doing} shared memory that {done}, and "
                       f"nothing orders the two (no barrier, no mbarrier phase between)", t,
                       max(addr, 0))


def cluster_size(st) -> int:
    c = st.geom.cluster
    return int(c[0] * c[1] * c[2]) if c else 1


def _bytes(off, n):
    return (off[:, None] + np.arange(n)[None, :]).reshape(-1) if n > 1 else off
