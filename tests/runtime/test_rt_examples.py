"""The real compiler through the public API, on the emulator: every example of examples/ from
its .tile file, checked against NumPy, with const values given both ways, non-contiguous and
misaligned arguments (new specializations), and the cluster kernel (matmul) launched with its
cluster shape. Also `examples/launch_kernels.py`, the runnable script of docs/python-api.md."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import tilelang
from rt_support import ROOT, fresh_runtime  # noqa: F401 (autouse fixture)

EX = os.path.join(ROOT, "examples")
RNG = np.random.default_rng(11)


@pytest.fixture(autouse=True)
def cache_in_tmp(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "cache"))


def compile_example(name: str):
    return tilelang.compile(os.path.join(EX, f"{name}.tile"), backend="emulator")


def test_vadd_both_launch_shapes_and_views():
    mod = compile_example("vadd")
    n = 5000
    a, b = RNG.standard_normal(n).astype(np.float32), RNG.standard_normal(n).astype(np.float32)
    c = np.zeros(n, np.float32)
    mod.vadd[(n + 1023) // 1024](a, b, c)
    np.testing.assert_array_equal(c, a + b)
    c2 = np.zeros(n, np.float32)
    tilelang.launch(None, ((n + 255) // 256,), mod.vadd.specialize(TILE=256), (a, b, c2))
    np.testing.assert_array_equal(c2, a + b)
    big = RNG.standard_normal(3 * n).astype(np.float32)
    c3 = np.zeros(n, np.float32)
    mod.vadd[(n + 1023) // 1024](big[::3], b, c3)            # strided: a new specialization
    np.testing.assert_array_equal(c3, big[::3] + b)
    d = mod.to_device(big)
    c4 = mod.empty(n - 1, "f32")
    mod.vadd[(n + 1023) // 1024](d[1:n], d[n + 1:2 * n], c4)  # 4-byte offsets: unaligned
    np.testing.assert_array_equal(c4.numpy(), big[1:n] + big[n + 1:2 * n])
    # b and c have a's shape: `=0` (same_shape); 4999 x 4 bytes: no `e`
    assert set(mod.vadd._specs) == {("caes", "caes=0", "caes=0"), ("-aes", "caes=0", "caes=0"),
                                    ("c--s", "c--s=0", "ca-s=0")}


def test_softmax_rows():
    mod = compile_example("softmax")
    x = RNG.standard_normal((7, 300)).astype(np.float32)
    y = np.zeros_like(x)
    mod.softmax_rows[7](x, y, N=512)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(y, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)


def test_topk_router_with_ties_and_a_smaller_k():
    """examples/topk.tile with K = 2 over 48 of 64 experts: the chosen experts exactly (ties
    by lower index), the weights against NumPy."""
    mod = compile_example("topk")
    x = (np.round(RNG.standard_normal((21, 48)) * 2) / 2).astype(np.float32)
    ids, w = np.zeros((21, 2), np.int32), np.zeros((21, 2), np.float32)
    mod.topk_router[2](x, ids, w, K=2)
    want = np.argsort(-x, axis=1, kind="stable")[:, :2]
    np.testing.assert_array_equal(ids, want)
    v = np.take_along_axis(x, want, axis=1).astype(np.float64)
    e = np.exp(v - v[:, :1])
    np.testing.assert_allclose(w, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)


def test_layernorm_with_scalar_argument():
    mod = compile_example("layernorm")
    x = RNG.standard_normal((5, 200)).astype(np.float32)
    w = RNG.standard_normal(200).astype(np.float32)
    b = RNG.standard_normal(200).astype(np.float32)
    y = np.zeros_like(x)
    mod.layernorm.specialize(N=256)[5](x, w, b, y, 1e-5)
    mu = x.mean(axis=1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=1, keepdims=True)
    np.testing.assert_allclose(y, (x - mu) / np.sqrt(var + 1e-5) * w + b, rtol=1e-4,
                               atol=1e-5)


def test_matmul_cluster_kernel():
    mod = compile_example("matmul")
    k = mod.matmul.specialize(BM=32, BN=32, BK=16)
    spec = k.compile()
    assert spec.artifact.cluster == (2, 1, 1)
    a = RNG.standard_normal((64, 48)).astype(np.float16)
    b = RNG.standard_normal((48, 80)).astype(np.float16)
    c = np.zeros((64, 80), np.float32)
    k[(2, 3)](a, b, c)
    np.testing.assert_allclose(c, a.astype(np.float32) @ b.astype(np.float32), rtol=1e-4,
                               atol=1e-4)
    with pytest.raises(tilelang.LaunchConfigError) as e:
        k[(3, 3)](a, b, c)
    assert e.value.code == "E0902"


def test_compile_errors_are_diagnostics():
    with pytest.raises(tilelang.runtime.errors.TileError) as e:
        tilelang.compile("kernel k(a: Array[f32, 1]) {\n  let x = ;\n}\n", backend="emulator")
    assert e.value.diagnostics[0].code.startswith("E01")
    assert e.value.diagnostics[0].span.file == "<string>"


def test_source_string_module():
    mod = tilelang.compile("""
kernel scale(x: Array[f32, 1], y: Array[f32, 1], alpha: f32, const T: i32 = 256) {
    let t = load(x, index = (bid(0),), shape = (T,), padding = 0.0);
    store(y, index = (bid(0),), tile = t * alpha);
}
""", backend="emulator")
    x = RNG.standard_normal(600).astype(np.float32)
    y = np.zeros_like(x)
    mod.scale[3](x, y, 2.5)
    np.testing.assert_array_equal(y, x * np.float32(2.5))


def test_example_script_runs():
    r = subprocess.run([sys.executable, os.path.join(EX, "launch_kernels.py"), "--backend",
                        "emulator"], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "PYTHONPATH": ROOT})
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[-1] == "all results match NumPy"


def test_launch_script_unchanged_on_the_interpreter():
    """TILELANG_INTERPRET=1 runs the same script on the reference interpreter (Triton's
    TRITON_INTERPRET=1): no PTX is generated, the results still match NumPy."""
    r = subprocess.run([sys.executable, os.path.join(EX, "launch_kernels.py"), "--backend",
                        "emulator"], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "PYTHONPATH": ROOT, "TILELANG_INTERPRET": "1"})
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "back end: interp, target sm_90a"
    assert lines[-1] == "all results match NumPy"
