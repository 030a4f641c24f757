"""Compile a Triton matmul of K-major operands in another dtype than f16 to PTX, no GPU:
tf32 (f32 inputs, `input_precision = "tf32"`), f8e4m3 (`fp8e4nv`) into f32, and i8 into i32.

Run with a Python that has Triton 3.9 (see gen_matmul_ptx.py):

    tvenv/bin/python benchmarks/triton_ref/gen_kinds_matmul_ptx.py --out DIR [--arch 100]

A is (M, K) and B is stored (N, K), both moved by host tensor descriptors (TMA) with boxes of
BM x BK and BN x BK, and the product is `tl.dot(a, b.T, acc)`: the K-major operands of
tcgen05's tf32 and 8-bit kinds on sm_100a (`kind::tf32`, `kind::f8f6f4`, `kind::i8`); kind
"f8e4m3-kn" stores B (K, N) instead (`tl.dot(a, b, acc)`: Triton reads it MN-major).
benchmarks/blackwell_static.py compares it with Tile's kernel of the same shape.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

# kind -> (Triton's element type, accumulator type, input precision, BK of 128-byte rows);
# "-kn": B stored (K, N) (`kn_matmul`, an MN-major B on tcgen05)
KINDS = {"tf32": ("fp32", "fp32", "tf32", 32), "f8e4m3": ("fp8e4nv", "fp32", "ieee", 128),
         "i8": ("i8", "i32", "ieee", 128), "f8e4m3-kn": ("fp8e4nv", "fp32", "ieee", 128)}


@triton.jit
def kmajor_matmul(a_desc, b_desc, c_desc, M, N, K, BM: tl.constexpr, BN: tl.constexpr,
                  BK: tl.constexpr, ACC: tl.constexpr, PREC: tl.constexpr):
    # c[M, N] = a[M, K] @ bt[N, K]^T; the descriptors' boxes are a: BM x BK, bt: BN x BK
    pid = tl.program_id(0)
    tiles_n = tl.cdiv(N, BN)
    tm = pid // tiles_n
    tn = pid % tiles_n
    acc = tl.zeros((BM, BN), dtype=ACC)
    for k in range(0, tl.cdiv(K, BK)):
        x = a_desc.load([tm * BM, k * BK])
        y = b_desc.load([tn * BN, k * BK])
        acc = tl.dot(x, y.T, acc, input_precision=PREC, out_dtype=ACC)
    c_desc.store([tm * BM, tn * BN], acc)


@triton.jit
def kn_matmul(a_desc, b_desc, c_desc, M, N, K, BM: tl.constexpr, BN: tl.constexpr,
              BK: tl.constexpr, ACC: tl.constexpr, PREC: tl.constexpr):
    # c[M, N] = a[M, K] @ b[K, N]; the descriptors' boxes are a: BM x BK, b: BK x BN
    pid = tl.program_id(0)
    tiles_n = tl.cdiv(N, BN)
    tm = pid // tiles_n
    tn = pid % tiles_n
    acc = tl.zeros((BM, BN), dtype=ACC)
    for k in range(0, tl.cdiv(K, BK)):
        x = a_desc.load([tm * BM, k * BK])
        y = b_desc.load([k * BK, tn * BN])
        acc = tl.dot(x, y, acc, input_precision=PREC, out_dtype=ACC)
    c_desc.store([tm * BM, tn * BN], acc)


def compile_kind(kind: str, bm: int = 128, bn: int = 128, warps: int = 4, stages: int = 3,
                 arch: int = 100):
    """`kmajor_matmul` for `kind` (a key of KINDS) at a BM x BN x BK tile, BK the kind's."""
    ty, acc, prec, bk = KINDS[kind]
    kn = kind.endswith("-kn")
    b_box = f"[{bk}, {bn}]" if kn else f"[{bn}, {bk}]"
    sig = {"a_desc": f"tensordesc<{ty}[{bm}, {bk}]>", "b_desc": f"tensordesc<{ty}{b_box}>",
           "c_desc": f"tensordesc<{acc}[{bm}, {bn}]>", "M": "i32", "N": "i32", "K": "i32",
           "BM": "constexpr", "BN": "constexpr", "BK": "constexpr", "ACC": "constexpr",
           "PREC": "constexpr"}
    consts = {"BM": bm, "BN": bn, "BK": bk, "PREC": prec,
              "ACC": tl.float32 if acc == "fp32" else tl.int32}
    return triton.compile(ASTSource(kn_matmul if kn else kmajor_matmul, sig, consts, {}),
                          target=GPUTarget("cuda", arch, 32),
                          options={"num_warps": warps, "num_stages": stages})


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--arch", type=int, default=100)
    args = ap.parse_args(argv)
    os.environ.setdefault("TRITON_CACHE_DIR", tempfile.mkdtemp(prefix="triton-cache-"))
    os.environ.setdefault("TRITON_DISABLE_LINE_INFO", "1")
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    os.makedirs(args.out, exist_ok=True)
    for kind in KINDS:
        k = compile_kind(kind, arch=args.arch)
        with open(os.path.join(args.out, f"triton_kmajor_{kind}_sm{args.arch}.ptx"), "w") as f:
            f.write(k.asm["ptx"])
        print(kind, k.metadata.shared)
    return 0


if __name__ == "__main__":
    sys.exit(main())
