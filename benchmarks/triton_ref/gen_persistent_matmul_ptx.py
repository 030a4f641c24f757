"""Compile a persistent Triton matmul (the structure of Triton's persistent-matmul tutorial)
to PTX without a GPU, for the static comparison with examples/matmul_persistent.tile.

    tvenv/bin/python benchmarks/triton_ref/gen_persistent_matmul_ptx.py --out DIR

One program per SM (NUM_SMS, a constexpr as in the tutorial) walks the output tiles
start, start + NUM_SMS, ... in grouped order; per tile it runs the K loop (masked loads, `tl.dot`
into an f32 accumulator) and stores the tile. `tl.range(..., flatten=True)` lets Triton's
pipeliner treat the two loops as one, so the next tile's first loads overlap this tile's last
products. `compile_tma_kernel` builds the same walk with host tensor descriptors (TMA loads and
store; the K loop kept apart unless `flatten`), the form benchmarks/hopper_static.py compares. Tile 128 x 128 x 64, f16 inputs, f32 output, 4 warps, 3 stages, compute capability
9.0, with the JIT's divisibility-by-16 specialization of a 4096^3 product (every pointer, size
and stride). Writes triton_persistent_matmul_sm90.ptx and .json into --out; `compile_kernel`
is what benchmarks/hopper_static.py calls.
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

TILE = {"BM": 128, "BN": 128, "BK": 64, "GROUP": 8, "NUM_SMS": 132}
NUM_WARPS, NUM_STAGES = 4, 3


@triton.jit
def _tile_of(t, per_group, tiles_m, GROUP: tl.constexpr):
    # grouped order: GROUP tile rows at a time, down each column of the group
    first_m = (t // per_group) * GROUP
    rows = tl.minimum(tiles_m - first_m, GROUP)
    return first_m + (t % rows), (t % per_group) // rows


@triton.jit
def persistent_matmul(a, b, c, M, N, K, lda, ldb, ldc,
                      BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                      GROUP: tl.constexpr, NUM_SMS: tl.constexpr):
    first = tl.program_id(0)
    tiles_m = tl.cdiv(M, BM)
    tiles_n = tl.cdiv(N, BN)
    steps = tl.cdiv(K, BK)
    per_group = GROUP * tiles_n
    kk = tl.arange(0, BK)
    # the store's own tile counter (the tutorial keeps one apart from the loads' for the
    # pipeliner's sake)
    t_out = first - NUM_SMS
    for t in tl.range(first, tiles_m * tiles_n, NUM_SMS, flatten=True):
        tm, tn = _tile_of(t, per_group, tiles_m, GROUP)
        rm = tm * BM + tl.arange(0, BM)
        rn = tn * BN + tl.arange(0, BN)
        rm = tl.max_contiguous(tl.multiple_of(tl.where(rm < M, rm, 0), BM), BM)
        rn = tl.max_contiguous(tl.multiple_of(tl.where(rn < N, rn, 0), BN), BN)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for s in range(steps):
            left = K - s * BK
            x = tl.load(a + rm[:, None] * lda + (s * BK + kk)[None, :],
                        mask=kk[None, :] < left, other=0.0)
            y = tl.load(b + (s * BK + kk)[:, None] * ldb + rn[None, :],
                        mask=kk[:, None] < left, other=0.0)
            acc = tl.dot(x, y, acc)
        t_out += NUM_SMS
        om, on = _tile_of(t_out, per_group, tiles_m, GROUP)
        cm = om * BM + tl.arange(0, BM)
        cn = on * BN + tl.arange(0, BN)
        tl.store(c + cm[:, None] * ldc + cn[None, :], acc,
                 mask=(cm[:, None] < M) & (cn[None, :] < N))


@triton.jit
def persistent_tma_matmul(a_desc, b_desc, c_desc, M, N, K,
                          BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                          GROUP: tl.constexpr, NUM_SMS: tl.constexpr, FLATTEN: tl.constexpr):
    # the same walk with host-built tensor descriptors (TMA loads and store, as the tutorial's
    # descriptor form); FLATTEN = False keeps the K loop a loop of its own, so its body is the
    # steady state a K-step costs
    first = tl.program_id(0)
    tiles_m = tl.cdiv(M, BM)
    tiles_n = tl.cdiv(N, BN)
    steps = tl.cdiv(K, BK)
    per_group = GROUP * tiles_n
    t_out = first - NUM_SMS
    for t in tl.range(first, tiles_m * tiles_n, NUM_SMS, flatten=FLATTEN):
        tm, tn = _tile_of(t, per_group, tiles_m, GROUP)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for s in range(steps):
            x = a_desc.load([tm * BM, s * BK])
            y = b_desc.load([s * BK, tn * BN])
            acc = tl.dot(x, y, acc)
        t_out += NUM_SMS
        om, on = _tile_of(t_out, per_group, tiles_m, GROUP)
        c_desc.store([om * BM, on * BN], acc)


SIGNATURE = {"a": "*fp16", "b": "*fp16", "c": "*fp32", "M": "i32", "N": "i32", "K": "i32",
             "lda": "i32", "ldb": "i32", "ldc": "i32", "BM": "constexpr", "BN": "constexpr",
             "BK": "constexpr", "GROUP": "constexpr", "NUM_SMS": "constexpr"}
DIVISIBLE = ["a", "b", "c", "M", "N", "K", "lda", "ldb", "ldc"]


def compile_kernel(arch: int = 90, stages: int = NUM_STAGES, warps: int = NUM_WARPS):
    names = list(SIGNATURE)
    attrs = {(names.index(n),): [["tt.divisibility", 16]] for n in DIVISIBLE}
    src = ASTSource(persistent_matmul, SIGNATURE, dict(TILE), attrs)
    return triton.compile(src, target=GPUTarget("cuda", arch, 32),
                          options={"num_warps": warps, "num_stages": stages})


def compile_tma_kernel(arch: int = 90, stages: int = NUM_STAGES, warps: int = NUM_WARPS,
                       flatten: bool = False):
    """`persistent_tma_matmul` at TILE: descriptors of a (BM x BK), b (BK x BN), c (BM x BN)."""
    bm, bn, bk = TILE["BM"], TILE["BN"], TILE["BK"]
    sig = {"a_desc": f"tensordesc<fp16[{bm}, {bk}]>", "b_desc": f"tensordesc<fp16[{bk}, {bn}]>",
           "c_desc": f"tensordesc<fp32[{bm}, {bn}]>", "M": "i32", "N": "i32", "K": "i32",
           **{k: "constexpr" for k in (*TILE, "FLATTEN")}}
    src = ASTSource(persistent_tma_matmul, sig, dict(TILE, FLATTEN=flatten), {})
    return triton.compile(src, target=GPUTarget("cuda", arch, 32),
                          options={"num_warps": warps, "num_stages": stages})


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="output folder")
    args = ap.parse_args(argv)
    os.environ.setdefault("TRITON_CACHE_DIR", tempfile.mkdtemp(prefix="triton-cache-"))
    os.environ.setdefault("TRITON_DISABLE_LINE_INFO", "1")
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    k = compile_kernel()
    os.makedirs(args.out, exist_ok=True)
    stem = os.path.join(args.out, "triton_persistent_matmul_sm90")
    with open(stem + ".ptx", "w") as f:
        f.write(k.asm["ptx"])
    info = {"generator": "benchmarks/triton_ref/gen_persistent_matmul_ptx.py",
            "triton": triton.__version__, "kernel": k.metadata.name, "constexprs": TILE,
            "num_warps": k.metadata.num_warps, "num_stages": NUM_STAGES,
            "grid": "(NUM_SMS, 1, 1)"}
    with open(stem + ".json", "w") as f:
        json.dump(info, f, indent=1)
        f.write("\n")
    print(json.dumps(info))
    return 0


if __name__ == "__main__":
    sys.exit(main())
