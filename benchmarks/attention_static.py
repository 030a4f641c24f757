"""Static comparison of attention on sm_90a, Tile against Triton's tutorial attention: no GPU.

    python3 benchmarks/attention_static.py [--triton-python PY] [--out FILE.md]
    python3 benchmarks/attention_static.py --backward     # the backward rows only, printed
    python3 benchmarks/attention_static.py --backward --tiles 32,128,128,32   # other tiles
    python3 benchmarks/attention_static.py --arch sm_100a  # the forward on sm_100a (below)

For each configuration both compilers build the same tiles with the same warps, and both PTX
texts are assembled by the same nvJitLink for sm_90a and disassembled with cuobjdump
(tilelang.tools.sass) to count registers, spill bytes and the SASS instructions of the main
loop per key tile.

Forward (five configurations): `examples/attention.tile`'s f16 kernel, launch width set to the
configuration's warps (the tile constants by `defines`, as `tilec -D` does), against
benchmarks/triton_ref/gen_attention_tutorial.py: the structure of Triton's fused-attention
tutorial in its Hopper form (tensor descriptors, so TMA loads; unmasked key loop plus a masked
loop over the causal diagonal; 3 stages). One key tile is 2 * BM * BN * D multiply-adds over the
block's warps; the loop counted is the one with the most multiply-adds (for causal kernels
Triton's off-diagonal loop, which runs for all but one key tile of a block).

Backward: `examples/attention_backward.tile` (when present) against the tutorial's backward
kernel with the same tiles: the dK/dV loop (one step: a query tile of BM1 rows against the
block's BN1 keys, four products) and the dQ loop (one step: a key tile of BN2 keys against the
block's BM2 queries, three products), counted separately.

sm_100a (`--arch sm_100a`, forward only): both at 128 x 128 over 4 warps, D = 64 and 128,
causal or not (examples/attention.tile's sm_100a default: S, P and O in tensor memory), Triton
compiled for GPUTarget('cuda', 100, 32), where its `tl.dot`s become tcgen05.mma with the
accumulators in tensor memory. UTCHMMA carries no shape in the disassembly, so the loop
counted is the one with the most UTCHMMA (the shorter on ties: the unmasked loop) and a key
tile is D / 16 + BN / 16 of them (one K = 16 instruction each, both compilers). Shared memory:
Tile's static and dynamic bytes, Triton's metadata. The table goes to
benchmarks/results/attention-static-sm100a-<date>-cpu.md (or --out).

Triton runs in its own Python (`--triton-python`, else $TRITON_PYTHON, else this Python when it
can import triton); without one the Triton columns are left empty with a note. The table goes
to benchmarks/results/attention-static-<date>-cpu.md (or --out).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tilelang.codegen.target.link import link_ptx               # noqa: E402
from tilelang.diagnostics import render_all                     # noqa: E402
from tilelang.driver import compile_source                      # noqa: E402
from tilelang.options import CompileOptions                     # noqa: E402
from tilelang.targets import get_target                         # noqa: E402
from tilelang.tools import sass                                 # noqa: E402

ARCH = "sm_90a"
GEN = ROOT / "benchmarks" / "triton_ref" / "gen_attention_tutorial.py"


@dataclass(frozen=True)
class Forward:
    name: str
    BM: int
    BN: int
    D: int
    causal: bool
    warps: int

    def step_macs(self) -> int:
        """Multiply-adds per warp of one key tile (Q Kᵀ and P V)."""
        return 2 * self.BM * self.BN * self.D // self.warps


FORWARD = (Forward("D64, 64x64, 4 warps", 64, 64, 64, False, 4),
           Forward("D64 causal", 64, 64, 64, True, 4),
           Forward("D128, 64x64, 4 warps", 64, 64, 128, False, 4),
           Forward("D128 causal", 64, 64, 128, True, 4),
           Forward("D128, 128x128, 8 warps", 128, 128, 128, False, 8))

# sm_100a (--arch sm_100a): the example's default tile on both sides
FORWARD_SM100 = (Forward("D64, 128x128, 4 warps", 128, 128, 64, False, 4),
                 Forward("D64 causal", 128, 128, 64, True, 4),
                 Forward("D128, 128x128, 4 warps", 128, 128, 128, False, 4),
                 Forward("D128 causal", 128, 128, 128, True, 4))

# dK/dV for BN1 keys walking query tiles of BM1, dQ for BM2 queries walking key tiles of BN2;
# 4 warps. examples/attention_backward.tile's defaults: the tutorial's (32, 128, 128, 32)
# halved but for BN2 (at the tutorial's, Triton's kernel spills and Tile's keeps its registers
# on sm_90a but not on every mma.sync target; `--tiles` measures them)
BACKWARD = {"BM1": 16, "BN1": 64, "BM2": 64, "BN2": 32, "D": 64, "warps": 4}
BWD_LOOPS = (("dK/dV", 4 * BACKWARD["BM1"] * BACKWARD["BN1"]),
             ("dQ", 3 * BACKWARD["BM2"] * BACKWARD["BN2"]))


def set_backward_tiles(bm1: int, bn1: int, bm2: int, bn2: int) -> None:
    """Both compilers' backward tiles (and what one step of each loop is) for this run."""
    global BWD_LOOPS
    BACKWARD.update(BM1=bm1, BN1=bn1, BM2=bm2, BN2=bn2)
    BWD_LOOPS = (("dK/dV", 4 * bm1 * bn1), ("dQ", 3 * bm2 * bn2))


def triton_python(arg: str | None) -> str | None:
    for cand in (arg, os.environ.get("TRITON_PYTHON")):
        if cand and Path(cand).exists():
            return cand
    try:
        import triton  # noqa: F401
        return sys.executable
    except ImportError:
        return None


def triton_ptx(py: str, forward: bool = True, backward: bool = True,
               shared: dict | None = None) -> tuple[dict[str, str], str]:
    """PTX per configuration name ("fwd0".., "bwd", "bwd_causal") and Triton's version
    (without the forward configurations when `forward` is false, the backward ones when
    `backward` is); `shared` gets each configuration's shared-memory bytes."""
    arch = int(ARCH[3:].rstrip("a"))
    configs = [{"name": f"fwd{i}", "kind": "fwd", "BM": f.BM, "BN": f.BN, "D": f.D,
                "causal": f.causal, "warps": f.warps, "stages": 3, "arch": arch}
               for i, f in enumerate(forward_configs()) if forward]
    for causal in (False, True) if backward else ():
        configs.append(dict(BACKWARD, name="bwd_causal" if causal else "bwd", kind="bwd",
                            causal=causal, stages=5, arch=arch))
    env = dict(os.environ, TRITON_DEFAULT_FP_FUSION="1")
    with tempfile.TemporaryDirectory(prefix="tile-attn-static-") as d:
        proc = subprocess.run([py, str(GEN), "--out", d, "--config", json.dumps(configs)],
                              capture_output=True, text=True, timeout=900, env=env)
        if proc.returncode:
            raise RuntimeError(f"Triton failed:\n{proc.stderr[-3000:]}")
        version = json.loads(proc.stdout.strip().splitlines()[-1])["triton"]
        for c in configs:
            if shared is not None:
                info = json.loads((Path(d) / f"{c['name']}.json").read_text())
                shared[c["name"]] = info["shared_bytes"]
        return {c["name"]: (Path(d) / f"{c['name']}.ptx").read_text() for c in configs}, version


def forward_configs() -> tuple[Forward, ...]:
    return FORWARD_SM100 if ARCH == "sm_100a" else FORWARD


def forward_kernel(src: str) -> str:
    """The f16 forward kernel's name: `attention_f16` while the example has one kernel per
    dtype, else its first `attention*` kernel (a dtype-generic one)."""
    names = re.findall(r"\bkernel\s+(attention\w*)\s*\(", src)
    if not names:
        raise SystemExit("examples/attention.tile has no attention kernel")
    return "attention_f16" if "attention_f16" in names else names[0]


# the forward example's launch width: a `by_target` (256 threads on sm_90a, 128 elsewhere) or,
# in older checkouts, one tuple
LAUNCH = re.compile(r"reqntid\s*=\s*(by_target\((?:[^()]|\([^()]*\))*\)"
                    r"|\(\s*\d+\s*,\s*1\s*,\s*1\s*\))")


def with_threads(src: str, threads: int) -> str:
    """The example with its `reqntid` set to `threads` whatever its default (the tile
    constants come in as defines; the launch width is an attribute): each configuration is
    measured explicitly, never at the example's default."""
    out, n = LAUNCH.subn(f"reqntid = ({threads}, 1, 1)", src)
    if n == 0:
        raise SystemExit("examples/attention.tile: no `reqntid = ...` to set")
    return out


def tile_forward(f: Forward, shared: dict | None = None) -> str:
    """The PTX of the example's f16 forward kernel for `f` (`shared`, if given, gets its
    static and dynamic shared-memory bytes under "tile")."""
    src = (ROOT / "examples" / "attention.tile").read_text()
    defines = {"BM": str(f.BM), "BN": str(f.BN), "D": str(f.D),
               "CAUSAL": "true" if f.causal else "false"}
    res = compile_source(with_threads(src, 32 * f.warps), "attention.tile",
                         CompileOptions(target=ARCH, defines=defines),
                         kernels=[forward_kernel(src)], until="ptx")
    if not res.ok:
        raise SystemExit(render_all(res.diagnostics))
    if shared is not None:
        k = res.codegen.kernels[0]
        shared["tile"] = k.static_smem + k.dynamic_smem
    return res.ptx


def tile_backward(causal: bool) -> dict[str, str] | None:
    """{kernel: ptx} of examples/attention_backward.tile's kernels, None while it is absent."""
    path = ROOT / "examples" / "attention_backward.tile"
    if not path.exists():
        return None
    defines = {k: str(BACKWARD[k]) for k in ("BM1", "BN1", "BM2", "BN2", "D")}
    defines["CAUSAL"] = "true" if causal else "false"
    res = compile_source(path.read_text(), path.name, CompileOptions(target=ARCH,
                                                                     defines=defines),
                         until="ptx")
    if not res.ok:
        raise SystemExit(render_all(res.diagnostics))
    return {path.stem: res.ptx}


def link(ptx: str) -> dict[str, tuple[object, list]]:
    """{function: (resources, SASS)} of one PTX module assembled for sm_90a."""
    result = link_ptx(ptx, get_target(ARCH))
    code = sass.disassemble(result.cubin)
    return {n: (r, code[n]) for n, r in result.resources.items() if n in code}


def loop_stats(res, instrs, lp: sass.Loop | None, step_macs: int) -> dict:
    per = None
    if lp is not None:
        per = round(len(lp.instrs) / (lp.macs / step_macs), 1)
    return {"registers": res.registers, "spills": res.spill_stores + res.spill_loads,
            "local": sum(1 for i in instrs if i.op in ("LDL", "STL")), "per_step": per}


def forward_stats(ptx: str, f: Forward) -> dict:
    (res, instrs), = link(ptx).values()
    if ARCH == "sm_100a":
        return tc5_stats(res, instrs, f)
    return loop_stats(res, instrs, sass.main_loop(instrs), f.step_macs())


def tc5_stats(res, instrs, f: Forward) -> dict:
    """loop_stats on sm_100a: the loop with the most UTCHMMA (the shorter on ties), a key tile
    being D / 16 + BN / 16 of them (module docstring)."""
    def count(lp):
        return sum(1 for i in lp.instrs if i.op == "UTCHMMA")
    lps = [lp for lp in sass.loops(instrs) if count(lp)]
    out = {"registers": res.registers, "spills": res.spill_stores + res.spill_loads,
           "local": sum(1 for i in instrs if i.op in ("LDL", "STL")), "per_step": None}
    if lps:
        most = max(count(lp) for lp in lps)
        lp = min((lp for lp in lps if count(lp) == most), key=lambda x: len(x.instrs))
        out["per_step"] = round(len(lp.instrs) / (most / ((f.D + f.BN) // 16)), 1)
        out["utchmma"] = most
    return out


def sm100_table(rows) -> str:
    lines = ["| configuration | Tile registers | Tile spills | Tile shared KiB | Tile SASS per "
             "key tile | Triton registers | Triton spills | Triton shared KiB | Triton SASS "
             "per key tile | Tile / Triton |", "|" + "---|" * 10]
    for name, ours, theirs in rows:
        def kib(m):
            return "-" if m is None or m.get("shared") is None else f"{m['shared'] / 1024:.1f}"
        lines.append(f"| {name} | {cell(ours, 'registers')} | {cell(ours, 'spills')} | "
                     f"{kib(ours)} | {cell(ours, 'per_step')} | {cell(theirs, 'registers')} | "
                     f"{cell(theirs, 'spills')} | {kib(theirs)} | {cell(theirs, 'per_step')} | "
                     f"{ratio(ours, theirs)} |")
    return "\n".join(lines)


def main_sm100(args) -> int:
    """`--arch sm_100a`: the forward rows on sm_100a (module docstring)."""
    py = triton_python(args.triton_python)
    theirs, version, note, shared = {}, None, "", {}
    if py is None:
        note = "\nTriton not available: its columns are empty.\n"
    else:
        theirs, version = triton_ptx(py, backward=False, shared=shared)
    rows = []
    for i, f in enumerate(FORWARD_SM100):
        t = None
        if theirs:
            t = forward_stats(theirs[f"fwd{i}"], f)
            t["shared"] = shared.get(f"fwd{i}")
        mine_shared: dict = {}
        ours = forward_stats(tile_forward(f, mine_shared), f)
        ours["shared"] = mine_shared.get("tile")
        rows.append((f.name, ours, t))
    today = datetime.date.today().isoformat()
    text = (f"# Attention static comparison on sm_100a, {today} (no GPU)\n\n"
            f"`python3 benchmarks/attention_static.py --arch sm_100a`: f16, both PTX texts "
            f"assembled by the same nvJitLink for sm_100a, SASS counted from the cubin "
            f"(cuobjdump).\n\n"
            f"- Tile: `examples/attention.tile`'s f16 kernel at its sm_100a default (128 x 128, "
            f"4 warps): S = Q K^T in tensor memory read a row a thread, P packed into tensor "
            f"memory over S and P V issued with A from tensor memory, O kept in tensor memory "
            f"across the key loop and rescaled there (skipped where the factor is 1); "
            f"K and V by cp.async, one issuing thread, each product waited for.\n"
            f"- Triton {version or '(absent)'}: benchmarks/triton_ref/gen_attention_tutorial.py "
            f"(the tutorial's structure: tensor descriptors, unmasked loop plus the masked "
            f"diagonal, 3 stages, FP fusion on) for GPUTarget('cuda', 100, 32), the same "
            f"tile and warps.\n"
            f"- The loop counted: the one with the most UTCHMMA (the unmasked one); a key tile "
            f"is D / 16 + BN / 16 UTCHMMA.\n\n" + sm100_table(rows) + "\n" + note)
    out = Path(args.out) if args.out else \
        ROOT / "benchmarks" / "results" / f"attention-static-sm100a-{today}-cpu.md"
    out.write_text(text)
    print(text)
    return 0


def backward_stats(ptx_by_kernel: dict[str, str]) -> dict[str, dict]:
    """Per backward loop (dK/dV, dQ): the stats of the shortest innermost tensor-core loop of
    the module whose tensor-core multiply-adds per pass are one step of that loop (four products
    of BM1 x BN1 x D per dK/dV step, three of BM2 x BN2 x D per dQ step)."""
    warps = BACKWARD["warps"]
    D = BACKWARD["D"]
    found: dict[str, dict] = {}
    for ptx in ptx_by_kernel.values():
        for res, instrs in link(ptx).values():
            for lp in innermost_tensor_loops(instrs):
                for name, products in BWD_LOOPS:
                    step = products * D // warps
                    hgmma = sum(sass.macs(i) for i in lp.instrs if i.op in sass.TENSOR_OPS)
                    if hgmma != step:
                        continue
                    m = loop_stats(res, instrs, lp, step)
                    # causal kernels have a masked loop over the diagonal and an unmasked one
                    # for the rest: the unmasked (shorter) one is the steady state
                    if name not in found or m["per_step"] < found[name]["per_step"]:
                        found[name] = m
    return found


def innermost_tensor_loops(instrs: list[sass.Instr]) -> list[sass.Loop]:
    """Loops with tensor-core instructions that contain no other such loop."""
    lps = [lp for lp in sass.loops(instrs)
           if any(i.op in sass.TENSOR_OPS for i in lp.instrs)]
    return [lp for lp in lps
            if not any(o is not lp and lp.start <= o.start and o.end <= lp.end for o in lps)]


def cell(m: dict | None, key: str) -> str:
    if m is None or m.get(key) is None:
        return "-"
    return str(m[key])


def ratio(a: dict | None, b: dict | None) -> str:
    if not a or not b or a.get("per_step") is None or b.get("per_step") is None:
        return "-"
    return f"{a['per_step'] / b['per_step']:.2f}"


def table(rows: list[tuple[str, dict | None, dict | None]], unit: str) -> str:
    lines = [f"| configuration | Tile registers | Tile spills | Tile SASS per {unit} | "
             f"Triton registers | Triton spills | Triton SASS per {unit} | Tile / Triton |",
             "|" + "---|" * 8]
    for name, ours, theirs in rows:
        lines.append(f"| {name} | {cell(ours, 'registers')} | {cell(ours, 'spills')} | "
                     f"{cell(ours, 'per_step')} | {cell(theirs, 'registers')} | "
                     f"{cell(theirs, 'spills')} | {cell(theirs, 'per_step')} | "
                     f"{ratio(ours, theirs)} |")
    return "\n".join(lines)


def backward_rows(theirs: dict[str, str]) -> list[tuple[str, dict | None, dict | None]]:
    rows = []
    for causal in (False, True):
        ours = tile_backward(causal)
        mine = backward_stats(ours) if ours else {}
        tri = backward_stats({"": theirs["bwd_causal" if causal else "bwd"]}) if theirs else {}
        for name, _ in BWD_LOOPS:
            label = f"D64 {name}{' causal' if causal else ''}"
            rows.append((label, mine.get(name), tri.get(name)))
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--triton-python")
    ap.add_argument("--out")
    ap.add_argument("--backward", action="store_true",
                    help="only the backward rows, printed (written only with --out)")
    ap.add_argument("--tiles", help="the backward tiles BM1,BN1,BM2,BN2 (with --backward; "
                    "default: %s)" % ",".join(str(BACKWARD[k]) for k in ("BM1", "BN1", "BM2",
                                                                          "BN2")))
    ap.add_argument("--arch", choices=("sm_90a", "sm_100a"), default="sm_90a",
                    help="sm_100a: the forward rows on sm_100a (module docstring)")
    args = ap.parse_args(argv)
    global ARCH
    ARCH = args.arch
    if ARCH == "sm_100a" and (args.backward or args.tiles):
        ap.error("--arch sm_100a compares the forward only")
    if args.tiles:
        if not args.backward:
            ap.error("--tiles needs --backward")
        try:
            bm1, bn1, bm2, bn2 = (int(x) for x in args.tiles.split(","))
        except ValueError:
            ap.error("--tiles takes four integers: BM1,BN1,BM2,BN2")
        set_backward_tiles(bm1, bn1, bm2, bn2)
    if not sass.tools_available():
        print("cuobjdump/nvdisasm not found (pip install nvidia-cuda-cuobjdump "
              "nvidia-cuda-nvdisasm)", file=sys.stderr)
        return 1
    if ARCH == "sm_100a":
        return main_sm100(args)
    py = triton_python(args.triton_python)
    theirs, version, note = {}, None, ""
    if py is None:
        note = "\nTriton not available: its columns are empty.\n"
    else:
        theirs, version = triton_ptx(py, forward=not args.backward)
    bwd_rows = backward_rows(theirs)
    if args.backward:
        text = table(bwd_rows, "step") + "\n" + note
        if args.out:
            Path(args.out).write_text(text)
        print(text)
        return 0
    fwd_rows = []
    for i, f in enumerate(FORWARD):
        t = forward_stats(theirs[f"fwd{i}"], f) if theirs else None
        fwd_rows.append((f.name, forward_stats(tile_forward(f), f), t))
    if not (ROOT / "examples" / "attention_backward.tile").exists():
        note += "\nexamples/attention_backward.tile is not written yet: Tile's backward " \
                "columns are empty.\n"
    today = datetime.date.today().isoformat()
    b = BACKWARD
    text = (f"# Attention static comparison, {today} (no GPU)\n\n"
            f"`python3 benchmarks/attention_static.py`: sm_90a, f16, both PTX texts assembled "
            f"by the same nvJitLink, SASS counted from the cubin (cuobjdump).\n\n"
            f"- Tile: `examples/attention.tile`'s f16 kernel compiled by `tilelang` for "
            f"sm_90a with the configuration's tile constants as defines and "
            f"`reqntid = (32 * warps, 1, 1)`.\n"
            f"- Triton {version or '(absent)'}: benchmarks/triton_ref/gen_attention_tutorial.py, "
            f"the structure of Triton's fused-attention tutorial in its Hopper form (Q, K, V, "
            f"O as host tensor descriptors, TMA loads; the key loop split into an unmasked "
            f"loop and the masked causal diagonal; 3 stages; FP fusion on), compiled for "
            f"GPUTarget('cuda', 90, 32) with the same tiles and warps. Like the tutorial it "
            f"requires the sequence length to be a multiple of BN; Tile's kernel masks a "
            f"ragged last tile.\n"
            f"- The loop counted: the backward branch with the most multiply-adds (ranges "
            f"that hold the function's EXIT are out-of-line wait retries, not loops). A key "
            f"tile: 2 * BM * BN * D multiply-adds over the warps. For causal kernels Triton's "
            f"loop is its unmasked one.\n\n"
            f"## Forward: SASS per key tile\n\n" + table(fwd_rows, "key tile") + "\n\n"
            f"## Backward: SASS per step\n\nTiles: dK/dV for BN1 = {b['BN1']} "
            f"keys, a step is a query tile of BM1 = {b['BM1']} rows (four products); dQ for "
            f"BM2 = {b['BM2']} queries, a step is a key tile of BN2 = {b['BN2']} keys (three "
            f"products); D = {b['D']}, {b['warps']} warps (the tutorial's 32, 128, 128, 32 "
            f"halved but for BN2: at the tutorial's, Triton's spills); Triton with pointer "
            f"loads and 5 stages, as the tutorial. Tile: examples/attention_backward.tile's "
            f"`attention_bwd_dkdv` and `attention_bwd_dq`.\n\n" + table(bwd_rows, "step")
            + "\n" + note)
    out = Path(args.out) if args.out else \
        ROOT / "benchmarks" / "results" / f"attention-static-{today}-cpu.md"
    out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
