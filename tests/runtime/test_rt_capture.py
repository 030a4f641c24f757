"""CUDA graph capture of Tile launches, without a GPU: the CUDA back end on the emulated driver
(tests/emulated_cuda.py), which records launches issued to a capturing stream into a graph,
replays them on cuGraphLaunch, and fails every call the CUDA programming guide forbids during
capture with the driver's error code (docs/launch-path.md). So a launch that allocated, copied,
synchronized or loaded code inside a capture would fail here as on a GPU.

The last tests capture with `torch.cuda.CUDAGraph` on a real GPU (gpu-marked; skipped without
torch's CUDA)."""

from __future__ import annotations

import os
import sys
import threading

import numpy as np
import pytest

import tilelang
from rt_support import (ROOT, FakeCompiler, fresh_runtime, source,  # noqa: F401 (autouse)
                        use_emulated_driver)
from tilelang.runtime import cuda as rt_cuda

sys.path.insert(0, os.path.join(ROOT, "tests"))
import emulated_cuda  # noqa: E402

pytest.importorskip("cuda.bindings.driver")
N = 3000
GLOBAL, THREAD_LOCAL, RELAXED = 0, 1, 2
# what a launch may call during capture (docs/launch-path.md)
CAPTURE_SAFE = {"cuCtxGetCurrent", "cuCtxSetCurrent", "cuLaunchKernel", "cuLaunchKernelEx",
                "cuTensorMapEncodeTiled"}


@pytest.fixture
def emu(monkeypatch):
    return use_emulated_driver(monkeypatch)


@pytest.fixture
def mod(emu, tmp_path):
    return tilelang.compile(source("vadd", "copy2d"), backend="cuda", compiler=FakeCompiler(),
                            cache_dir=str(tmp_path))


def ok(result):
    err, *rest = result
    assert int(err) == 0, err
    return rest[0] if len(rest) == 1 else rest


def code(result) -> int:
    return int(result[0])


def stream(emu, flags=0):
    return ok(emu.cuStreamCreate(flags))


def data(mod, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(N).astype(np.float32)
    b = rng.standard_normal(N).astype(np.float32)
    return a, b, mod.to_device(a), mod.to_device(b), mod.empty(N, "f32")


def calls_during(emu, fn):
    start = len(emu.calls)
    fn()
    return emu.calls[start:]


def test_captured_launch_replays_with_the_arrays_of_replay_time(emu, mod):
    a, b, da, db, dc = data(mod)
    s = stream(emu)
    grid = tilelang.cdiv(N, 1024)
    mod.vadd[grid](da, db, dc, stream=s)                 # warm-up: loads the kernel
    np.testing.assert_array_equal(dc.numpy(), a + b)
    dc.copy_from(np.zeros(N, np.float32))
    ok(emu.cuStreamBeginCapture(s, emu.CUstreamCaptureMode(GLOBAL)))
    made = calls_during(emu, lambda: mod.vadd[grid](da, db, dc, stream=s))
    assert set(made) <= CAPTURE_SAFE and "cuLaunchKernel" in made, made
    assert int(ok(emu.cuStreamIsCapturing(s))) == 1
    graph = ok(emu.cuStreamEndCapture(s))
    assert emu.captured == 1
    np.testing.assert_array_equal(dc.numpy(), np.zeros(N, np.float32))   # recorded, not run
    exe = ok(emu.cuGraphInstantiate(graph, 0))
    a2 = np.arange(N, dtype=np.float32)
    da.copy_from(a2)                                     # replays read the memory of now
    ok(emu.cuGraphLaunch(exe, s))
    np.testing.assert_array_equal(dc.numpy(), a2 + b)
    da.copy_from(a)
    ok(emu.cuGraphLaunch(exe, s))
    np.testing.assert_array_equal(dc.numpy(), a + b)


def test_scalars_and_grid_are_those_of_capture_time(emu, mod):
    """The driver copies the parameter buffer at the launch call; the runtime reuses its
    buffer for the next launch, which must not change what was captured."""
    a, b, da, db, dc = data(mod, 1)
    s = stream(emu)
    src = mod.to_device(np.arange(12, dtype=np.float32).reshape(3, 4))
    dst = mod.empty((3, 4), "f32")
    mod.copy2d[3](src, dst, stream=s)
    mod.vadd[3](da, db, dc, stream=s)
    dst.copy_from(np.zeros((3, 4), np.float32))
    ok(emu.cuStreamBeginCapture(s, emu.CUstreamCaptureMode(GLOBAL)))
    mod.copy2d[1](src, dst, stream=s)                    # first row only
    mod.vadd[3](da, db, dc, stream=s)                    # reuses nothing of copy2d's buffer
    exe = ok(emu.cuGraphInstantiate(ok(emu.cuStreamEndCapture(s)), 0))
    ok(emu.cuGraphLaunch(exe, s))
    want = np.zeros((3, 4), np.float32)
    want[0] = np.arange(4)
    np.testing.assert_array_equal(dst.numpy(), want)


def test_first_launch_of_a_specialization_during_capture_is_a_clear_error(emu, mod):
    """Loading a kernel is not allowed during capture: a launch whose specialization was never
    launched (here: a strided view, other facts) says so, naming the call and the fix."""
    a, b, da, db, dc = data(mod, 2)
    s = stream(emu)
    mod.vadd[3](da, db, dc, stream=s)
    ok(emu.cuStreamBeginCapture(s, emu.CUstreamCaptureMode(GLOBAL)))
    with pytest.raises(tilelang.DeviceError) as info:
        mod.vadd[2](da[::2], db[::2], dc[::2], stream=s)
    d = info.value.diagnostics[0]
    assert d.message.startswith("cuLibraryLoadData for kernel `vadd` failed on Emulated H200")
    assert "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED" in d.message
    assert "not allowed while a stream captures a CUDA graph" in d.message
    assert d.help == rt_cuda.CAPTURE_HELP
    assert code(emu.cuStreamEndCapture(s)) == 901       # the driver invalidated the capture
    mod.vadd[2](da[::2], db[::2], dc[::2], stream=s)     # after the capture: loads and runs
    np.testing.assert_array_equal(dc.numpy()[::2], (a + b)[::2])


def test_allocating_or_copying_during_capture_is_a_clear_error(emu, mod):
    s = stream(emu)
    ok(emu.cuStreamBeginCapture(s, emu.CUstreamCaptureMode(GLOBAL)))
    for make in (lambda: mod.empty(8, "f32"), lambda: mod.to_device(np.ones(8, np.float32))):
        with pytest.raises(tilelang.DeviceError) as info:
            make()
        assert info.value.diagnostics[0].message.startswith("cuMemAlloc failed on ")
        assert info.value.diagnostics[0].help == rt_cuda.CAPTURE_HELP
    assert code(emu.cuStreamEndCapture(s)) == 901


def test_arrays_dropped_during_capture_are_freed_after_it(emu, mod):
    """A DeviceArray that goes away during a capture does not call cuMemFree (refused there):
    its memory is freed at the device's next allocation, after the capture."""
    a, b, da, db, dc = data(mod, 8)
    s = stream(emu)
    mod.vadd[3](da, db, dc, stream=s)
    tmp = mod.empty(N, "f32")
    ptr = tmp.ptr
    ok(emu.cuStreamBeginCapture(s, emu.CUstreamCaptureMode(GLOBAL)))
    made = calls_during(emu, lambda: mod.vadd[3](da, db, tmp, stream=s))
    del tmp
    assert "cuMemFree" not in emu.calls[-len(made) - 1:] and ptr in emu.owners
    ok(emu.cuGraphInstantiate(ok(emu.cuStreamEndCapture(s)), 0))    # still valid
    mod.empty(4, "f32")
    assert ptr not in emu.owners


def test_a_copy_or_synchronize_during_capture_is_refused(emu, mod):
    a, b, da, db, dc = data(mod, 3)
    s = stream(emu)
    ok(emu.cuStreamBeginCapture(s, emu.CUstreamCaptureMode(GLOBAL)))
    with pytest.raises(tilelang.DeviceError, match="cuMemcpyDtoH failed"):
        dc.numpy()
    with pytest.raises(tilelang.DeviceError, match="cuCtxSynchronize failed"):
        mod.backend.synchronize()
    assert code(emu.cuStreamEndCapture(s)) == 901


def test_host_arrays_are_refused_before_any_driver_call(emu, mod):
    """A NumPy array would need a copy: the CUDA back end refuses it (E0913) whether or not
    a capture is active, without calling the driver, so the capture stays valid."""
    a, b, da, db, dc = data(mod, 4)
    s = stream(emu)
    mod.vadd[3](da, db, dc, stream=s)
    ok(emu.cuStreamBeginCapture(s, emu.CUstreamCaptureMode(GLOBAL)))
    made = []
    with pytest.raises(tilelang.KernelArgumentError) as info:
        made = calls_during(emu, lambda: mod.vadd[3](da, b, dc, stream=s))
    assert info.value.code == "E0913" and made == []
    mod.vadd[3](da, db, dc, stream=s)
    exe = ok(emu.cuGraphInstantiate(ok(emu.cuStreamEndCapture(s)), 0))
    dc.copy_from(np.zeros(N, np.float32))
    ok(emu.cuGraphLaunch(exe, s))
    np.testing.assert_array_equal(dc.numpy(), a + b)


def test_a_launch_on_the_default_stream_during_capture_is_a_clear_error(emu, mod):
    """Without `stream=`, DeviceArray launches go to the legacy default stream, which would
    wait for the capturing (blocking) stream: the driver refuses it and the message says to
    pass the capturing stream — the launch is never silently left out of the graph."""
    a, b, da, db, dc = data(mod, 5)
    s = stream(emu)
    mod.vadd[3](da, db, dc)
    ok(emu.cuStreamBeginCapture(s, emu.CUstreamCaptureMode(GLOBAL)))
    with pytest.raises(tilelang.DeviceError) as info:
        mod.vadd[3](da, db, dc)
    d = info.value.diagnostics[0]
    assert "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT" in d.message and "pass the capturing stream" \
        in d.help
    assert code(emu.cuStreamEndCapture(s)) == 901


def test_capture_from_another_thread(emu, mod):
    """Launches from a thread with no current context use the device's primary context
    (cuCtxSetCurrent is legal during capture); THREAD_LOCAL capture lets other threads
    allocate, GLOBAL does not."""
    a, b, da, db, dc = data(mod, 6)
    s = stream(emu)
    mod.vadd[3](da, db, dc, stream=s)
    dc.copy_from(np.zeros(N, np.float32))
    ok(emu.cuStreamBeginCapture(s, emu.CUstreamCaptureMode(THREAD_LOCAL)))
    made, errors = [], []

    def other():
        try:
            made.extend(calls_during(emu, lambda: mod.vadd[3](da, db, dc, stream=s)))
            mod.empty(4, "f32")                       # allowed: the capture is this thread's
        except Exception as e:                        # reported to the test's thread
            errors.append(e)
    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert not errors, errors
    assert set(made) <= CAPTURE_SAFE and "cuCtxSetCurrent" in made
    exe = ok(emu.cuGraphInstantiate(ok(emu.cuStreamEndCapture(s)), 0))
    ok(emu.cuGraphLaunch(exe, s))
    np.testing.assert_array_equal(dc.numpy(), a + b)


def test_tensor_map_launch_is_capture_safe(emu, tmp_path):
    """A TMA kernel (examples/matmul.tile on sm_90a): during capture its launch encodes the
    maps on the host (legal) and launches; the replay computes the product."""
    mod = tilelang.compile(os.path.join(ROOT, "examples", "matmul.tile"), backend="cuda",
                           cache_dir=str(tmp_path))
    k = mod.matmul.specialize(BM=64, BN=64, BK=32)
    rng = np.random.default_rng(7)
    a = rng.standard_normal((128, 64)).astype(np.float16)
    b = rng.standard_normal((64, 64)).astype(np.float16)
    da, db, dc = mod.to_device(a), mod.to_device(b), mod.empty((128, 64), "f32")
    s = stream(emu)
    k[2, 1](da, db, dc, stream=s)
    np.testing.assert_allclose(dc.numpy(), a.astype(np.float32) @ b.astype(np.float32),
                               rtol=1e-3, atol=1e-3)
    spec = next(iter(k._specs.values()))
    assert spec.artifact.tensor_maps                     # the point of this test
    db2 = mod.to_device(np.eye(64, dtype=np.float16))
    dc.copy_from(np.zeros((128, 64), np.float32))
    ok(emu.cuStreamBeginCapture(s, emu.CUstreamCaptureMode(GLOBAL)))
    made = calls_during(emu, lambda: k[2, 1](da, db2, dc, stream=s))    # a new map: encoded
    assert set(made) <= CAPTURE_SAFE and "cuTensorMapEncodeTiled" in made, made
    exe = ok(emu.cuGraphInstantiate(ok(emu.cuStreamEndCapture(s)), 0))
    ok(emu.cuGraphLaunch(exe, s))
    np.testing.assert_array_equal(dc.numpy(), a.astype(np.float32))


# -- the emulated driver's own capture rules ---------------------------------------------------

def test_emulated_driver_capture_rules(emu):
    s, nb = stream(emu), stream(emu, 1)                 # blocking, non-blocking
    ctx = ok(emu.cuDevicePrimaryCtxRetain(ok(emu.cuDeviceGet(0))))
    ok(emu.cuCtxSetCurrent(ctx))
    assert code(emu.cuStreamBeginCapture(0, emu.CUstreamCaptureMode(GLOBAL))) == 900
    ok(emu.cuStreamBeginCapture(nb, emu.CUstreamCaptureMode(RELAXED)))
    ptr = ok(emu.cuMemAlloc(64))                        # relaxed: allowed
    ok(emu.cuStreamSynchronize(0))                      # a non-blocking capture: no wait
    ev = ok(emu.cuEventCreate(0))
    ok(emu.cuEventRecord(ev, nb))
    assert code(emu.cuEventSynchronize(ev)) == 907
    assert code(emu.cuStreamEndCapture(nb)) == 0
    ok(emu.cuStreamBeginCapture(s, emu.CUstreamCaptureMode(GLOBAL)))
    assert code(emu.cuStreamBeginCapture(s, emu.CUstreamCaptureMode(GLOBAL))) == 401
    assert code(emu.cuStreamIsCapturing(0)) == 906      # asking the legacy stream
    errors = []
    t = threading.Thread(target=lambda: errors.append(code(emu.cuStreamEndCapture(s))))
    t.start()
    t.join()
    assert errors == [908]                              # ended by another thread
    assert int(ok(emu.cuStreamIsCapturing(s))) == 1     # still capturing
    for name, call in (("cuMemFree", lambda: emu.cuMemFree(ptr)),
                       ("cuCtxSynchronize", emu.cuCtxSynchronize),
                       ("cuStreamSynchronize", lambda: emu.cuStreamSynchronize(s))):
        assert code(call()) == 900, name
    assert int(ok(emu.cuStreamIsCapturing(s))) == 2     # invalidated
    assert code(emu.cuStreamEndCapture(s)) == 901
    assert int(ok(emu.cuStreamIsCapturing(s))) == 0
    ok(emu.cuMemFree(ptr))                              # allowed again


# -- on a GPU, with torch's graphs ---------------------------------------------------------------

def _torch_cuda():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA device here")
    return torch


@pytest.mark.gpu
def test_torch_cuda_graph_captures_a_tile_launch(tmp_path):
    torch = _torch_cuda()
    mod = tilelang.compile(os.path.join(ROOT, "examples", "vadd.tile"), backend="cuda",
                           cache_dir=str(tmp_path))
    a = torch.randn(N, device="cuda")
    b = torch.randn(N, device="cuda")
    c = torch.empty(N, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        mod.vadd[tilelang.cdiv(N, 1024)](a, b, c)        # warm-up on the capture stream
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        mod.vadd[tilelang.cdiv(N, 1024)](a, b, c)        # torch's current stream: captured
    a.copy_(torch.arange(N, device="cuda", dtype=torch.float32))
    g.replay()
    torch.cuda.synchronize()
    assert torch.equal(c, a + b)


@pytest.mark.gpu
def test_torch_cuda_graph_refuses_a_first_launch(tmp_path):
    torch = _torch_cuda()
    mod = tilelang.compile(os.path.join(ROOT, "examples", "vadd.tile"), backend="cuda",
                           cache_dir=str(tmp_path))
    a = torch.randn(N, device="cuda")
    c = torch.empty(N, device="cuda")
    g = torch.cuda.CUDAGraph()
    with pytest.raises(Exception) as info:            # torch's capture_end may raise after ours
        with torch.cuda.graph(g):
            mod.vadd[tilelang.cdiv(N, 1024)](a, a, c)   # never launched: its load is refused
    err = info.value
    while err is not None and not isinstance(err, tilelang.DeviceError):
        err = err.__context__
    assert err is not None, info.value
    assert err.diagnostics[0].help == rt_cuda.CAPTURE_HELP
