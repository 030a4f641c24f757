#!/usr/bin/env python3
"""Every benchmark of the suite in one run: tables, a results file and plots.

    python3 benchmarks/run.py [--quick] [--only FAMILY ...] [--no-write] [--out-dir DIR]
                              [--gpu-only]

Families, each on the same shapes for every implementation in one process:

- memory: vadd, softmax, layernorm, RMSNorm: GB/s and share of the copy bandwidth against
  torch and Triton (memory_bound.py); without a GPU, emulator counts
- matmul: examples/matmul.tile against cuBLAS and Triton, TFLOP/s (matmul.py); emulator counts
- attention: examples/attention.tile against torch SDPA and Triton, TFLOP/s (attention.py);
  emulator counts
- tuning (GPU only): autotuned matmul, softmax, layernorm: the tuning time, and the chosen
  configuration against the best of every configuration timed again
- launch: host time per launch, and against Triton on a GPU (launch_overhead.py)
- compile: compile time per example and stage (compile_bench.py)
- torch (GPU only): the MLP block of examples/torch/ — Tile operators under torch.compile
  against eager and compiled PyTorch, forward+backward ms (torch_mlp.py)

Prints each table as it is made, then writes `benchmarks/results/<date>-<gpu>.md` (`<gpu>`:
the device's name, or `cpu`) and, when matplotlib is installed, one PNG per family against
size beside it. What could not run here is listed with the reason. With `--only`, the day's
file is updated: the families run replace theirs and the others stay, so the suite can be run
one family at a time (each well within a 10-minute limit) into one file.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "triton_ref"))

FAMILIES = ("memory", "matmul", "attention", "tuning", "launch", "compile", "torch")


class Report:
    """The sections of the results file by family, printed as they are made."""

    def __init__(self):
        self.family = ""                       # the family running now ("": the whole run)
        self.blocks: dict[str, str] = {}       # family -> its sections as markdown
        self.skipped: list[str] = []           # the whole run's
        self.plots: list[str] = []
        self.counts = True                     # the emulator-count tables (--gpu-only: not
                                               # where a GPU times the family)

    def add(self, title: str, text: str) -> None:
        self.blocks[self.family] = self.blocks.get(self.family, "") + \
            f"\n## {title}\n\n{text.rstrip()}\n"
        print(f"\n## {title}\n\n{text.rstrip()}\n", flush=True)

    def skip(self, what: str, why: str) -> None:
        if self.family:
            self.blocks[self.family] = self.blocks.get(self.family, "") + \
                f"\nSkipped: {what}: {why}\n"
        else:
            self.skipped.append(f"{what}: {why}")
        print(f"skipped: {what}: {why}", flush=True)


MARK = re.compile(r"^<!-- family: (\w+) -->$", re.M)


def merge(path: str, rep: Report, run_line: str) -> tuple[list[str], dict[str, str]]:
    """The run lines and family blocks of an earlier file of the same day and device, with
    this run's families replaced (so `--only` runs of one family at a time add up)."""
    runs, blocks = [], {}
    try:
        old = open(path, encoding="utf-8").read()
    except OSError:
        old = ""
    if old:
        runs = [ln for ln in old.splitlines() if ln.startswith("- `python3 benchmarks/run.py")]
        marks = list(MARK.finditer(old))
        for i, m in enumerate(marks):
            end = marks[i + 1].start() if i + 1 < len(marks) else old.find("\n<!-- end -->")
            blocks[m.group(1)] = old[m.end():end if end >= 0 else len(old)].strip()
    blocks.update({f: b for f, b in rep.blocks.items() if f})
    return runs + [run_line], blocks


def gpu_reason() -> str | None:
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


def device_slug() -> tuple[str, str]:
    """(name for the title, name for the file)."""
    try:
        import torch
        if torch.cuda.is_available():
            name = torch.cuda.get_device_name()
            return name, re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    except ImportError:
        pass
    return f"CPU only ({platform.processor() or platform.machine()}, {os.cpu_count()} cores)", \
        "cpu"


# -- families ---------------------------------------------------------------------------------

def family_memory(rep: Report, gpu: bool, quick: bool, data: dict) -> None:
    import memory_bound as mb
    if gpu:
        bw = mb.copy_bandwidth()
        rows = mb.gpu_rows(quick, bw)
        rep.add("Memory-bound kernels (GPU)",
                f"Device copy bandwidth (1 GiB `copy_`, read + write): {bw:.0f} GB/s. GB/s "
                "counts the bytes each kernel must move; median of do_bench.\n\n"
                + mb.GPU_HEADER + "\n" + "\n".join(mb.fmt_gpu(r) for r in rows))
        data["memory"] = rows
        if not rep.counts:
            return
    rows = mb.emulator_rows()
    rep.add("Memory-bound kernels (emulator counts)",
            "Thread-instructions per element and 32-byte global sectors against the fewest "
            "possible (the bytes the kernel must move / 32); the row families read w (and b) "
            "once per row, from L2 on a GPU.\n\n"
            + mb.EMU_HEADER + "\n" + "\n".join(mb.fmt_emu(r) for r in rows))


def family_matmul(rep: Report, gpu: bool, quick: bool, data: dict) -> None:
    if gpu:
        import matmul
        sizes = [1024, 2048] if quick else [1024, 2048, 4096, 8192]
        rows, note = matmul.run(sizes, ["f16", "bf16"], 10, 30)
        rep.add("Matmul (GPU)", f"{note}; TFLOP/s = 2 N^3 / median time.\n\n"
                + matmul.HEADER + "\n" + "\n".join(matmul.fmt_row(r) for r in rows))
        data["matmul"] = rows
        if not rep.counts:
            return
    rep.add("Matmul (emulator counts)", matmul_emulator())


def matmul_emulator() -> str:
    import numpy as np

    import tilelang
    from tilelang.testing import do_bench
    mod = tilelang.compile(os.path.join(ROOT, "examples", "matmul.tile"), backend="emulator")
    rng = np.random.default_rng(0)
    lines = ["| M x N x K | tile | thread-instr / flop | mma thread-instr | global sectors | "
             "fewest sectors | bank conflicts | cost |", "|---|---|---|---|---|---|---|---|"]
    for (m, n, k), (bm, bn, bk) in (((256, 128, 128), (128, 128, 64)),
                                    ((256, 128, 128), (64, 64, 32))):
        a = rng.standard_normal((m, k)).astype(np.float16)
        b = rng.standard_normal((k, n)).astype(np.float16)
        c = np.zeros((m, n), np.float32)
        kern = mod.matmul.specialize(BM=bm, BN=bn, BK=bk)
        grid = (-(-m // bm), -(-n // bn))
        grid = (grid[0] + grid[0] % 2, grid[1])          # the cluster is 2 blocks along x
        cnt = do_bench(lambda: kern[grid](a, b, c), backend="emulator")
        err = np.abs(c - a.astype(np.float32) @ b.astype(np.float32)).max()
        fl = 2 * m * n * k
        mma = sum(v for op, v in cnt.reports[0].instructions.items()
                  if op.startswith(("mma", "wgmma")))
        fewest = (m * k * 2 + k * n * 2 + m * n * 4) // 32
        lines.append(f"| {m}x{n}x{k} | {bm}x{bn}x{bk} | {cnt.instructions / fl:.3f} | {mma} | "
                     f"{cnt.global_sectors} | {fewest} | {cnt.bank_conflicts} | "
                     f"{cnt.cost:.0f} |" + ("" if err < 1e-2 else f" WRONG (max error {err})"))
    return "\n".join(lines)


def family_attention(rep: Report, gpu: bool, quick: bool, data: dict) -> None:
    import attention
    why = attention.missing()
    if why:
        rep.skip("attention", why)
        return
    if gpu:
        rows = attention.gpu_rows(quick)
        rep.add("Attention forward (GPU)", "f16, TFLOP/s = 4 S^2 D per head (half when "
                "causal) / median time.\n\n" + attention.GPU_HEADER + "\n"
                + "\n".join(attention.fmt_gpu(r) for r in rows))
        data["attention"] = rows
        if not rep.counts:
            return
    rows = attention.emulator_rows()
    rep.add("Attention (emulator counts)", attention.EMU_HEADER + "\n"
            + "\n".join(attention.fmt_emu(r) for r in rows))


def family_tuning(rep: Report, gpu: bool, quick: bool, data: dict) -> None:
    """On a GPU: tune matmul, softmax and layernorm, then time every configuration again and
    compare the chosen one with the best (the goal: within 5%, tuning under 30 s)."""
    if not gpu:
        rep.skip("tuning (GPU)", "needs a GPU; tests/tune checks the tuner on the emulator")
        return
    import torch

    import memory_bound as mb
    import tilelang
    from tilelang.testing import do_bench
    from tilelang.tune import autotune
    lines = ["| kernel | shape | configs | pruned | tuning s | chosen | chosen ms | best ms "
             "(all re-timed) | chosen / best |", "|---|---|---|---|---|---|---|---|---|"]
    cases = []
    n = 2048 if quick else 4096
    mm = tilelang.compile(os.path.join(ROOT, "examples", "matmul.tile"), backend="cuda")
    a = torch.randn(n, n, device="cuda").half()
    b = torch.randn(n, n, device="cuda").half()
    c = torch.empty(n, n, device="cuda")
    cases.append(("matmul", f"{n}x{n}x{n} f16", mm.matmul, (a, b, c),
                  {"BM": [64, 128], "BN": [64, 128, 256], "BK": [32, 64]},
                  lambda m: (_even(-(-n // m["BM"])), -(-n // m["BN"])), None))
    rows, cols = mb.ROWS, 4096
    x = torch.randn(rows, cols, device="cuda")
    y = torch.empty_like(x)
    w = torch.rand(cols, device="cuda")
    bb = torch.rand(cols, device="cuda")
    mods = mb.modules("cuda")
    keep = (lambda cfgs, args: [cf for cf in cfgs if cf["N"] >= args["x"].shape[1]])
    cases.append(("softmax", f"{rows}x{cols}", mods["softmax"].softmax_rows, (x, y),
                  {"N": [2048, 4096, 8192, 16384]}, lambda m: (m["x"].shape[0],), keep))
    cases.append(("layernorm", f"{rows}x{cols}", mods["layernorm"].layernorm,
                  (x, w, bb, y, mb.EPS), {"N": [2048, 4096, 8192, 16384]},
                  lambda m: (m["x"].shape[0],), keep))
    results = []
    for name, shape, kernel, args, space, grid, prune in cases:
        tuned = autotune(kernel, space=space, grid=grid, prune=prune, cache=False,
                         progress=False)
        t0 = time.perf_counter()
        try:
            res = tuned.tune(args)
        except Exception as e:
            lines.append(f"| {name} | {shape} | - | - | - | failed: "
                         f"{str(e).splitlines()[0][:100]} | | | |")
            continue
        secs = time.perf_counter() - t0
        again = {}
        for t in res.trials:
            if t.status == "ok":
                k = kernel.specialize(**t.config)
                again[str(t.config)] = do_bench(lambda k=k: k[grid](*args), quantiles=[0.5],
                                                backend="cuda")
        chosen = again[str(res.config)]
        best = min(again.values())
        pruned = sum(t.status == "pruned" for t in res.trials)
        lines.append(f"| {name} | {shape} | {len(res.trials)} | {pruned} | {secs:.1f} | "
                     f"{res.config} | {chosen:.4f} | {best:.4f} | {chosen / best:.3f} |")
        results.append({"kernel": name, "seconds": secs, "ratio": chosen / best})
    data["tuning"] = results
    rep.add("Autotuning (GPU)", "Every configuration is compiled, pruned by the resource model, "
            "timed by do_bench; then every surviving one is timed again and the chosen one "
            "compared with the best (goal: within 5%, tuning under 30 s).\n\n"
            + "\n".join(lines))


def _even(g: int) -> int:
    """Grid x rounded up to the matmul example's cluster of 2 blocks (the extra block's
    tile lies past the matrix: its loads pad and its store writes nothing)."""
    return g + g % 2


def family_launch(rep: Report, gpu: bool, quick: bool, data: dict) -> None:
    out = _script("launch_overhead.py", ["--iters", "3000" if quick else "20000"])
    rep.add("Launch overhead", "```\n" + out.rstrip() + "\n```")


def family_compile(rep: Report, gpu: bool, quick: bool, data: dict) -> None:
    out = _script("compile_bench.py", ["--repeat", "1" if quick else "3"])
    # its headings sit below this section's
    rep.add("Compile time", re.sub(r"(?m)^(#+) ", lambda m: "##" + m.group(1) + " ", out))


def family_torch(rep: Report, gpu: bool, quick: bool, data: dict) -> None:
    if not gpu:
        rep.skip("torch MLP block (GPU)", "needs a GPU; tests/torch checks the operators and "
                 "the block's training on the emulator")
        return
    out = _script("torch_mlp.py", ["--sizes", "512x256", "2048x512"] if quick else [])
    rep.add("MLP block as Tile operators in PyTorch (forward+backward)",
            "```\n" + out.rstrip() + "\n```")


def _script(name: str, args: list[str]) -> str:
    env = dict(os.environ)
    env.setdefault("TILELANG_CACHE_DIR", os.path.join(tempfile.gettempdir(),
                                                      "tilelang-bench-cache"))
    p = subprocess.run([sys.executable, os.path.join(HERE, name), *args], capture_output=True,
                       text=True, env=env, timeout=3600)
    if p.returncode:
        raise RuntimeError(f"{name} exited {p.returncode}: "
                           f"{(p.stderr or p.stdout).strip().splitlines()[-1:]}")
    return p.stdout


# -- plots ------------------------------------------------------------------------------------

def plots(data: dict, folder: str, stem: str) -> list[str]:
    """One PNG per GPU family against size; [] when there is nothing to plot."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    made = []

    def save(fig, family):
        path = os.path.join(folder, f"{stem}-{family}.png")
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)
        made.append(path)

    if data.get("memory"):
        fams = [f for f in ("vadd", "softmax", "layernorm", "rmsnorm")
                if any(r["family"] == f for r in data["memory"])]
        fig, axes = plt.subplots(1, len(fams), figsize=(4 * len(fams), 3.4), squeeze=False)
        for ax, fam in zip(axes[0], fams):
            rows = [r for r in data["memory"] if r["family"] == fam]
            for who, label in (("tile", "tile"), ("torch", "torch"), ("triton", "Triton")):
                pts = [(r["size"] / 2**20, r[who + "_gbs"]) for r in rows if who + "_gbs" in r]
                if pts:
                    ax.plot(*zip(*pts), marker="o", label=label)
            ax.axhline(rows[0]["bw"], color="gray", linestyle="--", label="copy")
            ax.set_xscale("log", base=2)
            ax.set_title(fam)
            ax.set_xlabel("MiB moved")
            ax.set_ylabel("GB/s")
            ax.legend(fontsize=7)
        save(fig, "memory")
    if data.get("matmul"):
        fig, ax = plt.subplots(figsize=(5, 3.6))
        for dt in sorted({r["dtype"] for r in data["matmul"]}):
            rows = [r for r in data["matmul"] if r["dtype"] == dt]
            for who, label in (("tile", "tile"), ("cublas", "cuBLAS"), ("triton", "Triton")):
                pts = [(r["n"], r[who]) for r in rows if r.get(who) is not None]
                if pts:
                    ax.plot(*zip(*pts), marker="o", label=f"{label} {dt}")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("N (N x N x N)")
        ax.set_ylabel("TFLOP/s")
        ax.legend(fontsize=7)
        save(fig, "matmul")
    if data.get("attention"):
        keys = sorted({(r["d"], r["causal"]) for r in data["attention"]})
        fig, axes = plt.subplots(1, len(keys), figsize=(4 * len(keys), 3.4), squeeze=False)
        for ax, (d, causal) in zip(axes[0], keys):
            rows = [r for r in data["attention"] if (r["d"], r["causal"]) == (d, causal)]
            for who, label in (("tile", "tile"), ("torch", "SDPA"), ("triton", "Triton")):
                pts = [(r["seq"], r[who]) for r in rows if r.get(who) is not None]
                if pts:
                    ax.plot(*zip(*pts), marker="o", label=label)
            ax.set_xscale("log", base=2)
            ax.set_title(f"D={d}{' causal' if causal else ''}")
            ax.set_xlabel("sequence length")
            ax.set_ylabel("TFLOP/s")
            ax.legend(fontsize=7)
        save(fig, "attention")
    return made


# ---------------------------------------------------------------------------------------------

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer sizes and repetitions")
    ap.add_argument("--only", nargs="+", choices=FAMILIES, metavar="FAMILY",
                    help=f"run only these ({', '.join(FAMILIES)})")
    ap.add_argument("--out-dir", default=os.path.join(HERE, "results"))
    ap.add_argument("--no-write", action="store_true", help="print only")
    ap.add_argument("--gpu-only", action="store_true",
                    help="where a GPU times a family, leave out its emulator-count table (CPU "
                         "work a run without a GPU makes as well: a time-boxed GPU session "
                         "spends its seconds on the GPU)")
    args = ap.parse_args(argv)
    os.environ.setdefault("TILELANG_CACHE_DIR", os.path.join(tempfile.gettempdir(),
                                                             "tilelang-bench-cache"))
    rep = Report()
    reason = gpu_reason()
    gpu = reason is None
    rep.counts = not (gpu and args.gpu_only)
    title, slug = device_slug()
    date = datetime.date.today().isoformat()
    print(f"# Benchmarks, {date}, {title}")
    if not gpu:
        rep.skip("every GPU timing (memory, matmul, attention, tuning, GPU launches)", reason)
    data: dict = {}
    t0 = time.perf_counter()
    for fam in args.only or FAMILIES:
        fn = globals()[f"family_{fam}"]
        rep.family = fam
        try:
            fn(rep, gpu, args.quick, data)
        except Exception as e:               # one family failing must not lose the others
            rep.skip(fam, f"failed: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
    rep.family = ""
    wall = time.perf_counter() - t0
    if args.no_write:
        return 0
    os.makedirs(args.out_dir, exist_ok=True)
    stem = f"{date}-{slug}"
    try:
        import matplotlib  # noqa: F401
        made = plots(data, args.out_dir, stem)
        if not made:
            rep.skip("plots", "no GPU family measured here (the plots are of GPU timings "
                     "against size)")
    except ImportError:
        made = []
        rep.skip("plots", "matplotlib is not installed (pip install matplotlib)")
    env = [f"Python {platform.python_version()}"]
    for mod in ("numpy", "torch", "triton"):
        try:
            env.append(f"{mod} {__import__(mod).__version__}")
        except ImportError:
            pass
    import tilelang
    env.append(f"tilelang {tilelang.__version__}")
    run_line = (f"- `python3 benchmarks/run.py{' --quick' if args.quick else ''}"
                f"{' --only ' + ' '.join(args.only) if args.only else ''}"
                f"{' --gpu-only' if args.gpu_only else ''}` — "
                f"{', '.join(env)}; {wall:.0f} s.")
    path = os.path.join(args.out_dir, f"{stem}.md")
    if args.only:                 # add to the day's file: the other families stay
        runs, blocks = merge(path, rep, run_line)
    else:
        runs, blocks = [run_line], {f: b for f, b in rep.blocks.items() if f}
    pngs = sorted(n for n in os.listdir(args.out_dir)
                  if n.startswith(stem + "-") and n.endswith(".png"))
    body = f"# Benchmarks, {date}, {title}\n\n" + "\n".join(runs) + "\n"
    for fam in FAMILIES:
        if fam in blocks:
            body += f"\n<!-- family: {fam} -->\n\n{blocks[fam].strip()}\n"
    body += "\n<!-- end -->\n"
    if pngs:
        body += "\n## Plots\n\n" + "".join(f"![{n}]({n})\n" for n in pngs)
    if rep.skipped:
        body += "\n## Skipped in the last run\n\n" + "".join(f"- {x}\n" for x in rep.skipped)
    with open(path, "w", encoding="utf-8") as f:
        f.write(body)
    print(f"\nwritten: {path}" + "".join(f", {p}" for p in made))
    return 0


if __name__ == "__main__":
    sys.exit(main())
