#!/usr/bin/env python3
"""The MLP block of examples/torch/mlp.py: forward + backward time of its Tile operators under
torch.compile against the same block in eager PyTorch (and compiled PyTorch), on a GPU.

    python3 benchmarks/torch_mlp.py [--sizes TOKENSxDIM ...] [--warmup MS] [--rep MS]

One row per size: tokens, dim, hidden (4 x dim), then the mean milliseconds of one
forward+backward (loss = sum of the output) for
  tile-compile   the Tile operators, torch.compile(fullgraph=True) with inductor
  tile-eager     the Tile operators, eager
  torch-eager    the PyTorch formula, eager (cuBLAS matmuls)
  torch-compile  the PyTorch formula, torch.compile with inductor
and the ratio torch-eager / tile-compile (above 1: the Tile block is faster). Timing is
tilelang.testing.do_bench (CUDA events, the mean of `rep` ms of runs after `warmup` ms).
Without a GPU (or with a CPU build of torch) it says so and exits 0: the emulator would time
the CPU, and examples/torch/mlp.py already checks the numbers there.
"""

from __future__ import annotations

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "examples", "torch"))


def _size(text: str) -> tuple[int, int]:
    try:
        tokens, dim = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not TOKENSxDIM (e.g. 2048x512)") from None
    return tokens, dim


def fwd_bwd(block, x):
    def run():
        for p in block.parameters():
            p.grad = None
        block(x).sum().backward()
    return run


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", nargs="+", type=_size,
                    default=[(512, 256), (2048, 512), (8192, 1024)])
    ap.add_argument("--warmup", type=float, default=25)
    ap.add_argument("--rep", type=float, default=100)
    args = ap.parse_args(argv)
    try:
        import torch
    except ImportError:
        print("torch_mlp: torch is not installed (pip install 'tilec[torch]'); nothing timed")
        return 0
    if not torch.cuda.is_available():
        print("torch_mlp: no GPU (or a CPU build of torch); nothing timed")
        return 0
    import mlp
    from tilelang.testing import do_bench
    ops = mlp.ops("cuda")
    head = ("tokens", "dim", "hidden", "tile-compile", "tile-eager", "torch-eager",
            "torch-compile", "eager/tile")
    rows = []
    for tokens, dim in args.sizes:
        hidden = 4 * dim
        x = torch.randn(tokens, dim, device="cuda")
        tile = mlp.MlpBlock(dim, hidden, ops).cuda()
        ref = mlp.MlpBlock(dim, hidden).cuda()
        torch._dynamo.reset()
        times = {}
        for name, block in (("tile-eager", tile), ("torch-eager", ref),
                            ("tile-compile", torch.compile(tile, fullgraph=True)),
                            ("torch-compile", torch.compile(ref, fullgraph=True))):
            times[name] = do_bench(fwd_bwd(block, x), warmup=args.warmup, rep=args.rep,
                                   backend="cuda")
        rows.append((tokens, dim, hidden, *(f"{times[k]:.3f}" for k in head[3:7]),
                     f"{times['torch-eager'] / times['tile-compile']:.2f}"))
    print(f"MLP block forward+backward, ms ({torch.cuda.get_device_name()}, f32)")
    widths = [max(len(str(r[i])) for r in (head, *rows)) for i in range(len(head))]
    for r in (head, tuple("-" * w for w in widths), *rows):
        print("  ".join(str(v).rjust(w) for v, w in zip(r, widths)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
