#!/usr/bin/env python3
"""Launch the example kernels from Python and check them against NumPy (docs/python-api.md).

    python3 examples/launch_kernels.py --backend emulator    # the CPU emulator, NumPy arrays
    python3 examples/launch_kernels.py --backend cuda        # a GPU: torch tensors if torch is
                                                             # installed, else DeviceArrays
Without --backend, TILELANG_BACKEND decides (default: cuda, or the emulator on a machine without
a GPU).
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))          # run from a checkout without installing
if HERE not in sys.path:                           # example_support, also when this file is
    sys.path.append(HERE)                          # loaded by path (tests/codegen)

import tilelang  # noqa: E402
from example_support import compile_example  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", choices=("cuda", "emulator"))
    args = ap.parse_args()
    rng = np.random.default_rng(0)

    vadd = compile_example("vadd.tile", args.backend)
    softmax = tilelang.compile(os.path.join(HERE, "softmax.tile"), backend=vadd.backend.name)
    backend = vadd.backend
    print(f"back end: {backend.name}, target {vadd.target}")

    # Put host data where the back end wants it: torch tensors on a GPU when torch is there,
    # tilelang DeviceArrays otherwise; NumPy arrays on the emulator (copied in and out).
    torch = None
    if backend.name == "cuda":
        try:
            import torch
            if not hasattr(torch, "from_numpy"):   # the folder examples/torch, not PyTorch
                torch = None
        except ImportError:
            torch = None

    def put(host: np.ndarray):
        if backend.name == "emulator":
            return host
        if torch is not None:
            return torch.from_numpy(host).cuda()
        return tilelang.to_device(host, backend=backend)

    def get(dev) -> np.ndarray:
        if isinstance(dev, np.ndarray):
            return dev
        if torch is not None and isinstance(dev, torch.Tensor):
            return dev.cpu().numpy()
        return dev.numpy()

    # 1. vadd, Triton's launch shape: kernel[grid](*args, CONST=value)
    n = 100_000
    a_h = rng.standard_normal(n).astype(np.float32)
    b_h = rng.standard_normal(n).astype(np.float32)
    a, b, c = put(a_h), put(b_h), put(np.zeros(n, np.float32))
    vadd.vadd[lambda meta: ((n + meta["TILE"] - 1) // meta["TILE"],)](a, b, c, TILE=1024)
    backend.synchronize()
    assert np.array_equal(get(c), a_h + b_h), "vadd differs from NumPy"
    print(f"vadd: {n} elements ok")

    # 2. softmax over rows, cuTile's launch shape: launch(stream, grid, kernel, args)
    rows, cols = 64, 700
    x_h = rng.standard_normal((rows, cols)).astype(np.float32)
    x, y = put(x_h), put(np.zeros((rows, cols), np.float32))
    kernel = softmax.softmax_rows.specialize(N=1024)      # N must cover a row
    tilelang.launch(None, (rows,), kernel, (x, y))
    backend.synchronize()
    e = np.exp(x_h - x_h.max(axis=1, keepdims=True))
    assert np.allclose(get(y), e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7), \
        "softmax differs from NumPy"
    print(f"softmax_rows: {rows}x{cols} ok")
    print("all results match NumPy")
    return 0


if __name__ == "__main__":
    sys.exit(main())
