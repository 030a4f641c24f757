"""Predicated memory access: edge tiles as straight-line `@p ld/st.global` (vectors where the
facts make a vector wholly in or out), `load`/`store` with `mask=` and at element `offset=`s.
Every kernel runs on the emulator and in the reference interpreter, both checked against
NumPy, on ragged shapes, unaligned offsets and masks like `rows >= cols`; the PTX is checked
for the absence of per-element branches and for vector accesses."""

from __future__ import annotations

import re

import numpy as np
import pytest

from gen_support import Strided
from masked_support import compile_for, facts_of, kernel_body, run  # noqa: F401 (shared)
from tilelang.codegen.api import ArrayFacts
from tilelang.diagnostics import render_all
from tilelang.driver import compile_source
from tilelang.options import CompileOptions

NP = {"f32": np.float32, "f16": np.float16, "f64": np.float64, "i8": np.int8, "i32": np.int32,
      "bool": np.bool_, "u16": np.uint16}


def branches(ptx: str) -> int:
    return len(re.findall(r"\bbra(?:\.uni)?\b", ptx))


COPY = """
kernel copy(x: Array[T, 2], y: Array[T, 2], const BM: i32 = 8, const BN: i32 = 64) {
    let t = load(x, index = (bid(0), bid(1)), shape = (BM, BN), padding = PAD);
    store(y, index = (bid(0), bid(1)), tile = t);
}
"""


# ---------------------------------------------------------------------------------------------
# Edge tiles

@pytest.mark.parametrize("dt,pad", [("f32", "-1.5"), ("f16", "2.0"), ("f64", "7.0"),
                                    ("i8", "-3"), ("bool", "true"), ("u16", "9")])
@pytest.mark.parametrize("rows,cols", [(13, 70), (8, 64), (5, 3), (17, 128)])
def test_ragged_copy(dt, pad, rows, cols):
    """Every edge tile (partial rows and columns, vectors straddling the row end or not) equals
    NumPy's padded copy; y's elements outside x keep their value where y is larger."""
    rng = np.random.default_rng(rows * cols)
    npdt = NP[dt]
    x = (rng.integers(0, 2, (rows, cols)) if dt == "bool"
         else rng.integers(-50, 50, (rows, cols))).astype(npdt)
    y = np.zeros((rows + 3, cols + 5), npdt)
    src = COPY.replace("T,", f"{dt},").replace("PAD", pad)
    res = compile_for(src, "copy", {"x": x, "y": y})
    grid = (-(-(rows + 3) // 8), -(-(cols + 5) // 64))
    emu, ref = run(res, "copy", {"x": x, "y": y}, grid)
    padv = {"true": True}.get(pad, pad)
    want = np.full(y.shape, np.asarray(float(padv) if dt != "bool" else padv).astype(npdt))
    want[:rows, :cols] = x
    np.testing.assert_array_equal(ref["y"], want)
    np.testing.assert_array_equal(emu["y"], want)


@pytest.mark.parametrize("extent16", [True, False])
def test_edge_tiles_have_no_branch_per_element(extent16):
    """The number of branches does not grow with the elements per thread: the edge path is
    predicated accesses (vectors: `@%p ld.global.v4.b32`), not a branch around each element."""
    facts = {"x": ArrayFacts(extent16=extent16), "y": ArrayFacts(extent16=extent16)}
    counts = []
    for bn in (64, 256, 1024):
        src = COPY.replace("T,", "f32,").replace("PAD", "0.0")
        res = compile_source(src, "<masked>.tile", CompileOptions(defines={"BN": bn}),
                             facts={"copy": facts}, until="ptx")
        assert res.ok, render_all(res.diagnostics)
        body = kernel_body(res.codegen.ptx, "copy")
        assert re.search(r"@%p\d+ ld\.global\.v4\.b32 \{", body)
        assert re.search(r"@%p\d+ st\.global\.v4\.b32 \[", body)
        if extent16:     # a vector is wholly in or out: no element-wise access at all
            assert not re.search(r"ld\.global\.b32", body)
        counts.append(branches(body))
    # (the wider tiles stream, stream.py: one uniform test for the load and the store; a
    # `.maxntid` kernel's virtual-thread loop adds its own, a short block's path included)
    assert counts[0] >= counts[1] == counts[2] and counts[0] <= 12, counts


# ---------------------------------------------------------------------------------------------
# Masks

TRIANGLE = """
kernel lower(x: Array[f32, 2], y: Array[f32, 2]) {
    let rows = expand_dims(arange(32, i32) + bid(0) * 32, 1);
    let cols = expand_dims(arange(64, i32), 0);
    let t = load(x, index = (bid(0), 0), shape = (32, 64), padding = -1.0,
                 mask = rows >= cols);
    store(y, index = (bid(0), 0), tile = t * 2.0, mask = rows >= cols);
}
"""


@pytest.mark.parametrize("rows,cols", [(70, 64), (64, 50), (9, 33)])
def test_triangular_mask(rows, cols):
    """Triton's `tl.store(p, v, mask=rows >= cols)`: elements above the diagonal are neither
    read (padding) nor written (y keeps its value)."""
    rng = np.random.default_rng(rows + cols)
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    y = np.full((rows, cols), 5.0, np.float32)
    res = compile_for(TRIANGLE, "lower", {"x": x, "y": y})
    emu, ref = run(res, "lower", {"x": x, "y": y}, (-(-rows // 32),))
    r, c = np.indices((rows, cols))
    want = np.where(r >= c, x * 2, 5.0).astype(np.float32)
    want[:, 64:] = 5.0
    np.testing.assert_array_equal(ref["y"], want)
    np.testing.assert_array_equal(emu["y"], want)


ROW_MASK = """
kernel rows_only(x: Array[f32, 2], keep: Array[i32, 1], y: Array[f32, 2]) {
    let k = load(keep, index = (bid(0),), shape = (16,));
    let m = expand_dims(k != 0, 1);                       // one flag per row
    let t = load(x, index = (bid(0), 0), shape = (16, 128), padding = 0.5, mask = m);
    store(y, index = (bid(0), 0), tile = t + 1.0, mask = m);
}
"""


def test_row_mask_keeps_vectors():
    """A mask that broadcasts along the contiguous axis is one predicate per vector: masked
    rows use predicated `ld/st.global.v4`, no scalar accesses."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((40, 128)).astype(np.float32)
    keep = rng.integers(0, 2, 40).astype(np.int32)
    y = np.full((40, 128), -2.0, np.float32)
    res = compile_for(ROW_MASK, "rows_only", {"x": x, "keep": keep, "y": y})
    body = kernel_body(res.codegen.ptx, "rows_only")
    assert re.search(r"@%p\d+ ld\.global\.v4\.b32", body)
    assert re.search(r"@%p\d+ st\.global\.v4\.b32", body)
    assert not re.search(r"st\.global\.b32", body)
    assert len(re.findall(r"ld\.global\.b32", body)) <= 2       # `keep`: 16 elements
    emu, ref = run(res, "rows_only", {"x": x, "keep": keep, "y": y}, (3,))
    want = np.where(keep[:, None] != 0, x + 1.0, -2.0).astype(np.float32)
    np.testing.assert_array_equal(ref["y"], want)
    np.testing.assert_array_equal(emu["y"], want)


# ---------------------------------------------------------------------------------------------
# Element offsets

WINDOW = """
kernel window(x: Array[f32, 2], y: Array[f32, 2], r0: i32, c0: i32) {
    let t = load(x, offset = (r0 + bid(0) * 8, c0), shape = (8, 32), padding = 9.0);
    store(y, index = (bid(0), 0), tile = t);
}
"""


@pytest.mark.parametrize("r0,c0", [(0, 0), (3, 1), (-2, 5), (1, 4), (10, 37), (0, -3)])
def test_offset_load_at_any_element(r0, c0):
    """A window at a run-time element offset: unaligned starts take the scalar path, aligned
    ones the vector path (one uniform branch decides), partly outside reads padding."""
    rng = np.random.default_rng(abs(r0 * 100 + c0))
    x = rng.standard_normal((21, 44)).astype(np.float32)
    xb = np.zeros((21, 48), np.float32)
    xb[:, :44] = x
    xs = Strided(xb, xb[:, :44])                          # 16-byte row pitch
    y = np.zeros((24, 32), np.float32)
    res = compile_for(WINDOW, "window", {"x": xs, "y": y})
    body = kernel_body(res.codegen.ptx, "window")
    assert re.search(r"ld\.global(\.\w+)*\.v[24]\.b32", body)
    emu, ref = run(res, "window", {"x": xs, "y": y, "r0": r0, "c0": c0}, (3,))
    want = np.full((24, 32), 9.0, np.float32)
    for i in range(24):
        for j in range(32):
            r, c = r0 + i, c0 + j
            if 0 <= r < 21 and 0 <= c < 44:
                want[i, j] = x[r, c]
    np.testing.assert_array_equal(ref["y"], want)
    np.testing.assert_array_equal(emu["y"], want)


SHIFT = """
kernel shift(x: Array[f16, 1], y: Array[f16, 1], const S: i32 = 3) {
    let t = load(x, offset = (bid(0) * 256 + S,), shape = (256,));
    store(y, offset = (bid(0) * 256 + S,), tile = t * f16(2.0),
          mask = arange(256, i32) % 3 != 0);
}
"""


@pytest.mark.parametrize("s", [3, 8, 0, -5])
def test_offset_store_with_mask(s):
    """Constant shifts (vectors as wide as the shift's alignment allows) with a masked store
    whose mask varies inside each vector."""
    rng = np.random.default_rng(abs(s + 10))
    x = rng.integers(-20, 20, 700).astype(np.float16)
    y = np.full(700, 1.0, np.float16)
    res = compile_for(SHIFT, "shift", {"x": x, "y": y}, defines={"S": s})
    emu, ref = run(res, "shift", {"x": x, "y": y}, (3,))
    want = y.copy()
    for b in range(3):
        for j in range(256):
            i = b * 256 + s + j
            if 0 <= i < 700 and j % 3:
                want[i] = x[i] * 2
    np.testing.assert_array_equal(ref["y"], want)
    np.testing.assert_array_equal(emu["y"], want)


# ---------------------------------------------------------------------------------------------
# Diagnostics

@pytest.mark.parametrize("call,want", [
    ("load(a, shape = (16, 32))",
     "E0512: `load` is given neither `index` nor `offset`"),
    ("load(a, (0, 0), offset = (1, 2), shape = (16, 32))",
     "E0512: `load` is given both `index` and `offset`"),
    ("load(a, offset = (0,), shape = (16, 32))",
     "E0509: `load`: parameter `offset` has 1 entry but the array is Array[f32, 2]"),
    ("load(a, (0, 0), (16, 32), mask = arange(32, i32))",
     "E0508: `load`: parameter `mask` must be a bool tile, found Tile[i32, 32]"),
    ("load(a, (0, 0), (16, 32), mask = broadcast_to(arange(32, i32) > 3, (32, 32)))",
     "E0509: `load`: parameter `mask` is Tile[bool, 32, 32], which does not broadcast to the "
     "tile's shape (16, 32)"),
    ("load(a, offset = (0, 1.5), shape = (16, 32))",
     "E0506: `load`: entry 1 of `offset` must be an integer scalar, found `1.5` of type float "
     "literal"),
])
def test_diagnostics(call, want):
    src = f"kernel k(a: Array[f32, 2]) {{ let t = {call}; }}"
    res = compile_source(src, "<masked>.tile", CompileOptions(), until="ptx")
    assert not res.ok
    got = [f"{d.code}: {d.message}" for d in res.diagnostics]
    assert got[0] == want, got


def test_store_diagnostics():
    src = ("kernel k(a: Array[f32, 1]) { store(a, tile = zeros((8,), f32), "
           "mask = zeros((8,), i32) > 0); store(a, (0,), zeros((8,), f32), offset = (2,)); }")
    res = compile_source(src, "<masked>.tile", CompileOptions(), until="ptx")
    got = [f"{d.code}: {d.message}" for d in res.diagnostics]
    assert got[0] == "E0512: `store` is given neither `index` nor `offset`", got


TRANSPOSED = """
kernel tw(x: Array[f32, 2], y: Array[f32, 2], r0: i32, c0: i32, on: bool) {
    let t = load(x, offset = (c0, r0 + bid(0) * 16), shape = (32, 16), order = (1, 0),
                 padding = -4.0, mask = on);
    store(y, index = (0, bid(0)), tile = t);
}
"""


@pytest.mark.parametrize("r0,c0,on", [(0, 0, True), (3, 5, True), (-1, 30, True),
                                      (2, 2, False)])
def test_transposed_offset_load_with_a_scalar_mask(r0, c0, on):
    """`order = (1, 0)` with an element offset (given along the permuted axes) and a run-time
    scalar mask (false: the whole tile is padding)."""
    x = np.random.default_rng(abs(r0 + 3 * c0)).standard_normal((40, 48)).astype(np.float32)
    y = np.zeros((32, 48), np.float32)
    res = compile_for(TRANSPOSED, "tw", {"x": x, "y": y})
    emu, ref = run(res, "tw", {"x": x, "y": y, "r0": r0, "c0": c0, "on": on}, (3,))
    want = np.full((32, 48), -4.0, np.float32)
    if on:
        for i in range(32):
            for j in range(48):
                c, r = c0 + i, r0 + j          # tile row i is x's column c0 + i
                if 0 <= r < 40 and 0 <= c < 48:
                    want[i, j] = x[r, c]
    np.testing.assert_array_equal(ref["y"], want)
    np.testing.assert_array_equal(emu["y"], want)


PRODUCT = """
kernel mm(a: Array[f16, 2], b: Array[f16, 2], c: Array[f32, 2], k0: i32) {
    var acc = zeros((64, 64), f32);
    for k in range(0, cdiv(a.shape[1], 32)) {
        let rows = expand_dims(arange(64, i32), 1);
        let ta = load(a, offset = (bid(0) * 64, k * 32 + k0), shape = (64, 32),
                      mask = rows < 50);
        let tb = load(b, index = (k, bid(1)), shape = (32, 64));
        acc = mma(ta, tb, acc);
    }
    store(c, index = (bid(0), bid(1)), tile = acc, mask = expand_dims(arange(64, i32), 0) < 60);
}
"""


@pytest.mark.parametrize("k0", [0, 3])
def test_masked_offset_operands_of_a_product(k0):
    """A masked load at a run-time offset feeds `mma` as registers (the tensor-core operand
    pipeline takes only plain tile loads) and a masked store writes the accumulator."""
    rng = np.random.default_rng(k0)
    A = rng.integers(-3, 3, (64, 64)).astype(np.float16)
    B = rng.integers(-3, 3, (64, 64)).astype(np.float16)
    C = np.full((64, 64), 7, np.float32)
    res = compile_for(PRODUCT, "mm", {"a": A, "b": B, "c": C})
    emu, ref = run(res, "mm", {"a": A, "b": B, "c": C, "k0": k0}, (1, 1))
    As = np.zeros((64, 64), np.float32)
    As[:50, :64 - k0] = A[:50, k0:]
    want = np.full((64, 64), 7, np.float32)
    want[:, :60] = (As @ B.astype(np.float32))[:, :60]
    np.testing.assert_array_equal(ref["c"], want)
    np.testing.assert_array_equal(emu["c"], want)
