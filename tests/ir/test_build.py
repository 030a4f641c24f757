"""The AST → Tile IR lowering: source kernels lowered, verified, optimized and run by the
reference interpreter, against independent NumPy computations. Covers the examples, stdlib
calls, `var`s carried through if/for/while, break/continue/return, static for, and the
diagnostics for what the lowering refuses."""

from __future__ import annotations

import math
import pathlib

import numpy as np
import pytest

from tilelang.diagnostics import render_all
from tilelang.driver import compile_source
from tilelang.options import CompileOptions
from tilelang.interp import run_kernel
from tilelang.ir.verifier import verify

ROOT = pathlib.Path(__file__).resolve().parents[2]


def lower(text: str, defines: dict | None = None, path: str = "<test>.tile", **kw):
    res = compile_source(text, path, CompileOptions(defines=defines or {}), until="tir", **kw)
    assert res.ok, render_all(res.diagnostics)
    verify(res.ir)
    return res.ir


def lower_errors(text: str, defines: dict | None = None) -> str:
    res = compile_source(text, "<test>.tile", CompileOptions(defines=defines or {}), until="tir")
    assert not res.ok
    return render_all(res.diagnostics, color=False)


def example(name: str) -> str:
    return (ROOT / "examples" / name).read_text()


# ---- the examples ------------------------------------------------------------------------------

@pytest.mark.parametrize("n", [3000, 1_000_003])
def test_vadd_example(n):
    ir = lower(example("vadd.tile"))
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    c = np.zeros(n, np.float32)
    run_kernel(ir, {"a": a, "b": b, "c": c}, (math.ceil(n / 1024), 1, 1))
    np.testing.assert_array_equal(c, a + b)


def test_softmax_example_rows_not_a_multiple_of_the_tile():
    ir = lower(example("softmax.tile"))
    x = np.random.default_rng(2).standard_normal((1000, 777)).astype(np.float32)
    y = np.zeros_like(x)
    run_kernel(ir, {"x": x, "y": y}, (1000, 1, 1))
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(y, e / e.sum(axis=1, keepdims=True), rtol=2e-6, atol=1e-7)


def test_layernorm_example_reads_the_row_length_at_run_time():
    ir = lower(example("layernorm.tile"), {"N": "256"})
    rng = np.random.default_rng(3)
    x = rng.standard_normal((37, 200)).astype(np.float32)
    w, b = rng.standard_normal(200).astype(np.float32), rng.standard_normal(200).astype(np.float32)
    y = np.zeros_like(x)
    run_kernel(ir, {"x": x, "w": w, "b": b, "y": y, "eps": 1e-5}, (37, 1, 1))
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=1, keepdims=True)
    var = ((x64 - mean) ** 2).mean(axis=1, keepdims=True)
    np.testing.assert_allclose(y, (x64 - mean) / np.sqrt(var + 1e-5) * w + b, rtol=1e-4,
                               atol=1e-4)


def test_matmul_example_loop_carries_the_accumulator():
    ir = lower(example("matmul.tile"), {"BM": "32", "BN": "32", "BK": "16"})
    rng = np.random.default_rng(4)
    a = rng.standard_normal((70, 50)).astype(np.float16)
    b = rng.standard_normal((50, 40)).astype(np.float16)
    c = np.zeros((70, 40), np.float32)
    run_kernel(ir, {"a": a, "b": b, "c": c}, (3, 2, 1), cluster=(1, 1, 1))
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-3,
                               atol=1e-3)
    assert any(type(op).__name__ == "ForOp" for op in ir.kernels[0].body.ops)


def test_lowered_ir_text_of_the_vadd_example():
    from tilelang.ir.printer import format_module
    text = format_module(lower(example("vadd.tile")))
    assert text == (
        "kernel @vadd(%a: Array[f32, 1], %b: Array[f32, 1], %c: Array[f32, 1]) attributes "
        "{maxntid = (128, 1, 1)} {\n"
        "  %0 = bid(0) : i32\n"
        "  %1 = load(%a, index=(%0,), shape=(1024,), padding=0.0) : Tile[f32, 1024]\n"
        "  %2 = load(%b, index=(%0,), shape=(1024,), padding=0.0) : Tile[f32, 1024]\n"
        "  %3 = %1 + %2 : Tile[f32, 1024]\n"
        "  store(%c, index=(%0,), tile=%3)\n"
        "  return\n"
        "}\n")


def test_kernel_carries_its_launch_spec():
    ir = lower(example("matmul.tile"), {"BM": "32", "BN": "32", "BK": "16"})
    k = ir.kernels[0]
    # the example's launch for the default target, sm_90a (`by_target`, docs/language.md)
    assert k.launch.reqntid == (256, 1, 1) and k.launch.maxnreg == 168
    assert k.attributes == {"reqntid": (256, 1, 1), "maxnreg": 168, "cluster": (2, 1, 1)}


# ---- stdlib and functions --------------------------------------------------------------------

def test_stdlib_functions_are_inlined_per_call():
    src = """
import std.math;
kernel k(x: Array[f32, 1], y: Array[f32, 5]) {
    let t = load(x, index = (0,), shape = (64,));
    store(y, index = (0, 0, 0, 0, 0), tile = reshape(math.gelu(t), (1, 1, 1, 1, 64)));
    store(y, index = (0, 0, 0, 0, 1), tile = reshape(math.silu(t), (1, 1, 1, 1, 64)));
    store(y, index = (0, 0, 0, 0, 2), tile = reshape(math.relu(t), (1, 1, 1, 1, 64)));
    store(y, index = (0, 0, 0, 0, 3), tile = reshape(math.clamp(t, -0.5, 0.5), (1, 1, 1, 1, 64)));
    store(y, index = (0, 0, 0, 0, 4), tile = reshape(math.square(t) + math.round_up(5, 4), (1, 1, 1, 1, 64)));
}
"""
    ir = lower(src)
    x = np.linspace(-3, 3, 64).astype(np.float32)
    y = np.zeros((1, 1, 1, 1, 320), np.float32)
    run_kernel(ir, {"x": x, "y": y}, (1, 1, 1))
    y = y.reshape(5, 64)
    x64 = x.astype(np.float64)
    gelu = 0.5 * x64 * (1 + np.tanh(0.7978845608028654 * (x64 + 0.044715 * x64 ** 3)))
    np.testing.assert_allclose(y[0], gelu, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(y[1], x64 / (1 + np.exp(-x64)), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(y[2], np.maximum(x, 0))
    np.testing.assert_array_equal(y[3], np.clip(x, -0.5, 0.5))
    np.testing.assert_allclose(y[4], x64 * x64 + 8, rtol=1e-6)


def test_user_function_with_a_loop_and_a_var():
    src = """
fn horner(x, c0, c1, c2) {
    var acc = c2 * x;
    acc = (acc + c1) * x;
    return acc + c0;
}
kernel k(x: Array[f32, 1], y: Array[f32, 1]) {
    let t = load(x, index = (bid(0),), shape = (32,));
    store(y, index = (bid(0),), tile = horner(t, 1.0, 2.0, 3.0) + horner(t, 0.0, 0.0, 1.0));
}
"""
    ir = lower(src)
    x = np.random.default_rng(5).standard_normal(64).astype(np.float32)
    y = np.zeros_like(x)
    run_kernel(ir, {"x": x, "y": y}, (2, 1, 1))
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(y, 3 * x64 ** 2 + 2 * x64 + 1 + x64 ** 2, rtol=1e-5, atol=1e-6)


# ---- control flow ----------------------------------------------------------------------------

def test_var_assigned_in_both_branches_of_a_run_time_if():
    src = """
kernel k(x: Array[f32, 1], y: Array[f32, 1], flag: i32) {
    var t = load(x, index = (0,), shape = (16,));
    var s = 0;
    if flag > 0 {
        t = t * 2.0;
        s = 1;
    } else if flag < 0 {
        t = -t;
    } else {
        s = 5;
    }
    store(y, index = (0,), tile = t + astype(s, f32));
}
"""
    ir = lower(src)
    x = np.arange(16, dtype=np.float32)
    for flag, want in ((3, x * 2 + 1), (-2, -x), (0, x + 5)):
        y = np.zeros_like(x)
        run_kernel(ir, {"x": x, "y": y, "flag": flag}, (1, 1, 1))
        np.testing.assert_array_equal(y, want)


def test_for_loop_carries_a_tile_and_a_scalar():
    src = """
kernel k(x: Array[f32, 2], y: Array[f32, 1]) {
    var acc = zeros((8,), f32);
    var count = 0;
    for r in range(num_tiles(x, axis = 0, shape = (1, 8))) {
        acc = acc + reshape(load(x, index = (r, 0), shape = (1, 8)), (8,));
        count = count + 1;
    }
    store(y, index = (0,), tile = acc / astype(count, f32));
}
"""
    ir = lower(src)
    x = np.random.default_rng(6).standard_normal((13, 8)).astype(np.float32)
    y = np.zeros(8, np.float32)
    run_kernel(ir, {"x": x, "y": y}, (1, 1, 1))
    np.testing.assert_allclose(y, x.astype(np.float64).mean(axis=0), rtol=1e-5, atol=1e-6)


def test_while_with_break_and_continue():
    src = """
kernel collatz(out: Array[i32, 1]) {
    var x = bid(0) + 1;
    var steps = 0;
    while true {
        if x == 1 { break; }
        steps = steps + 1;
        if x % 2 == 0 {
            x = floordiv(x, 2);
            continue;
        }
        x = 3 * x + 1;
    }
    store(out, index = (bid(0),), tile = full((1,), steps, i32));
}
"""
    ir = lower(src)
    out = np.zeros(30, np.int32)
    run_kernel(ir, {"out": out}, (30, 1, 1))

    def steps(n):
        s = 0
        while n != 1:
            n = n // 2 if n % 2 == 0 else 3 * n + 1
            s += 1
        return s
    np.testing.assert_array_equal(out, [steps(n) for n in range(1, 31)])


def test_for_with_break_leaves_the_loop_with_the_current_values():
    src = """
kernel k(out: Array[i32, 1], limit: i32) {
    var total = 0;
    for i in range(100) {
        if total + i > limit { break; }
        total = total + i;
    }
    store(out, index = (0,), tile = full((1,), total, i32));
}
"""
    ir = lower(src)
    for limit in (0, 10, 1000, 100000):
        out = np.zeros(1, np.int32)
        run_kernel(ir, {"out": out, "limit": limit}, (1, 1, 1))
        total = 0
        for i in range(100):
            if total + i > limit:
                break
            total += i
        assert out[0] == total


def test_early_return_ends_only_that_block():
    src = """
kernel k(x: Array[f32, 1], y: Array[f32, 1], n: i32) {
    if bid(0) * 4 >= n { return; }
    store(y, index = (bid(0),), tile = load(x, index = (bid(0),), shape = (4,)) + 1.0);
}
"""
    ir = lower(src)
    x = np.arange(16, dtype=np.float32)
    y = np.zeros_like(x)
    run_kernel(ir, {"x": x, "y": y, "n": 9}, (4, 1, 1))
    np.testing.assert_array_equal(y, np.where(np.arange(16) < 12, x + 1, 0))


def test_static_for_unrolls_with_constant_indices():
    src = """
kernel k(x: Array[f32, 1], y: Array[f32, 1]) {
    var acc = zeros((4,), f32);
    static for i in range(3) {
        acc = acc + load(x, index = (i,), shape = (4,)) * (i + 1);
    }
    store(y, index = (0,), tile = acc);
}
"""
    ir = lower(src)
    assert "for" not in repr([type(op).__name__ for op in ir.kernels[0].body.ops])
    x = np.arange(12, dtype=np.float32)
    y = np.zeros(4, np.float32)
    run_kernel(ir, {"x": x, "y": y}, (1, 1, 1))
    np.testing.assert_array_equal(y, x[0:4] + 2 * x[4:8] + 3 * x[8:12])


def test_constant_if_lowers_only_the_branch_taken():
    src = """
kernel k(y: Array[f32, 1], const MODE: i32 = 0) {
    if MODE == 1 {
        store(y, index = (0,), tile = ones((4,), f32));
    } else {
        store(y, index = (0,), tile = full((4,), 7.0, f32));
    }
}
"""
    for mode, want in (("0", 7.0), ("1", 1.0)):
        ir = lower(src, {"MODE": mode})
        assert not any(type(op).__name__ == "IfOp" for op in ir.kernels[0].body.ops)
        y = np.zeros(4, np.float32)
        run_kernel(ir, {"y": y}, (1, 1, 1))
        assert (y == want).all()


def test_kernel_selection_lowers_only_the_named_kernel():
    src = "kernel a(y: Array[f32, 1]) { }\nkernel b(y: Array[f32, 1]) { }\n"
    ir = lower(src, kernels=["b"])
    assert [k.name for k in ir.kernels] == ["b"]


# ---- what the lowering refuses -----------------------------------------------------------------

def test_const_parameter_without_a_value():
    text = lower_errors("kernel k(y: Array[f32, 1], const N: i32) {\n"
                        "    store(y, index = (0,), tile = zeros((N,), f32));\n}\n")
    assert text == (
        "error[E0260]: `const N` has no value, so kernel `k` cannot be compiled\n"
        " --> <test>.tile:1:28\n"
        "  |\n"
        "1 | kernel k(y: Array[f32, 1], const N: i32) {\n"
        "  |                            ^^^^^^^^^^^^\n"
        "  |\n"
        "  = help: give it a default (`const N: i32 = ...`), pass `-D N=VALUE`, or specialize "
        "it at launch")


def test_return_inside_run_time_if_of_a_fn():
    # an `if` whose every path returns is one `if` op yielding the value (issue 17)
    ok = """fn f(x) {
    if x > 0 { return x; }
    return -x;
}
kernel k(y: Array[i32, 1], v: i32) {
    store(y, index = (0,), tile = full((1,), f(v), i32));
}
"""
    res = compile_source(ok, "<test>.tile", CompileOptions(), until="tir")
    assert res.ok, render_all(res.diagnostics, color=False)
    assert "} else {" in res.tir and "yield" in res.tir
    # a `return` in a run-time loop still cannot be inlined
    text = lower_errors("""fn f(x) {
    for i in range(x) { return i; }
    return -x;
}
kernel k(y: Array[i32, 1], v: i32) {
    store(y, index = (0,), tile = full((1,), f(v), i32));
}
""")
    assert "error[E0261]: `return` inside a run-time `if` or loop of `fn f` cannot be " \
           "compiled yet" in text
    assert " --> <test>.tile:2:25" in text
    assert "help: compute the result in a `var` and return it at the end" in text
