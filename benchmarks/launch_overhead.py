#!/usr/bin/env python3
"""Launch overhead: microseconds per launch of kernels with 0 and 8 arguments.

    python3 benchmarks/launch_overhead.py [--iters N]

Two tables:
1. Host path (any machine): the runtime's per-call work (argument reading and checks,
   specialization lookup, packing) with the driver call replaced by packing into the parameter
   buffer only, on the emulator back end with DeviceArrays. This is the part of a launch the
   runtime owns.
2. GPU (only where a GPU, the driver and cuda-python work): tilelang's `kernel[grid](...)` on
   the CUDA back end against Triton's compiled-kernel launch `fn[grid](...)` (after warm-up),
   in the same process on the same tensors. Host time per launch (the loop issuing launches,
   without waiting) and the time per launch including the final synchronize.
Without a GPU the second table says "no GPU" and the script exits 0.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import struct
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import numpy as np  # noqa: E402

import tilelang  # noqa: E402

SOURCE = """
kernel k0() {
}

kernel k8(a: Array[f32, 1], b: Array[f32, 1], c: Array[f32, 1], d: Array[f32, 1],
          x: f32, y: f32, n: i32, m: i32) {
}
"""


class PackOnly:
    """Stands in for the driver call: packs the values into the parameter buffer, as the CUDA
    back end does before cuLaunchKernel."""

    def __init__(self, fmt: str, size: int):
        self.fmt, self.buf = fmt, ctypes.create_string_buffer(max(size, 8))

    def launch(self, values, shape, stream=0):
        struct.pack_into(self.fmt, self.buf, 0, *values)


def per_launch(fn, iters: int, sync=None) -> tuple[float, float]:
    """(host us per launch, us per launch including a final synchronize), best of 3."""
    best_host = best_total = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        t1 = time.perf_counter()
        if sync is not None:
            sync()
        t2 = time.perf_counter()
        best_host = min(best_host, (t1 - t0) / iters * 1e6)
        best_total = min(best_total, (t2 - t0) / iters * 1e6)
    return best_host, best_total


def host_path(iters: int) -> list[tuple[str, float]]:
    mod = tilelang.compile(SOURCE, backend="emulator")
    arrays = [mod.empty(1024, "f32") for _ in range(4)]
    rows = []
    for kernel, args in ((mod.k0, ()), (mod.k8, (*arrays, 1.0, 2.0, 3, 4))):
        kernel[1](*args)                                  # compile, load, check the grid
        for spec in kernel._specs.values():
            spec.launcher = PackOnly(kernel._layout.fmt, kernel._layout.size)
        launch = kernel[1]
        for _ in range(200):
            launch(*args)
        rows.append((f"{kernel.name} ({len(args)} args)",
                     per_launch(lambda: launch(*args), iters)[0]))
    return rows


def gpu_tables(iters: int):
    """Rows (name, host us, total us) for tilelang and Triton, or a reason string."""
    try:
        backend = tilelang.get_backend("cuda")
    except tilelang.BackendUnavailable as e:
        return f"no GPU: {e}"
    try:
        import torch
    except ImportError:
        torch = None
    mod = tilelang.compile(SOURCE, backend=backend)
    if torch is not None:
        arrays = [torch.empty(1024, device=f"cuda:{backend.device_id}") for _ in range(4)]
        sync = torch.cuda.synchronize
    else:
        arrays = [mod.empty(1024, "f32") for _ in range(4)]
        sync = backend.synchronize
    rows = []
    for kernel, args in ((mod.k0, ()), (mod.k8, (*arrays, 1.0, 2.0, 3, 4))):
        launch = kernel[1]
        for _ in range(200):
            launch(*args)
        sync()
        h, t = per_launch(lambda: launch(*args), iters, sync)
        rows.append((f"tilelang {kernel.name}", h, t))
    try:
        import triton
        import triton.language as tl  # noqa: F401
    except ImportError:
        return rows, "Triton is not installed: no comparison"
    if torch is None:
        return rows, "torch is not installed: Triton cannot launch"

    @triton.jit
    def t0():
        pass

    @triton.jit
    def t8(a, b, c, d, x, y, n, m):
        pass
    for name, fn, args in (("triton k0", t0, ()), ("triton k8", t8, (*arrays, 1.0, 2.0, 3, 4))):
        launch = fn[(1,)]
        for _ in range(200):
            launch(*args)
        sync()
        h, t = per_launch(lambda: launch(*args), iters, sync)
        rows.append((name, h, t))
    return rows, f"triton {triton.__version__}, torch {torch.__version__}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iters", type=int, default=20000)
    args = ap.parse_args()
    os.environ.setdefault("TILELANG_CACHE_DIR", os.path.join(tempfile.gettempdir(),
                                                             "tilelang-bench-cache"))
    print(f"Python {sys.version.split()[0]}, numpy {np.__version__}")
    print("\n1. Host path of a launch (runtime work without the driver call), us per launch")
    print(f"{'kernel':<18}{'us':>8}")
    for name, us in host_path(args.iters):
        print(f"{name:<18}{us:>8.2f}")
    print("\n2. GPU launches, us per launch (host loop / including synchronize)")
    res = gpu_tables(max(args.iters // 4, 1000))
    if isinstance(res, str):
        print(res)
        return 0
    rows, note = res
    print(f"{'launcher':<18}{'host us':>10}{'total us':>10}")
    for name, h, t in rows:
        print(f"{name:<18}{h:>10.2f}{t:>10.2f}")
    print(note)
    return 0


if __name__ == "__main__":
    sys.exit(main())
