"""Compile a Triton matmul that moves its tiles with tensor descriptors (TMA) to PTX, no GPU.

Run with a Python that has Triton 3.9 (see gen_matmul_ptx.py):

    tvenv/bin/python benchmarks/triton_ref/gen_tma_matmul_ptx.py --out DIR

The kernel takes host-built tensor descriptors (`triton.tools.tensor_descriptor.
TensorDescriptor` on a GPU): each becomes a 128-byte `.param .align 64 .b8 [128]` tensor map
followed by the tensor's shape (i32) and strides (i64) — on the emulator the test builds the
tensor map with `tilelang.emulator.tensormap.encode`. Loads are
`cp.async.bulk.tensor.2d` completing on mbarriers with transaction counts (`expect_tx`,
`try_wait.parity`), the product is `wgmma`, and the epilogue stores C with
`cp.async.bulk.tensor` from shared memory (`bulk_group`). Triton lays the tiles out with the
128-byte swizzle (`swizzle` 3 in the JSON's `tensordesc_meta`); the C store box is 64 x 32
f32 (128-byte rows). The committed fixtures were made with the defaults (64 x 64 x 64 tile,
4 warps, 3 stages): tests/emulator/fixtures/triton_tma_matmul_sm90.{ptx,json}, and with
`--ctas 2 --name triton_tma_matmul_cluster2_sm90`: clusters of two CTAs (`.reqnctapercluster
2`, `barrier.cluster`), each computing half of the tile's columns (B boxes of 64 x 32 with the
64-byte swizzle; the JSON's `tensordesc_meta` gives every box and swizzle). The launch then has
`num_ctas` blocks per tile. With `--arch 100 --tile 128x128x64 --name triton_tma_matmul_sm100`
the product is `tcgen05.mma` on the TMA-filled buffers, accumulating in tensor memory; with
`--arch 120 --tile 128x128x64 --name triton_tma_matmul_sm120` (consumer Blackwell, sm_120a)
`ldmatrix` reads the TMA-filled buffers into `mma.sync`.
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
def tma_matmul(a_desc, b_desc, c_desc, M, N, K,
               BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    # c[M, N] = a[M, K] @ b[K, N]; the descriptors' boxes are a: BM x BK, b: BK x BN
    pid = tl.program_id(0)
    tiles_n = tl.cdiv(N, BN)
    tm = pid // tiles_n
    tn = pid % tiles_n
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        x = a_desc.load([tm * BM, k * BK])
        y = b_desc.load([k * BK, tn * BN])
        acc = tl.dot(x, y, acc)
    c_desc.store([tm * BM, tn * BN], acc)


def compile_kernel(bm: int = 64, bn: int = 64, bk: int = 64, warps: int = 4, stages: int = 3,
                   ctas: int = 1, arch: int = 90):
    """`tma_matmul` compiled for compute capability `arch` at a BM x BN x BK tile."""
    sig = {"a_desc": f"tensordesc<fp16[{bm}, {bk}]>", "b_desc": f"tensordesc<fp16[{bk}, {bn}]>",
           "c_desc": f"tensordesc<fp32[{bm}, {bn}]>", "M": "i32", "N": "i32", "K": "i32",
           "BM": "constexpr", "BN": "constexpr", "BK": "constexpr"}
    src = ASTSource(tma_matmul, sig, {"BM": bm, "BN": bn, "BK": bk}, {})
    return triton.compile(src, target=GPUTarget("cuda", arch, 32),
                          options={"num_warps": warps, "num_stages": stages, "num_ctas": ctas})


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--name", default="triton_tma_matmul_sm90")
    ap.add_argument("--tile", default="64x64x64", help="BMxBNxBK")
    ap.add_argument("--warps", type=int, default=4)
    ap.add_argument("--stages", type=int, default=3)
    ap.add_argument("--ctas", type=int, default=1, help="num_ctas (a cluster per program)")
    ap.add_argument("--arch", type=int, default=90,
                    help="90 (wgmma), 100 (tcgen05) or 120 (mma.sync)")
    args = ap.parse_args(argv)
    bm, bn, bk = (int(v) for v in args.tile.split("x"))
    os.environ.setdefault("TRITON_CACHE_DIR", tempfile.mkdtemp(prefix="triton-cache-"))
    os.environ.setdefault("TRITON_DISABLE_LINE_INFO", "1")
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    k = compile_kernel(bm, bn, bk, args.warps, args.stages, args.ctas, args.arch)
    os.makedirs(args.out, exist_ok=True)
    stem = os.path.join(args.out, args.name)
    with open(stem + ".ptx", "w") as f:
        f.write(k.asm["ptx"])
    md = k.metadata
    info = {
        "generator": "benchmarks/triton_ref/gen_tma_matmul_ptx.py",
        "triton": triton.__version__,
        "target": f"sm_{args.arch}a",
        "kernel": md.name,
        "dtype": "f16",
        "constexprs": {"BM": bm, "BN": bn, "BK": bk},
        "num_warps": md.num_warps,
        "num_stages": args.stages,
        "shared_bytes": md.shared,
        "block": [32 * md.num_warps, 1, 1],
        "num_ctas": args.ctas,
        "grid": "(num_ctas * cdiv(M, BM) * cdiv(N, BN), 1, 1) blocks, clusters of num_ctas",
        "params": "per descriptor: tensor map [128 bytes], shape (2 x i32), strides (2 x i64); "
                  "then M, N, K (i32); then global and profile scratch pointers (pass 0)",
        "tensordesc_meta": md.tensordesc_meta,
        "global_scratch_size": getattr(md, "global_scratch_size", 0),
    }
    with open(stem + ".json", "w") as f:
        json.dump(info, f, indent=1)
        f.write("\n")
    print(json.dumps(info))
    return 0


if __name__ == "__main__":
    sys.exit(main())
