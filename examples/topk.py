#!/usr/bin/env python3
"""Run topk.tile (a mixture-of-experts router) on 37 tokens of 60 experts with tied logits and
check the chosen experts exactly and their weights against NumPy."""

import sys

import numpy as np

from example_support import Example


def main(argv=None) -> int:
    ex = Example("topk.tile", __doc__.splitlines()[0], argv)
    tokens, experts, r, k = 37, 60, 16, 8
    # quarters: many equal logits, so the order of ties is checked too
    x_h = (np.round(ex.rng.standard_normal((tokens, experts)) * 4) / 4).astype(np.float32)
    x = ex.put(x_h)
    ids, w = ex.put(np.zeros((tokens, k), np.int32)), ex.put(np.zeros((tokens, k), np.float32))
    ex.module.topk_router[(-(-tokens // r),)](x, ids, w, R=r, E=64, K=k)
    want = np.argsort(-x_h, axis=1, kind="stable")[:, :k]     # largest first, ties by index
    v = np.take_along_axis(x_h, want, axis=1).astype(np.float64)
    e = np.exp(v - v[:, :1])
    assert np.array_equal(ex.get(ids), want), "chosen experts differ from NumPy"
    assert np.allclose(ex.get(w), e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7), \
        "router weights differ from NumPy"
    return ex.done(f"top-{k} of {experts} experts for {tokens} tokens, {r} per block")


if __name__ == "__main__":
    sys.exit(main())
