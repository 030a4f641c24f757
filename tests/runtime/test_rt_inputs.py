"""The public API checks what it is given (issue 12, item 11): unknown dtypes, negative or
absurd shapes, bad facts and compile options are `ArrayUsageError` (E0925, also a
ValueError) with the valid choices, never a KeyError or a silent acceptance."""

from __future__ import annotations

import numpy as np
import pytest

import tilelang
from rt_support import FakeCompiler, fresh_runtime, source  # noqa: F401 (autouse fixture)
from tilelang.diagnostics import TileError
from tilelang.runtime.errors import ArrayUsageError, DeviceError, KernelArgumentError

DTYPES = ("bool, i8, u8, i16, u16, f16, bf16, i32, u32, f32, tf32, i64, u64, f64, f8e4m3, f8e5m2, "
          "f4e2m1, f6e2m3, f6e3m2, ue8m0, f4e2m1x2")


def usage(fn):
    with pytest.raises(ArrayUsageError) as e:
        fn()
    assert isinstance(e.value, ValueError) and e.value.code == "E0925"
    d = e.value.diagnostics[0]
    return d.message, d.help


@pytest.fixture
def mod(tmp_path):
    return tilelang.compile(source("vadd", "scalars"), backend="emulator",
                            compiler=FakeCompiler(), cache_dir=str(tmp_path))


def test_empty_dtype_and_shape():
    e = tilelang.empty
    assert usage(lambda: e((5,), "f33", backend="emulator")) == (
        "unknown dtype 'f33'", f"use a Tile dtype: {DTYPES}")
    assert usage(lambda: e((5,), None, backend="emulator"))[0] == "unknown dtype None"
    assert usage(lambda: e((-5,), "f32", backend="emulator")) == (
        "shape (-5,) has a negative extent (-5)", "every extent must be 0 or more")
    assert usage(lambda: e((2.5,), "f32", backend="emulator")) == (
        "a shape is an int or a tuple of ints, got (2.5,)", "e.g. `(1024,)` or `(64, 32)`")
    assert usage(lambda: e("12", "f32", backend="emulator"))[0] == \
        "a shape is an int or a tuple of ints, got '12'"
    assert usage(lambda: e((True, 2), "f32", backend="emulator"))[0].startswith(
        "a shape is an int")
    assert usage(lambda: e((2**63, 2**63), "f32", backend="emulator")) == (
        "an array of f32 with shape (9223372036854775808, 9223372036854775808) would take "
        "340282366920938463463374607431768211456 bytes, more than any device has",
        "use a smaller shape")
    # NumPy spellings of a Tile dtype are accepted; an empty array is fine
    assert e(3, np.float32, backend="emulator").dtype == "f32"
    assert e((0, 4), "int64", backend="emulator").numpy().shape == (0, 4)


def test_allocation_failure_is_a_device_error():
    with pytest.raises(DeviceError) as e:
        tilelang.empty((1 << 44,), "f32", backend="emulator")     # 64 TiB
    assert e.value.diagnostics[0].message == (
        "cannot allocate 70368744177664 bytes on the emulator back end (an array of f32 with "
        "shape (17592186044416,))")


def test_to_device_inputs():
    be = "emulator"
    assert usage(lambda: tilelang.to_device([1, [2, 3]], backend=be))[0].startswith(
        "cannot make an array of list: ")
    assert usage(lambda: tilelang.to_device(np.array(["a"]), backend=be)) == (
        "the host array has dtype <U1, which is not a Tile dtype", f"convert it to one of: "
        f"{DTYPES}")
    assert usage(lambda: tilelang.to_device(np.zeros(2, np.complex64), backend=be))[0] == \
        "the host array has dtype complex64, which is not a Tile dtype"
    d = tilelang.to_device(np.arange(4, dtype=np.float32), backend=be)
    assert usage(lambda: tilelang.to_device(d, backend=be))[0] == "this is already a DeviceArray"
    assert usage(lambda: d.copy_from(np.zeros(5, np.float32)))[0] == (
        "copy_from: the host array's shape (5,) differs from the device array's (4,)")
    assert usage(lambda: d[::2].copy_from(np.zeros(2, np.float32)))[0] == (
        "copy_from needs a contiguous device array, this one has strides (2,)")
    d.copy_from(np.arange(4, dtype=np.int64) * 2)          # values converted to f32
    np.testing.assert_array_equal(d.numpy(), [0, 2, 4, 6])
    for bad in ("x", 1.5, None):
        with pytest.raises(IndexError):
            d[bad]
    with pytest.raises(IndexError, match="slice step cannot be zero"):
        d[::0]


def test_compile_facts(mod):
    assert usage(lambda: mod.vadd.compile(facts={"a": "zz"})) == (
        "facts of `a` for kernel `vadd`: 'zz' is not a facts key",
        "use ArrayFacts(...) or a key of three characters, `c` or `-`, `a` or `-`, `e` or `-` "
        "(c: contiguous, a: 16-byte aligned, e: last extent a multiple of 16 bytes, -: not), "
        "e.g. `cae`, then `s` for offsets below 2^31 elements, then `n` for an array no "
        "tensor map describes (a zero or negative stride), then `=k` when the shape equals "
        "that of array parameter k")
    assert usage(lambda: mod.vadd.compile(facts={"a": 3}))[0] == \
        "facts of `a` for kernel `vadd`: 3 is not a facts key"
    assert usage(lambda: mod.vadd.compile(facts=["a"]))[0] == (
        "`facts` of kernel `vadd` is list; it maps array parameter names to facts")
    with pytest.raises(KernelArgumentError) as e:
        mod.vadd.compile(facts={"z": "ca"})
    assert (e.value.code, e.value.diagnostics[0].message, e.value.diagnostics[0].help) == (
        "E0910", "kernel `vadd` has no array parameter `z`",
        "facts are given per array parameter; its arrays are: `a`, `b`, `c`")
    with pytest.raises(KernelArgumentError) as e:
        mod.scalars.compile(facts={"a": "ca"})          # a scalar, not an array
    assert e.value.code == "E0910"
    assert mod.vadd.compile(facts={"a": "-a"}).facts == ("-a-", "caes", "caes")
    assert mod.vadd.compile(facts={"a": "cae"}).facts == ("cae", "caes", "caes")


def test_compile_options(tmp_path):
    comp = FakeCompiler()
    src = source("vadd")

    def c(**kw):
        return tilelang.compile(src, backend="emulator", compiler=comp,
                                cache_dir=str(tmp_path), **kw)
    assert usage(lambda: c(opt_level=7)) == ("`opt_level` is 7; it is 0, 1, 2 or 3",
                                              "as `tilec -O0` .. `-O3`")
    assert usage(lambda: c(opt_level="3"))[0] == "`opt_level` is '3'; it is 0, 1, 2 or 3"
    assert usage(lambda: c(defines=[("TILE", 4)]))[0] == \
        "`defines` is list; it maps const names to values"
    assert usage(lambda: c(defines={"TILE": [4]}))[0] == \
        "`defines['TILE']` is list; a const value is a number, a bool or source text"
    assert usage(lambda: c(defines={"1x": 4}))[0] == "`defines` key '1x' is not a const name"
    with pytest.raises(TileError) as e:            # the driver's check, as for `tilec -I`
        tilelang.compile("kernel k(a: Array[f32, 1]) { }\n", backend="emulator",
                         include_dirs=[str(tmp_path / "nope")], cache_dir=str(tmp_path))
    assert e.value.code == "E0271"
    with pytest.raises(TileError) as e:            # the driver's check, as for `tilec -D`
        tilelang.compile("kernel k(a: Array[f32, 1], const T: i32 = 1) { }\n",
                         backend="emulator", defines={"TT": 2}, cache_dir=str(tmp_path))
    assert e.value.code == "E0272"
    assert usage(lambda: c(include_dirs=5))[0] == \
        "`include_dirs` is int, not a list of folders"
    assert usage(lambda: c(arch=90))[0] == "`arch` is int, not a target name"
    assert usage(lambda: tilelang.compile(src, backend="emulator", compiler=comp,
                                          cache_dir=5))[0] == \
        "`cache_dir` is int, not a folder name"
    with pytest.raises(TileError) as e:
        c(arch="sm_75")
    assert e.value.code == "E0750"
    with pytest.raises(tilelang.RuntimeUsageError) as e:
        tilelang.compile(src, backend=5, compiler=comp)
    assert e.value.diagnostics[0].message == "`backend` is int, not a back end"
    # a single folder name is one folder, not a list of characters
    m = c(include_dirs=str(tmp_path), defines={"TILE": np.int32(64)})
    assert m.options.include_dirs == (str(tmp_path),)
    assert m.options.defines == (("TILE", "64"),)


def test_interp_kernels_have_no_compiled_code(tmp_path):
    m = tilelang.compile("kernel k(a: Array[f32, 1]) { }\n", backend="interp",
                         cache_dir=str(tmp_path))
    with pytest.raises(tilelang.RuntimeUsageError) as e:
        m.k.compile()
    assert e.value.diagnostics[0].message == (
        "kernel `k` runs on the interpreter back end, which needs no compiled code")
