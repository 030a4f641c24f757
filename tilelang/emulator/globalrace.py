"""Global-memory data races between blocks (`EmulatorDevice(global_race_check=True)`).

The emulator's memory is sequentially consistent, so a spin lock or a "last block reduces"
counter written with relaxed atomics and plain loads works here although, under the PTX memory
model, nothing orders the data one block wrote before the lock's release with another block's
reads after taking it: a data race, which a GPU may resolve with stale data. This check follows
the model's release/acquire synchronization with vector clocks, one clock per block:

* a plain (weak) store records each byte's writer block and that block's current clock;
* a plain load or store of a byte another block wrote is a race unless this block has
  synchronized with that write: its vector clock has caught up with the writer's clock
  (bytes, not words: two blocks storing the two halves of a word do not conflict);
* a release (`st.release`, `red`/`atom` `.release`/`.acq_rel`) publishes the block's vector
  clock at the location (a 4-byte word) and starts a new epoch of the block; an acquire
  (`ld.acquire`, `atom` `.acquire`/`.acq_rel`) at the location joins what was published there;
* `fence.sc`/`fence.acq_rel` (and `membar`) publish to and join from one clock shared by all
  fences (lenient: any two fences synchronize); `barrier.cluster.wait` joins the clocks of the
  cluster's blocks;
* strong accesses (`.relaxed`, `.volatile`, atomics) are never data races themselves.

Blocks of one block share a clock: races inside a block are the shared-memory check's business.
Only the write-then-read and write-then-write orders are checked. Launches of more than 4,096
blocks are not checked.
"""

from __future__ import annotations

import numpy as np

from .errors import GlobalMemoryRace

MAX_BLOCKS = 4096


SEMS = ("relaxed", "acquire", "release", "acq_rel", "sc", "volatile", "mmio")


def sem_of(parts) -> str | None:
    """The memory-order qualifier of an opcode (None: a weak access)."""
    return next((p for p in parts[1:] if p in SEMS), None)


class GlobalRaceChecker:
    def __init__(self, nblocks: int, mem_size: int):
        self.n = nblocks
        self.vc = np.zeros((nblocks, nblocks), np.int32)
        self.vc[np.arange(nblocks), np.arange(nblocks)] = 1
        self.locs: dict = {}                      # word -> published vector clock
        self.fence_vc = np.zeros(nblocks, np.int32)
        self.w_blk = np.full(mem_size + 1, -1, np.int16)        # per byte
        self.w_clk = np.zeros(mem_size + 1, np.int32)
        self.w_line = np.zeros(mem_size + 1, np.int32)

    def _grow(self, words):
        top = int(words.max()) + 1 if words.size else 0
        if top > self.w_blk.size:
            extra = top - self.w_blk.size + (1 << 16)
            self.w_blk = np.concatenate([self.w_blk, np.full(extra, -1, np.int16)])
            self.w_clk = np.concatenate([self.w_clk, np.zeros(extra, np.int32)])
            self.w_line = np.concatenate([self.w_line, np.zeros(extra, np.int32)])

    @staticmethod
    def _bytes(idx, off, nbytes):
        off = np.asarray(off, np.int64).reshape(-1)
        n = max(int(nbytes), 1)
        return (off[:, None] + np.arange(n)[None, :]).reshape(-1), \
            np.repeat(np.asarray(idx).reshape(-1), n)

    def access(self, st, idx, off, nbytes, write: bool, strong: bool):
        """Threads `idx` access global byte offsets `off` (`nbytes` each)."""
        if idx.size == 0:
            return
        words, owner = self._bytes(idx, off, nbytes)
        self._grow(words)
        blk = st.block_ids[st.block_in_batch[owner]]
        wb = self.w_blk[words]
        if not strong:
            other = (wb >= 0) & (wb != blk)
            if other.any():
                seen = self.vc[blk[other], wb[other]]
                bad = seen < self.w_clk[words[other]]
                if bad.any():
                    j = np.flatnonzero(other)[np.flatnonzero(bad)[0]]
                    self._raise(st, int(owner[j]), int(wb[j]), int(self.w_line[words[j]]),
                                "writes" if write else "reads", int(words[j]))
        if write:
            self.w_blk[words] = -1 if strong else blk
            self.w_clk[words] = self.vc[blk, blk]
            self.w_line[words] = st.ins.line if st.ins is not None else 0
            if not strong:                   # two blocks storing one byte in one step
                clash = self.w_blk[words] != blk
                if clash.any():
                    j = int(np.flatnonzero(clash)[0])
                    self._raise(st, int(owner[j]), int(self.w_blk[words[j]]),
                                int(self.w_line[words[j]]), "writes", int(words[j]))

    def sync(self, st, idx, off, sem):
        """A strong access with `sem` at global byte offsets `off` by threads `idx`, in
        thread order: acquire joins the location's clock, release publishes to it."""
        acquire = sem in ("acquire", "acq_rel", "sc")
        release = sem in ("release", "acq_rel", "sc")
        if not (acquire or release) or idx.size == 0:
            return
        words = np.asarray(off, np.int64) // 4
        blks = st.block_ids[st.block_in_batch[np.asarray(idx)]]
        seen = set()
        for b, w in zip(blks.tolist(), words.tolist()):
            if (b, w) in seen:
                continue
            seen.add((b, w))
            loc = self.locs.get(w)
            if acquire and loc is not None:
                np.maximum(self.vc[b], loc, out=self.vc[b])
            if release:
                self.locs[w] = self.vc[b].copy() if loc is None else np.maximum(loc, self.vc[b])
                self.vc[b, b] += 1

    def fence(self, st, m):
        blocks = np.unique(st.block_ids[st.block_in_batch[st.active_index(m)]])
        for b in blocks.tolist():
            np.maximum(self.fence_vc, self.vc[b], out=self.fence_vc)
            self.vc[b, b] += 1
        for b in blocks.tolist():
            np.maximum(self.vc[b], self.fence_vc, out=self.vc[b])

    def cluster_sync(self, st, m):
        c = st.geom.cluster
        csize = c[0] * c[1] * c[2]
        if csize == 1:
            return
        bib = np.unique(st.block_in_batch[st.active_index(m)])
        for first in np.unique(bib - bib % csize).tolist():
            members = st.block_ids[first:first + csize]
            joined = self.vc[members].max(axis=0)
            self.vc[members] = joined
            self.vc[members, members] += 1

    def _raise(self, st, t, writer, line, doing, word):
        from .memory import GLOBAL_BASE
        g = st.geom
        wb = tuple(int(v) for v in g.block_coords(writer % g.nblocks))
        who = f"block {wb}"
        if st.rank_of_block is not None:       # a world launch: block ids run rank by rank
            who = f"rank {writer // g.nblocks}'s block {wb}"
        raise st.error(GlobalMemoryRace, f"global-memory data race: this block {doing} a word "
                       f"that {who} wrote (PTX line {line}) with no release/acquire "
                       f"synchronization between them (a lock or flag with relaxed atomics "
                       f"and no fence?)", t, GLOBAL_BASE + word)
