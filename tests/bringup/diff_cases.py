"""The cases of the emulator-against-GPU differential test: the examples, the test kernels of
tests/tune and tests/bringup (every scalar and array parameter kind, integer and float operations).

A case names a kernel, its const values and grid, and makes its arguments: NumPy arrays (each
with an optional view taken on the host array for the emulator and on the device array for the
GPU, so strides reach the kernel as the ABI passes them) and scalars. `run(case, backend)`
launches it and returns every array argument's whole base array afterwards.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
EX = os.path.join(ROOT, "examples")
ABI = os.path.join(HERE, "abi.tile")
OPS = os.path.join(HERE, "ops.tile")
TUNE = os.path.join(ROOT, "tests", "tune", "kernels.tile")


class Arr:
    """An array argument: the base host array and a view to take of it (None: all of it)."""

    def __init__(self, base: np.ndarray, view: Callable | None = None):
        self.base, self.view = base, view


@dataclass
class Case:
    id: str
    path: str
    kernel: str
    grid: tuple
    make: Callable                          # rng -> list of Arr and scalars, in order
    consts: dict = field(default_factory=dict)
    expect: Callable | None = None          # args -> {index: expected base}, checked exactly


def _np_dtype(dt: str):
    import ml_dtypes
    return {"bf16": ml_dtypes.bfloat16, "f8e4m3": ml_dtypes.float8_e4m3fn,
            "f8e5m2": ml_dtypes.float8_e5m2, "bool": np.bool_}.get(dt) or np.dtype({
                "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64", "u8": "uint8",
                "u16": "uint16", "u32": "uint32", "u64": "uint64", "f16": "float16",
                "f32": "float32", "f64": "float64"}[dt])


SCALARS = {"i8": -100, "i16": -30000, "i32": -2_000_000_000, "i64": -(2**62) + 5, "u8": 250,
           "u16": 65000, "u32": 4_000_000_000, "u64": 2**63 + 7, "f16": 0.333,
           "bf16": -1.5e30, "f32": 3.14159, "f64": 1 / 3, "bool": True, "f8e4m3": -3.5,
           "f8e5m2": 1024.0}


def _abi_case(dt: str) -> Case:
    v = SCALARS[dt]

    def make(rng):
        return [Arr(np.zeros(16, _np_dtype(dt))), v]

    def expect(args):
        return {0: np.full(16, v, _np_dtype(dt))}
    return Case(f"abi_{dt}", ABI, f"abi_{dt}", (1,), make, expect=expect)


def _random(rng, dt: str, n: int) -> np.ndarray:
    if dt == "bool":
        return rng.integers(0, 2, n).astype(bool)
    if dt[0] in "iu":
        info = np.iinfo(_np_dtype(dt))
        return rng.integers(info.min, info.max, n, dtype=_np_dtype(dt), endpoint=True)
    return (rng.standard_normal(n) * 4).astype(_np_dtype(dt))


def _copy1_case(dt: str) -> Case:
    def make(rng):
        return [Arr(_random(rng, dt, 400), lambda a: a[::2]), Arr(np.zeros(260, _np_dtype(dt)),
                                                                  lambda a: a[30:230])]

    def expect(args):
        want = args[1].base.copy()
        want[30:230] = args[0].base[::2]
        return {1: want}
    return Case(f"copy1_{dt}", ABI, f"copy1_{dt}", (4,), make, expect=expect)


def _examples() -> list[Case]:
    cases = [
        Case("vadd", os.path.join(EX, "vadd.tile"), "vadd", (5,),
             lambda r: [Arr(r.standard_normal(5000).astype(np.float32)),
                        Arr(r.standard_normal(5000).astype(np.float32)),
                        Arr(np.zeros(5000, np.float32))]),
        Case("softmax", os.path.join(EX, "softmax.tile"), "softmax_rows", (37,),
             lambda r: [Arr((r.standard_normal((37, 300)) * 3).astype(np.float32)),
                        Arr(np.zeros((37, 300), np.float32))], {"N": 512}),
        Case("layernorm", os.path.join(EX, "layernorm.tile"), "layernorm", (37,),
             lambda r: [Arr(r.standard_normal((37, 300)).astype(np.float32)),
                        Arr(r.random(300).astype(np.float32)),
                        Arr(r.random(300).astype(np.float32)),
                        Arr(np.zeros((37, 300), np.float32)), 1e-5], {"N": 512}),
        Case("matmul", os.path.join(EX, "matmul.tile"), "matmul", (2, 1),
             lambda r: [Arr(r.standard_normal((256, 192)).astype(np.float16)),
                        Arr(r.standard_normal((192, 128)).astype(np.float16)),
                        Arr(np.zeros((256, 128), np.float32))]),
    ]
    att = os.path.join(EX, "attention.tile")
    if os.path.exists(att):
        for dt in ("f16", "bf16"):
            for d in (64, 128):
                for causal in (False, True):
                    def make(r, dt=dt, d=d):
                        q, k, v = (r.standard_normal((2, 80, d)).astype(_np_dtype(dt))
                                   for _ in range(3))
                        return [Arr(q), Arr(k), Arr(v), Arr(np.zeros_like(q)),
                                1 / math.sqrt(d)]
                    # the generic kernel bound to the dtype, at its target's default tiles
                    cases.append(Case(f"attention_{dt}_d{d}{'_causal' if causal else ''}",
                                      att, "attention", (2, 2), make,
                                      {"T": dt, "D": d, "CAUSAL": causal}))
    return cases


def _ops() -> list[Case]:
    def nonzero(r, n):
        v = r.integers(-1000, 1000, n).astype(np.int32)
        return np.where(v == 0, 7, v).astype(np.int32)
    return [
        Case("int_ops", OPS, "int_ops", (3,),
             lambda r: [Arr(r.integers(-2**31, 2**31, 300).astype(np.int32)),
                        Arr(nonzero(r, 300)), Arr(np.zeros((8, 300), np.int32))]),
        Case("wide_ops", OPS, "wide_ops", (3,),
             lambda r: [Arr(r.integers(0, 2**40, 150).astype(np.uint64)),
                        Arr(r.integers(-2**50, 2**50, 150).astype(np.int64)),
                        Arr(np.zeros((4, 150), np.uint64))]),
        Case("float_ops", OPS, "float_ops", (3,),
             lambda r: [Arr(r.standard_normal(300).astype(np.float32)),
                        Arr(r.standard_normal(300).astype(np.float32)),
                        Arr(np.zeros((10, 300), np.float32))]),
        Case("f64_ops", OPS, "f64_ops", (2,),
             lambda r: [Arr(r.standard_normal(100) * 5), Arr(np.zeros((3, 100)))]),
        Case("reduce_rows", OPS, "reduce_rows", (20,),
             lambda r: [Arr(r.standard_normal((20, 200)).astype(np.float32)),
                        Arr(r.integers(-10**6, 10**6, (20, 200)).astype(np.int32)),
                        Arr(np.zeros((20, 2), np.float32)), Arr(np.zeros((20, 2), np.int32))]),
        Case("histogram", OPS, "histogram", (4,),
             lambda r: [Arr(r.integers(0, 50, 1000).astype(np.int32)),
                        Arr(np.zeros(50, np.int32))],
             expect=lambda a: {1: np.bincount(a[0].base, minlength=50).astype(np.int32)}),
        Case("tune_vadd", TUNE, "vadd", (12,),
             lambda r: [Arr(r.standard_normal(3000).astype(np.float32)),
                        Arr(r.standard_normal(3000).astype(np.float32)),
                        Arr(np.zeros(3000, np.float32))]),
        Case("tune_scale", TUNE, "scale", (3,),
             lambda r: [Arr(r.integers(-10**6, 10**6, 700).astype(np.int32)),
                        Arr(np.zeros(700, np.int32))], {"K": 3},
             expect=lambda a: {1: a[0].base * 3}),
        Case("abi_mixed", ABI, "abi_mixed", (1,),
             lambda r: [Arr(np.zeros(10)), -7, 1 / 7, 65535, -(2**53) + 1, True, 0.1,
                        4294967295, 3.0e38, 1.0e-3, 255],
             expect=lambda a: {0: np.array([-7, 1 / 7, 65535, -(2**53) + 1, 1,
                                            float(np.float16(0.1)), 4294967295,
                                            float(_np_dtype("bf16")(3.0e38)),
                                            float(np.float32(1.0e-3)), 255], np.float64)}),
        Case("copy2_transposed", ABI, "copy2", (6, 2),
             lambda r: [Arr(r.standard_normal((64, 96)).astype(np.float32), lambda a: a.T),
                        Arr(np.zeros((96, 64), np.float32))],
             expect=lambda a: {1: np.ascontiguousarray(a[0].base.T)}),
        Case("copy3_strided", ABI, "copy3", (2, 2),
             lambda r: [Arr(r.integers(-99, 99, (4, 16, 32)).astype(np.int32),
                            lambda a: a[:, :, ::2]), Arr(np.zeros((4, 16, 16), np.int32))],
             expect=lambda a: {1: a[0].base[:, :, ::2].copy()}),
    ]


DTYPES = ("i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "f16", "bf16", "f32", "f64",
          "bool", "f8e4m3", "f8e5m2")
CASES = _examples() + _ops() + [_abi_case(d) for d in DTYPES] + [_copy1_case(d) for d in DTYPES]


def run(case: Case, backend: str, seed: int = 0):
    """Launch `case` on `backend`; returns (the arguments as made, the base arrays after the
    launch as NumPy arrays, the PTX of the specialization that ran)."""
    import tilelang
    args = case.make(np.random.default_rng(seed))
    mod = tilelang.compile(case.path, backend=backend)
    k = getattr(mod, case.kernel).specialize(**case.consts)
    be = mod.backend
    bases, call = [], []
    for a in args:
        if isinstance(a, Arr):
            base = a.base.copy() if backend == "emulator" else tilelang.to_device(a.base,
                                                                                  backend=be)
            bases.append(base)
            call.append(a.view(base) if a.view else base)
        else:
            call.append(a)
    k[case.grid](*call)
    be.synchronize()
    out = [b if isinstance(b, np.ndarray) else b.numpy() for b in bases]
    ptx = next(iter(k._specs.values())).ptx
    return args, out, ptx


APPROX = (".approx", "div.full", "mma.sync", "wgmma")


def tolerance(ptx: str, dtype) -> float | None:
    """None: the answers must be equal bit for bit (integers, and floats from IEEE-rounded
    instructions, which the emulator evaluates as the GPU does). Otherwise the largest error
    relative to the largest magnitude: .approx instructions are exact on the emulator and
    within their PTX ISA bounds on the GPU (docs/numerics.md), and tensor-core products
    accumulate in an order and precision of their own; narrow outputs may then round to the
    neighbouring value."""
    dt = np.dtype(dtype)
    if dt.kind in "iub" or not any(s in ptx for s in APPROX):
        return None
    if dt.itemsize == 1:
        return 2.0 ** -2
    if dt == np.float16:
        return 2.0 ** -9
    if dt.itemsize == 2:                    # bf16
        return 2.0 ** -6
    if dt == np.float32:
        return 2.0 ** -14 if ("mma" in ptx) else 2.0 ** -19
    return 2.0 ** -40
