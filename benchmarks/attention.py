#!/usr/bin/env python3
"""Attention forward: examples/attention.tile against torch SDPA and a Triton flash attention.

    python3 benchmarks/attention.py [--quick] [--cpu] [--out FILE.md]

On a GPU, for f16 inputs of shape (32 heads, S, D) with S in 512..8192, D in 64 and 128,
causal or not, in one process on the same tensors: our kernel `attention` (autotuned over
its tiles BM x BN), torch's `scaled_dot_product_attention` (flash or memory-efficient
back end, as torch picks) and a flash-attention forward kernel written here for Triton (online
softmax in base 2, the row block's queries in registers, one program per (row block, head)).
Every result is checked against torch in float32 first, then timed with
tilelang.testing.do_bench (the median); TFLOP/s counts 4 S^2 D flops per head (half of that
when causal).

Without a GPU (or with --cpu) the kernel runs on the emulator at a small size and its counters
are printed. Without examples/attention.tile the script says so and exits 0.
"""

from __future__ import annotations

import argparse
import datetime
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

EXAMPLE = os.path.join(ROOT, "examples", "attention.tile")
HEADS = 32
SEQS = (512, 1024, 2048, 4096, 8192)
DIMS = (64, 128)
# the tiles our kernel may use at its launch width (examples/attention.tile's header): 256
# threads on sm_90a (two warp groups of 64 query rows), 128 elsewhere
SPACE = {"BM": [64], "BN": [32, 64]}
SPACE_SM90A = {"BM": [128], "BN": [64, 128]}


def space(target: str) -> dict:
    return SPACE_SM90A if str(target) == "sm_90a" else SPACE


def default(kernel, name: str):
    """A const parameter's default on the module's target (the .tile's `by_target`)."""
    return next(p.default for p in kernel.info.params if p.name == name)
EMU_SHAPES = ((1, 128, 64),)


def flops(heads: int, seq: int, d: int, causal: bool) -> float:
    f = 4.0 * heads * seq * seq * d
    return f / 2 if causal else f


def missing() -> str | None:
    if not os.path.exists(EXAMPLE):
        return "examples/attention.tile does not exist yet"
    return None


def emulator_rows() -> list[dict]:
    import numpy as np

    import tilelang
    from tilelang.testing import do_bench
    mod = tilelang.compile(EXAMPLE, backend="emulator")
    rng = np.random.default_rng(0)
    rows = []
    for heads, seq, d in EMU_SHAPES:
        for causal in (False, True):
            q, k, v = (rng.standard_normal((heads, seq, d)).astype(np.float16)
                       for _ in range(3))
            o = np.zeros_like(q)
            # the example's default tiles on the emulator's target (sm_90a: 128 x 128)
            bm, bn = default(mod.attention, "BM"), default(mod.attention, "BN")
            kern = mod.attention.specialize(BM=bm, BN=bn, D=d, CAUSAL=causal)
            c = do_bench(lambda: kern[(-(-seq // bm), heads)](q, k, v, o, 1 / math.sqrt(d)),
                         backend="emulator")
            f = flops(heads, seq, d, causal)
            rows.append({"shape": f"{heads}x{seq}x{d}", "causal": causal,
                         "instr/flop": c.instructions / f, "sectors": c.global_sectors,
                         "conflicts": c.bank_conflicts,
                         "mma": sum(n for op, n in c.reports[0].instructions.items()
                                    if op.startswith(("mma", "wgmma"))),
                         "cost": c.cost})
            print(fmt_emu(rows[-1]), flush=True)
    return rows


EMU_HEADER = ("| shape (heads x S x D) | causal | thread-instr / flop | global sectors | "
              "mma thread-instr | bank conflicts | cost |\n|---|---|---|---|---|---|---|")


def fmt_emu(r) -> str:
    return (f"| {r['shape']} | {r['causal']} | {r['instr/flop']:.3f} | {r['sectors']} | "
            f"{r['mma']} | {r['conflicts']} | {r['cost']:.0f} |")


def _triton_attention():
    try:
        import triton
        import triton.language as tl
    except ImportError:
        return None

    @triton.jit
    def fwd(Q, K, V, O, scale, seq, sqh, sqm, skh, skn, svh, svn, soh, som,
            D: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, CAUSAL: tl.constexpr):
        m = tl.program_id(0)
        h = tl.program_id(1)
        rows = m * BM + tl.arange(0, BM)
        d = tl.arange(0, D)
        q = tl.load(Q + h * sqh + rows[:, None] * sqm + d[None, :], mask=rows[:, None] < seq,
                    other=0.0)
        qs = scale * 1.4426950408889634
        mi = tl.full([BM], -float("inf"), tl.float32)
        li = tl.zeros([BM], tl.float32)
        acc = tl.zeros([BM, D], tl.float32)
        hi = seq
        if CAUSAL:
            hi = tl.minimum(seq, (m + 1) * BM)
        for start in range(0, hi, BN):
            cols = start + tl.arange(0, BN)
            kt = tl.load(K + h * skh + cols[None, :] * skn + d[:, None],
                         mask=cols[None, :] < seq, other=0.0)
            s = tl.dot(q, kt) * qs
            ok = cols[None, :] < seq
            if CAUSAL:
                ok = ok & (cols[None, :] <= rows[:, None])
            s = tl.where(ok, s, -float("inf"))
            mnew = tl.maximum(mi, tl.max(s, 1))
            p = tl.math.exp2(s - mnew[:, None])
            alpha = tl.math.exp2(mi - mnew)
            li = li * alpha + tl.sum(p, 1)
            vt = tl.load(V + h * svh + cols[:, None] * svn + d[None, :],
                         mask=cols[:, None] < seq, other=0.0)
            acc = acc * alpha[:, None] + tl.dot(p.to(vt.dtype), vt)
            mi = mnew
        out = acc / li[:, None]
        tl.store(O + h * soh + rows[:, None] * som + d[None, :], out.to(O.dtype.element_ty),
                 mask=rows[:, None] < seq)

    def launch(q, k, v, o, scale, causal):
        heads, seq, d = q.shape
        bm, bn = 128, 64
        grid = (-(-seq // bm), heads)
        return lambda: fwd[grid](q, k, v, o, scale, seq, q.stride(0), q.stride(1), k.stride(0),
                                 k.stride(1), v.stride(0), v.stride(1), o.stride(0),
                                 o.stride(1), D=d, BM=bm, BN=bn, CAUSAL=causal,
                                 num_warps=4 if d == 64 else 8, num_stages=3)
    launch.version = triton.__version__
    return launch


def no_gpu_reason() -> str | None:
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return "no CUDA GPU (torch.cuda.is_available() is False)"
    try:
        import tilelang
        tilelang.get_backend("cuda")
    except Exception as e:
        return f"tilelang's CUDA back end is unavailable: {str(e).splitlines()[0]}"
    return None


def gpu_rows(quick: bool = False) -> list[dict]:
    import torch
    import torch.nn.functional as F

    import tilelang
    from tilelang.testing import do_bench
    from tilelang.tune import autotune
    mod = tilelang.compile(EXAMPLE, backend="cuda")
    tri = _triton_attention()
    rows = []
    g = torch.Generator(device="cuda").manual_seed(0)
    for d in DIMS:
        for causal in (False, True):
            tuned = autotune(mod.attention.specialize(D=d, CAUSAL=causal),
                             space=space(mod.target),
                             grid=lambda m: (-(-m["q"].shape[1] // m["BM"]),
                                             m["q"].shape[0]), progress=False)
            for seq in (SEQS[:2] if quick else SEQS):
                q, k, v = (torch.randn(HEADS, seq, d, device="cuda", generator=g)
                           .to(torch.float16) for _ in range(3))
                o = torch.empty_like(q)
                scale = 1.0 / math.sqrt(d)
                want = F.scaled_dot_product_attention(q.float()[None], k.float()[None],
                                                      v.float()[None], is_causal=causal)[0]
                row = {"shape": f"{HEADS}x{seq}x{d}", "causal": causal, "seq": seq, "d": d,
                       "notes": []}
                fl = flops(HEADS, seq, d, causal)
                launchers = {
                    "tile": lambda: tuned(q, k, v, o, scale),
                    "torch": lambda: F.scaled_dot_product_attention(
                        q[None], k[None], v[None], is_causal=causal),
                    "triton": tri(q, k, v, o, scale, causal) if tri else None}
                for who, fn in launchers.items():
                    if fn is None:
                        continue
                    try:
                        o.fill_(float("nan"))
                        got = fn()
                        torch.cuda.synchronize()
                        got = got[0] if isinstance(got, torch.Tensor) else o
                        err = ((got.float() - want).abs().max() / want.abs().max()).item()
                        if not err <= 4e-3:
                            row["notes"].append(f"{who}: WRONG RESULT (relative error "
                                                f"{err:.2e}), not timed")
                            continue
                        ms = do_bench(fn, quantiles=[0.5], backend="cuda")
                    except Exception as e:
                        row["notes"].append(f"{who}: {type(e).__name__}: "
                                            f"{str(e).splitlines()[0][:100]}")
                        continue
                    row[who] = fl / ms / 1e9
                if tuned.last is not None:
                    row["notes"].append(f"tile tiles {tuned.last.config}")
                rows.append(row)
                print(fmt_gpu(row), flush=True)
    return rows


GPU_HEADER = ("| heads x S x D | causal | tile TFLOP/s | torch SDPA TFLOP/s | Triton TFLOP/s | "
              "tile/SDPA | tile/Triton | notes |\n|---|---|---|---|---|---|---|---|")


def _f(x):
    return "-" if x is None else f"{x:.1f}"


def _r(a, b):
    return "-" if a is None or b is None else f"{a / b:.2f}"


def fmt_gpu(r) -> str:
    t, s, tr = r.get("tile"), r.get("torch"), r.get("triton")
    return (f"| {r['shape']} | {r['causal']} | {_f(t)} | {_f(s)} | {_f(tr)} | {_r(t, s)} | "
            f"{_r(t, tr)} | {'; '.join(r['notes'])} |")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the two shortest sequences only")
    ap.add_argument("--cpu", action="store_true", help="the emulator part even with a GPU")
    ap.add_argument("--out", help="write the markdown table here")
    args = ap.parse_args(argv)
    why = missing()
    if why:
        print(f"attention benchmark: skipped: {why}")
        return 0
    date = datetime.date.today().isoformat()
    reason = no_gpu_reason()
    if reason or args.cpu:
        print(f"attention: no GPU timing ({reason or '--cpu'}); emulator counts:\n{EMU_HEADER}")
        rows = emulator_rows()
        text = (f"# Attention on the emulator ({date})\n\n{EMU_HEADER}\n"
                + "\n".join(fmt_emu(r) for r in rows) + "\n")
    else:
        import torch
        print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}\n{GPU_HEADER}")
        rows = gpu_rows(args.quick)
        text = (f"# Attention forward ({date}, {torch.cuda.get_device_name()})\n\n"
                f"{GPU_HEADER}\n" + "\n".join(fmt_gpu(r) for r in rows) + "\n")
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
        print(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
