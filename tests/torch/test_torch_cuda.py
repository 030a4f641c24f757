"""tilelang.torch on CUDA tensors (docs/torch.md): launches on the tensors' device and its
current stream, capture into CUDA graphs (torch.cuda.CUDAGraph, torch.compile's
reduce-overhead mode), and the MLP example's forward and backward against eager PyTorch.
gpu-marked: they need an NVIDIA GPU, its driver and a CUDA build of torch, and skip cleanly
elsewhere (the emulated driver cannot stand in: torch brings its own)."""

from __future__ import annotations

import os
import sys

import pytest

torch = pytest.importorskip("torch")

import tilelang  # noqa: E402
import tilelang.torch as tt  # noqa: E402

pytestmark = pytest.mark.gpu

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SRC = """
kernel vadd(a: Array[f32, 1], b: Array[f32, 1], c: Array[f32, 1], const TILE: i32 = 256) {
    let x = load(a, index = (bid(0),), shape = (TILE,), padding = 0.0);
    let y = load(b, index = (bid(0),), shape = (TILE,), padding = 0.0);
    store(c, index = (bid(0),), tile = x + y);
}
kernel scale_(x: Array[f32, 1], s: f32, const TILE: i32 = 256) {
    let t = load(x, index = (bid(0),), shape = (TILE,), padding = 0.0);
    store(x, index = (bid(0),), tile = t * s);
}
"""


def _grid(name):
    return lambda meta: (tilelang.cdiv(meta[name].shape[0], meta["TILE"]),)


@pytest.fixture(scope="module")
def cuda_ops():
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA device here (a CPU build, or no GPU)")
    mod = tilelang.compile(SRC, backend="cuda")
    vadd = tt.op("tile_cuda::vadd", mod.vadd, outputs={"c": tt.like("a")}, grid=_grid("a"))
    scale_ = tt.op("tile_cuda::scale_", mod.scale_, grid=_grid("x"))
    return vadd, scale_


def test_ops_on_cuda_tensors(cuda_ops):
    vadd, scale_ = cuda_ops
    a = torch.randn(10_000, device="cuda")
    b = torch.randn(10_000, device="cuda")
    c = vadd(a, b)
    assert c.device == a.device and torch.equal(c, a + b)
    scale_(c, 0.5)
    assert torch.equal(c, (a + b) * 0.5)
    torch.library.opcheck(vadd.op, (a, b))
    torch.library.opcheck(scale_.op, (c.clone(), 2.0))


def test_launch_on_the_current_stream(cuda_ops):
    vadd, scale_ = cuda_ops
    a = torch.randn(1 << 20, device="cuda")
    b = torch.randn(1 << 20, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        c = vadd(a, b)
        scale_(c, 2.0)                   # ordered after vadd only if both use stream s
    s.synchronize()
    assert torch.equal(c, (a + b) * 2)


def test_cuda_graph_capture_and_replay(cuda_ops):
    vadd, scale_ = cuda_ops
    a = torch.randn(4096, device="cuda")
    b = torch.randn(4096, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):           # warm-up: compile and load before the capture
        vadd(a, b)
        scale_(a.clone(), 1.0)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):            # a launch that allocates or synchronizes fails here
        c = vadd(a, b)
        scale_(c, 3.0)
    for _ in range(2):
        a.copy_(torch.randn(4096, device="cuda"))
        g.replay()
        torch.cuda.synchronize()
        assert torch.equal(c, (a + b) * 3)


def test_compile_reduce_overhead(cuda_ops):
    vadd, scale_ = cuda_ops

    def f(a, b):
        c = vadd(a, b)
        scale_(c, 0.5)
        return c + 1
    from torch._dynamo.utils import counters
    torch._dynamo.reset()
    counters.clear()
    g = torch.compile(f, fullgraph=True, mode="reduce-overhead")
    for _ in range(3):                   # warm-up runs, then graph replays
        a = torch.randn(2048, device="cuda")
        b = torch.randn(2048, device="cuda")
        torch.testing.assert_close(g(a, b), (a + b) * 0.5 + 1, rtol=0, atol=0)
    # inductor counts each graph it declines to capture (and says why in its log)
    assert counters["inductor"]["cudagraph_skips"] == 0


def test_tensors_on_two_devices_are_an_error(cuda_ops):
    if torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    vadd, _ = cuda_ops
    a = torch.randn(64, device="cuda:0")
    b = torch.randn(64, device="cuda:1")
    with pytest.raises(tt.TileOpError, match="tensors on different devices"):
        vadd(a, b)
    a1 = a.to("cuda:1")
    assert torch.equal(vadd(a1, b), a1 + b) and vadd(a1, b).device == b.device


def test_mlp_forward_backward_on_cuda():
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA device here")
    sys.path.insert(0, os.path.join(ROOT, "examples", "torch"))
    import mlp
    ops = mlp.ops("cuda")
    xs, ts = mlp.data(2, 16, 64, 3, "cuda")
    tile = mlp.MlpBlock(64, 128, ops).cuda()
    ref = mlp.MlpBlock(64, 128).cuda()
    got = mlp.train(tile, xs, ts, 3, backend="inductor")
    want = mlp.train(ref, xs, ts, 3, backend=None)
    # the GPU's f32 matmuls (cuBLAS may use other orders and FMA contraction): 1e-4
    torch.testing.assert_close(torch.tensor(got), torch.tensor(want), rtol=1e-4, atol=1e-5)
    for p, q in zip(tile.parameters(), ref.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-5)
    torch.library.opcheck(ops.matmul.op, (xs[0][0], tile.w1.detach()))
