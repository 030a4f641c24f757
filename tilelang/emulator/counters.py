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
        """One request per warp that takes part; sectors = distinct 32-byte segments."""
        if idx.size == 0:
            return
        warps = st.warp_global[idx]
        first = off // 32
        last = (off + size - 1) // 32
        keys_w = [warps]
        keys_s = [first]
        if (last != first).any():
            for extra in range(1, int((last - first).max()) + 1):
                sel = first + extra <= last
                keys_w.append(warps[sel])
                keys_s.append(first[sel] + extra)
        w = np.concatenate(keys_w)
        s = np.concatenate(keys_s)
        pairs = np.unique(np.stack([w, s]), axis=1) if w.size > 1 else np.stack([w, s])
        self.global_sectors += pairs.shape[1]
        self.global_requests += np.unique(warps).size
        self.global_bytes += idx.size * size

    def record_shared(self, st, idx, off, size):
        """Bank conflicts: per warp, the most distinct 4-byte words that fall in one bank.

        A request needing k wavefronts counts k-1 conflicts. Accesses wider than 4 bytes are
        split into 4-byte words (the hardware splits 8/16-byte accesses into phases; this is
        the same count when a warp's addresses are distinct).
        """
        if idx.size == 0:
            return
        warps = st.warp_global[idx]
        nwords = max(size // 4, 1)
        words = [off // 4 + k for k in range(nwords)]
        w = np.concatenate([warps] * nwords)
        word = np.concatenate(words)
        bank = word % 32
        uniq = np.unique(np.stack([w, bank, word]), axis=1)          # distinct words
        wb, counts = np.unique(uniq[:2], axis=1, return_counts=True)  # words per (warp, bank)
        # wavefronts per warp = max words in one bank (per phase of 32 lanes × 4 bytes)
        order = np.argsort(wb[0], kind="stable")
        wsorted, csorted = wb[0][order], counts[order]
        starts = np.flatnonzero(np.r_[True, wsorted[1:] != wsorted[:-1]])
        per_warp = np.maximum.reduceat(csorted, starts)
        phases = max(1, (size * 32) // 128)
        waves = np.maximum(per_warp, phases)
        self.shared_requests += per_warp.size
        self.shared_wavefronts += int(waves.sum())
        self.bank_conflicts += int((waves - phases).sum())


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
