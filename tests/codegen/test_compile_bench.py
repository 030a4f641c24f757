"""benchmarks/compile_bench.py: the table is built from medians of the rounds, with ratios,
and both compilers run with their caches off (no processes are started here)."""

from __future__ import annotations

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "benchmarks"))

import compile_bench as cb  # noqa: E402


def test_table_medians_and_ratios():
    b = cb.Bench("sm_90a", "/some/python", 1)
    b.triton_version = "3.9.0"
    for v in (0.10, 0.30, 0.20):
        b.add("tile softmax whole", v)
    for v in (0.80, 0.40, 0.50):
        b.add("triton softmax whole", v)
    b.add("tile check", 0.09)
    b.add("tile parse", 60000.0)
    text = cb.report(b, 3)
    lines = text.splitlines()
    assert lines[0] == "| | Tile | Triton 3.9.0 | ratio | goal |"
    row = next(ln for ln in lines if ln.startswith("| softmax, whole process"))
    assert row.endswith("| 200 ms | 500 ms | 0.40 | ≤ 0.40 |")
    assert "| `tilec check examples/softmax.tile`, whole process | 90 ms | — | — | ≤ 100 ms |" \
        in lines
    assert "| parser, generated 5,000-line file | 60,000 lines/s | — | — | ≥ 50,000 lines/s |" \
        in lines
    # a measurement that did not run is a dash, not a zero
    row = next(ln for ln in lines if ln.startswith("| import of the compiler"))
    assert row.startswith("| import of the compiler | — | — | — |")
    assert "medians of 3 interleaved rounds" in text


def test_cold_compile_cpu_rows():
    b = cb.Bench("sm_90a", "/some/python", 1)
    b.triton_version = "3.9.0"
    for v in (0.30, 0.35, 0.32):
        b.add("tile matmul cold cpu", v)
    for v in (1.2, 1.0):
        b.add("triton matmul cold cpu", v)
    lines = cb.report(b, 3).splitlines()
    assert "| matmul, cold compile in process, CPU time | 320 ms | 1,100 ms | 0.29 |  |" in lines
    assert "| softmax, cold compile in process, CPU time | — | — | — |  |" in lines


def test_children_run_with_caches_off(tmp_path):
    env = cb.child_env(str(tmp_path))
    assert env["TRITON_ALWAYS_COMPILE"] == "1"
    assert env["TRITON_CACHE_DIR"].startswith(str(tmp_path))
    assert env["TILELANG_CACHE_DIR"].startswith(str(tmp_path))
    assert "PYTHONDONTWRITEBYTECODE" not in env
