"""Compile a tutorial-style Triton matmul to PTX (and SASS-ready cubin) without a GPU.

Run with a Python that has Triton (3.9 was used for the committed fixture), e.g. a separate
virtual environment made with `python3 -m venv tvenv && tvenv/bin/pip install triton==3.9.0`:

    tvenv/bin/python benchmarks/triton_ref/gen_matmul_ptx.py --arch 80 --out DIR

The kernel is written here in the style of Triton's matmul tutorial (grouped tile order,
masked loads, `tl.dot` with an f32 accumulator) for the tile of `examples/matmul.tile`:
128 x 128 x 64, f16 inputs, f32 output, 4 warps, 3 pipeline stages. Triton's JIT specializes
16-byte-aligned pointers and integers divisible by 16 with `tt.divisibility = 16`; the
`--spec` option chooses what this AOT compile assumes:

* `aligned` (the emulator fixture): pointers, row strides, N and K divisible by 16, M
  arbitrary. Triton vectorizes a masked load only where the mask is constant over 16-byte
  runs, so without N and K divisible by 16 it would load 2-byte elements and use neither
  `cp.async` nor `ldmatrix`-friendly copies; M (a row mask) does not matter. Ragged shapes
  are therefore ragged at 16-element granularity in N and K and arbitrary in M;
* `jit4096` (the static comparison): what the JIT gives a 4096^3 product of contiguous,
  aligned tensors: every pointer, size and stride divisible by 16.

`--dtype` picks the input type (f16; bf16; tf32: f32 data multiplied on tf32; i8 with an
int32 accumulator and output; e4m3 for cc 8.9+), `--tile` and `--stages` the tile and pipeline
depth. The emulator fixtures in tests/emulator/fixtures/ were made by

    gen_matmul_ptx.py --arch 80 --out F
    gen_matmul_ptx.py --arch 80 --dtype {bf16,tf32,i8} --tile 64x64x32 \
        --name triton_matmul_<dtype>_sm80 --out F
    gen_matmul_ptx.py --arch 89 --dtype e4m3 --tile 64x64x64 --name triton_matmul_e4m3_sm89 --out F
    gen_matmul_ptx.py --arch 90 --warps 8 --name triton_matmul_sm90 --out F    (wgmma, 2 groups)
    gen_matmul_ptx.py --arch 90 --dtype e4m3 --tile 64x64x64 --name triton_matmul_e4m3_sm90 --out F
    gen_matmul_ptx.py --arch 100 --name triton_matmul_sm100 --out F     (tcgen05, TMEM)
    gen_matmul_ptx.py --arch 100 --dtype {bf16,i8,e4m3} --name triton_matmul_<dtype>_sm100 --out F
    gen_matmul_ptx.py --arch 100 --dtype tf32 --tile 128x128x32 --name triton_matmul_tf32_sm100 \
        --out F
    gen_matmul_ptx.py --arch 100 --tile 64x64x64 --name triton_matmul_64x64_sm100 --out F
        (M = 64 accumulators, tcgen05.ld/st .16x32bx2)

Writes `triton_matmul_sm<arch>.ptx`, `.cubin` and `.json` (signature, constexprs, warps,
stages, shared memory, grid rule) into --out. The parameters Triton appends to every kernel
(global and profile scratch pointers) are listed in the JSON: pass 0 for them.
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

TILE = {"BM": 128, "BN": 128, "BK": 64, "GROUP": 8}
NUM_WARPS, NUM_STAGES = 4, 3


@triton.jit
def tiled_matmul(a, b, c, M, N, K, lda, ldb, ldc,
                 BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP: tl.constexpr,
                 ACC: tl.constexpr = tl.float32, PREC: tl.constexpr = "tf32"):
    # c[M, N] = a[M, K] @ b[K, N], rows contiguous; lda/ldb/ldc are row strides in elements.
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BM)
    tiles_n = tl.cdiv(N, BN)
    # Walk GROUP tile-rows at a time so neighbouring programs reuse the same columns of b.
    in_group = GROUP * tiles_n
    first_m = (pid // in_group) * GROUP
    rows_here = tl.minimum(tiles_m - first_m, GROUP)
    tm = first_m + (pid % in_group) % rows_here
    tn = (pid % in_group) // rows_here

    rm = tm * BM + tl.arange(0, BM)
    rn = tn * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    pa = a + rm[:, None] * lda + rk[None, :]
    pb = b + rk[:, None] * ldb + rn[None, :]
    acc = tl.zeros((BM, BN), dtype=ACC)
    for k0 in range(0, tl.cdiv(K, BK)):
        k_left = K - k0 * BK
        x = tl.load(pa, mask=(rm[:, None] < M) & (rk[None, :] < k_left), other=0.0)
        y = tl.load(pb, mask=(rk[:, None] < k_left) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(x, y, acc, input_precision=PREC)
        pa += BK
        pb += BK * ldb
    pc = c + rm[:, None] * ldc + rn[None, :]
    tl.store(pc, acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


SIGNATURE = {"a": "*fp16", "b": "*fp16", "c": "*fp32", "M": "i32", "N": "i32", "K": "i32",
             "lda": "i32", "ldb": "i32", "ldc": "i32",
             "BM": "constexpr", "BN": "constexpr", "BK": "constexpr", "GROUP": "constexpr",
             "ACC": "constexpr", "PREC": "constexpr"}
ARGS = list(SIGNATURE)
# input type -> (pointer types of a/b and c, accumulator, dot precision)
DTYPES = {
    "f16": ("*fp16", "*fp32", tl.float32, "tf32"),
    "bf16": ("*bf16", "*fp32", tl.float32, "tf32"),
    "tf32": ("*fp32", "*fp32", tl.float32, "tf32"),      # f32 data, products on tf32
    "i8": ("*i8", "*i32", tl.int32, "tf32"),
    "e4m3": ("*fp8e4nv", "*fp32", tl.float32, "tf32"),   # sm_89 and newer
}
SPECS = {
    "aligned": ["a", "b", "c", "N", "K", "lda", "ldb", "ldc"],
    "jit4096": ["a", "b", "c", "M", "N", "K", "lda", "ldb", "ldc"],
}


def compile_kernel(arch: int, spec: str, dtype: str = "f16", tile=None, stages=NUM_STAGES,
                   warps=NUM_WARPS):
    # The JIT turns a "D" specialization into this attribute (backends/compiler.py parse_attr)
    attrs = {(ARGS.index(n),): [["tt.divisibility", 16]] for n in SPECS[spec]}
    ab, c, acc, prec = DTYPES[dtype]
    sig = dict(SIGNATURE, a=ab, b=ab, c=c)
    consts = dict(TILE, **(tile or {}), ACC=acc, PREC=prec)
    src = ASTSource(tiled_matmul, sig, consts, attrs)
    target = GPUTarget("cuda", arch, 32)
    return triton.compile(src, target=target,
                          options={"num_warps": warps, "num_stages": stages})


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", type=int, default=80, help="compute capability, e.g. 80 or 90")
    ap.add_argument("--spec", choices=sorted(SPECS), default="aligned")
    ap.add_argument("--out", required=True, help="output folder")
    ap.add_argument("--name", default=None, help="file stem (default triton_matmul_sm<arch>)")
    ap.add_argument("--dtype", choices=sorted(DTYPES), default="f16", help="input type")
    ap.add_argument("--tile", default=None, help="BMxBNxBK (default 128x128x64)")
    ap.add_argument("--stages", type=int, default=NUM_STAGES)
    ap.add_argument("--warps", type=int, default=NUM_WARPS)
    args = ap.parse_args(argv)
    tile = None
    if args.tile:
        bm, bn, bk = (int(v) for v in args.tile.split("x"))
        tile = {"BM": bm, "BN": bn, "BK": bk}
    # Triton's cache stays private to this run
    os.environ.setdefault("TRITON_CACHE_DIR", tempfile.mkdtemp(prefix="triton-cache-"))
    # no DWARF sections in the PTX (keeps the fixture small); fusion stated, not defaulted
    os.environ.setdefault("TRITON_DISABLE_LINE_INFO", "1")
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    k = compile_kernel(args.arch, args.spec, args.dtype, tile, args.stages, args.warps)
    stem = os.path.join(args.out, args.name or f"triton_matmul_sm{args.arch}")
    os.makedirs(args.out, exist_ok=True)
    with open(stem + ".ptx", "w") as f:
        f.write(k.asm["ptx"])
    with open(stem + ".cubin", "wb") as f:
        f.write(k.asm["cubin"])
    md = k.metadata
    params = [n for n in ARGS if SIGNATURE[n] != "constexpr"]
    ab, c, _, prec = DTYPES[args.dtype]
    sig = dict(SIGNATURE, a=ab, b=ab, c=c)
    info = {
        "generator": "benchmarks/triton_ref/gen_matmul_ptx.py",
        "triton": triton.__version__,
        "target": f"sm_{args.arch}",
        "kernel": md.name,
        "dtype": args.dtype,
        "signature": {n: sig[n] for n in params},
        "divisible_by_16": SPECS[args.spec],
        "spec": args.spec,
        "constexprs": dict(TILE, **(tile or {})),
        "input_precision": prec if args.dtype == "tf32" else None,
        "num_warps": md.num_warps,
        "num_stages": args.stages,
        "shared_bytes": md.shared,
        "block": [32 * md.num_warps, 1, 1],
        "grid": "(cdiv(M, BM) * cdiv(N, BN), 1, 1)",
        "trailing_params": "global scratch and profile scratch pointers: pass 0",
        "global_scratch_size": getattr(md, "global_scratch_size", 0),
    }
    with open(stem + ".json", "w") as f:
        json.dump(info, f, indent=1)
        f.write("\n")
    print(json.dumps(info))
    return 0


if __name__ == "__main__":
    sys.exit(main())
