#!/usr/bin/env python3
"""Memory-bound kernels: vadd, softmax, layernorm and RMSNorm against torch and Triton.

    python3 benchmarks/memory_bound.py [--quick] [--out FILE.md]

On a GPU (torch with CUDA and tilelang's CUDA back end), for every family and size, in one
process on the same tensors: our kernel (examples/vadd.tile autotuned over TILE,
examples/softmax.tile, examples/layernorm.tile, and the RMSNorm kernel below), torch (`a + b`,
`torch.softmax`, `layer_norm`, `rms_norm`) and a Triton kernel written here in the style of
Triton's tutorials (one program per row; the row in registers). Each result is checked against
torch first; each is timed with tilelang.testing.do_bench (CUDA events, L2 flushed before every
run; the median). GB/s counts the bytes a kernel must move (inputs read once, outputs written
once) and is also given as a share of the device's copy bandwidth, measured here with a 1 GiB
device-to-device `copy_`.

Without a GPU it runs the kernels on the emulator at small sizes and prints its counters:
thread-instructions per element, the 32-byte sectors moved against the fewest possible (the
bytes above / 32), and the tuner's cost.
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)

EXAMPLES = os.path.join(ROOT, "examples")

RMSNORM = """
// y[r, :] = x[r, :] / sqrt(mean(x[r, :]^2) + eps) * w; one block per row, N >= row length.
kernel rmsnorm(x: Array[f32, 2], w: Array[f32, 1], y: Array[f32, 2], eps: f32,
               const N: i32 = 1024) {
    let r = bid(0);
    let n = astype(x.shape[1], f32);
    let t = load(x, index = (r, 0), shape = (1, N), padding = 0.0);
    let ms = sum(t * t, axis = 1, keepdims = true) / n;
    let scale = load(w, index = (0,), shape = (N,), padding = 0.0);
    store(y, index = (r, 0), tile = t * rsqrt(ms + eps) * scale);
}
"""

FAMILIES = ("vadd", "softmax", "layernorm", "rmsnorm")
EPS = 1e-5
# GPU sizes: vadd elements; the row families are ROWS x cols
VADD_SIZES = (1 << 20, 1 << 22, 1 << 24, 1 << 26)
ROWS = 4096
COLS = (256, 1024, 2048, 4096, 8192)
VADD_TILES = (512, 1024, 2048, 4096)
# emulator sizes (small: the emulator runs about a million thread-instructions a second)
EMU_VADD = (4096, 65536)
EMU_ROWS, EMU_COLS = 32, (256, 1000)


def pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def bytes_moved(family: str, shape) -> int:
    """Bytes a kernel must move: every input element read once, every output written once."""
    if family == "vadd":
        return 3 * shape[0] * 4
    m, n = shape
    extra = {"softmax": 0, "layernorm": 2 * n, "rmsnorm": n}[family]
    return (2 * m * n + extra) * 4


def modules(backend: str) -> dict:
    import tilelang
    return {"vadd": tilelang.compile(os.path.join(EXAMPLES, "vadd.tile"), backend=backend),
            "softmax": tilelang.compile(os.path.join(EXAMPLES, "softmax.tile"), backend=backend),
            "layernorm": tilelang.compile(os.path.join(EXAMPLES, "layernorm.tile"),
                                          backend=backend),
            "rmsnorm": tilelang.compile(RMSNORM, backend=backend)}


def tile_launcher(mods, family: str, arrays: dict, tuned_vadd=None):
    """A no-argument function launching our kernel for this family on these arrays."""
    if family == "vadd":
        a, b, c = arrays["a"], arrays["b"], arrays["c"]
        if tuned_vadd is not None:
            return lambda: tuned_vadd(a, b, c)
        n = a.shape[0]
        return lambda: mods["vadd"].vadd[-(-n // 1024)](a, b, c)
    x, y = arrays["x"], arrays["y"]
    m, n = x.shape
    k = {"softmax": mods["softmax"].softmax_rows, "layernorm": mods["layernorm"].layernorm,
         "rmsnorm": mods["rmsnorm"].rmsnorm}[family].specialize(N=pow2(n))
    if family == "softmax":
        return lambda: k[m](x, y)
    if family == "layernorm":
        return lambda: k[m](x, arrays["w"], arrays["b"], y, EPS)
    return lambda: k[m](x, arrays["w"], y, EPS)


# -- the emulator part ------------------------------------------------------------------------

def emulator_rows() -> list[dict]:
    import numpy as np

    from tilelang.testing import do_bench
    mods = modules("emulator")
    rng = np.random.default_rng(0)
    rows = []
    shapes = [("vadd", (n,)) for n in EMU_VADD] + \
        [(f, (EMU_ROWS, n)) for f in FAMILIES[1:] for n in EMU_COLS]
    for family, shape in shapes:
        if family == "vadd":
            arrays = {k: rng.random(shape, dtype=np.float32) for k in "ab"}
            arrays["c"] = np.zeros(shape, np.float32)
        else:
            arrays = {"x": rng.standard_normal(shape).astype(np.float32),
                      "w": rng.random(shape[1], dtype=np.float32),
                      "b": rng.random(shape[1], dtype=np.float32),
                      "y": np.zeros(shape, np.float32)}
        counts = do_bench(tile_launcher(mods, family, arrays), backend="emulator")
        elems = int(np.prod(shape))
        ideal = bytes_moved(family, shape) / 32
        rows.append({"family": family, "shape": "x".join(map(str, shape)),
                     "instr/elem": counts.instructions / elems,
                     "sectors": counts.global_sectors, "ideal": int(ideal),
                     "traffic": counts.global_sectors / ideal,
                     "conflicts": counts.bank_conflicts, "cost": counts.cost})
        print(fmt_emu(rows[-1]), flush=True)
    return rows


EMU_HEADER = ("| kernel | shape | thread-instr / element | global sectors | fewest possible | "
              "traffic / fewest | bank conflicts | cost |\n|---|---|---|---|---|---|---|---|")


def fmt_emu(r) -> str:
    return (f"| {r['family']} | {r['shape']} | {r['instr/elem']:.1f} | {r['sectors']} | "
            f"{r['ideal']} | {r['traffic']:.2f} | {r['conflicts']} | {r['cost']:.0f} |")


# -- the GPU part -----------------------------------------------------------------------------

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


def copy_bandwidth() -> float:
    """GB/s of a 1 GiB device-to-device copy (read + write), the ceiling of these kernels."""
    import torch

    from tilelang.testing import do_bench
    src = torch.empty(1 << 28, dtype=torch.float32, device="cuda")
    dst = torch.empty_like(src)
    ms = do_bench(lambda: dst.copy_(src), quantiles=[0.5], backend="cuda")
    return 2 * src.numel() * 4 / ms / 1e6


def _triton_kernels():
    """Triton kernels in the style of its tutorials (one program per row for the row
    families, the whole row in registers), or None without Triton."""
    try:
        import triton
        import triton.language as tl
    except ImportError:
        return None

    @triton.jit
    def add(a, b, c, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(c + offs, tl.load(a + offs, mask=m) + tl.load(b + offs, mask=m), mask=m)

    @triton.jit
    def softmax(x, y, sx, sy, n, BLOCK: tl.constexpr):
        r = tl.program_id(0)
        cols = tl.arange(0, BLOCK)
        m = cols < n
        v = tl.load(x + r * sx + cols, mask=m, other=-float("inf"))
        e = tl.exp(v - tl.max(v, axis=0))
        tl.store(y + r * sy + cols, e / tl.sum(e, axis=0), mask=m)

    @triton.jit
    def layernorm(x, w, b, y, sx, sy, n, eps, BLOCK: tl.constexpr):
        r = tl.program_id(0)
        cols = tl.arange(0, BLOCK)
        m = cols < n
        v = tl.load(x + r * sx + cols, mask=m, other=0.0)
        mean = tl.sum(v, axis=0) / n
        d = tl.where(m, v - mean, 0.0)
        rstd = 1.0 / tl.sqrt(tl.sum(d * d, axis=0) / n + eps)
        out = d * rstd * tl.load(w + cols, mask=m) + tl.load(b + cols, mask=m)
        tl.store(y + r * sy + cols, out, mask=m)

    @triton.jit
    def rmsnorm(x, w, y, sx, sy, n, eps, BLOCK: tl.constexpr):
        r = tl.program_id(0)
        cols = tl.arange(0, BLOCK)
        m = cols < n
        v = tl.load(x + r * sx + cols, mask=m, other=0.0)
        rstd = 1.0 / tl.sqrt(tl.sum(v * v, axis=0) / n + eps)
        tl.store(y + r * sy + cols, v * rstd * tl.load(w + cols, mask=m), mask=m)

    return {"vadd": add, "softmax": softmax, "layernorm": layernorm, "rmsnorm": rmsnorm,
            "version": triton.__version__}


def _warps(block: int) -> int:
    return 16 if block >= 8192 else 8 if block >= 2048 else 4


def triton_launcher(tk, family, arrays):
    if tk is None:
        return None
    if family == "vadd":
        a, b, c = arrays["a"], arrays["b"], arrays["c"]
        n = a.numel()
        return lambda: tk["vadd"][(-(-n // 1024),)](a, b, c, n, BLOCK=1024)
    x, y = arrays["x"], arrays["y"]
    m, n = x.shape
    blk = pow2(n)
    w = _warps(blk)
    if family == "softmax":
        return lambda: tk["softmax"][(m,)](x, y, x.stride(0), y.stride(0), n, BLOCK=blk,
                                           num_warps=w)
    if family == "layernorm":
        return lambda: tk["layernorm"][(m,)](x, arrays["w"], arrays["b"], y, x.stride(0),
                                             y.stride(0), n, EPS, BLOCK=blk, num_warps=w)
    return lambda: tk["rmsnorm"][(m,)](x, arrays["w"], y, x.stride(0), y.stride(0), n, EPS,
                                       BLOCK=blk, num_warps=w)


def torch_reference(family, arrays):
    """torch's function for the family; it returns a new tensor (the caching allocator makes
    that cheap), so torch is not charged for a copy into `y`."""
    import torch
    F = torch.nn.functional
    if family == "vadd":
        return lambda: torch.add(arrays["a"], arrays["b"], out=arrays["c"])
    x = arrays["x"]
    n = x.shape[1]
    if family == "softmax":
        return lambda: torch.softmax(x, 1)
    if family == "layernorm":
        return lambda: F.layer_norm(x, (n,), arrays["w"], arrays["b"], EPS)
    if hasattr(F, "rms_norm"):
        return lambda: F.rms_norm(x, (n,), arrays["w"], EPS)
    return lambda: x * torch.rsqrt((x * x).mean(1, keepdim=True) + EPS) * arrays["w"]


def _expected(family, arrays):
    import torch
    F = torch.nn.functional
    if family == "vadd":
        return arrays["a"] + arrays["b"]
    x = arrays["x"].double()
    n = x.shape[1]
    if family == "softmax":
        return torch.softmax(x, 1).float()
    if family == "layernorm":
        return F.layer_norm(x, (n,), arrays["w"].double(), arrays["b"].double(), EPS).float()
    return (x * torch.rsqrt((x * x).mean(1, keepdim=True) + EPS) * arrays["w"].double()).float()


def gpu_rows(quick: bool = False, bandwidth: float | None = None) -> list[dict]:
    import torch

    from tilelang.testing import do_bench
    from tilelang.tune import autotune
    mods = modules("cuda")
    tk = _triton_kernels()
    bw = bandwidth or copy_bandwidth()
    tuned = autotune(mods["vadd"].vadd, space={"TILE": list(VADD_TILES)},
                     grid=lambda m: (-(-m["a"].shape[0] // m["TILE"]),), progress=False)
    rows = []
    g = torch.Generator(device="cuda").manual_seed(0)
    shapes = [("vadd", (n,)) for n in (VADD_SIZES[:2] if quick else VADD_SIZES)] + \
        [(f, (ROWS, n)) for f in FAMILIES[1:] for n in (COLS[:2] if quick else COLS)]
    for family, shape in shapes:
        if family == "vadd":
            arrays = {k: torch.rand(shape, device="cuda", generator=g) for k in "ab"}
            arrays["c"] = torch.empty(shape, device="cuda")
            out = arrays["c"]
        else:
            arrays = {"x": torch.randn(shape, device="cuda", generator=g),
                      "w": torch.rand(shape[1], device="cuda", generator=g),
                      "b": torch.rand(shape[1], device="cuda", generator=g),
                      "y": torch.empty(shape, device="cuda")}
            out = arrays["y"]
        want = _expected(family, arrays)
        nbytes = bytes_moved(family, shape)
        row = {"family": family, "shape": "x".join(map(str, shape)), "size": nbytes,
               "notes": []}
        launchers = {"tile": (tile_launcher(mods, family, arrays, tuned)
                              if family == "vadd" else tile_launcher(mods, family, arrays)),
                     "torch": torch_reference(family, arrays),
                     "triton": triton_launcher(tk, family, arrays)}
        for who, fn in launchers.items():
            if fn is None:
                continue
            try:
                out.fill_(float("nan"))
                got = fn()
                torch.cuda.synchronize()
                got = got if isinstance(got, torch.Tensor) else out
                if not torch.allclose(got, want, rtol=1e-4, atol=1e-5):
                    err = (got - want).abs().max().item()
                    row["notes"].append(f"{who}: WRONG RESULT (max error {err:.3g}), not timed")
                    continue
                ms = do_bench(fn, quantiles=[0.5], backend="cuda")
            except Exception as e:
                row["notes"].append(f"{who}: {type(e).__name__}: {str(e).splitlines()[0][:100]}")
                continue
            row[who] = ms
        if family == "vadd" and tuned.last is not None:
            row["notes"].append(f"tile autotuned: {tuned.last.config}")
        for who in ("tile", "torch", "triton"):
            if who in row:
                row[who + "_gbs"] = nbytes / row[who] / 1e6
        row["bw"] = bw
        rows.append(row)
        print(fmt_gpu(row), flush=True)
    return rows


GPU_HEADER = ("| kernel | shape | tile GB/s | % of copy | torch GB/s | Triton GB/s | tile/torch | "
              "tile/Triton | tile ms | notes |\n|---|---|---|---|---|---|---|---|---|---|")


def _f(x, spec=".0f"):
    return "-" if x is None else format(x, spec)


def _ratio(a, b):
    return "-" if a is None or b is None else f"{a / b:.2f}"


def fmt_gpu(r) -> str:
    t, to, tr = r.get("tile_gbs"), r.get("torch_gbs"), r.get("triton_gbs")
    share = None if t is None else 100 * t / r["bw"]
    return (f"| {r['family']} | {r['shape']} | {_f(t)} | {_f(share, '.0f')} | {_f(to)} | "
            f"{_f(tr)} | {_ratio(t, to)} | {_ratio(t, tr)} | {_f(r.get('tile'), '.4f')} | "
            f"{'; '.join(r['notes'])} |")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the two smallest sizes only")
    ap.add_argument("--cpu", action="store_true", help="the emulator part even with a GPU")
    ap.add_argument("--out", help="write the markdown table here")
    args = ap.parse_args(argv)
    reason = no_gpu_reason()
    date = datetime.date.today().isoformat()
    if reason or args.cpu:
        print(f"memory-bound kernels: no GPU timing ({reason or '--cpu'}); emulator counts:")
        print(EMU_HEADER)
        rows = emulator_rows()
        text = (f"# Memory-bound kernels on the emulator ({date})\n\n{EMU_HEADER}\n"
                + "\n".join(fmt_emu(r) for r in rows) + "\n")
    else:
        import torch
        print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}\n{GPU_HEADER}")
        rows = gpu_rows(args.quick)
        text = (f"# Memory-bound kernels ({date}, {torch.cuda.get_device_name()})\n\n"
                f"{GPU_HEADER}\n" + "\n".join(fmt_gpu(r) for r in rows) + "\n")
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
        print(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
