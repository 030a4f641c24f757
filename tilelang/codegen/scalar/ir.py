"""Small LLVM IR helpers shared by the scalar emitter, its conversions and its math library:
intrinsic declarations, typed constants, float bit access and polynomial evaluation."""

from __future__ import annotations

import struct
from typing import Sequence

import llvmlite.ir as ir
from llvmlite.ir.types import _BaseFloatType

from tilelang.codegen.scalar.rounding import bf16_bits


class BFloatType(_BaseFloatType):
    """LLVM's `bfloat` (llvmlite 0.50 has no class for it). Constants print as `0xR` + the 16
    bits, rounded to nearest even from the Python float."""

    null = "0xR0000"
    intrinsic_name = "bf16"

    def __str__(self) -> str:
        return "bfloat"

    def format_constant(self, value) -> str:
        return "0xR%04X" % bf16_bits(float(value))


BFloatType._create_instance()


I1, I8, I16, I32, I64 = (ir.IntType(n) for n in (1, 8, 16, 32, 64))
F16, BF16, F32, F64 = ir.HalfType(), BFloatType(), ir.FloatType(), ir.DoubleType()

_SUFFIX = {"half": "f16", "bfloat": "bf16", "float": "f32", "double": "f64"}


def type_suffix(t: ir.Type) -> str:
    if isinstance(t, ir.IntType):
        return f"i{t.width}"
    return _SUFFIX[str(t)]


def fbits(t: ir.Type) -> int:
    return {"half": 16, "bfloat": 16, "float": 32, "double": 64}[str(t)]


def fconst(t: ir.Type, value: float) -> ir.Constant:
    """A float constant; llvmlite prints doubles exactly, so f32 values are rounded first."""
    if str(t) == "float":
        value = struct.unpack("<f", struct.pack("<f", value))[0]
    return ir.Constant(t, value)


class IRKit:
    """Holds the builder and module; declares intrinsics once per module."""

    def __init__(self, builder: ir.IRBuilder, module: ir.Module):
        self.builder = builder
        self.module = module

    def declare(self, name: str, ret: ir.Type, argtys: Sequence[ir.Type]) -> ir.Function:
        fn = self.module.globals.get(name)
        if fn is None:
            fn = ir.Function(self.module, ir.FunctionType(ret, list(argtys)), name=name)
        return fn

    def intrinsic(self, name: str, args: Sequence[ir.Value], ret: ir.Type | None = None,
                  overloaded: bool = True) -> ir.Value:
        """Call `name.<type of the first argument>` (or `name` itself if not overloaded)."""
        t = args[0].type
        full = f"{name}.{type_suffix(t)}" if overloaded else name
        fn = self.declare(full, ret or t, [a.type for a in args])
        return self.builder.call(fn, list(args))

    # -- float helpers ----------------------------------------------------------------------

    def c(self, t: ir.Type, value: float) -> ir.Constant:
        return fconst(t, value)

    def ci(self, t: ir.Type, value: int) -> ir.Constant:
        return ir.Constant(t, value)

    def fma(self, a, b, c):
        return self.intrinsic("llvm.fma", [a, b, c])

    def poly(self, x, coeffs: Sequence[float]):
        """coeffs[0] + x*(coeffs[1] + x*(...)) by Horner's rule with fused multiply-adds."""
        t = x.type
        acc = self.c(t, coeffs[-1])
        for k in reversed(coeffs[:-1]):
            acc = self.fma(acc, x, self.c(t, k))
        return acc

    def as_int(self, v):
        return self.builder.bitcast(v, ir.IntType(fbits(v.type)))

    def as_float(self, v, t: ir.Type):
        return self.builder.bitcast(v, t)

    def select_lt(self, x, limit: float, then):
        """`x < limit ? then : x` (NaN keeps x)."""
        b = self.builder
        return b.select(b.fcmp_ordered("<", x, self.c(x.type, limit)), then, x)

    def pow2i(self, k, t: ir.Type):
        """2**k for an integer k (i32) within the normal exponent range of float type t."""
        b = self.builder
        if str(t) == "float":
            e = b.add(k, ir.Constant(I32, 127))
            return b.bitcast(b.shl(e, ir.Constant(I32, 23)), t)
        e = b.add(b.sext(k, I64), ir.Constant(I64, 1023))
        return b.bitcast(b.shl(e, ir.Constant(I64, 52)), t)

    def ldexp(self, x, k, t: ir.Type):
        """x * 2**k for |k| up to twice the exponent range, rounded once (two exact-ish
        scalings: the first product is exact, the second rounds, to a subnormal if needed)."""
        b = self.builder
        k1 = b.ashr(k, ir.Constant(I32, 1))
        k2 = b.sub(k, k1)
        return b.fmul(b.fmul(x, self.pow2i(k1, t)), self.pow2i(k2, t))

    def isnan(self, x):
        return self.builder.fcmp_unordered("uno", x, x)

    def fabs(self, x):
        return self.intrinsic("llvm.fabs", [x])

    def copysign(self, mag, sign):
        return self.intrinsic("llvm.copysign", [mag, sign])
