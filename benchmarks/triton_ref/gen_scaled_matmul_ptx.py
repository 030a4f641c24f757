"""Compile a block-scaled (MXFP8) Triton matmul to PTX for sm_100a, no GPU needed.

Run with a Python that has Triton 3.9 (see gen_matmul_ptx.py):

    tvenv/bin/python benchmarks/triton_ref/gen_scaled_matmul_ptx.py --out DIR

`tl.dot_scaled` (128 x 64 x 128 tiles) with e4m3 operands and one ue8m0 scale per row (of A)
or column (of B) and 32 K elements (the OCP MX block): Triton 3.9 stages A and the scales in tensor memory
(`tcgen05.st`) and multiplies with `tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale.block32`,
four K steps of 32 per 128-wide K tile, the idesc's scale-byte fields picking each step's
scale. Inputs: a [M, K] and b [K, N] as e4m3 bytes, a_scale [M, K/32] and b_scale [N, K/32]
as ue8m0 bytes, all row-major; M a multiple of 128, N of 64, K of 128 (no masks). Writes
`<name>.ptx` and `.json` (launch: grid (M/128, N/64), 128 threads; the kernel's parameters
end with Triton's two scratch pointers: pass 0). The committed fixture
tests/emulator/fixtures/triton_scaled_matmul_sm100.{ptx,json} was made with the defaults,
triton_scaled_matmul_e2m1_sm100 with `--fmt e2m1 --name triton_scaled_matmul_e2m1_sm100`: MXFP4,
a and b packed two e2m1 a byte along K (a [M, K/2], b [K/2, N] bytes, the even K index in bits
0-3), multiplied by `tcgen05.mma...kind::mxf4.block_scale.block32` (K = 64 a step, two scales
per row each) with both operands from shared memory. `--arch 120 --name
triton_scaled_matmul_sm120` (sm_120a, consumer Blackwell: no tcgen05) gives
`mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X` with the scales
in registers; with `--fmt e2m1 --name triton_scaled_matmul_e2m1_sm120`,
`mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::2X` (e2m1, two ue8m0
scales per row and step). `--fmt e2m1 --scale e4m3` is NVFP4: one f8e4m3 scale per 16 K
(a_scale [M, K/16], b_scale [N, K/16]), which Triton multiplies with `tcgen05.mma...
kind::mxf4nvf4.block_scale.block16` (`--name triton_scaled_matmul_nvfp4_sm100`) and
`mma.sync...m16n8k64...kind::mxf4nvf4.block_scale.scale_vec::4X...ue4m3` (`--arch 120
--name triton_scaled_matmul_nvfp4_sm120`); `--bk 64 --name triton_scaled_matmul_nvfp4_bk64_sm100`
is the sm_100a tile Tile's tcgen05 FP4 form takes (one instruction a K-step). `--bk 64 --name triton_scaled_matmul_bk64_sm100`: two scales per row
a tile, which Triton stores into tensor memory with `tcgen05.st.32x32b.xN.unpack::16b`.
`--bm 64 --bk 64 --name triton_scaled_matmul_bm64_sm100`: 64 x 64 x 64, where no block-scaled
tcgen05 form applies (M = 64): Triton dequantizes to bf16 and multiplies with kind::f16.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource


@triton.jit
def scaled_matmul(a, a_scale, b, b_scale, c, M, N, K,
                  BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, FMT: tl.constexpr,
                  G: tl.constexpr):
    # c[M, N] = (a * a_scale) @ (b * b_scale), one scale per G (32: ue8m0, 16: f8e4m3) K
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    rs = tl.arange(0, BK // G)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, K, BK):
        if FMT == "e2m1":           # two values a byte along K, the even one in bits 0-3
            x = tl.load(a + rm[:, None] * (K // 2) + (k0 // 2 + tl.arange(0, BK // 2))[None, :])
            y = tl.load(b + (k0 // 2 + tl.arange(0, BK // 2))[:, None] * N + rn[None, :])
        else:
            x = tl.load(a + rm[:, None] * K + (k0 + rk)[None, :])
            y = tl.load(b + (k0 + rk)[:, None] * N + rn[None, :])
        xs = tl.load(a_scale + rm[:, None] * (K // G) + (k0 // G + rs)[None, :])
        ys = tl.load(b_scale + rn[:, None] * (K // G) + (k0 // G + rs)[None, :])
        acc = tl.dot_scaled(x, xs, FMT, y, ys, FMT, acc)
    tl.store(c + rm[:, None] * N + rn[None, :], acc)


SIGNATURE = {"a": "*u8", "a_scale": "*u8", "b": "*u8", "b_scale": "*u8", "c": "*fp32",
             "M": "i32", "N": "i32", "K": "i32", "BM": "constexpr", "BN": "constexpr",
             "BK": "constexpr", "FMT": "constexpr", "G": "constexpr"}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--name", default="triton_scaled_matmul_sm100")
    ap.add_argument("--fmt", choices=("e4m3", "e2m1"), default="e4m3")
    ap.add_argument("--arch", type=int, choices=(100, 120), default=100)
    ap.add_argument("--bk", type=int, choices=(64, 128), default=128)
    ap.add_argument("--scale", choices=("e8m0", "e4m3"), default="e8m0")
    ap.add_argument("--bm", type=int, choices=(64, 128), default=128)
    ap.add_argument("--bn", type=int, choices=(64,), default=64)
    args = ap.parse_args(argv)
    if args.scale == "e4m3" and args.fmt != "e2m1":
        ap.error("--scale e4m3 (NVFP4) takes --fmt e2m1")
    sig = dict(SIGNATURE)
    if args.scale == "e4m3":
        sig["a_scale"] = sig["b_scale"] = "*fp8e4nv"
    os.environ.setdefault("TRITON_CACHE_DIR", tempfile.mkdtemp(prefix="triton-cache-"))
    os.environ.setdefault("TRITON_DISABLE_LINE_INFO", "1")
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    consts = {"BM": args.bm, "BN": args.bn, "BK": args.bk, "FMT": args.fmt,
              "G": 16 if args.scale == "e4m3" else 32}
    k = triton.compile(ASTSource(scaled_matmul, sig, consts, {}),
                       target=GPUTarget("cuda", args.arch, 32),
                       options={"num_warps": 4, "num_stages": 2})
    os.makedirs(args.out, exist_ok=True)
    stem = os.path.join(args.out, args.name)
    with open(stem + ".ptx", "w") as f:
        f.write(k.asm["ptx"])
    md = k.metadata
    info = {"generator": "benchmarks/triton_ref/gen_scaled_matmul_ptx.py",
            "triton": triton.__version__, "target": f"sm_{args.arch}a", "kernel": md.name,
            "constexprs": consts, "num_warps": md.num_warps, "shared_bytes": md.shared,
            "block": [32 * md.num_warps, 1, 1], "grid": "(M / BM, N / BN, 1)",
            "trailing_params": "global scratch and profile scratch pointers: pass 0"}
    with open(stem + ".json", "w") as f:
        json.dump(info, f, indent=1)
        f.write("\n")
    print(json.dumps(info))
    return 0


if __name__ == "__main__":
    sys.exit(main())
