"""Theoretical occupancy, waves and the per-kernel resource report (`tilec --report`).

Model (docs/launch.md, "Occupancy report", with the CUDA occupancy calculator's allocation rules):
- warps per block = ceil(threads / 32);
- registers are allocated per warp in units of 256 (regs * 32 rounded up), from a register file
  split into 4 sub-partitions (one per warp scheduler) of regs_per_sm / 4 each;
- shared memory per block = static + dynamic + 1 KiB reserved by the system (sm_80+), rounded up
  to 128 B, against the largest carveout of the SM;
- blocks per SM = min(warp slots, block slots, register file, shared memory); the smallest names
  the limiting resource.
"""

from __future__ import annotations

from math import ceil, prod
from typing import Mapping, Sequence

from tilelang.record import field, record

KiB = 1024


@record(frozen=True)
class ArchLimits:
    name: str
    max_warps_per_sm: int
    max_blocks_per_sm: int
    smem_per_sm: int               # bytes, largest carveout, reserved part included
    smem_per_block: int            # bytes, opt-in maximum for one block
    regs_per_sm: int = 65536
    max_regs_per_thread: int = 255
    max_regs_per_block: int = 65536
    reg_alloc_unit: int = 256      # registers, per warp
    reg_sub_partitions: int = 4
    smem_alloc_unit: int = 128     # bytes
    smem_reserved_per_block: int = 1 * KiB
    max_threads_per_block: int = 1024

    @property
    def max_threads_per_sm(self) -> int:
        return self.max_warps_per_sm * 32


# CUDA Programming Guide, "Technical Specifications per Compute Capability".
ARCH_LIMITS: dict[str, ArchLimits] = {a.name: a for a in (
    ArchLimits("sm_80", 64, 32, 164 * KiB, 163 * KiB),
    ArchLimits("sm_86", 48, 16, 100 * KiB, 99 * KiB),
    ArchLimits("sm_89", 48, 24, 100 * KiB, 99 * KiB),
    ArchLimits("sm_90", 64, 32, 228 * KiB, 227 * KiB),
    ArchLimits("sm_90a", 64, 32, 228 * KiB, 227 * KiB),
    ArchLimits("sm_100a", 64, 32, 228 * KiB, 227 * KiB),
    ArchLimits("sm_120", 48, 32, 100 * KiB, 99 * KiB),
    ArchLimits("sm_120a", 48, 32, 100 * KiB, 99 * KiB),
)}


def _round_up(x: int, unit: int) -> int:
    return -(-x // unit) * unit


@record(frozen=True)
class Occupancy:
    blocks_per_sm: int
    active_warps: int
    max_warps: int
    limiter: str                                # "registers", "shared memory", "threads", "blocks"
    limits: Mapping[str, int] = field(hash=False)   # blocks per SM allowed by each resource

    @property
    def fraction(self) -> float:
        return self.active_warps / self.max_warps

    @property
    def percent(self) -> float:
        return 100.0 * self.fraction


def occupancy(target: str | ArchLimits, threads: int | Sequence[int], regs_per_thread: int,
              smem_static: int = 0, smem_dynamic: int = 0) -> Occupancy:
    """Theoretical occupancy of one kernel on one SM of `target`."""
    lim = target if isinstance(target, ArchLimits) else ARCH_LIMITS[target]
    n = threads if isinstance(threads, int) else prod(threads)
    if not 1 <= n <= lim.max_threads_per_block:
        raise ValueError(f"{n} threads per block is outside 1..{lim.max_threads_per_block}")
    if not 0 <= regs_per_thread <= lim.max_regs_per_thread:
        raise ValueError(f"{regs_per_thread} registers per thread is outside "
                         f"0..{lim.max_regs_per_thread}")
    warps = ceil(n / 32)
    limits = {"threads": lim.max_warps_per_sm // warps, "blocks": lim.max_blocks_per_sm}
    if regs_per_thread:
        per_warp = _round_up(regs_per_thread * 32, lim.reg_alloc_unit)
        # The per-block register check assumes allocation in all sub-partitions at once, so
        # the warp count is rounded up to a multiple of 4 (as in CUDA's cuda_occupancy.h).
        if per_warp * _round_up(warps, lim.reg_sub_partitions) > lim.max_regs_per_block:
            limits["registers"] = 0
        else:
            part = lim.regs_per_sm // lim.reg_sub_partitions
            limits["registers"] = (part // per_warp) * lim.reg_sub_partitions // warps
    smem = _round_up(smem_static + smem_dynamic + lim.smem_reserved_per_block,
                     lim.smem_alloc_unit)
    if smem_static + smem_dynamic > lim.smem_per_block:
        limits["shared memory"] = 0
    else:
        limits["shared memory"] = lim.smem_per_sm // smem
    # On a tie the first named wins: the hardware slot caps before the kernel's own usage.
    order = ("threads", "blocks", "registers", "shared memory")
    blocks = min(limits.values())
    limiter = next(k for k in order if limits.get(k) == blocks)
    return Occupancy(blocks, blocks * warps, lim.max_warps_per_sm, limiter, limits)


@record(frozen=True)
class Waves:
    grid_blocks: int
    wave_size: int               # blocks that run at once: num_sms * blocks_per_sm
    waves: int
    tail_blocks: int             # blocks in the last wave
    last_wave_utilization: float # tail_blocks / wave_size


def waves(grid_blocks: int, blocks_per_sm: int, num_sms: int) -> Waves:
    """How a grid quantizes into waves on `num_sms` SMs (docs/launch.md, "Occupancy report")."""
    size = blocks_per_sm * num_sms
    if size <= 0 or grid_blocks <= 0:
        return Waves(grid_blocks, size, 0, 0, 0.0)
    count = ceil(grid_blocks / size)
    tail = grid_blocks - (count - 1) * size
    return Waves(grid_blocks, size, count, tail, tail / size)


@record(frozen=True)
class KernelReport:
    name: str
    target: str
    threads: tuple[int, ...]
    registers: int
    spill_stores: int
    spill_loads: int
    smem_static: int
    smem_dynamic: int
    directives: tuple[str, ...]
    occupancy: Occupancy
    waves: Waves | None = None


def kernel_report(name: str, target: str, threads: Sequence[int], *, registers: int,
                  spill_stores: int = 0, spill_loads: int = 0, smem_static: int = 0,
                  smem_dynamic: int = 0, directives: Sequence[str] = (),
                  grid_blocks: int | None = None, num_sms: int | None = None) -> KernelReport:
    """Build one report row; `link.KernelResources` supplies registers/spills/smem_static and
    `ptx_header.directive_lines` the directives."""
    occ = occupancy(target, threads, registers, smem_static, smem_dynamic)
    wv = waves(grid_blocks, occ.blocks_per_sm, num_sms) if grid_blocks and num_sms else None
    return KernelReport(name, target, tuple(threads), registers, spill_stores, spill_loads,
                        smem_static, smem_dynamic, tuple(directives), occ, wv)


def kernel_report_from(contract, resources, target: str, *, smem_dynamic: int = 0,
                       grid_blocks: int | None = None, num_sms: int | None = None,
                       directives: Sequence[str] = ()) -> KernelReport:
    """Report row from a `contract.KernelContract` and a `link.KernelResources`."""
    return kernel_report(contract.name, target, contract.threads, registers=resources.registers,
                         spill_stores=resources.spill_stores, spill_loads=resources.spill_loads,
                         smem_static=resources.smem_static, smem_dynamic=smem_dynamic,
                         directives=directives, grid_blocks=grid_blocks, num_sms=num_sms)


def _bytes(n: int) -> str:
    return f"{n // KiB} KiB" if n and n % KiB == 0 else f"{n} B"


def format_report(reports: Sequence[KernelReport]) -> str:
    """A plain-text table, one row per kernel, then the directives and waves of each."""
    head = ("kernel", "target", "threads", "regs", "spill st/ld", "smem static", "smem dyn",
            "blocks/SM", "occupancy", "limited by")
    rows = [head]
    for r in reports:
        o = r.occupancy
        rows.append((r.name, r.target, "x".join(map(str, r.threads)), str(r.registers),
                     f"{r.spill_stores}/{r.spill_loads} B", _bytes(r.smem_static),
                     _bytes(r.smem_dynamic), str(o.blocks_per_sm),
                     f"{o.percent:.1f}% ({o.active_warps}/{o.max_warps} warps)", o.limiter))
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    for r in reports:
        extra = []
        if r.directives:
            extra.append("  directives: " + "; ".join(r.directives))
        if r.waves:
            w = r.waves
            extra.append(f"  grid {w.grid_blocks} blocks: {w.waves} wave(s) of {w.wave_size}, "
                         f"last wave {w.tail_blocks} block(s) = "
                         f"{100 * w.last_wave_utilization:.2f}% of the GPU")
        if extra:
            lines += [f"{r.name}:"] + extra
    return "\n".join(lines)
