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

A `const` default is one value for every target (only `@launch` values can be `by_target`),
and the example compiles for every target in tilelang.targets: its defaults are the cheapest
candidate that compiles for all of them (tests/tools/test_gemm_pick.py checks that they are);
a candidate that only fits sm_90a's shared memory (a 128 x 256 tile: 48 KiB a stage) is ranked
but marked.
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
_LAUNCH = re.compile(r"^@launch\(.*\)$", re.M)


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


def fits_everywhere(c: Candidate) -> bool:
    """Whether the candidate compiles for every target the example is built for (shared
    memory, registers a thread can hold, warp-group rules)."""
    for target in FIT_TARGETS:
        res = compile_source(source(c), str(EXAMPLE), CompileOptions(
            target=target, defines={"BM": str(c.bm), "BN": str(c.bn), "BK": str(c.bk)}),
            until="ptx")
        if not res.ok:
            return False
    return True


def example_defaults() -> Candidate:
    """examples/matmul.tile's own defaults as a Candidate."""
    text = EXAMPLE.read_text()
    consts = {n: int(re.search(rf"const {n}: i32 = (\d+)", text).group(1))
              for n in ("BM", "BN", "BK")}
    launch = _LAUNCH.search(text).group(0)
    threads = int(re.search(r"reqntid = \((\d+)", launch).group(1))
    cl = re.search(r"cluster = \((\d+)", launch)
    return Candidate(consts["BM"], consts["BN"], consts["BK"], threads,
                     int(cl.group(1)) if cl else 1)


def rank(cands=CANDIDATES) -> list[tuple[Candidate, float, dict, bool]]:
    """(candidate, cost of 4096^3, static figures, fits every target), cheapest first."""
    out = []
    for c in cands:
        res = compile_candidate(c)
        out.append((c, cost_4096(c, res), static(c, res), fits_everywhere(c)))
    return sorted(out, key=lambda r: r[1])


def pick(rows) -> Candidate:
    """The cheapest candidate that fits every target."""
    return next(c for c, _, _, fits in rows if fits)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    rows = rank()
    default, best = example_defaults(), pick(rows)
    lines = ["| configuration | cost of 4096^3 (millions) | registers | spill bytes | "
             "SASS per K-step | fits every target | pick | the example's default |",
             "|---|---|---|---|---|---|---|---|"]
    for c, cost, m, fits in rows:
        lines.append(f"| {c} | {cost / 1e6:.1f} | {m['registers']} | {m['spills']} | "
                     f"{m['per_k_step']} | {'yes' if fits else 'no'} | "
                     f"{'yes' if c == best else ''} | {'yes' if c == default else ''} |")
    today = datetime.date.today().isoformat()
    text = (f"# GEMM configuration pick, {today} (no GPU)\n\n`python3 benchmarks/gemm_pick.py`: "
            f"the autotuner's emulator cost model (issued warp-instructions + 8 x global "
            f"sectors + shared wavefronts) for a {SIZE}^3 f16 -> f32 product on {ARCH}, from "
            f"one cluster of blocks at K = {K_RUNS[0]} and {K_RUNS[1]} extrapolated to K = "
            f"{SIZE}; cheapest first. Fits every target: compiles for {', '.join(FIT_TARGETS)} "
            f"(a `const` default serves them all). SASS per K-step: the main loop (the consumers' in a "
            f"warp-specialized block) per BM x BN x BK multiply-adds over the multiplying "
            f"warps.\n\n" + "\n".join(lines) + "\n")
    out = Path(args.out) if args.out else ROOT / "benchmarks" / "results" / \
        f"gemm-pick-{today}-cpu.md"
    out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
