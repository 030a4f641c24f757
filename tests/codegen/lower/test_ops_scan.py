"""cumsum/cumprod through generate: along each axis of 1-D/2-D/3-D tiles, every level of the
scan (in-thread, shfl.sync.up, across warps), 24 to 1024 threads, tiles smaller than the block,
widened and narrow dtypes. Emulator == interpreter == NumPy (exact for integers)."""

from __future__ import annotations

import numpy as np
import pytest

import tilelang.codegen.lower.scan  # noqa: F401  (registers the lowering)
from ops_support import run_ops, rng_for
from tilelang.codegen.layouts.distributed import blocked
from tilelang.codegen.lower.scan import scan_friendly, scan_layout
from tilelang.driver import compile_source
from tilelang.options import CompileOptions
from tilelang.ir.builder import KernelBuilder
from tilelang.sema.types import (BF16, BOOL, F16, F32, F64, I8, I16, I32, I64, U8, U16, U32,
                                 ArrayType)

DT = {"i32": I32, "f32": F32, "f16": F16, "bf16": BF16, "f64": F64, "bool": BOOL, "i8": I8,
      "i16": I16, "u8": U8, "u16": U16, "u32": U32, "i64": I64}
WIDE = {"bool": "i32", "i8": "i32", "i16": "i32", "u8": "u32", "u16": "u32"}
NP = {"i32": np.int32, "f32": np.float32, "f16": np.float16, "bf16": np.float32,
      "f64": np.float64, "bool": np.bool_, "i8": np.int8, "i16": np.int16, "u8": np.uint8,
      "u16": np.uint16, "u32": np.uint32, "i64": np.int64}


def scan_kernel(name, dt, shape, axis, threads, *, exact=True, grid_axis=False):
    """o = name(load(x), axis) for the tile at block index bid(0) (along axis 0 when
    grid_axis), stored whole."""
    attrs = {"reqntid" if exact else "maxntid": (threads, 1, 1)}
    kb = KernelBuilder("scan", attributes=attrs)
    rank = len(shape)
    x = kb.param("x", ArrayType(DT[dt], rank))
    o = kb.param("o", ArrayType(DT[WIDE.get(dt, dt)], rank))
    i = kb.op("bid", 0) if grid_axis else 0
    index = (i,) + (0,) * (rank - 1)
    t = kb.op("load", x, index=index, shape=shape, padding=False if dt == "bool" else 0)
    kw = {} if axis is None else {"axis": axis}
    kb.op("store", o, index=index, tile=kb.op(name, t, **kw))
    return kb.finish()


def data(dt, shape, rng, name="cumsum"):
    if dt == "bool":
        return rng.integers(0, 2, shape).astype(np.bool_)
    if dt in ("f32", "f16", "bf16", "f64"):
        if name == "cumprod":
            x = 1 + rng.standard_normal(shape) / 64
        else:
            x = rng.standard_normal(shape)
        x = x.astype(NP[dt])
        if dt == "bf16":   # bf16 data travels as float32 holding bf16 values
            x = (x.view(np.uint32) & 0xFFFF0000).view(np.float32)
        return x
    info = np.iinfo(NP[dt])
    if name == "cumprod":
        return rng.integers(max(info.min, -3), min(info.max, 4), shape).astype(NP[dt])
    return rng.integers(max(info.min, -1000), min(info.max, 1000), shape).astype(NP[dt])


def np_scan(name, x, axis, dt):
    """NumPy's answer in float64 for floats (compared with a tolerance), wrapped integers."""
    fn = np.cumsum if name == "cumsum" else np.cumprod
    ax = 0 if axis is None else axis
    if x.dtype.kind == "f":
        return fn(x.astype(np.float64), axis=ax)
    out = NP[WIDE.get(dt, dt)]
    with np.errstate(all="ignore"):
        return fn(x.astype(out), axis=ax, dtype=out)


def check(name, dt, shape, axis, threads, *, exact=True, grid=1, block=None):
    rng = rng_for(name, dt, shape, axis, threads)
    full = (shape[0] * grid,) + tuple(shape[1:])
    x = data(dt, full, rng, name)
    out = np.zeros(full, NP[WIDE.get(dt, dt)])
    k = scan_kernel(name, dt, shape, axis, threads, exact=exact, grid_axis=grid > 1)
    run = run_ops(k, [x, out], (grid, 1, 1), block=block, bf16=(0, 1) if dt == "bf16" else ())
    emu, ref = run.emu[1], run.ref[1]
    want = np.concatenate([np_scan(name, x[g * shape[0]:(g + 1) * shape[0]], axis, dt)
                           for g in range(grid)])
    if x.dtype.kind == "f":
        tol = {"f16": 2e-3, "bf16": 1e-2, "f32": 1e-5, "f64": 1e-12}[dt]
        scale = np.maximum(np.abs(want), 1.0)
        assert np.all(np.abs(ref - want) <= tol * scale * shape[axis or 0] ** 0.5)
        assert np.all(np.abs(emu - want) <= tol * scale * shape[axis or 0] ** 0.5)
    else:
        np.testing.assert_array_equal(ref, want)
        np.testing.assert_array_equal(emu, want)
    return run


CASES = [
    # name, dtype, shape, axis, threads
    ("cumsum", "i32", (1024,), 0, 128),        # registers + lanes + warps
    ("cumsum", "i32", (64, 64), 0, 128),
    ("cumsum", "i32", (64, 64), 1, 128),
    ("cumsum", "i32", (64, 64), -1, 256),
    ("cumsum", "i32", (8,), 0, 128),           # a tile smaller than the block (replicated)
    ("cumsum", "i32", (2, 4), 1, 64),
    ("cumsum", "i32", (4, 256), 1, 256),
    ("cumsum", "i32", (2048,), 0, 1024),
    ("cumsum", "i32", (32, 32), 0, 1024),
    ("cumsum", "i32", (16, 64), 1, 48),        # not a power of two: a partial last warp
    ("cumsum", "i32", (128,), 0, 24),          # fewer threads than a warp
    ("cumsum", "i32", (4, 8, 16), 1, 64),      # 3-D, middle axis
    ("cumsum", "i32", (4, 8, 16), 0, 32),
    ("cumsum", "i32", (256, 4), 1, 32),        # rows fill the threads: in-thread only
    ("cumsum", "f32", (1024,), 0, 128),
    ("cumsum", "f32", (32, 64), 1, 64),
    ("cumsum", "f16", (16, 128), 1, 128),
    ("cumsum", "bf16", (256,), 0, 64),
    ("cumsum", "f64", (64, 8), 0, 32),
    ("cumsum", "bool", (512,), 0, 128),
    ("cumsum", "i8", (16, 32), 1, 128),
    ("cumsum", "u8", (1024,), 0, 256),
    ("cumsum", "i16", (64, 16), 0, 64),
    ("cumsum", "u16", (64,), 0, 32),
    ("cumsum", "i64", (512,), 0, 128),
    ("cumsum", "u32", (128, 2), 0, 128),
    ("cumprod", "i32", (256,), 0, 64),         # wraps
    ("cumprod", "i64", (32, 16), 1, 128),
    ("cumprod", "f32", (512,), 0, 128),
    ("cumprod", "f64", (8, 64), 1, 32),
    ("cumprod", "f16", (64,), 0, 32),
    ("cumprod", "u8", (128,), 0, 128),
    ("cumsum", "i32", (1024,), None, 128),     # the default axis (0)
]


@pytest.mark.parametrize("name,dt,shape,axis,threads", CASES)
def test_scan(name, dt, shape, axis, threads):
    check(name, dt, shape, axis, threads)


def test_scan_levels_in_the_ptx():
    """Across warps: shuffles up and a shared-memory exchange with barriers; .reqntid."""
    run = check("cumsum", "i32", (4096,), 0, 256)
    ptx = run.result.ptx
    assert "shfl.sync.up" in ptx and "bar.sync" in ptx and ".shared" in ptx
    assert ".reqntid 256, 1, 1" in ptx


def test_scan_in_registers_stays_virtual():
    """When every row's scan fits in one thread nothing is exchanged: the kernel keeps
    .maxntid and runs with a smaller block too."""
    run = check("cumsum", "i32", (256, 4), 1, 128, exact=False)
    ptx = run.result.ptx
    assert ".maxntid 128, 1, 1" in ptx and ".reqntid" not in ptx
    assert "shfl.sync" not in ptx and "bar.sync" not in ptx
    check("cumsum", "i32", (256, 4), 1, 128, exact=False, block=(32, 1, 1))


def test_scan_needing_threads_becomes_exact():
    run = check("cumsum", "f32", (512,), 0, 128, exact=False)
    assert ".reqntid 128, 1, 1" in run.result.ptx


def test_scan_over_the_grid():
    """One tile per block, three blocks."""
    check("cumsum", "i32", (64, 32), 0, 128, grid=3)


def test_scan_signed_zero_and_nan():
    """-0.0 stays -0.0 (the neutral element is -0.0), NaN propagates from where it is."""
    kb = KernelBuilder("z", attributes={"reqntid": (64, 1, 1)})
    x, o = kb.param("x", ArrayType(F32, 1)), kb.param("o", ArrayType(F32, 1))
    t = kb.op("load", x, index=(0,), shape=(256,), padding=0)
    kb.op("store", o, index=(0,), tile=kb.op("cumsum", t))
    k = kb.finish()
    x = np.full(256, -0.0, np.float32)
    x[100] = np.nan
    run = run_ops(k, [x, np.zeros(256, np.float32)])
    for got in (run.emu[1], run.ref[1]):
        assert np.all(np.signbit(got[:100])) and np.all(got[:100] == 0)
        assert np.all(np.isnan(got[100:]))


def test_scan_layout_shapes():
    """Threads go to the other axes first, then lanes, then warps along the axis."""
    L = scan_layout((64, 64), 1, 128)
    assert L.is_valid() and L.threads == 128
    assert sum(1 for b in L.thread_bases if b[1]) == 1      # 64 rows take 6 of the 7 bits
    L = scan_layout((2048,), 0, 1024)
    assert [b[0] for b in L.reg] == [1] and [b[0] for b in L.lane] == [2, 4, 8, 16, 32]
    L = scan_layout((8,), 0, 128)                             # 3 bits: the rest replicate
    assert L.is_valid() and L.replicated_thread_mask() == 0b1111000
    assert scan_friendly(L, 0) and scan_friendly(scan_layout((64, 64), 0, 128), 0)
    # the default layout of 512 f32: 4 registers, 32 lanes, 4 warps along the axis, in order
    assert scan_friendly(blocked((512,), 4, 128), 0)
    assert not scan_friendly(blocked((1024,), 4, 128), 0)    # a register bit above the warps
    assert not scan_friendly(blocked((8, 64), 4, 128), 0)    # axis 0 on the high lanes


SOURCE = """
@launch(reqntid = (128, 1, 1))
kernel prefix(x: Array[i32, 2], s: Array[i32, 2], p: Array[f32, 2]) {
    let t = load(x, index = (bid(0), 0), shape = (16, 64), padding = 0);
    store(s, index = (bid(0), 0), tile = cumsum(t, axis = 1));
    let f = astype(t, f32) * 0.5;
    store(p, index = (bid(0), 0), tile = cumprod(f, axis = 0));
}
"""


def test_scan_from_source():
    from gen_support import run_emulated
    res = compile_source(SOURCE, "<scan>.tile", CompileOptions(target="sm_80"), until="ptx")
    assert res.ok, res.diagnostics
    rng = rng_for("source")
    x = rng.integers(1, 4, (32, 64)).astype(np.int32)
    s, p = np.zeros((32, 64), np.int32), np.zeros((32, 64), np.float32)
    run_emulated(res.codegen, "prefix", [x, s, p], (2, 1, 1))
    want_p = np.concatenate([np.cumprod(x[i:i + 16] * 0.5, axis=0) for i in (0, 16)])
    np.testing.assert_array_equal(s, np.cumsum(x, axis=1))
    np.testing.assert_allclose(p, want_p, rtol=1e-5)
