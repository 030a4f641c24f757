"""benchmarks/instructions.py without Triton: the Tile columns of the table (SASS issued, PTX
issued and executed, per element), each kernel checked against NumPy inside the script, compiled
with the facts the runtime derives (32-bit offsets included) and the registers of the driver's
cubin."""

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
    assert [r[0] for r in rows] == ["| vadd", "| vadd (reqntid = 128)", "| rmsnorm"]
    for r in rows:
        assert r[1] == "1,024" and r[3:5] == ["-", "-"] and r[6:8] == ["-", "-"]
        assert r[9] == "-" and r[11] == "-" and r[13] == "- |"        # no Triton columns
        assert float(r[2]) > 0                                         # SASS per element
        # PTX warp-instructions issued x 32 >= thread-instructions executed (per element)
        assert float(r[5]) >= float(r[8]) > 0
        assert 0 < int(r[10]) <= 32 and r[12] == "100%"       # 100% occupancy at 128 threads
    # vadd at 1,024 elements per block of 128 threads: 8 per thread, two 128-bit loads of each
    # input, eight adds, two stores; at least those 14 SASS instructions per thread
    assert float(rows[0][2]) >= 14 / 8
    # a fixed block needs no test of the block size: fewer SASS instructions than `maxntid`
    assert float(rows[1][2]) < float(rows[0][2])
