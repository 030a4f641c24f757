"""Loose and strict constants. The rules come from seed 001_45fa852e188b7288.txt
("Constantness"); tests quoting it say so."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tilelang.diagnostics import Span, TileSemanticError, remember_source, render
from tilelang.sema import constants as C
from tilelang.sema.types import (BF16, BOOL, F8E4M3, F8E5M2, F16, F32, F64, I8, I16, I32, I64,
                                 LOOSE_FLOAT, LOOSE_INT, U8, U32, U64, Sym, scalar)

SEED = "001_45fa852e188b7288.txt"
L = C.loose


def strict(dtype, v):
    return C.construct(dtype, L(v), None)


def err(fn, *args):
    with pytest.raises(TileSemanticError) as e:
        fn(*args)
    return e.value


# --- the seed's examples (seed 001_45fa852e188b7288.txt) -----------------------------------

def test_seed_strict_plus_loose_is_strict():
    # "ct.int16(5) + 2 will create a strictly typed int16 constant 7" (seed 001)
    r = C.binary("+", strict(I16, 5), L(2), None)
    assert r == C.ConstValue(7, I16) and not r.is_loose and str(r) == "i16(7)"
    assert C.binary("+", L(2), strict(I16, 5), None) == C.ConstValue(7, I16)


def test_seed_strict_plus_strict_promotes():
    # "ct.int16(5) + ct.int32(7) will create a strictly typed int32 constant 12" (seed 001)
    assert C.binary("+", strict(I16, 5), strict(I32, 7), None) == C.ConstValue(12, I32)


def test_seed_loose_ints_have_infinite_precision():
    # "integer constants have infinite precision" (seed 001)
    big = C.binary("**", L(2), L(200), None)
    assert big == L(2 ** 200) and big.is_loose
    assert C.binary("-", big, C.binary("**", L(2), L(200), None), None) == L(0)
    assert C.binary("//", C.binary("*", L(10 ** 30), L(10 ** 30), None), L(10 ** 59), None) \
        == L(10)


def test_seed_loose_floats_are_doubles():
    # "floating-point constants are stored in the IEEE 754 double precision format" (seed 001)
    r = C.binary("+", L(0.1), L(0.2), None)
    assert r.value == 0.1 + 0.2 == 0.30000000000000004 and r.is_loose
    assert C.binary("*", L(1e200), L(1e200), None).value == math.inf
    # the same sum in strict f32 is rounded to f32
    s = C.binary("+", strict(F32, 0.1), L(0.2), None)
    assert s.value == float(np.float32(np.float64(np.float32(0.1)) + 0.2))


def _diag(source: str, line: int, col: int, end_col: int, fn):
    remember_source("seed001.tile", source)
    span = Span("seed001.tile", line, col, line, end_col)
    with pytest.raises(TileSemanticError) as e:
        fn(span)
    return render(e.value.diagnostics[0])


def test_loose_value_that_does_not_fit_renders():
    # a loose value materialized as a type it does not fit names value and type (seed 001)
    src = "kernel k() {\n    let x = i8(5) + -170;\n}"
    text = _diag(src, 2, 13, 25,
                 lambda sp: C.binary("+", strict(I8, 5), C.unary("-", L(170), sp), sp))
    assert text == "\n".join([
        "error[E0401]: integer constant -170 does not fit in i8",
        " --> seed001.tile:2:13",
        "  |",
        "2 |     let x = i8(5) + -170;",
        "  |             ^^^^^^^^^^^^",
        "  |",
        "  = help: i8 holds -128 to 127",
    ])


def test_constructor_out_of_range_renders():
    text = _diag("let y = i8(300);", 1, 9, 16, lambda sp: C.construct(I8, L(300), sp))
    assert text.splitlines()[0] == "error[E0401]: integer constant 300 does not fit in i8"
    assert text.splitlines()[-1] == "  = help: i8 holds -128 to 127"


def test_lossy_constructor_renders():
    text = _diag("let z = i32(2.5);", 1, 9, 17, lambda sp: C.construct(I32, L(2.5), sp))
    assert text == "\n".join([
        "error[E0405]: `i32(2.5)` would drop the fraction of 2.5",
        " --> seed001.tile:1:9",
        "  |",
        "1 | let z = i32(2.5);",
        "  |         ^^^^^^^^",
        "  |",
        "  = help: use `astype(2.5, i32)` to truncate toward zero, or `floor`/`ceil` first",
    ])


def test_strict_overflow_renders():
    text = _diag("i8(100) * 2", 1, 1, 12,
                 lambda sp: C.binary("*", strict(I8, 100), L(2), sp))
    assert text.splitlines()[0] == \
        "error[E0402]: i8 arithmetic overflows: 100 * 2 = 200 does not fit in i8"


# --- constructors -------------------------------------------------------------------------

def test_constructors():
    assert strict(I32, 2.0) == C.ConstValue(2, I32)
    assert strict(F32, 0.5) == C.ConstValue(0.5, F32)
    assert strict(F16, 0.1).value == float(np.float16(0.1))
    assert strict(BF16, 1 + 2 ** -9).value == 1.0
    assert strict(BOOL, 1) == C.const_bool(True)
    assert strict(F16, math.inf).value == math.inf
    assert math.isnan(strict(F32, math.nan).value)
    assert C.construct(I16, strict(I64, 5), None) == C.ConstValue(5, I16)
    assert C.construct(I32, C.const_bool(True), None) == C.ConstValue(1, I32)
    assert err(strict, I32, 2.5).code == "E0405"
    assert err(strict, I32, math.inf).code == "E0405"
    assert err(strict, U8, -1).code == "E0401"
    assert err(strict, F16, 70000).code == "E0401"
    assert err(strict, F16, 65505.0).code == "E0401"
    assert strict(F16, 65504).value == 65504.0
    assert err(strict, F8E4M3, math.inf).code == "E0401"  # e4m3 has no infinity
    assert strict(F8E5M2, -math.inf).value == -math.inf
    assert err(strict, F8E4M3, 449.0).code == "E0401"
    assert err(strict, BOOL, 5).code == "E0405"


def test_materialize():
    assert C.materialize(L(-128), I8, None) == C.ConstValue(-128, I8)
    assert C.materialize(L(3), F16, None) == C.ConstValue(3.0, F16)
    assert C.materialize(L(16777217), F32, None).value == 16777216.0  # rounding is silent
    assert C.materialize(L(math.inf), F32, None).value == math.inf
    assert C.materialize(strict(I8, 3), I8, None) == strict(I8, 3)
    assert err(C.materialize, L(128), I8, None).code == "E0401"
    assert err(C.materialize, L(2 ** 63), I64, None).code == "E0401"
    assert C.materialize(L(2 ** 63), U64, None).value == 2 ** 63
    assert err(C.materialize, L(1e39), F32, None).code == "E0401"
    assert err(C.materialize, L(1.5), I32, None).code == "E0307"
    assert err(C.materialize, L(1), BOOL, None).code == "E0307"
    assert err(C.materialize, strict(I16, 1), I32, None).code == "E0307"


# --- arithmetic ---------------------------------------------------------------------------

def test_division_semantics():
    assert C.binary("/", L(7), L(2), None) == L(3.5)
    assert C.binary("//", L(-7), L(2), None) == L(-4)       # floors, like Python
    assert C.binary("%", L(-7), L(2), None) == L(1)         # divisor's sign, like Python
    assert C.binary("%", L(7), L(-2), None) == L(-1)
    r = C.binary("/", strict(I32, 7), L(2), None)
    assert r == C.ConstValue(3.5, F32)                      # int / int is f32
    assert C.binary("//", strict(I32, -7), L(2), None) == C.ConstValue(-4, I32)
    assert C.binary("//", L(-7.0), L(2), None) == L(-4.0)
    assert C.binary("%", L(-7.5), L(2), None) == L(0.5)
    assert C.binary("/", L(1.0), L(0), None).value == math.inf  # IEEE for floats
    assert math.isnan(C.binary("%", L(1.0), L(0.0), None).value)
    for op in ("/", "//", "%"):
        assert err(C.binary, op, L(1), L(0), None).code == "E0403"
    assert err(C.binary, "//", strict(I32, 1), L(0), None).code == "E0403"
    assert C.binary("/", L(10 ** 400), L(10 ** 399), None) == L(10.0)


def test_powers_and_shifts():
    assert C.binary("**", L(3), L(4), None) == L(81)
    assert C.binary("**", L(2.0), L(-1), None) == L(0.5)
    assert err(C.binary, "**", L(2), L(-1), None).code == "E0404"
    assert err(C.binary, "**", L(2), L(10 ** 9), None).code == "E0406"
    assert err(C.binary, "**", strict(I32, 2), L(1000), None).code == "E0402"
    assert C.binary("**", strict(I32, 2), L(30), None) == C.ConstValue(2 ** 30, I32)
    assert C.binary("<<", L(1), L(100), None) == L(2 ** 100)
    assert C.binary(">>", L(-9), L(1), None) == L(-5)       # arithmetic shift
    assert err(C.binary, "<<", L(1), L(-1), None).code == "E0404"
    assert err(C.binary, ">>", strict(I32, 1), L(32), None).code == "E0404"
    assert err(C.binary, "<<", strict(I32, 1), L(31), None).code == "E0402"
    assert C.binary("<<", strict(U32, 1), L(31), None) == C.ConstValue(2 ** 31, U32)
    assert err(C.binary, "<<", L(1.0), L(1), None).code == "E0407"


def test_strict_int_overflow_is_an_error():
    assert err(C.binary, "-", strict(U8, 0), L(1), None).code == "E0402"
    assert err(C.unary, "-", strict(I8, -128), None).code == "E0402"
    assert C.binary("+", strict(I8, 100), L(27), None) == C.ConstValue(127, I8)
    assert C.binary("+", strict(I8, 100), strict(I16, 100), None) == C.ConstValue(200, I16)


def test_bitwise():
    assert C.binary("&", L(12), L(10), None) == L(8)
    assert C.binary("^", L(-1), L(5), None) == L(-6)
    assert C.unary("~", strict(U8, 0), None) == C.ConstValue(255, U8)
    assert C.unary("~", strict(I8, 0), None) == C.ConstValue(-1, I8)
    assert C.unary("~", L(5), None) == L(-6)
    assert C.binary("|", C.const_bool(True), C.const_bool(False), None) == C.const_bool(True)
    assert C.unary("~", C.const_bool(True), None) == C.const_bool(False)
    assert err(C.binary, "&", L(1.0), L(1), None).code == "E0407"
    assert err(C.binary, "&", strict(F32, 1), L(1), None).code == "E0407"
    assert err(C.unary, "~", L(1.5), None).code == "E0407"


def test_comparisons_and_logic():
    assert C.binary("<", L(1), L(1.5), None) == C.const_bool(True)
    assert C.binary("==", L(2 ** 80), L(2 ** 80), None) == C.const_bool(True)
    assert C.binary(">=", strict(I8, -1), L(0), None) == C.const_bool(False)
    assert C.binary("==", strict(F16, 0.1), L(0.1), None) == C.const_bool(True)  # both f16
    assert C.binary("and", C.const_bool(True), C.const_bool(False), None) \
        == C.const_bool(False)
    assert C.binary("or", C.const_bool(False), C.const_bool(True), None) == C.const_bool(True)
    assert C.unary("not", C.const_bool(False), None) == C.const_bool(True)
    assert err(C.binary, "and", L(1), C.const_bool(True), None).code == "E0407"
    assert err(C.unary, "not", L(0), None).code == "E0407"
    assert err(C.binary, "<", strict(I32, 1), strict(U32, 1), None).code == "E0302"
    assert C.truth(C.const_bool(True), None) is True
    assert err(C.truth, L(1), None).code == "E0307"


def test_bool_arithmetic_rejected_but_bool_with_loose_int_promotes():
    assert err(C.binary, "+", C.const_bool(True), C.const_bool(True), None).code == "E0305"
    assert err(C.unary, "-", C.const_bool(True), None).code == "E0305"
    assert C.binary("+", C.const_bool(True), L(1), None) == C.ConstValue(2, I32)


def test_loose_float_with_int_is_f32():
    assert C.binary("*", strict(I32, 3), L(0.5), None) == C.ConstValue(1.5, F32)
    assert C.binary("+", strict(F16, 1.0), L(1), None) == C.ConstValue(2.0, F16)
    assert C.binary("+", L(1), L(0.5), None) == L(1.5)
    assert err(C.binary, "+", strict(F16, 1.0), L(1e6), None).code == "E0401"
    assert err(C.binary, "+", strict(I8, 1), L(200), None).code == "E0401"
    assert err(C.binary, "+", strict(F16, 1.0), strict(BF16, 1.0), None).code == "E0304"


def test_strict_float_arithmetic_rounds_to_dtype():
    x = C.binary("/", strict(F32, 1.0), L(3), None)
    assert x.value == float(np.float32(1.0) / np.float32(3.0)) and x.dtype is F32
    h = C.binary("+", strict(F16, 2048.0), L(1.0), None)
    assert h.value == 2048.0                                 # 2049 is not an f16
    assert C.binary("*", strict(F16, 60000.0), L(2.0), None).value == math.inf
    b = C.binary("+", strict(BF16, 256.0), L(1.0), None)
    assert b.value == 256.0 and b.dtype is BF16
    assert C.binary("+", strict(F64, 0.1), L(0.2), None).value == 0.1 + 0.2


def test_misc():
    assert C.loose(3).type == LOOSE_INT and C.loose(3.0).type == LOOSE_FLOAT
    assert strict(I16, 3).type == scalar(I16)
    assert C.loose(1) != C.loose(1.0) and C.loose(1) != C.const_bool(True)
    assert len({C.loose(1), C.loose(1.0), C.const_bool(True)}) == 3
    assert C.ConstValue(True) == C.const_bool(True)          # bools are always strict
    assert str(C.loose(math.inf)) == "inf" and str(C.const_bool(False)) == "false"
    assert str(C.ConstTuple((C.loose(128),))) == "(128,)"
    assert C.as_int(C.loose(4), None) == 4
    assert err(C.as_int, C.loose(4.0), None).code == "E0307"
    n = C.ConstValue(Sym("N"), I32)
    assert err(C.binary, "+", n, L(1), None).code == "E0408"
    assert C.unary("-", L(2), None) == L(-2) and C.unary("+", L(2.5), None) == L(2.5)


def test_symbolic_values_materialize_unchecked():
    n = C.ConstValue(Sym("N"))
    assert C.materialize(n, I32, None) == C.ConstValue(Sym("N"), I32)
    assert C.materialize(C.ConstValue(Sym("N"), I32), I32, None).dtype is I32
    assert err(C.construct, I32, n, None).code == "E0408"
