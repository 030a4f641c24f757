"""Triton's fused-attention tutorial (forward and backward) in its Hopper form, compiled to PTX
without a GPU, for benchmarks/attention_static.py.

Run with a Python that has Triton 3.9:

    /tmp/tritonenv/bin/python benchmarks/triton_ref/gen_attention_tutorial.py --out DIR \
        --config '[{"name": "fwd_d64", "kind": "fwd", "BM": 64, "BN": 64, "D": 64,
                    "causal": false, "warps": 4, "stages": 3, "arch": 90}]'

Written here after the structure of the tutorial (python/tutorials/06-fused-attention.py),
which is what Triton users run as "Triton's attention":

* forward: Q, K, V and O as host tensor descriptors (TMA loads on sm_90a); the key loop is
  split in two: the key tiles wholly left of the block's diagonal run with no mask at all,
  then (causal) the diagonal tiles run with the causal mask. Scores stay unscaled until the
  row maximum is taken, so scaling and subtracting the maximum is one multiply-add per score.
  Like the tutorial, the sequence length must be a multiple of BN (no ragged mask).
* backward: the tutorial's single kernel with pointer loads: each program computes dK and dV
  for one key tile of BN1 keys (walking the query tiles of BM1 rows), then dQ for one query
  tile of BM2 rows (walking the key tiles of BN2 keys), from the saved log-sum-exp M (base 2)
  and Delta = rowsum(O * dO) computed beforehand.

Writes NAME.ptx and NAME.json for each configuration.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

os.environ.setdefault("TRITON_CACHE_DIR", tempfile.mkdtemp(prefix="triton-cache-"))
os.environ.setdefault("TRITON_DISABLE_LINE_INFO", "1")

import triton                                                     # noqa: E402
import triton.language as tl                                      # noqa: E402
from triton.backends.compiler import GPUTarget                    # noqa: E402
from triton.compiler import ASTSource                             # noqa: E402


@triton.jit
def _fwd_tiles(acc, l_i, m_i, q, desc_k, desc_v, row0, key_row0, offs_m, offs_n, qk_scale,
               lo, hi, BN: tl.constexpr, DIAGONAL: tl.constexpr):
    # key tiles lo..hi of this head; DIAGONAL: the causal mask applies to these tiles
    for start_n in tl.range(lo, hi, BN):
        k = desc_k.load([key_row0 + start_n, 0]).T
        qk = tl.dot(q, k)
        if DIAGONAL:
            keep = offs_m[:, None] >= (start_n + offs_n[None, :])
            qk = qk * qk_scale + tl.where(keep, 0, -1.0e6)
            m_ij = tl.maximum(m_i, tl.max(qk, 1))
            qk -= m_ij[:, None]
        else:
            m_ij = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
            qk = qk * qk_scale - m_ij[:, None]
        p = tl.math.exp2(qk)
        alpha = tl.math.exp2(m_i - m_ij)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        v = desc_v.load([key_row0 + start_n, 0])
        acc = tl.dot(p.to(tl.float16), v, acc)
        m_i = m_ij
    return acc, l_i, m_i


@triton.jit
def attn_fwd(sm_scale, M, desc_q, desc_k, desc_v, desc_o, N_CTX,
             BM: tl.constexpr, BN: tl.constexpr, D: tl.constexpr, CAUSAL: tl.constexpr):
    start_m = tl.program_id(0)
    head = tl.program_id(1)
    key_row0 = head * N_CTX
    row0 = key_row0 + start_m * BM
    offs_m = start_m * BM + tl.arange(0, BM)
    offs_n = tl.arange(0, BN)
    m_i = tl.zeros([BM], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([BM], dtype=tl.float32) + 1.0
    acc = tl.zeros([BM, D], dtype=tl.float32)
    qk_scale = sm_scale * 1.44269504
    q = desc_q.load([row0, 0])
    if CAUSAL:
        acc, l_i, m_i = _fwd_tiles(acc, l_i, m_i, q, desc_k, desc_v, row0, key_row0, offs_m,
                                   offs_n, qk_scale, 0, start_m * BM, BN, False)
        acc, l_i, m_i = _fwd_tiles(acc, l_i, m_i, q, desc_k, desc_v, row0, key_row0, offs_m,
                                   offs_n, qk_scale, start_m * BM, (start_m + 1) * BM, BN, True)
    else:
        acc, l_i, m_i = _fwd_tiles(acc, l_i, m_i, q, desc_k, desc_v, row0, key_row0, offs_m,
                                   offs_n, qk_scale, 0, N_CTX, BN, False)
    m_i += tl.math.log2(l_i)
    acc = acc / l_i[:, None]
    tl.store(M + head * N_CTX + offs_m, m_i)
    desc_o.store([row0, 0], acc.to(tl.float16))


@triton.jit
def _bwd_dkdv(dk, dv, Q, k, v, DO, M, Delta, stride_tok, start_n, start_m, num_steps,
              BM1: tl.constexpr, BN1: tl.constexpr, D: tl.constexpr, MASK: tl.constexpr):
    offs_m = start_m + tl.arange(0, BM1)
    offs_n = start_n + tl.arange(0, BN1)
    offs_d = tl.arange(0, D)
    qT_ptrs = Q + offs_m[None, :] * stride_tok + offs_d[:, None]
    do_ptrs = DO + offs_m[:, None] * stride_tok + offs_d[None, :]
    curr_m = start_m
    for _ in range(num_steps):
        qT = tl.load(qT_ptrs)
        offs_m = curr_m + tl.arange(0, BM1)
        m = tl.load(M + offs_m)
        qkT = tl.dot(k, qT)
        pT = tl.math.exp2(qkT - m[None, :])
        if MASK:
            pT = tl.where(offs_m[None, :] >= offs_n[:, None], pT, 0.0)
        do = tl.load(do_ptrs)
        dv += tl.dot(pT.to(tl.float16), do)
        Di = tl.load(Delta + offs_m)
        dpT = tl.dot(v, tl.trans(do)).to(tl.float32)
        dsT = (pT * (dpT - Di[None, :])).to(tl.float16)
        dk += tl.dot(dsT, tl.trans(qT))
        curr_m += BM1
        qT_ptrs += BM1 * stride_tok
        do_ptrs += BM1 * stride_tok
    return dk, dv


@triton.jit
def _bwd_dq(dq, q, K, V, do, m, Di, stride_tok, start_m, start_n, num_steps,
            BM2: tl.constexpr, BN2: tl.constexpr, D: tl.constexpr, MASK: tl.constexpr):
    offs_m = start_m + tl.arange(0, BM2)
    offs_n = start_n + tl.arange(0, BN2)
    offs_d = tl.arange(0, D)
    kT_ptrs = K + offs_n[None, :] * stride_tok + offs_d[:, None]
    vT_ptrs = V + offs_n[None, :] * stride_tok + offs_d[:, None]
    curr_n = start_n
    for _ in range(num_steps):
        kT = tl.load(kT_ptrs)
        vT = tl.load(vT_ptrs)
        qk = tl.dot(q, kT)
        p = tl.math.exp2(qk - m)
        if MASK:
            offs_n = curr_n + tl.arange(0, BN2)
            p = tl.where(offs_m[:, None] >= offs_n[None, :], p, 0.0)
        dp = tl.dot(do, vT).to(tl.float32)
        ds = (p * (dp - Di[:, None])).to(tl.float16)
        dq += tl.dot(ds, tl.trans(kT))
        curr_n += BN2
        kT_ptrs += BN2 * stride_tok
        vT_ptrs += BN2 * stride_tok
    return dq


@triton.jit
def attn_bwd(Q, K, V, sm_scale, DO, DQ, DK, DV, M, Delta, stride_head, stride_tok, N_CTX,
             BM1: tl.constexpr, BN1: tl.constexpr, BM2: tl.constexpr, BN2: tl.constexpr,
             D: tl.constexpr, CAUSAL: tl.constexpr):
    # Q and K arrive pre-scaled by sm_scale * log2(e) as the tutorial arranges it (its K is
    # multiplied on the host); M is the base-2 log-sum-exp per row
    LN2: tl.constexpr = 0.6931471824645996
    pid = tl.program_id(0)
    head = tl.program_id(1)
    off = (head * stride_head).to(tl.int64)
    Q += off
    K += off
    V += off
    DO += off
    DQ += off
    DK += off
    DV += off
    M += head * N_CTX
    Delta += head * N_CTX
    offs_d = tl.arange(0, D)
    # dK, dV for keys start_n .. start_n + BN1
    start_n = pid * BN1
    offs_n = start_n + tl.arange(0, BN1)
    dv = tl.zeros([BN1, D], dtype=tl.float32)
    dk = tl.zeros([BN1, D], dtype=tl.float32)
    k = tl.load(K + offs_n[:, None] * stride_tok + offs_d[None, :])
    v = tl.load(V + offs_n[:, None] * stride_tok + offs_d[None, :])
    if CAUSAL:
        start_m = start_n
        dk, dv = _bwd_dkdv(dk, dv, Q, k, v, DO, M, Delta, stride_tok, start_n, start_m,
                           BN1 // BM1, BM1, BN1, D, True)
        start_m += BN1
        dk, dv = _bwd_dkdv(dk, dv, Q, k, v, DO, M, Delta, stride_tok, start_n, start_m,
                           (N_CTX - start_m) // BM1, BM1, BN1, D, False)
    else:
        dk, dv = _bwd_dkdv(dk, dv, Q, k, v, DO, M, Delta, stride_tok, start_n, 0,
                           N_CTX // BM1, BM1, BN1, D, False)
    tl.store(DV + offs_n[:, None] * stride_tok + offs_d[None, :], dv.to(tl.float16))
    dk *= sm_scale
    tl.store(DK + offs_n[:, None] * stride_tok + offs_d[None, :], dk.to(tl.float16))
    # dQ for queries start_m .. start_m + BM2
    start_m = pid * BM2
    offs_m = start_m + tl.arange(0, BM2)
    q = tl.load(Q + offs_m[:, None] * stride_tok + offs_d[None, :])
    do = tl.load(DO + offs_m[:, None] * stride_tok + offs_d[None, :])
    dq = tl.zeros([BM2, D], dtype=tl.float32)
    m = tl.load(M + offs_m)[:, None]
    Di = tl.load(Delta + offs_m)
    if CAUSAL:
        end_n = start_m + BM2
        dq = _bwd_dq(dq, q, K, V, do, m, Di, stride_tok, start_m, end_n - BM2, BM2 // BN2,
                     BM2, BN2, D, True)
        dq = _bwd_dq(dq, q, K, V, do, m, Di, stride_tok, start_m, 0, (end_n - BM2) // BN2,
                     BM2, BN2, D, False)
    else:
        dq = _bwd_dq(dq, q, K, V, do, m, Di, stride_tok, start_m, 0, N_CTX // BN2,
                     BM2, BN2, D, False)
    dq *= LN2
    tl.store(DQ + offs_m[:, None] * stride_tok + offs_d[None, :], dq.to(tl.float16))


def compile_config(c: dict):
    target = GPUTarget("cuda", c.get("arch", 90), 32)
    opts = {"num_warps": c["warps"], "num_stages": c.get("stages", 3)}
    if c["kind"] == "fwd":
        blk = f"[{c['BM']}, {c['D']}]"
        kblk = f"[{c['BN']}, {c['D']}]"
        sig = {"sm_scale": "fp32", "M": "*fp32", "desc_q": f"tensordesc<fp16{blk}>",
               "desc_k": f"tensordesc<fp16{kblk}>", "desc_v": f"tensordesc<fp16{kblk}>",
               "desc_o": f"tensordesc<fp16{blk}>", "N_CTX": "i32", "BM": "constexpr",
               "BN": "constexpr", "D": "constexpr", "CAUSAL": "constexpr"}
        consts = {"BM": c["BM"], "BN": c["BN"], "D": c["D"], "CAUSAL": c["causal"]}
        attrs = {(1,): [["tt.divisibility", 16]], (6,): [["tt.divisibility", 16]]}
        return triton.compile(ASTSource(attn_fwd, sig, consts, attrs), target=target,
                              options=opts)
    sig = {"Q": "*fp16", "K": "*fp16", "V": "*fp16", "sm_scale": "fp32", "DO": "*fp16",
           "DQ": "*fp16", "DK": "*fp16", "DV": "*fp16", "M": "*fp32", "Delta": "*fp32",
           "stride_head": "i32", "stride_tok": "i32", "N_CTX": "i32", "BM1": "constexpr",
           "BN1": "constexpr", "BM2": "constexpr", "BN2": "constexpr", "D": "constexpr",
           "CAUSAL": "constexpr"}
    consts = {k: c[k] for k in ("BM1", "BN1", "BM2", "BN2", "D")}
    consts["CAUSAL"] = c["causal"]
    names = list(sig)
    attrs = {(names.index(n),): [["tt.divisibility", 16]]
             for n in ("Q", "K", "V", "DO", "DQ", "DK", "DV", "M", "Delta", "stride_head",
                       "stride_tok", "N_CTX")}
    return triton.compile(ASTSource(attn_bwd, sig, consts, attrs), target=target, options=opts)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--config", required=True, help="a JSON list of configurations")
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    for c in json.loads(args.config):
        k = compile_config(c)
        stem = os.path.join(args.out, c["name"])
        with open(stem + ".ptx", "w") as f:
            f.write(k.asm["ptx"])
        info = {"generator": "benchmarks/triton_ref/gen_attention_tutorial.py",
                "triton": triton.__version__, "kernel": k.metadata.name, "config": c,
                "num_warps": k.metadata.num_warps, "shared_bytes": k.metadata.shared}
        with open(stem + ".json", "w") as f:
            json.dump(info, f, indent=1)
            f.write("\n")
        print(json.dumps(info))
    return 0


if __name__ == "__main__":
    sys.exit(main())
