"""examples/attention.tile (issues 16 and 17): the FlashAttention-style forward kernel, run small
on the emulator through examples/attention.py and compared with NumPy's float64 softmax, causal
and not, both dtypes and both head dimensions; its products are on tensor cores (mma.sync on
sm_80, wgmma on sm_90a) and the tiles the script uses keep every register (no spills)."""

from __future__ import annotations

import functools
import importlib.util
import pathlib

import pytest

from tilelang.diagnostics import render_all
from tilelang.driver import compile_source
from tilelang.options import CompileOptions

ROOT = pathlib.Path(__file__).resolve().parents[4]
EXAMPLE = ROOT / "examples" / "attention.tile"


@functools.lru_cache(maxsize=None)
def script():
    spec = importlib.util.spec_from_file_location("attention_example",
                                                  ROOT / "examples" / "attention.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("dtype,d,causal", [("f16", 64, "no"), ("f16", 64, "yes"),
                                            ("bf16", 128, "yes")])
def test_matches_numpy_on_emulator(dtype, d, causal, capsys):
    # 70 keys: one whole 64-key tile and a ragged one (masked to -inf past the end)
    assert script().main(["--backend", "emulator", "--seq", "70", "--heads", "2",
                          "--dtype", dtype, "--d", str(d), "--causal", causal]) == 0
    assert "all results match NumPy" in capsys.readouterr().out


DEFAULT_BN = {"sm_80": 64, "sm_90a": 128}


@pytest.mark.parametrize("target", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("d", [64, 128])
def test_tensor_cores_and_no_spills(d, target):
    # the example's own tiles on each target: 128 x 128 over 8 warps on sm_90a (its
    # `by_target` defaults), 64 x 64 over 4 on sm_80 (32 keys at D = 128)
    bn = script().key_tile(d, target, DEFAULT_BN[target])
    for t in ("f16", "bf16"):       # the one generic kernel, specialized for each dtype
        res = compile_source(EXAMPLE.read_text(), str(EXAMPLE), CompileOptions(
            target=target, defines={"T": t, "D": str(d), "BN": str(bn), "CAUSAL": "true"}),
            until="cubin")
        assert res.ok, render_all(res.diagnostics)
        other = "bf16" if t == "f16" else "f16"
        if target == "sm_80":
            assert res.ptx.count(f"mma.sync.aligned.m16n8k16.row.col.f32.{t}.{t}.f32") > 0
            assert f".f32.{other}.{other}.f32" not in res.ptx
        else:       # both products on warp-group MMA; .maxnreg is the hardware's (more lives
                    # than an accumulator: wgmma_product.note_use)
            assert res.ptx.count(f"wgmma.mma_async.sync.aligned.m64n{bn}k16.f32.{t}.{t}") > 0
            assert res.ptx.count(f"wgmma.mma_async.sync.aligned.m64n{d}k16.f32.{t}.{t}") > 0
            assert "mma.sync" not in res.ptx and ".maxnreg 255" in res.ptx
            assert f".f32.{other}.{other}" not in res.ptx
            assert ".reqntid 256, 1, 1" in res.ptx       # two consumer warp groups
        r = res.link.resources["attention"]
        assert (r.spill_stores, r.spill_loads, r.stack_frame) == (0, 0, 0), (t, r)


@pytest.mark.gpu
def test_matches_numpy_on_gpu(capsys):
    # every dtype, head dimension and causal flag at 2 heads x 1000 (TMA-free: the loop is
    # not pipelined; wgmma on sm_90a, mma.sync elsewhere)
    assert script().main(["--backend", "cuda", "--seq", "1000", "--heads", "2"]) == 0
    assert "all results match NumPy" in capsys.readouterr().out


@pytest.mark.gpu
def test_matmul_example_on_gpu():
    # examples/matmul.tile through the runtime: on an sm_90 GPU its loop is TMA + wgmma with
    # the driver's tensor maps (cuTensorMapEncodeTiled)
    import numpy as np
    import tilelang
    mod = tilelang.compile(str(ROOT / "examples" / "matmul.tile"), backend="cuda")
    rng = np.random.default_rng(0)
    M, N, K = 1000, 1024, 520
    a = (rng.integers(-8, 9, (M, K)) / 8).astype(np.float16)
    b = (rng.integers(-8, 9, (K, N)) / 8).astype(np.float16)
    da, db = (tilelang.to_device(x, backend=mod.backend) for x in (a, b))
    dc = tilelang.to_device(np.full((M, N), np.nan, np.float32), backend=mod.backend)
    gx = -(-M // 128)
    mod.matmul[(gx + gx % 2, -(-N // 128))](da, db, dc)
    mod.backend.synchronize()
    assert np.array_equal(np.asarray(dc), a.astype(np.float64) @ b.astype(np.float64))
