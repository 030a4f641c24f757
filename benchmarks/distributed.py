#!/usr/bin/env python3
"""The distributed examples on PyTorch symmetric memory against NCCL (docs/distributed.md).

    torchrun --nproc-per-node N benchmarks/distributed.py [--check] [--iters K] [--out FILE]

Needs a machine with N >= 2 GPUs (NVLink peers), torch with CUDA and NCCL, and the CUDA
driver. Each rank compiles examples/distributed/*.tile for its own GPU, allocates the
symmetric arrays with `torch.distributed._symmetric_memory.empty` (rendezvous on the world
group) and launches:

- `all_reduce` (one-shot, f32) against `dist.all_reduce` (NCCL), sizes 64 Ki to 4 Mi elements;
- `all_gather` (pushes + per-tile flags) against `dist.all_gather_into_tensor`;
- `ag_matmul` (all-gather fused into a matmul, f16) against `all_gather_into_tensor` followed
  by a separate `torch.matmul`.

`--check` compares every result with the NCCL one (all_reduce within float32 rounding of a
different summation order; all_gather bit for bit; ag_matmul within f16 accumulation) and
prints `NAME: ok` per rank; without it, rank 0 prints a Markdown table of median times (CUDA
events, `--iters` launches after warm-up) and writes it to `--out` (default
benchmarks/results/distributed-DATE-gpu.md). Without two GPUs it says so and exits 0.
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
EXAMPLES = os.path.join(ROOT, "examples", "distributed")


def _median_ms(torch, fn, iters: int) -> float:
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    return times[len(times) // 2]


def _zeros(torch, symm_mem, n, dtype, dev, view=None):
    t = symm_mem.empty(n, dtype=dtype, device=dev)
    t.zero_()
    return t if view is None else t.view(view)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare with NCCL, no timing")
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    try:
        import torch
        import torch.distributed as dist
        import torch.distributed._symmetric_memory as symm_mem
    except ImportError:
        print("distributed benchmark: needs torch with torch.distributed")
        return 0
    if "RANK" not in os.environ or not torch.cuda.is_available() or \
            torch.cuda.device_count() < 2:
        print("distributed benchmark: needs torchrun on a machine with two or more GPUs")
        return 0
    import tilelang
    import tilelang.distributed as td

    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    dev = torch.device("cuda", local)
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    group = dist.group.WORLD
    mods = {n: tilelang.compile(os.path.join(EXAMPLES, f"{n}.tile"), backend=f"cuda:{local}")
            for n in ("all_reduce", "all_gather", "ag_matmul")}
    rows = []

    # -- one-shot all-reduce -----------------------------------------------------------------
    for n in ((1 << 16,) if args.check else (1 << 16, 1 << 20, 1 << 22)):
        blocks = -(-n // 128)
        x = symm_mem.empty(n, dtype=torch.float32, device=dev)
        pad = _zeros(torch, symm_mem, 2 * blocks * world, torch.int32, dev, torch.uint32)
        symm_mem.rendezvous(x, group)
        symm_mem.rendezvous(pad, group)
        x.copy_(torch.randn(n, generator=torch.Generator().manual_seed(rank)).to(dev))
        y = torch.empty(n, dtype=torch.float32, device=dev)
        sx, sp = td.symmetric_tensor(x, group), td.symmetric_tensor(pad, group)
        k = mods["all_reduce"].all_reduce[blocks]
        ref = x.clone()
        dist.all_reduce(ref)
        k(sx, y, sp)
        torch.cuda.synchronize()
        if args.check:
            assert torch.allclose(y, ref, rtol=1e-5, atol=1e-5 * world), "all_reduce differs"
            print(f"all_reduce: ok (rank {rank} of {world})")
        else:
            t_tile = _median_ms(torch, lambda: k(sx, y, sp), args.iters)
            t_nccl = _median_ms(torch, lambda: dist.all_reduce(ref), args.iters)
            rows.append(("all_reduce f32", n, t_tile, "dist.all_reduce", t_nccl))

    # -- all-gather ------------------------------------------------------------------------------
    for n in ((1000,) if args.check else (1 << 14, 1 << 18)):
        blocks = -(-n // 128)
        out = symm_mem.empty((world, n), dtype=torch.float32, device=dev)
        flags = _zeros(torch, symm_mem, world * blocks, torch.int32, dev, torch.uint32)
        symm_mem.rendezvous(out, group)
        symm_mem.rendezvous(flags, group)
        x = torch.randn(n, generator=torch.Generator().manual_seed(10 + rank)).to(dev)
        so, sf = td.symmetric_tensor(out, group), td.symmetric_tensor(flags, group)
        k = mods["all_gather"].all_gather[blocks]
        epoch = [0]

        def run_ag():
            epoch[0] += 1
            k(x, so, sf, epoch[0])
        run_ag()
        ref = torch.empty(world * n, dtype=torch.float32, device=dev)
        dist.all_gather_into_tensor(ref, x)
        torch.cuda.synchronize()
        if args.check:
            assert torch.equal(out.reshape(-1), ref), "all_gather differs"
            print(f"all_gather: ok (rank {rank} of {world})")
        else:
            t_tile = _median_ms(torch, run_ag, args.iters)
            t_nccl = _median_ms(torch, lambda: dist.all_gather_into_tensor(ref, x), args.iters)
            rows.append(("all_gather f32", n, t_tile, "all_gather_into_tensor", t_nccl))

    # -- all-gather fused into a matmul ------------------------------------------------------------
    for m, kk, nn in (((256, 256, 256),) if args.check else ((1024, 4096, 4096),)):
        a = symm_mem.empty((m, kk), dtype=torch.float16, device=dev)
        grid = (-(-m // 64), -(-nn // 64), world)
        pad = _zeros(torch, symm_mem, grid[0] * grid[1] * grid[2] * world, torch.int32, dev,
                     torch.uint32)
        symm_mem.rendezvous(a, group)
        symm_mem.rendezvous(pad, group)
        a.copy_(torch.randn(m, kk, generator=torch.Generator().manual_seed(20 + rank))
                .to(dev, torch.float16))
        b = (torch.randn(kk, nn, generator=torch.Generator().manual_seed(99)) / kk ** 0.5) \
            .to(dev, torch.float16)
        c = torch.empty((world, m, nn), dtype=torch.float32, device=dev)
        sa, sp = td.symmetric_tensor(a, group), td.symmetric_tensor(pad, group)
        k = mods["ag_matmul"].ag_matmul[grid]
        k(sa, b, c, sp)
        gathered = torch.empty((world * m, kk), dtype=torch.float16, device=dev)

        def nccl_then_matmul():
            dist.all_gather_into_tensor(gathered, a)
            return gathered @ b
        ref = nccl_then_matmul().float().reshape(world, m, nn)
        torch.cuda.synchronize()
        if args.check:
            assert torch.allclose(c, ref, rtol=2e-2, atol=2e-2), "ag_matmul differs"
            print(f"ag_matmul: ok (rank {rank} of {world})")
        else:
            t_tile = _median_ms(torch, lambda: k(sa, b, c, sp), args.iters)
            t_ref = _median_ms(torch, nccl_then_matmul, args.iters)
            rows.append((f"ag_matmul f16 {m}x{kk}@{kk}x{nn}", m, t_tile,
                         "all_gather_into_tensor + torch.matmul", t_ref))

    dist.barrier()
    if rows and rank == 0:
        name = torch.cuda.get_device_name(local)
        lines = [f"# Distributed examples vs NCCL: {world} x {name}", "",
                 "| kernel | size | Tile ms | reference | reference ms |",
                 "|---|---|---|---|---|"]
        lines += [f"| {a} | {b} | {c:.4f} | {d} | {e:.4f} |" for a, b, c, d, e in rows]
        text = "\n".join(lines) + "\n"
        print(text)
        out = args.out or os.path.join(HERE, "results", f"distributed-"
                                       f"{datetime.date.today().isoformat()}-gpu.md")
        with open(out, "w") as f:
            f.write(text)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
