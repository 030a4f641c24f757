"""Static comparison on sm_90a (Hopper) of our wgmma/TMA code with Triton 3.9's: no GPU needed.

    python3 benchmarks/hopper_static.py [--triton-python PY] [--out FILE.md]

Every row names its tile, warps and how it was built. Triton's matmuls are its best form on
sm_90a, host tensor descriptors (TMA loads, wgmma, a TMA store), so both sides move tiles the
same way:

* matmul at 128 x 128 x 64, 4 warps (f16 -> f32, operands contiguous and 16-byte aligned, as
  `tilec` assumes): `examples/matmul.tile` at that tile (its configuration on every target but
  sm_90a: clusters of two CTAs, B multicast), the same without the cluster, against benchmarks/triton_ref/gen_tma_matmul_ptx.py (3 stages)
  and, for reference, the pointer-load tutorial kernel (gen_matmul_ptx.py `jit4096`: cp.async
  with masks in the K loop, the form earlier tables compared with);
* matmul at each side's default pick for 4096^3: `examples/matmul.tile` as written for sm_90a
  (its `by_target` defaults, the cost model's pick: 128 x 256 x 128, 8 warps, clusters of two)
  against Triton's usual autotuned pick (its tutorial's first Hopper configuration: 128 x 256
  x 64, 8 warps, 3 stages), in the descriptor form; each side also at the other's tile and
  warps (Tile's pick without its cluster, Triton at 128 x 256 x 128 with 2 stages);
* matmul_persistent at 128 x 128 x 64, 4 warps: `examples/matmul_persistent.tile` against
  gen_persistent_matmul_ptx.py's descriptor form with the K loop kept a loop of its own
  (`flatten=False`), so both counts are a steady-state K loop's body — Triton's flattened loop
  carries the tile's set-up and epilogue inside it and is no K-step;
* attention: `examples/attention.tile`'s forward kernel (f16, BM = BN = D = 64, not causal,
  4 warps) against a Triton FlashAttention-style forward written here (TRITON_ATTENTION: the
  same online softmax in base 2, the same tiles and warps, 2 stages);
* matmul_ws, attention_ws (ours only; Triton 3.9 does not warp-specialize these kernels on
  sm_90a): `reqntid = (384, 1, 1)`, two consumer warp groups and a TMA producer group; the
  loop counted is the consumers'.

Both PTX texts are assembled by the same nvJitLink for sm_90a and disassembled with cuobjdump
(tilelang.tools.sass) to count registers, spill bytes, local-memory instructions, shared memory
(Tile: the kernel's static and dynamic shared memory; Triton: its metadata's), HGMMA
instructions in the main loop, and SASS instructions per K-step of the main loop (the
backward-branch loop with the most multiply-adds, innermost on ties; one K-step of the matmul
is BM * BN * BK / warps multiply-adds per warp, one of attention a key tile: 2 * BM * BN * D /
warps); "per 64 of K" scales a matmul's figure to BK = 64, the same work a warp in every matmul
row (128 x 128 x 64 / 4 = 128 x 256 x 64 / 8), so rows of different BK compare.

Triton runs in its own Python (`--triton-python`, else $TRITON_PYTHON, else this Python when
it can import triton); without one the Triton rows are left out with a note.
The table goes to benchmarks/results/hopper-static-<date>-cpu.md (or --out).
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
from tilelang.tools import sass                                  # noqa: E402
from tilelang.targets import get_target                         # noqa: E402

ARCH = "sm_90a"
MM = (128, 128, 64)
ATT = {"BM": 64, "BN": 64, "D": 64}
WARPS = 4
# Triton's usual pick for a 4096^3 f16 product on Hopper (its matmul tutorial's autotuning
# list starts with it, and it wins there): BM x BN x BK, warps, stages
TRITON_PICK = (128, 256, 64, 8, 3)
# Tile's sm_90a pick (examples/matmul.tile's by_target defaults), for Triton at the same tile,
# warps and ring depth (2 stages of 96 KiB: 3 do not fit)
TILE_PICK = (128, 256, 128, 8, 2)
KERNELS = ("matmul", "matmul (default pick)", "matmul_persistent", "attention")
# ours only: `reqntid = (384, 1, 1)`, two consumer warp groups and a TMA producer group
# (attention with BM = 128: 64 query rows per consumer group); the loop measured is the
# consumers', a K-step's multiply-adds over their 8 warps
WS = ("matmul_ws", "attention_ws")
ROWS = KERNELS + WS
# the example's `@launch(...)` (several lines since its values are per target)
EXAMPLE_LAUNCH = re.compile(r"^@launch\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*\)$", re.M)
# the example at the same tile as Triton's 128 x 128 x 64 kernel: its launch on the targets
# other than sm_90a, with sm_90a's register cap
SAME_LAUNCH = "@launch(reqntid = (128, 1, 1), maxnreg = by_target(sm_90a = 168), cluster = (2, 1, 1))"


def with_launch(src: str, launch: str) -> str:
    """The example with its `@launch(...)` replaced."""
    out, n = EXAMPLE_LAUNCH.subn(launch, src, count=1)
    assert n == 1, "examples/matmul.tile has no @launch"
    return out

TRITON_ATTENTION = r'''
import json, os, sys, tempfile
os.environ.setdefault("TRITON_CACHE_DIR", tempfile.mkdtemp(prefix="triton-cache-"))
os.environ.setdefault("TRITON_DISABLE_LINE_INFO", "1")
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")      # Triton 3.9's default, said aloud
import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource


@triton.jit
def attention_fwd(q_ptr, k_ptr, v_ptr, o_ptr, scale, seq, stride_h, stride_s,
                  BM: tl.constexpr, BN: tl.constexpr, D: tl.constexpr):
    # one program: BM query rows of one head; online softmax over key tiles of BN, base 2
    m = tl.program_id(0)
    head = tl.program_id(1).to(tl.int64) * stride_h
    rows = m * BM + tl.arange(0, BM)
    cols = tl.arange(0, D)
    q = tl.load(q_ptr + head + rows[:, None] * stride_s + cols[None, :],
                mask=rows[:, None] < seq, other=0.0)
    run_max = tl.full([BM], float("-inf"), tl.float32)
    run_sum = tl.zeros([BM], tl.float32)
    out = tl.zeros([BM, D], tl.float32)
    qs = scale * 1.4426950408889634
    for first in range(0, seq, BN):
        keys = first + tl.arange(0, BN)
        kt = tl.load(k_ptr + head + keys[None, :] * stride_s + cols[:, None],
                     mask=keys[None, :] < seq, other=0.0)
        s = tl.dot(q, kt) * qs
        s = tl.where(keys[None, :] < seq, s, float("-inf"))
        new_max = tl.maximum(run_max, tl.max(s, 1))
        p = tl.math.exp2(s - new_max[:, None])
        alpha = tl.math.exp2(run_max - new_max)
        run_sum = run_sum * alpha + tl.sum(p, 1)
        v = tl.load(v_ptr + head + keys[:, None] * stride_s + cols[None, :],
                    mask=keys[:, None] < seq, other=0.0)
        out = tl.dot(p.to(tl.float16), v, out * alpha[:, None])
        run_max = new_max
    out = out / run_sum[:, None]
    tl.store(o_ptr + head + rows[:, None] * stride_s + cols[None, :], out.to(tl.float16),
             mask=rows[:, None] < seq)


sys.path.insert(0, sys.argv[2])
import gen_matmul_ptx as mm
import gen_persistent_matmul_ptx as pm
import gen_tma_matmul_ptx as tma
out = sys.argv[1]
bm, bn, bk, warps, stages = json.loads(sys.argv[5])
built = {"matmul": tma.compile_kernel(128, 128, 64, 4, 3),
         "matmul_pointers": mm.compile_kernel(90, "jit4096"),
         "matmul_pick": tma.compile_kernel(bm, bn, bk, warps, stages),
         "matmul_tile_pick": tma.compile_kernel(*json.loads(sys.argv[6])),
         "matmul_persistent": pm.compile_tma_kernel(flatten=False)}
sig = {"q_ptr": "*fp16", "k_ptr": "*fp16", "v_ptr": "*fp16", "o_ptr": "*fp16", "scale": "fp32",
       "seq": "i32", "stride_h": "i32", "stride_s": "i32",
       "BM": "constexpr", "BN": "constexpr", "D": "constexpr"}
names = list(sig)
attrs = {(names.index(n),): [["tt.divisibility", 16]]
         for n in ("q_ptr", "k_ptr", "v_ptr", "o_ptr", "seq", "stride_h", "stride_s")}
consts = json.loads(sys.argv[3])
src = ASTSource(attention_fwd, sig, consts, attrs)
built["attention"] = triton.compile(src, target=GPUTarget("cuda", 90, 32),
                                    options={"num_warps": int(sys.argv[4]), "num_stages": 2})
for key, k in built.items():
    open(os.path.join(out, key + ".ptx"), "w").write(k.asm["ptx"])
print(json.dumps({"triton": triton.__version__,
                  "shared": {key: k.metadata.shared for key, k in built.items()}}))
'''


def triton_python(arg: str | None) -> str | None:
    for cand in (arg, os.environ.get("TRITON_PYTHON")):
        if cand and Path(cand).exists():
            return cand
    try:
        import triton  # noqa: F401
        return sys.executable
    except ImportError:
        return None


TRITON_BUILDS = ("matmul", "matmul_pointers", "matmul_pick", "matmul_tile_pick", "matmul_persistent",
                 "attention")


@dataclass(frozen=True)
class Build:
    """One row's kernel: which comparison, its tile and warps, who built it and how."""
    kernel: str                  # one of ROWS
    tile: str                    # "128 x 128 x 64, 4 warps"
    who: str                     # "Tile" or "Triton 3.9.0"
    how: str                     # how it was built, in a few words
    ptx: str
    k_step_macs: int             # multiply-adds per warp of one K-step (or key tile)
    shared: int                  # bytes of shared memory per block
    bk: int = 0                  # a matmul's BK (0: attention, no "per 64 of K")


def triton_builds(py: str) -> list[Build]:
    """Triton's rows, compiled in Python `py`."""
    with tempfile.TemporaryDirectory() as d:
        script = Path(d) / "gen_triton.py"
        script.write_text(TRITON_ATTENTION)
        proc = subprocess.run([py, str(script), d, str(ROOT / "benchmarks" / "triton_ref"),
                               json.dumps(ATT), str(WARPS), json.dumps(TRITON_PICK),
                               json.dumps(TILE_PICK)],
                              capture_output=True, text=True, timeout=600)
        if proc.returncode:
            raise RuntimeError(f"Triton failed:\n{proc.stderr[-3000:]}")
        info = json.loads(proc.stdout.strip().splitlines()[-1])
        ptx = {k: (Path(d) / f"{k}.ptx").read_text() for k in TRITON_BUILDS}
    who, sh = f"Triton {info['triton']}", info["shared"]
    bm, bn, bk, warps, stages = TRITON_PICK
    mm = MM[0] * MM[1] * MM[2] // WARPS
    same = f"{MM[0]} x {MM[1]} x {MM[2]}, {WARPS} warps"
    return [
        Build("matmul", same, who, "tensor descriptors (TMA), 3 stages", ptx["matmul"], mm,
              sh["matmul"], MM[2]),
        Build("matmul", same, who, "pointer loads (cp.async, masks in the K loop), 3 stages",
              ptx["matmul_pointers"], mm, sh["matmul_pointers"], MM[2]),
        Build("matmul (default pick)", f"{bm} x {bn} x {bk}, {warps} warps", who,
              f"tensor descriptors, {stages} stages (its autotuned pick for 4096^3)",
              ptx["matmul_pick"], bm * bn * bk // warps, sh["matmul_pick"], bk),
        Build("matmul (default pick)", "{} x {} x {}, {} warps".format(*TILE_PICK[:4]), who,
              f"tensor descriptors, {TILE_PICK[4]} stages (Tile's pick's tile and warps)",
              ptx["matmul_tile_pick"], TILE_PICK[0] * TILE_PICK[1] * TILE_PICK[2] // TILE_PICK[3],
              sh["matmul_tile_pick"], TILE_PICK[2]),
        Build("matmul_persistent", same, who,
              "tensor descriptors, 3 stages, K loop not flattened", ptx["matmul_persistent"],
              mm, sh["matmul_persistent"], MM[2]),
        Build("attention", f"BM = BN = D = 64, {WARPS} warps", who, "pointer loads, 2 stages",
              ptx["attention"], 2 * ATT["BM"] * ATT["BN"] * ATT["D"] // WARPS,
              sh["attention"]),
    ]


def _compile(path: str, src: str | None = None, defines=None, kernels=None) -> tuple[str, object]:
    """Our PTX for sm_90a with the facts tilec assumes (contiguous, 16-byte aligned, whole
    16-byte rows), and the kernel's codegen record."""
    text = src if src is not None else (ROOT / "examples" / path).read_text()
    res = compile_source(text, path, CompileOptions(target=ARCH, defines=defines or {}),
                         kernels=kernels, until="ptx")
    assert res.ok, render_all(res.diagnostics)
    return res.ptx, res.codegen.kernels[0]


def _smem(kern) -> int:
    return kern.static_smem + kern.dynamic_smem


def _launch_threads(ptx: str) -> int:
    line = next(t for t in ptx.splitlines() if ".reqntid" in t or ".maxntid" in t)
    return int(line.split()[1].rstrip(","))


def example_defaults() -> dict:
    """examples/matmul.tile's `const` defaults (BM, BN, BK) and threads on sm_90a, its
    `by_target`s resolved."""
    from tilelang.driver import inspect_source
    path = ROOT / "examples" / "matmul.tile"
    k = inspect_source(path.read_text(), str(path), CompileOptions(target=ARCH)).kernels["matmul"]
    out = {p.name: p.default for p in k.params if p.kind == "const"}
    out["threads"] = k.launch.reqntid[0] * k.launch.reqntid[1] * k.launch.reqntid[2]
    return out


def tile_builds() -> list[Build]:
    """Our rows."""
    out = []
    mm = MM[0] * MM[1] * MM[2] // WARPS
    same = f"{MM[0]} x {MM[1]} x {MM[2]}, {WARPS} warps"
    src = (ROOT / "examples" / "matmul.tile").read_text()
    same_tile = {"BM": str(MM[0]), "BN": str(MM[1]), "BK": str(MM[2])}
    ptx, k = _compile("matmul.tile", with_launch(src, SAME_LAUNCH), defines=same_tile)
    out.append(Build("matmul", same, "Tile", "examples/matmul.tile at this tile (-D BN=128 "
                     "BK=64, reqntid = (128, 1, 1): its default elsewhere), clusters of 2, B "
                     "multicast", ptx, mm, _smem(k), MM[2]))
    ptx, k = _compile("matmul.tile", with_launch(src, "@launch(reqntid = (128, 1, 1))"),
                      defines=same_tile)
    out.append(Build("matmul", same, "Tile", "the same without the cluster", ptx, mm,
                     _smem(k), MM[2]))
    d = example_defaults()
    ptx, k = _compile("matmul.tile")
    warps = _launch_threads(ptx) // 32
    assert warps == d["threads"] // 32
    # warp-specialized (the producer group hands its registers over with setmaxnreg): the
    # multiply-adds are the consumers', all warp groups but the last
    consumers = warps - 4 if "setmaxnreg" in ptx else warps
    out.append(Build("matmul (default pick)", f"{d['BM']} x {d['BN']} x {d['BK']}, {warps} warps",
                     "Tile", "examples/matmul.tile as written for sm_90a (its by_target "
                     "defaults: the cost model's pick, benchmarks/gemm_pick.py), clusters of 2, "
                     f"B multicast, {_stages(d, k)} stages", ptx,
                     d["BM"] * d["BN"] * d["BK"] // consumers, _smem(k), d["BK"]))
    # the pick without its cluster: like for like with Triton at the same tile (TILE_PICK)
    ptx, k = _compile("matmul.tile", with_launch(src, "@launch(reqntid = (256, 1, 1), maxnreg "
                                                 "= by_target(sm_90a = 168))"))
    out.append(Build("matmul (default pick)", f"{d['BM']} x {d['BN']} x {d['BK']}, {warps} warps",
                     "Tile", "the same without the cluster", ptx,
                     d["BM"] * d["BN"] * d["BK"] // consumers, _smem(k), d["BK"]))
    # Triton's pick's tile and warps: without a cluster (like for like) and with one
    bm, bn, bk, tw, _ = TRITON_PICK
    wide = {"BM": str(bm), "BN": str(bn), "BK": str(bk)}
    for cluster, how in (("", "the same tile and warps as Triton's pick (-D BN=256 BK=64, "
                               f"reqntid = ({32 * tw}, 1, 1))"),
                         (", cluster = (2, 1, 1)", "the same with clusters of 2 (B "
                          "multicast)")):
        ptx, k = _compile("matmul.tile", with_launch(
            src, f"@launch(reqntid = ({32 * tw}, 1, 1){cluster})"), defines=wide)
        out.append(Build("matmul (default pick)", f"{bm} x {bn} x {bk}, {tw} warps", "Tile", how,
                         ptx, bm * bn * bk // tw, _smem(k), bk))
    ptx, k = _compile("matmul_persistent.tile")
    out.append(Build("matmul_persistent", same, "Tile", "examples/matmul_persistent.tile", ptx,
                     mm, _smem(k), MM[2]))
    defines = {k: str(v) for k, v in ATT.items()}
    defines["CAUSAL"] = "false"
    # at Triton's warps, not the example's sm_90a default (8 warps, 128 x 128 tiles)
    att = (ROOT / "examples" / "attention.tile").read_text().replace(
        "@launch(reqntid = by_target(sm_90a = (256, 1, 1), default = (128, 1, 1)))",
        f"@launch(reqntid = ({32 * WARPS}, 1, 1))")
    ptx, k = _compile("attention.tile", att, defines=defines, kernels=["attention"])
    assert f".reqntid {32 * WARPS}," in ptx
    out.append(Build("attention", f"BM = BN = D = 64, {WARPS} warps", "Tile",
                     f"examples/attention.tile, reqntid = ({32 * WARPS}, 1, 1)", ptx,
                     2 * ATT["BM"] * ATT["BN"] * ATT["D"] // WARPS, _smem(k)))
    ptx, k = _compile("matmul.tile", with_launch(src, "@launch(reqntid = (384, 1, 1))"),
                      defines=same_tile)
    assert ".reqntid 384" in ptx
    out.append(Build("matmul_ws", f"{MM[0]} x {MM[1]} x {MM[2]}, 8 + 4 warps", "Tile",
                     "reqntid = (384, 1, 1)", ptx, mm // 2, _smem(k), MM[2]))
    att = (ROOT / "examples" / "attention.tile").read_text().replace(
        "@launch(reqntid = by_target(sm_90a = (256, 1, 1), default = (128, 1, 1)))", "@launch(reqntid = (384, 1, 1))")
    ptx, k = _compile("attention.tile", att, dict(defines, BM=str(2 * ATT["BM"])),
                      ["attention"])
    assert ".reqntid 384" in ptx
    out.append(Build("attention_ws", f"BM = 128, BN = D = 64, 8 + 4 warps", "Tile",
                     "reqntid = (384, 1, 1)", ptx,
                     2 * (2 * ATT["BM"]) * ATT["BN"] * ATT["D"] // (2 * WARPS), _smem(k)))
    return out


def _stages(d: dict, kern) -> int:
    """The TMA ring's depth: its shared memory over one stage's A and B tiles (f16)."""
    return (kern.static_smem + kern.dynamic_smem) // (2 * d["BK"] * (d["BM"] + d["BN"]))


def analyze(ptx: str, k_step_macs: int) -> dict:
    link = link_ptx(ptx, get_target(ARCH))
    (name, r), = ((n, r) for n, r in link.resources.items())
    instrs = sass.disassemble(link.cubin)[name]
    s = sass.summarize(instrs)
    per = s.per_k_step(k_step_macs)
    return {"registers": r.registers, "spills": r.spill_stores + r.spill_loads,
            "local": s.local, "hgmma": s.ops.get("HGMMA", 0),
            "loop_hgmma": s.loop_ops.get("HGMMA", 0),
            "tma": s.loop_ops.get("UTMALDG", 0), "ldgsts": s.loop_ops.get("LDGSTS", 0),
            "per_k_step": round(per[0], 1) if per else None, "total": s.total}


HEAD = ("| kernel | tile, warps | compiler | how built | registers | spill bytes | LDL/STL | "
        "shared KiB | HGMMA in loop | TMA loads in loop | cp.async in loop | SASS per K-step | "
        "SASS per 64 of K | SASS in all |")


def table(rows: list[tuple[Build, dict]]) -> str:
    lines = [HEAD, "|" + "---|" * 14]
    for b, m in rows:
        per64 = round(m["per_k_step"] * 64 / b.bk, 1) if b.bk and m["per_k_step"] else "-"
        lines.append(f"| {b.kernel} | {b.tile} | {b.who} | {b.how} | {m['registers']} | "
                     f"{m['spills']} | {m['local']} | {b.shared / 1024:.1f} | "
                     f"{m['loop_hgmma']} | {m['tma']} | {m['ldgsts']} | {m['per_k_step']} | "
                     f"{per64} | {m['total']} |")
    return "\n".join(lines)


INTRO = """`python3 benchmarks/hopper_static.py`: sm_90a, both PTX texts assembled by the same \
nvJitLink and disassembled with cuobjdump. f16 inputs, f32 accumulator and output, operands \
contiguous and 16-byte aligned (Triton: its JIT's divisibility-by-16 specialization of a \
4096^3 product, or host tensor descriptors). A K-step: BM * BN * BK multiply-adds (matmul) or \
2 * BM * BN * D (attention, a key tile) over the warps that multiply; SASS per K-step counts \
the body of the main loop (the backward-branch loop with the most multiply-adds) per K-step it \
performs, so a flattened loop that also sets up and stores tiles would count those too: both \
persistent rows have a K loop of their own; SASS per 64 of K: a matmul's per K-step scaled to BK = 64, the same multiply-adds a warp in every matmul row (128 x 128 x 64 / 4 warps = 128 x 256 x 64 / 8), so rows of different BK compare. Shared memory: Tile's static and dynamic bytes, \
Triton's metadata. `_ws` rows (Tile only): two consumer warp groups and a TMA producer group, \
the consumers' loop; Triton 3.9 does not warp-specialize these kernels on sm_90a."""


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
    note = ""
    py = triton_python(args.triton_python)
    if py is None:
        note = "\nTriton not available: its rows are left out.\n"
    else:
        builds += triton_builds(py)
    order = {k: n for n, k in enumerate(ROWS)}
    builds.sort(key=lambda b: (order[b.kernel], b.who != "Tile"))
    rows = [(b, analyze(b.ptx, b.k_step_macs)) for b in builds]
    today = datetime.date.today().isoformat()
    text = (f"# Hopper static comparison, {today} (no GPU)\n\n{INTRO}\n\n"
            + table(rows) + "\n" + note)
    out = Path(args.out) if args.out else \
        ROOT / "benchmarks" / "results" / f"hopper-static-{today}-cpu.md"
    out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
