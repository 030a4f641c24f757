"""benchmarks/instructions.py without Triton: the Tile columns of issue 14's table, each kernel
checked against NumPy inside the script, compiled with the facts the runtime derives (32-bit
offsets included) and the registers of the driver's cubin."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_tile_columns_without_triton(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TRITON_PYTHON"}
    env["PYTHONPATH"] = str(ROOT)
    p = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "instructions.py"),
                        "--kernels", "vadd,rmsnorm", "--widths", "1024",
                        "--triton-python", str(tmp_path / "no-python")],
                       capture_output=True, text=True, timeout=600, env=env)
    if p.returncode and "E0762" in p.stderr:
        pytest.skip("nvJitLink is not installed")
    assert p.returncode == 0, p.stderr
    rows = [line.split(" | ") for line in p.stdout.splitlines() if line.startswith("| vadd")
            or line.startswith("| rmsnorm")]
    assert [r[0] for r in rows] == ["| vadd", "| rmsnorm"]
    for r in rows:
        assert r[1] == "1,024" and r[3:5] == ["-", "-"]       # no Triton columns
        assert float(r[2].replace(",", "")) > 0
        # warp-instructions issued (the main figure) >= executed thread-instructions / 32
        # (the old unit, at the right, with no Triton figure or ratio beside it)
        assert r[10:] == ["-", "- |"]
        assert float(r[2].replace(",", "")) >= float(r[9].replace(",", "")) > 0
        assert 0 < int(r[5]) <= 32 and r[7] == "100%"         # 100% occupancy at 128 threads
