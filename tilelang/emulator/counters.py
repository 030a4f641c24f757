"""Launch counters: dynamic instructions per opcode, global sectors, shared bank conflicts.

Instructions are counted three ways, per PTX instruction (pc):
- executed thread-instructions (`per_pc`): threads whose guard predicate is true, as ncu's
  `not_predicated_off_thread_inst_executed`;
- issued thread-instructions (`issued_threads`): the threads active at the instruction
  whatever its guard (`thread_inst_executed`);
- issued warp-instructions (`issued_warps`): once per warp with at least one active thread
  there, whatever its guard (`inst_executed`): what the warp schedulers issue. A branch that
  is not taken, or an `@p st` with `p` false in every lane, costs nothing in the first
  count and one issue slot per warp in this one.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np


class Counters:
    """Accumulated while a launch runs; turned into a `LaunchReport` at the end."""

    def __init__(self, ncode: int, detailed: bool = True):
        self.per_pc = np.zeros(ncode, np.int64)
        self.issued_threads = np.zeros(ncode, np.int64)
        self.issued_warps = np.zeros(ncode, np.int64)
        self.detailed = detailed
        self.global_requests = 0
        self.global_sectors = 0
        self.global_bytes = 0
        self.shared_requests = 0
        self.shared_wavefronts = 0
        self.bank_conflicts = 0
        self.clock = 0
        # per PTX line: [requests, sectors, bytes] / [requests, wavefronts, conflicts]
        self.global_lines: dict[int, list] = {}
        self.shared_lines: dict[int, list] = {}

    def fold_full(self, full, threads: int, warps: int) -> None:
        """Add a batch's steps run by all its `threads` (in `warps`), counted per pc."""
        steps = np.asarray(full, np.int64)
        self.issued_threads += steps * threads
        self.issued_warps += steps * warps

    @staticmethod
    def _line(st):
        return st.ins.line if st.ins is not None else 0

    def record_global(self, st, idx, off, size):
        """One request per warp that takes part; sectors = distinct 32-byte segments it
        touches. Threads arrive in batch order (warps ascending), so the usual coalesced case
        is counted in linear time; anything else falls back to a sort. `size` is one number
        or one per thread (cp.async with a src-size reads only that many bytes)."""
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
        sectors = _distinct(key)
        requests = 1 + int(np.count_nonzero(warps[1:] != warps[:-1]))
        nbytes = int(np.sum(np.broadcast_to(size, idx.shape)))
        self.global_sectors += sectors
        self.global_requests += requests
        self.global_bytes += nbytes
        acc = self.global_lines.setdefault(self._line(st), [0, 0, 0])
        acc[0] += requests
        acc[1] += sectors
        acc[2] += nbytes

    def record_shared(self, st, idx, off, size):
        """Bank conflicts of one ld/st/atom on shared memory (or the shared side of cp.async).

        The warp's request is served in phases: all 32 lanes for accesses of up to 4 bytes,
        half-warps (lanes 0-15, 16-31) for 8 bytes, quarter-warps for 16 bytes, so that one
        phase asks for at most 128 bytes. A phase needs as many wavefronts as the largest
        number of distinct 4-byte words it touches in one of the 32 banks (equal words are
        broadcast); each wavefront beyond one per phase is a bank conflict.
        """
        if idx.size == 0:
            return
        nwords = max(size // 4, 1)
        lanes = 32 if size <= 4 else 128 // size
        nph = 32 // lanes
        word0 = np.asarray(off, np.int64) // 4
        if idx.size == st.T and st.tpb % 32 == 0:
            # every thread of the batch, warps complete and in order: the matrix of words
            # is a reshape (the common case; no scatter)
            nrows = st.T // lanes
            mat = (word0.reshape(nrows, lanes, 1) + np.arange(nwords)).reshape(nrows, -1)
            self._waves(st, st.T // 32, mat, None)
            return
        w0 = int(st.warp_global[idx[0]])
        nw = int(st.warp_global[idx[-1]]) - w0 + 1
        lane = st.lane[idx]
        rows = (st.warp_global[idx] - w0) * nph + lane // lanes
        cols = (lane % lanes) * nwords
        self._count_shared(st, nw, nw * nph, rows, cols, word0, nwords, lanes * nwords)

    def record_ldmatrix(self, st, idx, addrs, nmat):
        """ldmatrix / stmatrix .x1/.x2/.x4: lane 8i + r gives the 16-byte row r of matrix i,
        and the hardware reads (writes) one matrix per phase: 8 rows of 16 bytes, at best
        one 128-byte wavefront. `idx` are the lanes that give rows (lane < 8 * nmat)."""
        if idx.size == 0:
            return
        w0 = int(st.warp_global[idx[0]])
        nw = int(st.warp_global[idx[-1]]) - w0 + 1
        lane = st.lane[idx]
        rows = (st.warp_global[idx] - w0) * nmat + lane // 8
        self._count_shared(st, nw, nw * nmat, rows, (lane % 8) * 4, addrs // 4, 4, 32)

    def _count_shared(self, st, nwarps, nrows, rows, cols, word0, nwords, ncols):
        """rows: the phase of each access, cols: its first column in the phase, word0: its
        first 4-byte word; counts wavefronts per present phase."""
        # (phase, lane x word) matrix of the words touched; -1 where no access
        mat = np.full((nrows, ncols), -1, np.int64)
        for k in range(nwords):
            mat[rows, cols + k] = word0 + k
        present = np.zeros(nrows, bool)
        present[rows] = True
        warps = np.zeros(nwarps, bool)
        warps[rows // (nrows // nwarps)] = True
        self._waves(st, int(warps.sum()), mat, present)

    def _waves(self, st, requests, mat, present):
        """Wavefronts of each phase (row of `mat`: its 4-byte words, -1 for none) and the
        totals; `present` selects the phases that took part (None: all)."""
        nrows = mat.shape[0]
        mat.sort(axis=1)                       # rows are short: cheap, no global sort
        new = np.ones(mat.shape, bool)
        new[:, 1:] = mat[:, 1:] != mat[:, :-1]
        new &= mat >= 0
        bank = (mat % 32) + 32 * np.arange(nrows)[:, None]
        per_bank = np.bincount(bank.ravel(), weights=new.ravel(),
                               minlength=nrows * 32).reshape(nrows, 32)
        waves = per_bank.max(axis=1).astype(np.int64)
        if present is not None:
            waves = waves[present]
        wavefronts = int(waves.sum())
        conflicts = wavefronts - int(waves.size)
        self.shared_requests += requests
        self.shared_wavefronts += wavefronts
        self.bank_conflicts += conflicts
        acc = self.shared_lines.setdefault(self._line(st), [0, 0, 0])
        acc[0] += requests
        acc[1] += wavefronts
        acc[2] += conflicts


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
    #                                                     executed (guard true)
    global_requests: int = 0
    global_sectors: int = 0
    global_bytes: int = 0
    shared_requests: int = 0
    shared_wavefronts: int = 0
    bank_conflicts: int = 0
    seconds: float = 0.0
    output: str = ""                                     # text printed by vprintf
    race_check: str = ""                                 # what the race check found
    global_lines: dict = field(default_factory=dict)    # PTX line -> [requests, sectors, bytes]
    shared_lines: dict = field(default_factory=dict)    # PTX line -> [requests, wavefronts,
    #                                                     conflicts]
    issued: dict = field(default_factory=dict)          # opcode -> warp-instructions issued
    issued_threads: dict = field(default_factory=dict)  # opcode -> thread-instructions issued
    #                                                     (active threads, whatever the guard)
    issued_lines: dict = field(default_factory=dict)    # PTX line -> warp-instructions issued
    #                                                     (tilelang.tools.sass.sass_issued)

    def bank_conflicts_in(self, lines) -> int:
        """Bank conflicts of the shared-memory instructions on these PTX lines."""
        return sum(self.shared_lines[n][2] for n in lines if n in self.shared_lines)

    def coalescing_in(self, lines) -> float:
        """Coalescing efficiency of the global accesses on these PTX lines (1.0 if none)."""
        got = [self.global_lines[n] for n in lines if n in self.global_lines]
        sectors = sum(g[1] for g in got)
        return sum(g[2] for g in got) / (32 * sectors) if sectors else 1.0

    @property
    def total_instructions(self) -> int:
        """Thread-instructions executed: active threads whose guard predicate is true."""
        return sum(self.instructions.values())

    @property
    def total_issued(self) -> int:
        """Warp-instructions issued: each instruction once per warp with an active thread
        there, predicated off or not (ncu's inst_executed)."""
        return sum(self.issued.values())

    @property
    def total_issued_threads(self) -> int:
        """Thread-instructions issued: active threads, whatever the guard predicate."""
        return sum(self.issued_threads.values())

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
                 f"  thread-instructions: {self.total_instructions} executed, "
                 f"{self.total_issued_threads} issued; warp-instructions issued: "
                 f"{self.total_issued}"]
        for opc, n in sorted(self.issued.items(), key=lambda kv: -kv[1]):
            lines.append(f"    {opc:<32} {self.instructions.get(opc, 0):>14} executed "
                         f"{n:>12} warp-issued")
        lines.append(f"  global: {self.global_requests} requests, {self.global_sectors} "
                     f"sectors ({self.sectors_per_request:.2f}/request), coalescing "
                     f"efficiency {self.coalescing_efficiency:.1%}")
        lines.append(f"  shared: {self.shared_requests} requests, {self.shared_wavefronts} "
                     f"wavefronts, {self.bank_conflicts} bank conflicts")
        return "\n".join(lines)


def make_report(prog, counters: Counters, geom, seconds: float, output: str) -> LaunchReport:
    per_op, issued, issued_threads, lines = Counter(), Counter(), Counter(), Counter()
    for pc in np.flatnonzero(counters.issued_warps):
        opc = prog.code[pc].opcode
        per_op[opc] += int(counters.per_pc[pc])
        issued[opc] += int(counters.issued_warps[pc])
        lines[prog.code[pc].line] += int(counters.issued_warps[pc])
        issued_threads[opc] += int(counters.issued_threads[pc])
    per_op = Counter({k: v for k, v in per_op.items() if v})
    return LaunchReport(prog.kernel.name, geom.grid, geom.block, geom.cluster,
                        geom.nblocks * geom.tpb, dict(per_op), counters.global_requests,
                        counters.global_sectors, counters.global_bytes,
                        counters.shared_requests, counters.shared_wavefronts,
                        counters.bank_conflicts, seconds, output,
                        global_lines=dict(counters.global_lines),
                        shared_lines=dict(counters.shared_lines), issued=dict(issued),
                        issued_threads=dict(issued_threads), issued_lines=dict(lines))
