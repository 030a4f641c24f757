"""Throughput of the PTX emulator: thread-instructions per second on typical kernels.

    python3 benchmarks/emulator_bench.py [--no-counters]

The headline is the 1M-element f32 vector add (8,192 blocks of 128 threads) compiled by LLVM's
NVPTX back end at -O3; the goal is under 5 s on a 2-core machine.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tilelang.emulator.device import EmulatorDevice  # noqa: E402
from tilelang.emulator.samples import COLLATZ, MATMUL, REDUCE, llvm_vadd_ptx  # noqa: E402

def bench(counters: bool):
    rng = np.random.default_rng(0)
    dev = EmulatorDevice(counters=counters)
    rows = []

    def run(label, ptx, name, grid, block, args, check):
        fn = dev.load_module(ptx).get_function(name)
        t0 = time.perf_counter()
        rep = dev.launch(fn, grid, block, args)
        dt = time.perf_counter() - t0
        ok = check()
        rows.append((label, rep.threads, rep.total_instructions, dt,
                     rep.total_instructions / dt, "ok" if ok else "WRONG"))

    n = 1 << 20
    a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    pa, pb, pc = dev.to_device(a), dev.to_device(b), dev.malloc(4 * n)
    run("vector add f32 1M (LLVM -O3)", llvm_vadd_ptx(), "vadd", (8192,), (128,),
        [pa, pb, pc, np.int32(n)],
        lambda: np.array_equal(dev.from_device(pc, (n,), np.float32), a + b))

    x = rng.integers(-100, 100, n).astype(np.float32)
    px, po = dev.to_device(x), dev.malloc(4 * 4096)
    run("block reduction 1M (shfl+smem+bar)", REDUCE, "reduce", (4096,), (256,), [po, px],
        lambda: np.array_equal(dev.from_device(po, (4096,), np.float32),
                               x.reshape(4096, 256).sum(1)))

    m = 256
    A = rng.integers(-4, 4, (m, m)).astype(np.float32)
    B = rng.integers(-4, 4, (m, m)).astype(np.float32)
    qa, qb, qc = dev.to_device(A), dev.to_device(B), dev.malloc(4 * m * m)
    run("tiled smem matmul 256^3", MATMUL, "mm", (m // 16, m // 16), (16, 16),
        [qc, qa, qb, np.uint32(m)],
        lambda: np.array_equal(dev.from_device(qc, (m, m), np.float32), A @ B))

    k = 1 << 16
    v = rng.integers(1, 10000, k).astype(np.uint32)
    pv, pw = dev.to_device(v), dev.malloc(4 * k)

    def collatz_ok():
        got = dev.from_device(pw, (k,), np.uint32)
        steps = np.zeros(k, np.uint32)
        cur = v.astype(np.int64)
        while (cur > 1).any():
            act = cur > 1
            cur = np.where(act, np.where(cur % 2 == 0, cur // 2, 3 * cur + 1), cur)
            steps += act
        return np.array_equal(got, steps)
    run("divergent loops (collatz) 64K", COLLATZ, "collatz", (k // 128,), (128,), [pw, pv],
        collatz_ok)
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-counters", action="store_true",
                    help="skip the coalescing / bank-conflict counters")
    args = ap.parse_args(argv)
    rows = bench(not args.no_counters)
    print(f"PTX emulator throughput ({platform.processor() or platform.machine()}, "
          f"Python {platform.python_version()}, NumPy {np.__version__}, counters "
          f"{'off' if args.no_counters else 'on'})\n")
    print(f"| {'kernel':<36} | {'threads':>9} | {'thread-instr':>13} | {'seconds':>8} "
          f"| {'thread-instr/s':>14} | check |")
    print(f"|{'-' * 38}|{'-' * 11}|{'-' * 15}|{'-' * 10}|{'-' * 16}|-------|")
    for label, th, ins, dt, rate, ok in rows:
        print(f"| {label:<36} | {th:>9,} | {ins:>13,} | {dt:>8.3f} | {rate:>14,.0f} | {ok:<5} |")
    return 0 if all(r[-1] == "ok" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
