"""Compile a Gluon kernel whose one product runs on a CTA pair (`tcgen05.mma.cta_group::2`)
to PTX for sm_100a, no GPU. The emulator's reading of the 2-CTA instructions is judged by it
(tests/emulator/test_emu_tcgen05_pair.py).

Run with a Python that has Triton 3.9 (see gen_matmul_ptx.py):

    tvenv/bin/python benchmarks/triton_ref/gen_pair_mma_ptx.py --out DIR

One cluster of two CTAs computes c = a @ b for a 256 x K a and a K x N b (defaults 256 x 128 x
64, f16 in, f32 out): CTA r loads rows 128r .. 128r + 127 of a and columns rN/2 .. of b with
`cp.async.bulk.tensor.2d.cta_group::2` (both complete on the even CTA's mbarrier), the even
CTA issues the K/16 `tcgen05.mma.cta_group::2.kind::f16` (M = 256, N = the pair's N) and
commits them to both CTAs' mbarriers (`tcgen05.commit...multicast::cluster`, mask 0b11), and
each CTA reads its 128 rows of the accumulator from its own tensor memory and stores them
with TMA. Triton reaches the even CTA's mbarrier by clearing bit 24 of a shared address (the
hardware keeps a CTA's rank there); the test says how the emulator is given that address.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

import triton
from triton.backends.compiler import GPUTarget
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon._runtime import GluonASTSource
from triton.experimental.gluon.language.nvidia.blackwell import (TensorMemoryLayout,
                                                                  allocate_tensor_memory,
                                                                  tcgen05_mma)
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma


@gluon.jit
def pair_mma(a_desc, b_desc, c_desc):
    rows: gl.constexpr = a_desc.block_shape[0]          # the pair's M
    cols: gl.constexpr = b_desc.block_shape[1]          # the pair's N
    a_img = gl.allocate_shared_memory(a_desc.dtype, a_desc.block_shape, a_desc.layout)
    b_img = gl.allocate_shared_memory(b_desc.dtype, b_desc.block_shape, b_desc.layout)
    # the copies' mbarrier is the even CTA's (two_ctas); the product's is each CTA's own
    landed = mbarrier.allocate_mbarrier(two_ctas=True)
    finished = mbarrier.allocate_mbarrier()
    mbarrier.init(landed, count=1)
    mbarrier.init(finished, count=1)
    mbarrier.expect(landed, a_desc.nbytes_per_cta + b_desc.nbytes_per_cta)
    tma.async_load(a_desc, [0, 0], landed, a_img)
    tma.async_load(b_desc, [0, 0], landed, b_img)
    mbarrier.wait(landed, phase=0, deps=[a_img, b_img])
    mbarrier.invalidate(landed)
    acc_layout: gl.constexpr = TensorMemoryLayout(block=(rows // 2, cols), col_stride=1,
                                                  cga_layout=c_desc.layout.cga_layout,
                                                  two_ctas=True)
    acc = allocate_tensor_memory(gl.float32, [rows, cols], acc_layout)
    tcgen05_mma(a_img, b_img, acc, use_acc=False, mbarriers=[finished])
    mbarrier.wait(finished, phase=0, deps=[a_img, b_img])
    mbarrier.invalidate(finished)
    c_img = gl.allocate_shared_memory(c_desc.dtype, c_desc.block_shape, c_desc.layout)
    c_img.store(acc.load())
    tma.async_store(c_desc, [0, 0], c_img)


def compile_kernel(m: int, n: int, k: int):
    # a is split along M between the pair, b along N, c along M (the layouts' CTA bases)
    la = gl.NVMMASharedLayout.get_default_for([m, k], gl.float16, cga_layout=[(1, 0)])
    lb = gl.NVMMASharedLayout.get_default_for([k, n], gl.float16, cga_layout=[(0, 1)])
    lc = gl.NVMMASharedLayout.get_default_for([m, n], gl.float32, cga_layout=[(1, 0)])
    sig = {"a_desc": f"tensordesc<fp16[{m}, {k}],{la!r}>",
           "b_desc": f"tensordesc<fp16[{k}, {n}],{lb!r}>",
           "c_desc": f"tensordesc<fp32[{m}, {n}],{lc!r}>"}
    return triton.compile(GluonASTSource(pair_mma, sig, {}, {}),
                          target=GPUTarget("cuda", 100, 32),
                          options={"num_warps": 4, "num_ctas": 2})


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--name", default="triton_pair_mma_sm100")
    ap.add_argument("--shape", default="256x128x64", help="MxNxK of the pair's tile")
    args = ap.parse_args(argv)
    m, n, k = (int(v) for v in args.shape.split("x"))
    os.environ.setdefault("TRITON_CACHE_DIR", tempfile.mkdtemp(prefix="triton-cache-"))
    os.environ.setdefault("TRITON_DISABLE_LINE_INFO", "1")
    kern = compile_kernel(m, n, k)
    os.makedirs(args.out, exist_ok=True)
    stem = os.path.join(args.out, args.name)
    with open(stem + ".ptx", "w") as f:
        f.write(kern.asm["ptx"])
    md = kern.metadata
    info = {
        "generator": "benchmarks/triton_ref/gen_pair_mma_ptx.py",
        "triton": triton.__version__,
        "target": "sm_100a",
        "kernel": md.name,
        "shape": [m, n, k],
        "num_warps": md.num_warps,
        "num_ctas": 2,
        "shared_bytes": md.shared,
        "block": [32 * md.num_warps, 1, 1],
        "grid": "(2, 1, 1): one cluster of two CTAs",
        "params": "per descriptor: tensor map [128 bytes], shape (2 x i32), strides (2 x i64); "
                  "then global and profile scratch pointers (pass 0)",
        "tensordesc_meta": md.tensordesc_meta,
    }
    with open(stem + ".json", "w") as f:
        json.dump(info, f, indent=1)
        f.write("\n")
    print(json.dumps(info))
    return 0


if __name__ == "__main__":
    sys.exit(main())
