"""Static comparison on Blackwell (sm_100a and sm_120a) of Tile's matmul with Triton 3.9's:
no GPU needed.

    python3 benchmarks/blackwell_static.py [--triton-python PY] [--out FILE.md]

Both sides at the same tile, 128 x 128 x 64 with 4 warps, f16 -> f32, operands contiguous and
16-byte aligned:

* Tile: `examples/matmul.tile` as written (its defaults are that tile), compiled for each
  target with the facts `tilec` assumes. sm_100a: whatever the example's product lowers to
  there (tcgen05 with the accumulator in tensor memory today); sm_120a: the mma.sync loop with
  TMA operand rings (docs/codegen.md, "sm_120a").
* Triton: its best form on each target, host tensor descriptors
  (benchmarks/triton_ref/gen_tma_matmul_ptx.py, 3 stages): on sm_100a TMA loads and
  `tcgen05.mma` into tensor memory, on sm_120a TMA loads, `ldmatrix` and `mma.sync`.

Both PTX texts are assembled by the same nvJitLink for the target and disassembled with
cuobjdump (tilelang.tools.sass) for registers, spills, local-memory instructions, shared
memory (Tile: static and dynamic; Triton: its metadata's) and SASS instructions per K-step of
the main loop (the backward-branch loop with the most multiply-adds; one K-step is
BM * BN * BK multiply-adds, BM * BN * BK / warps a warp). tcgen05's UTCHMMA carries no shape
that the disassembly shows, so on sm_100a the main loop is the backward-branch loop with the
most UTCHMMA (innermost on ties) and its K-steps are its UTCHMMA over BK / 16 (one
M = 128, N = BN, K = 16 instruction per 16 of K, as both sides issue them).

A second table compares the block-scaled products (MXFP8: e4m3 operands, one ue8m0 scale per
32 along K) with Triton's `tl.dot_scaled` (benchmarks/triton_ref/gen_scaled_matmul_ptx.py's
kernel, 4 warps, 2 stages) at the same tiles: examples/matmul_mxfp8.tile as written (64 x 64 x
64: block-scaled mma.sync on sm_120a; on sm_100a both compilers dequantize to bf16 and use
tcgen05 kind::f16, the block-scaled kinds taking M = 128) and, on sm_100a, the same kernel at
128 x 64 x 64 (block-scaled tcgen05 on both sides). Its SASS per K-step: the main loop's
instructions over its tensor-core instructions per K-step (QMMA: BM * BN * BK / (16 * 8 * 32)
/ warps a warp; UTCHMMA: BK / 16; UTCQMMA: BK / 32). NVFP4 rows (packed e2m1 operands, one
f8e4m3 scale per 16 along K; Triton's kernel with `--fmt e2m1 --scale e4m3`) compare
examples/matmul_nvfp4.tile as written (64 x 64 x 64 on sm_120a, 128 x 64 x 64 on sm_100a)
and at Triton's fixture tile 128 x 64 x 128 on sm_120a: OMMA (mma.sync m16n8k64) is
BM * BN * BK / (16 * 8 * 64) / warps a warp per K-step, UTCOMMA (tcgen05 kind::mxf4nvf4)
BK / 64.

Triton runs in its own Python (`--triton-python`, else $TRITON_PYTHON, else
/tmp/tritonenv/bin/python, else this Python when it imports triton); without one its rows
are left out with a note. The table goes to benchmarks/results/blackwell-static-<date>-cpu.md
(or --out).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
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
from tilelang.tools import sass                                  # noqa: E402

TILE = (128, 128, 64)
WARPS = 4
STAGES = 3
TARGETS = ("sm_100a", "sm_120a")
TC_OPS = ("HMMA", "UTCHMMA", "UTCQMMA", "UTCIMMA")

TRITON = r'''
import json, os, sys, tempfile
os.environ.setdefault("TRITON_CACHE_DIR", tempfile.mkdtemp(prefix="triton-cache-"))
os.environ.setdefault("TRITON_DISABLE_LINE_INFO", "1")
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
sys.path.insert(0, sys.argv[2])
import triton
from gen_tma_matmul_ptx import compile_kernel
bm, bn, bk, warps, stages = json.loads(sys.argv[3])
out = {"triton": triton.__version__, "shared": {}}
for arch in (100, 120):
    k = compile_kernel(bm, bn, bk, warps, stages, 1, arch)
    with open(os.path.join(sys.argv[1], f"sm_{arch}a.ptx"), "w") as f:
        f.write(k.asm["ptx"])
    out["shared"][f"sm_{arch}a"] = k.metadata.shared
print(json.dumps(out))
'''


TRITON_SCALED = r'''
import json, os, sys, tempfile
os.environ.setdefault("TRITON_CACHE_DIR", tempfile.mkdtemp(prefix="triton-cache-"))
os.environ.setdefault("TRITON_DISABLE_LINE_INFO", "1")
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
sys.path.insert(0, sys.argv[2])
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from gen_scaled_matmul_ptx import scaled_matmul, SIGNATURE
out = {"triton": triton.__version__, "shared": {}}
for name, arch, bm, bn, bk, fmt in json.loads(sys.argv[3]):
    nv = fmt == "nvfp4"                 # e2m1 operands, f8e4m3 scales per 16
    consts = {"BM": bm, "BN": bn, "BK": bk, "FMT": "e2m1" if nv else "e4m3",
              "G": 16 if nv else 32}
    sig = dict(SIGNATURE)
    if nv:
        sig["a_scale"] = sig["b_scale"] = "*fp8e4nv"
    k = triton.compile(ASTSource(scaled_matmul, sig, consts, {}),
                       target=GPUTarget("cuda", arch, 32),
                       options={"num_warps": 4, "num_stages": 2})
    with open(os.path.join(sys.argv[1], name + ".ptx"), "w") as f:
        f.write(k.asm["ptx"])
    out["shared"][name] = k.metadata.shared
print(json.dumps(out))
'''

# (name, target, BM, BN, BK, format) of the block-scaled comparison
SCALED = (("sm_120a-64", "sm_120a", 64, 64, 64, "mxfp8"),
          ("sm_100a-64", "sm_100a", 64, 64, 64, "mxfp8"),
          ("sm_100a-128", "sm_100a", 128, 64, 64, "mxfp8"),
          ("nvfp4-sm_120a-64", "sm_120a", 64, 64, 64, "nvfp4"),
          ("nvfp4-sm_120a-128", "sm_120a", 128, 64, 128, "nvfp4"),
          ("nvfp4-sm_100a-128", "sm_100a", 128, 64, 64, "nvfp4"))
SCALED_MMA = {"QMMA": 32, "OMMA": 64, "UTCHMMA": 16, "UTCQMMA": 32,   # K of one instruction
              "UTCOMMA": 64}
SCALED_EXAMPLE = {"mxfp8": "matmul_mxfp8.tile", "nvfp4": "matmul_nvfp4.tile"}
# the example's BM as written, per format and target
_AS_WRITTEN_BM = {("mxfp8", "sm_120a"): 64, ("mxfp8", "sm_100a"): 64,
                  ("nvfp4", "sm_120a"): 64, ("nvfp4", "sm_100a"): 128}


@dataclass(frozen=True)
class Build:
    target: str
    who: str
    how: str
    ptx: str
    shared: int


def triton_python(arg: str | None) -> str | None:
    for cand in (arg, os.environ.get("TRITON_PYTHON"), "/tmp/tritonenv/bin/python"):
        if cand and Path(cand).exists():
            return cand
    try:
        import triton  # noqa: F401
        return sys.executable
    except ImportError:
        return None


def triton_builds(py: str) -> list[Build]:
    with tempfile.TemporaryDirectory() as d:
        script = Path(d) / "gen.py"
        script.write_text(TRITON)
        proc = subprocess.run([py, str(script), d, str(ROOT / "benchmarks" / "triton_ref"),
                               json.dumps([*TILE, WARPS, STAGES])],
                              capture_output=True, text=True, timeout=600)
        if proc.returncode:
            raise RuntimeError(f"Triton failed:\n{proc.stderr[-3000:]}")
        info = json.loads(proc.stdout.strip().splitlines()[-1])
        ptx = {t: (Path(d) / f"{t}.ptx").read_text() for t in TARGETS}
    who = f"Triton {info['triton']}"
    how = {"sm_100a": "tensor descriptors (TMA), tcgen05.mma, 3 stages",
           "sm_120a": "tensor descriptors (TMA), ldmatrix + mma.sync, 3 stages"}
    return [Build(t, who, how[t], ptx[t], info["shared"][t]) for t in TARGETS]


def tile_builds() -> list[Build]:
    src = (ROOT / "examples" / "matmul.tile").read_text()
    out = []
    for t in TARGETS:
        res = compile_source(src, "examples/matmul.tile", CompileOptions(target=t), until="ptx")
        assert res.ok, render_all(res.diagnostics)
        k = res.codegen.kernels[0]
        how = "examples/matmul.tile as written: " + (
            "tcgen05.mma, accumulator in TMEM, TMA ring" if "tcgen05.mma" in res.ptx else
            "ldmatrix + mma.sync, TMA ring" if "cp.async.bulk.tensor" in res.ptx else
            "ldmatrix + mma.sync, cp.async ring")
        out.append(Build(t, "Tile", how, res.ptx, k.static_smem + k.dynamic_smem))
    return out


def scaled_tile_builds() -> list[tuple]:
    """(Build, (BM, BN, BK), format) of examples/matmul_mxfp8.tile and matmul_nvfp4.tile at
    each SCALED tile (other tiles through their constants)."""
    out = []
    for _, t, bm, bn, bk, fmt in SCALED:
        name = SCALED_EXAMPLE[fmt]
        text = (ROOT / "examples" / name).read_text()
        text = text.replace("const BM: i32 = by_target(sm_100a = 128, default = 64)",
                            "const BM: i32 = 64")
        text = text.replace("const BM: i32 = 64", f"const BM: i32 = {bm}") \
            .replace("const BK: i32 = 64", f"const BK: i32 = {bk}")
        res = compile_source(text, f"examples/{name}", CompileOptions(target=t),
                             until="ptx")
        assert res.ok, render_all(res.diagnostics)
        k = res.codegen.kernels[0]
        changed = [f"{c} = {v}" for c, v, w in (("BM", bm, _AS_WRITTEN_BM[fmt, t]),
                                                 ("BK", bk, 64)) if v != w]
        how = f"examples/{name}" + "".join(", " + c for c in changed) + ": " + (
            "block-scaled mma.sync" if "block_scale" in res.ptx and t == "sm_120a" else
            "block-scaled tcgen05.mma, scales in TMEM" if "block_scale" in res.ptx else
            "bf16 dequantisation, tcgen05 kind::f16")
        out.append((Build(t, "Tile", how, res.ptx, k.static_smem + k.dynamic_smem),
                    (bm, bn, bk), fmt))
    return out


def scaled_triton_builds(py: str) -> list[tuple]:
    with tempfile.TemporaryDirectory() as d:
        script = Path(d) / "gen.py"
        script.write_text(TRITON_SCALED)
        arches = [[n, int(t[3:6]), bm, bn, bk, f] for n, t, bm, bn, bk, f in SCALED]
        proc = subprocess.run([py, str(script), d, str(ROOT / "benchmarks" / "triton_ref"),
                               json.dumps(arches)], capture_output=True, text=True,
                              timeout=600)
        if proc.returncode:
            raise RuntimeError(f"Triton failed:\n{proc.stderr[-3000:]}")
        info = json.loads(proc.stdout.strip().splitlines()[-1])
        out = []
        for n, t, bm, bn, bk, fmt in SCALED:
            ptx = (Path(d) / f"{n}.ptx").read_text()
            how = "tl.dot_scaled, " + (
                "block-scaled mma.sync" if t == "sm_120a" else
                "block-scaled tcgen05.mma" if "block_scale" in ptx else
                "bf16 dequantisation, tcgen05 kind::f16")
            out.append((Build(t, f"Triton {info['triton']}", how, ptx,
                              info["shared"][n]), (bm, bn, bk), fmt))
    return out


def analyze_scaled(b: Build, tile: tuple[int, int, int]) -> dict:
    """The K loop (the backward-branch loop with the most tensor-core instructions) and its
    instructions per K-step of BK."""
    link = link_ptx(b.ptx, get_target(b.target))
    (name, r), = link.resources.items()
    instrs = sass.disassemble(link.cubin)[name]
    bm, bn, bk = tile

    def mmas(lp):
        return sum(i.op.split(".")[0] in SCALED_MMA for i in lp.instrs)
    lp = max(sass.loops(instrs), key=lambda x: (mmas(x), -len(x.instrs)))
    ops = [i.op.split(".")[0] for i in lp.instrs]
    kind = next(o for o in ops if o in SCALED_MMA)
    per_step = bk // SCALED_MMA[kind] * (bm * bn // (16 * 8) // WARPS
                                         if kind in ("QMMA", "OMMA") else 1)
    return {"registers": r.registers, "spills": r.spill_stores + r.spill_loads,
            "local": sass.summarize(instrs).local, "mma": f"{mmas(lp)} {kind}",
            "per_k_step": round(len(ops) / (mmas(lp) / per_step), 1),
            "total": sass.summarize(instrs).total}


SCALED_HEAD = ("| target | format | tile | compiler | how built | registers | spill bytes | "
               "LDL/STL | shared KiB | MMA in loop | SASS per K-step | SASS in all |")


def scaled_table(rows) -> str:
    lines = [SCALED_HEAD, "|" + "---|" * 12]
    for b, tile, fmt, m in rows:
        lines.append(f"| {b.target} | {fmt.upper()} | {'x'.join(map(str, tile))} | {b.who} | "
                     f"{b.how} | "
                     f"{m['registers']} | {m['spills']} | {m['local']} | "
                     f"{b.shared / 1024:.1f} | {m['mma']} | {m['per_k_step']} | "
                     f"{m['total']} |")
    return "\n".join(lines)


def _tc5_loop(instrs: list) -> sass.Loop | None:
    """The backward-branch loop with the most UTCHMMA, innermost on ties."""
    best = None
    for lp in sass.loops(instrs):
        n = sum(i.op == "UTCHMMA" for i in lp.instrs)
        if n and (best is None or n > best[0] or
                  (n == best[0] and len(lp.instrs) < len(best[1].instrs))):
            best = (n, lp)
    return best[1] if best else None


def analyze(b: Build) -> dict:
    link = link_ptx(b.ptx, get_target(b.target))
    (name, r), = link.resources.items()
    instrs = sass.disassemble(link.cubin)[name]
    s = sass.summarize(instrs)
    bm, bn, bk = TILE
    lp = _tc5_loop(instrs)
    if lp is not None:
        ops = [i.op for i in lp.instrs]
        steps = ops.count("UTCHMMA") / (bk // 16)
    else:
        lp = sass.main_loop(instrs)
        ops = [i.op for i in lp.instrs]
        steps = lp.macs / (bm * bn * bk // WARPS)
    return {"registers": r.registers, "spills": r.spill_stores + r.spill_loads,
            "local": s.local, "mma": sum(ops.count(o) for o in TC_OPS),
            "tma": ops.count("UTMALDG"), "ldgsts": ops.count("LDGSTS"),
            "per_k_step": round(len(ops) / steps, 1), "total": s.total}


HEAD = ("| target | compiler | how built | registers | spill bytes | LDL/STL | shared KiB | "
        "MMA in loop | TMA loads in loop | cp.async in loop | SASS per K-step | SASS in all |")


def table(rows: list[tuple[Build, dict]]) -> str:
    lines = [HEAD, "|" + "---|" * 12]
    for b, m in rows:
        lines.append(f"| {b.target} | {b.who} | {b.how} | {m['registers']} | {m['spills']} | "
                     f"{m['local']} | {b.shared / 1024:.1f} | {m['mma']} | {m['tma']} | "
                     f"{m['ldgsts']} | {m['per_k_step']} | {m['total']} |")
    return "\n".join(lines)


INTRO = f"""`python3 benchmarks/blackwell_static.py`: matmul at {TILE[0]} x {TILE[1]} x \
{TILE[2]}, {WARPS} warps, f16 inputs, f32 accumulator and output, operands contiguous and \
16-byte aligned; both PTX texts assembled by the same nvJitLink for the target and \
disassembled with cuobjdump. Tile: examples/matmul.tile as written (its defaults are this \
tile), the facts `tilec` assumes. Triton: benchmarks/triton_ref/gen_tma_matmul_ptx.py (host \
tensor descriptors, {STAGES} stages) for GPUTarget("cuda", 100, 32) and ("cuda", 120, 32). \
SASS per K-step: the main loop's instructions per BM x BN x BK of multiply-adds (sm_120a: the \
backward-branch loop with the most HMMA work; sm_100a: the one with the most UTCHMMA, its \
K-steps its UTCHMMA over BK / 16). Shared memory: Tile's static and dynamic bytes, Triton's \
metadata. MMA in loop: HMMA (sm_120a) or UTCHMMA (sm_100a) instructions in that loop."""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--triton-python")
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    if not sass.tools_available():
        print("cuobjdump/nvdisasm not found (pip install nvidia-cuda-cuobjdump "
              "nvidia-cuda-nvdisasm)", file=sys.stderr)
        return 1
    builds = tile_builds()
    scaled = scaled_tile_builds()
    note = ""
    py = triton_python(args.triton_python)
    if py is None:
        note = "\nTriton not available: its rows are left out.\n"
    else:
        builds += triton_builds(py)
        scaled += scaled_triton_builds(py)
    builds.sort(key=lambda b: (TARGETS.index(b.target), b.who != "Tile"))
    rows = [(b, analyze(b)) for b in builds]
    scaled.sort(key=lambda x: (x[2], TARGETS.index(x[0].target), x[1], x[0].who != "Tile"))
    srows = [(b, tile, fmt, analyze_scaled(b, tile)) for b, tile, fmt in scaled]
    today = datetime.date.today().isoformat()
    text = (f"# Blackwell static comparison, {today} (no GPU)\n\n{INTRO}\n\n"
            + table(rows) + "\n\n## Block-scaled (MXFP8, NVFP4)\n\n" + scaled_table(srows)
            + "\n"
            + note)
    out = Path(args.out) if args.out else \
        ROOT / "benchmarks" / "results" / f"blackwell-static-{today}-cpu.md"
    out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
