"""Launch counters: dynamic instructions per opcode, global sectors, shared bank conflicts."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np


class Counters:
    """Accumulated while a launch runs; turned into a `LaunchReport` at the end."""

    def __init__(self, ncode: int, detailed: bool = True):
        self.per_pc = np.zeros(ncode, np.int64)
        self.detailed = detailed
        self.global_requests = 0
        self.global_sectors = 0
        self.global_bytes = 0
        self.shared_requests = 0
        self.shared_wavefronts = 0
        self.bank_conflicts = 0
        self.clock = 0

    def record_global(self, st, idx, off, size):
        """One request per warp that takes part; sectors = distinct 32-byte segments it
        touches. Threads arrive in batch order (warps ascending), so the usual coalesced case
        is counted in linear time; anything else falls back to a sort."""
        if idx.size == 0:
            return
        warps = st.warp_global[idx]
        first = off // 32
        last = (off + size - 1) // 32
        spans = int((last - first).max())
        w = warps if spans == 0 else np.concatenate([warps] * (spans + 1))
        s = first if spans == 0 else np.concatenate([first + k for k in range(spans + 1)])
        keep = s <= (last if spans == 0 else np.concatenate([last] * (spans + 1)))
        key = (w[keep] << 40) + s[keep]
        self.global_sectors += _distinct(key)
        self.global_requests += 1 + int(np.count_nonzero(warps[1:] != warps[:-1]))
        self.global_bytes += idx.size * size

    def record_shared(self, st, idx, off, size):
        """Bank conflicts: per warp, the most distinct 4-byte words that fall in one bank.

        A request needing k wavefronts counts k - (minimum wavefronts) conflicts; accesses
        wider than 4 bytes are split into their 4-byte words (the hardware serves 8/16-byte
        accesses in 2/4 phases, which is the minimum used here).
        """
        if idx.size == 0:
            return
        nwords = max(size // 4, 1)
        w0 = int(st.warp_global[idx[0]])
        nw = int(st.warp_global[idx[-1]]) - w0 + 1
        # (warp, lane × word) matrix of the words touched; -1 where no access
        mat = np.full((nw, 32 * nwords), -1, np.int64)
        rows = st.warp_global[idx] - w0
        for k in range(nwords):
            mat[rows, st.lane[idx] * nwords + k] = off // 4 + k
        mat.sort(axis=1)                       # rows are short: cheap, no global sort
        new = np.ones(mat.shape, bool)
        new[:, 1:] = mat[:, 1:] != mat[:, :-1]
        new &= mat >= 0
        r, c = np.nonzero(new)
        per_bank = np.bincount(r * 32 + mat[r, c] % 32, minlength=nw * 32).reshape(nw, 32)
        present = np.zeros(nw, bool)
        present[rows] = True
        per_warp = per_bank.max(axis=1)[present]
        phases = max(1, (size * 32) // 128)
        waves = np.maximum(per_warp, phases)
        self.shared_requests += int(per_warp.size)
        self.shared_wavefronts += int(waves.sum())
        self.bank_conflicts += int((waves - phases).sum())


def _distinct(key):
    """Number of distinct values; linear when `key` is already non-decreasing."""
    if key.size < 2:
        return int(key.size)
    d = np.diff(key)
    if (d >= 0).all():
        return 1 + int(np.count_nonzero(d))
    return int(np.unique(key).size)


@dataclass
class LaunchReport:
    """What a launch did. `print(report)` gives a table."""
    kernel: str
    grid: tuple
    block: tuple
    cluster: tuple
    threads: int
    instructions: dict = field(default_factory=dict)   # opcode -> thread-instructions
    global_requests: int = 0
    global_sectors: int = 0
    global_bytes: int = 0
    shared_requests: int = 0
    shared_wavefronts: int = 0
    bank_conflicts: int = 0
    seconds: float = 0.0
    output: str = ""                                     # text printed by vprintf

    @property
    def total_instructions(self) -> int:
        return sum(self.instructions.values())

    @property
    def coalescing_efficiency(self) -> float:
        """Bytes requested / bytes moved in 32-byte sectors (1.0 = perfectly coalesced)."""
        return self.global_bytes / (32 * self.global_sectors) if self.global_sectors else 1.0

    @property
    def sectors_per_request(self) -> float:
        return self.global_sectors / self.global_requests if self.global_requests else 0.0

    def __str__(self) -> str:
        lines = [f"kernel {self.kernel}  grid={self.grid} block={self.block} "
                 f"cluster={self.cluster}  threads={self.threads}  {self.seconds:.3f} s",
                 f"  thread-instructions: {self.total_instructions}"]
        for opc, n in sorted(self.instructions.items(), key=lambda kv: -kv[1]):
            lines.append(f"    {opc:<32} {n:>14}")
        lines.append(f"  global: {self.global_requests} requests, {self.global_sectors} "
                     f"sectors ({self.sectors_per_request:.2f}/request), coalescing "
                     f"efficiency {self.coalescing_efficiency:.1%}")
        lines.append(f"  shared: {self.shared_requests} requests, {self.shared_wavefronts} "
                     f"wavefronts, {self.bank_conflicts} bank conflicts")
        return "\n".join(lines)


def make_report(prog, counters: Counters, geom, seconds: float, output: str) -> LaunchReport:
    per_op = Counter()
    nz = np.flatnonzero(counters.per_pc)
    for pc in nz:
        per_op[prog.code[pc].opcode] += int(counters.per_pc[pc])
    return LaunchReport(prog.kernel.name, geom.grid, geom.block, geom.cluster,
                        geom.nblocks * geom.tpb, dict(per_op), counters.global_requests,
                        counters.global_sectors, counters.global_bytes,
                        counters.shared_requests, counters.shared_wavefronts,
                        counters.bank_conflicts, seconds, output)
