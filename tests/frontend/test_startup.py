"""What `tilec check` imports: a budget on the number of modules (a count, not a time, so the
test does not depend on the machine's load) and none of the heavy packages that only later
stages need. An editor runs the check on every keystroke, so its start-up is the product."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

# Modules `tilec check` may import beyond what the interpreter itself loaded before it ran
# (site hooks differ between machines, so they are not counted). 59 when this was written:
# the compiler's front end and checker (38) and the standard library they use.
BUDGET = 66
# Each is imported only by the stage that uses it: constant folding with arrays, LLVM code
# generation, the Lark parser (on a syntax error), the CUDA driver and nvJitLink, the LSP.
FORBIDDEN = ("numpy", "llvmlite", "lark", "cuda", "nvidia", "pygls", "regex")

PROBE = """
import json, sys
before = set(sys.modules)
from tilelang.cli import main
status = main(["check", *sys.argv[1:]])
print(json.dumps({"status": status, "new": sorted(set(sys.modules) - before)}))
"""


def imported_by_check(*files: str) -> list[str]:
    out = subprocess.run([sys.executable, "-c", PROBE, *files], capture_output=True, text=True,
                         cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.splitlines()[-1])
    assert result["status"] == 0
    return result["new"]


def heavy(modules: list[str]) -> list[str]:
    return [m for m in modules if m.split(".")[0] in FORBIDDEN]


@pytest.mark.parametrize("example", sorted(p.name for p in ROOT.glob("examples/*.tile")))
def test_check_imports_nothing_heavy(example):
    modules = imported_by_check(f"examples/{example}")
    assert heavy(modules) == []
    assert len(modules) <= BUDGET, (
        f"`tilec check` now imports {len(modules)} modules (budget {BUDGET}); make the new "
        f"ones lazy where they are used, or raise the budget with a reason:\n{modules}")


def test_check_with_an_import_stays_light():
    modules = imported_by_check("stdlib/std/math.tile", "examples/softmax.tile")
    assert heavy(modules) == [] and len(modules) <= BUDGET


def test_a_syntax_error_loads_the_lark_path(tmp_path):
    """The other side of the bargain: an error is diagnosed by the Lark path, as before."""
    bad = tmp_path / "bad.tile"
    bad.write_text("fn f() { let x = (1 + 2; }\n")
    out = subprocess.run([sys.executable, "-c", PROBE, str(bad)], capture_output=True,
                         text=True, cwd=ROOT, timeout=120)
    result = json.loads(out.stdout.splitlines()[-1])
    assert result["status"] == 1 and "lark" in result["new"]
    assert "error[E0101]: expected `)` to close the `(` at 1:18, found `;`" in out.stderr
