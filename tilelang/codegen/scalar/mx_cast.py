"""`astype` to and from the block-scaled formats (docs/language.md "Block-scaled formats"):
the OCP MX elements f4e2m1, f6e2m3, f6e3m2 and the scale ue8m0. A register holds the code in
the low bits of an `i8` (f4 in bits 0-3, f6 in bits 0-5, the sign in the format's top bit).

On the `a` targets of SM 100 and later (sm_100a) the PTX conversions do the work:
`cvt.rn.f16x2.{e2m1x2,e2m3x2,e3m2x2}` and `cvt.rn.bf16x2.ue8m0x2` to decode,
`cvt.rn.satfinite.{e2m1x2,e2m3x2,e3m2x2}.f32` and `cvt.rp.satfinite.ue8m0x2.f32` to encode
(the value in the low element; the other input is 0). Elsewhere integer code gives the same
values, the registry's (sema/types.py `round_to_dtype`, builtins_dtype.py `to_bits`):
- decoding is exact and never forms an f32 subnormal in arithmetic (a kernel that flushes
  subnormals would lose the subnormal codes): normal codes are placed in an f32's exponent and
  fraction fields, subnormal ones are an integer times the format's step;
- encoding rounds to nearest even; finite overflow and ±inf saturate to the largest value and
  NaN becomes the largest positive one (`cvt.rn.satfinite.e2m1x2.f32` and its f6 twins, as the
  emulator executes them); a value below half the smallest subnormal keeps its sign (±0);
- ue8m0 decodes to 2^(c - 127) (code 255 NaN) and encodes |x| rounded up to a power of two in
  [2^-127, 2^127] (`cvt.rp.satfinite.ue8m0x2.f32`), NaN to 255.
"""

from __future__ import annotations

import llvmlite.ir as ir

from tilelang.codegen.scalar.ir import BF16, F16, F32, I8, I16, I32, IRKit

MX_SPEC = {  # name: (width in bits, exponent bits, fraction bits, largest finite value)
    "f4e2m1": (4, 2, 1, 6.0),
    "f6e2m3": (6, 2, 3, 7.5),
    "f6e3m2": (6, 3, 2, 28.0),
}
MX_NAMES = (*MX_SPEC, "ue8m0")


def _c(v: int) -> ir.Constant:
    return ir.Constant(I32, v)


def is_nonzero(k: IRKit, code, name: str) -> ir.Value:
    """`astype(x, bool)`: every code but ±0 (ue8m0 has no zero: always true)."""
    if name == "ue8m0":
        return ir.Constant(ir.IntType(1), 1)
    mag = (1 << (MX_SPEC[name][0] - 1)) - 1
    return k.builder.icmp_unsigned("!=", k.builder.and_(code, ir.Constant(I8, mag)),
                                   ir.Constant(I8, 0))


_PTX = {"f4e2m1": "e2m1x2", "f6e2m3": "e2m3x2", "f6e3m2": "e3m2x2", "ue8m0": "ue8m0x2"}


def _hw(k: IRKit) -> bool:
    """Whether the target has the MX `cvt` forms (sm_100a and the later `a` targets); when
    it has, the conversion is recorded as the arch-specific feature `mx_cvt` (the PTX then
    keeps `.target sm_100a`)."""
    target = getattr(k, "target", None)
    if target is None or not target.arch_specific or target.sm < 100:
        return False
    features = getattr(k, "features", None)
    if features is not None:
        features.add("mx_cvt")
    return True


def mx_decode(k: IRKit, code, name: str):
    """The exact f32 value of a code (i8)."""
    b = k.builder
    if _hw(k):
        half = BF16 if name == "ue8m0" else F16
        suffix = "" if name == "ue8m0" else ".rn"
        fn = k.declare(f"llvm.nvvm.{_PTX[name]}.to.{'bf16x2' if half == BF16 else 'f16x2'}"
                       f"{suffix}", ir.VectorType(half, 2), [I16])
        pair = b.call(fn, [b.zext(code, I16)])
        return b.fpext(b.extract_element(pair, ir.Constant(I32, 0)), F32)
    if name == "ue8m0":
        return _decode_ue8m0(k, code)
    b = k.builder
    width, ebits, mbits, _ = MX_SPEC[name]
    bias = (1 << (ebits - 1)) - 1
    c32 = b.zext(code, I32)
    mag = b.and_(c32, _c((1 << (width - 1)) - 1))
    # normal: exponent field e - bias + 127, fraction at the top of the f32's
    normal = b.bitcast(b.add(b.shl(mag, _c(23 - mbits)), _c((127 - bias) << 23)), F32)
    # subnormal (exponent field 0): m * 2^(1 - bias - mbits), exact in f32
    sub = b.fmul(b.uitofp(mag, F32), k.c(F32, 2.0 ** (1 - bias - mbits)))
    val = b.select(b.icmp_unsigned("<", mag, _c(1 << mbits)), sub, normal)
    sign = b.shl(b.lshr(c32, _c(width - 1)), _c(31))
    return b.bitcast(b.or_(b.bitcast(val, I32), sign), F32)


def _decode_ue8m0(k: IRKit, code):
    b = k.builder
    c32 = b.zext(code, I32)
    bits = b.shl(c32, _c(23))
    bits = b.select(b.icmp_unsigned("==", c32, _c(0)), _c(0x00400000), bits)  # 2^-127
    bits = b.select(b.icmp_unsigned("==", c32, _c(255)), _c(0x7FC00000), bits)  # NaN
    return b.bitcast(bits, F32)


def mx_encode(k: IRKit, x, name: str):
    """f32 → code (i8), see the module's rules."""
    if _hw(k):
        b = k.builder
        mode = "rp" if name == "ue8m0" else "rn"
        fn = k.declare(f"llvm.nvvm.ff.to.{_PTX[name]}.{mode}.satfinite", I16, [F32, F32])
        pair = b.trunc(b.call(fn, [k.c(F32, 0.0), x]), I8)
        # e2m1x2 packs both values in one byte: the low nibble is this one
        return b.and_(pair, ir.Constant(I8, 0x0F)) if name == "f4e2m1" else pair
    if name == "ue8m0":
        return _encode_ue8m0(k, x)
    b = k.builder
    width, ebits, mbits, top = MX_SPEC[name]
    bias = (1 << (ebits - 1)) - 1
    a = k.fabs(x)
    a = b.select(b.fcmp_ordered(">", a, k.c(F32, top)), k.c(F32, top), a)
    bits = b.bitcast(a, I32)
    drop = 23 - mbits
    lsb = b.and_(b.lshr(bits, _c(drop)), _c(1))
    rounded = b.add(bits, b.add(_c((1 << (drop - 1)) - 1), lsb))
    normal = b.sub(b.lshr(rounded, _c(drop)), _c((127 - bias) << mbits))
    # below the smallest normal 2^(1 - bias) the step is 2^(1 - bias - mbits)
    scaled = b.fmul(a, k.c(F32, 2.0 ** (bias - 1 + mbits)))
    sub = b.fptoui(k.intrinsic("llvm.rint", [scaled]), I32)
    small = b.fcmp_ordered("<", a, k.c(F32, 2.0 ** (1 - bias)))
    code = b.select(small, sub, normal)
    sign = b.shl(b.lshr(b.bitcast(x, I32), _c(31)), _c(width - 1))
    code = b.or_(code, sign)
    code = b.select(k.isnan(x), _c((1 << (width - 1)) - 1), code)
    return b.trunc(code, I8)


def _encode_ue8m0(k: IRKit, x):
    b = k.builder
    bits = b.and_(b.bitcast(x, I32), _c(0x7FFFFFFF))
    exp = b.lshr(bits, _c(23))
    frac = b.and_(bits, _c(0x7FFFFF))
    up = b.zext(b.icmp_unsigned("!=", frac, _c(0)), I32)
    normal = b.add(exp, up)                           # round the power of two up
    tiny = b.zext(b.icmp_unsigned(">", frac, _c(0x00400000)), I32)   # subnormal input
    code = b.select(b.icmp_unsigned("==", exp, _c(0)), tiny, normal)
    code = b.select(b.icmp_unsigned(">", code, _c(254)), _c(254), code)   # satfinite
    code = b.select(k.isnan(x), _c(255), code)
    return b.trunc(code, I8)


def mx_code(x: float, name: str) -> int:
    """A constant's code, as `mx_encode` gives it (plain Python: constants need no NumPy)."""
    import math
    from tilelang.codegen.scalar.rounding import magnitude_code
    from tilelang.sema.types import DTYPES, round_scalar
    v = round_scalar(float(x), DTYPES[name])
    if name == "ue8m0":
        return 255 if math.isnan(v) else int(math.log2(v)) + 127
    width, ebits, mbits, _ = MX_SPEC[name]
    bias = (1 << (ebits - 1)) - 1
    sign = 1 << (width - 1) if math.copysign(1.0, v) < 0 else 0
    return sign | magnitude_code(abs(v), bias, mbits)
