"""Static comparison of our matmul with Triton's for the same tile: no GPU needed.

    python3 benchmarks/matmul_static.py [--triton-python PY] [--out FILE.md]

Compiles `examples/matmul.tile` at 128 x 128 x 64 (f16 inputs, f32 accumulator and output,
4 warps: its default on sm_80; sm_90a's default pick is larger, benchmarks/hopper_static.py
compares it with Triton's pick) with our compiler for sm_80 and sm_90a, and a tutorial-style
Triton kernel of the same tile (benchmarks/triton_ref/gen_matmul_ptx.py, with the
specialization Triton's JIT gives 16-byte-aligned 4096^3 operands) for compute capability
8.0 and 9.0. Both PTX texts are assembled by the same nvJitLink, then disassembled with
cuobjdump (tilelang.tools.sass) to count:

* registers, spill bytes and local-memory instructions (LDL/STL), shared memory;
* SASS instructions in all and in the main loop (the loop closed by a backward branch with
  the most multiply-adds), per K-step of BK = 64 (one K-step: BM * BN * BK / warps
  multiply-adds per warp), and the HMMA instructions among them;
* global loads by width (LDG and LDGSTS, i.e. cp.async): how many move 128 bits;
* on the emulator (a 256 x 256 x 192 product, checked against NumPy): bank conflicts and
  global-load coalescing (bytes used / bytes in 32-byte sectors) of the PTX main loop
  (`wgmma` kernels are not run: the emulator has no wgmma).

Triton runs in its own Python (`--triton-python`, else $TRITON_PYTHON, else this Python when it
can import triton); without one the Triton rows are left out with a note. The results go to
benchmarks/results/matmul-static-<date>-cpu.md (or --out).
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

import numpy as np                                               # noqa: E402

from tilelang.codegen.target.link import link_ptx               # noqa: E402
from tilelang.emulator import EmulatorDevice                    # noqa: E402
from tilelang.driver import compile_source                      # noqa: E402
from tilelang.options import CompileOptions                     # noqa: E402
from tilelang.tools import sass                                  # noqa: E402
from tilelang.targets import get_target                         # noqa: E402

EXAMPLE = ROOT / "examples" / "matmul.tile"
GEN = ROOT / "benchmarks" / "triton_ref" / "gen_matmul_ptx.py"
GEN_TMA = ROOT / "benchmarks" / "triton_ref" / "gen_tma_matmul_ptx.py"
BM, BN, BK = 128, 128, 64


EMU_M, EMU_N, EMU_K = 256, 256, 192


def emulate(ptx: str, kernel: str, grid, block, args, cluster=None, shared=0, out=None):
    """Run on the emulator; returns (main-loop bank conflicts, main-loop coalescing)."""
    dev = EmulatorDevice()
    fn = dev.load_module(ptx).get_function(kernel)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((EMU_M, EMU_K)).astype(np.float16)
    b = rng.standard_normal((EMU_K, EMU_N)).astype(np.float16)
    pa, pb, pc = dev.to_device(a), dev.to_device(b), dev.malloc(4 * EMU_M * EMU_N)
    dev.memset(pc, 0xFF, 4 * EMU_M * EMU_N)
    rep = dev.launch(fn, grid, block, args(pa, pb, pc), cluster=cluster, shared_mem=shared)
    c = dev.from_device(pc, (EMU_M, EMU_N), np.float32)
    ref = a.astype(np.float64) @ b
    bound = (EMU_K / 16 + 1) * 2.0 ** -23 * (np.abs(a.astype(np.float64)) @ np.abs(b))
    if not np.all(np.abs(c - ref) <= bound):
        return "WRONG", "WRONG"
    loop = sass.ptx_loop_lines(ptx)
    return rep.bank_conflicts_in(loop), f"{rep.coalescing_in(loop):.0%}"


def ours_args(art):
    """Parameters per docs/abi.md for contiguous a, b, c: address, extents, strides."""
    shapes = {"a": (EMU_M, EMU_K), "b": (EMU_K, EMU_N), "c": (EMU_M, EMU_N)}

    def pack(pa, pb, pc):
        ptr = {"a": pa, "b": pb, "c": pc}
        vals = []
        for p in art.params:
            r, c = shapes[p.name]
            vals += [np.uint64(int(ptr[p.name])), np.int64(r), np.int64(c), np.int64(c),
                     np.int64(1)]
        from tilelang.runtime.tensormap import encode_emulator, map_args
        for spec in art.tensor_maps:         # sm_90a: TMA tensor maps (docs/abi.md)
            r, c = shapes[spec.array]
            vals.append(encode_emulator(map_args(spec, int(ptr[spec.array]), (r, c), (c, 1))))
        return vals
    return pack


def triton_args(pa, pb, pc):
    return [pa, pb, pc] + [np.int32(v) for v in (EMU_M, EMU_N, EMU_K, EMU_K, EMU_N, EMU_N)] + \
        [0, 0]


def analyze(label: str, arch: str, ptx: str, warps: int, dyn_smem: int = 0,
            emu=None) -> dict:
    link = link_ptx(ptx, get_target(arch))
    (kname, res), = link.resources.items()
    instrs = sass.disassemble(link.cubin)[kname]
    s = sass.summarize(instrs)
    per = s.per_k_step(BM * BN * BK // warps)
    ldg = sum(s.ldg_widths.values())
    return {
        "kernel": label, "arch": arch, "registers": res.registers,
        "spill": f"{res.spill_stores}/{res.spill_loads}", "local_instrs": s.local,
        "smem": res.smem_static + dyn_smem, "sass": s.total,
        "loop": s.loop_instrs, "k_steps_per_iter": (s.loop_macs / (BM * BN * BK // warps))
        if s.loop_macs else None,
        "per_k_step": round(per[0], 1) if per else None,
        "hmma_per_k_step": round(per[1], 1) if per else None,
        "hmma": s.hmma, "ldg128": f"{s.ldg_widths.get(128, 0)}/{ldg}",
        "lds_per_k_step": per_step(s, ("LDSM", "LDS"), warps),
        "bar_per_k_step": per_step(s, ("BAR",), warps),
        "mma_sync_in_ptx": "mma.sync" in ptx, "wgmma_in_ptx": "wgmma" in ptx,
        "emu_conflicts": emu[0] if emu else None, "emu_coalescing": emu[1] if emu else None,
    }


def per_step(s, ops, warps):
    """Main-loop instructions of these kinds per K-step."""
    if not s.loop_macs:
        return None
    steps = s.loop_macs / (BM * BN * BK // warps)
    return round(sum(s.loop_ops.get(o, 0) for o in ops) / steps, 1)


def ours(arch: str) -> dict:
    from benchmarks.hopper_static import SAME_LAUNCH, with_launch
    # the example at this tile: its launch and consts elsewhere than sm_90a, sm_90a's cap
    text = with_launch(EXAMPLE.read_text(), SAME_LAUNCH)
    res = compile_source(text, str(EXAMPLE), CompileOptions(
        target=arch, defines={"BM": str(BM), "BN": str(BN), "BK": str(BK)}), until="ptx")
    if not res.ok:
        raise SystemExit(f"examples/matmul.tile did not compile for {arch}: "
                         f"{[d.message for d in res.diagnostics]}")
    art = res.codegen.kernel("matmul")
    threads = art.block[0] * art.block[1] * art.block[2]
    grid = (EMU_M // BM, EMU_N // BN, 1)
    emu = emulate(res.ptx, "matmul", grid, tuple(art.block), ours_args(art), art.cluster,
                  art.dynamic_smem)
    return analyze("tile matmul.tile", arch, res.ptx, threads // 32, art.dynamic_smem, emu)


def find_triton_python(given: str | None) -> str | None:
    cands = [given, os.environ.get("TRITON_PYTHON"), sys.executable]
    for py in cands:
        if not py:
            continue
        ok = subprocess.run([py, "-c", "import triton"], capture_output=True).returncode == 0
        if ok:
            return py
        if py == given:
            raise SystemExit(f"--triton-python {py}: cannot import triton there")
    return None


def triton(py: str, cc: int, out: str) -> tuple[str, dict]:
    p = subprocess.run([py, str(GEN), "--arch", str(cc), "--spec", "jit4096", "--out", out,
                        "--name", f"tri{cc}"], capture_output=True, text=True, timeout=600)
    if p.returncode:
        raise SystemExit(f"Triton compile for cc {cc} failed:\n{p.stderr[-2000:]}")
    info = json.loads(Path(out, f"tri{cc}.json").read_text())
    return Path(out, f"tri{cc}.ptx").read_text(), info


def triton_tma(py: str, out: str) -> tuple[str, dict]:
    """Triton's tensor-descriptor matmul at the same tile (gen_tma_matmul_ptx.py, 3 stages)."""
    p = subprocess.run([py, str(GEN_TMA), "--tile", f"{BM}x{BN}x{BK}", "--warps", "4",
                        "--out", out, "--name", "tri90tma"], capture_output=True, text=True,
                       timeout=600)
    if p.returncode:
        raise SystemExit(f"Triton TMA compile failed:\n{p.stderr[-2000:]}")
    info = json.loads(Path(out, "tri90tma.json").read_text())
    return Path(out, "tri90tma.ptx").read_text(), info


COLS = [("kernel", "kernel"), ("arch", "arch"), ("registers", "regs"),
        ("spill", "spill st/ld B"), ("local_instrs", "LDL+STL"), ("smem", "smem B"),
        ("sass", "SASS instrs"), ("loop", "main-loop instrs"),
        ("k_steps_per_iter", "K-steps/iter"), ("per_k_step", "instrs/K-step"),
        ("hmma_per_k_step", "MMA instrs/K-step"),
        ("lds_per_k_step", "LDSM+LDS/K-step"), ("bar_per_k_step", "BAR/K-step"),
        ("ldg128", "128-bit LDG/all LDG"),
        ("mma_sync_in_ptx", "mma.sync"), ("wgmma_in_ptx", "wgmma"),
        ("emu_conflicts", "emu loop bank conflicts"), ("emu_coalescing", "emu loop coalescing")]


def fmt(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


def table(rows: list[dict]) -> str:
    out = ["| " + " | ".join(h for _, h in COLS) + " |",
           "|" + "---|" * len(COLS)]
    for r in rows:
        out.append("| " + " | ".join(fmt(r.get(k)) for k, _ in COLS) + " |")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--triton-python", help="a Python that can import triton")
    ap.add_argument("--out", help="markdown file (default benchmarks/results/"
                    "matmul-static-<date>-cpu.md)")
    args = ap.parse_args(argv)
    if not sass.tools_available():
        print("cuobjdump/nvdisasm not found: pip install nvidia-cuda-cuobjdump "
              "nvidia-cuda-nvdisasm", file=sys.stderr)
        return 1
    rows = [ours("sm_80"), ours("sm_90a")]
    notes = ["Ours: examples/matmul.tile at 128 x 128 x 64 over one warp group, its "
             "configuration on every target but sm_90a (`-D BN=128 BK=64`, `reqntid = (128, 1, "
             "1)`, clusters of two, `maxnreg = by_target(sm_90a = 168)`; sm_90a: clusters of "
             "two CTAs with B multicast, TMA and wgmma; sm_80: cp.async and mma.sync, 2 x 2 warps of 64 x 64) "
             "with the default facts of `tilec` (contiguous, 16-byte aligned, last extent a "
             "multiple of 16 bytes: `cae`, docs/abi.md), the counterpart of Triton's "
             "divisibility-by-16 specialization; each cp.async chunk is whole or zeros by one "
             "predicate."]
    py = find_triton_python(args.triton_python)
    if py is None:
        notes.append("Triton is not installed here (no --triton-python, $TRITON_PYTHON or "
                     "importable triton): its rows are left out.")
    else:
        ver = subprocess.run([py, "-c", "import triton; print(triton.__version__)"],
                             capture_output=True, text=True).stdout.strip()
        with tempfile.TemporaryDirectory(prefix="tile-triton-") as d:
            for cc, arch in ((80, "sm_80"), (90, "sm_90a")):
                ptx, info = triton(py, cc, d)
                emu = None
                if "wgmma" not in ptx:
                    grid = ((EMU_M // BM) * (EMU_N // BN), 1, 1)
                    emu = emulate(ptx, info["kernel"], grid, tuple(info["block"]),
                                  triton_args, shared=info["shared_bytes"])
                rows.append(analyze(f"triton {ver} cc{cc}", arch, ptx, info["num_warps"],
                                    info["shared_bytes"], emu))
                if cc == 80:      # its mma.sync kernel assembled for Hopper, like ours
                    rows.append(analyze(f"triton {ver} cc80 PTX", "sm_90a", ptx,
                                        info["num_warps"], info["shared_bytes"], emu))
            # its best form on Hopper: tensor descriptors (TMA loads, wgmma, a TMA store)
            ptx, info = triton_tma(py, d)
            rows.append(analyze(f"triton {ver} cc90 TMA", "sm_90a", ptx, info["num_warps"],
                                info["shared_bytes"]))
        notes.append(f"Triton {ver}: 4 warps, 3 stages, tt.divisibility=16 on pointers, M, N, "
                     "K and strides (its JIT's specialization for aligned 4096^3 operands); "
                     "its shared memory is dynamic and counted in `smem B`. `cc80`, `cc90`: its "
                     "tutorial's pointer loads (cp.async, masks in the K loop); `cc90 TMA`: "
                     "host tensor descriptors (benchmarks/triton_ref/gen_tma_matmul_ptx.py), "
                     "its best form on Hopper and the one to compare Tile's TMA loop with.")
    text = (f"# Static matmul comparison ({datetime.date.today().isoformat()}, no GPU)\n\n"
            f"`python3 benchmarks/matmul_static.py` — tile {BM} x {BN} x {BK}, f16 inputs, "
            "f32 accumulator and output; all PTX assembled by nvJitLink "
            f"and disassembled by cuobjdump.\n\n{table(rows)}\n\n"
            + "".join(f"* {n}\n" for n in notes)
            + "* One K-step is BK = 64 of K: BM x BN x BK / warps multiply-adds per warp; "
              "instructions per K-step are the main loop's instructions divided by the "
              "K-steps one iteration covers (from its multiply-adds: HMMA.16816 = 2048, "
              "HMMA.1688 = 1024, FFMA = 32 per warp instruction, HGMMA.64xNx16 = a quarter "
              "of 64 x N x 16 per warp). MMA instructions are HMMA (mma.sync) or HGMMA "
              "(wgmma).\n")
    print(text)
    out = args.out or str(ROOT / "benchmarks" / "results" /
                          f"matmul-static-{datetime.date.today().isoformat()}-cpu.md")
    Path(out).write_text(text)
    print(f"written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
