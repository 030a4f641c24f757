"""Shared-memory layouts and the bank model: the swizzles against their defining formulas, the
wavefront calculator against hand-counted cases, and ldmatrix reads of swizzled tiles."""

from __future__ import annotations

import numpy as np
import pytest

from tilelang.codegen.layouts import distributed as L
from tilelang.codegen.layouts.gf2 import LinearMap
from tilelang.codegen.layouts.shared import (SharedLayout, access_wavefronts, identity_shared,
                                             ldmatrix_swizzle, ldmatrix_wavefronts, swizzle,
                                             tma_swizzle, wavefronts, xor_swizzle)


def lanes(f) -> np.ndarray:
    return np.array([[f(lane) for lane in range(32)]], np.int64)


@pytest.mark.parametrize("addr,size,want", [
    (lambda l: 4 * l, 4, (1, 1)),                       # consecutive words
    (lambda l: 128 * l, 4, (32, 1)),                    # one bank, 32 words
    (lambda l: 0, 4, (1, 1)),                           # one word: a broadcast
    (lambda l: 4 * (l % 16) + 128 * (l // 16), 4, (2, 1)),   # two words per bank
    (lambda l: 16 * l, 16, (4, 4)),                     # 4 phases of 8 lanes, 128 bytes each
    (lambda l: 256 * l, 16, (32, 4)),                   # a column of a 64 x f32 tile: 8-way
    (lambda l: 16 * (l ^ (l >> 3 & 7)), 16, (4, 4)),    # a permutation within each phase
    (lambda l: 8 * l, 8, (2, 2)),                       # half-warps
    (lambda l: 2 * l, 2, (1, 1)),                       # 16 words, two halves each
    (lambda l: 64 * l, 2, (16, 1)),                     # banks 0 and 16, 16 words each
    (lambda l: 0 if l == 0 else -1, 4, (1, 1)),         # one lane takes part
    (lambda l: 4 * l + (l & 1) * 124, 4, (2, 1)),       # odd lanes collide in banks 0..31
])
def test_wavefronts_by_hand(addr, size, want):
    assert wavefronts(lanes(addr), size) == want


def test_several_requests_add_up():
    a = np.concatenate([lanes(lambda l: 4 * l), lanes(lambda l: 128 * l)])
    assert wavefronts(a, 4) == (33, 2)


def test_mma_swizzle_formula():
    rows, cols = 64, 64
    sh = swizzle((rows, cols), 2, vec=8, per_phase=1, max_phase=8)
    for r in range(rows):
        for c in range(cols):
            off = r * cols + ((c // 8) ^ (r % 8)) * 8 + c % 8
            assert sh.offset_of(r * cols + c) == off
            assert sh.element(off) == r * cols + c
    sh2 = swizzle((32, 32), 2, vec=8, per_phase=2, max_phase=4)
    for r in range(32):
        for c in range(32):
            assert sh2.offset_of(r * 32 + c) == r * 32 + ((c // 8) ^ ((r // 2) % 4)) * 8 + c % 8


@pytest.mark.parametrize("span", [32, 64, 128])
def test_tma_swizzle_formula(span):
    sh = tma_swizzle((16, 64), 2, span)
    b = {32: 1, 64: 2, 128: 3}[span]
    for y in range(16 * 64):
        addr = 2 * y
        want = addr ^ (((addr >> 7) & ((1 << b) - 1)) << 4)
        assert 2 * sh.offset_of(y) == want
    assert tma_swizzle((16, 64), 2, 16).is_identity()


def test_ldmatrix_rows_of_swizzled_tiles_are_conflict_free():
    """8 rows x 16 bytes of one column chunk: one wavefront per matrix when swizzled, eight
    in a plain row-major tile whose rows are 128 bytes."""
    plain = identity_shared((64, 64))
    sw = tma_swizzle((64, 64), 2, 128)
    mma = swizzle((64, 64), 2, vec=8, per_phase=1, max_phase=8)
    for chunk in range(8):
        rows = [r * 64 + chunk * 8 for r in range(32)]          # x4: 4 matrices of 8 rows
        for sh, want in ((plain, (32, 4)), (sw, (4, 4)), (mma, (4, 4))):
            addr = np.array([[2 * sh.offset_of(y) for y in rows]])
            assert ldmatrix_wavefronts(addr) == want, (sh, chunk)
    narrow = swizzle((32, 32), 2, vec=8, per_phase=2, max_phase=4)   # 64-byte rows
    for chunk in range(4):
        addr = np.array([[2 * narrow.offset_of(r * 32 + chunk * 8) for r in range(8)]])
        assert ldmatrix_wavefronts(addr) == (1, 1)
    addr = np.array([[2 * (r * 32 + 8) for r in range(8)]])
    assert ldmatrix_wavefronts(addr) == (4, 1)      # unswizzled: rows 0, 2, 4, 6 share banks


def test_access_wavefronts_of_a_transposed_read():
    """A (32, 32) f32 tile written row-major and read by a layout whose lanes walk a column:
    32-way in a plain buffer, conflict-free when column bits are XORed with row bits."""
    col = L.permute(L.blocked((32, 32), 4, 128, vector_bytes=4), (1, 0))
    assert access_wavefronts(col, identity_shared((32, 32)), 4) == (32 * 32, 32)
    sw = xor_swizzle((32, 32), 5, 0, 5)
    assert access_wavefronts(col, sw, 4) == (32, 32)
    row = L.blocked((32, 32), 4, 128)
    assert access_wavefronts(row, sw, 4, vec=4) == access_wavefronts(
        row, identity_shared((32, 32)), 4, vec=4) == (32, 32)


def test_shared_layout_checks():
    with pytest.raises(ValueError, match="invertible"):
        SharedLayout((4,), LinearMap((1, 1), 2))
    with pytest.raises(ValueError, match="does not fit"):
        xor_swizzle((8, 8), 3, 2, 3)
    with pytest.raises(ValueError, match="wider than 16 bytes"):
        swizzle((8, 64), 4, vec=8, per_phase=1, max_phase=8)
    with pytest.raises(ValueError, match="fewer than"):
        swizzle((8, 16), 2, vec=8, per_phase=1, max_phase=4)
    with pytest.raises(ValueError, match="no 256-byte"):
        tma_swizzle((8, 64), 2, 256)
    assert xor_swizzle((8, 8), 3, 0, 3).map == xor_swizzle((8, 8), 3, 0, 3).inverse


@pytest.mark.parametrize("itemsize", [1, 2, 4])
@pytest.mark.parametrize("row_bytes", [16, 32, 64, 128, 256, 512])
def test_ldmatrix_swizzle_reads_and_writes_without_conflicts(itemsize, row_bytes):
    """Operand tiles of every row width: ldmatrix.x4 reads of 8 consecutive rows at one chunk
    (any first row, any chunk) and 16-byte chunk writes of a warp walking rows in order take
    the ideal number of wavefronts; an unswizzled tile with rows of 32 bytes or more does not."""
    cols = row_bytes // itemsize
    shape = (64, cols)
    sh, plain = ldmatrix_swizzle(shape, itemsize), identity_shared(shape)
    chunks, per_chunk = row_bytes // 16, 16 // itemsize
    for r0 in (0, 8, 24):
        for c in range(chunks):
            rows = [(r0 + i) * cols + c * per_chunk for i in range(32)]
            addr = np.array([[itemsize * sh.offset_of(y) for y in rows]])
            assert ldmatrix_wavefronts(addr) == (4, 4), (r0, c)
            bad = np.array([[itemsize * plain.offset_of(y) for y in rows]])
            assert (ldmatrix_wavefronts(bad)[0] > 4) == (row_bytes >= 32)
    # a warp writes 32 consecutive 16-byte chunks of the row-major tile
    for first in range(0, 64 * chunks, 32):
        elems = [(first + i) * per_chunk for i in range(32)]
        addr = np.array([[itemsize * sh.offset_of(y) for y in elems]])
        assert wavefronts(addr, 16) == (4, 4)
