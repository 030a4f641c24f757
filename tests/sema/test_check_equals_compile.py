"""Check = compile (issue 17, item 4): whatever `tilec check` accepts lowers to Tile IR and to
LLVM IR. Seeded mutations of the examples (tests/frontend/test_fuzz.py's edits)
that the checker accepts are compiled with their default `const` values; the only errors
allowed are the documented limits that depend on those values (resources, launch bounds), which
check cannot know for a kernel it checks with symbolic consts.

The default run compiles a small sample of accepted mutants; `-m slow` a bigger one."""

from __future__ import annotations

import importlib.util
import pathlib
import random

import pytest

from tilelang.diagnostics import Severity, render_all
from tilelang.driver import Options, check_source, compile_source

ROOT = pathlib.Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("_fuzz_edits", ROOT / "tests/frontend/test_fuzz.py")
_fuzz = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_fuzz)

SOURCES = [t for t in (p.read_text("utf-8") for p in sorted(ROOT.glob("examples/*.tile")))
           if "kernel " in t]
# Limits that depend on the specialized values (tile sizes, threads): check sees a kernel with
# symbolic consts and cannot decide them; the compile refuses them with these codes.
VALUE_LIMITS = {"E0312", "E0783", "E0784", "E0785", "E0786", "E0313", "E0314"}


def accepted_mutants(seed: int, want: int, tries: int):
    rng = random.Random(seed)
    for index in range(tries):
        src = rng.choice(SOURCES)
        for _ in range(rng.choice([1, 1, 2])):
            src = _fuzz.mutate(rng, src)
        res = check_source(src, f"mutant{index}.tile")
        if any(d.severity is Severity.ERROR for d in res.diagnostics):
            continue
        yield index, src
        want -= 1
        if want == 0:
            return


def compile_failures(seed: int, want: int, tries: int) -> list[str]:
    bad = []
    for index, src in accepted_mutants(seed, want, tries):
        res = compile_source(src, f"mutant{index}.tile", Options(), until="llvm")
        errors = [d for d in res.diagnostics if d.severity is Severity.ERROR
                  and d.code != "E0782"]  # a mutant whose every kernel was deleted
        if errors and not all(d.code in VALUE_LIMITS for d in errors):
            bad.append(f"seed {seed} index {index}:\n{render_all(errors)[:1500]}\n"
                       f"--- input ---\n{src}")
        if len(bad) >= 3:
            break
    return bad


def test_loop_carried_tuple_lowers():
    src = """
kernel k(out: Array[f32, 2]) {
    var st = (full((1, 1), -inf, f32), zeros((1, 1), f32));
    for j in range(4) {
        st = (st[0], st[1] + astype(j, f32));
    }
    store(out, index = (0, 0), tile = st[0] + st[1]);
}
"""
    assert check_source(src, "t.tile").diagnostics == []
    res = compile_source(src, "t.tile", Options(), until="llvm")
    assert res.ok, render_all(res.diagnostics)


def test_check_equals_compile_sample():
    bad = compile_failures(seed=17, want=15, tries=2000)
    assert not bad, "\n\n".join(bad)


@pytest.mark.slow
def test_check_equals_compile_full():
    bad = compile_failures(seed=1700, want=400, tries=60000)
    assert not bad, "\n\n".join(bad)
