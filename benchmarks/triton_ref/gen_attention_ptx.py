"""Compile a FlashAttention-style forward kernel in Triton to PTX for sm_90a, no GPU.

Run with a Python that has Triton 3.9 (see gen_matmul_ptx.py):

    tvenv/bin/python benchmarks/triton_ref/gen_attention_ptx.py --out DIR

The kernel follows the forward pass of Triton's fused-attention tutorial with plain pointers
(no tensor descriptors): one program per BLOCK_M query rows of one (batch, head), online
softmax in base 2, `CAUSAL` as a constexpr. For sm_90a Triton issues wgmma for both products;
for P @ V the A operand (the probabilities) comes from registers, so the fixture checks the
emulator's register-A fragment against code we did not write. Q, K, V and Out are contiguous
[batch * heads, N_CTX, HEAD_DIM] f16. Writes `triton_attention_{causal,full}_sm90.{ptx,json}`.

`--arch 100 --block-m 128` compiles it for sm_100a: S = Q K^T and O accumulate in tensor
memory through `tcgen05.mma`, the softmax reads S with `tcgen05.ld`, rescales O in place with
`tcgen05.st`, and uses sm_100's packed `add/mul.f32x2` and three-source `max.f32`. The
emulator keeps tests/emulator/fixtures/triton_attention_causal_sm100.{ptx,json}.
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
def attn_fwd(Q, K, V, Out, sm_scale, N_CTX,
             BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr,
             CAUSAL: tl.constexpr):
    start_m = tl.program_id(0)
    base = tl.program_id(1).to(tl.int64) * N_CTX * HEAD_DIM
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(Q + base + offs_m[:, None] * HEAD_DIM + offs_d[None, :],
                mask=offs_m[:, None] < N_CTX, other=0.0)
    m_i = tl.full([BLOCK_M], -1.0e30, dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * 1.44269504
    hi = N_CTX
    if CAUSAL:
        hi = tl.minimum((start_m + 1) * BLOCK_M, N_CTX)
    for start_n in range(0, hi, BLOCK_N):
        cols = start_n + offs_n
        k = tl.load(K + base + cols[None, :] * HEAD_DIM + offs_d[:, None],
                    mask=cols[None, :] < N_CTX, other=0.0)
        qk = tl.dot(q, k)
        keep = cols[None, :] < N_CTX
        if CAUSAL:
            keep = keep & (offs_m[:, None] >= cols[None, :])
        qk = tl.where(keep, qk * qk_scale, -1.0e6)
        m_ij = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.math.exp2(qk - m_ij[:, None])
        alpha = tl.math.exp2(m_i - m_ij)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        v = tl.load(V + base + cols[:, None] * HEAD_DIM + offs_d[None, :],
                    mask=cols[:, None] < N_CTX, other=0.0)
        acc = tl.dot(p.to(tl.float16), v, acc)
        m_i = m_ij
    acc = acc / l_i[:, None]
    tl.store(Out + base + offs_m[:, None] * HEAD_DIM + offs_d[None, :], acc.to(tl.float16),
             mask=offs_m[:, None] < N_CTX)


SIG = {"Q": "*fp16", "K": "*fp16", "V": "*fp16", "Out": "*fp16", "sm_scale": "fp32",
       "N_CTX": "i32", "BLOCK_M": "constexpr", "BLOCK_N": "constexpr", "HEAD_DIM": "constexpr",
       "CAUSAL": "constexpr"}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--head-dim", type=int, default=64)
    ap.add_argument("--arch", type=int, choices=(90, 100), default=90)
    ap.add_argument("--block-m", type=int, default=64)
    args = ap.parse_args(argv)
    os.environ.setdefault("TRITON_CACHE_DIR", tempfile.mkdtemp(prefix="triton-cache-"))
    os.environ.setdefault("TRITON_DISABLE_LINE_INFO", "1")
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    os.makedirs(args.out, exist_ok=True)
    for causal in (True, False):
        consts = {"BLOCK_M": args.block_m, "BLOCK_N": 64, "HEAD_DIM": args.head_dim,
                  "CAUSAL": causal}
        attrs = {(0,): [["tt.divisibility", 16]], (1,): [["tt.divisibility", 16]],
                 (2,): [["tt.divisibility", 16]], (3,): [["tt.divisibility", 16]]}
        k = triton.compile(ASTSource(attn_fwd, SIG, consts, attrs),
                           target=GPUTarget("cuda", args.arch, 32),
                           options={"num_warps": 4, "num_stages": 2})
        stem = os.path.join(args.out, f"triton_attention_{'causal' if causal else 'full'}"
                                      f"_sm{args.arch}")
        with open(stem + ".ptx", "w") as f:
            f.write(k.asm["ptx"])
        info = {"generator": "benchmarks/triton_ref/gen_attention_ptx.py",
                "triton": triton.__version__, "target": f"sm_{args.arch}a",
                "kernel": k.metadata.name,
                "constexprs": consts, "num_warps": k.metadata.num_warps,
                "shared_bytes": k.metadata.shared, "block": [32 * k.metadata.num_warps, 1, 1],
                "grid": "(cdiv(N_CTX, BLOCK_M), batch * heads, 1)",
                "params": "Q, K, V, Out (contiguous [batch*heads, N_CTX, HEAD_DIM] f16), "
                          "sm_scale (f32), N_CTX (i32); then two scratch pointers (pass 0)"}
        with open(stem + ".json", "w") as f:
            json.dump(info, f, indent=1)
            f.write("\n")
        print(json.dumps(info))
    return 0


if __name__ == "__main__":
    sys.exit(main())
