"""Kernel `const` defaults chosen per target (docs/language.md, "Per-target defaults"):
`const N: i32 = by_target(sm_90a = 256, default = 128)`, with `@launch`'s rule (the target's
entry, else `default`, else no default there) and exact diagnostic text with spans."""

from __future__ import annotations

import numpy as np
import pytest

from tilelang.diagnostics import Severity, TileError, render_all
from tilelang.driver import check_source, compile_source, inspect_source
from tilelang.options import CompileOptions

FILL = """\
kernel fill(a: Array[f32, 1], const N: i32 = by_target(sm_90a = 256, sm_80 = 64, default = 128)) {
    store(a, index = (bid(0),), tile = full((N,), astype(N, f32), f32));
}
"""


def _src(default: str) -> str:
    return FILL.replace("by_target(sm_90a = 256, sm_80 = 64, default = 128)", default)


def errors(src: str, target: str = "sm_90a", **defines):
    r = check_source(src, "c.tile", CompileOptions(
        target=target, defines={k: str(v) for k, v in defines.items()}))
    return [d for d in r.diagnostics if d.severity is Severity.ERROR]


def default_of(src: str, target: str):
    sig = inspect_source(src, "c.tile", CompileOptions(target=target))
    return {p.name: p.default for p in sig.kernels["fill"].params}["N"]


@pytest.mark.parametrize("target, n", [("sm_90a", 256), ("sm_80", 64), ("sm_86", 128),
                                       ("sm_100a", 128)])
def test_each_target_takes_its_entry_else_default(target, n):
    assert default_of(FILL, target) == n
    r = compile_source(FILL, "c.tile", CompileOptions(target=target), until="tir")
    assert r.ok, render_all(r.diagnostics)
    assert f"Tile[f32, {n}]" in r.tir


def test_a_target_without_entry_or_default_has_no_default():
    src = _src("by_target(sm_90a = 256)")
    assert default_of(src, "sm_90a") == 256
    assert default_of(src, "sm_80") is None        # a launch or -D must give it there
    r = compile_source(src, "c.tile", CompileOptions(target="sm_80"), until="tir")
    (d,) = [d for d in r.diagnostics if d.severity is Severity.ERROR]
    assert (d.code, d.message) == ("E0260", "`const N` has no value on sm_80, so kernel `fill` "
                                             "cannot be compiled for it")
    assert d.help == ("its `by_target` has neither a `sm_80` nor a `default` entry: add one, "
                      "or pass `-D N=VALUE`")
    assert (d.span.line, d.span.col) == (1, 46)


def test_define_overrides_by_target():
    r = compile_source(FILL, "c.tile", CompileOptions(target="sm_90a", defines={"N": "32"}),
                       until="tir")
    assert r.ok and "Tile[f32, 32]" in r.tir and "Tile[f32, 256]" not in r.tir


def test_define_cannot_be_by_target():
    (d,) = errors(FILL, N="by_target(sm_90a = 1)")
    assert d.code == "E0243"
    assert d.message == ("-D N=by_target(sm_90a = 1): `by_target` chooses a default in the "
                         "source; -D gives this compile's value")


def test_unknown_target_is_e0725_at_its_entry():
    (d,) = errors(_src("by_target(sm_91 = 256, default = 128)"))
    assert (d.code, d.message, d.label) == ("E0725", "`by_target` names unknown target `sm_91`",
                                            "not a target")
    assert (d.span.line, d.span.col, d.span.end_col) == (1, 56, 67)     # `sm_91 = 256`
    assert d.help.startswith("targets: sm_80, sm_86")


@pytest.mark.parametrize("target", ["sm_90a", "sm_80"])
def test_every_entry_is_type_checked_on_every_target(target):
    (d,) = errors(_src("by_target(sm_90a = 2.5, default = 128)"), target)
    assert d.code == "E0243"
    assert d.message == "`const N: i32`: float constant 2.5 cannot be used as i32"
    assert (d.span.line, d.span.col) == (1, 65)                         # the `2.5`


@pytest.mark.parametrize("default, code, message", [
    ("by_target()", "E0714", "`by_target` gives `const N` no value"),
    ("by_target(256)", "E0250", "`by_target` takes keyword arguments: `sm_90a = 256, "
                                "default = 128`"),
    ("by_target(sm_80 = 1, sm_80 = 2)", "E0101", "keyword argument `sm_80` given twice"),
    ("1 + by_target(sm_80 = 2)", "E0201", "`by_target` is not a value here"),
])
def test_malformed_by_target(default, code, message):
    (d,) = errors(_src(default))
    assert (d.code, d.message) == (code, message)


def test_dtype_parameters_take_by_target_too():
    src = """\
kernel fill(a: Array[f32, 1], const T: dtype = by_target(sm_80 = f16, default = bf16)) {
    store(a, index = (bid(0),), tile = astype(full((64,), 1.5, T), f32));
}
"""
    for target, name in (("sm_80", "f16"), ("sm_90a", "bf16")):
        sig = inspect_source(src, "c.tile", CompileOptions(target=target))
        assert sig.kernels["fill"].params[1].default == name
    (d,) = errors(src.replace("sm_80 = f16", "sm_80 = 3"), "sm_90a")
    assert d.code == "E0243" and d.message.startswith("the default of `const T: dtype` must")


def test_plan_names_the_entry_taken():
    r = compile_source(FILL, "c.tile", CompileOptions(target="sm_80"), until="plan")
    assert r.plan.splitlines()[1] == "  consts: N = 64 (by_target: sm_80)"
    r = compile_source(FILL, "c.tile", CompileOptions(target="sm_89"), until="plan")
    assert r.plan.splitlines()[1] == "  consts: N = 128 (by_target: default)"
    plain = compile_source(_src("128"), "c.tile", CompileOptions(target="sm_89"), until="plan")
    assert "consts:" not in plain.plan


@pytest.mark.parametrize("arch, n", [("sm_90a", 256), ("sm_80", 64)])
def test_runtime_launch_uses_the_targets_default(arch, n):
    import tilelang

    mod = tilelang.compile(FILL, arch=arch, backend="emulator", cache=False)
    out = np.zeros(512, np.float32)
    mod.fill[(2,)](out)
    want = np.zeros(512, np.float32)
    want[:2 * n] = n                      # two blocks of N elements, each element N
    np.testing.assert_array_equal(out, want)


def test_not_allowed_outside_kernels():
    src = """\
fn f(x, const N: i32 = by_target(sm_80 = 1, default = 2)) {
    return x + N;
}

kernel k(a: Array[f32, 1]) {
    store(a, index = (0,), tile = f(zeros((4,), f32)));
}
"""
    errs = errors(src)
    assert errs and errs[0].code == "E0201" and errs[0].message == \
        "`by_target` is not a value here"
    with pytest.raises(TileError):
        inspect_source(src, "c.tile", CompileOptions())
