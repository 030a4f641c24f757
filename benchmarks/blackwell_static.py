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
kernel, 4 warps, 2 stages) at the same tiles: examples/matmul_mxfp8.tile at 64 x 64 x 64 on
four warps (block-scaled mma.sync on sm_120a; on sm_100a both compilers dequantize to bf16
and use tcgen05 kind::f16, the block-scaled kinds taking M = 128), on sm_100a at 128 x 64 x
64 (block-scaled tcgen05 on both sides) and at its sm_100a defaults, 128 x 128 x 128 on 192
threads (Tile's warp-specialized block-scaled ring; the loop counted is the MMA warp's).
Its SASS per K-step: the main loop's
instructions over its tensor-core instructions per K-step (QMMA: BM * BN * BK / (16 * 8 * 32)
/ warps a warp; UTCHMMA: BK / 16; UTCQMMA: BK / 32). NVFP4 rows (packed e2m1 operands, one
f8e4m3 scale per 16 along K; Triton's kernel with `--fmt e2m1 --scale e4m3`) compare
examples/matmul_nvfp4.tile as written (64 x 64 x 64 on sm_120a, 128 x 64 x 64 on sm_100a, 4
warps on both) and at Triton's fixture tile 128 x 64 x 128 on sm_120a: OMMA (mma.sync
m16n8k64) is BM * BN * BK / (16 * 8 * 64) / warps a warp per K-step, UTCOMMA (tcgen05
kind::mxf4nvf4) BK / 64. A row is "as written" when its tile is the example's defaults on
its target (read from the example's constants); other rows set the constants and four warps.

A third table compares the warp-specialized forms on sm_100a, each warp's loop on its own:
examples/matmul.tile as written (192 threads in clusters of two along M: the specialized
ring on the CTA pair, `cta_group::2`, M = 256) and without its cluster (the one-CTA
specialized ring), against Triton's same kernel with `tl.range(..., warp_specialize=True)`
(`num_warps = 4`, 3 stages); and the example at BN = 64, whose clusters then share B by TMA
multicast (no CTA pair for one panel of B), with and without them; and
examples/matmul_persistent.tile (two TMEM accumulators, the epilogue of one tile beside the
MMAs of the next) against Triton's persistent kernel in the same grouped order with its tile
loop `tl.range(..., warp_specialize=True)` (Triton then double-buffers the accumulator in
tensor memory too). MMA loop: the backward-branch loop with UTCHMMA and no UTMALDG
with the fewest instructions per UTCHMMA, its K-steps its UTCHMMA over BK / 16 (a pair's
K-step covers 256 rows of C); copy loop: the loop with UTMALDG and no UTCHMMA, its K-steps
its expect-tx arrivals (`SYNCS.ARRIVE.TRANS64`, one a stage).

A fourth table compares the other dense tcgen05 kinds on sm_100a (tf32 into f32, f8e4m3 into
f32, i8 into i32) with Triton's `tl.dot` of the same dtypes (benchmarks/triton_ref/
gen_kinds_matmul_ptx.py: A (M, K) and B stored (N, K), both K-major through tensor
descriptors, 4 warps, 3 stages) at 128 x 128 x BK, BK one 128-byte row (32 tf32, 128 8-bit
elements; row f8e4m3-kn: B stored (K, N), MN-major on both sides): Tile's kernel of the same
shape (`KINDS_SRC`, A and B loaded along K, or B along N) at 128 threads
(the single-issuer ring) and 192 (warp-specialized: the MMA warp's loop). SASS per K-step: the
loop with the most tcgen05 MMAs (UTCHMMA, UTCQMMA or UTCIMMA), its instructions per BK.

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

TRITON_WS = r'''
import json, os, sys, tempfile
os.environ.setdefault("TRITON_CACHE_DIR", tempfile.mkdtemp(prefix="triton-cache-"))
os.environ.setdefault("TRITON_DISABLE_LINE_INFO", "1")
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource


@triton.jit
def ws_matmul(a_desc, b_desc, c_desc, M, N, K,
              BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid = tl.program_id(0)
    tiles_n = tl.cdiv(N, BN)
    tm = pid // tiles_n
    tn = pid % tiles_n
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in tl.range(0, tl.cdiv(K, BK), warp_specialize=True):
        x = a_desc.load([tm * BM, k * BK])
        y = b_desc.load([k * BK, tn * BN])
        acc = tl.dot(x, y, acc)
    c_desc.store([tm * BM, tn * BN], acc)


@triton.jit
def ws_persistent(a_desc, b_desc, c_desc, M, N, K,
                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                  GROUP: tl.constexpr, NUM_SMS: tl.constexpr):
    # examples/matmul_persistent.tile's walk (grouped order), the tile loop specialized
    first = tl.program_id(0)
    tiles_m = tl.cdiv(M, BM)
    tiles_n = tl.cdiv(N, BN)
    per_group = GROUP * tiles_n
    for t in tl.range(first, tiles_m * tiles_n, NUM_SMS, warp_specialize=True):
        first_m = (t // per_group) * GROUP
        rows = tl.minimum(tiles_m - first_m, GROUP)
        tm = first_m + (t % rows)
        tn = (t % per_group) // rows
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for s in range(tl.cdiv(K, BK)):
            x = a_desc.load([tm * BM, s * BK])
            y = b_desc.load([s * BK, tn * BN])
            acc = tl.dot(x, y, acc)
        c_desc.store([tm * BM, tn * BN], acc)


bm, bn, bk, warps, stages = json.loads(sys.argv[2])
sig = {"a_desc": f"tensordesc<fp16[{bm}, {bk}]>", "b_desc": f"tensordesc<fp16[{bk}, {bn}]>",
       "c_desc": f"tensordesc<fp32[{bm}, {bn}]>", "M": "i32", "N": "i32", "K": "i32"}
tile = {"BM": bm, "BN": bn, "BK": bk}
persistent = dict(tile, GROUP=8, NUM_SMS=148)
shared = {}
for name, fn, consts in (("ws", ws_matmul, tile), ("ws_persistent", ws_persistent, persistent)):
    k = triton.compile(ASTSource(fn, dict(sig, **{c: "constexpr" for c in consts}), consts, {}),
                       target=GPUTarget("cuda", 100, 32),
                       options={"num_warps": warps, "num_stages": stages})
    with open(os.path.join(sys.argv[1], name + ".ptx"), "w") as f:
        f.write(k.asm["ptx"])
    shared[name] = k.metadata.shared
print(json.dumps({"triton": triton.__version__, "shared": shared}))
'''

# (name, target, BM, BN, BK, format) of the block-scaled comparison
SCALED = (("sm_120a-64", "sm_120a", 64, 64, 64, "mxfp8"),
          ("sm_100a-64", "sm_100a", 64, 64, 64, "mxfp8"),
          ("sm_100a-128", "sm_100a", 128, 64, 64, "mxfp8"),
          ("sm_100a-ring", "sm_100a", 128, 128, 128, "mxfp8"),
          ("nvfp4-sm_120a-64", "sm_120a", 64, 64, 64, "nvfp4"),
          ("nvfp4-sm_120a-128", "sm_120a", 128, 64, 128, "nvfp4"),
          ("nvfp4-sm_100a-128", "sm_100a", 128, 64, 64, "nvfp4"))
RING = "sm_100a-ring"       # the MXFP8 example's sm_100a defaults: the warp-specialized ring
SCALED_MMA = {"QMMA": 32, "OMMA": 64, "UTCHMMA": 16, "UTCQMMA": 32,   # K of one instruction
              "UTCOMMA": 64}
SCALED_EXAMPLE = {"mxfp8": "matmul_mxfp8.tile", "nvfp4": "matmul_nvfp4.tile"}


TRITON_KINDS = r'''
import json, os, sys, tempfile
os.environ.setdefault("TRITON_CACHE_DIR", tempfile.mkdtemp(prefix="triton-cache-"))
os.environ.setdefault("TRITON_DISABLE_LINE_INFO", "1")
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
sys.path.insert(0, sys.argv[2])
import triton
from gen_kinds_matmul_ptx import compile_kind
out = {"triton": triton.__version__, "shared": {}}
for kind in json.loads(sys.argv[3]):
    k = compile_kind(kind, arch=100)
    with open(os.path.join(sys.argv[1], kind + ".ptx"), "w") as f:
        f.write(k.asm["ptx"])
    out["shared"][kind] = k.metadata.shared
print(json.dumps(out))
'''

# the dense kinds of the third table: Tile's dtypes (A = B, accumulator), BK (128-byte rows)
KINDS = {"tf32": ("tf32", "f32", 32), "f8e4m3": ("f8e4m3", "f32", 128), "i8": ("i8", "i32", 128),
         "f8e4m3-kn": ("f8e4m3", "f32", 128)}     # B stored (K, N): an MN-major image
KINDS_SRC = """
@launch(reqntid = (THREADS, 1, 1))
kernel mm(a: Array[T, 2], bt: Array[T, 2], c: Array[ACC, 2], const BK: i32 = 128) {
    let m = bid(0);
    let n = bid(1);
    var acc = zeros((128, 128), ACC);
    for k in range(num_tiles(a, axis = 1, shape = (128, BK))) {
        let ta = load(a, index = (m, k), shape = (128, BK), padding = 0);
        let tb = load(bt, index = (k, n), shape = (BK, 128), order = (1, 0), padding = 0);
        acc = mma(ta, tb, acc);
    }
    store(c, index = (m, n), tile = acc);
}
"""
TC5_MMA = ("UTCHMMA", "UTCQMMA", "UTCIMMA")


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
            "warp-specialized tcgen05 ring on the CTA pair (cta_group::2, M = 256), "
            "accumulator in TMEM; the MMA warp's loop" if "tcgen05.mma.cta_group::2" in
            res.ptx and ".reqntid 192" in res.ptx else
            "tcgen05.mma, accumulator in TMEM, TMA ring" if "tcgen05.mma" in res.ptx else
            "ldmatrix + mma.sync, TMA ring" if "cp.async.bulk.tensor" in res.ptx else
            "ldmatrix + mma.sync, cp.async ring")
        out.append(Build(t, "Tile", how, res.ptx, k.static_smem + k.dynamic_smem))
    return out


def scaled_tile_builds() -> list[tuple]:
    """(Build, (BM, BN, BK), format) of examples/matmul_mxfp8.tile and matmul_nvfp4.tile at
    each SCALED tile: as written where the tile is the example's defaults on the target,
    else through its constants on four warps."""
    out = []
    for name, t, bm, bn, bk, fmt in SCALED:
        path = "examples/" + SCALED_EXAMPLE[fmt]
        src = (ROOT / path).read_text()
        as_written = (bm, bn, bk) == example_defaults(src, t)
        assert as_written or name != RING, f"{path}'s {t} defaults changed: update SCALED"
        text = src if as_written else _fixed_tiles(src, bm, bn, bk)
        res = compile_source(text, path, CompileOptions(target=t), until="ptx")
        assert res.ok, render_all(res.diagnostics)
        k = res.codegen.kernels[0]
        scales = "tcgen05.cp" if "tcgen05.cp" in res.ptx else "tcgen05.st"
        how = path + (
            f" at its {t} defaults (192 threads): block-scaled tcgen05.mma, warp-specialized "
            f"TMA ring, scales by {scales}" if name == RING else
            f" at {bm} x {bn} x {bk}{' (as written)' if as_written else ''}, 4 warps: " + (
                "block-scaled mma.sync" if "block_scale" in res.ptx and t == "sm_120a" else
                f"block-scaled tcgen05.mma, scales in TMEM by {scales}" if "block_scale" in
                res.ptx else "bf16 dequantisation, tcgen05 kind::f16"))
        out.append((Build(t, "Tile", how, res.ptx, k.static_smem + k.dynamic_smem),
                    (bm, bn, bk), fmt))
    return out


def _const_line(c: str) -> re.Pattern:
    """An example's `const C: i32 = VALUE,` parameter line (VALUE may hold commas)."""
    return re.compile(rf"^(\s*const {c}: i32 = )(.*?)(,?)$", re.M)


def example_defaults(src: str, target: str) -> tuple[int, int, int]:
    """(BM, BN, BK) as the example gives them on `target`: an integer, or
    `by_target(name = value, ..., default = value)`."""
    vals = []
    for c in ("BM", "BN", "BK"):
        m, = _const_line(c).finditer(src)
        v = m.group(2).strip()
        if v.startswith("by_target("):
            arms = dict(re.findall(r"(\w+)\s*=\s*(\d+)", v))
            v = arms.get(target, arms["default"])
        vals.append(int(v))
    return tuple(vals)


def _fixed_tiles(src: str, bm: int, bn: int, bk: int) -> str:
    """The example at BM x BN x BK on four warps (Triton's fixture tiles), every target."""
    out = src.replace("by_target(sm_100a = (192, 1, 1), default = (128, 1, 1))", "(128, 1, 1)")
    for c, v in (("BM", bm), ("BN", bn), ("BK", bk)):
        out, n = _const_line(c).subn(rf"\g<1>{v}\g<3>", out)
        assert n == 1, f"the example's {c} is not one `const {c}: i32 = ...` line"
    assert "reqntid = (128, 1, 1)" in out, "the example's launch changed: update _fixed_tiles"
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


def kinds_tile_builds() -> list[tuple]:
    """(Build, BK) of KINDS_SRC for each kind at 128 and 192 threads."""
    out = []
    for kind, (t, acc, bk) in KINDS.items():
        for threads in (128, 192):
            text = KINDS_SRC.replace("THREADS", str(threads)).replace("ACC", acc) \
                .replace("T,", f"{t},").replace("const BK: i32 = 128", f"const BK: i32 = {bk}")
            if kind.endswith("-kn"):
                text = text.replace("bt: Array", "b: Array").replace(
                    "load(bt, index = (k, n), shape = (BK, 128), order = (1, 0),",
                    "load(b, index = (k, n), shape = (BK, 128),")
            res = compile_source(text, f"kinds-{kind}.tile", CompileOptions(target="sm_100a"),
                                 until="ptx")
            assert res.ok, render_all(res.diagnostics)
            k = res.codegen.kernels[0]
            major = "B (K, N) MN-major" if kind.endswith("-kn") else "K-major"
            how = f"{kind[:6] if kind.endswith('-kn') else kind} {major}, {threads} threads: " + (
                "warp-specialized tcgen05 ring; the MMA warp's loop" if threads == 192 else
                "tcgen05 ring, one issuing thread")
            out.append((Build("sm_100a", "Tile", how, res.ptx,
                              k.static_smem + k.dynamic_smem), kind, bk))
    return out


def kinds_triton_builds(py: str) -> list[tuple]:
    with tempfile.TemporaryDirectory() as d:
        script = Path(d) / "gen.py"
        script.write_text(TRITON_KINDS)
        proc = subprocess.run([py, str(script), d, str(ROOT / "benchmarks" / "triton_ref"),
                               json.dumps(list(KINDS))], capture_output=True, text=True,
                              timeout=600)
        if proc.returncode:
            raise RuntimeError(f"Triton failed:\n{proc.stderr[-3000:]}")
        info = json.loads(proc.stdout.strip().splitlines()[-1])
        return [(Build("sm_100a", f"Triton {info['triton']}",
                       ("B (K, N), " if kind.endswith("-kn") else f"{kind} K-major, ")
                       + "tl.dot, tensor descriptors, 3 stages",
                       (Path(d) / f"{kind}.ptx").read_text(), info["shared"][kind]), kind, bk)
                for kind, (_, _, bk) in KINDS.items()]


def analyze_kind(b: Build, kind: str) -> dict:
    """The loop with the most tcgen05 MMAs (innermost on ties); one K-step is BK, 128 bytes
    of each row: 4 instructions of 32 bytes."""
    link = link_ptx(b.ptx, get_target(b.target))
    (name, r), = link.resources.items()
    instrs = sass.disassemble(link.cubin)[name]

    def mmas(lp):
        return sum(i.op.split(".")[0] in TC5_MMA for i in lp.instrs)
    lp = max(sass.loops(instrs), key=lambda x: (mmas(x), -len(x.instrs)))
    ops = [i.op.split(".")[0] for i in lp.instrs]
    op = next(o for o in ops if o in TC5_MMA)
    return {"registers": r.registers, "spills": r.spill_stores + r.spill_loads,
            "local": sass.summarize(instrs).local, "mma": f"{mmas(lp)} {op}",
            "tma": ops.count("UTMALDG"), "per_k_step": round(len(ops) / (mmas(lp) / 4), 1),
            "total": sass.summarize(instrs).total}


KINDS_HEAD = ("| kind | BK | compiler | how built | registers | spill bytes | LDL/STL | "
              "shared KiB | MMA in loop | TMA loads in loop | SASS per K-step | SASS in all |")


def kinds_table(rows) -> str:
    lines = [KINDS_HEAD, "|" + "---|" * 12]
    for b, kind, bk, m in rows:
        lines.append(f"| {kind} | {bk} | {b.who} | {b.how} | {m['registers']} | "
                     f"{m['spills']} | {m['local']} | {b.shared / 1024:.1f} | {m['mma']} | "
                     f"{m['tma']} | {m['per_k_step']} | {m['total']} |")
    return "\n".join(lines)


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


def ws_tile_builds() -> list[Build]:
    """examples/matmul.tile on sm_100a as written (the specialized pair) and without its
    cluster (the one-CTA specialized ring); at BN = 64 (one panel of B: no pair) with its
    cluster (B multicast) and without."""
    src = (ROOT / "examples" / "matmul.tile").read_text()
    alone = src.replace("    cluster = (2, 1, 1),\n", "")
    assert alone != src, "examples/matmul.tile's launch changed: update ws_tile_builds"
    out = []
    bn = "const BN: i32 = by_target(sm_90a = 256, default = 128)"
    assert bn in src, "examples/matmul.tile's BN changed: update ws_tile_builds"
    narrow = src.replace(bn, "const BN: i32 = 64")
    for text, how in ((src, "as written: 192 threads, clusters of two along M, the "
                            "specialized ring on the CTA pair (cta_group::2, M = 256)"),
                      (alone, "without its cluster: 192 threads, the one-CTA specialized "
                              "ring"),
                      (narrow, "with BN = 64 (128 x 64 x 64): clusters of two along M share "
                               "B by TMA multicast"),
                      (narrow.replace("    cluster = (2, 1, 1),\n", ""),
                       "with BN = 64, without its cluster")):
        res = compile_source(text, "examples/matmul.tile", CompileOptions(target="sm_100a"),
                             until="ptx")
        assert res.ok, render_all(res.diagnostics)
        k = res.codegen.kernels[0]
        out.append(Build("sm_100a", "Tile", "examples/matmul.tile " + how, res.ptx,
                         k.static_smem + k.dynamic_smem))
    src = (ROOT / "examples" / "matmul_persistent.tile").read_text()
    res = compile_source(src, "examples/matmul_persistent.tile",
                         CompileOptions(target="sm_100a"), until="ptx")
    assert res.ok, render_all(res.diagnostics)
    k = res.codegen.kernels[0]
    out.append(Build("sm_100a", "Tile", "examples/matmul_persistent.tile as written: 192 "
                     "threads, the accumulator pipeline (two TMEM accumulators)", res.ptx,
                     k.static_smem + k.dynamic_smem))
    return out


def ws_triton_builds(py: str) -> list[Build]:
    with tempfile.TemporaryDirectory() as d:
        script = Path(d) / "gen.py"
        script.write_text(TRITON_WS)
        proc = subprocess.run([py, str(script), d, json.dumps([*TILE, WARPS, STAGES])],
                              capture_output=True, text=True, timeout=600)
        if proc.returncode:
            raise RuntimeError(f"Triton failed:\n{proc.stderr[-3000:]}")
        info = json.loads(proc.stdout.strip().splitlines()[-1])
        ptx = {n: (Path(d) / f"{n}.ptx").read_text() for n in info["shared"]}
    who = f"Triton {info['triton']}"
    return [Build("sm_100a", who, "tl.range(warp_specialize=True), tensor descriptors, "
                  "tcgen05.mma, 3 stages", ptx["ws"], info["shared"]["ws"]),
            Build("sm_100a", who, "persistent (grouped order, 148 programs), the tile loop "
                  "tl.range(warp_specialize=True), tensor descriptors, 3 stages",
                  ptx["ws_persistent"], info["shared"]["ws_persistent"])]


def analyze_ws(b: Build) -> dict:
    """The MMA loop (UTCHMMA, no UTMALDG; fewest instructions per UTCHMMA) and the copy
    loop (UTMALDG, no UTCHMMA), each per K-step."""
    link = link_ptx(b.ptx, get_target(b.target))
    (name, r), = link.resources.items()
    instrs = sass.disassemble(link.cubin)[name]
    bk = TILE[2]

    def count(lp, pred):
        return sum(pred(i) for i in lp.instrs)
    mma = [lp for lp in sass.loops(instrs) if count(lp, lambda i: i.op == "UTCHMMA")
           and not count(lp, lambda i: i.op == "UTMALDG")]
    copy = [lp for lp in sass.loops(instrs) if count(lp, lambda i: i.op == "UTMALDG")
            and not count(lp, lambda i: i.op == "UTCHMMA")]
    per_mma = min(len(lp.instrs) / (count(lp, lambda i: i.op == "UTCHMMA") / (bk // 16))
                  for lp in mma)
    per_copy = min(len(lp.instrs) / count(
        lp, lambda i: i.opcode.startswith("SYNCS.ARRIVE.TRANS64")) for lp in copy)
    threads = next(int(t.split()[1].rstrip(",")) for t in b.ptx.splitlines()
                   if t.strip().startswith(".reqntid"))
    return {"registers": r.registers, "spills": r.spill_stores + r.spill_loads,
            "local": sass.summarize(instrs).local, "threads": threads,
            "rows": 256 if "cta_group::2" in b.ptx else TILE[0],
            "mma": round(per_mma, 1), "copy": round(per_copy, 1),
            "total": sass.summarize(instrs).total}


WS_HEAD = ("| compiler | how built | threads | registers | spill bytes | LDL/STL | shared KiB | "
           "rows of C a K-step | MMA loop SASS per K-step | copy loop SASS per K-step | "
           "SASS in all |")


def ws_table(rows) -> str:
    lines = [WS_HEAD, "|" + "---|" * 11]
    for b, m in rows:
        lines.append(f"| {b.who} | {b.how} | {m['threads']} | {m['registers']} | "
                     f"{m['spills']} | {m['local']} | {b.shared / 1024:.1f} | {m['rows']} | "
                     f"{m['mma']} | {m['copy']} | {m['total']} |")
    return "\n".join(lines)


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
    ws = ws_tile_builds()
    kinds = kinds_tile_builds()
    note = ""
    py = triton_python(args.triton_python)
    if py is None:
        note = "\nTriton not available: its rows are left out.\n"
    else:
        builds += triton_builds(py)
        scaled += scaled_triton_builds(py)
        ws += ws_triton_builds(py)
        kinds += kinds_triton_builds(py)
    builds.sort(key=lambda b: (TARGETS.index(b.target), b.who != "Tile"))
    rows = [(b, analyze(b)) for b in builds]
    scaled.sort(key=lambda x: (x[2], TARGETS.index(x[0].target), x[1], x[0].who != "Tile"))
    srows = [(b, tile, fmt, analyze_scaled(b, tile)) for b, tile, fmt in scaled]
    kinds.sort(key=lambda x: (list(KINDS).index(x[1]), x[0].who != "Tile"))
    krows = [(b, kind, bk, analyze_kind(b, kind)) for b, kind, bk in kinds]
    today = datetime.date.today().isoformat()
    text = (f"# Blackwell static comparison, {today} (no GPU)\n\n{INTRO}\n\n"
            + table(rows) + "\n\n## Block-scaled (MXFP8, NVFP4)\n\n" + scaled_table(srows)
            + "\n\n## Warp-specialized (sm_100a)\n\n"
            + ws_table([(b, analyze_ws(b)) for b in ws]) + "\n"
            + "\n## Dense kinds beside f16 (sm_100a)\n\n" + kinds_table(krows) + "\n"
            + note)
    out = Path(args.out) if args.out else \
        ROOT / "benchmarks" / "results" / f"blackwell-static-{today}-cpu.md"
    out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
