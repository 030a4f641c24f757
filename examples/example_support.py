"""Shared by the example scripts: the back end from --backend (or TILELANG_BACKEND), host data
put where the back end wants it, and results read back.

    python3 examples/dropout.py --backend emulator     # the CPU emulator, NumPy arrays
    python3 examples/dropout.py --backend cuda         # a GPU (torch tensors if torch is
                                                       # installed, else DeviceArrays)

With neither, a machine with an NVIDIA GPU runs on it and one without runs on the emulator,
saying so in one line. A back end asked for that cannot run here is one message, exit 1.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))          # run from a checkout without installing

import tilelang  # noqa: E402


def compile_example(tile_file: str, backend: str | None):
    """`tilelang.compile` of examples/`tile_file` on `backend`. With no back end chosen (no
    --backend, no TILELANG_BACKEND) and no GPU here, the CPU emulator; a chosen one that cannot
    run prints its diagnostic and exits 1 (no traceback: it is not a bug of the example)."""
    path = os.path.join(HERE, tile_file)
    try:
        return tilelang.compile(path, backend=backend)
    except tilelang.BackendUnavailable as e:
        if backend is None and not os.environ.get("TILELANG_BACKEND"):
            print("note: no NVIDIA GPU with a working driver here: running on the CPU emulator "
                  "(--backend emulator; --backend cuda insists on a GPU)", file=sys.stderr)
            return tilelang.compile(path, backend="emulator")
        print(e, file=sys.stderr)
        raise SystemExit(1) from None


class Example:
    def __init__(self, tile_file: str, description: str, argv=None):
        ap = argparse.ArgumentParser(description=description)
        ap.add_argument("--backend", choices=("cuda", "emulator"))
        ap.add_argument("--seed", type=int, default=0)
        self.args = ap.parse_args(argv)
        self.rng = np.random.default_rng(self.args.seed)
        self.module = compile_example(tile_file, self.args.backend)
        self.backend = self.module.backend
        self.torch = None
        if self.backend.name == "cuda":
            try:
                import torch
                # without PyTorch, `import torch` finds the folder examples/torch instead; a
                # CPU-only build cannot hold the arrays on the GPU
                self.torch = torch if hasattr(torch, "from_numpy") \
                    and torch.cuda.is_available() else None
            except ImportError:
                pass

    def put(self, host: np.ndarray):
        """A device copy of `host` (the emulator takes NumPy arrays as they are)."""
        host = np.ascontiguousarray(host)
        if self.backend.name == "emulator":
            return host.copy()
        if self.torch is not None:
            try:
                return self.torch.from_numpy(host).cuda()
            except TypeError:    # a dtype torch has no NumPy conversion for (ml_dtypes' fp8, fp4)
                pass
        return tilelang.to_device(host, backend=self.backend)

    def get(self, dev) -> np.ndarray:
        self.backend.synchronize()
        if isinstance(dev, np.ndarray):
            return dev
        if self.torch is not None and isinstance(dev, self.torch.Tensor):
            return dev.cpu().numpy()
        return dev.numpy()

    def done(self, what: str) -> int:
        print(f"{what}: ok ({self.backend.name})")
        return 0
