"""benchmarks/run.py: the CPU part runs, the results file says what was skipped and why, and
the plots are drawn from the GPU rows (when matplotlib is installed)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from rt_support import ROOT

BENCH = os.path.join(ROOT, "benchmarks")


def test_cpu_part_and_results_file(tmp_path):
    from gpu_probe import gpu_available
    r = subprocess.run([sys.executable, os.path.join(BENCH, "run.py"), "--only", "memory",
                        "attention", "--quick", "--out-dir", str(tmp_path)],
                       capture_output=True, text=True, timeout=600,
                       env={**os.environ, "TILELANG_CACHE_DIR": str(tmp_path / "c")})
    assert r.returncode == 0, r.stderr
    (md,) = [p for p in os.listdir(tmp_path) if p.endswith(".md")]
    text = (tmp_path / md).read_text()
    assert text.startswith("# Benchmarks, ")
    assert "## Memory-bound kernels (emulator counts)" in text
    rows = {ln.split("|")[1].strip() + " " + ln.split("|")[2].strip(): ln.split("|")
            for ln in text.splitlines() if ln.startswith("| vadd |")}
    # vadd moves every byte once: as many sectors as the fewest possible
    assert rows["vadd 65536"][4].strip() == rows["vadd 65536"][5].strip() == str(3 * 65536 * 4
                                                                               // 32)
    if os.path.exists(os.path.join(ROOT, "examples", "attention.tile")):
        assert "## Attention (emulator counts)" in text
        att = [ln.split("|") for ln in text.splitlines() if ln.startswith("| 1x128x64 |")]
        assert [a[2].strip() for a in att] == ["False", "True"]
        assert all(int(a[5]) > 0 for a in att)             # tensor-core instructions ran
    if gpu_available() and "torch is not installed" not in text:
        assert "## Memory-bound kernels (GPU)" in text
        gpu_rows = [ln for ln in text.splitlines() if ln.startswith("| softmax | 4096x256 |")]
        assert gpu_rows and "WRONG" not in gpu_rows[0]
    if not gpu_available():
        assert md.endswith("-cpu.md")
        assert "## Skipped" in text
        assert "- every GPU timing (memory, matmul, attention, tuning, GPU launches): " in text
        assert ("- plots: matplotlib is not installed" in text) or \
            ("- plots: no GPU family measured here" in text)


def test_plots_from_gpu_rows(tmp_path):
    pytest.importorskip("matplotlib")
    sys.path.insert(0, BENCH)
    try:
        import run
    finally:
        sys.path.remove(BENCH)
    data = {"memory": [{"family": f, "size": s, "tile_gbs": 1000.0, "torch_gbs": 900.0,
                        "bw": 4000.0} for f in ("vadd", "rmsnorm") for s in (2**20, 2**24)],
            "matmul": [{"dtype": "f16", "n": n, "tile": 500.0, "cublas": 600.0, "triton": None}
                       for n in (1024, 4096)],
            "attention": [{"d": 64, "causal": False, "seq": s, "tile": 300.0, "torch": 400.0}
                          for s in (512, 2048)]}
    made = run.plots(data, str(tmp_path), "day-gpu")
    assert [os.path.basename(p) for p in made] == ["day-gpu-memory.png", "day-gpu-matmul.png",
                                                   "day-gpu-attention.png"]
    for p in made:
        with open(p, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    assert run.plots({}, str(tmp_path), "none") == []


def test_only_runs_add_up_in_the_days_file(tmp_path):
    sys.path.insert(0, BENCH)
    try:
        import run
    finally:
        sys.path.remove(BENCH)
    path = tmp_path / "day.md"
    path.write_text("# Benchmarks\n\n- `python3 benchmarks/run.py --only memory` — x; 1 s.\n\n"
                    "<!-- family: memory -->\n\n## Memory old\n\nold table\n\n"
                    "<!-- family: matmul -->\n\n## Matmul old\n\nmm\n\n<!-- end -->\n\n"
                    "## Skipped in the last run\n\n- plots: none\n")
    rep = run.Report()
    rep.family = "memory"
    rep.blocks["memory"] = "\n## Memory new\n\nnew table\n"
    runs, blocks = run.merge(str(path), rep, "- `python3 benchmarks/run.py --only memory` — y")
    assert runs == ["- `python3 benchmarks/run.py --only memory` — x; 1 s.",
                    "- `python3 benchmarks/run.py --only memory` — y"]
    assert blocks == {"memory": "\n## Memory new\n\nnew table\n", "matmul": "## Matmul old\n\nmm"}
