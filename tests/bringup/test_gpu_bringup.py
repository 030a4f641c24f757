"""GPU bring-up (marked `gpu`, skipped cleanly without one): `tilec --report` against the
driver, do_bench and autotuning on the GPU, every array dtype from torch, launches from
several threads on their own streams, and `tilec tune` on the GPU."""

from __future__ import annotations

import ctypes
import glob
import os
import threading

import numpy as np
import pytest

import tilelang

pytestmark = pytest.mark.gpu

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
EX = os.path.join(ROOT, "examples")


@pytest.fixture(autouse=True)
def cache_in_tmp(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture
def torch():
    t = pytest.importorskip("torch")
    if not t.cuda.is_available():
        pytest.skip("torch has no GPU")
    return t


def _ok(result):
    from cuda.bindings import driver
    err, *rest = result if isinstance(result, tuple) else (result,)
    assert err == driver.CUresult.CUDA_SUCCESS, err
    return rest[0] if len(rest) == 1 else rest


def _report_rows(path: str, target: str) -> dict:
    """`tilec --report` as {kernel: (registers, blocks per SM)}."""
    import contextlib
    import io

    from tilelang.cli import main
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["--report", "--arch", target, path]) == 0
    lines = out.getvalue().splitlines()
    head = lines[0]
    at_regs, at_blocks = head.index("regs"), head.index("blocks/SM")
    rows = {}
    for line in lines[2:]:
        if not line or line.startswith(" ") or line.endswith(":"):
            break
        rows[line.split()[0]] = (int(line[at_regs:].split()[0]),
                                 int(line[at_blocks:].split()[0]))
    return rows


@pytest.mark.parametrize("path", sorted(glob.glob(os.path.join(EX, "*.tile"))),
                         ids=lambda p: os.path.basename(p))
def test_report_matches_the_driver(path):
    """Registers from the linker's log and blocks per SM from the occupancy model, as
    `tilec --report` prints them, equal cuFuncGetAttribute(NUM_REGS) and
    cuOccupancyMaxActiveBlocksPerMultiprocessor on the loaded cubin."""
    from cuda.bindings import driver

    from tilelang.codegen.occupancy import occupancy
    from tilelang.driver import compile_source
    from tilelang.options import CompileOptions
    be = tilelang.get_backend("cuda")
    target = be.default_target()
    text = open(path).read()
    res = compile_source(text, path, CompileOptions(target=target), until="cubin")
    assert res.ok, [d.message for d in res.diagnostics]
    rows = _report_rows(path, target)
    module = _ok(driver.cuModuleLoadData(res.cubin))
    try:
        for k in res.codegen.kernels:
            fn = _ok(driver.cuModuleGetFunction(module, k.name.encode()))
            regs = _ok(driver.cuFuncGetAttribute(
                driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_NUM_REGS, fn))
            static = _ok(driver.cuFuncGetAttribute(
                driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, fn))
            assert regs == res.link.resources[k.name].registers, k.name
            assert static == k.static_smem or static == res.link.resources[k.name].smem_static
            if k.dynamic_smem:
                _ok(driver.cuFuncSetAttribute(
                    fn, driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    k.dynamic_smem))
            threads = int(np.prod(k.block))
            occ = driver.cuOccupancyMaxActiveBlocksPerMultiprocessor(fn, threads,
                                                                     k.dynamic_smem)
            if os.environ.get("TILELANG_TEST_EMULATED_GPU") == "1" \
                    and occ[0] == driver.CUresult.CUDA_ERROR_NOT_SUPPORTED:
                # tests/emulated_cuda.py has no occupancy of its own (it would be the model
                # compared with itself): the registers the report prints are still checked
                assert rows[k.name][0] == regs, (k.name, rows[k.name])
                continue
            blocks = _ok(occ)
            model = occupancy(target, threads, regs, static, k.dynamic_smem).blocks_per_sm
            assert model == blocks, (k.name, regs, threads, static, k.dynamic_smem)
            assert rows[k.name] == (regs, blocks), (k.name, rows[k.name])
    finally:
        driver.cuModuleUnload(module)


def test_do_bench_times_on_the_gpu(torch):
    from tilelang.testing import do_bench
    from tilelang.testing.bench import _DriverTimer, time_runs
    mod = tilelang.compile(os.path.join(EX, "vadd.tile"), backend="cuda")
    n = 1 << 24
    a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    c = torch.empty_like(a)
    fn = lambda: mod.vadd[n // 1024](a, b, c)          # noqa: E731
    mean = do_bench(fn)
    assert isinstance(mean, float) and mean > 0
    q20, q50, q80 = do_bench(fn, quantiles=[0.2, 0.5, 0.8])
    assert 0 < q20 <= q50 <= q80
    # 3 x 64 MiB moved: at least the time a 5 TB/s memory needs, at most 50x it
    assert 3 * n * 4 / 5e12 * 1e3 <= q50 <= 50 * 3 * n * 4 / 5e12 * 1e3
    times = time_runs(fn, 5, 20, _DriverTimer())         # the driver's events, without torch
    assert times and all(t > 0 for t in times)
    torch.cuda.synchronize()
    assert torch.equal(c, a + b)


def test_autotune_on_the_gpu_picks_the_fastest(torch):
    from tilelang.testing import do_bench
    from tilelang.tune import autotune
    mod = tilelang.compile(os.path.join(EX, "matmul.tile"), backend="cuda")
    n = 2048
    a = torch.randn(n, n, device="cuda").half()
    b = torch.randn(n, n, device="cuda").half()
    c = torch.empty(n, n, device="cuda")

    def grid(m):
        gx = -(-n // m["BM"])
        return (gx + gx % 2, -(-n // m["BN"]))
    tuned = autotune(mod.matmul, space={"BM": [64, 128], "BN": [64, 128], "BK": [32, 64]},
                     grid=grid, progress=False, rep=50)
    tuned(a, b, c)
    torch.cuda.synchronize()
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-2, atol=1e-2)
    res = tuned.last
    assert res.metric == "ms" and res.seconds < 30
    ok = [t for t in res.trials if t.status == "ok"]
    assert ok and all(t.occupancy is not None for t in ok)
    again = {}
    for t in ok:
        k = mod.matmul.specialize(**t.config)
        again[str(t.config)] = do_bench(lambda k=k: k[grid](a, b, c), quantiles=[0.5], rep=200)
    assert again[str(res.config)] <= 1.10 * min(again.values()), (res.config, again)
    # registers came from the driver: the resource model saw them
    from tilelang.tune.tuner import _registers
    spec = mod.matmul.specialize(**res.config).compile()
    assert _registers(mod.backend, spec) > 0


def test_every_array_dtype_from_torch(torch):
    mod = tilelang.compile(os.path.join(HERE, "abi.tile"), backend="cuda")
    dts = {"i8": torch.int8, "i16": torch.int16, "i32": torch.int32, "i64": torch.int64,
           "u8": torch.uint8, "f16": torch.float16, "bf16": torch.bfloat16,
           "f32": torch.float32, "f64": torch.float64, "bool": torch.bool}
    for name in ("uint16", "uint32", "uint64", "float8_e4m3fn", "float8_e5m2"):
        if hasattr(torch, name):
            dts[{"uint16": "u16", "uint32": "u32", "uint64": "u64", "float8_e4m3fn": "f8e4m3",
                 "float8_e5m2": "f8e5m2"}[name]] = getattr(torch, name)
    g = torch.Generator(device="cuda").manual_seed(0)
    widths = {"i8": 1, "u8": 1, "bool": 1, "f8e4m3": 1, "f8e5m2": 1, "i16": 2, "u16": 2,
              "f16": 2, "bf16": 2, "i32": 4, "u32": 4, "f32": 4, "i64": 8, "u64": 8, "f64": 8}
    for dt, tdt in dts.items():
        # only views and uint8 arithmetic touch the data (torch's uint16/32/64 have few ops)
        w = widths[dt]
        bits = torch.randint(0, 256, (3200,), device="cuda", dtype=torch.uint8, generator=g)
        if dt == "bool":
            bits = bits % 2
        x = bits.view(tdt)
        yb = torch.zeros(260 * w, device="cuda", dtype=torch.uint8)
        y = yb.view(tdt)
        getattr(mod, f"copy1_{dt}")[4](x[::2][:200], y[30:230])     # strided, offset
        torch.cuda.synchronize()
        want = bits.view(-1, w)[::2][:200].reshape(-1)
        assert torch.equal(yb[30 * w:230 * w], want), dt
        assert not yb[:30 * w].any() and not yb[230 * w:].any(), dt


def test_cupy_strided_arrays():
    cp = pytest.importorskip("cupy")
    mod = tilelang.compile(os.path.join(HERE, "abi.tile"), backend="cuda")
    x = cp.arange(64 * 96, dtype=cp.float32).reshape(64, 96)
    y = cp.zeros((96, 64), dtype=cp.float32)
    mod.copy2[(6, 2)](x.T, y)
    cp.cuda.get_current_stream().synchronize()
    assert bool(cp.all(y == x.T))


def test_threads_on_their_own_streams(torch):
    mod = tilelang.compile(os.path.join(EX, "vadd.tile"), backend="cuda")
    n = 1 << 20
    errors, outs = [], {}

    def work(i):
        try:
            s = torch.cuda.Stream()
            with torch.cuda.stream(s):
                a = torch.full((n,), float(i), device="cuda")
                b = torch.ones(n, device="cuda")
                c = torch.empty(n, device="cuda")
                for _ in range(20):
                    mod.vadd[n // 1024](a, b, c)
                    a, c = c, a
            s.synchronize()
            outs[i] = a
        except Exception as e:          # noqa: BLE001 - reported below
            errors.append(e)
    ts = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors
    for i, a in outs.items():
        assert torch.all(a == float(i + 20)), i


def test_tilec_tune_on_the_gpu(capsys):
    from tilelang.cli import main
    code = main(["tune", os.path.join(EX, "vadd.tile"), "--kernel", "vadd", "--backend", "cuda",
                 "--arg", "a=rand:1000000", "--arg", "b=rand:1000000", "--arg",
                 "c=zeros:1000000", "--space", "TILE=256,512,1024,2048",
                 "--grid", "cdiv(1000000, TILE)", "--rep", "20"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert out.splitlines()[-1].startswith("best      TILE=") and "by ms" in out
    assert "timing 4 on " in err


def test_launch_struct_of_a_kernel_with_every_scalar(torch):
    """abi_mixed: scalars of 1, 2, 4 and 8 bytes interleaved, so the parameter buffer has
    padding; every value arrives."""
    mod = tilelang.compile(os.path.join(HERE, "abi.tile"), backend="cuda")
    out = torch.zeros(10, device="cuda", dtype=torch.float64)
    mod.abi_mixed[1](out, -7, 1 / 7, 65535, -(2**53) + 1, True, 0.1, 4294967295, 3.0e38,
                     1.0e-3, 255)
    torch.cuda.synchronize()
    want = [-7, 1 / 7, 65535, -(2**53) + 1, 1, float(np.float16(0.1)), 4294967295,
            float(torch.tensor(3.0e38).bfloat16().double()), float(np.float32(1.0e-3)), 255]
    assert out.tolist() == want
    assert ctypes.sizeof(ctypes.c_double) == 8
