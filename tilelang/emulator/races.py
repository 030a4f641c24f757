"""Shared-memory race check (`EmulatorDevice(race_check=True)`).

The emulator runs the warps of a block in lockstep, so a kernel that forgets a `bar.sync`
between one warp writing shared memory and another reading it (or overwriting what another
still reads: a pipeline stage reused too early) gets the right answer here by luck. This
check reports such a pair instead: two accesses to the same 4-byte word of a block's shared
memory by different warps, at least one a write, with no full-block barrier (`bar.sync`,
`barrier.sync`, `bar.red`, `barrier.cluster.wait`) between them.

Per word it keeps the last writer warp and the readers since the last barrier (one warp, or
"several"), each stamped with the block's barrier epoch. A `cp.async` writes its words when it
is issued and again when it lands (at the wait), since the hardware may write them at any
moment in between. Atomics are not checked. Kernels synchronized by means the check does not
model (mbarriers, named barriers with a thread count, distributed shared memory) are not
checked at all; the launch report says so.
"""

from __future__ import annotations

import numpy as np

from .errors import SharedMemoryRace

NONE, SEVERAL = -1, -2


def unchecked_reason(prog) -> str | None:
    """Why a program's shared memory cannot be race-checked, or None."""
    for ins in prog.code:
        if ins.root == "mbarrier" or "mbarrier" in ins.opcode.split("."):
            return "the kernel synchronizes through mbarriers"
        if ins.sync == "named":
            return "the kernel uses named barriers with thread counts"
        if "shared::cluster" in ins.opcode or ins.root in ("mapa", "getctarank"):
            return "the kernel uses distributed shared memory"
    return None


class RaceChecker:
    def __init__(self, st):
        nwords = st.shared.size // 4 + 1
        self.shared_size = st.shared_size
        self.w_warp = np.full(nwords, NONE, np.int16)
        self.w_epoch = np.zeros(nwords, np.uint16)
        self.r_warp = np.full(nwords, NONE, np.int16)
        self.r_epoch = np.zeros(nwords, np.uint16)
        self.epoch = np.ones(st.nblk, np.uint16)       # 0 never matches a fresh word

    def barrier(self, st, m):
        blocks = np.arange(st.nblk) if m is None else np.unique(st.block_in_batch[m])
        self.epoch[blocks] += np.uint16(1)

    def access(self, st, idx, off, nbytes: int, write: bool):
        """Threads `idx` access `nbytes` at region byte offsets `off` of shared memory."""
        if idx.size == 0:
            return
        off = np.asarray(off, np.int64)
        first, last = off // 4, (off + max(nbytes, 1) - 1) // 4
        span = int((last - first).max()) + 1
        words = np.concatenate([first + k for k in range(span)])
        owner = np.tile(np.arange(idx.size), span)
        keep = words <= np.tile(last, span)
        words, owner = words[keep], owner[keep]
        warp = (st.thread_linear[idx] // 32).astype(np.int16)[owner]
        ep = self.epoch[st.block_in_batch[idx]][owner]
        # the same word from several warps in this one instruction
        order = np.lexsort((warp, words))
        w_s, k_s = words[order], warp[order]
        dup = np.zeros(words.size, bool)
        same = (w_s[1:] == w_s[:-1]) & (k_s[1:] != k_s[:-1])
        dup[order[1:][same]] = True
        if write and dup.any():
            j = int(np.flatnonzero(dup)[0])
            self._raise(st, idx, owner, words, j, warp[j], "writes", None, "writes")
        prev_w = self.w_warp[words]
        bad = (self.w_epoch[words] == ep) & (prev_w != NONE) & (prev_w != warp)
        if bad.any():
            j = int(np.flatnonzero(bad)[0])
            self._raise(st, idx, owner, words, j, warp[j], "writes" if write else "reads",
                        int(prev_w[j]), "wrote")
        prev_r = self.r_warp[words]
        r_now = self.r_epoch[words] == ep
        if write:
            bad = r_now & ((prev_r == SEVERAL) | ((prev_r != NONE) & (prev_r != warp)))
            if bad.any():
                j = int(np.flatnonzero(bad)[0])
                other = None if prev_r[j] == SEVERAL else int(prev_r[j])
                self._raise(st, idx, owner, words, j, warp[j], "writes", other, "read")
            self.w_warp[words] = warp
            self.w_epoch[words] = ep
            return
        readers = np.where(r_now & (prev_r != NONE) & (prev_r != warp), SEVERAL, warp)
        readers[dup] = SEVERAL
        self.r_warp[words] = readers
        self.r_warp[words[dup]] = SEVERAL          # duplicates: the last assignment must not win
        self.r_epoch[words] = ep

    def retire(self, st, idx, off):
        """Reads by the warps of threads `idx` at byte offsets `off` are over (a wgmma the
        warp group waited for): they no longer conflict with later writes."""
        words = np.unique(np.asarray(off, np.int64) // 4)
        warp = (st.thread_linear[idx[:1]] // 32).astype(np.int16)
        mine = self.r_warp[words] == warp
        self.r_warp[words[mine]] = NONE

    def _raise(self, st, idx, owner, words, j, warp, doing, other, done):
        t = idx[owner[j]]
        addr = int(words[j]) * 4 - int(st.block_in_batch[t]) * self.shared_size
        who = "another warp" if other is None else f"warp {other}"
        raise st.error(SharedMemoryRace,
                       f"shared-memory race: warp {int(warp)} {doing} a word that {who} "
                       f"{done} with no barrier of the whole block in between", t,
                       max(addr, 0))
