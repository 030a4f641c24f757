"""Dtype built-ins: `astype(x, dtype)`, `bitcast(x, dtype)` and the strict constructors, one
entry per dtype name (`i16(5)`, `f32(0.5)`; see constants.construct for their rules).

`astype` converts values explicitly, between any dtypes (restricted floats included, it is
their way in and out), with the device's conversion semantics:
- float → int truncates toward zero and saturates to the dtype's range; NaN gives 0 (PTX
  `cvt.rzi` semantics);
- int → narrower int wraps (keeps the low bits); int → wider int sign- or zero-extends;
- anything → bool is `x != 0`; bool → number is 0 or 1;
- → float rounds to nearest even; f8 formats saturate to their largest finite value.
On constants it folds with the same rules (so `astype(300, i8)` is `i8(44)`).

`bitcast` reinterprets the bits: same bit width, no bools (tf32 counts as 32 bits).

Packed FP4 (`f4e2m1x2`, two f4e2m1 codes a byte, the even element in bits 0-3) is not a value
`astype` converts: `unpack_f4(x, axis)` gives its f4e2m1 elements (the axis doubled) and
`bitcast` its bytes (u8/i8); docs/language.md "Packed FP4".

`is_floating(T)`, `is_integer(T)` and `bits(T)` ask about a dtype at compile time; their
results are constants, so a generic kernel picks its code path with them (docs/language.md,
"Generic kernels").
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from tilelang.lazy import lazy_module

from tilelang.sema.builtins_core import (CONST, DTYPE, Builtin, BoundArgs, Param, arg,
                                         dtype_arg, fail, found, register, tile_of)
from tilelang.sema.constants import ConstValue, construct, loose, round_float
from tilelang.sema.types import (ALL_DTYPES, BF16, BOOL, F4E2M1, F8E4M3, F8E5M2, LOOSE_INT,
                                 TF32, DType, TileType, Type, round_to_dtype, scalar)

PACKED_F4 = "f4e2m1x2"

np = lazy_module("numpy")


# ---------------------------------------------------------------------------------------------
# Value conversion (astype)

def convert_values(x, dtype: DType) -> np.ndarray:
    """`astype` on NumPy values (bf16/tf32/f8 sources are float32 arrays)."""
    v = np.asarray(x)
    if dtype.is_bool:
        return v != 0
    if dtype.is_int and v.dtype.kind == "f":
        t = np.trunc(v.astype(np.float64))
        t = np.where(np.isnan(t), 0.0, t)
        hi = t >= float(2 ** (dtype.bits - 1 if dtype.signed else dtype.bits))
        lo = t < float(dtype.min)
        mid = np.where(hi | lo, 0.0, t)
        out = mid.astype(dtype.storage_np_dtype)
        out = np.where(hi, np.array(dtype.max, dtype=dtype.storage_np_dtype), out)
        return np.where(lo, np.array(dtype.min, dtype=dtype.storage_np_dtype), out)
    if dtype.is_int:
        with np.errstate(all="ignore"):
            return v.astype(dtype.storage_np_dtype)  # NumPy integer casts wrap
    return round_to_dtype(v, dtype)


def convert_value(v, dtype: DType):
    """`astype` on one Python value (constant folding)."""
    if dtype.is_bool:
        return bool(v != 0)
    if dtype.is_int:
        if isinstance(v, float):
            if math.isnan(v):
                return 0
            if math.isinf(v):
                return dtype.max if v > 0 else dtype.min
            return max(dtype.min, min(dtype.max, int(v)))  # int() truncates toward zero
        v = int(v)
        span = 1 << dtype.bits
        v %= span
        return v - span if dtype.signed and v > dtype.max else v
    try:
        f = float(v)
    except OverflowError:
        f = math.copysign(math.inf, v)
    return round_float(f, dtype)


def _astype_typing(bound: BoundArgs, span) -> Type:
    t = tile_of(bound, "x", span)
    dt = dtype_arg(bound, "dtype")
    if dt.name == PACKED_F4:
        raise fail("E0508", bound, "dtype", "cannot be f4e2m1x2: a packed byte holds two "
                                            "values, not one", span,
                   help="pack on the host (`tilelang.pack_f4`) or reinterpret bytes with "
                        "`bitcast(x, f4e2m1x2)`")
    if isinstance(t, TileType) and t.dtype.name == PACKED_F4:
        raise fail("E0508", bound, "x", f"is {t}: a packed byte holds two values, not one",
                   span, help="`unpack_f4(x)` gives its f4e2m1 elements (the last axis "
                              "doubled); `bitcast(x, u8)` its bytes")
    return TileType(dt, t.shape if isinstance(t, TileType) else ())


def _astype_fold(bound: BoundArgs, span) -> ConstValue:
    dt = dtype_arg(bound, "dtype")
    c = arg(bound, "x").const
    return ConstValue(convert_value(c.value, dt), dt)


def _astype_ref(x, dtype: DType):
    return convert_values(x, dtype)


register(Builtin("astype", "dtype", (Param("x"), Param("dtype", DTYPE)), _astype_typing,
                 _astype_ref, doc="explicit value conversion to `dtype`", fold=_astype_fold))


# ---------------------------------------------------------------------------------------------
# Bit patterns (bitcast)

def _f8_decode_table(exp_bits: int, mant_bits: int, fn: bool, width: int = 8,
                     nan: bool = True) -> np.ndarray:
    """The value of every code of a small float with a sign bit at `width - 1`. `fn`: no
    infinity, the all-ones code is NaN (when `nan`; the MX formats have no NaN at all)."""
    bias = (1 << (exp_bits - 1)) - 1
    top = 1 << (width - 1)
    vals = np.empty(1 << width, dtype=np.float32)
    for code in range(1 << width):
        sign = -1.0 if code & top else 1.0
        e = (code >> mant_bits) & ((1 << exp_bits) - 1)
        m = code & ((1 << mant_bits) - 1)
        if fn and nan and e == (1 << exp_bits) - 1 and m == (1 << mant_bits) - 1:
            vals[code] = np.nan
        elif not fn and e == (1 << exp_bits) - 1:
            vals[code] = sign * np.inf if m == 0 else np.nan
        elif e == 0:
            vals[code] = sign * m * 2.0 ** (1 - bias - mant_bits)
        else:
            vals[code] = sign * (1 + m / (1 << mant_bits)) * 2.0 ** (e - bias)
    return vals


def _ue8m0_table() -> np.ndarray:
    return np.array([2.0 ** (c - 127) for c in range(255)] + [np.nan], dtype=np.float32)


class _F8Tables(Mapping):
    """dtype name → the decoded value of each code (the f8, f6 and f4 formats, whose sign is
    the top bit); each table is built on first use (needs NumPy)."""

    _FORMATS = {F8E4M3.name: (4, 3, True), F8E5M2.name: (5, 2, False),
                "f6e2m3": (2, 3, True, 6, False), "f6e3m2": (3, 2, True, 6, False),
                "f4e2m1": (2, 1, True, 4, False)}

    def __init__(self):
        self._built: dict = {}

    def __getitem__(self, name: str):
        if name not in self._built:
            self._built[name] = _f8_decode_table(*self._FORMATS[name])
        return self._built[name]

    def __contains__(self, name: object) -> bool:
        return name in self._FORMATS

    def __iter__(self):
        return iter(self._FORMATS)

    def __len__(self) -> int:
        return len(self._FORMATS)


F8_DECODE = _F8Tables()


def to_bits(x, dtype: DType) -> np.ndarray:
    """The bit patterns (as unsigned integers of dtype's width) of values of `dtype`."""
    raw = np.asarray(x)
    v = round_to_dtype(raw, dtype)
    if dtype.name in ("f8e4m3", "f8e5m2"):  # an infinity read from memory stays one (no satfinite)
        v = np.where(np.isinf(raw), raw, v).astype(np.float32)
    if dtype is BF16:
        return (v.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    if dtype is TF32:
        return v.astype(np.float32).view(np.uint32)
    if dtype.name in F8_DECODE:
        half = len(F8_DECODE[dtype.name]) // 2
        table = F8_DECODE[dtype.name][:half]
        finite = np.where(np.isnan(table), np.inf, table)  # NaN codes sort after inf
        a = np.abs(v.astype(np.float32))
        code = np.searchsorted(finite, a).astype(np.uint8)  # values are representable
        code = np.where(np.isnan(a), half - 1, code).astype(np.uint8)
        return (code | np.where(np.signbit(v), half, 0).astype(np.uint8)).astype(np.uint8)
    if dtype.name == "ue8m0":
        with np.errstate(divide="ignore", invalid="ignore"):
            code = np.log2(v.astype(np.float64)) + 127
        return np.where(np.isnan(code), 255, code).astype(np.uint8)
    return v.view(np.dtype(f"u{dtype.itemsize}"))


def from_bits(bits, dtype: DType) -> np.ndarray:
    b = np.asarray(bits)
    if dtype is BF16:
        return (b.astype(np.uint32) << 16).view(np.float32)
    if dtype is TF32:
        return round_to_dtype(b.astype(np.uint32).view(np.float32), TF32)
    if dtype.name in F8_DECODE:
        table = F8_DECODE[dtype.name]
        return table[b.astype(np.intp) & (len(table) - 1)]
    if dtype.name == "ue8m0":
        return _ue8m0_table()[b.astype(np.uint8)]
    return b.astype(np.dtype(f"u{dtype.itemsize}")).view(dtype.storage_np_dtype)


def _bitcast_typing(bound: BoundArgs, span) -> Type:
    t = tile_of(bound, "x", span)
    if isinstance(t, ConstValue):
        raise fail("E0506", bound, "x", f"must have a dtype, found {found(arg(bound, 'x'))}",
                   span, help="give the constant a dtype first, e.g. `u32(1)`")
    dt = dtype_arg(bound, "dtype")
    if t.dtype.is_bool or dt.is_bool:
        raise fail("E0508", bound, None, "cannot reinterpret bools", span,
                   help="use `astype` to convert to or from bool")
    if t.dtype.bits != dt.bits:
        raise fail("E0508", bound, "dtype", f"{dt} has {dt.bits} bits but `x` is {t} with "
                                            f"{t.dtype.bits}-bit elements", span,
                   help="bitcast keeps the bits, so both dtypes must have the same width")
    return TileType(dt, t.shape)


def _bitcast_ref(x, dtype: DType, src: DType | None = None):
    v = np.asarray(x)
    src = src or _src_guess(v)
    return from_bits(to_bits(v, src), dtype)


def _src_guess(v: np.ndarray) -> DType:
    from tilelang.sema.types import dtype_from_numpy
    return dtype_from_numpy(v.dtype)


def _bitcast_hints(bound: BoundArgs, span) -> dict:
    t = tile_of(bound, "x", span)
    return {"src": t.dtype}


register(Builtin("bitcast", "dtype", (Param("x"), Param("dtype", DTYPE)), _bitcast_typing,
                 _bitcast_ref, doc="reinterpret the bits as `dtype` (same width)",
                 ref_hints=_bitcast_hints))


# ---------------------------------------------------------------------------------------------
# Packed FP4: unpack_f4(x, axis)

def unpacked_f4(x, axis: int = -1) -> np.ndarray:
    """The f4e2m1 values (float32) of packed bytes, twice as many along `axis`: byte j gives
    elements 2j (bits 0-3) and 2j + 1 (bits 4-7)."""
    p = np.asarray(x).astype(np.uint8)
    ax = axis % p.ndim
    pairs = np.stack([p & 0xF, p >> 4], axis=ax + 1)
    shape = p.shape[:ax] + (2 * p.shape[ax],) + p.shape[ax + 1:]
    return F8_DECODE["f4e2m1"][pairs.reshape(shape).astype(np.intp)]


def _unpack_axis(bound: BoundArgs, t: TileType, span) -> int:
    c = arg(bound, "axis").const
    ax = c.value if isinstance(c, ConstValue) else None
    if not isinstance(ax, int) or isinstance(ax, bool) or not -t.rank <= ax < t.rank:
        raise fail("E0507", bound, "axis", f"must be a constant axis of {t} (from {-t.rank} "
                                           f"to {t.rank - 1})", span)
    return ax % t.rank


def _unpack_f4_typing(bound: BoundArgs, span) -> Type:
    t = tile_of(bound, "x", span)
    if not isinstance(t, TileType) or t.dtype.name != PACKED_F4 or not t.shape:
        raise fail("E0508", bound, "x", f"must be a packed FP4 tile (f4e2m1x2), found "
                                        f"{found(arg(bound, 'x'))}", span,
                   help="bitcast bytes first: `bitcast(x, f4e2m1x2)`")
    ax = _unpack_axis(bound, t, span)
    d = t.shape[ax]
    shape = t.shape[:ax] + ((2 * d) if isinstance(d, int) else d,) + t.shape[ax + 1:]
    return TileType(F4E2M1, shape)


def _unpack_f4_ref(x, axis: int = -1):
    return unpacked_f4(x, axis)


register(Builtin("unpack_f4", "dtype", (Param("x"), Param("axis", CONST, loose(-1))),
                 _unpack_f4_typing, _unpack_f4_ref,
                 doc="the f4e2m1 elements of packed FP4 bytes (f4e2m1x2), `axis` doubled: "
                     "byte j gives elements 2j (bits 0-3) and 2j + 1"))


# ---------------------------------------------------------------------------------------------
# Strict constructors: `i16(5)` is a strictly typed i16 constant (docs/language.md §4.3).

def _constructor(dt: DType) -> Builtin:
    def typing(bound: BoundArgs, span) -> Type:
        a = arg(bound, "x")
        if not isinstance(a.const, ConstValue):
            raise fail("E0505", bound, "x", f"must be a constant, found {found(a)}", span,
                       help=f"`{dt}(...)` makes strict constants; convert run-time values "
                            f"with `astype(x, {dt})`")
        construct(dt, a.const, a.span or span)
        return scalar(dt)

    def fold(bound: BoundArgs, span) -> ConstValue:
        a = arg(bound, "x")
        return construct(dt, a.const, a.span or span)

    def ref(x):
        return convert_values(x, dt)

    return Builtin(dt.name, "dtype", (Param("x"),), typing, ref,
                   doc=f"the strictly typed {dt} constant with this value", scalar_only=True,
                   fold=fold, extra={"dtype": dt})


for _dt in ALL_DTYPES:
    register(_constructor(_dt))



# ---------------------------------------------------------------------------------------------
# Questions about a dtype, answered at compile time (`if is_floating(T) { ... }`).

def _query(name: str, answer, result: Type, doc: str) -> Builtin:
    def typing(bound: BoundArgs, span) -> Type:
        dtype_arg(bound, "dtype")
        return result

    def fold(bound: BoundArgs, span) -> ConstValue:
        v = answer(dtype_arg(bound, "dtype"))
        return ConstValue(v, BOOL) if isinstance(v, bool) else ConstValue(v, None)

    def ref(dtype: DType):
        return answer(dtype)

    return Builtin(name, "dtype", (Param("dtype", DTYPE),), typing, ref, doc=doc, fold=fold)


register(_query("is_floating", lambda d: d.is_float, scalar(BOOL),
                "whether `dtype` is a float (f16, bf16, f32, f64 and the restricted floats)"))
register(_query("is_integer", lambda d: d.is_int and not d.restricted, scalar(BOOL),
                "whether `dtype` is a signed or unsigned integer (not bool, not f4e2m1x2)"))
register(_query("bits", lambda d: d.bits, LOOSE_INT,
                "the width of `dtype` in bits (bool: 1, tf32: 32)"))
