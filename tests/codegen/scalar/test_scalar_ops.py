"""Element-wise operators and exact math built-ins through ScalarEmitter → LLVM → PTX → the
emulator, compared bit for bit with the registry's reference (`Builtin.evaluate`) and with
independent Python/NumPy expressions; every module links with nvJitLink for sm_80 and sm_90a.
"""

from __future__ import annotations

import numpy as np
import pytest

from scalar_support import KernelBatch, assert_same, dtype, link_all, reference
from tilelang.targets import get_target

INTS = ["i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64"]
FLOATS = ["f16", "bf16", "f32", "f64"]
N = 256


def int_values(name: str, rng, n=N) -> np.ndarray:
    d = dtype(name)
    npd = d.storage_np_dtype
    edge = [0, 1, d.max, d.max - 1, d.min, d.min + 1, 2, 3, 7]
    if d.signed:
        edge += [-1, -2, -3, -7]
    r = rng.integers(d.min, d.max, size=n - len(edge), dtype=npd, endpoint=True)
    small = rng.integers(-9 if d.signed else 0, 10, size=n // 4).astype(npd)
    v = np.concatenate([np.array(edge, dtype=npd), r])
    v[-len(small):] = small
    return v


def float_values(name: str, rng, n=N) -> np.ndarray:
    d = dtype(name)
    tiny = {"f16": 6e-8, "bf16": 1e-40, "f32": 1e-40, "f64": 1e-310}[name]
    big = {"f16": 6e4, "bf16": 3e38, "f32": 3e38, "f64": 1e308}[name]
    edge = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, -2.5, 3.0, tiny, -tiny, big,
            -big, 7.0, -7.0]
    r = np.concatenate([rng.standard_normal(n // 2) * 10,
                        rng.standard_normal(n - n // 2 - len(edge)) * 1e3])
    v = np.concatenate([np.array(edge), r])
    from tilelang.sema.types import round_to_dtype
    return round_to_dtype(v, d)


def _batch(target: str):
    rng = np.random.default_rng(1234)
    kb = KernelBatch(target)
    for name in INTS:
        d = dtype(name)
        a, b = int_values(name, rng), np.roll(int_values(name, rng), 3)
        for op in ("+", "-", "*", "/", "%", "floordiv", "&", "|", "^", "==", "!=", "<", "<=",
                   ">", ">=", "minimum", "maximum"):
            kb.add(op, [a, b], [d, d])
        bits = d.bits
        counts = np.array([0, 1, bits - 1, bits, bits + 1, 100] * (N // 6 + 1))[:N]
        if d.signed:
            counts[::7] = -1
        counts = counts.astype(d.storage_np_dtype)
        kb.add("<<", [a, counts], [d, d])
        kb.add(">>", [a, counts], [d, d])
        e = (np.abs(b.astype(np.int64)) % 9).astype(d.storage_np_dtype)
        if d.signed:
            e[::5] = -e[::5]
            e[1::9] = -1
        kb.add("**", [a, e], [d, d])
        kb.add("**", [np.tile(np.array([1, 0, 2, 3] + ([-1, -2] if d.signed else [5, 6]),
                                       dtype=d.storage_np_dtype), N // 6 + 1)[:N], e], [d, d])
        for op in ("u-", "u+", "~", "abs", "floor", "ceil"):
            kb.add(op, [a], [d])
        kb.add("+", [a, 5], [d, None])                 # a loose constant
        kb.add("*", [3, a], [None, d])
        kb.add("<", [a, 2], [d, None])
        kb.add("*", [a, 0.5], [d, None])               # a loose float: f32
        if name in ("i32", "i64"):
            kb.add("cdiv", [a, b], [d, d])
    for name in FLOATS:
        d = dtype(name)
        a, b = float_values(name, rng), np.roll(float_values(name, rng), 5)
        for op in ("+", "-", "*", "/", "==", "!=", "<", "<=", ">", ">=", "minimum", "maximum"):
            kb.add(op, [a, b], [d, d])
        for op in ("u-", "u+", "abs", "floor", "ceil", "sqrt", "rsqrt"):
            kb.add(op, [a], [d])
        kb.add("+", [a, 1.5], [d, None])
        kb.add("maximum", [a, 0], [d, None])           # ReLU with a loose int
    bo = dtype("bool")
    p = np.array([True, False, True, False] * (N // 4))
    q = np.array([True, True, False, False] * (N // 4))
    for op in ("&", "|", "^", "==", "!=", "<", ">=", "minimum", "maximum"):
        kb.add(op, [p, q], [bo, bo])
    kb.add("~", [p], [bo])
    f32 = dtype("f32")
    x = float_values("f32", rng)
    kb.add("where", [x > 0, x, -x], [bo, f32, f32])
    kb.add("where", [p, x, 2.5], [bo, f32, None])
    kb.add("where", [p, int_values("i16", rng), 7], [bo, dtype("i16"), None])
    # mixed dtypes promote (i32 ⊕ f16 is f16, i8 ⊕ i32 is i32, bool ⊕ f32 is f32)
    kb.add("+", [int_values("i32", rng) % 1000, float_values("f16", rng)],
           [dtype("i32"), dtype("f16")])
    kb.add("*", [int_values("i8", rng), int_values("i32", rng)], [dtype("i8"), dtype("i32")])
    kb.add("==", [int_values("u8", rng), int_values("u32", rng)], [dtype("u8"), dtype("u32")])
    kb.add("<", [p, x], [bo, f32])
    return kb


@pytest.fixture(scope="module", params=["sm_80", "sm_90a"])
def ran(request):
    kb = _batch(request.param)
    kb.compile()
    link_all(kb.ptx, (request.param,))
    return kb.run()


def test_every_case_matches_the_registry(ran):
    for c in ran:
        _, ref = reference(c.op, c.operands, c.dts, c.params)
        out = c.out
        if c.op in ("minimum", "maximum") and out.dtype.kind == "f":
            # the sign of a zero between -0 and +0 is NumPy-build dependent (numerics.md)
            out, ref = np.where(out == 0, 0.0, out), np.where(ref == 0, 0.0, ref)
        assert_same(out, ref, c.operands, f"{c.op} {[str(d) for d in c.dts]}")


def _find(cases, op, dts):
    want = [dtype(d) if d else None for d in dts]
    return [c for c in cases if c.op == op and c.dts == want]


def _wrap(v: int, name: str) -> int:
    d = dtype(name)
    v &= (1 << d.bits) - 1
    return v - (1 << d.bits) if d.signed and v > d.max else v


@pytest.mark.parametrize("name", INTS)
def test_integer_division_is_pythons(ran, name):
    """Independent check: Python's // and % on unbounded ints, wrapped; zero divisor → 0."""
    for op in ("floordiv", "%"):
        (c,) = _find(ran, op, [name, name])
        a, b = c.operands
        want = []
        for x, y in zip(a.tolist(), b.tolist()):
            r = 0 if y == 0 else (x // y if op == "floordiv" else x % y)
            want.append(_wrap(r, name))
        assert c.out.tolist() == want


@pytest.mark.parametrize("name", ["i8", "i32", "u16", "u64"])
def test_shifts_past_the_width(ran, name):
    d = dtype(name)
    (shl,) = _find(ran, "<<", [name, name])
    (shr,) = _find(ran, ">>", [name, name])
    a, n = shl.operands
    for x, k, got_l, got_r in zip(a.tolist(), n.tolist(), shl.out.tolist(), shr.out.tolist()):
        if 0 <= k < d.bits:
            assert got_l == _wrap(x << k, name)
            assert got_r == x >> k            # Python >> is arithmetic, as for signed dtypes
        else:
            assert got_l == 0
            assert got_r == (-1 if x < 0 else 0)


@pytest.mark.parametrize("name", ["i8", "i32", "i64", "u32"])
def test_integer_power(ran, name):
    for c in _find(ran, "**", [name, name]):
        for x, e, got in zip(*(o.tolist() for o in c.operands), c.out.tolist()):
            if e >= 0:
                want = _wrap(pow(x, e), name)
            else:
                want = 1 if x == 1 else ((-1 if e % 2 else 1) if x == -1 else 0)
            assert got == want, (x, e)


def test_abs_of_the_minimum_wraps(ran):
    for name in ("i8", "i16", "i32", "i64"):
        (c,) = _find(ran, "abs", [name])
        i = c.operands[0].tolist().index(dtype(name).min)
        assert int(c.out[i]) == dtype(name).min


@pytest.mark.parametrize("name", ["f16", "f32", "f64"])
def test_maximum_minimum_propagate_nan_and_order_zeros(ran, name):
    npd = dtype(name).storage_np_dtype
    for op, fn in (("maximum", np.fmax), ("minimum", np.fmin)):
        (c,) = _find(ran, op, [name, name])
        a, b = c.operands
        want = np.where(np.isnan(a) | np.isnan(b), np.nan, fn(a, b)).astype(npd)
        both_zero = (a == 0) & (b == 0)
        sign = np.signbit(a) & np.signbit(b) if op == "maximum" else \
            np.signbit(a) | np.signbit(b)
        want = np.where(both_zero, np.where(sign, -0.0, 0.0), want).astype(npd)
        assert_same(c.out, want, c.operands, op)


def test_no_external_calls_and_links():
    kb = _batch("sm_90a")
    ptx = kb.compile()
    assert ".extern" not in ptx and "call" not in ptx.replace("call.uni", "")
    link_all(ptx, ("sm_90a",))


def test_interface_covers_the_registry():
    from tilelang.codegen.scalar.emitter import ELEMENTWISE, ScalarEmitter
    from tilelang.sema.builtins import OPERATORS, builtins_in_group
    math = {b.name for b in builtins_in_group("math")}
    assert math <= ELEMENTWISE
    # `@` is a product, `//` floor division's own lowering, `[]` an array subscript
    # (lower/index.py): none is an element-wise scalar op
    assert set(OPERATORS) - {"@", "//", "[]"} <= ELEMENTWISE
    assert {"astype", "bitcast", "cdiv"} <= ELEMENTWISE
    import llvmlite.ir as ir
    se = ScalarEmitter(ir.IRBuilder(), ir.Module(), get_target("sm_90a"))
    assert str(se.llvm_type(dtype("bf16"))) == "bfloat"
    assert str(se.llvm_type(dtype("f8e4m3"))) == "i8"
    assert str(se.llvm_type(dtype("tf32"))) == "float"
    assert se.identity("max", dtype("f32")) == float("-inf")
    assert se.identity("min", dtype("u8")) == 255
    assert se.identity("sum", dtype("i32")) == 0 and se.identity("prod", dtype("f16")) == 1.0
    assert str(se.constant(1.0, dtype("bf16"))) == "bfloat 0xR3F80"
    assert str(se.constant(-1, dtype("u8"))) == "i8 -1"


@pytest.mark.parametrize("target", ["sm_80"])
def test_reduction_combine(target):
    rng = np.random.default_rng(0)
    kb = KernelBatch(target)
    cases = []
    for name in ("f32", "f16", "i32", "u32", "i8", "bool"):
        d = dtype(name)
        if d.is_float:
            a, b = float_values(name, rng), np.roll(float_values(name, rng), 9)
        elif d.is_bool:
            a, b = rng.integers(0, 2, N).astype(bool), rng.integers(0, 2, N).astype(bool)
        else:
            a, b = int_values(name, rng), np.roll(int_values(name, rng), 9)
        for kind in ("sum", "prod", "max", "min"):
            cases.append((kind, a, b, kb.add("combine:" + kind, [a, b], [d, d],
                                             result_dtype=d)))
    kb.compile()
    link_all(kb.ptx, (target,))
    kb.run()
    for kind, a, b, c in cases:
        with np.errstate(all="ignore"):
            if a.dtype == bool:
                want = {"sum": a | b, "prod": a & b, "max": a | b, "min": a & b}[kind]
            else:
                want = {"sum": a + b, "prod": a * b, "max": np.maximum(a, b),
                        "min": np.minimum(a, b)}[kind]
        out = c.out
        if kind in ("max", "min") and out.dtype.kind == "f":
            out, want = np.where(out == 0, 0.0, out), np.where(want == 0, 0.0, want)
        if c.result_dtype.name == "f16" and kind in ("sum", "prod"):
            want = want.astype(np.float16)
        assert_same(out, want, [a, b], f"{kind} {c.result_dtype}")
