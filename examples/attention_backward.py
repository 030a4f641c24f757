#!/usr/bin/env python3
"""Run examples/attention_backward.tile and check dQ, dK and dV against NumPy.

    python3 examples/attention_backward.py --backend emulator   # the CPU emulator (small)
    python3 examples/attention_backward.py --backend cuda       # a GPU (larger shapes)

The forward pass's log-sum-exp (base 2, as the kernels take it) is computed here in float64;
delta = rowsum(dO * O) comes from the example's own `attention_bwd_delta` kernel. f16 and
bf16, causal and not, with a sequence length that is no multiple of any tile. Without
--backend, TILELANG_BACKEND decides (default: cuda, or the emulator on a machine without a
GPU).
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))          # run from a checkout without installing
if HERE not in sys.path:
    sys.path.append(HERE)

import tilelang  # noqa: E402
from example_support import compile_example  # noqa: E402

TILES = (16, 64, 64, 32)      # BM1, BN1, BM2, BN2: the example's defaults (dK/dV, dQ)
DELTA_ROWS = 64


def forward(q, k, v, scale, causal):
    """(o, base-2 log-sum-exp of the scaled scores, probabilities) per head, in float64."""
    s = np.einsum("hmd,hnd->hmn", q, k) * scale
    if causal:
        n = s.shape[-1]
        s = np.where(np.arange(n)[None, :] <= np.arange(n)[:, None], s, -np.inf)
    mx = s.max(axis=-1, keepdims=True)
    e = np.exp(s - mx)
    lse = (mx + np.log(e.sum(axis=-1, keepdims=True))) * np.log2(np.e)
    p = e / e.sum(axis=-1, keepdims=True)
    return np.einsum("hmn,hnd->hmd", p, v), lse[..., 0], p


def reference(q, k, v, do, scale, causal):
    """(dq, dk, dv) in float64."""
    q, k, v, do = (x.astype(np.float64) for x in (q, k, v, do))
    o, _, p = forward(q, k, v, scale, causal)
    dv = np.einsum("hmn,hmd->hnd", p, do)
    dp = np.einsum("hmd,hnd->hmn", do, v)
    ds = p * (dp - (do * o).sum(axis=-1, keepdims=True))
    return (np.einsum("hmn,hnd->hmd", ds, k) * scale, np.einsum("hmn,hmd->hnd", ds, q) * scale,
            dv)


def check(module, backend, dtype, heads, seq, d, causal, rng, tiles=TILES) -> float:
    """Launch the three kernels once; the largest error relative to each gradient's scale."""
    BM1, BN1, BM2, BN2 = tiles
    import ml_dtypes
    np_dtype = np.float16 if dtype == "f16" else ml_dtypes.bfloat16
    q, k, v, do = (rng.standard_normal((heads, seq, d)).astype(np_dtype) for _ in range(4))
    scale = np.float32(1.0 / np.sqrt(d))
    o, lse, _ = forward(*(x.astype(np.float64) for x in (q, k, v)), float(scale), causal)
    host = {"o": o.astype(np_dtype), "do": do, "lse": lse.astype(np.float32),
            "delta": np.full((heads, seq), np.nan, np.float32)}
    for name in ("dq", "dk", "dv"):
        host[name] = np.full((heads, seq, d), np.nan, np_dtype)
    dev = {n: x if backend.name == "emulator" else tilelang.to_device(x, backend=backend)
           for n, x in {**host, "q": q, "k": k, "v": v}.items()}
    module.attention_bwd_delta[(-(-seq // DELTA_ROWS), heads)](
        dev["o"], dev["do"], dev["delta"], BM=DELTA_ROWS, D=d)
    module.attention_bwd_dkdv[(-(-seq // BN1), heads)](
        dev["q"], dev["k"], dev["v"], dev["do"], dev["lse"], dev["delta"], dev["dk"],
        dev["dv"], scale, BM1=BM1, BN1=BN1, D=d, CAUSAL=causal)
    module.attention_bwd_dq[(-(-seq // BM2), heads)](
        dev["q"], dev["k"], dev["v"], dev["do"], dev["lse"], dev["delta"], dev["dq"], scale,
        BM2=BM2, BN2=BN2, D=d, CAUSAL=causal)
    backend.synchronize()
    worst = 0.0
    for name, want in zip(("dq", "dk", "dv"), reference(q, k, v, do, float(scale), causal)):
        got = dev[name] if backend.name == "emulator" else np.asarray(dev[name])
        got = got.astype(np.float64)
        assert np.isfinite(got).all(), f"{name} not fully written"
        err = np.abs(got - want).max() / np.abs(want).max()
        # P and dS are rounded to the input dtype before their products, the result once: a
        # few of its ulps (bf16 has 8 bits of precision, f16 11)
        tol = 2e-2 if dtype == "bf16" else 1e-2
        assert err <= tol, f"{name} {dtype} d={d} causal={causal}: relative error {err:.2e}"
        worst = max(worst, err)
    return worst


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", choices=("cuda", "emulator"))
    ap.add_argument("--seq", type=int, help="sequence length (default: 70 on the emulator, "
                    "1000 on a GPU)")
    ap.add_argument("--heads", type=int, default=1)
    ap.add_argument("--d", type=int, choices=(64, 128), default=64)
    ap.add_argument("--dtype", choices=("f16", "bf16"), action="append")
    ap.add_argument("--tiles", help="BM1,BN1,BM2,BN2 (default: %s; Triton's tutorial: "
                    "32,128,128,32)" % ",".join(map(str, TILES)))
    ap.add_argument("--causal", choices=("yes", "no"), action="append")
    args = ap.parse_args(argv)
    tiles = TILES
    if args.tiles:
        try:
            tiles = tuple(int(x) for x in args.tiles.split(","))
        except ValueError:
            ap.error("--tiles takes four integers: BM1,BN1,BM2,BN2")
        if len(tiles) != 4:
            ap.error("--tiles takes four integers: BM1,BN1,BM2,BN2")
    module = compile_example("attention_backward.tile", args.backend)
    backend = module.backend
    seq = args.seq or (70 if backend.name == "emulator" else 1000)
    rng = np.random.default_rng(0)
    print(f"back end: {backend.name}, target {module.target}, {args.heads} heads x {seq}")
    for dtype in args.dtype or ("f16", "bf16"):
        for causal in [c == "yes" for c in args.causal or ("no", "yes")]:
            err = check(module, backend, dtype, args.heads, seq, args.d, causal, rng, tiles)
            print(f"attention backward T={dtype} D={args.d} causal={causal}: ok (relative "
                  f"error {err:.1e})")
    print("attention backward: ok (" + backend.name + ")")
    return 0


if __name__ == "__main__":
    sys.exit(main())
