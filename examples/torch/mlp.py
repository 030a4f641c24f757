#!/usr/bin/env python3
"""A transformer MLP block (RMSNorm, then a SwiGLU feed-forward) built of Tile operators,
trained for a few steps under torch.compile(fullgraph=True) and checked against eager PyTorch.

    out = x + (silu(n @ w1) * (n @ w3)) @ w2,   n = rmsnorm(x) * w_norm

Every kernel — matmul, RMSNorm and SwiGLU forward and backward — is in mlp.tile and becomes a
PyTorch operator through tilelang.torch (docs/torch.md): RMSNorm and SwiGLU pair a forward
and a backward Tile operator with `register_backward`; the matmul's backward is the same
matmul operator on transposed views, given with `register_autograd`. On CPU tensors the
kernels run on the emulator (slow, but exactly the PTX a GPU runs); on CUDA tensors on the GPU.

    python3 examples/torch/mlp.py [--backend emulator|cuda] [--steps N] [--compile aot_eager|inductor|none]
"""

from __future__ import annotations

import argparse
import os
import sys

import torch

import tilelang
import tilelang.torch as tt

HERE = os.path.dirname(os.path.abspath(__file__))
_OPS: dict[str, "MlpOps"] = {}


def _pow2(n: int) -> int:
    return 1 << (max(int(n), 1) - 1).bit_length()


class MlpOps:
    """The block's operators, registered once per back end (operator names are global to
    the process: tile_mlp::matmul on the emulator, tile_mlp_cuda::matmul on CUDA)."""

    def __init__(self, backend: str):
        mod = tilelang.compile(os.path.join(HERE, "mlp.tile"), backend=backend)
        ns = "tile_mlp" if backend != "cuda" else "tile_mlp_cuda"
        bm, bn = 16, 32
        self.matmul = tt.op(
            f"{ns}::matmul", mod.matmul, consts={"BM": bm, "BN": bn},
            outputs={"c": lambda m: (m["a"].shape[0], m["b"].shape[1])},
            grid=lambda m: (tilelang.cdiv(m["a"].shape[0], bm),
                            tilelang.cdiv(m["b"].shape[1], bn)))
        self.matmul.register_autograd(self._matmul_backward,
                                      setup_context=self._matmul_setup)
        row = {"N": lambda m: _pow2(m["x"].shape[1])}
        self.rmsnorm = tt.op(
            f"{ns}::rmsnorm", mod.rmsnorm, consts=row,
            outputs={"y": tt.like("x"), "rstd": lambda m: (m["x"].shape[0],)},
            grid=lambda m: (m["x"].shape[0],))
        self.rmsnorm_bwd = tt.op(
            f"{ns}::rmsnorm_bwd", mod.rmsnorm_bwd, consts=row,
            outputs={"dx": tt.like("x"), "dw": tt.like("w")}, grid=1)
        self.rmsnorm.register_backward(self.rmsnorm_bwd)    # x, w, rstd; dy = grad of y
        gate = {"N": lambda m: _pow2(m["g"].shape[1])}
        self.swiglu = tt.op(f"{ns}::swiglu", mod.swiglu, consts=gate,
                            outputs={"h": tt.like("g")}, grid=lambda m: (m["g"].shape[0],))
        self.swiglu_bwd = tt.op(f"{ns}::swiglu_bwd", mod.swiglu_bwd, consts=gate,
                                outputs={"dg": tt.like("g"), "du": tt.like("u")},
                                grid=lambda m: (m["g"].shape[0],))
        self.swiglu.register_backward(self.swiglu_bwd)      # g, u; dh = grad of h

    @staticmethod
    def _matmul_setup(ctx, inputs, output):
        ctx.save_for_backward(*inputs)

    def _matmul_backward(self, ctx, dc):
        a, b = ctx.saved_tensors
        da = self.matmul(dc, b.t()) if ctx.needs_input_grad[0] else None
        db = self.matmul(a.t(), dc) if ctx.needs_input_grad[1] else None
        return da, db

    def all(self) -> list:
        return [self.matmul, self.rmsnorm, self.rmsnorm_bwd, self.swiglu, self.swiglu_bwd]


def ops(backend: str = "emulator") -> MlpOps:
    if backend not in _OPS:
        _OPS[backend] = MlpOps(backend)
    return _OPS[backend]


class MlpBlock(torch.nn.Module):
    """RMSNorm + SwiGLU feed-forward with a residual; `ops` None: eager PyTorch."""

    def __init__(self, dim: int, hidden: int, ops: MlpOps | None = None, eps: float = 1e-5,
                 seed: int = 0):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.norm = torch.nn.Parameter(1.0 + 0.1 * torch.randn(dim, generator=g))
        self.w1 = torch.nn.Parameter(torch.randn(dim, hidden, generator=g) / dim ** 0.5)
        self.w3 = torch.nn.Parameter(torch.randn(dim, hidden, generator=g) / dim ** 0.5)
        self.w2 = torch.nn.Parameter(torch.randn(hidden, dim, generator=g) / hidden ** 0.5)
        self.ops, self.eps = ops, eps

    def forward(self, x):
        shape = x.shape
        x = x.reshape(-1, shape[-1])
        if self.ops is None:
            n = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.norm
            h = torch.nn.functional.silu(n @ self.w1) * (n @ self.w3)
            out = x + h @ self.w2
        else:
            o = self.ops
            n, _ = o.rmsnorm(x, self.norm, self.eps)
            h = o.swiglu(o.matmul(n, self.w1), o.matmul(n, self.w3))
            out = x + o.matmul(h, self.w2)
        return out.reshape(shape)


def train(model, xs, targets, steps: int, lr: float = 0.1, backend: str | None = "aot_eager"):
    """Plain SGD on the mean squared error; returns the loss of each step. The forward and
    the loss are one graph under torch.compile(fullgraph=True) with `backend` (None: eager);
    AOTAutograd traces the backward from the operators' registered backwards."""
    opt = torch.optim.SGD(model.parameters(), lr=lr)

    def loss_of(x, t):
        return torch.nn.functional.mse_loss(model(x), t)
    run = loss_of if backend is None else torch.compile(loss_of, fullgraph=True,
                                                        backend=backend)
    losses = []
    for i in range(steps):
        opt.zero_grad()
        loss = run(xs[i % len(xs)], targets[i % len(targets)])
        loss.backward()
        losses.append(loss.item())
        opt.step()
    return losses


def data(batch: int, seq: int, dim: int, steps: int, device="cpu"):
    g = torch.Generator().manual_seed(1)
    xs = [torch.randn(batch, seq, dim, generator=g).to(device) for _ in range(steps)]
    ts = [torch.randn(batch, seq, dim, generator=g).to(device) for _ in range(steps)]
    return xs, ts


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="emulator", choices=["emulator", "cuda"])
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--compile", default="aot_eager", choices=["aot_eager", "inductor", "none"],
                    help="torch.compile back end for the Tile block (none: eager)")
    args = ap.parse_args(argv)
    device = "cuda" if args.backend == "cuda" else "cpu"
    batch, seq, dim, hidden = 2, 8, 32, 64
    xs, ts = data(batch, seq, dim, args.steps, device)
    tile = MlpBlock(dim, hidden, ops(args.backend)).to(device)
    ref = MlpBlock(dim, hidden).to(device)
    got = train(tile, xs, ts, args.steps, backend=None if args.compile == "none" else args.compile)
    want = train(ref, xs, ts, args.steps, backend=None)
    print("step  loss (Tile ops)  loss (eager PyTorch)")
    for i, (a, b) in enumerate(zip(got, want)):
        print(f"{i:4d}  {a:15.7f}  {b:20.7f}")
    worst = max((p - q).abs().max().item() for p, q in zip(tile.parameters(), ref.parameters()))
    print(f"largest parameter difference after {args.steps} steps: {worst:.2e}")
    ok = all(abs(a - b) <= 1e-5 * abs(b) + 1e-6 for a, b in zip(got, want)) and worst <= 1e-5
    print("matches eager PyTorch" if ok else "DIFFERS from eager PyTorch")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
