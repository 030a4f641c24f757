"""Compile a Triton matmul with a transposed A operand to PTX for sm_90a, no GPU.

Run with a Python that has Triton 3.9 (see gen_matmul_ptx.py):

    tvenv/bin/python benchmarks/triton_ref/gen_matmul_tn_ptx.py --out DIR

C = A @ B where A is given transposed (stored K x M, M contiguous) and B is K x N: Triton keeps
both operands MN-major in shared memory, so its wgmma reads A with `imm-trans-a` 1 and B with
`imm-trans-b` 1, and the narrow tiles give B rows of 16, 32 and 64 bytes: no swizzle (a
descriptor with leading and stride byte offsets, built at run time), and the 32- and 64-byte
swizzles. Together with the other fixtures this covers every descriptor form Triton emits for
16-bit inputs. Pointers, M, N and the row strides are specialized divisible by 16. Writes
`triton_matmul_tn_<BM>x<BN>x<BK>_sm90.{ptx,json}` for 64x8x16, 64x16x16 and 64x32x32 tiles.
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
def matmul_tn(a, b, c, M, N, K, lda, ldb, ldc,
              BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    # c[M, N] = a^T @ b with a stored K x M (row stride lda) and b K x N (row stride ldb)
    pid = tl.program_id(0)
    tiles_n = tl.cdiv(N, BN)
    tm = pid // tiles_n
    tn = pid % tiles_n
    rm = tm * BM + tl.arange(0, BM)
    rn = tn * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    pa = a + rk[:, None] * lda + rm[None, :]
    pb = b + rk[:, None] * ldb + rn[None, :]
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(0, tl.cdiv(K, BK)):
        k_left = K - k0 * BK
        x = tl.load(pa, mask=(rk[:, None] < k_left) & (rm[None, :] < M), other=0.0)
        y = tl.load(pb, mask=(rk[:, None] < k_left) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(tl.trans(x), y, acc)
        pa += BK * lda
        pb += BK * ldb
    pc = c + rm[:, None] * ldc + rn[None, :]
    tl.store(pc, acc, mask=(rm[:, None] < M) & (rn[None, :] < N))

SIG = {"a": "*fp16", "b": "*fp16", "c": "*fp32", "M": "i32", "N": "i32", "K": "i32",
       "lda": "i32", "ldb": "i32", "ldc": "i32",
       "BM": "constexpr", "BN": "constexpr", "BK": "constexpr"}
DIVISIBLE = ["a", "b", "c", "M", "N", "lda", "ldb", "ldc"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    os.environ.setdefault("TRITON_CACHE_DIR", tempfile.mkdtemp(prefix="triton-cache-"))
    os.environ.setdefault("TRITON_DISABLE_LINE_INFO", "1")
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    os.makedirs(args.out, exist_ok=True)
    names = list(SIG)
    attrs = {(names.index(n),): [["tt.divisibility", 16]] for n in DIVISIBLE}
    for bm, bn, bk in ((64, 8, 16), (64, 16, 16), (64, 32, 32)):
        consts = {"BM": bm, "BN": bn, "BK": bk}
        k = triton.compile(ASTSource(matmul_tn, SIG, consts, attrs),
                           target=GPUTarget("cuda", 90, 32),
                           options={"num_warps": 4, "num_stages": 3})
        stem = os.path.join(args.out, f"triton_matmul_tn_{bm}x{bn}x{bk}_sm90")
        with open(stem + ".ptx", "w") as f:
            f.write(k.asm["ptx"])
        info = {"generator": "benchmarks/triton_ref/gen_matmul_tn_ptx.py",
                "triton": triton.__version__, "target": "sm_90a", "kernel": k.metadata.name,
                "constexprs": consts, "divisible_by_16": DIVISIBLE,
                "num_warps": k.metadata.num_warps, "shared_bytes": k.metadata.shared,
                "block": [32 * k.metadata.num_warps, 1, 1],
                "grid": "(cdiv(M, BM) * cdiv(N, BN), 1, 1)",
                "params": "a (A^T, K x M), b (K x N), c (M x N f32), M, N, K, lda, ldb, ldc; "
                          "then two scratch pointers (pass 0)"}
        with open(stem + ".json", "w") as f:
            json.dump(info, f, indent=1)
            f.write("\n")
        print(json.dumps(info))
    return 0


if __name__ == "__main__":
    sys.exit(main())
