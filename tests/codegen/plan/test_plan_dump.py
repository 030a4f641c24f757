"""`tilec --emit plan`: each kernel's code-generation plan as text (tilelang/codegen/plan/dump.py,
docs/codegen.md Plans), compared with golden files for the matmul (sm_90a and sm_80),
attention, softmax and histogram (fusion) examples, plus the command line's behaviour.

A change meant to change a plan regenerates the files (`TILELANG_REGEN_GOLDEN=1 python3 -m
pytest -q tests/codegen/plan/test_plan_dump.py`) and says why in its commit message."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

from tilelang.driver import compile_source
from tilelang.options import CompileOptions

ROOT = pathlib.Path(__file__).resolve().parents[3]
GOLDEN = pathlib.Path(__file__).resolve().parents[1] / "golden" / "plan"
_REGEN = os.environ.get("TILELANG_REGEN_GOLDEN") == "1"

CASES = [("matmul", "sm_90a", ()), ("matmul", "sm_80", ()), ("attention", "sm_90a", ()),
         ("softmax", "sm_90a", ()), ("softmax", "sm_90a", ("N=4096",)),
         ("histogram", "sm_90a", ())]


def _name(example, target, defines) -> str:
    return f"{example}.{target}" + "".join(f".{d.replace('=', '')}" for d in defines) + ".txt"


def _plan(example: str, target: str, defines=()) -> str:
    path = ROOT / "examples" / f"{example}.tile"
    res = compile_source(path.read_text(), str(path),
                         CompileOptions(target=target,
                                        defines=dict(d.split("=") for d in defines)),
                         until="plan")
    assert res.ok, [str(d) for d in res.diagnostics]
    assert res.ptx == "" and res.llvm_ir == ""          # the plan needs no LLVM
    return res.plan


@pytest.mark.parametrize("example,target,defines", CASES,
                         ids=[_name(*c)[:-4] for c in CASES])
def test_plan_dump_matches_its_golden_file(example, target, defines):
    got = _plan(example, target, defines)
    f = GOLDEN / _name(example, target, defines)
    if _REGEN:
        f.write_text(got, encoding="utf-8")
    assert got == f.read_text(encoding="utf-8")


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "tilelang.cli", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


def test_tilec_emit_plan_prints_the_plan_and_takes_the_compile_options():
    r = _cli("--emit", "plan", "examples/matmul.tile", "--arch", "sm_80")
    assert r.returncode == 0, r.stderr
    assert r.stdout == (GOLDEN / "matmul.sm_80.txt").read_text(encoding="utf-8")
    r = _cli("--emit", "plan", "examples/attention.tile", "--kernel", "attention", "-D",
             "T=bf16")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("kernel attention: sm_90a")
    r = _cli("--emit", "plan", "examples/softmax.tile", "-D", "N=4096", "--precision", "ieee")
    assert r.returncode == 0, r.stderr
    assert "precision ieee" in r.stdout and "repeats exact math" in r.stdout


def test_tilec_emit_plan_reports_user_errors_without_a_plan(tmp_path):
    bad = tmp_path / "bad.tile"
    bad.write_text("kernel k(x: Array[f32, 1]) {\n    let t = load(x, index = (0,), shape = (3,));\n}\n")
    r = _cli("--emit", "plan", bad)
    assert r.returncode == 1 and r.stdout == ""
    assert "error" in r.stderr and "Traceback" not in r.stderr
    r = _cli("--emit", "plan", "examples/matmul.tile", "--kernel", "nope")
    assert r.returncode == 1 and r.stdout == "" and "E0270" in r.stderr
