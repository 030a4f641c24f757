"""The Tile type system: dtypes, tile/array/tuple types, symbolic dimensions.

Decisions (also in docs/language.md §3 once the reference is written):
- A scalar IS a 0-d tile: `scalar(f32) == TileType(F32, ())`, printed `f32`. There is no separate
  scalar class, so "scalar or tile" never needs two code paths and a reduction over all axes
  simply returns a 0-d tile.
- A loose constant (an integer or float literal not yet given a width) has type
  `LooseType("int" | "float")`; it becomes a dtype only when combined with, or materialized as,
  a strict type (see constants.py and promotion.py).
- Shapes may hold `Sym` dimensions: a `const` parameter not yet specialized. Power-of-two checks
  skip them; they are re-checked once the shape is specialized (`specialize_shape`).
- bf16, tf32, the f8, f6 and f4 formats and ue8m0 have no NumPy dtype here (no ml_dtypes):
  their reference values are float32 arrays whose values are exactly representable in the
  narrow format, produced by the `round_to_*` helpers below.
- The block-scaled formats (OCP MX, NVFP4: docs/language.md "Block-scaled formats") are
  restricted floats too: f4e2m1, f6e2m3 and f6e3m2 have no infinity and no NaN (converting
  saturates, and NaN becomes the largest positive value, as the emulator's `cvt` does);
  ue8m0 is an unsigned power of two 2^(c - 127), c = 0..254, code 255 NaN.
- `f4e2m1x2` is packed FP4 (docs/language.md "Packed FP4"): one byte holding two f4e2m1 codes,
  the even element in bits 0-3 and the odd one in bits 4-7 (PTX's `.e2m1x2`, torch's
  `float4_e2m1fn_x2`). It is not a number: its reference value is the byte (uint8), nothing
  converts it but `unpack_f4` and `bitcast` (to and from u8/i8), and `mma_scaled` multiplies
  it as the two values it holds.
"""

from __future__ import annotations

import math
from typing import Union

from tilelang.lazy import lazy_module

from tilelang.diagnostics import Span, TileSemanticError, register_codes
from tilelang.record import record

np = lazy_module("numpy")

register_codes({
    "E0301": "a tile dimension is not a power of two",
    "E0309": "unknown dtype name",
    "E0310": "a tile shape is malformed (negative, non-integer or unknown dimension)",
    "E0312": "a tile has more elements than the compiler allows",
})

# Elements in one tile, whatever the back end. Code generation holds every element in a
# register of some thread, so at most 1024 threads x 128 elements per thread (codegen's
# per-thread limit, E0783) can ever run; this static bound is the same one Triton uses
# (2^20) and keeps the reference interpreter's arrays small.
MAX_TILE_ELEMENTS = 1 << 20


# ---------------------------------------------------------------------------------------------
# Dtypes

BOOL_CAT, INT_CAT, FLOAT_CAT = "bool", "int", "float"
# A type variable (`const T: dtype` with no value yet, docs/language.md "Generic kernels"):
# it names a dtype fixed at specialization. Only a kernel's signature ever holds one; its
# body is checked once the variable has a value.
VAR_CAT = "var"
_CATEGORY_RANK = {BOOL_CAT: 0, INT_CAT: 1, FLOAT_CAT: 2}


@record(frozen=True)
class DType:
    """A scalar element type. `restricted` floats never take part in implicit promotion."""

    name: str
    category: str          # "bool" | "int" | "float"
    bits: int
    signed: bool = True
    restricted: bool = False
    mantissa_bits: int = 0  # explicit fraction bits (floats only)
    exponent_bits: int = 0  # (floats only)
    max_finite: float = 0.0  # largest finite value (floats only)
    has_inf: bool = True     # f8e4m3 has none: it saturates / uses NaN

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return self.name

    @property
    def is_bool(self) -> bool:
        return self.category == BOOL_CAT

    @property
    def is_int(self) -> bool:
        return self.category == INT_CAT

    @property
    def is_float(self) -> bool:
        return self.category == FLOAT_CAT

    @property
    def is_var(self) -> bool:
        return self.category == VAR_CAT

    @property
    def category_rank(self) -> int:
        return _CATEGORY_RANK[self.category]

    @property
    def min(self) -> int | float:
        """Smallest value (most negative finite value for floats)."""
        if self.is_bool:
            return 0
        if self.is_int:
            return -(1 << (self.bits - 1)) if self.signed else 0
        return -self.max_finite if self.signed else 2.0 ** -127   # ue8m0: its code 0

    @property
    def max(self) -> int | float:
        if self.is_bool:
            return 1
        if self.is_int:
            return (1 << (self.bits - 1)) - 1 if self.signed else (1 << self.bits) - 1
        return self.max_finite

    @property
    def np_dtype(self) -> np.dtype | None:
        """The exact NumPy dtype, or None where NumPy has none (bf16, tf32, f8*)."""
        return _np_exact().get(self.name)

    @property
    def storage_np_dtype(self) -> np.dtype:
        """The NumPy dtype reference values are held in (float32 for the emulated formats)."""
        exact = self.np_dtype
        return exact if exact is not None else np.dtype(np.float32)

    @property
    def itemsize(self) -> int:
        """Bytes in device memory (bool takes one byte; tf32 is stored as 32 bits)."""
        return max(self.bits, 8) // 8


def _float(name: str, bits: int, exp: int, mant: int, *, restricted: bool = False,
           has_inf: bool = True, max_finite: float | None = None) -> DType:
    if max_finite is None:  # IEEE-style: all-ones exponent reserved for inf/nan
        bias = (1 << (exp - 1)) - 1
        max_finite = (2.0 - 2.0 ** -mant) * 2.0 ** bias
    return DType(name, FLOAT_CAT, bits, True, restricted, mant, exp, max_finite, has_inf)


BOOL = DType("bool", BOOL_CAT, 1, signed=False)
I8 = DType("i8", INT_CAT, 8)
I16 = DType("i16", INT_CAT, 16)
I32 = DType("i32", INT_CAT, 32)
I64 = DType("i64", INT_CAT, 64)
U8 = DType("u8", INT_CAT, 8, signed=False)
U16 = DType("u16", INT_CAT, 16, signed=False)
U32 = DType("u32", INT_CAT, 32, signed=False)
U64 = DType("u64", INT_CAT, 64, signed=False)
F16 = _float("f16", 16, 5, 10)
BF16 = _float("bf16", 16, 8, 7)
F32 = _float("f32", 32, 8, 23)
F64 = _float("f64", 64, 11, 52)
# tf32 occupies 32 bits in registers and memory but carries only 10 fraction bits.
TF32 = _float("tf32", 32, 8, 10, restricted=True)
# OCP/NVIDIA "fn" e4m3: no infinities, the all-ones exponent still encodes normal numbers.
F8E4M3 = _float("f8e4m3", 8, 4, 3, restricted=True, has_inf=False, max_finite=448.0)
F8E5M2 = _float("f8e5m2", 8, 5, 2, restricted=True)
# The OCP MX element formats: no infinity, no NaN, the all-ones exponent encodes normal numbers.
F4E2M1 = _float("f4e2m1", 4, 2, 1, restricted=True, has_inf=False, max_finite=6.0)
F6E2M3 = _float("f6e2m3", 6, 2, 3, restricted=True, has_inf=False, max_finite=7.5)
F6E3M2 = _float("f6e3m2", 6, 3, 2, restricted=True, has_inf=False, max_finite=28.0)
# The MX scale: an unsigned power of two (8 exponent bits, no sign, no fraction).
UE8M0 = DType("ue8m0", FLOAT_CAT, 8, False, True, 0, 8, 2.0 ** 127, False)
MX_ELEMENTS = (F4E2M1, F6E2M3, F6E3M2)
# Packed FP4: two f4e2m1 codes a byte (a restricted byte, held as uint8 by the reference).
F4E2M1X2 = DType("f4e2m1x2", INT_CAT, 8, signed=False, restricted=True)

ALL_DTYPES: tuple[DType, ...] = (BOOL, I8, I16, I32, I64, U8, U16, U32, U64,
                                 F16, BF16, F32, F64, TF32, F8E4M3, F8E5M2,
                                 F4E2M1, F6E2M3, F6E3M2, UE8M0, F4E2M1X2)
DTYPES: dict[str, DType] = {d.name: d for d in ALL_DTYPES}
DEFAULT_INT = I32    # a loose int that must take a width on its own
DEFAULT_FLOAT = F32  # a loose float that must take a width on its own (like Triton/cuTile)

_NP_NAMES = {"bool": "bool_", "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64",
             "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64",
             "f16": "float16", "f32": "float32", "f64": "float64",
             "f4e2m1x2": "uint8"}   # after u8: a NumPy uint8 array is u8
_NP_EXACT_CACHE: dict = {}


def _np_exact() -> dict:
    """Tile dtype name → NumPy dtype, built on first use (NumPy is imported lazily)."""
    if not _NP_EXACT_CACHE:
        _NP_EXACT_CACHE.update({k: np.dtype(getattr(np, v)) for k, v in _NP_NAMES.items()})
    return _NP_EXACT_CACHE


def dtype_var(name: str) -> DType:
    """The type variable `name`: a dtype known only once the kernel is specialized."""
    return DType(name, VAR_CAT, 0)


def dtype_from_name(name: str, span: Span | None = None) -> DType:
    try:
        return DTYPES[name]
    except KeyError:
        raise TileSemanticError.at(
            "E0309", f"unknown dtype `{name}`", span,
            help="dtypes are: " + ", ".join(DTYPES)) from None


def dtype_from_numpy(dt: np.dtype) -> DType:
    """The Tile dtype of a NumPy dtype (float32 maps to f32, never to an emulated format)."""
    dt = np.dtype(dt)
    for name, exact in _np_exact().items():
        if exact == dt:
            return DTYPES[name]
    raise ValueError(f"NumPy dtype {dt} has no Tile dtype")


# ---------------------------------------------------------------------------------------------
# Reference rounding for the formats NumPy lacks (round-to-nearest-even).

def _quantize(x: np.ndarray, mant: int, min_exp: int, max_finite: float,
              saturate: bool) -> np.ndarray:
    """Round to a binary float with `mant` fraction bits and smallest normal exponent
    `min_exp` (subnormals below it). Out of range: ±inf, or ±max_finite when `saturate`."""
    x64 = np.asarray(x, dtype=np.float64)
    out = x64.copy()
    finite = np.isfinite(x64) & (x64 != 0)
    v = x64[finite]
    _, e = np.frexp(v)                                # v = m * 2**e, 0.5 <= |m| < 1
    step = np.ldexp(1.0, np.maximum(e - 1, min_exp) - mant)
    r = np.round(v / step) * step                    # np.round is round-half-to-even
    too_big = np.abs(r) > max_finite
    r[too_big] = np.copysign(max_finite if saturate else np.inf, r[too_big])
    out[finite] = r
    if saturate:
        inf = np.isinf(x64)
        out[inf] = np.copysign(max_finite, x64[inf])
    return out.astype(np.float32)


# Fraction bits, smallest normal exponent and saturation of the formats NumPy lacks.
_QUANTIZED = {"bf16": (7, -126, False), "tf32": (10, -126, False),
              "f8e4m3": (3, -6, True), "f8e5m2": (2, -14, True),
              "f4e2m1": (1, 0, True), "f6e2m3": (3, 0, True), "f6e3m2": (2, -2, True)}
_MX_NAMES = ("f4e2m1", "f6e2m3", "f6e3m2")


def _quantize_scalar(x: float, mant: int, min_exp: int, max_finite: float,
                     saturate: bool) -> float:
    """`_quantize` of one double, in plain Python (checking a file need not import NumPy)."""
    if math.isnan(x) or x == 0:
        return x
    if math.isinf(x):
        return math.copysign(max_finite, x) if saturate else x
    _, e = math.frexp(x)
    step = math.ldexp(1.0, max(e - 1, min_exp) - mant)
    r = math.copysign(float(round(x / step)) * step, x)   # round() is round-half-to-even
    if abs(r) > max_finite:
        r = math.copysign(max_finite if saturate else math.inf, r)
    return r


def round_scalar(x: float, dtype: DType) -> float:
    """One double rounded like `round_to_dtype` for bf16, tf32, the f8/f6/f4 formats and ue8m0."""
    if dtype.name == "ue8m0":
        return _ue8m0_scalar(x)
    if dtype.name in _MX_NAMES and math.isnan(x):
        return dtype.max_finite
    mant, min_exp, saturate = _QUANTIZED[dtype.name]
    return _quantize_scalar(x, mant, min_exp, dtype.max_finite, saturate)


def _ue8m0_scalar(x: float) -> float:
    """|x| rounded up to a power of two in [2^-127, 2^127] (`cvt.rp.satfinite.ue8m0x2.f32`);
    NaN stays NaN."""
    if math.isnan(x):
        return x
    a = abs(x)
    if a == 0 or a <= 2.0 ** -127:
        return 2.0 ** -127
    if math.isinf(a) or a >= 2.0 ** 127:
        return 2.0 ** 127
    m, e = math.frexp(a)                              # a = m * 2^e, 0.5 <= m < 1
    return math.ldexp(1.0, e - 1 if m == 0.5 else e)


def round_to_ue8m0(x: np.ndarray) -> np.ndarray:
    """ue8m0 values (as float32): |x| rounded up to a power of two, clamped to
    [2^-127, 2^127] (PTX `cvt.rp.satfinite.ue8m0x2.f32`); NaN stays NaN (code 255)."""
    a = np.abs(np.asarray(x, np.float64))
    with np.errstate(divide="ignore", invalid="ignore"):
        m, e = np.frexp(np.where(np.isfinite(a), a, 1.0))
    log2 = np.where(m == 0.5, e - 1, e).astype(np.int64)
    log2 = np.where(a == 0, -127, np.where(np.isinf(a), 127, log2))
    out = np.ldexp(1.0, np.clip(log2, -127, 127))
    return np.where(np.isnan(a), np.nan, out).astype(np.float32)


def round_to_bf16(x: np.ndarray) -> np.ndarray:
    """bf16 values (as float32) nearest to `x`; overflow gives ±inf like a hardware cvt.rn."""
    return _quantize(x, *_QUANTIZED["bf16"][:2], BF16.max_finite, saturate=False)


def round_to_tf32(x: np.ndarray) -> np.ndarray:
    """tf32 values (as float32): f32 range, 10 fraction bits."""
    return _quantize(x, *_QUANTIZED["tf32"][:2], TF32.max_finite, saturate=False)


def round_to_f8e4m3(x: np.ndarray) -> np.ndarray:
    """f8e4m3 values (as float32). Like PTX `cvt.rn.satfinite`, finite overflow and ±inf
    saturate to ±448 (the format has no infinity); NaN stays NaN."""
    return _quantize(x, *_QUANTIZED["f8e4m3"][:2], F8E4M3.max_finite, saturate=True)


def round_to_f8e5m2(x: np.ndarray) -> np.ndarray:
    """f8e5m2 values (as float32). Like PTX `cvt.rn.satfinite`, overflow and ±inf saturate
    to ±57344; NaN stays NaN."""
    return _quantize(x, *_QUANTIZED["f8e5m2"][:2], F8E5M2.max_finite, saturate=True)


def round_to_dtype(x, dtype: DType) -> np.ndarray:
    """`x` converted to `dtype`'s reference representation (`storage_np_dtype`).
    Float → int conversion truncates toward zero (astype semantics); callers check ranges."""
    arr = np.asarray(x)
    if dtype is BF16:
        return round_to_bf16(arr)
    if dtype is TF32:
        return round_to_tf32(arr)
    if dtype is F8E4M3:
        return round_to_f8e4m3(arr)
    if dtype is F8E5M2:
        return round_to_f8e5m2(arr)
    if dtype.name in _MX_NAMES:        # no NaN: it converts to the largest positive value
        q = _quantize(arr, *_QUANTIZED[dtype.name][:2], dtype.max_finite, saturate=True)
        return np.where(np.isnan(q), np.float32(dtype.max_finite), q).astype(np.float32)
    if dtype is UE8M0:
        return round_to_ue8m0(arr)
    with np.errstate(all="ignore"):
        return arr.astype(dtype.storage_np_dtype)


# ---------------------------------------------------------------------------------------------
# Types

@record(frozen=True)
class Sym:
    """A symbolic dimension: a `const` parameter whose value is fixed only at specialization."""

    name: str

    def __str__(self) -> str:
        return self.name


Dim = Union[int, Sym]


def _is_pow2(n: int) -> bool:
    return n > 0 and (n & (n - 1)) == 0


def next_pow2(n: int) -> int:
    return 1 if n <= 1 else 1 << (n - 1).bit_length()


def format_shape(shape: tuple[Dim, ...]) -> str:
    """A shape as the source writes a tuple: `(128, 64)`, `(32,)`, `()`."""
    if len(shape) == 1:
        return f"({shape[0]},)"
    return "(" + ", ".join(str(d) for d in shape) + ")"


@record(frozen=True)
class TileType:
    """`Tile[dtype, d0, d1, ...]`; shape () is a scalar. Construct checked tiles with
    `tile_type`, which reports non-power-of-two dimensions."""

    dtype: DType
    shape: tuple[Dim, ...] = ()

    def __str__(self) -> str:
        if not self.shape:
            return str(self.dtype)
        return f"Tile[{self.dtype}, " + ", ".join(str(d) for d in self.shape) + "]"

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def is_scalar(self) -> bool:
        return not self.shape

    @property
    def is_symbolic(self) -> bool:
        return any(isinstance(d, Sym) for d in self.shape)

    @property
    def size(self) -> int:
        """Number of elements (only for concrete shapes)."""
        n = 1
        for d in self.shape:
            if isinstance(d, Sym):
                raise ValueError(f"size of symbolic shape {format_shape(self.shape)}")
            n *= d
        return n

    def with_dtype(self, dtype: DType) -> "TileType":
        return TileType(dtype, self.shape)

    def with_shape(self, shape: tuple[Dim, ...]) -> "TileType":
        return TileType(self.dtype, tuple(shape))


def scalar(dtype: DType) -> TileType:
    """The scalar type of `dtype` (a 0-d tile)."""
    return TileType(dtype, ())


# Scalars are 0-d tiles; the name exists so call sites can say what they mean.
ScalarType = scalar


def check_shape(dtype: DType, shape: tuple, span: Span | None) -> tuple[Dim, ...]:
    """Validate a tile shape: every concrete dimension a power of two."""
    shape = tuple(shape)
    for i, d in enumerate(shape):
        if isinstance(d, Sym):
            continue
        if isinstance(d, bool) or not isinstance(d, int):
            raise TileSemanticError.at(
                "E0310", f"dimension {i} of a tile shape must be a constant integer, "
                         f"found `{d}`", span)
        if not _is_pow2(d):
            written = TileType(dtype, shape)
            hint = next_pow2(d)
            raise TileSemanticError.at(
                "E0301",
                f"dimension {i} of {written} is {d}, which is not a power of two", span,
                help=f"use {hint} and pad: load with `padding=` fills the extra elements and "
                     f"store drops the out-of-bounds part")
    check_tile_size(TileType(dtype, shape), span)
    return shape


def check_tile_size(t: "TileType", span: Span | None) -> None:
    """E0312 when the known dimensions of `t` already hold more than MAX_TILE_ELEMENTS."""
    n = 1
    for d in t.shape:
        if isinstance(d, int) and not isinstance(d, bool) and d > 0:
            n *= d
    if n > MAX_TILE_ELEMENTS:
        raise TileSemanticError.at(
            "E0312", f"{t} has {n if n < 10 ** 30 else 'more than 10^30'} elements; a tile "
                     f"holds at most {MAX_TILE_ELEMENTS} (2^20)",
            span, help="split the work into smaller tiles: more blocks in the grid, or a "
                       "loop over parts of the data")


def tile_type(dtype: DType, shape: tuple, span: Span | None = None) -> TileType:
    """A checked tile type (see `check_shape`)."""
    return TileType(dtype, check_shape(dtype, shape, span))


def specialize_shape(dtype: DType, shape: tuple[Dim, ...], values: dict[str, int],
                     span: Span | None) -> tuple[int, ...]:
    """Replace `Sym` dimensions by their values, then re-check the shape."""
    out = []
    for d in shape:
        if isinstance(d, Sym):
            if d.name not in values:
                raise TileSemanticError.at(
                    "E0310", f"the value of `{d.name}` is not known at this point", span)
            out.append(values[d.name])
        else:
            out.append(d)
    return check_shape(dtype, tuple(out), span)  # type: ignore[return-value]


@record(frozen=True)
class LooseType:
    """The type of a loose constant: an integer literal (unbounded) or float literal (double)."""

    kind: str  # "int" | "float"

    def __str__(self) -> str:
        return f"{self.kind} literal"


LOOSE_INT = LooseType("int")
LOOSE_FLOAT = LooseType("float")


@record(frozen=True)
class ArrayType:
    """`Array[dtype, rank]`: a strided view of global memory (kernel parameters only)."""

    dtype: DType
    rank: int

    def __str__(self) -> str:
        return f"Array[{self.dtype}, {self.rank}]"


@record(frozen=True)
class OptionalArrayType:
    """`Optional[Array[dtype, rank]]` as declared: a kernel parameter that may receive `None`
    (docs/language.md, "Optional arrays"). Each specialization knows whether it was given one:
    the parameter is then bound as `array` or as `AbsentArrayType(array)`."""

    array: ArrayType

    def __str__(self) -> str:
        return f"Optional[{self.array}]"


@record(frozen=True)
class AbsentArrayType:
    """An optional array parameter given `None` in this specialization: `is_none` may test it,
    nothing may read it (E0246)."""

    array: ArrayType

    def __str__(self) -> str:
        return f"None (an absent Optional[{self.array}])"


@record(frozen=True)
class ArrayListType:
    """`List[Array[dtype, rank]]`: a kernel parameter holding a run-time number of arrays of one
    dtype and rank, passed as a device table (docs/abi.md, "Lists of arrays"); `ws[e]` is one
    of them and `len(ws)` their number."""

    array: ArrayType

    def __str__(self) -> str:
        return f"List[{self.array}]"


@record(frozen=True)
class SymmetricArrayType(ArrayListType):
    """`Symmetric[Array[dtype, rank]]`: one allocation on every rank of a world, passed as the
    table of every rank's buffer plus the launching rank (docs/distributed.md); a list whose
    entry r is rank r's buffer (`peer(x, r)`)."""

    def __str__(self) -> str:
        return f"Symmetric[{self.array}]"


@record(frozen=True)
class TupleType:
    elements: tuple["Type", ...]

    def __str__(self) -> str:
        if len(self.elements) == 1:
            return f"({self.elements[0]},)"
        return "(" + ", ".join(str(e) for e in self.elements) + ")"


@record(frozen=True)
class DTypeType:
    """The type of a dtype used as a value (`f16` in `astype(x, f16)`); it knows which one.
    `dtype` None is the annotation `dtype` itself (`const T: dtype`): any dtype."""

    dtype: DType | None

    def __str__(self) -> str:
        return "dtype" if self.dtype is None else f"dtype {self.dtype}"


@record(frozen=True)
class StringType:
    def __str__(self) -> str:
        return "str"


@record(frozen=True)
class VoidType:
    """The result of operations called for their effect (`store`, `print`, ...)."""

    def __str__(self) -> str:
        return "()"


STRING = StringType()
VOID = VoidType()
ANY_DTYPE = DTypeType(None)   # the type written `dtype`: a `const T: dtype` parameter's

Type = Union[TileType, LooseType, ArrayType, OptionalArrayType, AbsentArrayType,
             ArrayListType, TupleType, DTypeType, StringType, VoidType]
