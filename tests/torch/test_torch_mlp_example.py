"""examples/torch/mlp.py: the MLP block of Tile operators trains like eager PyTorch under
torch.compile(fullgraph=True) on the emulator, and every operator it registers passes
torch.library.opcheck (docs/torch.md)."""

from __future__ import annotations

import os
import sys

import pytest

torch = pytest.importorskip("torch")

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(os.path.dirname(os.path.dirname(HERE)), "examples", "torch")
sys.path.insert(0, EXAMPLE)
import mlp  # noqa: E402

# Losses and parameters agree to this relative tolerance: the Tile kernels sum the same
# products in other orders than PyTorch's CPU kernels (f32, a few ulps per sum).
RTOL, ATOL = 1e-5, 1e-6


@pytest.fixture(scope="module")
def ops():
    return mlp.ops("emulator")


def _train_both(ops, backend, steps=3, batch=2, seq=8, dim=32, hidden=64):
    xs, ts = mlp.data(batch, seq, dim, steps)
    tile = mlp.MlpBlock(dim, hidden, ops)
    ref = mlp.MlpBlock(dim, hidden)
    torch._dynamo.reset()
    got = mlp.train(tile, xs, ts, steps, backend=backend)
    want = mlp.train(ref, xs, ts, steps, backend=None)
    return got, want, tile, ref


def _check(got, want, tile, ref):
    torch.testing.assert_close(torch.tensor(got), torch.tensor(want), rtol=RTOL, atol=ATOL)
    assert want[0] != want[-1]                       # the steps did change the parameters
    for (name, p), q in zip(tile.named_parameters(), ref.parameters()):
        torch.testing.assert_close(p.detach(), q.detach(), rtol=RTOL, atol=ATOL, msg=name)


def test_mlp_trains_like_eager_pytorch_aot_eager(ops):
    _check(*_train_both(ops, "aot_eager"))


@pytest.mark.slow
def test_mlp_trains_like_eager_pytorch_inductor(ops):
    _check(*_train_both(ops, "inductor"))


def test_mlp_graph_has_only_tile_operators(ops):
    # the forward as torch.export records it: the Tile operators and torch's own ops, one graph
    block = mlp.MlpBlock(32, 64, ops)
    x = torch.randn(2, 8, 32)
    ep = torch.export.export(block, (x,))
    names = [str(n.target) for n in ep.graph.nodes if n.op == "call_function"]
    tile_ops = sorted(n for n in names if n.startswith("tile_mlp."))
    assert tile_ops == ["tile_mlp.matmul.default"] * 3 + ["tile_mlp.rmsnorm.default",
                                                          "tile_mlp.swiglu.default"]
    torch.testing.assert_close(ep.module()(x), block(x), rtol=0, atol=0)


def _samples(rows=12, dim=20, hidden=40):
    g = torch.Generator().manual_seed(5)

    def r(*s):
        return torch.randn(*s, generator=g)
    x, w = r(rows, dim), 1 + 0.1 * r(dim)
    rstd = torch.rsqrt(x.pow(2).mean(-1) + 1e-5)
    return {
        "matmul": [(r(rows, dim).requires_grad_(), r(dim, hidden).requires_grad_()),
                   (r(dim, rows).t(), r(hidden, dim).t())],        # strided views
        "rmsnorm": [(x.clone().requires_grad_(), w.clone().requires_grad_(), 1e-5)],
        "rmsnorm_bwd": [(x, w, rstd, r(rows, dim))],
        "swiglu": [(r(rows, hidden).requires_grad_(), r(rows, hidden).requires_grad_())],
        "swiglu_bwd": [(r(rows, hidden), r(rows, hidden), r(rows, hidden))],
    }


def test_opcheck_every_operator_of_the_example(ops):
    samples = _samples()
    for op in ops.all():
        short = op.name.split("::")[1]
        for args in samples[short]:
            torch.library.opcheck(op.op, args)


def test_operators_against_pytorch(ops):
    s = _samples()
    a, b = s["matmul"][1]
    torch.testing.assert_close(ops.matmul(a, b), a @ b, rtol=1e-5, atol=1e-5)
    x, w, eps = s["rmsnorm"][0]
    y, rstd = ops.rmsnorm(x.detach(), w.detach(), eps)
    want = torch.rsqrt(x.detach().pow(2).mean(-1) + eps)
    torch.testing.assert_close(rstd, want, rtol=1e-6, atol=0)
    torch.testing.assert_close(y, x.detach() * want[:, None] * w.detach(), rtol=1e-6, atol=1e-6)
    # the backward kernels against autograd of the PyTorch formula
    x2, w2 = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
    dy = torch.randn_like(x2)
    (x2 * torch.rsqrt(x2.pow(2).mean(-1, keepdim=True) + eps) * w2).backward(dy)
    dx, dw = ops.rmsnorm_bwd(x.detach(), w.detach(), rstd, dy)
    torch.testing.assert_close(dx, x2.grad, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(dw, w2.grad, rtol=1e-5, atol=1e-5)
    g, u = (t.detach().clone().requires_grad_() for t in s["swiglu"][0])
    dh = torch.randn_like(g)
    (torch.nn.functional.silu(g) * u).backward(dh)
    dg, du = ops.swiglu_bwd(g.detach(), u.detach(), dh)
    torch.testing.assert_close(dg, g.grad, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(du, u.grad, rtol=1e-5, atol=1e-5)


def test_example_script_runs():
    assert mlp.main(["--steps", "2"]) == 0
