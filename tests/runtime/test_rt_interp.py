"""Triton users' conveniences (issue 12, item 14): the reference interpreter as a back end
(`backend="interp"`, `TILELANG_INTERPRET=1`), `@host fn`s called from Python,
`tilelang.cdiv`, and grid functions that see every argument."""

from __future__ import annotations

import os

import ml_dtypes
import numpy as np
import pytest

import tilelang
from rt_support import ROOT, fresh_runtime  # noqa: F401 (autouse fixture)
from tilelang.runtime.errors import DeviceError, KernelArgumentError

RNG = np.random.default_rng(14)
EX = os.path.join(ROOT, "examples")

DEBUG = """
@launch(maxntid = (64, 1, 1))
kernel report(x: Array[i32, 1], limit: i32) {
    let t = load(x, index = (bid(0),), shape = (4,), padding = 0);
    print("block {} sum {}", bid(0), sum(t));
    assert(max(t) < limit, "value over the limit");
}

kernel widen(x: Array[bf16, 1], y: Array[f32, 1], s: f32, const T: i32 = 32) {
    let v = load(x, index = (bid(0),), shape = (T,), padding = 0.0);
    store(y, index = (bid(0),), tile = astype(v, f32) * s);
}

kernel narrow(x: Array[f32, 1], y: Array[bf16, 1], const T: i32 = 32) {
    let v = load(x, index = (bid(0),), shape = (T,), padding = 0.0);
    store(y, index = (bid(0),), tile = astype(v, bf16));
}

@host
fn blocks(n: i64, tile: i32) -> i64 {
    return cdiv(n, tile);
}

@host
fn mean_of(total: f32, n: i32) -> f32 {
    return total / astype(n, f32);
}

@host
fn wrap(a: i8, b: i8) -> i8 {
    return a + b;
}

@host
fn less(a: i32, b: i32) -> bool {
    return a < b;
}

fn device_only(a: i32) -> i32 {
    return a * 2;
}
"""


@pytest.fixture
def dbg(tmp_path):
    return tilelang.compile(DEBUG, backend="interp", cache_dir=str(tmp_path))


def test_vadd_and_softmax_on_the_interpreter(tmp_path):
    vadd = tilelang.compile(os.path.join(EX, "vadd.tile"), backend="interp",
                            cache_dir=str(tmp_path))
    assert vadd.backend.name == "interp" and vadd.target == "sm_90a"
    n = 5000
    a = RNG.standard_normal(n).astype(np.float32)
    b = RNG.standard_normal(n).astype(np.float32)
    c = np.zeros(n, np.float32)
    assert vadd.vadd[tilelang.cdiv(n, 1024)](a, b, c) is None
    np.testing.assert_array_equal(c, a + b)
    big = RNG.standard_normal(4 * n).astype(np.float32)
    c2 = np.zeros(n // 2, np.float32)
    tilelang.launch(None, (tilelang.cdiv(n // 2, 256),), vadd.vadd.specialize(TILE=256),
                    (big[::4][:n // 2], b[1:n // 2 + 1], c2))       # strided and offset
    np.testing.assert_array_equal(c2, big[::4][:n // 2] + b[1:n // 2 + 1])
    sm = tilelang.compile(os.path.join(EX, "softmax.tile"), backend="interp",
                          cache_dir=str(tmp_path))
    x = RNG.standard_normal((6, 300)).astype(np.float32)
    y = np.zeros_like(x)
    sm.softmax_rows.specialize(N=512)[6](x, y)
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(y, e / e.sum(axis=1, keepdims=True), rtol=2e-6, atol=1e-8)


def test_device_arrays_and_narrow_dtypes(dbg):
    x = RNG.standard_normal(100).astype(np.float32).astype(ml_dtypes.bfloat16)
    y = np.zeros(100, np.float32)
    dbg.widen[4](x, y, 3.0)                                # bf16 in, f32 out
    np.testing.assert_array_equal(y, x.astype(np.float32) * np.float32(3.0))
    src = RNG.standard_normal(100).astype(np.float32)
    out = np.zeros(100, ml_dtypes.bfloat16)
    dbg.narrow[4](src, out)                                # bf16 written back
    assert out.tobytes() == src.astype(ml_dtypes.bfloat16).tobytes()
    dx = dbg.to_device(x)
    dy = dbg.empty(100, "f32")
    dbg.widen[4](dx, dy, -1.0)
    np.testing.assert_array_equal(dy.numpy(), -x.astype(np.float32))


def test_print_and_assert(dbg, capsys):
    x = np.arange(8, dtype=np.int32)
    dbg.report[2](x, 100)
    assert capsys.readouterr().out.splitlines() == ["[block (0, 0, 0)] block 0 sum 6",
                                                    "[block (1, 0, 0)] block 1 sum 22"]
    with pytest.raises(DeviceError) as e:
        dbg.report[2](x, 5)
    assert e.value.code == "E0931"
    assert e.value.diagnostics[0].message.startswith(
        "kernel `report` failed an assert in the interpreter: kernel `report`, block "
        "(1, 0, 0): assertion failed: value over the limit")


def test_checks_are_the_same_as_on_the_gpu(dbg):
    x = np.zeros(8, np.int32)
    with pytest.raises(KernelArgumentError) as e:
        dbg.report[1](x)
    assert e.value.code == "E0910"
    with pytest.raises(KernelArgumentError) as e:
        dbg.report[1](x.astype(np.int64), 3)
    assert e.value.code == "E0911"
    with pytest.raises(KernelArgumentError) as e:
        dbg.report[1](x, 2**40)
    assert e.value.diagnostics[0].message == (
        "argument `limit` of kernel `report` (limit: i32): 1099511627776 does not fit i32 "
        "(range -2147483648..2147483647)")
    with pytest.raises(tilelang.LaunchConfigError) as e:
        dbg.report[-1](x, 3)
    assert e.value.code == "E0903"
    with pytest.raises(tilelang.LaunchConfigError) as e:
        dbg.report[1](x, 3, block=(2048, 1, 1))
    assert e.value.code == "E0901"
    with pytest.raises(KernelArgumentError) as e:
        dbg.narrow[1](np.zeros(32, np.float32), np.zeros(32, ml_dtypes.bfloat16)[::-1][::-1]
                      .view(np.uint16))
    assert e.value.code == "E0911"


def test_tilelang_interpret_environment(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("TILELANG_INTERPRET", "1")
    mod = tilelang.compile(DEBUG, backend="emulator", cache_dir=str(tmp_path))
    assert mod.backend.name == "interp"
    mod.report[1](np.arange(4, dtype=np.int32), 10)
    assert capsys.readouterr().out == "[block (0, 0, 0)] block 0 sum 6\n"
    assert tilelang.get_backend("cuda").name == "interp"    # no driver needed either
    monkeypatch.setenv("TILELANG_INTERPRET", "0")
    assert tilelang.get_backend("emulator").name == "emulator"


def test_host_functions(dbg, tmp_path):
    assert dbg.blocks(1_000_003, 1024) == 977
    assert dbg.blocks(n=0, tile=256) == 0
    assert dbg.blocks(np.int64(2**40), np.int32(3)) == -(-2**40 // 3)
    assert dbg.mean_of(1.0, 3) == float(np.float32(1.0) / np.float32(3.0))   # f32 arithmetic
    assert dbg.wrap(100, 100) == -56                                          # i8 wraps
    assert dbg.less(1, 2) is True and dbg.less(2, 1) is False
    assert sorted(dbg.host_functions) == ["blocks", "less", "mean_of", "wrap"]
    vadd = tilelang.compile(os.path.join(EX, "vadd.tile"), backend="emulator",
                            cache_dir=str(tmp_path))
    assert vadd.vadd_grid(5000) == 5 and "vadd_grid" in dir(vadd)

    def bad(fn):
        with pytest.raises(KernelArgumentError) as e:
            fn()
        return e.value.code, e.value.diagnostics[0].message
    assert bad(lambda: dbg.blocks(1)) == (
        "E0910", "host function `blocks(n, tile)` is missing the argument `tile`")
    assert bad(lambda: dbg.blocks(1, 2, 3)) == (
        "E0910", "host function `blocks(n, tile)` takes 2 arguments, got 3")
    assert bad(lambda: dbg.blocks(1, tile=2, n=3)) == (
        "E0910", "host function `blocks(n, tile)`: `n` is given twice")
    assert bad(lambda: dbg.blocks(1, size=2)) == (
        "E0910", "host function `blocks(n, tile)` has no parameter `size`")
    assert bad(lambda: dbg.blocks(1.5, 2)) == (
        "E0915", "argument `n` of host function `blocks(n, tile)` (n: i64): expected an "
        "integer, got float 1.5")
    with pytest.raises(tilelang.KernelNotFound) as e:
        dbg.device_only(3)
    assert e.value.diagnostics[0].message == (
        "`device_only` in `<string>` is a `fn` without `@host`: only kernels and @host "
        "functions can be used from Python")
    with pytest.raises(tilelang.KernelNotFound) as e:
        dbg.report_grid
    assert e.value.diagnostics[0].help == (
        "its kernels are: `report`, `widen`, `narrow`; its @host functions: `blocks`, "
        "`mean_of`, `wrap`, `less`")


def test_cdiv():
    assert [tilelang.cdiv(a, 4) for a in (0, 1, 4, 5, -5)] == [0, 1, 1, 2, -1]
    assert tilelang.cdiv(np.int64(10), 3) == 4
    with pytest.raises(ZeroDivisionError):
        tilelang.cdiv(1, 0)
    with pytest.raises(TypeError, match="cdiv takes two integers"):
        tilelang.cdiv(1.5, 2)


@pytest.mark.parametrize("backend", ["interp", "emulator"])
def test_grid_function_sees_every_argument(backend, tmp_path):
    mod = tilelang.compile(DEBUG, backend=backend, cache_dir=str(tmp_path))
    seen = {}

    def grid(meta):
        seen.update(meta)
        return (tilelang.cdiv(meta["x"].shape[0], meta["T"]),)
    x = np.ones(70, np.float32).astype(ml_dtypes.bfloat16)
    y = np.zeros(70, np.float32)
    mod.widen[grid](x, y, 2.0, T=32)
    assert sorted(seen) == ["T", "s", "x", "y"]
    assert seen["x"] is x and seen["y"] is y and seen["s"] == 2.0 and seen["T"] == 32
    np.testing.assert_array_equal(y, np.full(70, 2.0, np.float32))


def test_cuda_arrays_are_refused_on_the_interpreter(dbg):
    from test_rt_args import FakeCudaArray
    with pytest.raises(KernelArgumentError) as e:
        dbg.narrow[1](FakeCudaArray((32,), "<f4"), np.zeros(32, ml_dtypes.bfloat16))
    d = e.value.diagnostics[0]
    assert (d.code, d.help) == (
        "E0913", "the interpreter runs on host memory: pass a NumPy array, or a DeviceArray made "
        "with `tilelang.to_device(..., backend='interp')`")
