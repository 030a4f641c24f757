"""Register types, constants and `astype`/`bitcast` conversions with the registry's semantics
(builtins_dtype.py: `convert_values`, `to_bits`/`from_bits`; types.py `round_to_*`).

Registers: bool is i1, f16 `half`, bf16 `bfloat`, f32 and tf32 `float` (a tf32 register holds
an f32 whose low 13 fraction bits are zero), f64 `double`, f8e4m3/f8e5m2 `i8` (the raw code).

Conversions (all round to nearest even, one rounding from the exact source value):
- float → int: `llvm.fpto[su]i.sat` (truncate, saturate, NaN → 0), narrow floats widened first;
- int → f16/f32/f64: one LLVM conversion (single rounding); int → bf16/tf32/f8 through f64,
  which is exact for up to 32 bits and is what the reference does for 64-bit integers;
- f64 → tf32/f8: rounded to f32 *to odd* first, so the final rounding is still single;
- f32 → tf32: integer round-half-even on the bit pattern (PTX's cvt.rna.tf32 rounds ties away);
- f8: `cvt.rn.satfinite.{e4m3x2,e5m2x2}.f32` and `cvt.rn.f16x2.{e4m3x2,e5m2x2}` on sm_90+,
  the same conversion in integer code elsewhere (NaN → 0x7F, overflow and ±inf saturate).
"""

from __future__ import annotations

import llvmlite.ir as ir

from tilelang.codegen.scalar.ir import BF16, F16, F32, F64, I1, I8, I16, I32, I64, IRKit
from tilelang.codegen.scalar.mx_cast import (MX_NAMES, is_nonzero, mx_code, mx_decode,
                                              mx_encode)
from tilelang.codegen.scalar.rounding import f8_code, round_to
from tilelang.sema.builtins_dtype import convert_value
from tilelang.sema.types import F8E4M3, F8E5M2, TF32, DType

F8_SPEC = {  # name: (exponent bias, fraction bits, largest finite value)
    "f8e4m3": (7, 3, 448.0),
    "f8e5m2": (15, 2, 57344.0),
}


def llvm_type(dtype: DType) -> ir.Type:
    n = dtype.name
    if dtype.is_bool:
        return I1
    if dtype.is_int:
        return ir.IntType(dtype.bits)
    return {"f16": F16, "bf16": BF16, "f32": F32, "tf32": F32, "f64": F64,
            "f8e4m3": I8, "f8e5m2": I8, "f4e2m1": I8, "f6e2m3": I8, "f6e3m2": I8,
            "ue8m0": I8}[n]


def constant(value, dtype: DType) -> ir.Constant:
    """A constant register value of `dtype`; floats are rounded to the dtype as `astype`
    does (so an exact value stays itself)."""
    t = llvm_type(dtype)
    if dtype.is_bool:
        return ir.Constant(I1, int(bool(value)))
    if dtype.is_int:
        v = int(value) & ((1 << dtype.bits) - 1)
        if v >= 1 << (dtype.bits - 1):
            v -= 1 << dtype.bits        # LLVM prints integer constants signed
        return ir.Constant(t, v)
    if dtype.name in F8_SPEC or dtype.name in MX_NAMES:
        code = f8_code(float(value), dtype) if dtype.name in F8_SPEC else \
            mx_code(float(value), dtype.name)
        return ir.Constant(I8, code - 256 if code >= 128 else code)
    v = round_to(float(value), dtype) if dtype.name in ("tf32", "f16", "f32") else float(value)
    return ir.Constant(t, v)


def convert_const(value, dtype: DType):
    """`astype` of a Python constant (the registry's constant folding)."""
    return convert_value(value, dtype)


# ---------------------------------------------------------------------------------------------

def convert(k: IRKit, v: ir.Value, src: DType, dst: DType) -> ir.Value:
    """`astype(v, dst)` for a register `v` of dtype `src`."""
    b = k.builder
    if src == dst:
        return v
    if dst.is_bool:
        if src.is_bool:
            return v
        if src.is_int:
            return b.icmp_unsigned("!=", v, ir.Constant(v.type, 0))
        if src.name in MX_NAMES:
            return is_nonzero(k, v, src.name)
        if src.name in F8_SPEC:           # any code but ±0 is non-zero (NaN included)
            return b.icmp_unsigned("!=", b.and_(v, ir.Constant(I8, 0x7F)), ir.Constant(I8, 0))
        return b.fcmp_unordered("!=", v, ir.Constant(v.type, 0.0))
    if src.is_bool:
        if dst.is_int:
            return b.zext(v, llvm_type(dst))
        return convert(k, b.zext(v, I8), _U8, dst)
    if dst.is_int:
        t = llvm_type(dst)
        if src.is_int:
            if src.bits == dst.bits:
                return v
            if src.bits > dst.bits:
                return b.trunc(v, t)
            return b.sext(v, t) if src.signed else b.zext(v, t)
        x = to_wide(k, v, src)            # exact: f16/bf16/f8 → f32
        name = "llvm.fptosi.sat" if dst.signed else "llvm.fptoui.sat"
        fn = k.declare(f"{name}.i{dst.bits}.{'f64' if x.type == F64 else 'f32'}", t, [x.type])
        return b.call(fn, [x])
    # to a float
    if src.is_int:
        return _int_to_float(k, v, src, dst)
    return _float_to_float(k, v, src, dst)


_U8 = DType("u8", "int", 8, signed=False)


def _int_to_float(k: IRKit, v, src: DType, dst: DType):
    b = k.builder
    conv = b.sitofp if src.signed else b.uitofp
    if dst.name in ("f16", "f32", "f64"):
        return conv(v, llvm_type(dst))
    if src.bits <= 16:                    # exact in f32
        return _float_to_float(k, conv(v, F32), _F32, dst)
    return _float_to_float(k, conv(v, F64), _F64, dst)


_F32 = DType("f32", "float", 32, mantissa_bits=23, exponent_bits=8)
_F64 = DType("f64", "float", 64, mantissa_bits=52, exponent_bits=11)


def to_wide(k: IRKit, v, src: DType):
    """A float register as f32 (f16, bf16, tf32, f8: exact) or f64 (f64)."""
    b = k.builder
    n = src.name
    if n in ("f32", "tf32", "f64"):
        return v
    if n in ("f16", "bf16"):
        return b.fpext(v, F32)
    if n in F8_SPEC:
        return f8_decode(k, v, n)
    if n in MX_NAMES:
        return mx_decode(k, v, n)
    raise ValueError(f"not a float: {src}")


def _float_to_float(k: IRKit, v, src: DType, dst: DType):
    b = k.builder
    x = to_wide(k, v, src)
    n = dst.name
    if n == "f64":
        return x if x.type == F64 else b.fpext(x, F64)
    if n == "f32":
        return x if x.type == F32 else b.fptrunc(x, F32)
    if n == "f16":
        return b.fptrunc(x, F16)          # cvt.rn.f16.f64: one rounding
    if n == "bf16":
        # f64 → bf16 through f32 rounded to odd (one rounding overall); also what LLVM does on
        # sm_80, and it avoids cvt.rn.bf16.f64, which the emulator rounds twice
        x32 = round_to_odd_f32(k, x) if x.type == F64 else x
        return b.fptrunc(x32, BF16)
    x32 = round_to_odd_f32(k, x) if x.type == F64 else x
    if n == "tf32":
        return round_tf32(k, x32)
    if n in MX_NAMES:
        return mx_encode(k, x32, n)
    return f8_encode(k, x32, n)


def round_to_odd_f32(k: IRKit, x):
    """f64 → f32 rounding to odd: truncate toward zero and set the last bit when inexact.
    A later round-to-nearest to ≤ 22 fraction bits then equals one direct rounding."""
    b = k.builder
    r = b.fptrunc(x, F32)
    back = b.fpext(r, F64)
    exact = b.fcmp_unordered("==", back, x)      # NaN stays as is
    bits = b.bitcast(r, I32)
    away = b.fcmp_ordered(">", k.fabs(back), k.fabs(x))
    tz = b.select(away, b.sub(bits, ir.Constant(I32, 1)), bits)
    odd = b.or_(tz, ir.Constant(I32, 1))
    return b.select(exact, r, b.bitcast(odd, F32))


def round_tf32(k: IRKit, x):
    """f32 → tf32 (10 fraction bits), round half to even on the bits; overflow carries into
    the exponent and gives ±inf like the reference; NaN stays NaN."""
    b = k.builder
    bits = b.bitcast(x, I32)
    lsb = b.and_(b.lshr(bits, ir.Constant(I32, 13)), ir.Constant(I32, 1))
    r = b.add(bits, b.add(ir.Constant(I32, 0xFFF), lsb))
    r = b.and_(r, ir.Constant(I32, -0x2000))
    return b.select(k.isnan(x), x, b.bitcast(r, F32))


def _hw_f8(target) -> bool:
    """Whether the f8 `cvt` instructions are used. sm_89 has them only from PTX 8.1 (sm_90
    from 7.8), and LLVM aborts the process ("Cannot select") below that, while sm_89 kernels
    are written at PTX 7.8: sm_89 takes the integer code, which gives the same values."""
    return target is not None and target.sm >= 90


def f8_decode(k: IRKit, code, name: str):
    """An f8 code (i8) → its exact f32 value."""
    b = k.builder
    target = getattr(k, "target", None)
    if _hw_f8(target):
        fmt = "e4m3x2" if name == "f8e4m3" else "e5m2x2"
        fn = k.declare(f"llvm.nvvm.{fmt}.to.f16x2.rn", ir.VectorType(F16, 2), [I16])
        pair = b.call(fn, [b.zext(code, I16)])
        return b.fpext(b.extract_element(pair, ir.Constant(I32, 0)), F32)
    if name == "f8e5m2":                  # the high byte of an f16
        h = b.bitcast(b.shl(b.zext(code, I16), ir.Constant(I16, 8)), F16)
        return b.fpext(h, F32)
    # e4m3: place exponent and fraction at the top of an f32's fraction field, scale by 2^120
    # (exact, subnormal codes included); 0x7F/0xFF are NaN.
    c32 = b.zext(code, I32)
    mag = b.and_(c32, ir.Constant(I32, 0x7F))
    val = b.fmul(b.bitcast(b.shl(mag, ir.Constant(I32, 20)), F32), k.c(F32, 2.0 ** 120))
    sign = b.shl(b.and_(c32, ir.Constant(I32, 0x80)), ir.Constant(I32, 24))
    val = b.bitcast(b.or_(b.bitcast(val, I32), sign), F32)
    is_nan = b.icmp_unsigned("==", mag, ir.Constant(I32, 0x7F))
    return b.select(is_nan, k.c(F32, float("nan")), val)


def f8_pair_decode(k: IRKit, lo, hi, name: str, dst: DType) -> tuple | None:
    """`astype` of two f8 codes (i8) to the float `dst` with one `cvt.rn.f16x2.{e4m3x2,
    e5m2x2}` for both (sm_90+): the codes side by side in 16 bits, as a loaded word holds
    two neighbours, so no byte is moved out on its own; None where the target has no such
    cvt (the caller converts each element). Every f8 value is exact in f16, bf16 and f32."""
    target = getattr(k, "target", None)
    if not _hw_f8(target) or dst.name not in ("f16", "bf16", "f32"):
        return None
    b = k.builder
    fmt = "e4m3x2" if name == "f8e4m3" else "e5m2x2"
    fn = k.declare(f"llvm.nvvm.{fmt}.to.f16x2.rn", ir.VectorType(F16, 2), [I16])
    word = b.or_(b.zext(lo, I16), b.shl(b.zext(hi, I16), ir.Constant(I16, 8)))
    pair = b.call(fn, [word])
    out = []
    for i in range(2):
        h = b.extract_element(pair, ir.Constant(I32, i))
        out.append(h if dst.name == "f16" else b.fpext(h, F32) if dst.name == "f32" else
                   b.fptrunc(b.fpext(h, F32), BF16))
    return tuple(out)


def f8_encode(k: IRKit, x, name: str):
    """f32 → f8 code: round to nearest even, finite overflow and ±inf saturate to the largest
    finite value, NaN → 0x7F (PTX cvt.rn.satfinite)."""
    b = k.builder
    target = getattr(k, "target", None)
    if _hw_f8(target):
        fmt = "e4m3x2" if name == "f8e4m3" else "e5m2x2"
        fn = k.declare(f"llvm.nvvm.ff.to.{fmt}.rn", I16, [F32, F32])
        return b.trunc(b.call(fn, [k.c(F32, 0.0), x]), I8)
    bias, mant, top = F8_SPEC[name]
    a = k.fabs(x)
    a = b.select(b.fcmp_ordered(">", a, k.c(F32, top)), k.c(F32, top), a)
    bits = b.bitcast(a, I32)
    drop = 23 - mant
    lsb = b.and_(b.lshr(bits, ir.Constant(I32, drop)), ir.Constant(I32, 1))
    rounded = b.add(bits, b.add(ir.Constant(I32, (1 << (drop - 1)) - 1), lsb))
    normal = b.sub(b.lshr(rounded, ir.Constant(I32, drop)),
                   ir.Constant(I32, (127 - bias) << mant))
    # below the smallest normal 2^(1-bias) the step is 2^(1-bias-mant): code = rint(a / step)
    scaled = b.fmul(a, k.c(F32, 2.0 ** (bias - 1 + mant)))
    sub = b.fptoui(k.intrinsic("llvm.rint", [scaled]), I32)
    small = b.fcmp_ordered("<", a, k.c(F32, 2.0 ** (1 - bias)))
    code = b.select(small, sub, normal)
    sign = b.lshr(b.and_(b.bitcast(x, I32), ir.Constant(I32, 0x80000000 - (1 << 32))),
                  ir.Constant(I32, 24))
    code = b.or_(code, sign)
    code = b.select(k.isnan(x), ir.Constant(I32, 0x7F), code)
    return b.trunc(code, I8)


# ---------------------------------------------------------------------------------------------

def bitcast(k: IRKit, v, src: DType, dst: DType):
    """Reinterpret the bits (equal widths, no bools). A pattern read as tf32 is rounded to
    tf32 (the registry's from_bits)."""
    b = k.builder
    st, dt = llvm_type(src), llvm_type(dst)
    r = v if st == dt else b.bitcast(v, dt)
    if dst == TF32 and src != TF32:
        r = round_tf32(k, r)
    return r


__all__ = ["F8E4M3", "F8E5M2", "bitcast", "constant", "convert", "convert_const", "llvm_type",
           "round_tf32", "round_to_odd_f32", "f8_decode", "f8_encode", "to_wide"]
