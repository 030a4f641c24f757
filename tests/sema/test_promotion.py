"""Promotion and broadcasting, checked against a table written out by hand (language.md §4)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tilelang.diagnostics import Span, TileSemanticError, remember_source, render
from tilelang.sema import constants as C
from tilelang.sema.constants import operand_dtype
from tilelang.sema.promotion import broadcast_all, broadcast_shapes, promote, promote_loose
from tilelang.sema.types import DTYPES, Sym

# S: signed with unsigned (E0302)  H: f16 with bf16 (E0304)  R: restricted float or packed FP4
# (E0303)
TABLE = """
         bool   i8     i16    i32    i64    u8     u16    u32    u64    f16    bf16   f32    f64    tf32   f8e4m3 f8e5m2 f4e2m1 f6e2m3 f6e3m2 ue8m0  f4e2m1x2
bool     bool   i8     i16    i32    i64    u8     u16    u32    u64    f16    bf16   f32    f64    R      R      R      R      R      R      R      R
i8       i8     i8     i16    i32    i64    S      S      S      S      f16    bf16   f32    f64    R      R      R      R      R      R      R      R
i16      i16    i16    i16    i32    i64    S      S      S      S      f16    bf16   f32    f64    R      R      R      R      R      R      R      R
i32      i32    i32    i32    i32    i64    S      S      S      S      f16    bf16   f32    f64    R      R      R      R      R      R      R      R
i64      i64    i64    i64    i64    i64    S      S      S      S      f16    bf16   f32    f64    R      R      R      R      R      R      R      R
u8       u8     S      S      S      S      u8     u16    u32    u64    f16    bf16   f32    f64    R      R      R      R      R      R      R      R
u16      u16    S      S      S      S      u16    u16    u32    u64    f16    bf16   f32    f64    R      R      R      R      R      R      R      R
u32      u32    S      S      S      S      u32    u32    u32    u64    f16    bf16   f32    f64    R      R      R      R      R      R      R      R
u64      u64    S      S      S      S      u64    u64    u64    u64    f16    bf16   f32    f64    R      R      R      R      R      R      R      R
f16      f16    f16    f16    f16    f16    f16    f16    f16    f16    f16    H      f32    f64    R      R      R      R      R      R      R      R
bf16     bf16   bf16   bf16   bf16   bf16   bf16   bf16   bf16   bf16   H      bf16   f32    f64    R      R      R      R      R      R      R      R
f32      f32    f32    f32    f32    f32    f32    f32    f32    f32    f32    f32    f32    f64    R      R      R      R      R      R      R      R
f64      f64    f64    f64    f64    f64    f64    f64    f64    f64    f64    f64    f64    f64    R      R      R      R      R      R      R      R
tf32     R      R      R      R      R      R      R      R      R      R      R      R      R      tf32   R      R      R      R      R      R      R
f8e4m3   R      R      R      R      R      R      R      R      R      R      R      R      R      R      f8e4m3 R      R      R      R      R      R
f8e5m2   R      R      R      R      R      R      R      R      R      R      R      R      R      R      R      f8e5m2 R      R      R      R      R
f4e2m1   R      R      R      R      R      R      R      R      R      R      R      R      R      R      R      R      f4e2m1 R      R      R      R
f6e2m3   R      R      R      R      R      R      R      R      R      R      R      R      R      R      R      R      R      f6e2m3 R      R      R
f6e3m2   R      R      R      R      R      R      R      R      R      R      R      R      R      R      R      R      R      R      f6e3m2 R      R
ue8m0    R      R      R      R      R      R      R      R      R      R      R      R      R      R      R      R      R      R      R      ue8m0  R
f4e2m1x2 R      R      R      R      R      R      R      R      R      R      R      R      R      R      R      R      R      R      R      R      f4e2m1x2
"""
CODES = {"S": "E0302", "H": "E0304", "R": "E0303"}


def _parse():
    lines = [ln.split() for ln in TABLE.strip().splitlines()]
    cols = lines[0]
    return {(row[0], c): cell for row in lines[1:] for c, cell in zip(cols, row[1:])}


EXPECTED = _parse()

# loose constant kind × strict dtype → result dtype
LOOSE = {
    "int": {"bool": "i32", "i8": "i8", "i16": "i16", "i32": "i32", "i64": "i64", "u8": "u8",
            "u16": "u16", "u32": "u32", "u64": "u64", "f16": "f16", "bf16": "bf16",
            "f32": "f32", "f64": "f64", "tf32": "tf32", "f8e4m3": "f8e4m3",
            "f8e5m2": "f8e5m2", "f4e2m1": "f4e2m1", "f6e2m3": "f6e2m3", "f6e3m2": "f6e3m2",
            "ue8m0": "ue8m0", "f4e2m1x2": "f4e2m1x2"},
    "float": {"bool": "f32", "i8": "f32", "i16": "f32", "i32": "f32", "i64": "f32",
              "u8": "f32", "u16": "f32", "u32": "f32", "u64": "f32", "f16": "f16",
              "bf16": "bf16", "f32": "f32", "f64": "f64", "tf32": "tf32", "f8e4m3": "f8e4m3",
              "f8e5m2": "f8e5m2", "f4e2m1": "f4e2m1", "f6e2m3": "f6e2m3", "f6e3m2": "f6e3m2",
              "ue8m0": "ue8m0", "f4e2m1x2": "f32"},
}
INT_RANGE = {"i8": (-128, 127), "i16": (-32768, 32767), "i32": (-2147483648, 2147483647),
             "i64": (-9223372036854775808, 9223372036854775807), "u8": (0, 255),
             "u16": (0, 65535), "u32": (0, 4294967295), "u64": (0, 18446744073709551615),
             "f4e2m1x2": (0, 255)}
FLOAT_MAX = {"f16": 65504.0, "bf16": 3.3895313892515355e38, "f32": 3.4028234663852886e38,
             "f64": 1.7976931348623157e308, "tf32": 3.4011621342146535e38,
             "f8e4m3": 448.0, "f8e5m2": 57344.0, "f4e2m1": 6.0, "f6e2m3": 7.5, "f6e3m2": 28.0,
             "ue8m0": 2.0 ** 127}
NO_INFINITY = {"f8e4m3", "f4e2m1", "f6e2m3", "f6e3m2", "ue8m0"}

names = st.sampled_from(sorted(DTYPES))


def test_table_is_complete():
    assert len(EXPECTED) == 21 * 21 == len(DTYPES) ** 2


@settings(max_examples=400, deadline=None)
@given(names, names)
def test_promote_matches_table(a, b):
    want = EXPECTED[(a, b)]
    assert EXPECTED[(b, a)] == want  # the table itself is symmetric
    if want in CODES:
        with pytest.raises(TileSemanticError) as e:
            promote(DTYPES[a], DTYPES[b], None)
        assert e.value.code == CODES[want]
        assert "astype" in e.value.diagnostics[0].help
    else:
        assert promote(DTYPES[a], DTYPES[b], None) is DTYPES[want]


def test_every_pair_exhaustively():
    for (a, b), want in EXPECTED.items():
        if want in CODES:
            with pytest.raises(TileSemanticError):
                promote(DTYPES[a], DTYPES[b], None)
        else:
            assert promote(DTYPES[a], DTYPES[b], None).name == want, (a, b)


loose_values = st.one_of(
    st.integers(min_value=-(2 ** 70), max_value=2 ** 70),
    st.sampled_from([0, 1, -1, 127, 128, -128, -129, 255, 256, 65504, 65505, 2 ** 31,
                     2 ** 63 - 1, 2 ** 63, 2 ** 64 - 1, 2 ** 64]),
    st.floats(allow_nan=False, allow_infinity=True),
    st.sampled_from([0.5, 448.0, 449.0, 57344.0, 65504.0, 65505.0, 1e39, -1e39]))


@settings(max_examples=600, deadline=None)
@given(names, loose_values, st.booleans())
def test_loose_against_strict(name, value, loose_first):
    kind = "float" if isinstance(value, float) else "int"
    want = LOOSE[kind][name]
    assert promote_loose(DTYPES[name], kind).name == want
    if want in INT_RANGE:
        lo, hi = INT_RANGE[want]
        ok = lo <= value <= hi
    elif value in (float("inf"), float("-inf")):
        ok = want not in NO_INFINITY
    else:
        ok = abs(value) <= FLOAT_MAX[want] and (want != "ue8m0" or value >= 0)  # no sign
    lc = C.loose(value)
    args = (lc, DTYPES[name]) if loose_first else (DTYPES[name], lc)
    if ok:
        assert operand_dtype(*args, None).name == want
    else:
        with pytest.raises(TileSemanticError) as e:
            operand_dtype(*args, None)
        assert e.value.code == "E0401"


def test_operand_dtype_with_strict_constants_and_loose_pairs():
    assert operand_dtype(C.loose(1), C.loose(2.0), None) is None
    assert operand_dtype(C.construct(DTYPES["i16"], C.loose(3), None), DTYPES["i32"], None) \
        is DTYPES["i32"]


def test_restricted_error_message():
    remember_source("p.tile", "let y = a + b;")
    with pytest.raises(TileSemanticError) as e:
        promote(DTYPES["tf32"], DTYPES["f32"], Span("p.tile", 1, 9, 1, 14))
    assert render(e.value.diagnostics[0]) == "\n".join([
        "error[E0303]: cannot mix tf32 and f32: tf32 is a restricted float that is never "
        "promoted implicitly",
        " --> p.tile:1:9",
        "  |",
        "1 | let y = a + b;",
        "  |         ^^^^^",
        "  |",
        "  = help: convert explicitly, e.g. `x.astype(f32)` or `y.astype(tf32)`",
    ])


# --- broadcasting -------------------------------------------------------------------------

def test_broadcast_numpy_rules():
    import numpy as np
    cases = [((128, 64), (64,)), ((128, 1), (1, 64)), ((), (4, 8)), ((1,), (16,)),
             ((2, 1, 8), (4, 1)), ((4, 8), (4, 8))]
    for a, b in cases:
        assert broadcast_shapes(a, b, None) == np.broadcast_shapes(a, b)
        assert broadcast_shapes(b, a, None) == np.broadcast_shapes(a, b)
    assert broadcast_all([(4, 1), (1, 8), (2, 1, 1)], None) == (2, 4, 8)


def test_broadcast_symbolic():
    n = Sym("N")
    assert broadcast_shapes((n, 1), (1, 64), None) == (n, 64)
    assert broadcast_shapes((n,), (n,), None) == (n,)
    with pytest.raises(TileSemanticError) as e:
        broadcast_shapes((n,), (64,), None)
    assert "const parameter" in e.value.diagnostics[0].help


def test_broadcast_error_prints_both_shapes():
    with pytest.raises(TileSemanticError) as e:
        broadcast_shapes((128, 64), (32,), None)
    assert e.value.code == "E0306"
    assert e.value.diagnostics[0].message == (
        "shapes (128, 64) and (32,) cannot be broadcast together: 64 and 32 differ and "
        "neither is 1")
