"""The CUDA back end on a real GPU (marked `gpu`: skipped cleanly without one, see
tests/conftest.py): the examples against torch, strided tensors, streams (explicit, current,
raw handles, ordering), clusters through cuLaunchKernelEx, more than 48 KB of dynamic shared
memory, DeviceArrays without torch, and validation before the driver."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import tilelang
from rt_support import ROOT, FakeCompiler, fresh_runtime, source  # noqa: F401

pytestmark = pytest.mark.gpu
EX = os.path.join(ROOT, "examples")


@pytest.fixture(autouse=True)
def cache_in_tmp(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture
def torch():
    t = pytest.importorskip("torch")
    if not t.cuda.is_available():       # a CPU-only torch (the emulated driver's runs)
        pytest.skip("torch has no GPU")
    return t


def example(name):
    return tilelang.compile(os.path.join(EX, f"{name}.tile"), backend="cuda")


def sm() -> int:
    be = tilelang.get_backend("cuda")
    return be.capability[0] * 10 + be.capability[1]


def test_backend_properties():
    be = tilelang.get_backend("cuda")
    assert be.name == "cuda" and be.limits.max_threads_per_block == 1024
    assert be.default_target().startswith("sm_")


def test_vadd_torch(torch):
    mod = example("vadd")
    n = 1_000_003
    a = torch.randn(n, device="cuda")
    b = torch.randn(n, device="cuda")
    c = torch.empty(n, device="cuda")
    mod.vadd[(n + 1023) // 1024](a, b, c)
    torch.cuda.synchronize()
    assert torch.equal(c, a + b)
    c2 = torch.zeros(n // 2, device="cuda")
    big = torch.randn(2 * n, device="cuda")
    tilelang.launch(None, ((n // 2 + 255) // 256,), mod.vadd.specialize(TILE=256),
                    (big[::4][:n // 2], b[1:n // 2 + 1], c2))          # strided, unaligned
    torch.cuda.synchronize()
    assert torch.equal(c2, big[::4][:n // 2] + b[1:n // 2 + 1])


def test_softmax_and_layernorm_torch(torch):
    x = torch.randn(300, 777, device="cuda")
    y = torch.empty_like(x)
    example("softmax").softmax_rows[300](x, y)
    torch.testing.assert_close(y, torch.softmax(x, dim=1), rtol=1e-5, atol=1e-6)
    w, b = torch.randn(777, device="cuda"), torch.randn(777, device="cuda")
    example("layernorm").layernorm[300](x, w, b, y, 1e-5)
    torch.testing.assert_close(y, torch.nn.functional.layer_norm(x, (777,), w, b, 1e-5),
                               rtol=1e-4, atol=1e-4)


def test_matmul_cluster_torch(torch):
    if sm() < 90:
        pytest.skip("clusters need sm_90")
    mod = example("matmul")
    a = torch.randn(512, 256, device="cuda", dtype=torch.float16)
    b = torch.randn(256, 384, device="cuda", dtype=torch.float16)
    c = torch.empty(512, 384, device="cuda")
    mod.matmul[(4, 3)](a, b, c)
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-2, atol=1e-2)
    with pytest.raises(tilelang.LaunchConfigError) as e:
        mod.matmul[(3, 3)](a, b, c)
    assert e.value.code == "E0902"


def test_streams(torch):
    mod = example("vadd")
    n = 1 << 20
    a = torch.zeros(n, device="cuda")
    b = torch.ones(n, device="cuda")
    c = torch.empty(n, device="cuda")
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        torch.cuda._sleep(50_000_000)        # keep the stream busy, then fill a
        a.fill_(2.0)
        mod.vadd[n // 1024](a, b, c)         # no stream given: torch's current stream (s)
    s.synchronize()
    assert torch.all(c == 3.0)
    with torch.cuda.stream(s):
        torch.cuda._sleep(50_000_000)
        a.fill_(5.0)
    mod.vadd[n // 1024](a, b, c, stream=s)                 # a torch.cuda.Stream
    s.synchronize()
    assert torch.all(c == 6.0)
    tilelang.launch(s.cuda_stream, (n // 1024,), mod.vadd, (b, b, c))   # a raw handle
    s.synchronize()
    assert torch.all(c == 2.0)
    with pytest.raises(tilelang.KernelArgumentError) as e:
        mod.vadd[1](a, b, c, stream="fast")
    assert e.value.code == "E0917"


def test_device_arrays_without_torch():
    mod = example("vadd")
    a = np.arange(5000, dtype=np.float32)
    da, db = mod.to_device(a), tilelang.to_device(2 * a, backend="cuda")
    dc = mod.empty(5000, "f32")
    mod.vadd[5](da, db, dc)
    mod.backend.synchronize()
    np.testing.assert_array_equal(dc.numpy(), 3 * a)


def test_host_arrays_are_refused_on_cuda():
    mod = example("vadd")
    with pytest.raises(tilelang.KernelArgumentError) as e:
        mod.vadd[1](np.zeros(4, np.float32), np.zeros(4, np.float32), np.zeros(4, np.float32))
    assert e.value.code == "E0913"


def test_more_than_48k_dynamic_shared_memory(tmp_path):
    mod = tilelang.compile(source("bigsmem"), backend="cuda", compiler=FakeCompiler(),
                           cache_dir=str(tmp_path))
    if sm() < 90:
        pytest.skip("the hand-written PTX targets sm_90")
    out = mod.empty(128, "i32")
    mod.bigsmem[1](out)
    mod.backend.synchronize()
    np.testing.assert_array_equal(out.numpy(), (np.arange(128) + 1) % 128 + 1)


def test_hand_written_cluster_kernel(tmp_path):
    if sm() < 90:
        pytest.skip("clusters need sm_90")
    mod = tilelang.compile(source("clus"), backend="cuda", compiler=FakeCompiler(),
                           cache_dir=str(tmp_path))
    out = mod.empty(6, "i32")
    mod.clus[6](out)
    mod.backend.synchronize()
    np.testing.assert_array_equal(out.numpy(), [0, 1, 100, 101, 200, 201])


def test_cupy_arrays():
    cp = pytest.importorskip("cupy")
    mod = example("vadd")
    a = cp.arange(3000, dtype=cp.float32)
    c = cp.empty_like(a)
    mod.vadd[3](a, a, c)
    cp.cuda.get_current_stream().synchronize()
    assert bool(cp.all(c == 2 * a))


def test_example_script_on_cuda():
    if os.environ.get("TILELANG_TEST_EMULATED_GPU") == "1":
        pytest.skip("a subprocess has no emulated driver (tests/emulated_cuda.py stands in "
                    "for the driver in this process only)")
    r = subprocess.run([sys.executable, os.path.join(EX, "launch_kernels.py"), "--backend",
                        "cuda"], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "PYTHONPATH": ROOT})
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[-1] == "all results match NumPy"


def test_tilec_run_on_cuda(capsys):
    from tilelang.cli import main
    rc = main(["run", os.path.join(EX, "vadd.tile"), "--kernel", "vadd", "--grid", "4",
               "--backend", "cuda", "--shape", "4000", "--repeat", "10"])
    out = capsys.readouterr().out
    assert rc == 0 and "backend   cuda (" in out


def test_launch_from_another_thread():
    import threading
    mod = example("vadd")
    a = mod.to_device(np.arange(2048, dtype=np.float32))
    c = mod.empty(2048, "f32")
    errors = []

    def work():
        try:
            mod.vadd[2](a, a, c)
            mod.backend.synchronize()
        except Exception as e:
            errors.append(e)
    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert not errors
    np.testing.assert_array_equal(c.numpy(), 2 * np.arange(2048, dtype=np.float32))
