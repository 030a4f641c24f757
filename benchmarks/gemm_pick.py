"""Which configuration of examples/matmul.tile the tuner's cost model picks for a 4096^3
product on sm_90a, with each candidate's registers and SASS per K-step: no GPU needed.

    python3 benchmarks/gemm_pick.py [--out FILE.md]

The cost model is the autotuner's on the emulator (tilelang.testing.bench.EmulatorCounts.cost:
warp-instructions issued + 8 x 32-byte global sectors + shared-memory wavefronts,
docs/python-api.md). A 4096^3 product is too large to emulate, but its blocks all do the same
work: one cluster of blocks is run on operands of K = 256 and K = 512 (checked against NumPy),
the cost per block is extrapolated linearly in K to K = 4096 (the K loop's steady state is the
slope) and multiplied by the blocks a 4096^3 product has. The candidates differ in their tile
(the `const`s the tuner searches) and in their launch (threads, cluster), which the tuner
cannot search, so this script runs the model over both. Registers, spills and SASS per K-step
(the main loop, tilelang.tools.sass) are from nvJitLink's cubin.

The example's defaults differ per target (`by_target` on its `const`s and `@launch`,
docs/language.md "Per-target defaults"): on sm_90a they are the cheapest candidate that
compiles for sm_90a (tests/tools/test_gemm_pick.py checks it); every other target keeps
128 x 128 x 64 over one warp group in clusters of two, which every target fits with a ring of
two stages or more (the model runs sm_90a's code, so it says little of mma.sync's). The model
counts work, not latency: it does not see a ring's depth (2 stages of 96 KiB at BK = 128
against 4 of 48 KiB at BK = 64), which only a GPU can weigh.
"""

from __future__ import annotations

import argparse
import datetime
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tilelang.diagnostics import render_all                     # noqa: E402
from tilelang.driver import compile_source                      # noqa: E402
from tilelang.emulator import EmulatorDevice                    # noqa: E402
from tilelang.options import CompileOptions                     # noqa: E402
from tilelang.runtime.tensormap import encode_emulator, map_args  # noqa: E402
from tilelang.testing.bench import EmulatorCounts              # noqa: E402

EXAMPLE = ROOT / "examples" / "matmul.tile"
ARCH = "sm_90a"
SIZE = 4096
K_RUNS = (256, 512)
_LAUNCH = re.compile(r"^@launch\((?:[^()]|\([^()]*\)|\((?:[^()]|\([^()]*\))*\))*\)$", re.M)


@dataclass(frozen=True)
class Candidate:
    bm: int
    bn: int
    bk: int
    threads: int
    cluster: int                  # CTAs along x (1: none)

    @property
    def launch(self) -> str:
        c = f", cluster = ({self.cluster}, 1, 1)" if self.cluster > 1 else ""
        return f"@launch(reqntid = ({self.threads}, 1, 1), maxnreg = by_target(sm_90a = 168){c})"

    def __str__(self) -> str:
        c = f", clusters of {self.cluster}" if self.cluster > 1 else ""
        return f"{self.bm} x {self.bn} x {self.bk}, {self.threads} threads{c}"


CANDIDATES = (
    Candidate(128, 128, 64, 128, 2), Candidate(128, 128, 64, 128, 1),
    Candidate(128, 128, 64, 384, 1), Candidate(128, 256, 64, 256, 1),
    Candidate(128, 256, 64, 256, 2), Candidate(128, 256, 64, 384, 1),
    Candidate(256, 128, 64, 256, 1), Candidate(256, 128, 64, 256, 2),
    # BK = 128: half the loop's iterations (and its barrier, waits and TMA issues) per K
    Candidate(128, 128, 128, 128, 2), Candidate(128, 256, 128, 256, 1),
    Candidate(128, 256, 128, 256, 2), Candidate(128, 256, 128, 384, 1),
    Candidate(256, 128, 128, 256, 2),
)


def source(c: Candidate) -> str:
    return _LAUNCH.sub(c.launch, EXAMPLE.read_text(), count=1)


def compile_candidate(c: Candidate):
    res = compile_source(source(c), str(EXAMPLE), CompileOptions(
        target=ARCH, defines={"BM": str(c.bm), "BN": str(c.bn), "BK": str(c.bk)}), until="ptx")
    if not res.ok:
        raise SystemExit(f"{c}: {render_all(res.diagnostics)}")
    return res


def block_cost(c: Candidate, res, k: int) -> float:
    """The cost model's figure per block for one cluster of blocks over a K = k product."""
    art = res.codegen.kernel("matmul")
    m, n = c.bm * c.cluster, c.bn
    dev = EmulatorDevice()
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    ptr = {"a": dev.to_device(a), "b": dev.to_device(b), "c": dev.malloc(4 * m * n)}
    shapes = {"a": (m, k), "b": (k, n), "c": (m, n)}
    args = []
    for p in art.params:                     # docs/abi.md: address, extents, strides
        r, cols = shapes[p.name]
        args += [np.uint64(int(ptr[p.name])), np.int64(r), np.int64(cols), np.int64(cols),
                 np.int64(1)]
    for spec in art.tensor_maps:
        r, cols = shapes[spec.array]
        args.append(encode_emulator(map_args(spec, int(ptr[spec.array]), (r, cols), (cols, 1))))
    rep = dev.launch(dev.load_module(res.ptx).get_function("matmul"), (c.cluster, 1, 1),
                     tuple(art.block), args, cluster=art.cluster, shared_mem=art.dynamic_smem)
    got = dev.from_device(ptr["c"], (m, n), np.float32)
    ref = a.astype(np.float64) @ b
    bound = (k / 16 + 1) * 2.0 ** -23 * (np.abs(a.astype(np.float64)) @ np.abs(b))
    if not np.all(np.abs(got - ref) <= bound):
        raise SystemExit(f"{c}: wrong result on the emulator")
    counts = EmulatorCounts()
    counts.add(rep)
    return counts.cost / c.cluster


def cost_4096(c: Candidate, res) -> float:
    """Cost of the whole 4096^3 product: per-block cost at K = 4096 (linear in K from the two
    runs) times the number of blocks."""
    lo, hi = (block_cost(c, res, k) for k in K_RUNS)
    per_block = lo + (hi - lo) / (K_RUNS[1] - K_RUNS[0]) * (SIZE - K_RUNS[0])
    return per_block * (SIZE // c.bm) * (SIZE // c.bn)


def static(c: Candidate, res) -> dict:
    from benchmarks.hopper_static import analyze
    consumers = c.threads // 32 - (4 if "setmaxnreg" in res.ptx else 0)
    return analyze(res.ptx, c.bm * c.bn * c.bk // consumers)


FIT_TARGETS = ("sm_80", "sm_86", "sm_89", "sm_90", "sm_90a", "sm_100a", "sm_120")


def compiles_for(c: Candidate) -> tuple[str, ...]:
    """The targets the candidate compiles for (shared memory, registers a thread can hold,
    warp-group rules)."""
    ok = []
    for target in FIT_TARGETS:
        res = compile_source(source(c), str(EXAMPLE), CompileOptions(
            target=target, defines={"BM": str(c.bm), "BN": str(c.bn), "BK": str(c.bk)}),
            until="ptx")
        if res.ok:
            ok.append(target)
    return tuple(ok)


def example_defaults(target: str = ARCH) -> Candidate:
    """examples/matmul.tile's defaults on `target` (its `by_target`s resolved) as a
    Candidate."""
    from tilelang.driver import inspect_source
    sig = inspect_source(EXAMPLE.read_text(), str(EXAMPLE), CompileOptions(target=target))
    k = sig.kernels["matmul"]
    consts = {p.name: p.default for p in k.params if p.kind == "const"}
    threads = k.launch.reqntid[0] * k.launch.reqntid[1] * k.launch.reqntid[2]
    from tilelang.targets import TARGETS
    # a target without clusters drops the directive (warning E0720)
    cluster = k.launch.cluster[0] if k.launch.cluster and TARGETS[target].clusters else 1
    return Candidate(consts["BM"], consts["BN"], consts["BK"], threads, cluster)


def rank(cands=CANDIDATES) -> list[tuple[Candidate, float, dict, tuple[str, ...]]]:
    """(candidate, cost of 4096^3, static figures, targets it compiles for), cheapest
    first."""
    out = []
    for c in cands:
        res = compile_candidate(c)
        out.append((c, cost_4096(c, res), static(c, res), compiles_for(c)))
    return sorted(out, key=lambda r: r[1])


def pick(rows, target: str = ARCH) -> Candidate:
    """The cheapest candidate that compiles for `target` (sm_90a's default)."""
    return next(c for c, _, _, ok in rows if target in ok)


def default_resources(target: str) -> tuple[int, int]:
    """(registers, spill bytes) of the example as written on `target` (nvJitLink)."""
    res = compile_source(EXAMPLE.read_text(), str(EXAMPLE), CompileOptions(target=target),
                         until="cubin")
    if not res.ok:
        raise SystemExit(f"{target}: {render_all(res.diagnostics)}")
    (r,) = res.link.resources.values()
    return r.registers, r.spill_stores + r.spill_loads


def _fits(ok: tuple[str, ...]) -> str:
    return "all" if len(ok) == len(FIT_TARGETS) else ", ".join(ok) or "none"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    rows = rank()
    best = pick(rows)
    default = example_defaults(ARCH)
    lines = ["| configuration | cost of 4096^3 (millions) | registers | spill bytes | "
             "SASS per K-step | SASS per 64 of K | compiles for | pick on sm_90a | "
             "the example's sm_90a default |", "|---|---|---|---|---|---|---|---|---|"]
    for c, cost, m, ok in rows:
        per64 = round(m["per_k_step"] * 64 / c.bk, 1) if m["per_k_step"] else None
        lines.append(f"| {c} | {cost / 1e6:.1f} | {m['registers']} | {m['spills']} | "
                     f"{m['per_k_step']} | {per64} | {_fits(ok)} | "
                     f"{'yes' if c == best else ''} | {'yes' if c == default else ''} |")
    per = ["| target | the example's default | registers | spill bytes |", "|---|---|---|---|"]
    for target in FIT_TARGETS:
        regs, spills = default_resources(target)
        per.append(f"| {target} | {example_defaults(target)} | {regs} | {spills} |")
    today = datetime.date.today().isoformat()
    text = (f"# GEMM configuration pick, {today} (no GPU)\n\n`python3 benchmarks/gemm_pick.py`: "
            f"the autotuner's emulator cost model (issued warp-instructions + 8 x global "
            f"sectors + shared wavefronts) for a {SIZE}^3 f16 -> f32 product on {ARCH}, from "
            f"one cluster of blocks at K = {K_RUNS[0]} and {K_RUNS[1]} extrapolated to K = "
            f"{SIZE}; cheapest first. \"Compiles for\": of {', '.join(FIT_TARGETS)}. SASS per "
            f"K-step: the main loop (the consumers' in a warp-specialized block) per BM x BN x "
            f"BK multiply-adds over the multiplying warps; per 64 of K: the same scaled to "
            f"BK = 64 (128 x 128 x 64 / 4 warps = 128 x 256 x 64 / 8: the same work a warp). "
            f"The example's defaults are per target (`by_target`): sm_90a takes the cheapest "
            f"candidate that compiles for sm_90a; every other target keeps 128 x 128 x 64 over "
            f"one warp group, which every target fits with a ring of two stages or more (the "
            f"model runs sm_90a's code). The model counts work, not latency: it does not see "
            f"a ring's depth (2 stages of 96 KiB at BK = 128 against 4 of 48 KiB at BK = 64)."
            "\n\n" + "\n".join(lines) + "\n\nThe example as written on each target "
            "(its `by_target`s resolved; nvJitLink):\n\n" + "\n".join(per) + "\n")
    out = Path(args.out) if args.out else ROOT / "benchmarks" / "results" / \
        f"gemm-pick-{today}-cpu.md"
    out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
