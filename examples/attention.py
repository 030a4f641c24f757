#!/usr/bin/env python3
"""Run examples/attention.tile and check it against NumPy.

    python3 examples/attention.py --backend emulator    # the CPU emulator (small shapes)
    python3 examples/attention.py --backend cuda        # a GPU (larger shapes)

Every combination of dtype (f16, bf16), head dimension (64, 128) and causal or not is checked,
with a sequence length that is not a multiple of the tiles. Without --backend,
TILELANG_BACKEND decides (default: cuda, or the emulator on a machine without a GPU).
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))          # run from a checkout without installing
if HERE not in sys.path:                           # example_support, also when this file is
    sys.path.append(HERE)                          # loaded by path (tests/codegen)

import tilelang  # noqa: E402
from example_support import compile_example  # noqa: E402

BM = None                   # query rows a block; None: the kernel's default for its target


def default(kernel, name: str):
    """A const parameter's default on the module's target (`by_target` in the .tile: 128 x 128
    over 8 warps on sm_90a, over 4 warps on sm_100a, 64 x 64 over 4 warps elsewhere)."""
    return next(p.default for p in kernel.info.params if p.name == name)


def key_tile(d: int, target: str, default_bn: int) -> int:
    """BN for head dimension `d` on `target`: at D = 128 the mma.sync targets (each warp holds
    32 query rows of q and of the output in registers) keep every register only with key
    tiles of 32; otherwise (sm_90a's warp groups, sm_100a's output in tensor memory) the
    kernel's default."""
    t = str(target)
    return 32 if d == 128 and not t.startswith(("sm_90", "sm_100")) else default_bn


def reference(q, k, v, scale, causal):
    """softmax(q @ k^T * scale) @ v per head, in float64."""
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    s = np.einsum("hmd,hnd->hmn", q, k) * scale
    if causal:
        n = s.shape[-1]
        s = np.where(np.arange(n)[None, :] <= np.arange(n)[:, None], s, -np.inf)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return np.einsum("hmn,hnd->hmd", p / p.sum(axis=-1, keepdims=True), v)


def check(module, backend, dtype, heads, seq, d, causal, rng):
    """Launch one configuration; returns the largest error relative to the output's scale."""
    import ml_dtypes
    np_dtype = np.float16 if dtype == "f16" else ml_dtypes.bfloat16
    q, k, v = (rng.standard_normal((heads, seq, d)).astype(np_dtype) for _ in range(3))
    o = np.full((heads, seq, d), np.nan, np_dtype)
    scale = 1.0 / np.sqrt(d)
    args = [q, k, v, o]
    if backend.name != "emulator":
        args = [tilelang.to_device(x, backend=backend) for x in args]
    # one generic kernel: the arrays' dtype picks (and compiles) its specialization
    bm = BM or default(module.attention, "BM")
    bn = key_tile(d, module.target, default(module.attention, "BN"))
    module.attention[(-(-seq // bm), heads)](*args, np.float32(scale), BM=bm, BN=bn, D=d,
                                             CAUSAL=causal)
    backend.synchronize()
    out = args[3] if backend.name == "emulator" else np.asarray(args[3])
    want = reference(q, k, v, scale, causal)
    err = np.abs(out.astype(np.float64) - want).max() / np.abs(want).max()
    # p is rounded to the input dtype before p @ v, and the output once: a few ulps of it
    tol = 2e-2 if dtype == "bf16" else 4e-3
    assert np.isfinite(out.astype(np.float64)).all(), "output not fully written"
    assert err <= tol, f"{dtype} d={d} causal={causal}: relative error {err:.2e} > {tol}"
    return err


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", choices=("cuda", "emulator"))
    ap.add_argument("--seq", type=int, help="sequence length (default: 80 on the emulator, "
                    "1000 on a GPU)")
    ap.add_argument("--heads", type=int, default=2)
    ap.add_argument("--dtype", choices=("f16", "bf16"), action="append")
    ap.add_argument("--d", type=int, choices=(64, 128), action="append")
    ap.add_argument("--causal", choices=("yes", "no"), action="append")
    args = ap.parse_args(argv)
    module = compile_example("attention.tile", args.backend)
    backend = module.backend
    seq = args.seq or (80 if backend.name == "emulator" else 1000)
    rng = np.random.default_rng(0)
    print(f"back end: {backend.name}, target {module.target}, {args.heads} heads x {seq}")
    for dtype, d, causal in itertools.product(args.dtype or ("f16", "bf16"),
                                              args.d or (64, 128),
                                              [c == "yes" for c in args.causal or ("no", "yes")]):
        err = check(module, backend, dtype, args.heads, seq, d, causal, rng)
        print(f"attention T={dtype} D={d} causal={causal}: ok (relative error {err:.1e})")
    print("all results match NumPy")
    return 0


if __name__ == "__main__":
    sys.exit(main())
