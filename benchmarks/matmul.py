"""Matmul throughput on a GPU: our kernel against cuBLAS (torch.matmul) and Triton.

    python3 benchmarks/matmul.py [--sizes 1024 2048 4096 8192] [--dtypes f16 bf16]
                                 [--reps 30] [--warmup 10] [--no-cluster] [--out FILE.md]

For every square size and input type, in one process on the same tensors:

* **tile**: `examples/matmul.tile` at its defaults for the GPU's target (`by_target`: on
  sm_90a the cost model's 128 x 256 x 128 over 8 warps, elsewhere 128 x 128 x 64 over 4; for
  bf16 the same source with bf16 inputs), launched through tilelang's CUDA back end; with
  `--no-cluster` without the example's `cluster = (2, 1, 1)` (no TMA multicast), to measure
  what the cluster gives;
* **cuBLAS**: `torch.matmul` (f16/bf16 output, f32 accumulation);
* **Triton**: the tutorial-style kernel of benchmarks/triton_ref/gen_matmul_ptx.py at
  128 x 128 x 64, 4 warps and 3 stages, through Triton's JIT (its usual specialization).

Each kernel is checked against torch's product first (a wrong kernel is not timed), then
timed with CUDA events: `--warmup` launches, then `--reps` launches each preceded by writing a
256 MiB buffer so L2 holds none of the operands; the median time gives TFLOP/s = 2 N^3 / t.
Our kernel and Triton's write f32 results, cuBLAS writes f16/bf16 (N^2 bytes more or less;
small against the 2 N^3 flops). Without torch, a CUDA GPU or tilelang's CUDA back end the
script says so and exits 0. The table is printed and, with --out, written as markdown.
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(HERE, "triton_ref"))

EXAMPLE = os.path.join(ROOT, "examples", "matmul.tile")
BM, BN, BK = 128, 128, 64               # Triton's tile; ours are the example's defaults


def no_gpu_reason() -> str | None:
    """Why nothing can be measured here, or None."""
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return "no CUDA GPU (torch.cuda.is_available() is False)"
    try:
        import tilelang
        tilelang.get_backend("cuda")
    except Exception as e:                      # BackendUnavailable and driver problems
        return f"tilelang's CUDA back end is unavailable: {e}"
    return None


CLUSTER = "    cluster = (2, 1, 1),\n"


def source_for(dtype: str, cluster: bool = True) -> str:
    text = open(EXAMPLE).read()
    if not cluster:
        if CLUSTER not in text.split("kernel matmul")[0]:
            raise ValueError(f"{EXAMPLE} has no `{CLUSTER.strip()}` line in its @launch")
        text = text.replace(CLUSTER, "", 1)
    return text if dtype == "f16" else text.replace("Array[f16, 2]", f"Array[{dtype}, 2]")


def tile_of(kernel) -> tuple[int, int, int]:
    """(BM, BN, BK) a compiled module's `matmul` takes by default on its target."""
    d = {p.name: p.default for p in kernel.info.const_params}
    return d["BM"], d["BN"], d["BK"]


def time_ms(fn, warmup: int, reps: int, flush) -> float:
    """Median milliseconds of `fn` over `reps` CUDA-event-timed runs, L2 flushed before each."""
    import torch
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        flush.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def close(got, ref) -> bool:
    """Our f32 result against cuBLAS's, rounded to the input type (half an ulp: 2^-11
    relative for f16, 2^-8 for bf16); the different f32 summation orders add about
    sqrt(N) * 2^-24 relative, far below. Allowed: twice that rounding, relative to the
    largest element (NaN, from an element never written, fails)."""
    import torch
    rel = 2.0 ** -7 if ref.dtype == torch.bfloat16 else 2.0 ** -10
    scale = ref.float().abs().amax().item()
    return bool((got.float() - ref.float()).abs().amax().item() <= rel * scale)


def measure(row, key, launch, c, ref, flops, warmup, reps, flush):
    """Check one kernel's result, then time it; failures become notes, not crashes (our
    kernels compile lazily, at the first launch: an unsupported type shows up here)."""
    import torch
    try:
        c.fill_(float("nan"))
        launch()
        torch.cuda.synchronize()
    except Exception as e:                      # a compile or launch error of this kernel
        row["notes"].append(f"{key}: {type(e).__name__}: {str(e).splitlines()[0][:120]}")
        return
    if not close(c, ref):
        row["notes"].append(f"{key}: WRONG RESULT, not timed")
        return
    row[key] = flops / time_ms(launch, warmup, reps, flush) / 1e9


def run(sizes, dtypes, warmup, reps, cluster: bool = True) -> tuple[list[dict], str]:
    import torch
    import tilelang
    rows = []
    flush = torch.empty(256 * 2**20, dtype=torch.uint8, device="cuda")
    try:
        import triton
        from gen_matmul_ptx import tiled_matmul
        triton_note = f"Triton {triton.__version__}"
    except ImportError as e:
        tiled_matmul, triton_note = None, f"Triton not available ({e})"
    tdt = {"f16": torch.float16, "bf16": torch.bfloat16}
    for dtype in dtypes:
        try:
            mod = tilelang.compile(source_for(dtype, cluster), backend="cuda")
            ours_kernel = mod.matmul
            ours_note = ""
        except Exception as e:                  # e.g. bf16 mma not supported yet
            ours_kernel, ours_note = None, f"tile: {type(e).__name__}: {e}"
        for n in sizes:
            g = torch.Generator(device="cuda").manual_seed(n)
            a = torch.randn(n, n, device="cuda", generator=g).to(tdt[dtype])
            b = torch.randn(n, n, device="cuda", generator=g).to(tdt[dtype])
            ref = torch.matmul(a, b)
            flops = 2.0 * n * n * n
            row = {"dtype": dtype, "n": n, "notes": []}
            row["cublas"] = flops / time_ms(lambda: torch.matmul(a, b), warmup, reps, flush) / 1e9
            c = torch.empty(n, n, device="cuda", dtype=torch.float32)
            if ours_kernel is not None:
                bm, bn, _ = tile_of(ours_kernel)
                grid = (-(-n // bm), -(-n // bn))
                launch = lambda grid=grid: ours_kernel[grid](a, b, c)
                measure(row, "tile", launch, c, ref, flops, warmup, reps, flush)
            else:
                row["notes"].append(ours_note)
            if tiled_matmul is not None:
                grid = (-(-n // BM) * -(-n // BN),)
                launch = lambda grid=grid: tiled_matmul[grid](
                    a, b, c, n, n, n, a.stride(0), b.stride(0), c.stride(0), BM=BM, BN=BN,
                    BK=BK, GROUP=8, num_warps=4, num_stages=3)
                measure(row, "triton", launch, c, ref, flops, warmup, reps, flush)
            rows.append(row)
            print(fmt_row(row), flush=True)
    return rows, triton_note


def fmt(x):
    return "-" if x is None else f"{x:.1f}"


def ratio(x, y):
    return "-" if x is None or y is None else f"{x / y:.2f}"


HEADER = ("| dtype | N | tile TFLOP/s | cuBLAS TFLOP/s | Triton TFLOP/s | tile/cuBLAS | "
          "tile/Triton | notes |\n|---|---|---|---|---|---|---|---|")


def fmt_row(r) -> str:
    t, c, tr = r.get("tile"), r.get("cublas"), r.get("triton")
    return (f"| {r['dtype']} | {r['n']} | {fmt(t)} | {fmt(c)} | {fmt(tr)} | {ratio(t, c)} | "
            f"{ratio(t, tr)} | {'; '.join(r['notes'])} |")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1024, 2048, 4096, 8192])
    ap.add_argument("--dtypes", nargs="+", default=["f16", "bf16"], choices=["f16", "bf16"])
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--no-cluster", action="store_true",
                    help="the example without its cluster of 2 blocks (no TMA multicast)")
    ap.add_argument("--out", help="write the markdown table here")
    args = ap.parse_args(argv)
    reason = no_gpu_reason()
    if reason:
        print(f"matmul benchmark: nothing measured: {reason}")
        return 0
    import torch
    name = torch.cuda.get_device_name()
    print(f"{name}, torch {torch.__version__}\n{HEADER}")
    rows, triton_note = run(args.sizes, args.dtypes, args.warmup, args.reps,
                            cluster=not args.no_cluster)
    variant = " without its cluster (`--no-cluster`)" if args.no_cluster else ""
    text = (f"# Matmul throughput ({datetime.date.today().isoformat()}, {name})\n\n"
            f"`python3 benchmarks/matmul.py{' --no-cluster' if args.no_cluster else ''}` — "
            f"square N x N x N, examples/matmul.tile{variant} at its defaults for this GPU, "
            f"Triton at {BM} x {BN} x {BK}, 4 warps; torch {torch.__version__}; {triton_note}; median of {args.reps} "
            f"CUDA-event timings after {args.warmup} warm-up launches, L2 flushed before "
            f"each.\n\n{HEADER}\n" + "\n".join(fmt_row(r) for r in rows) + "\n")
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
        print(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
