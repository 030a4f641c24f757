"""Regenerates triton_random.json: Triton's own tl.randint/tl.rand/tl.randn for a few seeds and
offset ranges, run in Triton's CPU interpreter and read back from `tl.device_print`:

    TRITON_INTERPRET=1 $TRITON_PYTHON tests/stdlib/data/make_triton_random.py \
        > tests/stdlib/data/triton_random.json

Offsets are `arange(0, 64) * stride + base`; rand and randn are printed as their f32 bits.
"""

import contextlib
import io
import json
import os
import re

import numpy as np
import triton
import triton.language as tl

assert os.environ.get("TRITON_INTERPRET") == "1", "run with TRITON_INTERPRET=1"
N = 64


@triton.jit
def rng(seed, base, stride, N: tl.constexpr):
    offs = tl.arange(0, N) * stride + base
    tl.device_print("i", tl.randint(seed, offs))
    tl.device_print("u", tl.rand(seed, offs).to(tl.int32, bitcast=True))
    tl.device_print("n", tl.randn(seed, offs).to(tl.int32, bitcast=True))


# (seed, base, stride): int32 offsets when base and stride fit in int32, else int64
CASES = [(0, 0, 1), (42, 1000, 1), (-7, -32, 1), (0x123456789ABC, 0, 65599),
         (2**31 + 5, 2**31 - 40, 1), (2**40 + 3, 5 * 2**32 + 11, 2**32 + 7)]


def main():
    out = []
    for seed, base, stride in CASES:
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            rng[(1,)](seed, base, stride, N=N)
        got = {}
        for key, body in re.findall(r"\b([iun]):\s*\[([^\]]*)\]", buf.getvalue()):
            got[key] = [int(v) & 0xFFFFFFFF for v in body.split()]
        wide = not (-2**31 <= base < 2**31 and -2**31 <= stride < 2**31)
        offs = np.arange(N, dtype=np.int64) * stride + base
        out.append({"seed": seed, "offset_dtype": "i64" if wide else "i32",
                    "offsets": [int(v) for v in offs],
                    "randint": got["i"], "rand_bits": got["u"], "randn_bits": got["n"]})
    print(json.dumps({"triton": triton.__version__, "cases": out}))


main()
