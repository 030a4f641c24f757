"""Static comparison on sm_90a (Hopper) of our wgmma/TMA code with Triton 3.9's: no GPU needed.

    python3 benchmarks/hopper_static.py [--triton-python PY] [--out FILE.md]

Three kernels, each at the same tile for both compilers:

* matmul: `examples/matmul.tile` (128 x 128 x 64, f16 -> f32, 4 warps = one warp group,
  specialized for contiguous 16-byte aligned operands, as `tilec` does) against Triton's
  tutorial-style matmul (benchmarks/triton_ref/gen_matmul_ptx.py with the JIT's
  divisibility-by-16 specialization of 4096^3 operands), compiled for compute capability 9.0;
* matmul_persistent: `examples/matmul_persistent.tile` (the same tile; one block per SM walking
  the output tiles in grouped order) against benchmarks/triton_ref/gen_persistent_matmul_ptx.py
  (the structure of Triton's persistent-matmul tutorial, its two loops flattened);
* attention: `examples/attention.tile`'s forward kernel (f16, BM = BN = D = 64, not causal,
  4 warps) against a Triton FlashAttention-style forward written here (TRITON_ATTENTION: the
  same online softmax in base 2, the same tiles and warps, 2 stages);
* matmul_ws, attention_ws (ours only): the matmul and attention (BM = 128) with
  `reqntid = (384, 1, 1)`: two consumer warp groups and a TMA producer group; the loop counted
  is the consumers'.

Both PTX texts are assembled by the same nvJitLink for sm_90a and disassembled with cuobjdump
(tilelang.tools.sass) to count registers, spill bytes, local-memory instructions, HGMMA
instructions (in all and in the main loop), and SASS instructions per K-step of the main loop
(the backward-branch loop with the most multiply-adds; one K-step of the matmul is BM * BN * BK
/ warps multiply-adds per warp, one of attention a key tile: 2 * BM * BN * D / warps).

Triton runs in its own Python (`--triton-python`, else $TRITON_PYTHON, else this Python when
it can import triton); without one the Triton rows are left out with a note.
The table goes to benchmarks/results/hopper-static-<date>-cpu.md (or --out).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
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
KERNELS = ("matmul", "matmul_persistent", "attention")
# ours only (Triton's warp-specialized kernels are not compiled here): the matmul and
# attention tiles above with `reqntid = (384, 1, 1)`, two consumer warp groups and a TMA
# producer group (attention with BM = 128: 64 query rows per consumer group); the loop
# measured is the consumers', a K-step's multiply-adds over their 8 warps
WS = ("matmul_ws", "attention_ws")
ROWS = KERNELS + WS

TRITON_ATTENTION = r'''
import json, os, sys, tempfile
os.environ.setdefault("TRITON_CACHE_DIR", tempfile.mkdtemp(prefix="triton-cache-"))
os.environ.setdefault("TRITON_DISABLE_LINE_INFO", "1")
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
out = sys.argv[1]
k = mm.compile_kernel(90, "jit4096")
open(os.path.join(out, "matmul.ptx"), "w").write(k.asm["ptx"])
open(os.path.join(out, "matmul_persistent.ptx"), "w").write(pm.compile_kernel().asm["ptx"])
sig = {"q_ptr": "*fp16", "k_ptr": "*fp16", "v_ptr": "*fp16", "o_ptr": "*fp16", "scale": "fp32",
       "seq": "i32", "stride_h": "i32", "stride_s": "i32",
       "BM": "constexpr", "BN": "constexpr", "D": "constexpr"}
names = list(sig)
attrs = {(names.index(n),): [["tt.divisibility", 16]]
         for n in ("q_ptr", "k_ptr", "v_ptr", "o_ptr", "seq", "stride_h", "stride_s")}
consts = json.loads(sys.argv[3])
src = ASTSource(attention_fwd, sig, consts, attrs)
a = triton.compile(src, target=GPUTarget("cuda", 90, 32),
                   options={"num_warps": int(sys.argv[4]), "num_stages": 2})
open(os.path.join(out, "attention.ptx"), "w").write(a.asm["ptx"])
print(json.dumps({"triton": triton.__version__, "matmul": k.metadata.name,
                  "attention": a.metadata.name}))
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


def triton_ptx(py: str) -> tuple[dict, str]:
    """({"matmul": ptx, "attention": ptx}, version) from Triton in Python `py`."""
    with tempfile.TemporaryDirectory() as d:
        script = Path(d) / "gen_attention.py"
        script.write_text(TRITON_ATTENTION)
        proc = subprocess.run([py, str(script), d, str(ROOT / "benchmarks" / "triton_ref"),
                               json.dumps(ATT), str(WARPS)], capture_output=True, text=True,
                              timeout=600)
        if proc.returncode:
            raise RuntimeError(f"Triton failed:\n{proc.stderr[-3000:]}")
        info = json.loads(proc.stdout.strip().splitlines()[-1])
        return ({k: (Path(d) / f"{k}.ptx").read_text() for k in KERNELS}, info["triton"])


def ours() -> dict:
    """Our PTX of both kernels for sm_90a with the facts tilec assumes (contiguous,
    16-byte aligned, whole 16-byte rows)."""
    out = {}
    src = (ROOT / "examples" / "matmul.tile").read_text()
    res = compile_source(src, "matmul.tile", CompileOptions(target=ARCH), until="ptx")
    assert res.ok, render_all(res.diagnostics)
    out["matmul"] = res.ptx
    src = (ROOT / "examples" / "matmul_persistent.tile").read_text()
    res = compile_source(src, "matmul_persistent.tile", CompileOptions(target=ARCH), until="ptx")
    assert res.ok, render_all(res.diagnostics)
    out["matmul_persistent"] = res.ptx
    src = (ROOT / "examples" / "attention.tile").read_text()
    defines = {k: str(v) for k, v in ATT.items()}
    defines["CAUSAL"] = "false"
    res = compile_source(src, "attention.tile", CompileOptions(target=ARCH, defines=defines),
                         kernels=["attention"], until="ptx")
    assert res.ok, render_all(res.diagnostics)
    out["attention"] = res.ptx
    src = (ROOT / "examples" / "matmul.tile").read_text().replace(
        "@launch(reqntid = (128, 1, 1), maxnreg = 168, cluster = (2, 1, 1))",
        "@launch(reqntid = (384, 1, 1))")
    res = compile_source(src, "matmul.tile", CompileOptions(target=ARCH), until="ptx")
    assert res.ok and ".reqntid 384" in res.ptx, render_all(res.diagnostics)
    out["matmul_ws"] = res.ptx
    src = (ROOT / "examples" / "attention.tile").read_text().replace(
        "@launch(reqntid = (128, 1, 1))", "@launch(reqntid = (384, 1, 1))")
    res = compile_source(src, "attention.tile",
                         CompileOptions(target=ARCH, defines=dict(defines, BM=str(2 * ATT["BM"]))),
                         kernels=["attention"], until="ptx")
    assert res.ok and ".reqntid 384" in res.ptx, render_all(res.diagnostics)
    out["attention_ws"] = res.ptx
    return out


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


def table(rows: list[tuple[str, str, dict]]) -> str:
    head = ("| kernel | compiler | registers | spill bytes | LDL/STL | HGMMA (all) | "
            "HGMMA in loop | TMA loads in loop | cp.async in loop | SASS per K-step | "
            "SASS in all |")
    lines = [head, "|" + "---|" * 11]
    for kern, who, m in rows:
        lines.append(f"| {kern} | {who} | {m['registers']} | {m['spills']} | {m['local']} | "
                     f"{m['hgmma']} | {m['loop_hgmma']} | {m['tma']} | {m['ldgsts']} | "
                     f"{m['per_k_step']} | {m['total']} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--triton-python")
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    if not sass.tools_available():
        print("cuobjdump/nvdisasm not found (pip install nvidia-cuda-cuobjdump "
              "nvidia-cuda-nvdisasm)", file=sys.stderr)
        return 1
    steps = {"matmul": MM[0] * MM[1] * MM[2] // WARPS,
             "matmul_persistent": MM[0] * MM[1] * MM[2] // WARPS,
             "attention": 2 * ATT["BM"] * ATT["BN"] * ATT["D"] // WARPS,
             "matmul_ws": MM[0] * MM[1] * MM[2] // (2 * WARPS),
             "attention_ws": 2 * (2 * ATT["BM"]) * ATT["BN"] * ATT["D"] // (2 * WARPS)}
    rows = [(k, "Tile", analyze(p, steps[k])) for k, p in ours().items()]
    note = ""
    py = triton_python(args.triton_python)
    if py is None:
        note = "\nTriton not available: its rows are left out.\n"
    else:
        theirs, version = triton_ptx(py)
        for k in KERNELS:
            rows.append((k, f"Triton {version}", analyze(theirs[k], steps[k])))
    rows.sort(key=lambda r: (ROWS.index(r[0]), r[1] != "Tile"))
    today = datetime.date.today().isoformat()
    text = (f"# Hopper static comparison, {today} (no GPU)\n\n"
            f"`python3 benchmarks/hopper_static.py`: sm_90a, both PTX texts assembled by the "
            f"same nvJitLink. matmul: {MM[0]} x {MM[1]} x {MM[2]} tile, f16 -> f32, {WARPS} "
            f"warps, operands contiguous and 16-byte aligned; matmul_persistent: the same "
            f"tile, one block per SM looping over output tiles in grouped order (Triton: its "
            f"persistent-matmul tutorial's structure, flattened loops). attention: forward, f16, "
            f"BM = BN = D = 64, not causal, {WARPS} warps. A K-step: BM * BN * BK (matmul) or "
            f"2 * BM * BN * D (attention) multiply-adds over the block's warps. matmul_ws, "
            f"attention_ws (Tile only): the same with `reqntid = (384, 1, 1)`, two consumer "
            f"warp groups and a TMA producer group (attention: BM = {2 * ATT['BM']}); the "
            f"loop is the consumers', a K-step over their {2 * WARPS} warps.\n\n"
            + table(rows) + "\n" + note)
    out = Path(args.out) if args.out else \
        ROOT / "benchmarks" / "results" / f"hopper-static-{today}-cpu.md"
    out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
