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

# Modules `tilec check` may import beyond what the interpreter itself loaded before it ran,
# counted apart: the project's and third-party modules (53: the front end with the parser's
# limits, `frontend.limits`, the checker in its eight modules (checker, check_context,
# check_decl, check_stmt, check_expr, check_index for subscripts, check_combine for built-ins'
# function arguments, control_flow) and its registry (builtins_index, builtins_sort and
# builtins_distributed among its groups: each group registers its entries at import, so none
# can be lazy), `record`, `version`, the one options record `options`, and `infile`, which
# reads a source without blocking on a FIFO)
# and the standard library's (1 with the system Python of the development machine, whose site
# hooks load the others first; 21 with `python -S`, an upper bound for a bare virtual
# environment).
BUDGET = 53
STDLIB_BUDGET = 21
# Each is imported only by the stage that uses it: constant folding with arrays, LLVM code
# generation, the Lark parser (on a syntax error), the CUDA driver and nvJitLink, the LSP.
FORBIDDEN = ("numpy", "llvmlite", "lark", "cuda", "nvidia", "pygls", "regex")
# Standard modules a check does without: `dataclasses` (and the `inspect`, `ast`, `dis` and
# `tokenize` it loads; the classes are `tilelang.record`s), `hashlib` (cache keys only),
# `difflib` (a misspelt name only) and `argparse` (plain arguments are read without it).
STDLIB_FORBIDDEN = ("dataclasses", "inspect", "dis", "tokenize", "hashlib", "difflib",
                    "argparse")

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
    return [m for m in modules if m.split(".")[0] in FORBIDDEN or m in STDLIB_FORBIDDEN]


def within_budget(modules: list[str]) -> tuple[list[str], list[str]]:
    """(ours and third-party, standard library) when each is within its budget."""
    std = [m for m in modules if m.split(".")[0] in sys.stdlib_module_names]
    ours = [m for m in modules if m not in std]
    assert len(ours) <= BUDGET and len(std) <= STDLIB_BUDGET, (
        f"`tilec check` now imports {len(ours)} project/third-party modules (budget {BUDGET}) "
        f"and {len(std)} standard ones (budget {STDLIB_BUDGET}); make the new ones lazy where "
        f"they are used, or raise the budget with a reason:\n{ours}\n{std}")
    return ours, std


@pytest.mark.parametrize("example", sorted(p.name for p in ROOT.glob("examples/*.tile")))
def test_check_imports_nothing_heavy(example):
    modules = imported_by_check(f"examples/{example}")
    assert heavy(modules) == []
    within_budget(modules)


def test_check_with_an_import_stays_light():
    modules = imported_by_check("stdlib/std/math.tile", "examples/softmax.tile")
    assert heavy(modules) == []
    within_budget(modules)


def test_a_syntax_error_loads_the_lark_path(tmp_path):
    """The other side of the bargain: an error is diagnosed by the Lark path, as before."""
    bad = tmp_path / "bad.tile"
    bad.write_text("fn f() { let x = (1 + 2; }\n")
    out = subprocess.run([sys.executable, "-c", PROBE, str(bad)], capture_output=True,
                         text=True, cwd=ROOT, timeout=120)
    result = json.loads(out.stdout.splitlines()[-1])
    assert result["status"] == 1 and "lark" in result["new"]
    assert "error[E0101]: expected `)` to close the `(` at 1:18, found `;`" in out.stderr


# `tilec check` and `tilec FILE` freeze the interpreter's objects as it exits (the cycle
# collector's two passes at exit walked all of them, a twentieth of a whole check); an
# atexit hook registered before `main` runs after `main`'s and sees the count.
EXIT_PROBE = """
import atexit, gc, os, sys
atexit.register(lambda: os.write(1, f"frozen at exit: {gc.get_freeze_count()}\\n".encode()))
from tilelang.cli import main
status = main(sys.argv[1:])
print("frozen after main:", gc.get_freeze_count(), "collecting:", gc.isenabled(), flush=True)
sys.exit(status)
"""


@pytest.mark.parametrize("argv", [["check", "examples/softmax.tile"],
                                  ["--emit", "tir", "examples/softmax.tile"]])
def test_one_shot_commands_skip_the_exit_collection(argv):
    out = subprocess.run([sys.executable, "-c", EXIT_PROBE, *argv], capture_output=True,
                         text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[-2] == "frozen after main: 0 collecting: True"   # nothing changed in `main`
    frozen = int(lines[-1].removeprefix("frozen at exit: "))
    assert frozen > 10_000, lines[-2:]


def test_other_commands_keep_the_exit_collection():
    """`tilec fmt` (as `lsp`, `run`, `cache`, `tune`) leaves the exit as it was."""
    out = subprocess.run([sys.executable, "-c", EXIT_PROBE, "fmt", "--check",
                          "examples/softmax.tile"], capture_output=True, text=True, cwd=ROOT,
                         timeout=120)
    assert out.stdout.splitlines()[-1] == "frozen at exit: 0", out.stdout + out.stderr


def test_compiling_pauses_the_collector_and_restores_it(monkeypatch):
    """compile_source pauses the cycle collector while it runs (no collection happens inside
    it) and leaves it as it found it."""
    import gc
    from tilelang import driver
    from tilelang.options import CompileOptions
    src = (ROOT / "examples" / "attention.tile").read_text()   # collected 4 times unpaused
    inside, during = [False], []
    real = driver._compile

    def traced(*args):
        inside[0] = True
        try:
            return real(*args)
        finally:
            inside[0] = False
    monkeypatch.setattr(driver, "_compile", traced)
    gc.callbacks.append(lambda phase, info: during.append(phase) if inside[0] else None)
    try:
        for collecting in (True, False):
            (gc.enable if collecting else gc.disable)()
            r = driver.compile_source(src, "attention.tile", CompileOptions(), until="tir")
            assert r.ok and gc.isenabled() is collecting
        assert during == []
    finally:
        gc.callbacks.pop()
        gc.enable()
