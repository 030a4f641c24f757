"""print and assert through generate. Scalars print exactly as the interpreter (NumPy's `str`
of the value: integers, bools, floats with the shortest digits) — checked against NumPy itself
for every dtype, special values and random bit patterns; tiles print in NumPy's nesting without
padding (docs/codegen.md), checked against NumPy's `str` with the padding removed. Blocks print
concurrently, so lines are compared per block (sorted); within a block the order is kept."""

from __future__ import annotations

import re

import numpy as np
import pytest

import tilelang.codegen.lower.debug  # noqa: F401  (registers the lowering)
from ops_support import run_ops, rng_for
from tilelang.codegen.lower.debug import split_format, tile_template
from tilelang.driver import compile_source
from tilelang.options import CompileOptions
from tilelang.emulator.errors import DeviceAssertion
from tilelang.interp import run_kernel
from tilelang.interp.errors import InterpreterAssertionError
from tilelang.ir.builder import KernelBuilder
from tilelang.sema.types import (BF16, BOOL, F16, F32, F64, I8, I16, I32, I64, U8, U16, U32,
                                 U64, ArrayType)

DT = {"i8": I8, "i16": I16, "i32": I32, "i64": I64, "u8": U8, "u16": U16, "u32": U32,
      "u64": U64, "bool": BOOL, "f16": F16, "bf16": BF16, "f32": F32, "f64": F64}
NP = {"i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64, "u8": np.uint8,
      "u16": np.uint16, "u32": np.uint32, "u64": np.uint64, "bool": np.bool_,
      "f16": np.float16, "bf16": np.float32, "f32": np.float32, "f64": np.float64}


def lines(text: str) -> list[str]:
    return sorted(text.splitlines())


def scalar_kernel(dt: str, threads=32, exact=False):
    """Block b prints `x[b] = {}` of element b (a 0-d gather)."""
    kb = KernelBuilder("show", attributes={"reqntid" if exact else "maxntid": (threads, 1, 1)})
    x = kb.param("x", ArrayType(DT[dt], 1))
    v = kb.op("gather", x, kb.op("bid", 0))
    kb.op("print", "x[{}] = {}", kb.op("bid", 0), v)
    return kb.finish()


def values(dt: str, rng) -> np.ndarray:
    if dt == "bool":
        return np.array([True, False, True])
    if dt in ("f16", "f32", "f64", "bf16"):
        bits = {"f16": 16, "f32": 32, "f64": 64, "bf16": 16}[dt]
        special = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.5, 0.1, 1e-4, 9.999e-5, 100.0,
                   999.5, 1e3, 65504.0, 6e-8, 1e6, 123456789.0, 1e16, 1e-45, 3.4e38, 5e-324,
                   1.7976931348623157e308, 2.0 ** -24, 1 / 3]
        with np.errstate(over="ignore"):
            sp = np.array(special, np.float64).astype(NP[dt] if dt != "bf16" else np.float32)
        count = 20 if bits == 64 else 60          # f64 digits take longer to emulate
        raw = rng.integers(0, 1 << min(bits, 63), count, dtype=np.uint64)
        if dt == "bf16":
            rnd = (raw.astype(np.uint32) << 16).view(np.float32)
            sp = ((sp.view(np.uint32) >> 16) << 16).view(np.float32)   # bf16 values
        else:
            rnd = raw.astype({16: np.uint16, 32: np.uint32, 64: np.uint64}[bits]).view(NP[dt])
        with np.errstate(over="ignore"):
            scaled = (rng.standard_normal(count // 3) * 10.0 ** rng.integers(-6, 7, count // 3)
                  ).astype(NP[dt])
        if dt == "bf16":
            scaled = ((scaled.view(np.uint32) >> 16) << 16).view(np.float32)
        return np.concatenate([sp, rnd, scaled]).astype(NP[dt])
    info = np.iinfo(NP[dt])
    return np.concatenate([np.array([0, 1, info.min, info.max, -1 if info.min else 7],
                                    dtype=object).astype(NP[dt]),
                           rng.integers(info.min, info.max, 20, dtype=NP[dt], endpoint=True)])


# The device and the compiler write floats as NumPy 2 prints scalars (positional below 1e3 for
# f16, 1e6 for f32); the interpreter's `print` is NumPy's own `str`, which on NumPy 1.x (the
# project supports 1.24) stays positional up to 1e16, so the two agree only on NumPy 2.
numpy2 = pytest.mark.skipif(np.lib.NumpyVersion(np.__version__) < "2.0.0",
                            reason="the interpreter prints with NumPy 1's scalar text")


@numpy2
@pytest.mark.parametrize("dt", list(DT))
def test_scalar_prints_like_the_interpreter(dt):
    x = values(dt, rng_for("print", dt))
    run = run_ops(scalar_kernel(dt), [x], (len(x), 1, 1), bf16=(0,) if dt == "bf16" else ())
    want = [f"[block ({i}, 0, 0)] x[{i}] = {str(np.asarray(v))}" for i, v in enumerate(x)]
    assert lines(run.ref_output) == sorted(want)
    assert lines(run.report.output) == sorted(want)
    assert ".maxntid 32, 1, 1" in run.result.ptx       # scalars need no thread exchange


def test_scalar_print_once_per_block_with_any_block_size():
    kb = KernelBuilder("once", attributes={"maxntid": (256, 1, 1)})
    kb.op("print", "hello {} {}%", kb.op("num_blocks", 0), 2.5)
    k = kb.finish()
    for block in (None, (32, 1, 1), (100, 1, 1)):
        run = run_ops(k, [], (3, 1, 1), block=block)
        want = sorted(f"[block ({i}, 0, 0)] hello 3 2.5%" for i in range(3))
        assert lines(run.report.output) == want == lines(run.ref_output)


def test_literal_text_braces_percent_unicode_and_order():
    kb = KernelBuilder("txt", attributes={"reqntid": (64, 1, 1)})
    loop = kb.for_(0, 3, 1)
    with loop.body() as (i,):
        kb.op("print", "{{step}} {} of 3: 100% done, π ≈ {}", i, 3.14159)
        kb.yield_()
    loop.end()
    k = kb.finish()
    run = run_ops(k, [], (2, 1, 1))
    for out in (run.report.output, run.ref_output):
        for b in range(2):
            mine = [ln for ln in out.splitlines() if ln.startswith(f"[block ({b}, 0, 0)]")]
            assert mine == [f"[block ({b}, 0, 0)] {{step}} {i} of 3: 100% done, π ≈ 3.14159"
                            for i in range(3)]


def numpy_unpadded(a: np.ndarray) -> str:
    """NumPy's str without the alignment padding (the documented tile format)."""
    return re.sub(r"\[ +", "[", re.sub(r"(?<=\S) +", " ", str(a)))


def tile_kernel(dt: str, shape, threads=128):
    kb = KernelBuilder("tile", attributes={"maxntid": (threads, 1, 1)})
    x = kb.param("x", ArrayType(DT[dt], 1))
    n = int(np.prod(shape))
    t = kb.op("load", x, index=(0,), shape=(n,), padding=False if dt == "bool" else 0)
    if len(shape) > 1:
        t = kb.op("reshape", t, tuple(shape))
    kb.op("print", "t = {}", t)
    return kb.finish()


@pytest.mark.parametrize("dt,shape,threads", [
    ("i32", (8,), 128), ("i32", (4, 8), 128), ("i64", (2, 2, 4), 32), ("u8", (16,), 256),
    ("bool", (2, 8), 64), ("i32", (2048,), 128), ("i16", (64, 32), 128), ("i32", (16,), 1),
])
def test_integer_tiles_match_numpy_without_padding(dt, shape, threads):
    rng = rng_for("tile", dt, shape)
    n = int(np.prod(shape))
    x = values(dt, rng)[:n] if dt == "bool" else \
        rng.integers(-99 if NP[dt](0).dtype.kind == "i" else 0, 100, n).astype(NP[dt])
    x = np.resize(x, n)
    run = run_ops(tile_kernel(dt, shape, threads), [x])
    want = f"[block (0, 0, 0)] t = {numpy_unpadded(x.reshape(shape))}\n"
    assert run.report.output == want
    assert run.ref_output == f"[block (0, 0, 0)] t = {str(x.reshape(shape))}\n"


@numpy2
def test_float_tile_elements_print_like_scalars():
    x = values("f32", rng_for("ftile"))[4:20]
    run = run_ops(tile_kernel("f32", (4, 4)), [x])
    body = run.report.output.split("t = ", 1)[1]
    rows = [r.strip(" []") for r in body.split("\n") if r.strip()]
    got = [s for r in rows for s in r.split(" ")]
    assert got == [str(np.asarray(v)) for v in x]


def test_tile_print_of_spread_tile_needs_exact_threads():
    run = run_ops(tile_kernel("i32", (256,)), [np.arange(256, dtype=np.int32)])
    assert ".reqntid 128, 1, 1" in run.result.ptx and "bar.sync" in run.result.ptx


@pytest.mark.slow
def test_every_f16_prints_like_numpy():
    """All 65536 bit patterns, one per block (blocks of one thread: the print is the owner's)."""
    x = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16)
    run = run_ops(scalar_kernel("f16"), [x], (65536, 1, 1), block=(1, 1, 1), interp=False)
    want = [f"[block ({i}, 0, 0)] x[{i}] = {str(np.asarray(v))}" for i, v in enumerate(x)]
    assert lines(run.report.output) == sorted(want)


def test_format_helpers():
    assert split_format("a {} {{b}} {}") == ["a ", None, " {b} ", None]
    assert tile_template((2, 2)) == ["[", "[", 0, " ", 1, "]", "\n ", "[", 2, " ", 3, "]", "]"]
    big = tile_template((2048,))
    assert big[:8] == ["[", 0, " ", 1, " ", 2, " ", "..."] and big[-2:] == [2047, "]"]


# ---------------------------------------------------------------------------------------------
# assert

def assert_kernel(with_msg=True):
    kb = KernelBuilder("check", attributes={"maxntid": (128, 1, 1)})
    x = kb.param("x", ArrayType(F32, 1))
    t = kb.op("load", x, index=(kb.op("bid", 0),), shape=(256,), padding=0)
    kb.op("assert", kb.op(">=", t, 0.0), *(("values must be >= 0",) if with_msg else ()))
    kb.op("assert", kb.op("<", kb.op("sum", t), 1e6))
    return kb.finish()


def test_assert_passes_silently():
    x = np.abs(rng_for("ok").standard_normal(600)).astype(np.float32)
    run = run_ops(assert_kernel(), [x], (3, 1, 1))
    assert run.report.output == "" and "__assertfail" in run.result.ptx


@pytest.mark.parametrize("with_msg", [True, False])
def test_failing_tile_assert(with_msg):
    x = np.ones(768, np.float32)
    x[600] = -1.0                       # block 2
    msg = "values must be >= 0" if with_msg else "assertion failed"
    with pytest.raises(DeviceAssertion, match=f"device assertion failed: {msg}") as e:
        run_ops(assert_kernel(with_msg), [x], (3, 1, 1), interp=False)
    assert e.value.block == (2, 0, 0)
    with pytest.raises(InterpreterAssertionError) as ie:
        run_kernel(assert_kernel(with_msg), [x.copy()], (3, 1, 1))
    assert ie.value.message == msg and ie.value.block == (2, 0, 0)


def test_failing_scalar_assert():
    x = np.full(256, 1e5, np.float32)
    with pytest.raises(DeviceAssertion, match="device assertion failed: assertion failed"):
        run_ops(assert_kernel(), [x], (1, 1, 1), interp=False)


SOURCE = """
@launch(maxntid = (64, 1, 1))
kernel report(x: Array[i32, 1]) {
    let t = load(x, index = (bid(0),), shape = (4,), padding = 0);
    print("block {} sum {} max {} ok {}", bid(0), sum(t), max(t), sum(t) > 5);
    assert(min(t) >= 0, "negative input");
}
"""


def test_print_and_assert_from_source():
    from gen_support import run_emulated
    res = compile_source(SOURCE, "report.tile", CompileOptions(target="sm_80"), until="ptx")
    assert res.ok, res.diagnostics
    rep = run_emulated(res.codegen, "report", [np.arange(8, dtype=np.int32)], (2, 1, 1))
    assert lines(rep.output) == ["[block (0, 0, 0)] block 0 sum 6 max 3 ok True",
                                 "[block (1, 0, 0)] block 1 sum 22 max 7 ok True"]
    with pytest.raises(DeviceAssertion, match=r"negative input \(report\.tile:6\)"):
        run_emulated(res.codegen, "report", [np.array([1, 2, 3, -4], np.int32)], (1, 1, 1))
