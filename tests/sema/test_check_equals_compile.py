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
from tilelang.driver import check_source, compile_source
from tilelang.options import CompileOptions

ROOT = pathlib.Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("_fuzz_edits", ROOT / "tests/frontend/test_fuzz.py")
_fuzz = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_fuzz)

SOURCES = [t for t in (p.read_text("utf-8") for p in sorted(ROOT.glob("examples/*.tile")))
           if "kernel " in t]
# Limits that depend on the specialized values (tile sizes, threads, registers; E0260: a const
# with no value to compile with): check sees a kernel with symbolic consts and cannot decide
# them; the compile refuses them with these codes.
VALUE_LIMITS = {"E0260", "E0312", "E0783", "E0784", "E0787", "E0788", "E0313", "E0314"}


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
        res = compile_source(src, f"mutant{index}.tile", CompileOptions(), until="llvm")
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
    res = compile_source(src, "t.tile", CompileOptions(), until="llvm")
    assert res.ok, render_all(res.diagnostics)


def test_check_equals_compile_sample():
    bad = compile_failures(seed=17, want=15, tries=2000)
    assert not bad, "\n\n".join(bad)


@pytest.mark.slow
def test_check_equals_compile_full():
    bad = compile_failures(seed=1700, want=400, tries=60000)
    assert not bad, "\n\n".join(bad)


RETURNING = """
fn classify(x, c) {
    if c > 10 {
        return (x * 3.0, i32(3));
    } else if c > 5 {
        let y = x + 1.0;
        if c == 7 {
            return (y * 7.0, i32(7));
        }
        return (y, i32(2));
    }
    var z = x;
    for _i in range(3) {
        z = z + 1.0;
    }
    return (z, i32(1));
}

fn half(x: f16, c) -> f16 {
    if c > 0 {
        return x;
    }
    return 0.5;
}

kernel k(out: Array[f32, 1], tag: Array[i32, 1], h: Array[f16, 1], c: i32) {
    let r = classify(ones((16,), f32), c);
    store(out, index = (0,), tile = r[0]);
    store(tag, offset = (0,), tile = full((1,), r[1], i32));
    store(h, offset = (0,), tile = full((1,), half(f16(2.0), c)));
}
"""


@pytest.mark.parametrize("c,value,tag,h", [(0, 4.0, 1, 0.5), (6, 2.0, 2, 2.0),
                                           (7, 14.0, 7, 2.0), (11, 3.0, 3, 2.0)])
def test_returns_from_run_time_ifs_run(c, value, tag, h):
    import numpy as np
    import sys
    sys.path.insert(0, str(ROOT / "tests" / "e2e"))
    from e2e_support import compile_text, run_emulator, run_interp
    assert [d for d in check_source(RETURNING, "r.tile").diagnostics
            if d.severity is Severity.ERROR] == []
    res = compile_text(RETURNING, "r.tile")
    for runner in (run_interp, run_emulator):
        out, t, hh = np.zeros(16, np.float32), np.zeros(1, np.int32), np.zeros(1, np.float16)
        runner(res, "k", {"out": out, "tag": t, "h": hh, "c": np.int32(c)}, (1,))
        assert (out == value).all() and t[0] == tag and hh[0] == h, runner.__name__


@pytest.mark.parametrize("body,line", [
    ("if c > 0 {\n        if c > 5 {\n            return x;\n        }\n    }\n"
     "    return x * 2.0;", 4),
    ("for i in range(c) {\n        if i == 3 {\n            return x;\n        }\n    }\n"
     "    return x;", 4),
    ("while c > 0 {\n        return x;\n    }\n    return x;", 3),
])
def test_returns_that_cannot_be_inlined_fail_in_check_too(body, line):
    src = (f"fn f(x, c) {{\n    {body}\n}}\n"
           "kernel k(out: Array[f32, 1], c: i32) {\n"
           "    store(out, index = (0,), tile = f(ones((16,), f32), c));\n}\n")
    for diags in (check_source(src, "r.tile").diagnostics,
                  compile_source(src, "r.tile", CompileOptions(), until="tir").diagnostics):
        errs = [d for d in diags if d.severity is Severity.ERROR]
        assert [d.code for d in errs] == ["E0261"], render_all(diags)
        assert errs[0].span.line == line


def test_const_conditions_may_return_anywhere():
    src = """
fn h(x, const N) {
    if N > 4 {
        if N > 8 {
            return x;
        }
    }
    return x * 2.0;
}
kernel k(out: Array[f32, 1], const N: i32 = 16) {
    store(out, index = (0,), tile = h(ones((16,), f32), N));
}
"""
    assert check_source(src, "h.tile").diagnostics == []
    res = compile_source(src, "h.tile", CompileOptions(defines={"N": "6"}), until="llvm")
    assert res.ok, render_all(res.diagnostics)
