"""The `small` fact (docs/abi.md): an array whose every element lies fewer than 2^31 elements
from its address gets its offsets computed in 32 bits and widened once. The same kernels as
test_gen_memory.py with the fact claimed — edge tiles, negative and non-unit strides,
transposed loads, gather/scatter with out-of-range indices — run on the emulator against the
interpreter; the PTX has no 64-bit multiply for an offset with the fact and keeps them without
it (the default: an array may be larger)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from gen_support import Strided, compile_kernel, run_both, same
from test_gen_memory import copy_kernel, expected_copy, perm_scatter
from tilelang.codegen.api import ArrayFacts
from tilelang.ir.builder import KernelBuilder
from tilelang.sema.types import F16, F32, I32, ArrayType, scalar

SMALL = ArrayFacts(small=True)
SMALL_GENERIC = ArrayFacts(contiguous=False, aligned16=False, extent16=False, small=True)


def _wide_math(ptx: str) -> list[str]:
    """64-bit multiplies and multiply-adds (offset arithmetic in 64 bits)."""
    return re.findall(r"\b(?:mul\.lo|mad\.lo)\.[su]64\b", ptx)


def row_kernel(n: int):
    """y[r, :] = x[r, :] * 2 over (1, n) tiles: offsets are row * stride + column."""
    kb = KernelBuilder("rows")
    x, y = kb.param("x", ArrayType(F32, 2)), kb.param("y", ArrayType(F32, 2))
    r = kb.op("bid", 0)
    zero = kb.constant(0, I32)
    t = kb.op("load", x, index=(r, zero), shape=(1, n), padding=0.0)
    kb.op("store", y, index=(r, zero), tile=kb.op("*", t, 2.0))
    return kb.finish()


@pytest.mark.parametrize("n,tile", [(300, 128), (256, 128), (5, 8)])
def test_1d_edges(n, tile):
    k = copy_kernel(F32, 1, (tile,), -1.5)
    x = np.arange(n, dtype=np.float32) + 0.25
    grid = (-(-n // tile) + 1,)
    y = np.zeros(grid[0] * tile - tile // 2, np.float32)
    facts = {"x": ArrayFacts(extent16=n % 4 == 0, small=True),
             "y": ArrayFacts(extent16=y.size % 4 == 0, small=True)}
    (_, ye), (_, yr), _, _ = run_both(k, [x, y], grid + (1, 1), facts=facts)
    want = expected_copy(x, y.shape, (tile,), -1.5, grid, np.float32)
    same(yr, want)
    same(ye, want)


def test_rows_with_a_pitch_and_a_ragged_last_row():
    """(7, 100) rows of a (7, 104) buffer over 128-wide tiles: the pitch comes from the
    stride parameter, the last 28 columns of each tile are padding."""
    k = row_kernel(128)
    base = np.random.default_rng(0).standard_normal((7, 104)).astype(np.float32)
    ybase = np.full((7, 104), 5.0, np.float32)
    x, y = Strided(base, base[:, :100]), Strided(ybase, ybase[:, :100])
    facts = {"x": SMALL, "y": SMALL}
    (_, ye), (_, yr), r, _ = run_both(k, [x, y], (7, 1, 1), facts=facts)
    want = ybase.copy()
    want[:, :100] = base[:, :100] * 2
    same(yr, want[:, :100])
    same(ye, want[:, :100])
    assert not _wide_math(r.ptx)
    wide = compile_kernel(k, facts={"x": ArrayFacts(), "y": ArrayFacts()})
    assert _wide_math(wide.ptx)


def test_negative_and_non_unit_strides():
    k = copy_kernel(F32, 2, (8, 16), -2.0)
    base = np.random.default_rng(1).standard_normal((30, 90)).astype(np.float32)
    xv = base[::-2, 5::3]                          # (15, 29), negative row stride
    ybase = np.full((40, 100), 3.0, np.float32)
    yv = ybase[1::2, ::-2]                         # (20, 50), negative column stride
    (_, ye), (_, yr), r, _ = run_both(k, [Strided(base, xv), Strided(ybase, yv)], (2, 2, 1),
                                      facts={"x": SMALL_GENERIC, "y": SMALL_GENERIC})
    want = yv.copy()
    want[:16, :32] = expected_copy(xv, (16, 32), (8, 16), -2.0, (2, 2), np.float32)
    same(yr, want)
    same(ye, want)
    assert not _wide_math(r.ptx)


def test_transposed_load_with_order():
    kb = KernelBuilder("tload")
    x, y = kb.param("x", ArrayType(F16, 2)), kb.param("y", ArrayType(F16, 2))
    i, j = kb.op("bid", 0), kb.op("bid", 1)
    t = kb.op("load", x, index=(i, j), shape=(16, 8), padding=0.5, order=(1, 0))
    kb.op("store", y, index=(i, j), tile=t)
    k = kb.finish()
    x = np.random.default_rng(2).standard_normal((20, 24)).astype(np.float16)
    y = np.zeros((32, 24), np.float16)
    (_, ye), (_, yr), _, _ = run_both(k, [x, y], (2, 3, 1), facts={"x": SMALL, "y": SMALL})
    want = expected_copy(x.T, (32, 24), (16, 8), 0.5, (2, 3), np.float16)
    same(yr, want)
    same(ye, want)


def test_gather_scatter_out_of_range_indices():
    """Indices far outside the array (and negative) are masked by 64-bit tests even though
    the offset itself is computed in 32 bits and may wrap for them."""
    n = 100
    ix = np.random.default_rng(5).integers(-5, n + 5, n).astype(np.int32)
    ix[:4] = [2**31 - 1, -2**31, 2**30 + 3, -(2**30) + 7]   # wrap to in-range offsets x4
    perm_scatter(ix, facts={name: ArrayFacts(extent16=False, small=True)
                            for name in ("x", "idx", "perm", "y")})


def test_start_beyond_2_to_the_31():
    """A tile start past 2^31 elements (a large block index times the tile): the uniform
    inside test is 64-bit, so the tile is outside and reads padding, even though its 32-bit
    offset wraps to an element inside the array."""
    kb = KernelBuilder("far")
    x, y = kb.param("x", ArrayType(F32, 1)), kb.param("y", ArrayType(F32, 1))
    far = kb.op("+", kb.op("*", kb.op("bid", 0), kb.constant(0, I32)),
                kb.constant(2**24, I32))                  # 2^24 tiles of 256: start 2^32
    t = kb.op("load", x, index=(far,), shape=(256,), padding=4.0)
    kb.op("store", y, index=(kb.op("bid", 0),), tile=t)
    k = kb.finish()
    x = np.arange(256, dtype=np.float32)
    y = np.zeros(256, np.float32)
    (_, ye), (_, yr), _, _ = run_both(k, [x, y], (1, 1, 1), facts={"x": SMALL, "y": SMALL})
    same(yr, np.full(256, 4.0, np.float32))
    same(ye, np.full(256, 4.0, np.float32))


def shifted_rows_kernel():
    """z[0, :] = x[r, 64:128] and y[r, 64:128] = 2 x[r, 64:128] for r = bid + d: a row
    index that is an i32, a constant column start."""
    kb = KernelBuilder("shifted")
    x, y, z = (kb.param(n, ArrayType(F32, 2)) for n in "xyz")
    d = kb.param("d", scalar(I32))
    r = kb.op("+", kb.op("bid", 0), d)
    one, zero = kb.constant(1, I32), kb.constant(0, I32)
    t = kb.op("load", x, index=(r, one), shape=(1, 64), padding=-3.0)
    kb.op("store", y, index=(r, one), tile=kb.op("*", t, 2.0))
    kb.op("store", z, index=(zero, zero), tile=t)
    return kb.finish()


@pytest.mark.parametrize("d", [0, 3, 6, 7, 100, -1, -2**31, 2**31 - 1, 2**30])
def test_row_bounds_in_32_bits(d):
    """With `small` (every extent below 2^31) an extent-1 axis that starts at an i32 (a row
    index) and a longer one that starts at a constant (the columns) are tested in 32 bits:
    rows before, after and far from the array (the extremes of i32 included) read the padding
    and store nothing; the ragged last columns too."""
    k = shifted_rows_kernel()
    rng = np.random.default_rng(5)
    x = rng.standard_normal((7, 100)).astype(np.float32)
    y = np.full((7, 100), 5.0, np.float32)
    z = np.zeros((1, 64), np.float32)
    (_, ye, ze, _), (_, yr, zr, _), r, _ = run_both(
        k, [x, y, z, np.int32(d)], (1, 1, 1),
        facts={n: ArrayFacts(extent16=False, small=True) for n in "xyz"})
    want_y, want_z = y.copy(), np.full((1, 64), -3.0, np.float32)
    if 0 <= d < 7:
        want_z[0, :36] = x[d, 64:]
        want_y[d, 64:] = 2 * x[d, 64:]
    same(zr, want_z)
    same(ze, want_z)
    same(yr, want_y)
    same(ye, want_y)
    # every bounds test is 32-bit (rows: an i32 start; columns: a constant one), and no
    # 64-bit value is narrowed or widened for them
    assert not re.findall(r"setp\.\w+\.[su]64|cvt\.u32\.u64|cvt\.u64\.u32", r.ptx), r.ptx
    wide = compile_kernel(k, facts={n: ArrayFacts(extent16=False) for n in "xyz"})
    assert re.findall(r"setp\.\w+\.[su]64", wide.ptx)


@pytest.mark.parametrize("rows", [8, 7, 5, 4])
def test_constant_start_block_in_32_bits(rows):
    """A (4, 64) tile at the constant tile index (1, 1) of (rows, 100) arrays: both axes
    start at a constant, the edge test is t < extent - (start + c) in 32 bits; against the
    interpreter and NumPy with the tile wholly inside, ragged, and wholly outside."""
    kb = KernelBuilder("block")
    x, y = kb.param("x", ArrayType(F32, 2)), kb.param("y", ArrayType(F32, 2))
    one = kb.constant(1, I32)
    t = kb.op("load", x, index=(one, one), shape=(4, 64), padding=-3.0)
    kb.op("store", y, index=(one, one), tile=kb.op("+", t, 1.0))
    k = kb.finish()
    x = np.random.default_rng(6).standard_normal((rows, 100)).astype(np.float32)
    y = np.full((rows, 100), 5.0, np.float32)
    (_, ye), (_, yr), r, _ = run_both(
        k, [x, y], (1, 1, 1), facts={n: ArrayFacts(extent16=False, small=True) for n in "xy"})
    want = y.copy()
    want[4:8, 64:] = x[4:8, 64:] + 1
    same(yr, want)
    same(ye, want)
    assert not re.findall(r"setp\.\w+\.[su]64", r.ptx), r.ptx
