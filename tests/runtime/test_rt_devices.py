"""Launches on several devices, without a GPU: the CUDA back end on an emulated driver with two
devices (tests/emulated_cuda.py: their own primary contexts, per-device kernel attributes and
allocations; a kernel given another device's memory faults). A launch runs on the device that
holds its arrays, in that device's primary context, made current for the call and the
caller's context restored after (docs/launch-path.md); arrays on two devices are an error
naming both. The gpu-marked tests at the end do the same on real GPUs (two or more)."""

from __future__ import annotations

import os
import sys
import threading

import numpy as np
import pytest

import tilelang
from rt_support import (ROOT, FakeCompiler, fresh_runtime, source,  # noqa: F401 (autouse)
                        use_emulated_driver)

sys.path.insert(0, os.path.join(ROOT, "tests"))
import emulated_cuda  # noqa: E402

pytest.importorskip("cuda.bindings.driver")
N = 2000


@pytest.fixture
def emu(monkeypatch):
    return use_emulated_driver(monkeypatch, devices=2)


@pytest.fixture
def mod(emu, tmp_path):
    return tilelang.compile(source("vadd", "bigsmem"), backend="cuda", compiler=FakeCompiler(),
                            cache_dir=str(tmp_path))


def current_ctx(emu) -> int:
    err, ctx = emu.cuCtxGetCurrent()
    return int(ctx)


def arrays(backend, seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(N).astype(np.float32)
    b = rng.standard_normal(N).astype(np.float32)
    return a, b, (tilelang.to_device(a, backend=backend), tilelang.to_device(b, backend=backend),
                  tilelang.empty(N, "f32", backend=backend))


def test_each_device_has_its_backend(emu, mod):
    zero, one = tilelang.get_backend("cuda:0"), tilelang.get_backend("cuda:1")
    assert zero is mod.backend and one is not zero and one.device_id == 1
    assert one.limits.name.endswith("(device 1)") and one.driver_backend is zero
    assert tilelang.get_backend("cuda:1") is one is zero.for_device(1)
    with pytest.raises(tilelang.KernelArgumentError) as info:
        tilelang.get_backend("cuda:2")
    assert info.value.diagnostics[0].message == "there is no CUDA device 2 (the driver sees 2)"


@pytest.mark.parametrize("home", ["cuda", "cuda:1"])
def test_a_launch_runs_on_the_device_of_its_arrays(emu, tmp_path, home):
    """A module of either device launches arrays of both: each launch ran on its arrays'
    device (the emulated driver faults on another device's memory), and the caller's current
    context is the same after the launch as before."""
    mod = tilelang.compile(source("vadd"), backend=home, compiler=FakeCompiler(),
                           cache_dir=str(tmp_path))
    before = current_ctx(emu)
    for device, seed in (("cuda:0", 1), ("cuda:1", 2), ("cuda:0", 3)):
        a, b, (da, db, dc) = arrays(device, seed)
        assert emu.owners[dc.ptr][1] == int(device[-1])
        mod.vadd[2](da, db, dc)
        np.testing.assert_array_equal(dc.numpy(), a + b)
        assert current_ctx(emu) == before


def test_the_emulated_driver_faults_on_another_devices_memory(emu, mod):
    """What makes the test above meaningful: device 1's arrays launched in device 0's context
    fault (there is no peer access)."""
    a, b, (da, db, dc) = arrays("cuda:1", 4)
    launch = mod.vadd.compile().launcher          # device 0's launcher
    one = tilelang.get_backend("cuda:1")
    with pytest.raises(tilelang.DeviceError, match="CUDA_ERROR_ILLEGAL_ADDRESS"):
        launch.launch([da.ptr, N, 1, db.ptr, N, 1, dc.ptr, N, 1],
                      mod.vadd.compile().shape(2, None), 0)
    assert one.device_id == 1


def test_arrays_on_two_devices_are_an_error_naming_both(emu, mod):
    _, _, (da, db, dc) = arrays("cuda:0", 5)
    _, _, (ea, eb, ec) = arrays("cuda:1", 6)
    with pytest.raises(tilelang.KernelArgumentError) as info:
        mod.vadd[2](da, eb, dc)
    d = info.value.diagnostics[0]
    assert info.value.code == "E0913"
    assert d.message == "arguments `a` and `b` of kernel `vadd` are on different devices " \
        "(`a` on cuda:0, `b` on cuda:1)"
    assert d.help.startswith("a launch runs on one device")
    with pytest.raises(tilelang.KernelArgumentError, match="`a` on cuda:1, `c` on cuda:0"):
        mod.vadd[2](ea, eb, dc)


def test_kernel_attributes_are_set_on_each_device(emu, mod):
    """More than 48 KB of dynamic shared memory needs the attribute on the device that runs
    the kernel: the runtime sets it there at the kernel's first launch on that device."""
    for device in ("cuda:1", "cuda:0", "cuda:1"):
        out = tilelang.empty(128, "i32", backend=device)
        mod.bigsmem[1](out)
        np.testing.assert_array_equal(out.numpy(), (np.arange(128) + 1) % 128 + 1)
    spec = next(iter(mod.bigsmem._specs.values()))
    assert int(spec.launchers[1].kernel) == int(spec.launcher.kernel)   # one library, loaded once
    assert emu.calls.count("cuLibraryLoadData") == 1
    k = emu._get(spec.launcher.kernel, emulated_cuda._Kernel)
    assert k.max_dynamic_on == {0: 65536, 1: 65536}


def test_the_callers_context_is_restored(emu, mod):
    """With device 1's context current (as after torch.cuda.set_device(1)), a launch on
    device 0 switches for the call only; a thread with no context keeps device 0's after."""
    one = tilelang.get_backend("cuda:1")
    emu.cuCtxSetCurrent(one.ctx)
    a, b, (da, db, dc) = arrays("cuda:0", 7)
    mod.vadd[2](da, db, dc)
    np.testing.assert_array_equal(dc.numpy(), a + b)
    assert current_ctx(emu) == one.ctx_int
    seen = []

    def fresh_thread():
        mod.vadd[2](da, db, dc)
        seen.append(current_ctx(emu))
    t = threading.Thread(target=fresh_thread)
    t.start()
    t.join()
    assert seen == [mod.backend.ctx_int]


def test_device_arrays_are_made_on_their_device(emu, mod):
    d = tilelang.to_device(np.arange(10, dtype=np.float32), backend="cuda:1")
    assert d.backend.device_id == 1 and d.__dlpack_device__() == (2, 1)
    assert emu.owners[d.ptr][1] == 1
    np.testing.assert_array_equal(d.numpy(), np.arange(10, dtype=np.float32))


def test_a_device_of_another_architecture_is_refused(emu, mod, monkeypatch):
    one = tilelang.get_backend("cuda:1")
    monkeypatch.setattr(one, "capability", (8, 0))
    _, _, (da, db, dc) = arrays("cuda:1", 8)
    with pytest.raises(tilelang.KernelArgumentError) as info:
        mod.vadd[2](da, db, dc)
    assert "was compiled for sm_90a" in info.value.diagnostics[0].message
    assert "backend='cuda:1'" in info.value.diagnostics[0].help


# -- on GPUs ------------------------------------------------------------------------------------

def _two_gpus():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available() or torch.cuda.device_count() < 2:
        pytest.skip("needs torch with two or more CUDA devices")
    return torch


@pytest.mark.gpu
def test_torch_tensors_on_the_second_gpu(tmp_path):
    torch = _two_gpus()
    mod = tilelang.compile(os.path.join(ROOT, "examples", "vadd.tile"), backend="cuda",
                           cache_dir=str(tmp_path))
    for dev in ("cuda:1", "cuda:0"):
        a = torch.randn(N, device=dev)
        b = torch.randn(N, device=dev)
        c = torch.empty(N, device=dev)
        with torch.cuda.device(0):
            mod.vadd[tilelang.cdiv(N, 1024)](a, b, c)
        torch.cuda.synchronize(dev)
        assert torch.equal(c, a + b)
    with pytest.raises(tilelang.KernelArgumentError, match="on different devices"):
        mod.vadd[1](torch.zeros(N, device="cuda:0"), torch.zeros(N, device="cuda:1"),
                    torch.zeros(N, device="cuda:0"))
