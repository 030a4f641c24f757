"""Regenerate the Triton corpus: kernels written for the emulator's tests, compiled to PTX.

Run with a Python that has Triton 3.9 and NumPy, kept apart from the project's interpreter:

    python3 -m venv /tmp/tritonenv && /tmp/tritonenv/bin/pip install triton==3.9.0 numpy
    /tmp/tritonenv/bin/python tests/emulator/triton_corpus/generate.py [--only NAME...]

Each case is compiled ahead of time (`triton.compile(ASTSource(...), target=GPUTarget("cuda",
80 or 90, 32))`, no GPU needed) with the specialization Triton's JIT gives 16-byte aligned
pointers (`tt.divisibility = 16` on every pointer parameter; sizes are left unspecialized so the
masks stay in the code). The PTX files and `manifest.json` (signature, launch geometry, inputs,
the name of the NumPy reference in `tests/emulator/triton_corpus_refs.py`, tolerance) land in
this folder; `tests/emulator/test_emu_triton_corpus.py` runs them without Triton.

Triton appends two pointer parameters to every kernel (global and profile scratch); the
manifest gives the global scratch size per program, which a kernel with device-side tensor
descriptors uses (the test passes a buffer there, otherwise 0).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from dataclasses import dataclass, field

os.environ.setdefault("TRITON_CACHE_DIR", tempfile.mkdtemp(prefix="triton-cache-"))
os.environ.setdefault("TRITON_DISABLE_LINE_INFO", "1")
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")

import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402
from triton.language.extra.cuda import libdevice  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
N = 1000                   # elements of an element-wise case: four blocks, the last one ragged
BLOCK = 256


# -- kernels -----------------------------------------------------------------------------------
@triton.jit
def unary(x_ptr, out_ptr, n, OP: tl.constexpr, BLOCK: tl.constexpr, UP: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    if UP:                                  # f16 / bf16 math runs on f32 (as Triton requires)
        x = x.to(tl.float32)
    if OP == "sin":
        y = tl.sin(x)
    elif OP == "cos":
        y = tl.cos(x)
    elif OP == "exp":
        y = tl.exp(x)
    elif OP == "exp2":
        y = tl.exp2(x)
    elif OP == "log":
        y = tl.log(x)
    elif OP == "log2":
        y = tl.log2(x)
    elif OP == "sqrt":
        y = tl.sqrt(x)
    elif OP == "sqrt_rn":
        y = tl.sqrt_rn(x)
    elif OP == "rsqrt":
        y = tl.rsqrt(x)
    elif OP == "abs":
        y = tl.abs(x)
    elif OP == "neg":
        y = -x
    elif OP == "floor":
        y = tl.floor(x)
    elif OP == "ceil":
        y = tl.ceil(x)
    elif OP == "erf":
        y = tl.erf(x)
    elif OP == "sigmoid":
        y = tl.sigmoid(x)
    elif OP == "tanh":
        y = libdevice.tanh(x)
    elif OP == "recip":
        y = 1.0 / x
    elif OP == "not":
        y = ~x
    else:                                   # "cast": the store converts to out's type
        y = x.to(out_ptr.dtype.element_ty)
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=m)


@triton.jit
def binary(x_ptr, y_ptr, out_ptr, n, OP: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    y = tl.load(y_ptr + offs, mask=m)
    if OP == "add":
        z = x + y
    elif OP == "sub":
        z = x - y
    elif OP == "mul":
        z = x * y
    elif OP == "div":
        z = x / y
    elif OP == "floordiv":
        z = x // y
    elif OP == "mod":
        z = x % y
    elif OP == "max":
        z = tl.maximum(x, y)
    elif OP == "min":
        z = tl.minimum(x, y)
    elif OP == "and":
        z = x & y
    elif OP == "or":
        z = x | y
    elif OP == "xor":
        z = x ^ y
    elif OP == "shl":
        z = x << (y & 7)
    elif OP == "shr":
        z = x >> (y & 7)
    elif OP == "lt":
        z = (x < y).to(tl.int8)
    elif OP == "div_rn":
        z = tl.div_rn(x, y)
    elif OP == "pow":
        z = libdevice.pow(x, y)
    elif OP == "atan2":
        z = libdevice.atan2(x, y)
    elif OP == "umulhi":
        z = tl.umulhi(x, y)
    else:                                   # "fma": x * y + x
        z = tl.fma(x, y, x)
    tl.store(out_ptr + offs, z.to(out_ptr.dtype.element_ty), mask=m)


@triton.jit
def rowwise(x_ptr, out_ptr, R, OP: tl.constexpr, C: tl.constexpr):
    """One program per row of C elements (C a power of two): reductions, scans and sorts."""
    r = tl.program_id(0)
    cols = tl.arange(0, C)
    x = tl.load(x_ptr + r * C + cols)
    if OP == "sum":
        tl.store(out_ptr + r, tl.sum(x, axis=0))
    elif OP == "max":
        tl.store(out_ptr + r, tl.max(x, axis=0))
    elif OP == "min":
        tl.store(out_ptr + r, tl.min(x, axis=0))
    elif OP == "argmax":
        tl.store(out_ptr + r, tl.argmax(x, axis=0))
    elif OP == "argmin":
        tl.store(out_ptr + r, tl.argmin(x, axis=0))
    elif OP == "xor_sum":
        tl.store(out_ptr + r, tl.xor_sum(x, axis=0))
    elif OP == "softmax":
        e = tl.exp(x - tl.max(x, axis=0))
        tl.store(out_ptr + r * C + cols, e / tl.sum(e, axis=0))
    elif OP == "cumsum":
        tl.store(out_ptr + r * C + cols, tl.cumsum(x, axis=0))
    elif OP == "cumprod":
        tl.store(out_ptr + r * C + cols, tl.cumprod(x, axis=0))
    elif OP == "cummax":
        tl.store(out_ptr + r * C + cols, tl.associative_scan(x, 0, _max_combine))
    elif OP == "sort":
        tl.store(out_ptr + r * C + cols, tl.sort(x))
    elif OP == "sort_desc":
        tl.store(out_ptr + r * C + cols, tl.sort(x, descending=True))
    else:                                   # "flip"
        tl.store(out_ptr + r * C + cols, tl.flip(x, 0))


@triton.jit
def _max_combine(a, b):
    return tl.maximum(a, b)


@triton.jit
def tile2d(x_ptr, out_ptr, R, OP: tl.constexpr, BR: tl.constexpr, BC: tl.constexpr):
    """A [BR, BC] tile per program: column reductions and transposes (layout conversions
    through shared memory, with replicated stores)."""
    pid = tl.program_id(0)
    rows = pid * BR + tl.arange(0, BR)
    cols = tl.arange(0, BC)
    m = rows[:, None] < R
    x = tl.load(x_ptr + rows[:, None] * BC + cols[None, :], mask=m, other=0)
    if OP == "colsum":
        tl.atomic_add(out_ptr + cols, tl.sum(x, axis=0))
    elif OP == "rowmax":
        tl.store(out_ptr + rows, tl.max(x, axis=1), mask=rows < R)
    else:                                   # "trans": out[c, r] = x[r, c], out is BC x R
        t = tl.trans(x)
        tl.store(out_ptr + cols[:, None] * R + rows[None, :], t, mask=rows[None, :] < R)


@triton.jit
def atomics(x_ptr, cells_ptr, old_ptr, n, OP: tl.constexpr, NCELLS: tl.constexpr,
            BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    where = cells_ptr + offs % NCELLS
    if OP == "add":
        old = tl.atomic_add(where, x, mask=m, sem="relaxed")
    elif OP == "max":
        old = tl.atomic_max(where, x, mask=m, sem="relaxed")
    elif OP == "min":
        old = tl.atomic_min(where, x, mask=m, sem="relaxed")
    elif OP == "xchg":
        old = tl.atomic_xchg(where, x, mask=m, sem="relaxed")
    elif OP == "or":
        old = tl.atomic_or(where, x, mask=m, sem="relaxed")
    else:                                   # "cas": increment from 0 only (one winner a cell)
        old = tl.atomic_cas(where, tl.zeros_like(x), x, sem="relaxed")
    tl.store(old_ptr + offs, old, mask=m)


@triton.jit
def atomic_sum(x_ptr, cells_ptr, n, NCELLS: tl.constexpr, BLOCK: tl.constexpr):
    """Order-independent use of an atomic add (no old values): a histogram of sums."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    tl.atomic_add(cells_ptr + offs % NCELLS, x, mask=m, sem="relaxed")


@triton.jit
def dot(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
        ACC: tl.constexpr, PREC: tl.constexpr):
    """c[M, N] = a[M, K] @ b[K, N] (row-major, K a multiple of BK), one tile per program."""
    pm, pn = tl.program_id(0), tl.program_id(1)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=ACC)
    for k0 in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k0 + rk)[None, :], mask=rm[:, None] < M)
        b = tl.load(b_ptr + (k0 + rk)[:, None] * N + rn[None, :], mask=rn[None, :] < N)
        acc = tl.dot(a, b, acc, input_precision=PREC, out_dtype=ACC)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(c_ptr.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def tma_scale(a_ptr, out_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr):
    """Device-side tensor descriptors (tensormap.replace in shared memory, copied to the
    global scratch with a proxy fence): out = 2 * a, one [BM, BN] box per program."""
    da = tl.make_tensor_descriptor(a_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    do = tl.make_tensor_descriptor(out_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    pm, pn = tl.program_id(0), tl.program_id(1)
    x = da.load([pm * BM, pn * BN])
    do.store([pm * BM, pn * BN], x * 2)


@triton.jit
def random(out_ptr, n, seed, OP: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    if OP == "randint":
        v = tl.randint(seed, offs)
    elif OP == "rand":
        v = tl.rand(seed, offs)
    else:
        v = tl.randn(seed, offs)
    tl.store(out_ptr + offs, v, mask=m)


@triton.jit
def inline_asm(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """Inline PTX: a funnel shift and a three-input logic op, per element."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    y = tl.load(y_ptr + offs, mask=m)
    z = tl.inline_asm_elementwise(
        "{ .reg .b32 t; shf.l.wrap.b32 t, $1, $1, 7; lop3.b32 $0, t, $2, $1, 0x96; }",
        "=r,r,r", [x, y], dtype=tl.uint32, is_pure=True, pack=1)
    tl.store(out_ptr + offs, z, mask=m)


# -- cases -------------------------------------------------------------------------------------
@dataclass
class Case:
    name: str
    kernel: object
    sig: dict                          # parameter -> Triton type ("*fp32", "i32")
    consts: dict                       # constexpr parameter -> value
    inputs: dict                       # pointer parameter -> recipe (see triton_corpus_refs)
    outputs: dict                      # pointer parameter -> [dtype, element count]
    scalars: dict                      # scalar parameter -> value
    grid: list
    ref: str                           # reference name in triton_corpus_refs.REFS
    tol: dict = field(default_factory=dict)
    archs: tuple = (80, 90)
    warps: int = 4
    stages: int = 3
    sample: bool = False               # also run by default (the rest under -m slow)


TY = {"f32": "fp32", "f16": "fp16", "bf16": "bf16", "f64": "fp64", "i32": "i32", "i64": "i64",
      "i16": "i16", "i8": "i8", "u8": "u8", "u32": "u32", "e5m2": "fp8e5", "e4m3": "fp8e4nv"}


def elementwise(name, op, tin, tout, recipe, ref, tol=None, archs=(80, 90), sample=False,
                recipe_y=None):
    ins = {"x_ptr": [tin, recipe, [N]]}
    sig = {"x_ptr": "*" + TY[tin]}
    kern = unary
    if recipe_y is not None:
        ins["y_ptr"] = [tin, recipe_y, [N]]
        sig["y_ptr"] = "*" + TY[tin]
        kern = binary
    sig.update({"out_ptr": "*" + TY[tout], "n": "i32", "OP": "constexpr", "BLOCK": "constexpr"})
    consts = {"OP": op, "BLOCK": BLOCK}
    if kern is unary:
        sig["UP"] = "constexpr"
        consts["UP"] = tin in ("f16", "bf16") and op in ("sin", "exp", "sqrt")
    return Case(name, kern, sig, consts, ins, {"out_ptr": [tout, N]},
                {"n": N}, [-(-N // BLOCK), 1, 1], ref, tol or {}, archs, sample=sample)


def cases() -> list:
    out = []
    tight = {"rtol": 2e-6, "atol": 1e-6}
    # f32 math: libdevice (range reduction with carry chains), .approx forms, rounding
    for op, recipe, tol, sample in [
            ("sin", "uniform:-100:100", tight, True), ("cos", "uniform:-1000:1000", tight, False),
            ("exp", "uniform:-80:80", {"rtol": 1e-5}, False),     # x * log2(e) rounds first
            ("exp2", "uniform:-120:120", {"rtol": 2e-6}, False),
            ("log", "positive_edge", {"rtol": 2e-6, "atol": 1e-6}, False),
            ("log2", "positive_edge", {"rtol": 2e-6, "atol": 1e-6}, False),
            ("sqrt", "sqrt_edge", tight, True), ("sqrt_rn", "sqrt_edge", {}, False),
            ("rsqrt", "sqrt_edge", tight, True), ("abs", "edge", {}, False),
            ("neg", "edge", {}, False), ("floor", "uniform:-50:50", {}, False),
            ("ceil", "uniform:-50:50", {}, False), ("erf", "uniform:-4:4", tight, False),
            ("sigmoid", "uniform:-30:30", tight, False), ("tanh", "uniform:-10:10", tight, False),
            ("recip", "normal", tight, False)]:
        out.append(elementwise(f"f32_{op}", op, "f32", "f32", recipe, op, tol, sample=sample))
    for t, tol in (("f16", {"rtol": 1e-3, "atol": 1e-3}), ("bf16", {"rtol": 8e-3, "atol": 8e-3}),
                   ("f64", {"rtol": 1e-13, "atol": 1e-13})):
        for op in ("sin", "exp", "sqrt", "abs"):
            recipe = "uniform:0:10" if op == "sqrt" else "uniform:-4:4"
            out.append(elementwise(f"{t}_{op}", op, t, t, recipe, op, tol,
                                   sample=(t == "f16" and op == "exp")))
    # binary arithmetic over float types
    for t in ("f32", "f16", "bf16", "f64"):
        for op in ("add", "sub", "mul", "div", "max", "min", "lt"):
            tout = "i8" if op == "lt" else t
            rel = {"f32": 0, "f16": 0, "bf16": 0, "f64": 0}[t]
            tol = {"rtol": 1e-6, "atol": 0} if op == "div" and t == "f32" else {"rtol": rel}
            out.append(elementwise(f"{t}_{op}", op, t, tout, "normal", op, tol,
                                   recipe_y="normal_nonzero", sample=(t == "bf16" and op == "mul")))
    for op, tol in (("div_rn", {}), ("pow", {"rtol": 4e-6, "atol": 1e-30}),
                    ("atan2", tight), ("fma", {})):
        rx = "uniform:0.1:4" if op == "pow" else "normal"
        ry = "uniform:-6:6" if op == "pow" else "normal_nonzero"
        out.append(elementwise(f"f32_{op}", op, "f32", "f32", rx, op, tol, recipe_y=ry))
    # integer arithmetic (C semantics of // and %)
    for t in ("i32", "i64", "i16", "i8", "u8", "u32"):
        for op in ("add", "mul", "floordiv", "mod", "max", "min", "and", "xor", "shl", "shr"):
            out.append(elementwise(f"{t}_{op}", op, t, t, "ints", op, {},
                                   recipe_y="ints_nonzero",
                                   sample=(t == "i64" and op in ("floordiv", "mod"))))
    out.append(elementwise("u32_umulhi", "umulhi", "u32", "u32", "ints", "umulhi", {},
                           recipe_y="ints"))
    out.append(elementwise("i32_not", "not", "i32", "i32", "ints", "not", {}))
    # casts, 8-bit floats included (e4m3 needs sm_89+, so sm_90 only)
    both, hopper = (80, 90), (90,)
    for tin, tout, recipe, archs, sample in [
            ("f32", "f16", "cast_f32", both, False), ("f32", "bf16", "cast_f32", both, False),
            ("f16", "f32", "normal", both, False), ("bf16", "f32", "normal", both, False),
            ("f32", "i32", "uniform:-1e9:1e9", both, False),
            ("i32", "f32", "ints", both, False), ("f64", "f32", "cast_f32", both, False),
            ("f32", "f64", "normal", both, False), ("f32", "i8", "uniform:-127:127", both, False),
            ("u8", "f32", "ints", both, False), ("bf16", "f16", "normal", both, False),
            ("f16", "bf16", "normal", both, False), ("i64", "f32", "ints", both, False),
            ("f32", "e5m2", "fp8_ties:e5m2", both, True), ("e5m2", "f32", "fp8_bits", both, False),
            ("f16", "e5m2", "fp8_ties:e5m2", both, False),
            ("f32", "e4m3", "fp8_ties:e4m3", hopper, True),
            ("e4m3", "f32", "fp8_bits", hopper, False),
            ("f16", "e4m3", "fp8_ties:e4m3", hopper, False)]:
        out.append(elementwise(f"cast_{tin}_{tout}", "cast", tin, tout, recipe, "cast", {},
                               archs, sample))
    # reductions, scans, sorts: 6 rows of 128
    R, C = 6, 128
    for t, op, recipe, tol, sample in [
            ("f32", "sum", "normal", {"rtol": 1e-5, "atol": 1e-5}, True),
            ("f32", "max", "normal", {}, False), ("i32", "min", "ints", {}, False),
            ("f32", "argmax", "normal", {}, True), ("i32", "argmin", "ints", {}, False),
            ("i32", "sum", "ints", {}, False), ("i32", "xor_sum", "ints", {}, False),
            ("f16", "sum", "normal", {"rtol": 4e-3, "atol": 0.5}, False),
            ("f32", "softmax", "normal", {"rtol": 1e-5, "atol": 1e-7}, False),
            ("f32", "cumsum", "normal", {"rtol": 1e-5, "atol": 1e-5}, True),
            ("i32", "cumsum", "ints", {}, False),
            ("f32", "cumprod", "near_one", {"rtol": 1e-5}, False),
            ("f32", "cummax", "normal", {}, False), ("i32", "sort", "ints", {}, True),
            ("f32", "sort_desc", "normal", {}, False), ("f16", "sort", "normal", {}, False),
            ("f32", "flip", "normal", {}, False)]:
        per_row = op in ("sum", "max", "min", "argmax", "argmin", "xor_sum")
        tout = "i32" if op in ("argmax", "argmin") else t
        if op == "sum" and t == "f16":
            tout = "f16"
        out.append(Case(f"row_{t}_{op}", rowwise,
                        {"x_ptr": "*" + TY[t], "out_ptr": "*" + TY[tout], "R": "i32",
                         "OP": "constexpr", "C": "constexpr"},
                        {"OP": op, "C": C}, {"x_ptr": [t, recipe, [R, C]]},
                        {"out_ptr": [tout, R if per_row else R * C]}, {"R": R}, [R, 1, 1],
                        f"row_{op}", tol, sample=sample))
    # column sums with atomics, row max, transposes (shared-memory layout conversions)
    for t, op, tol, sample in [("f32", "colsum", {"rtol": 1e-5, "atol": 1e-5}, False),
                               ("f32", "rowmax", {}, False), ("f32", "trans", {}, True),
                               ("f16", "trans", {}, False), ("i8", "trans", {}, False)]:
        R2, BR, BC = 100, 32, 64
        out.append(Case(f"tile_{t}_{op}", tile2d,
                        {"x_ptr": "*" + TY[t], "out_ptr": "*" + TY[t], "R": "i32",
                         "OP": "constexpr", "BR": "constexpr", "BC": "constexpr"},
                        {"OP": op, "BR": BR, "BC": BC},
                        dict({"x_ptr": [t, "normal" if t != "i8" else "ints", [R2, BC]]},
                             **({"out_ptr": [t, "zeros", [BC]]} if op == "colsum" else {})),
                        {"out_ptr": [t, BC if op == "colsum" else R2 if op == "rowmax"
                                     else R2 * BC]}, {"R": R2}, [-(-R2 // BR), 1, 1],
                        f"tile_{op}", tol, sample=sample))
    # atomics with returned old values (serialized in some order: the references check what
    # every order shares), and order-free sums
    for t, op, cells, archs, sample in [
            ("i32", "add", 16, (80, 90), True), ("i32", "max", 8, (80, 90), False),
            ("i32", "min", 8, (80, 90), False), ("i32", "xchg", 4, (80, 90), False),
            ("i32", "or", 8, (80, 90), False), ("i32", "cas", 64, (80, 90), False),
            ("f32", "add", 16, (80, 90), False), ("f16", "add", 16, (80, 90), True),
            ("bf16", "add", 16, (90,), True), ("f32", "max", 8, (80, 90), False)]:
        recipe = "small_ints" if t == "i32" else "small_floats"
        if op == "cas":
            recipe = "positive_ints"
        out.append(Case(f"atomic_{t}_{op}", atomics,
                        {"x_ptr": "*" + TY[t], "cells_ptr": "*" + TY[t], "old_ptr": "*" + TY[t],
                         "n": "i32", "OP": "constexpr", "NCELLS": "constexpr",
                         "BLOCK": "constexpr"},
                        {"OP": op, "NCELLS": cells, "BLOCK": BLOCK},
                        {"x_ptr": [t, recipe, [N]], "cells_ptr": [t, "zeros", [cells]]},
                        {"cells_ptr": [t, cells], "old_ptr": [t, N]}, {"n": N},
                        [-(-N // BLOCK), 1, 1], f"atomic_{op}", {"cells": cells}, archs,
                        sample=sample))
    for t, archs in (("f16", (80, 90)), ("bf16", (90,)), ("f32", (80, 90))):
        out.append(Case(f"atomic_sum_{t}", atomic_sum,
                        {"x_ptr": "*" + TY[t], "cells_ptr": "*" + TY[t], "n": "i32",
                         "NCELLS": "constexpr", "BLOCK": "constexpr"},
                        {"NCELLS": 8, "BLOCK": BLOCK},
                        {"x_ptr": [t, "quarters", [N]], "cells_ptr": [t, "zeros", [8]]},
                        {"cells_ptr": [t, 8]}, {"n": N}, [-(-N // BLOCK), 1, 1],
                        "atomic_sum", {"cells": 8}, archs))
    # tl.dot: mma.sync on sm_80, wgmma on sm_90 (integer and 8-bit float forms included)
    for tin, tout, acc, prec, archs, tol, sample in [
            ("f16", "f32", tl.float32, "tf32", (80, 90), {"rtol": 1e-5, "atol": 1e-4}, True),
            ("bf16", "f32", tl.float32, "tf32", (80, 90), {"rtol": 1e-5, "atol": 1e-4}, False),
            ("f32", "f32", tl.float32, "tf32", (80, 90), {"tf32": True}, False),
            ("f32", "f32", tl.float32, "ieee", (80,), {"rtol": 1e-5, "atol": 1e-4}, False),
            ("i8", "i32", tl.int32, "tf32", (80, 90), {}, True),
            ("e4m3", "f32", tl.float32, "tf32", (90,), {"rtol": 1e-5, "atol": 1e-4}, True),
            ("f16", "f16", tl.float16, "tf32", (80, 90), {"rtol": 2e-3, "atol": 2e-2}, False)]:
        M_, N_, K_ = 80, 72, 128
        tag = f"{tin}_{tout}" + ("_ieee" if prec == "ieee" else "")
        recipe = "ints" if tin == "i8" else "fp8_values" if tin == "e4m3" else "normal"
        out.append(Case(f"dot_{tag}", dot,
                        {"a_ptr": "*" + TY[tin], "b_ptr": "*" + TY[tin], "c_ptr": "*" + TY[tout],
                         "M": "i32", "N": "i32", "K": "i32", "BM": "constexpr",
                         "BN": "constexpr", "BK": "constexpr", "ACC": "constexpr",
                         "PREC": "constexpr"},
                        {"BM": 64, "BN": 64, "BK": 32, "ACC": acc, "PREC": prec},
                        {"a_ptr": [tin, recipe, [M_, K_]], "b_ptr": [tin, recipe, [K_, N_]]},
                        {"c_ptr": [tout, M_ * N_]}, {"M": M_, "N": N_, "K": K_},
                        [-(-M_ // 64), -(-N_ // 64), 1], "dot", tol, archs, sample=sample))
    # device-side tensor descriptors (TMA; sm_90)
    for t, sample in (("f32", True), ("f16", False), ("bf16", False)):
        M_, N_ = 96, 80
        out.append(Case(f"tma_device_desc_{t}", tma_scale,
                        {"a_ptr": "*" + TY[t], "out_ptr": "*" + TY[t], "M": "i32", "N": "i32",
                         "BM": "constexpr", "BN": "constexpr"},
                        {"BM": 32, "BN": 32}, {"a_ptr": [t, "normal", [M_, N_]]},
                        {"out_ptr": [t, M_ * N_]}, {"M": M_, "N": N_},
                        [-(-M_ // 32), -(-N_ // 32), 1], "scale2", {}, (90,), sample=sample))
    # random numbers (Philox 4x32-10)
    for op, tol, sample in (("randint", {}, True), ("rand", {}, False),
                            ("randn", {"rtol": 1e-5, "atol": 1e-5}, True)):
        out.append(Case(f"random_{op}", random,
                        {"out_ptr": "*" + ("u32" if op == "randint" else "fp32"), "n": "i32",
                         "seed": "i32", "OP": "constexpr", "BLOCK": "constexpr"},
                        {"OP": op, "BLOCK": BLOCK}, {},
                        {"out_ptr": ["u32" if op == "randint" else "f32", N]},
                        {"n": N, "seed": 1234567}, [-(-N // BLOCK), 1, 1], op, tol,
                        sample=sample))
    out.append(Case("inline_asm_shf_lop3", inline_asm,
                    {"x_ptr": "*u32", "y_ptr": "*u32", "out_ptr": "*u32", "n": "i32",
                     "BLOCK": "constexpr"}, {"BLOCK": BLOCK},
                    {"x_ptr": ["u32", "ints", [N]], "y_ptr": ["u32", "ints", [N]]},
                    {"out_ptr": ["u32", N]}, {"n": N}, [-(-N // BLOCK), 1, 1], "shf_lop3", {},
                    sample=True))
    return out


# -- compile and write -------------------------------------------------------------------------
def compile_case(case: Case, arch: int):
    names = list(case.sig)
    attrs = {(names.index(p),): [["tt.divisibility", 16]]
             for p, ty in case.sig.items() if ty.startswith("*")}
    src = ASTSource(case.kernel, case.sig, case.consts, attrs)
    return triton.compile(src, target=GPUTarget("cuda", arch, 32),
                          options={"num_warps": case.warps, "num_stages": case.stages})


def entry(case: Case, arch: int, k) -> dict:
    md = k.metadata
    params = [p for p, ty in case.sig.items() if ty != "constexpr"]
    return {
        "name": f"{case.name}_sm{arch}", "case": case.name, "ptx": f"{case.name}_sm{arch}.ptx",
        "target": f"sm_{arch}", "kernel": md.name, "params": params,
        "signature": {p: case.sig[p] for p in params},
        "constexprs": {k_: (str(v) if not isinstance(v, (int, float, str)) else v)
                       for k_, v in case.consts.items()},
        "inputs": case.inputs, "outputs": case.outputs, "scalars": case.scalars,
        "grid": case.grid, "block": [32 * md.num_warps, 1, 1], "shared_bytes": md.shared,
        "global_scratch_size": getattr(md, "global_scratch_size", 0),
        "global_scratch_align": getattr(md, "global_scratch_align", 1),
        "ref": case.ref, "tol": case.tol, "sample": case.sample,
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", help="case names to (re)compile")
    ap.add_argument("--out", default=HERE)
    args = ap.parse_args(argv)
    path = os.path.join(args.out, "manifest.json")
    old = {}
    if args.only and os.path.exists(path):
        with open(path) as f:
            old = {e["name"]: e for e in json.load(f)["kernels"]}
    for case in cases():
        if args.only and case.name not in args.only:
            continue
        for arch in case.archs:
            try:
                k = compile_case(case, arch)
            except Exception as exc:         # report and go on: one case never stops the rest
                print(f"FAILED {case.name} sm_{arch}: {exc}", flush=True)
                continue
            e = entry(case, arch, k)
            with open(os.path.join(args.out, e["ptx"]), "w") as f:
                f.write(k.asm["ptx"])
            old[e["name"]] = e
            print(e["name"], flush=True)
    manifest = {"generator": "tests/emulator/triton_corpus/generate.py",
                "triton": triton.__version__,
                "trailing_params": "global scratch (global_scratch_size bytes per program, "
                                   "or 0) and profile scratch (0)",
                "kernels": sorted(old.values(), key=lambda e: e["name"])}
    with open(path, "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
