"""Benchmarking helpers (docs/python-api.md, "Benchmarking and autotuning").

    from tilelang.testing import do_bench
    ms = do_bench(lambda: mod.matmul[grid](a, b, c))          # on a GPU: mean ms
    counts = do_bench(lambda: mod.vadd[5](a, b, c))           # on the emulator: EmulatorCounts
"""

from .bench import EmulatorCounts, count_emulator, do_bench, summarize

__all__ = ["do_bench", "EmulatorCounts", "count_emulator", "summarize"]
