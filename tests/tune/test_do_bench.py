"""tilelang.testing.do_bench: the emulator's counters, Triton's statistics and timing schedule
(with a stand-in clock), and its argument checks."""

from __future__ import annotations

import numpy as np
import pytest

from tilelang.testing import EmulatorCounts, do_bench, summarize
from tilelang.testing.bench import time_runs


def _vadd_args(n=5000):
    rng = np.random.default_rng(1)
    a = rng.random(n, dtype=np.float32)
    b = rng.random(n, dtype=np.float32)
    return a, b, np.zeros_like(a)


def test_emulator_counts_of_one_launch(mod):
    a, b, c = _vadd_args()
    got = []
    res = do_bench(lambda: got.append(mod.vadd[10](a, b, c, TILE=512)))
    assert isinstance(res, EmulatorCounts)
    assert res.time_ms is None and res.launches == 1
    rep = got[0]
    assert res.reports == [rep]
    assert res.instructions == rep.total_instructions > 0
    # three f32 arrays of 5000 elements, each read or written once (TILE = 4 x 128 threads:
    # no lane repeats another's access), every sector whole: 5000 * 4 / 32 = 625 sectors per
    # array; the padded lanes past 5000 touch nothing
    assert res.global_sectors == 3 * 625
    assert res.global_bytes == 3 * 5000 * 4
    assert res.issued == rep.total_issued >= rep.total_instructions / 32
    assert res.cost == pytest.approx(rep.total_issued + 8 * 1875 + rep.shared_wavefronts)
    np.testing.assert_array_equal(c, a + b)


def test_emulator_counts_sum_launches_and_ignore_warmup_rep(mod):
    a, b, c = _vadd_args(1000)
    one = do_bench(lambda: mod.vadd[4](a, b, c), backend="emulator")
    calls = []

    def twice():
        calls.append(1)
        mod.vadd[4](a, b, c)
        mod.vadd[4](a, b, c)
    two = do_bench(twice, warmup=1000, rep=1000)
    assert len(calls) == 1                      # the emulator runs `fn` once
    assert two.launches == 2
    assert two.instructions == 2 * one.instructions
    assert two.issued == 2 * one.issued
    assert two.global_sectors == 2 * one.global_sectors
    assert two.counters["launches"] == 2
    assert "2 launch(es)" in str(two)


def test_counters_are_off_again_after_do_bench(mod):
    from tilelang.runtime.emulator_backend import EmulatorBackend
    a, b, c = _vadd_args(1000)
    do_bench(lambda: mod.vadd[4](a, b, c))
    assert EmulatorBackend.observers == []
    rep = mod.vadd[4](a, b, c)
    assert rep.global_sectors == 0              # the back end's own setting: no memory counters


def test_summarize_matches_triton_statistics():
    times = [5.0, 1.0, 3.0, 2.0, 4.0]
    assert summarize(times) == 3.0
    assert summarize(times, return_mode="min") == 1.0
    assert summarize(times, return_mode="max") == 5.0
    assert summarize(times, return_mode="median") == 3.0
    assert summarize(times, return_mode="all") == times
    # linear interpolation between order statistics (torch.quantile's default)
    assert summarize(times, quantiles=[0.5, 0.2, 0.8]) == pytest.approx([3.0, 1.8, 4.2])
    assert summarize(times, quantiles=[0.25]) == pytest.approx(2.0)


class _Clock:
    """A stand-in for CUDA events: each fn() call takes `ms` of simulated time."""

    def __init__(self, ms: float):
        self.now, self.ms, self.flushes, self.syncs, self.order = 0.0, ms, 0, 0, []

    def event(self):
        clock = self

        class E:
            t = None

            def record(self):
                self.t = clock.now
                clock.order.append("record")

            def elapsed(self, other):
                return other.t - self.t
        return E()

    def synchronize(self):
        self.syncs += 1

    def flush(self):
        self.flushes += 1
        self.order.append("flush")


def test_timed_loop_follows_triton_schedule():
    clock = _Clock(0.5)
    calls = []

    def fn():
        calls.append(1)
        clock.now += clock.ms
        clock.order.append("fn")
    times = time_runs(fn, warmup=10, rep=20, timer=clock)
    # 5 estimate runs, then 10 / 0.5 = 20 warm-up runs and 20 / 0.5 = 40 timed runs
    assert len(calls) == 5 + 20 + 40
    assert times == [0.5] * 40
    assert clock.flushes == 5 + 40                 # the L2 is flushed before every timed run
    timed = clock.order[-4 * 40:]
    assert timed[:4] == ["flush", "record", "fn", "record"]


def test_timed_loop_runs_slow_functions_at_least_once():
    clock = _Clock(1000.0)
    calls = []

    def fn():
        calls.append(1)
        clock.now += clock.ms
    times = time_runs(fn, warmup=25, rep=100, timer=clock)
    assert len(calls) == 5 + 1 + 1 and times == [1000.0]


@pytest.mark.parametrize("kwargs, text", [
    ({"warmup": -1}, "`warmup` is -1"),
    ({"rep": "x"}, "`rep` is 'x'"),
    ({"quantiles": [1.5]}, "`quantiles` is [1.5]"),
    ({"quantiles": []}, "`quantiles` is []"),
    ({"return_mode": "avg"}, "`return_mode` is 'avg'"),
    ({"backend": "tpu"}, "`backend` is 'tpu'"),
])
def test_argument_errors(kwargs, text):
    with pytest.raises(ValueError) as e:
        do_bench(lambda: None, **kwargs)
    assert text in str(e.value)


def test_not_callable():
    with pytest.raises(TypeError, match="`fn` is int, not a callable"):
        do_bench(3)


def test_gpu_timing_without_gpu_is_a_clear_error():
    from gpu_probe import gpu_available
    if gpu_available():
        pytest.skip("a GPU is present")
    try:
        import torch
        if torch.cuda.is_available():
            pytest.skip("torch has a GPU")
    except ImportError:
        pass
    from tilelang.runtime.errors import BackendUnavailable
    with pytest.raises(BackendUnavailable) as e:
        do_bench(lambda: None, backend="cuda")
    assert e.value.diagnostics[0].code == "E0920"


def test_grad_to_none_and_tritons_argument_order():
    class T:
        grad = "old"
    t = T()
    clock = _Clock(1.0)
    seen = []

    def fn():
        seen.append(t.grad)
        t.grad = "set"                              # as a backward pass would
        clock.now += clock.ms
    time_runs(fn, 1, 3, clock, [t])
    # 5 estimate runs and 1 warm-up run untouched, then reset before each of the 3 timed
    assert seen == ["old"] + ["set"] * 5 + [None] * 3
    import inspect
    assert list(inspect.signature(do_bench).parameters)[:6] == [
        "fn", "warmup", "rep", "grad_to_none", "quantiles", "return_mode"]
