"""Compile the layernorm-backward kernel of Triton's tutorial (its spin lock) to PTX, no GPU.

Run with a Python that has Triton 3.9 (see gen_matmul_ptx.py):

    tvenv/bin/python benchmarks/triton_ref/gen_layernorm_bwd_ptx.py --out DIR

The kernel is written here after the tutorial's `_layer_norm_bwd_dx_fused`: each program
computes one row's dx, then accumulates its partial dw/db into one of GROUP row buffers under a
spin lock (`atomic_cas(Lock, 0, 1)` until it gets 0, the `Count` flag for the first writer,
`atomic_xchg(Lock, 0)` to release). `RELEASE=False` leaves out the release: the next program
to take the lock spins forever on a GPU, which the emulator must report as "no progress"
instead of hanging. Two fixtures are written for sm_80 (f32 data, BLOCK_N 64, 2 warps):
`triton_layernorm_bwd_sm80` and `triton_layernorm_bwd_norelease_sm80`. With `--line-info`
the PTX keeps Triton's `.loc` line information (`.file` paths made relative to the
repository or to site-packages), and the stems end in `_lineinfo`: the emulator's no-progress
error then names the Python line of the lock's loop.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile

import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource


@triton.jit
def layer_norm_bwd_dx_fused(DX, DY, DW, DB, X, W, Mean, Rstd, Lock, stride, N,
                            GROUP: tl.constexpr, BLOCK_N: tl.constexpr,
                            RELEASE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    X += row * stride
    DY += row * stride
    DX += row * stride
    lock_id = row % GROUP
    Lock += lock_id
    Count = Lock + GROUP
    DW = DW + lock_id * N + cols
    DB = DB + lock_id * N + cols
    x = tl.load(X + cols, mask=mask, other=0).to(tl.float32)
    dy = tl.load(DY + cols, mask=mask, other=0).to(tl.float32)
    w = tl.load(W + cols, mask=mask).to(tl.float32)
    mean = tl.load(Mean + row)
    rstd = tl.load(Rstd + row)
    xhat = (x - mean) * rstd
    wdy = w * dy
    xhat = tl.where(mask, xhat, 0.)
    wdy = tl.where(mask, wdy, 0.)
    c1 = tl.sum(xhat * wdy, axis=0) / N
    c2 = tl.sum(wdy, axis=0) / N
    dx = (wdy - (xhat * c1 + c2)) * rstd
    tl.store(DX + cols, dx, mask=mask)
    partial_dw = (dy * xhat).to(w.dtype)
    partial_db = (dy).to(w.dtype)
    while tl.atomic_cas(Lock, 0, 1) == 1:
        pass
    count = tl.load(Count)
    if count == 0:
        tl.atomic_xchg(Count, 1)
    else:
        partial_dw += tl.load(DW, mask=mask)
        partial_db += tl.load(DB, mask=mask)
    tl.store(DW, partial_dw, mask=mask)
    tl.store(DB, partial_db, mask=mask)
    tl.debug_barrier()
    if RELEASE:
        tl.atomic_xchg(Lock, 0)


SIG = {"DX": "*fp32", "DY": "*fp32", "DW": "*fp32", "DB": "*fp32", "X": "*fp32",
       "W": "*fp32", "Mean": "*fp32", "Rstd": "*fp32", "Lock": "*i32", "stride": "i32",
       "N": "i32", "GROUP": "constexpr", "BLOCK_N": "constexpr", "RELEASE": "constexpr"}


def _relative_files(ptx: str) -> str:
    """`.file` paths without this machine's prefix (repository- or site-packages-relative)."""
    def fix(m):
        path = m.group(2)
        for marker in ("/benchmarks/", "/site-packages/"):
            if marker in path:
                path = path[path.index(marker) + 1:].removeprefix("site-packages/")
                break
        return f'{m.group(1)}"{path}"'
    return re.sub(r'(\.file\s+\d+\s+)"([^"]*)"', fix, ptx)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--arch", type=int, default=80)
    ap.add_argument("--line-info", action="store_true")
    args = ap.parse_args(argv)
    os.environ.setdefault("TRITON_CACHE_DIR", tempfile.mkdtemp(prefix="triton-cache-"))
    os.environ["TRITON_DISABLE_LINE_INFO"] = "0" if args.line_info else "1"
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    os.makedirs(args.out, exist_ok=True)
    suffix = "_lineinfo" if args.line_info else ""
    for release, stem in ((True, "triton_layernorm_bwd" + suffix),
                          (False, "triton_layernorm_bwd_norelease" + suffix)):
        consts = {"GROUP": 1, "BLOCK_N": 64, "RELEASE": release}
        src = ASTSource(layer_norm_bwd_dx_fused, SIG, consts, {})
        k = triton.compile(src, target=GPUTarget("cuda", args.arch, 32),
                           options={"num_warps": 2, "num_stages": 1})
        name = os.path.join(args.out, f"{stem}_sm{args.arch}")
        with open(name + ".ptx", "w") as f:
            f.write(_relative_files(k.asm["ptx"]))
        info = {"generator": "benchmarks/triton_ref/gen_layernorm_bwd_ptx.py",
                "triton": triton.__version__, "target": f"sm_{args.arch}",
                "kernel": k.metadata.name, "constexprs": consts,
                "num_warps": k.metadata.num_warps, "shared_bytes": k.metadata.shared,
                "block": [32 * k.metadata.num_warps, 1, 1], "grid": "(rows, 1, 1)",
                "params": "DX, DY, DW, DB, X, W, Mean, Rstd, Lock (GROUP locks then GROUP "
                          "counts, zeroed), stride, N; then two scratch pointers (pass 0)"}
        with open(name + ".json", "w") as f:
            json.dump(info, f, indent=1)
            f.write("\n")
        print(json.dumps(info))
    return 0


if __name__ == "__main__":
    sys.exit(main())
