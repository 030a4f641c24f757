"""The tile-end test of a start `i * 2^k` under the `small` fact (lower/memory.py,
docs/codegen.md): the whole tile is inside when 0 <= i < extent >> k, and on the edge path an
element is inside when 0 <= i <= extent >> k and its 32-bit coordinate is below the extent, all
in 32 bits with no 64-bit start. The 32-bit start i * 2^k wraps for a large i; those tiles must
still read the padding and store nothing. Checked on the emulator against the interpreter and
NumPy for tiles before, at and past the end, block indices whose start wraps to an element
inside the array, extents near 2^31, and zero and negative extents, in the full launch and in
the virtual-thread loop of smaller and 2-D blocks."""

from __future__ import annotations

import re
from functools import lru_cache

import numpy as np
import pytest

from gen_support import Strided, compile_kernel, interpret, link, run_emulated, same
from tilelang.codegen.api import ArrayFacts
from tilelang.emulator import EmulatorDevice
from tilelang.ir.builder import KernelBuilder
from tilelang.sema.types import F32, I32, ArrayType, scalar

T = 256
PAD = -1.5
SMALL = ArrayFacts(extent16=False, small=True)


def shifted_kernel():
    """z[b] = x[b + d] (tile of T, padding PAD) and y[b + d] = x[b + d] + 1 for block b."""
    kb = KernelBuilder("shifted")
    x, y, z = (kb.param(n, ArrayType(F32, 1)) for n in "xyz")
    d = kb.param("d", scalar(I32))
    b = kb.op("bid", 0)
    i = kb.op("+", b, d)
    t = kb.op("load", x, index=(i,), shape=(T,), padding=PAD)
    kb.op("store", y, index=(i,), tile=kb.op("+", t, 1.0))
    kb.op("store", z, index=(b,), tile=t)
    return kb.finish()


@lru_cache(maxsize=None)
def shifted(facts_key: str):
    """One compile per facts (the kernel's tests all share it)."""
    k = shifted_kernel()
    facts = {"x": SMALL, "y": SMALL, "z": ArrayFacts(small=True)}
    if facts_key == "wide":
        facts = {n: ArrayFacts(extent16=False) for n in "xyz"}
    r = compile_kernel(k, facts=facts)
    link(r)
    return k, r


def expected(x, y, d: int, grid: int):
    n, m = x.size, y.size
    z = np.full(grid * T, PAD, np.float32)
    y = y.copy()
    for b in range(grid):
        g = (b + d) * T + np.arange(T)
        inx = (g >= 0) & (g < n)
        z[b * T:(b + 1) * T][inx] = x[g[inx]]
        iny = (g >= 0) & (g < m)
        y[g[iny]] = z[b * T:(b + 1) * T][iny] + np.float32(1)
    return y, z


def run(n: int, d: int, block=None, grid: int = 2, facts_key: str = "small"):
    k, r = shifted(facts_key)
    rng = np.random.default_rng(n + 7)
    x = rng.standard_normal(n).astype(np.float32)
    y = np.full(n + 3, 5.0, np.float32)            # a different extent than x's
    z = np.zeros(grid * T, np.float32)
    want_y, want_z = expected(x, y, d, grid)
    emu = [x.copy(), y.copy(), z.copy(), np.int32(d)]
    run_emulated(r, "shifted", emu, (grid, 1, 1), block=block)
    ref = [x.copy(), y.copy(), z.copy(), np.int32(d)]
    interpret(k, ref, (grid, 1, 1))
    for got in (emu, ref):
        same(got[2], want_z)
        same(got[1], want_y)
    return r


# d: tiles before the array, at its start and end, past it, and block indices whose 32-bit
# start i * 256 wraps (2^23: to -2^31; 2^24: to 0, inside the array; 2^24 + 1: to 256; near
# 2^31: to -512; -2^31: to 0)
SHIFTS = [0, 1, 2, 3, 4, -1, -2, -3, 2**23, 2**24, 2**24 + 1, 2**31 - 2, -2**31]


@pytest.mark.parametrize("n", [0, 255, 256, 1000])
@pytest.mark.parametrize("d", SHIFTS)
def test_tiles_in_out_and_wrapping(n, d):
    run(n, d)


@pytest.mark.parametrize("block", [(32, 1, 1), (64, 2, 1), (7, 1, 1)])
@pytest.mark.parametrize("d", [2, 3, 2**24, -1])
def test_smaller_and_2d_blocks(block, d):
    """The virtual-thread loop's copy of the body (a block smaller than declared)."""
    run(1000, d, block=block)


def test_no_64_bit_start_under_small():
    """The tile ends and edge elements are tested in 32 bits: no 64-bit compare, multiply by
    the tile or conversion of the start is left (without the fact they stay 64-bit)."""
    _, r = shifted("small")
    assert not re.findall(r"setp\.\w+\.[su]64|mul\.wide\.u32|cvt\.u32\.u64|cvt\.u64\.u32",
                          r.ptx), r.ptx
    _, wide = shifted("wide")
    assert re.findall(r"setp\.\w+\.s64", wide.ptx)
    run(1000, 3, facts_key="wide")


def far_kernel():
    """z[b] = x[b + d]: x may be a broadcast view of any length (it is only read)."""
    kb = KernelBuilder("far")
    x, z = kb.param("x", ArrayType(F32, 1)), kb.param("z", ArrayType(F32, 1))
    d = kb.param("d", scalar(I32))
    b = kb.op("bid", 0)
    t = kb.op("load", x, index=(kb.op("+", b, d),), shape=(T,), padding=PAD)
    kb.op("store", z, index=(b,), tile=t)
    return kb.finish()


@pytest.mark.parametrize("n,d,inside", [
    (2**31 - 1, 2**23 - 2, T), (2**31 - 1, 2**23 - 1, T - 1), (2**31 - 1, 2**23, 0),
    (2**31 - T, 2**23 - 2, T), (2**31 - T, 2**23 - 1, 0), (2**31 - T + 1, 2**23 - 1, 1)])
def test_extents_near_2_to_the_31(n, d, inside):
    """A broadcast view (stride 0: `small` holds at any length) of up to 2^31 - 1 elements:
    the last tile, whose narrow coordinates reach 2^31 - 1, has exactly the elements below
    the extent; the tile past it, whose start is 2^31, none."""
    k = far_kernel()
    generic = ArrayFacts(contiguous=False, aligned16=False, extent16=False, small=True)
    r = compile_kernel(k, facts={"x": generic, "z": ArrayFacts(small=True)})
    base = np.full(1, 7.0, np.float32)
    x = Strided(base, np.broadcast_to(base, (n,)))
    z = np.zeros(T, np.float32)
    run_emulated(r, "far", [x, z, np.int32(d)], (1, 1, 1))
    want = np.full(T, PAD, np.float32)
    want[:inside] = 7.0
    same(z, want)


@pytest.mark.parametrize("extent", [0, -1, -256, -257, -2**31])
def test_zero_and_negative_extents_have_nothing_inside(extent):
    """An extent of 0 or below (a launch by hand; the runtime passes shapes): every element
    reads the padding and nothing is stored, for tile indices at and around 0 (the 64-bit
    form of the edge test compared coordinates unsigned, so a negative extent let every
    coordinate >= 0 through)."""
    _, r = shifted("small")
    dev = EmulatorDevice()
    fn = dev.load_module(r.ptx).get_function("shifted")
    x = np.arange(4 * T, dtype=np.float32)
    for d in (-1, 0, 1):
        y = np.full(4 * T, 5.0, np.float32)
        px, py, pz = dev.to_device(x), dev.to_device(y), dev.to_device(np.zeros(2 * T,
                                                                                np.float32))
        args = [px, np.int64(extent), np.int64(1), py, np.int64(extent), np.int64(1),
                pz, np.int64(2 * T), np.int64(1), np.int32(d)]
        dev.launch(fn, (2, 1, 1), (128, 1, 1), args)
        same(dev.from_device(pz, (2 * T,), np.float32), np.full(2 * T, PAD, np.float32))
        same(dev.from_device(py, (4 * T,), np.float32), y)
