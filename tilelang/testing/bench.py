"""`do_bench`: time a function on the GPU, or count what it does on the emulator.

On a GPU (as Triton's `do_bench`): `fn` runs once, then five times to estimate its time, then
`warmup` ms worth of runs untimed, then `rep` ms worth of runs each between two CUDA events,
with a 256 MB buffer cleared before each so no run finds its data in L2. The result is the
mean time in ms (or `return_mode` "min", "max", "median", "all"), or the requested quantiles.

On the emulator, time means nothing (the CPU runs the PTX), so `fn` runs once with the
emulator's counters on and the result is an `EmulatorCounts`: `time_ms` is None, the counters
of every launch `fn` made are summed, and `cost` is the tuner's cost model (docs/python-api.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Sequence

RETURN_MODES = ("min", "max", "mean", "median", "all")
FLUSH_BYTES = 256 << 20          # larger than any GPU's L2 (H100/H200: 50 MB)

# The emulator cost model: estimated issue slots of one launch (docs/python-api.md).
COST_PER_WARP_INSTRUCTION = 1.0
COST_PER_GLOBAL_SECTOR = 8.0     # a 32-byte sector moved to or from L2/DRAM
COST_PER_SHARED_WAVEFRONT = 1.0  # one pass of a shared-memory access (conflicts add passes)


@dataclass
class EmulatorCounts:
    """What `do_bench` returns on the emulator: counters instead of a time."""

    launches: int = 0
    instructions: int = 0            # thread-instructions executed
    issued: int = 0                  # warp-instructions issued (predicated off or not)
    global_requests: int = 0
    global_sectors: int = 0          # 32-byte sectors moved
    global_bytes: int = 0            # bytes the threads asked for
    shared_requests: int = 0
    shared_wavefronts: int = 0
    bank_conflicts: int = 0
    reports: list = field(default_factory=list, repr=False)   # the LaunchReports
    time_ms: None = None             # never a time: the emulator's speed is not the GPU's

    @property
    def counters(self) -> dict:
        return {k: getattr(self, k) for k in (
            "launches", "instructions", "issued", "global_requests", "global_sectors", "global_bytes",
            "shared_requests", "shared_wavefronts", "bank_conflicts")}

    @property
    def cost(self) -> float:
        """Estimated issue slots: warp-instructions issued, plus 8 per global 32-byte
        sector, plus 1 per shared-memory wavefront."""
        return (COST_PER_WARP_INSTRUCTION * self.issued
                + COST_PER_GLOBAL_SECTOR * self.global_sectors
                + COST_PER_SHARED_WAVEFRONT * self.shared_wavefronts)

    def add(self, rep) -> None:
        self.launches += 1
        self.instructions += rep.total_instructions
        self.issued += rep.total_issued
        for k in ("global_requests", "global_sectors", "global_bytes", "shared_requests",
                  "shared_wavefronts", "bank_conflicts"):
            setattr(self, k, getattr(self, k) + getattr(rep, k))
        self.reports.append(rep)

    def __str__(self) -> str:
        return (f"{self.launches} launch(es): {self.instructions} thread-instructions, "
                f"{self.issued} warp-instructions issued, "
                f"{self.global_sectors} global sectors ({self.global_bytes} B requested), "
                f"{self.shared_wavefronts} shared wavefronts ({self.bank_conflicts} bank "
                f"conflicts); cost {self.cost:.0f}")


def _check_args(warmup, rep, quantiles, return_mode):
    for name, v in (("warmup", warmup), ("rep", rep)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not v >= 0 \
                or math.isinf(v):
            raise ValueError(f"do_bench: `{name}` is {v!r}; it is a time in ms (a number "
                             "at least 0)")
    if return_mode not in RETURN_MODES:
        raise ValueError(f"do_bench: `return_mode` is {return_mode!r}; it is one of "
                         + ", ".join(RETURN_MODES))
    if quantiles is not None:
        try:
            qs = [float(q) for q in quantiles]
        except (TypeError, ValueError):
            raise ValueError(f"do_bench: `quantiles` is {quantiles!r}; it is a list of "
                             "numbers in [0, 1]") from None
        if not qs or not all(0.0 <= q <= 1.0 for q in qs):
            raise ValueError(f"do_bench: `quantiles` is {quantiles!r}; it is a non-empty "
                             "list of numbers in [0, 1]")
        return qs
    return None


def summarize(times: Sequence[float], quantiles=None, return_mode: str = "mean"):
    """Triton's summary of the per-run times: the quantiles (linear interpolation; a single
    one as a number) when asked for, else the `return_mode` statistic ("all": the list)."""
    import numpy as np
    t = np.asarray(times, dtype=np.float64)
    if quantiles is not None:
        out = [float(x) for x in np.quantile(t, quantiles)]
        return out[0] if len(out) == 1 else out
    if return_mode == "all":
        return [float(x) for x in t]
    return float(getattr(np, return_mode)(t))


def do_bench(fn: Callable[[], object], warmup: float = 25, rep: float = 100,
             grad_to_none=None, quantiles: Sequence[float] | None = None,
             return_mode: str = "mean", *, backend=None):
    """Time `fn` (a callable that launches kernels) on the GPU, in ms, or count what it does
    on the emulator (an `EmulatorCounts`). The arguments are Triton's, in its order
    (`grad_to_none`: tensors whose `.grad` is reset before each timed run). `backend`: "cuda",
    "emulator", or None to decide by what `fn` launches (anything on the emulator: the
    emulator; else the GPU)."""
    if not callable(fn):
        raise TypeError(f"do_bench: `fn` is {type(fn).__name__}, not a callable")
    qs = _check_args(warmup, rep, quantiles, return_mode)
    name = getattr(backend, "name", backend)
    if name not in (None, "cuda", "emulator"):
        raise ValueError(f"do_bench: `backend` is {backend!r}; it is 'cuda', 'emulator' or "
                         "None (decided by what `fn` launches)")
    if name == "emulator":
        counts = count_emulator(fn)
        return counts
    if name is None:
        counts = count_emulator(fn)          # the first call, as Triton's, also warms up
        if counts.launches:
            return counts
    else:
        fn()
    timer = _gpu_timer()
    return summarize(time_runs(fn, warmup, rep, timer, grad_to_none), qs, return_mode)


def count_emulator(fn: Callable[[], object]) -> EmulatorCounts:
    """Run `fn` once and sum the counters of every emulator launch it makes."""
    from tilelang.runtime.emulator_backend import EmulatorBackend
    counts = EmulatorCounts()
    EmulatorBackend.observers.append(counts.add)
    try:
        fn()
    finally:
        EmulatorBackend.observers.remove(counts.add)
    return counts


def time_runs(fn, warmup: float, rep: float, timer, grad_to_none=None) -> list[float]:
    """The timed loop (Triton's schedule) with a `timer`: event() -> object with record(),
    elapsed(other) in ms; synchronize(); flush() clears the L2 by writing a large buffer."""
    timer.synchronize()
    start, end = timer.event(), timer.event()
    start.record()
    for _ in range(5):
        timer.flush()
        fn()
    end.record()
    timer.synchronize()
    estimate = max(start.elapsed(end) / 5, 1e-6)
    n_warmup = max(1, int(warmup / estimate))
    n_repeat = max(1, int(rep / estimate))
    starts = [timer.event() for _ in range(n_repeat)]
    ends = [timer.event() for _ in range(n_repeat)]
    for _ in range(n_warmup):
        fn()
    for i in range(n_repeat):
        for x in grad_to_none or ():
            x.grad = None
        timer.flush()
        starts[i].record()
        fn()
        ends[i].record()
    timer.synchronize()
    return [s.elapsed(e) for s, e in zip(starts, ends)]


_TIMER = None


def _gpu_timer():
    """CUDA events on the current stream: torch's when torch has a GPU (kernels launched with
    torch tensors go on its current stream), else the driver's on the default stream. One per
    process, so the 256 MB flush buffer is allocated once."""
    global _TIMER
    if _TIMER is None:
        try:
            import torch
            if torch.cuda.is_available():
                _TIMER = _TorchTimer(torch)
        except ImportError:
            pass
        if _TIMER is None:
            _TIMER = _DriverTimer()
    return _TIMER


class _TorchEvent:
    __slots__ = ("e",)

    def __init__(self, torch):
        self.e = torch.cuda.Event(enable_timing=True)

    def record(self):
        self.e.record()

    def elapsed(self, other) -> float:
        return self.e.elapsed_time(other.e)


class _TorchTimer:
    def __init__(self, torch):
        self.torch = torch
        self.cache = torch.empty(FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")

    def event(self):
        return _TorchEvent(self.torch)

    def synchronize(self):
        self.torch.cuda.synchronize()

    def flush(self):
        self.cache.zero_()


class _DriverEvent:
    __slots__ = ("t", "e")

    def __init__(self, timer):
        self.t = timer
        self.e = timer.check(timer.drv.cuEventCreate(0), "cuEventCreate")

    def record(self):
        self.t.check(self.t.drv.cuEventRecord(self.e, 0), "cuEventRecord")

    def elapsed(self, other) -> float:
        return float(self.t.check(self.t.drv.cuEventElapsedTime(self.e, other.e),
                                  "cuEventElapsedTime"))

    def __del__(self):
        try:
            self.t.drv.cuEventDestroy(self.e)
        except Exception:
            pass


class _DriverTimer:
    """The same with cuda-python's driver API (no torch): events and cuMemsetD8Async on the
    legacy default stream, which orders against every blocking stream."""

    def __init__(self):
        from tilelang.runtime.module import get_backend
        be = get_backend("cuda")                # BackendUnavailable (E0920) without a GPU
        self.drv = be.drv
        self.backend = be
        self.buf = be.malloc(FLUSH_BYTES)

    def check(self, result, what: str):
        return self.backend._check(result, what)

    def event(self):
        return _DriverEvent(self)

    def synchronize(self):
        self.check(self.drv.cuCtxSynchronize(), "cuCtxSynchronize")

    def flush(self):
        self.check(self.drv.cuMemsetD8Async(self.buf, 0, FLUSH_BYTES, 0), "cuMemsetD8Async")

    def __del__(self):
        try:
            self.backend.free(self.buf)
        except Exception:
            pass
