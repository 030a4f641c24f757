"""The async-proxy check: shared memory written by ordinary stores must be fenced before the
async proxy (wgmma operands, TMA stores) reads it.

On sm_90 `wgmma.mma_async` and `cp.async.bulk` read shared memory through the *async proxy*;
data written through the generic proxy (`st.shared`, `stmatrix`, `cp.async`) is guaranteed to
be seen by it only after a `fence.proxy.async` (PTX ISA, memory consistency model: proxies).
Leaving the fence out works by luck on the emulator (memory is one array) and may read stale
data on a GPU. So, in kernels that use those instructions, the emulator remembers which shared
words were written through the generic proxy (the PTX line of the last write) and clears them
when a thread of the block executes `fence.proxy.async` (any of its forms); an async-proxy
read of a word still marked is an `ExecutionError` naming both lines. The model is lenient: a
fence by any thread of the block covers the whole block's writes (the usual code fences in
every thread after the barrier that publishes the data, or in the issuing thread).
"""

from __future__ import annotations

import numpy as np

from .errors import ExecutionError

ASYNC_READERS = ("wgmma.mma_async", "cp.async.bulk", "tcgen05.mma", "tcgen05.cp")


def wanted(prog) -> bool:
    """Whether a program reads shared memory through the async proxy at all."""
    return any(d.opcode.startswith(ASYNC_READERS) and
               (d.root in ("wgmma", "tcgen05") or ".global.shared" in d.opcode)
               for d in prog.code)


class ProxyTracker:
    def __init__(self, st):
        self.line = np.zeros(st.shared.size // 4 + 1, np.int32)    # 0: clean

    def wrote(self, st, off, nbytes):
        """Generic-proxy writes of `nbytes` at byte offsets `off` (of the batch's array)."""
        off = np.asarray(off, np.int64).reshape(-1)
        if off.size == 0:
            return
        line = st.ins.line if st.ins is not None else -1
        for k in range(0, max(int(nbytes), 1), 4):
            self.line[(off + k) // 4] = line
        self.line[(off + max(int(nbytes), 1) - 1) // 4] = line

    def fence(self, st, m):
        blocks = np.arange(st.nblk) if m is None else np.unique(st.block_in_batch[m])
        words = st.shared_stride // 4 + 1
        for b in blocks:
            lo = b * st.shared_stride // 4
            self.line[lo:lo + words] = 0

    def check(self, st, off, nbytes, thread, what):
        """An async-proxy read of `nbytes` at byte offsets `off`."""
        off = np.asarray(off, np.int64).reshape(-1)
        words = np.unique(np.concatenate([off // 4, (off + int(nbytes) - 1) // 4]))
        hit = self.line[words]
        if hit.any():
            w = int(words[np.flatnonzero(hit)[0]])
            addr = w * 4 - int(st.block_in_batch[thread]) * st.shared_stride
            raise st.error(ExecutionError, f"{what} reads shared memory written at PTX line "
                           f"{int(hit[hit != 0][0])} through the generic proxy with no "
                           f"fence.proxy.async in between (the async proxy may read stale "
                           f"data on a GPU)", thread, max(addr, 0))
