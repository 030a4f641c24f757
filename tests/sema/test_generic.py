"""Generic kernels (docs/language.md §10.3): `const T: dtype` type variables, compile-time
tests of types, the `-D T=...` specializations of `tilec`, and the exact text of each new
diagnostic. The runtime's side (inference from arrays, specialization keys) is
tests/runtime/test_rt_generic.py."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

from tilelang.diagnostics import Severity, render_all
from tilelang.driver import check_source, compile_source, inspect_source
from tilelang.options import CompileOptions

ROOT = pathlib.Path(__file__).resolve().parents[2]

SCALE = """\
kernel scale(x: Array[T, 1], y: Array[T, 1], const T: dtype, const N: i32 = 128) {
    let t = load(x, index = (bid(0),), shape = (N,), padding = 0);
    if is_floating(T) {
        store(y, index = (bid(0),), tile = t * astype(2, T));
    } else {
        store(y, index = (bid(0),), tile = t + t);
    }
}
"""


def check(src: str, **defines):
    opts = CompileOptions(defines={k: str(v) for k, v in defines.items()})
    return check_source(src, "g.tile", opts).diagnostics


def errors(diags):
    return [d for d in diags if d.severity is Severity.ERROR]


def test_a_value_checks_the_body_for_that_dtype():
    for t in ("f16", "bf16", "f32", "i8", "u32"):
        assert check(SCALE, T=t) == [], t


def test_without_a_value_the_body_waits_with_note_n0201():
    (d,) = check(SCALE)
    assert d.severity is Severity.NOTE and d.code == "N0201"
    assert d.message == ("the rest of `scale` is checked once `T` has a value: the types of "
                         "its body depend on `T`")
    assert d.help == ("give a value with `-D T=f16` (or another dtype) or a default; a launch "
                      "takes it from the arrays passed")


def test_the_body_is_checked_with_the_default():
    src = SCALE.replace("const T: dtype,", "const T: dtype = f16,").replace(
        "t + t", "t + undefined_name")
    assert check(src) == []                      # f16: the integer branch is not taken
    (e,) = errors(check(src, T="i32"))
    assert e.code == "E0201" and "undefined_name" in e.message


def test_define_that_is_not_a_dtype_is_e0243():
    (e,) = check(SCALE, T="bf")
    assert e.code == "E0243"
    assert e.message == "-D T=bf: `bf` is not a dtype (kernel `scale` declares `const T: dtype`)"
    assert e.help.startswith("did you mean `bf16`? dtypes are: bool, i8, i16, i32")
    (e,) = check(SCALE, T="1 + 2")
    assert e.code == "E0243" and "`1 + 2` is not a dtype" in e.message


def test_compiling_without_a_value_is_e0260():
    res = compile_source(SCALE, "g.tile", CompileOptions(), until="tir")
    (e,) = errors(res.diagnostics)
    assert e.code == "E0260"
    assert e.message == "`const T: dtype` has no value, so kernel `scale` cannot be compiled"
    assert e.help == ("pass `-D T=f16` (or another dtype), give it a default (`const T: dtype "
                      "= f16`), or launch it with arrays: their dtypes fix `T`")


def test_each_value_compiles_its_own_types():
    ptx = {}
    for t in ("f16", "bf16"):
        res = compile_source(SCALE, "g.tile", CompileOptions(target="sm_90a", defines={"T": t}),
                             until="ptx")
        assert res.ok, render_all(res.diagnostics)
        ptx[t] = res.ptx
        (k,) = res.ir.kernels
        assert [str(p.type) for p in k.params] == [f"Array[{t}, 1]"] * 2
    assert ptx["f16"] != ptx["bf16"]
    # `t * 2` in the array's own dtype (LLVM makes it `t + t`): sm_90 has both additions
    assert "add.rn.f16" in ptx["f16"] and "bf16" not in ptx["f16"]
    assert "add.rn.bf16" in ptx["bf16"] and "add.rn.f16" not in ptx["bf16"]


def test_type_tests_fold_to_constants():
    src = """
kernel k(out: Array[i32, 1], x: Array[T, 1], const T: dtype = bf16) {
    static_assert(T == bf16 and T != f16 and x.dtype == T, "dtype compare");
    static_assert(is_floating(T) and not is_integer(T), "floating");
    static_assert(bits(T) == 16 and bits(bool) == 1 and bits(tf32) == 32, "bits");
    static_assert(is_integer(u8) and not is_integer(bool) and is_floating(f8e4m3), "kinds");
    let z = zeros((bits(T) * 2,), T);
    store(out, index = (0,), tile = astype(z, i32));
}
"""
    assert check(src) == []
    assert [(e.code, e.message) for e in errors(check(src, T="f32"))] == [
        ("E0511", "static assertion failed: dtype compare"),
        ("E0511", "static assertion failed: bits")]


def test_a_fn_infers_its_type_variable_from_the_arguments():
    src = """
fn twice(a: Tile[T, 4], const T: dtype) -> Tile[T, 4] {
    return a + a;
}
fn both(a: Tile[T, 4], b: Tile[T, 4], const T: dtype) -> Tile[T, 4] {
    return a * b;
}
kernel k(x: Array[f16, 1], y: Array[f16, 1]) {
    let a = load(x, index = (0,), shape = (4,));
    store(y, index = (0,), tile = twice(a) + both(a, a) + twice(a, f16));
}
"""
    assert check(src) == []
    bad = src.replace("twice(a, f16)", "twice(a, f32)")
    (e,) = errors(check(bad))
    assert e.code == "E0321" and e.message == \
        "parameter `a` of `twice` is declared Tile[f32, 4], found Tile[f16, 4]"


def test_parameters_may_name_t_before_it_is_declared_and_scalars_may_be_t():
    src = """
kernel k(x: Array[T, 1], s: T, const T: dtype = f32) {
    store(x, index = (0,), tile = full((4,), s, T));
}
"""
    assert check(src) == []
    sig = inspect_source(src, "g.tile")
    x, s, t = sig.kernels["k"].params
    assert (x.kind, x.type_var, s.kind, s.type_var) == ("array", "T", "scalar", "T")
    assert (t.kind, t.dtype, t.default) == ("const", "dtype", "f32")


def test_dtype_annotation_only_on_const_parameters_of_kernels():
    src = "kernel k(x: Array[f32, 1], t: dtype) {}\n"
    (e,) = errors(check(src))
    assert e.code == "E0240" and e.message == \
        "kernel parameter `t` must be an array or a scalar, found dtype"


# -- tilec ------------------------------------------------------------------------------------

def tilec(*args, cwd=None):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "tilelang.cli", *map(str, args)],
                          capture_output=True, text=True, env=env, cwd=cwd, timeout=300)


def test_tilec_compiles_the_chosen_specialization(tmp_path):
    f = tmp_path / "g.tile"
    f.write_text(SCALE)
    out = {}
    for t in ("f16", "bf16"):
        r = tilec(f, "-D", f"T={t}", "--emit", "ptx", "-o", tmp_path / f"{t}.ptx")
        assert r.returncode == 0, r.stderr
        out[t] = (tmp_path / f"{t}.ptx").read_text()
    assert out["f16"] != out["bf16"] and "bf16" in out["bf16"] and "bf16" not in out["f16"]
    r = tilec(f, "-D", "T=float16", "--emit", "ptx", "-o", tmp_path / "x.ptx")
    assert r.returncode == 1 and "error[E0243]: -D T=float16: `float16` is not a dtype " \
        "(kernel `scale` declares `const T: dtype`)" in r.stderr
    assert not (tmp_path / "x.ptx").exists()
    r = tilec(f, "--emit", "ptx", "-o", tmp_path / "x.ptx")
    assert r.returncode == 1 and "error[E0260]: `const T: dtype` has no value, so kernel " \
        "`scale` cannot be compiled" in r.stderr
    r = tilec("check", f)
    assert r.returncode == 0 and "note[N0201]" in r.stderr


def test_tilec_emit_c_with_a_define(tmp_path):
    f = tmp_path / "g.tile"
    f.write_text(SCALE)
    r = tilec(f, "-D", "T=bf16", "--emit", "c", "-o", tmp_path / "gen.c", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    h = (tmp_path / "gen.h").read_text()
    assert "kernel scale(x: Array[bf16, 1], y: Array[bf16, 1], const T: dtype = bf16, " \
        "const N: i32 = 128)" in h
