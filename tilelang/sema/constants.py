"""Constant-expression values and their arithmetic (docs/language.md §4, "Constants").

A `ConstValue` is loose (`dtype is None`) or strict:
- a loose integer has unbounded precision (a Python int), a loose float is an IEEE double;
- `true`/`false` and comparison results are strict `bool` (a bool has no width to choose);
- strict ⊕ loose → strict: the loose value is materialized as the strict dtype, and a value
  that does not fit is an error naming value and type ("integer constant -170 does not fit in
  i8"). A loose int against a bool becomes i32, a loose float against an int or bool becomes
  f32 (promotion.promote_loose);
- strict ⊕ strict → `promotion.promote`.

Decisions:
- Strict integer arithmetic that leaves the dtype's range is a compile error (E0402), never a
  silent wrap: a folded constant that differs from what the programmer wrote is a bug magnet.
  (Run-time integer arithmetic on tiles wraps, as the hardware does.)
- `/` is true division: loose int / loose int is a loose float; strict int / strict int is f32
  (the default float, as in Triton). floor division (the built-in `floordiv`; `//` starts a
  comment in source) floors and `%` takes the divisor's sign, exactly like Python, so
  `a == floordiv(a, b) * b + a % b` always holds. Integer division or remainder by zero is
  an error (E0403); float division follows IEEE (inf, nan).
- `**` with a negative integer exponent on integers is an error (E0404); write a float base.
  Shift counts must be non-negative and, for strict dtypes, smaller than the bit width.
- Bitwise operators and shifts take integers (and bools for `& | ^ ~`); `and`/`or`/`not` take
  bools only (no truthiness of integers): compare with 0 instead.
- Arithmetic on bool operands is an error (E0305): `astype(i32)` first.
- Materializing checks the range only: a finite value beyond a float dtype's largest finite
  value is an error, while rounding (16777217 as f32) is silent; inf and nan are allowed except
  inf into f8e4m3, which has no infinity.
- Strict constructors (`i16(5)`, `f32(0.5)`) convert exactly or fail: `i8(300)` is an error,
  `i32(2.5)` is an error asking for `astype` (which truncates toward zero) or floor/ceil first;
  `i32(2.0)` is 2. `bool(x)` takes a bool, 0 or 1.
- Strict float arithmetic is done in double and rounded once to the dtype (exact for + - * /
  on f32 and narrower because double has more than twice their precision).
- Loose integers are unbounded, but a result wider than 65,536 bits is refused (E0406) so that
  `2 ** 10 ** 9` cannot hang the compiler.
"""

from __future__ import annotations

import math
import struct
from typing import Union

from tilelang.lazy import lazy_module

from tilelang.diagnostics import Span, TileSemanticError, register_codes
from tilelang.record import record
from tilelang.sema.promotion import promote, promote_loose
from tilelang.sema.types import (BOOL, DEFAULT_FLOAT, DType, LOOSE_FLOAT, LOOSE_INT,
                                 LooseType, Sym, TileType, round_scalar, round_to_dtype, scalar)

np = lazy_module("numpy")

register_codes({
    "E0305": "arithmetic on bool operands",
    "E0307": "a value does not have the type required where it is used",
    "E0401": "a constant does not fit in the dtype it is used as",
    "E0402": "strict integer constant arithmetic overflows its dtype",
    "E0403": "integer division or remainder by zero in a constant expression",
    "E0404": "invalid exponent or shift count in a constant expression",
    "E0405": "a strict dtype constructor would lose information",
    "E0406": "a loose integer constant is unreasonably large",
    "E0407": "an operator is not defined for these constant operands",
    "E0408": "a constant's value is not known until specialization",
})

# Loose integers are exact, but bounded: 4096 bits (1,234 decimal digits) is far past every
# dtype and keeps every number printable (Python refuses str() of ints over 4,300 digits).
MAX_LOOSE_BITS = 4096

Number = Union[int, float, bool]


@record(frozen=True, eq=False)
class ConstValue:
    """A compile-time scalar. `dtype is None` means loose. `value` is a Python int, float or
    bool already representable in `dtype` (floats rounded to it), or a `Sym` for a const
    parameter that is not yet specialized."""

    value: Union[int, float, bool, Sym]
    dtype: DType | None = None

    def __post_init__(self):
        v = self.value
        if self.dtype is None and isinstance(v, bool):
            object.__setattr__(self, "dtype", BOOL)  # bools are always strict

    # int 1, float 1.0 and True compare equal in Python; constants of different kinds must not.
    def _key(self):
        v = self.value
        return (type(v), v if not (isinstance(v, float) and math.isnan(v)) else "nan",
                self.dtype)

    def __eq__(self, other) -> bool:
        return isinstance(other, ConstValue) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    @property
    def is_loose(self) -> bool:
        return self.dtype is None

    @property
    def is_symbolic(self) -> bool:
        return isinstance(self.value, Sym)

    @property
    def loose_kind(self) -> str:
        """"int" or "float" for a loose constant (also meaningful as the value's kind)."""
        if isinstance(self.value, bool):
            return "bool"
        return "float" if isinstance(self.value, float) else "int"

    @property
    def type(self) -> TileType | LooseType:
        if self.dtype is None:
            return LOOSE_FLOAT if isinstance(self.value, float) else LOOSE_INT
        return scalar(self.dtype)

    def __str__(self) -> str:
        text = _fmt(self.value)
        return text if self.dtype is None or self.dtype is BOOL else f"{self.dtype}({text})"

    def __repr__(self) -> str:
        return f"ConstValue({self.value!r}, {self.dtype})"


@record(frozen=True)
class ConstTuple:
    """A tuple of constants (`shape = (128, 64)`)."""

    items: tuple["Const", ...]

    def __str__(self) -> str:
        if len(self.items) == 1:
            return f"({self.items[0]},)"
        return "(" + ", ".join(str(i) for i in self.items) + ")"


@record(frozen=True)
class ConstStr:
    """A string literal (messages of `print`, `assert`, `static_assert`)."""

    value: str

    def __str__(self) -> str:
        return '"' + self.value.replace("\\", "\\\\").replace('"', '\\"') + '"'


Const = Union[ConstValue, ConstTuple, ConstStr]


def loose(value: int | float) -> ConstValue:
    return ConstValue(value, None)


def const_bool(value: bool) -> ConstValue:
    return ConstValue(bool(value), BOOL)


def _fmt(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    return format_int(v) if isinstance(v, int) else str(v)


def format_int(v: int) -> str:
    """An integer for a message: in full up to 30 digits, else its ends and its length."""
    a = abs(v)
    if a < 10 ** 30:
        return str(v)
    d = int(math.log10(a)) + 1   # the float log can be one off at powers of ten
    if 10 ** (d - 1) > a:
        d -= 1
    elif 10 ** d <= a:
        d += 1
    head, tail = a // 10 ** (d - 6), a % 10 ** 4
    return f"{'-' if v < 0 else ''}{head}...{tail:04d} ({d} digits)"


def check_loose_size(v: int, span: Span | None, what: str = "integer constant") -> int:
    """A loose integer within MAX_LOOSE_BITS, else E0406."""
    if v.bit_length() > MAX_LOOSE_BITS:
        raise TileSemanticError.at(
            "E0406", f"{what} with {v.bit_length()} bits is too large", span,
            help=f"loose integers are limited to {MAX_LOOSE_BITS} bits")
    return v


def _kind_word(v) -> str:
    if isinstance(v, bool):
        return "bool constant"
    return "float constant" if isinstance(v, float) else "integer constant"


def _range_help(dtype: DType) -> str:
    if dtype.is_float and not dtype.signed:
        return f"{dtype} holds positive values 2^-127 to 2^127 (they round up to a power of two)"
    if dtype.is_float:
        return f"{dtype} holds finite values up to ±{_fmt(float(dtype.max_finite))}"
    return f"{dtype} holds {dtype.min} to {dtype.max}"


def _no_sym(c: ConstValue, span: Span | None) -> None:
    if isinstance(c.value, Sym):
        raise TileSemanticError.at(
            "E0408", f"the value of `{c.value.name}` is not known until the kernel is "
                     f"specialized", span,
            help="this use needs the value itself; keep the shape symbolic or specialize first")


_STRUCT_FORMATS = {"f64": "d", "f32": "f", "f16": "e"}
_QUANTIZED_NAMES = ("bf16", "tf32", "f8e4m3", "f8e5m2", "f4e2m1", "f6e2m3", "f6e3m2", "ue8m0")


def round_float(value: float, dtype: DType) -> float:
    """A double rounded to the nearest value of float `dtype` (overflow gives ±inf, or the
    saturated maximum for the f8 formats)."""
    fmt = _STRUCT_FORMATS.get(dtype.name)
    if fmt is not None:     # IEEE round-to-nearest-even without importing NumPy
        try:
            return struct.unpack(fmt, struct.pack(fmt, value))[0]
        except OverflowError:
            return math.copysign(math.inf, value)
    if dtype.name in _QUANTIZED_NAMES:
        return round_scalar(value, dtype)
    with np.errstate(all="ignore"):
        return float(round_to_dtype(np.array([value], dtype=np.float64), dtype)[0])


def fits(value: Number, dtype: DType) -> bool:
    """Whether `value` can be materialized as `dtype` without leaving its range."""
    if dtype.is_bool:
        return isinstance(value, bool)
    if dtype.is_int:
        return (isinstance(value, int) and dtype.min <= value <= dtype.max)
    if isinstance(value, float) and math.isinf(value):
        return dtype.has_inf
    if isinstance(value, float) and math.isnan(value):
        return True
    if not dtype.signed and value < 0:      # ue8m0 has no sign
        return False
    return abs(value) <= dtype.max_finite


def _to_dtype_unchecked(value: Number, dtype: DType) -> Number:
    """Exact-or-rounded conversion used after the checks: the promoted value."""
    if isinstance(value, Sym):
        return value
    if dtype.is_bool:
        return bool(value)
    if dtype.is_int:
        return int(value)
    try:
        f = float(value)
    except OverflowError:
        f = math.copysign(math.inf, value)
    return round_float(f, dtype)


def materialize(c: ConstValue, dtype: DType, span: Span | None) -> ConstValue:
    """Give a loose constant the strict `dtype`, checking it fits. A strict constant must
    already have that dtype. A symbolic value (an unspecialized const parameter) cannot be
    checked yet: it takes the dtype and is checked when specialized."""
    if isinstance(c.value, Sym):
        if c.dtype is None or c.dtype == dtype:
            return ConstValue(c.value, dtype)
    _no_sym(c, span)
    if c.dtype is not None:
        if c.dtype == dtype:
            return c
        raise TileSemanticError.at(
            "E0307", f"expected {dtype}, found {c.dtype} constant {_fmt(c.value)}", span,
            help=f"convert explicitly: `{dtype}(...)` or `.astype({dtype})`")
    v = c.value
    if isinstance(v, float) and not dtype.is_float:
        raise TileSemanticError.at(
            "E0307", f"float constant {_fmt(v)} cannot be used as {dtype}", span,
            help=f"use an integer, or convert explicitly with `astype(..., {dtype})`")
    if dtype.is_bool:
        raise TileSemanticError.at(
            "E0307", f"integer constant {_fmt(v)} cannot be used as bool", span,
            help="write `true`/`false`, or compare: `x != 0`")
    if not fits(v, dtype):
        raise TileSemanticError.at(
            "E0401", f"{_kind_word(v)} {_fmt(v)} does not fit in {dtype}", span,
            help=_range_help(dtype))
    return ConstValue(_to_dtype_unchecked(v, dtype), dtype)


def operand_dtype(a: DType | ConstValue, b: DType | ConstValue,
                  span: Span | None) -> DType | None:
    """The common dtype of two operands, each a strict dtype or a constant; a loose constant
    must fit the dtype it becomes. None when both are loose (the result stays loose)."""
    def strict_of(x):
        if isinstance(x, ConstValue):
            return x.dtype
        return x

    sa, sb = strict_of(a), strict_of(b)
    if sa is None and sb is None:
        return None
    if sa is not None and sb is not None:
        return promote(sa, sb, span)
    strict, lc = (sa, b) if sa is not None else (sb, a)
    assert isinstance(lc, ConstValue)
    result = promote_loose(strict, lc.loose_kind)
    materialize(lc, result, span)  # raises when the value does not fit
    return result


def convert(c: ConstValue, dtype: DType) -> ConstValue:
    """A strict constant converted along a promotion edge (bool→int→float, narrow→wide):
    no range check, values round like the hardware conversion would."""
    return ConstValue(_to_dtype_unchecked(c.value, dtype), dtype)


def construct(dtype: DType, c: ConstValue, span: Span | None) -> ConstValue:
    """The strict constructor `dtype(c)`: an exact conversion or an error."""
    _no_sym(c, span)
    v = c.value
    call = f"{dtype}({_fmt(v)})"
    if dtype.is_bool:
        if isinstance(v, bool) or (isinstance(v, int) and v in (0, 1)):
            return ConstValue(bool(v), BOOL)
        raise TileSemanticError.at(
            "E0405", f"`{call}`: only true, false, 0 and 1 convert to bool", span,
            help="compare instead: `x != 0`")
    if dtype.is_int:
        if isinstance(v, float):
            if not math.isfinite(v) or v != math.floor(v):
                raise TileSemanticError.at(
                    "E0405", f"`{call}` would drop the fraction of {_fmt(v)}", span,
                    help=f"use `astype({_fmt(v)}, {dtype})` to truncate toward zero, or "
                         f"`floor`/`ceil` first")
            v = int(v)
        v = int(v)
    elif isinstance(v, float) and math.isinf(v) and dtype.has_inf:
        return ConstValue(v, dtype)
    if not fits(v, dtype):
        raise TileSemanticError.at(
            "E0401", f"{_kind_word(c.value)} {_fmt(c.value)} does not fit in {dtype}", span,
            help=_range_help(dtype))
    return ConstValue(_to_dtype_unchecked(v, dtype), dtype)


# ---------------------------------------------------------------------------------------------
# Arithmetic

ARITH_OPS = ("+", "-", "*", "/", "//", "%", "**")
BITWISE_OPS = ("&", "|", "^")
SHIFT_OPS = ("<<", ">>")
COMPARE_OPS = ("==", "!=", "<", "<=", ">", ">=")
LOGIC_OPS = ("and", "or")
BINARY_OPS = ARITH_OPS + BITWISE_OPS + SHIFT_OPS + COMPARE_OPS + LOGIC_OPS
UNARY_OPS = ("-", "+", "~", "not")


def _common(a: ConstValue, b: ConstValue, span: Span | None) -> DType | None:
    """The dtype both operands take (None: both loose), checking that loose values fit."""
    if a.dtype is None and b.dtype is None:
        return None
    if a.dtype is not None and b.dtype is not None:
        return promote(a.dtype, b.dtype, span)
    strict, lc = (a.dtype, b) if a.dtype is not None else (b.dtype, a)
    dt = promote_loose(strict, lc.loose_kind)
    materialize(lc, dt, span)
    return dt


def _as(c: ConstValue, dt: DType, span: Span | None) -> Number:
    return (materialize(c, dt, span) if c.dtype is None else convert(c, dt)).value


_check_loose_size = check_loose_size


def _int_op(op: str, x: int, y: int, span: Span | None, dt: DType | None) -> int:
    if op in ("//", "%") and y == 0:
        raise TileSemanticError.at(
            "E0403", f"integer {'division' if op == '//' else 'remainder'} by zero in a "
                     f"constant expression: {_fmt(x)} {op} 0", span)
    if op == "**":
        if y < 0:
            raise TileSemanticError.at(
                "E0404", f"negative exponent in integer power {_fmt(x)} ** {_fmt(y)}", span,
                help=f"use a float base: `{_fmt(x)}.0 ** {_fmt(y)}`")
        if abs(x) > 1 and y * (abs(x).bit_length() - 1) > MAX_LOOSE_BITS:
            if dt is not None:
                raise _overflow(op, x, y, None, dt, span)
            raise TileSemanticError.at(
                "E0406", f"integer constant {_fmt(x)} ** {_fmt(y)} is too large", span,
                help=f"loose integers are limited to {MAX_LOOSE_BITS} bits")
        return x ** y
    if op in SHIFT_OPS:
        if y < 0:
            raise TileSemanticError.at(
                "E0404", f"negative shift count in {_fmt(x)} {op} {_fmt(y)}", span)
        if dt is not None and y >= dt.bits:
            raise TileSemanticError.at(
                "E0404", f"shift count {_fmt(y)} is not less than the width of {dt}", span,
                help=f"shift counts of {dt} must be in 0..{dt.bits - 1}")
        if op == "<<" and y > MAX_LOOSE_BITS:
            raise TileSemanticError.at(
                "E0406", f"integer constant {_fmt(x)} << {_fmt(y)} is too large", span)
        return x << y if op == "<<" else x >> y
    return {"+": x + y, "-": x - y, "*": x * y, "//": x // y if y else 0,
            "%": x % y if y else 0, "&": x & y, "|": x | y, "^": x ^ y}[op]


def _overflow(op: str, x, y, r, dt: DType, span: Span | None) -> TileSemanticError:
    expr = f"{_fmt(x)} {op} {_fmt(y)}" if y is not None else f"{op}{_fmt(x)}"
    shown = f" = {_fmt(r)}" if r is not None else ""
    return TileSemanticError.at(
        "E0402", f"{dt} arithmetic overflows: {expr}{shown} does not fit in {dt}", span,
        help=_range_help(dt) + "; widen the operands with a strict constructor, e.g. "
             f"`i64(...)`" if dt.signed else _range_help(dt))


def _float_op(op: str, x: float, y: float) -> float:
    """`x op y` as NumPy's float64 computes it (±inf and NaN, never an exception), in plain
    Python but for `**` (NumPy special-cases exponents such as 2 and 0.5): Python's floats do
    the same IEEE operations, and `//`/`%` by the same fmod-based algorithm; where Python
    raises, a zero divisor, IEEE's answer is ±inf or NaN."""
    x, y = float(x), float(y)
    if op == "**":
        with np.errstate(all="ignore"):
            return float(np.power(np.float64(x), np.float64(y)))
    if op in ("/", "//", "%") and y == 0:
        if op == "%" or x == 0 or math.isnan(x):
            return math.nan
        return math.copysign(math.inf, x) * math.copysign(1.0, y)
    if op == "+":
        return x + y
    if op == "-":
        return x - y
    if op == "*":
        return x * y
    if op == "/":
        return x / y
    return x // y if op == "//" else x % y


def _compare(op: str, x, y) -> bool:
    return {"==": x == y, "!=": x != y, "<": x < y, "<=": x <= y, ">": x > y,
            ">=": x >= y}[op]


def binary(op: str, a: ConstValue, b: ConstValue, span: Span | None) -> ConstValue:
    """Fold `a op b` for op in BINARY_OPS (see the module docstring for the rules)."""
    if op not in BINARY_OPS:
        raise ValueError(f"unknown binary operator {op!r}")
    _no_sym(a, span)
    _no_sym(b, span)
    if op in LOGIC_OPS:
        for c in (a, b):
            if c.dtype is not BOOL:
                raise TileSemanticError.at(
                    "E0407", f"`{op}` needs bool operands, found {_describe(c)}", span,
                    help="compare explicitly, e.g. `x != 0`")
        return const_bool(a.value and b.value if op == "and" else a.value or b.value)
    dt = _common(a, b, span)
    if dt is None:
        x, y = a.value, b.value
        if op in COMPARE_OPS:
            return const_bool(_compare(op, x, y))
        if isinstance(x, int) and isinstance(y, int):
            if op == "/":
                if y == 0:
                    raise TileSemanticError.at(
                        "E0403", f"integer division by zero in a constant expression: "
                                 f"{_fmt(x)} / 0", span)
                try:
                    return loose(x / y)   # exact, correctly rounded even for huge operands
                except OverflowError:
                    raise TileSemanticError.at(
                        "E0401", f"integer constant {_fmt(x)} / {_fmt(y)} does not fit in f64",
                        span) from None
            return loose(_check_loose_size(_int_op(op, x, y, span, None), span))
        if op in BITWISE_OPS + SHIFT_OPS:
            raise _not_defined(op, a, b, span)
        try:
            fx, fy = float(x), float(y)
        except OverflowError:
            raise TileSemanticError.at(
                "E0401", f"integer constant {_fmt(max(x, y, key=abs))} does not fit in f64",
                span) from None
        return loose(_float_op(op, fx, fy))

    x, y = _as(a, dt, span), _as(b, dt, span)
    if op in COMPARE_OPS:
        return const_bool(_compare(op, x, y))
    if dt.is_bool:
        if op in BITWISE_OPS:
            return const_bool({"&": x and y, "|": x or y, "^": x != y}[op])
        raise TileSemanticError.at(
            "E0305", f"`{op}` is not defined on bool operands", span,
            help="convert first, e.g. `b.astype(i32)`")
    if dt.is_int:
        if op == "/":  # like the device: convert both to f32, then divide in f32
            fx, fy = round_float(float(x), DEFAULT_FLOAT), round_float(float(y), DEFAULT_FLOAT)
            return ConstValue(round_float(_float_op("/", fx, fy), DEFAULT_FLOAT),
                              DEFAULT_FLOAT)
        r = _int_op(op, x, y, span, dt)
        if not dt.min <= r <= dt.max:
            raise _overflow(op, x, y, r, dt, span)
        return ConstValue(r, dt)
    if op in BITWISE_OPS + SHIFT_OPS:
        raise _not_defined(op, a, b, span)
    return ConstValue(round_float(_float_op(op, x, y), dt), dt)


def unary(op: str, a: ConstValue, span: Span | None) -> ConstValue:
    """Fold `op a` for op in UNARY_OPS."""
    if op not in UNARY_OPS:
        raise ValueError(f"unknown unary operator {op!r}")
    _no_sym(a, span)
    v, dt = a.value, a.dtype
    if op == "not":
        if dt is not BOOL:
            raise TileSemanticError.at(
                "E0407", f"`not` needs a bool operand, found {_describe(a)}", span,
                help="compare explicitly, e.g. `x == 0`")
        return const_bool(not v)
    if dt is BOOL:
        if op == "~":
            return const_bool(not v)
        raise TileSemanticError.at(
            "E0305", f"unary `{op}` is not defined on bool operands", span,
            help="convert first, e.g. `b.astype(i32)`")
    if op == "+":
        return a
    if op == "~":
        if isinstance(v, float):
            raise TileSemanticError.at(
                "E0407", f"`~` is not defined on {_describe(a)}", span,
                help="bitwise operators take integers")
        if dt is None or dt.signed:
            return ConstValue(~v, dt)
        return ConstValue(~v & dt.max, dt)  # unsigned: flip the dtype's bits only
    r = -v
    if dt is None:
        return loose(r)
    if dt.is_int and not dt.min <= r <= dt.max:
        raise _overflow("-", v, None, r, dt, span)
    return ConstValue(r, dt)


def _describe(c: ConstValue) -> str:
    if c.dtype is None:
        return f"{_kind_word(c.value)} {_fmt(c.value)}"
    return f"{c.dtype} constant {_fmt(c.value)}"


def _not_defined(op: str, a: ConstValue, b: ConstValue, span: Span | None):
    return TileSemanticError.at(
        "E0407", f"`{op}` is not defined on {_describe(a)} and {_describe(b)}", span,
        help="bitwise operators and shifts take integers")


def truth(c: ConstValue, span: Span | None) -> bool:
    """The value of a constant condition (`static_assert`, constant `if`): bools only."""
    _no_sym(c, span)
    if c.dtype is not BOOL:
        raise TileSemanticError.at(
            "E0307", f"expected a bool condition, found {_describe(c)}", span,
            help="compare explicitly, e.g. `x != 0`")
    return bool(c.value)


def as_int(c: ConstValue, span: Span | None, what: str = "value") -> int:
    """The integer of an integer constant (loose or strict int); errors otherwise."""
    _no_sym(c, span)
    if isinstance(c.value, int) and not isinstance(c.value, bool):
        return c.value
    raise TileSemanticError.at("E0307", f"{what} must be an integer, found {_describe(c)}",
                               span)
