"""Element-wise math built-ins (`exp` ... `erf`, `minimum maximum pow atan2 fma where`) and the
helpers the operator table shares with them.

Typing: float functions take float tiles/scalars (f16, bf16, f32, f64); an integer or bool
operand is an error asking for `astype` (no silent conversion of i64 to f32), a loose constant
becomes f32. Restricted floats (tf32, f8*) are accepted only by load/store/astype/bitcast/mma.
Binary functions promote and broadcast like the arithmetic operators.

Reference: operands are converted to the compute dtype (the `dtype` hint from typing) and the
result is rounded to it; f16/bf16 transcendental functions are evaluated in f32 first, as the
hardware does. `minimum`/`maximum` propagate NaN (PTX `min.NaN`/`max.NaN`). `fma` is evaluated
in double and rounded once, which equals the fused result for f32 and narrower.

Precision (docs/numerics.md): `exp exp2 log log2 sin cos tanh rsqrt sigmoid div` take
`precision = "ieee" | "fast" | "approx"`, which chooses the code the GPU runs (the kernel's
`@launch(precision = ...)` and the module's option choose it for the rest). The reference is
always the exact function: the mode only changes the error bound the code is held to.
"""

from __future__ import annotations

import math

from tilelang.lazy import deferred, lazy_module

from tilelang.sema.builtins_core import (ABSENT, STRING_KIND, Builtin, BoundArgs, Param,
                                         common_dtype, common_shape, fail, register, tile_of)
from tilelang.sema.constants import ConstStr, ConstValue
from tilelang.sema.types import BOOL, DEFAULT_INT, F32, DType, TileType, round_to_dtype

np = lazy_module("numpy")


# ---------------------------------------------------------------------------------------------
# Shared reference helpers

def to_compute(x, dtype: DType | None) -> np.ndarray:
    """An operand as a NumPy array holding `dtype` values (None: leave NumPy's own dtype)."""
    if dtype is None:
        return np.asarray(x)
    return round_to_dtype(x, dtype)


def finish(r, dtype: DType | None) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.asarray(r) if dtype is None else round_to_dtype(r, dtype)


def in_f32(x: np.ndarray) -> np.ndarray:
    """Narrow floats are evaluated in f32 (bf16/tf32/f8 are stored as f32 already)."""
    return x.astype(np.float32) if x.dtype == np.float16 else x


def restricted_help(dt: DType) -> str:
    products = "mma_scaled" if dt.name in ("f4e2m1", "f6e2m3", "f6e3m2", "ue8m0") else "mma"
    return (f"{dt} is a restricted float: only load, store, astype, bitcast and {products} "
            f"accept it; convert with `astype(x, f32)` first")


def require_float(bound: BoundArgs, name: str, t: TileType, span) -> None:
    dt = t.dtype
    if dt.restricted:
        raise fail("E0508", bound, name, f"cannot be {t}", span, help=restricted_help(dt))
    if not dt.is_float:
        raise fail("E0508", bound, name, f"must have a float dtype, found {t}", span,
                   help=f"convert first: `astype({name}, f32)`")


def require_not_restricted(bound: BoundArgs, name: str, span) -> None:
    t = tile_of(bound, name, span)
    if isinstance(t, TileType) and t.dtype.restricted:
        raise fail("E0508", bound, name, f"cannot be {t}", span,
                   help=restricted_help(t.dtype))


def dtype_hint(bound: BoundArgs, span) -> dict:
    """The compute dtype of an element-wise op: its result's dtype."""
    t = bound.builtin.result_type(bound, span)
    return {"dtype": t.dtype} if isinstance(t, TileType) else {}


# ---------------------------------------------------------------------------------------------
# Precision modes

# "ieee": every function within the bounds of docs/numerics.md's precise table, `/` rounded
# to nearest. "fast" (the default): what Triton gives its users — exp, exp2 and sigmoid on
# `ex2.approx`, rsqrt on `rsqrt.approx`, f32 `/` as `div.full` (a broadcast divisor becomes one
# `rcp.approx` and multiplies); log, sin, cos and tanh stay precise, as libdevice's are.
# "approx": every listed function on its hardware approximation. Only f32 has approximations
# (f16/bf16 compute in f32; f64 is always precise).
PRECISIONS = ("ieee", "fast", "approx")
DEFAULT_PRECISION = "fast"
PRECISION_OPS = ("exp", "exp2", "log", "log2", "sin", "cos", "tanh", "rsqrt", "sigmoid", "/")
APPROXIMATED: dict[str, frozenset] = {
    "ieee": frozenset(),
    "fast": frozenset({"exp", "exp2", "sigmoid", "rsqrt", "/"}),
    "approx": frozenset(PRECISION_OPS),
}
PRECISION_PARAM = Param("precision", STRING_KIND, ABSENT, keyword_only=True)


def check_precision(bound: BoundArgs, span) -> None:
    a = bound.args.get("precision")
    if a is not None and isinstance(a.const, ConstStr) and a.const.value not in PRECISIONS:
        raise fail("E0507", bound, "precision", f"must be one of "
                   f"{', '.join(repr(p).replace(chr(39), chr(34)) for p in PRECISIONS)}, "
                   f"found {a.const}", span,
                   help='"ieee" is exact to the documented bounds, "fast" is the default, '
                        '"approx" uses every hardware approximation')


# ---------------------------------------------------------------------------------------------
# Unary float functions

def _float_unary_typing(bound: BoundArgs, span) -> TileType:
    t = tile_of(bound, "x", span)
    if isinstance(t, ConstValue):
        return TileType(F32, ())  # a loose constant is evaluated as the default float
    require_float(bound, "x", t, span)
    return t


def _unary_ref(fn):
    def ref(x, dtype: DType | None = None, precision: str | None = None):
        v = to_compute(x, dtype)
        with np.errstate(all="ignore"):
            r = np.asarray(fn(in_f32(v)))
        if dtype is not None:
            return finish(r, dtype)
        return r.astype(v.dtype) if v.dtype.kind == "f" else r
    return ref


def _erf(v):
    return np.frompyfunc(math.erf, 1, 1)(v.astype(np.float64)).astype(np.float64)


# NumPy functions are named through lambdas so that NumPy is imported only when a constant is
# folded, not when the registry is built.
FLOAT_UNARY = {
    "exp": (lambda v: np.exp(v), "e to the power x"),
    "exp2": (lambda v: np.exp2(v), "2 to the power x"),
    "log": (lambda v: np.log(v), "natural logarithm"),
    "log2": (lambda v: np.log2(v), "base-2 logarithm"),
    "sqrt": (lambda v: np.sqrt(v), "square root"),
    "rsqrt": (lambda v: 1.0 / np.sqrt(v), "1 / sqrt(x)"),
    "sin": (lambda v: np.sin(v), "sine (radians)"),
    "cos": (lambda v: np.cos(v), "cosine (radians)"),
    "tanh": (lambda v: np.tanh(v), "hyperbolic tangent"),
    "sigmoid": (lambda v: 1.0 / (1.0 + np.exp(-v)), "1 / (1 + exp(-x))"),
    "erf": (_erf, "the error function"),
}

def _precise_typing(typing):
    def checked(bound: BoundArgs, span):
        check_precision(bound, span)
        return typing(bound, span)
    return checked


for _name, (_fn, _doc) in FLOAT_UNARY.items():
    if _name in PRECISION_OPS:
        register(Builtin(_name, "math", (Param("x"), PRECISION_PARAM),
                         _precise_typing(_float_unary_typing), _unary_ref(_fn),
                         doc=f"`{_name}(x, precision=)`: {_doc}, element-wise, on float tiles "
                             f"and scalars; `precision` overrides the kernel's mode",
                         ref_hints=dtype_hint))
    else:
        register(Builtin(_name, "math", (Param("x"),), _float_unary_typing, _unary_ref(_fn),
                         doc=f"`{_name}(x)`: {_doc}, element-wise, on float tiles and scalars",
                         ref_hints=dtype_hint))


def _numeric_unary_typing(bound: BoundArgs, span) -> TileType:
    """floor/ceil/abs: any int or float (floor/ceil are the identity on integers)."""
    t = tile_of(bound, "x", span)
    if isinstance(t, ConstValue):
        return TileType(F32 if t.loose_kind == "float" else DEFAULT_INT, ())
    if t.dtype.is_bool:
        raise fail("E0508", bound, "x", f"must be a number, found {t}", span,
                   help="convert first: `astype(x, i32)`")
    require_not_restricted(bound, "x", span)
    return t


def _identity_on_ints(fn):
    def ref(x, dtype: DType | None = None):
        v = to_compute(x, dtype)
        if v.dtype.kind in "iub":
            return v.copy()
        with np.errstate(all="ignore"):
            return finish(fn(in_f32(v)), dtype) if dtype is not None else fn(v)
    return ref


def _abs_ref(x, dtype: DType | None = None):
    v = to_compute(x, dtype)
    with np.errstate(all="ignore"):
        return finish(np.abs(v), dtype) if dtype is not None else np.abs(v)  # i8 -128 stays


register(Builtin("floor", "math", (Param("x"),), _numeric_unary_typing,
                 _identity_on_ints(deferred(np, "floor")), doc="round toward -inf", ref_hints=dtype_hint))
register(Builtin("ceil", "math", (Param("x"),), _numeric_unary_typing,
                 _identity_on_ints(deferred(np, "ceil")), doc="round toward +inf", ref_hints=dtype_hint))
register(Builtin("abs", "math", (Param("x"),), _numeric_unary_typing, _abs_ref,
                 doc="absolute value (two's complement: abs of the minimum integer wraps)",
                 ref_hints=dtype_hint))


register(Builtin("trunc", "math", (Param("x"),), _numeric_unary_typing,
                 _identity_on_ints(lambda v: np.trunc(v)), doc="round toward zero",
                 ref_hints=dtype_hint))
register(Builtin("rint", "math", (Param("x"),), _numeric_unary_typing,
                 _identity_on_ints(lambda v: np.rint(v)),
                 doc="round to the nearest integer, ties to even (NumPy's `rint`)",
                 ref_hints=dtype_hint))
register(Builtin("round", "math", (Param("x"),), _numeric_unary_typing,
                 _identity_on_ints(lambda v: np.rint(v)),
                 doc="round to the nearest integer, ties to even (NumPy's `round` with no "
                     "decimals; not Python's away-from-zero on .5 for C, the same as Python 3)",
                 ref_hints=dtype_hint))


def _sign_ref(x, dtype: DType | None = None):
    v = to_compute(x, dtype)
    with np.errstate(all="ignore"):
        r = np.sign(in_f32(v))
    return finish(r, dtype) if dtype is not None else r.astype(v.dtype)


register(Builtin("sign", "math", (Param("x"),), _numeric_unary_typing, _sign_ref,
                 doc="-1, 0 or 1 by the sign of x (NaN stays NaN, -0.0 gives 0.0)",
                 ref_hints=dtype_hint))

# More float functions (no hardware approximation: always precise, bounds in numerics.md)
MORE_FLOAT_UNARY = {
    "log10": (lambda v: np.log10(v), "base-10 logarithm"),
    "log1p": (lambda v: np.log1p(v), "log(1 + x), accurate for small x"),
    "expm1": (lambda v: np.expm1(v), "exp(x) - 1, accurate for small x"),
    "cbrt": (lambda v: np.cbrt(v), "cube root (negative x gives a negative root)"),
    "tan": (lambda v: np.tan(v), "tangent (radians)"),
    "atan": (lambda v: np.arctan(v), "arc tangent, in (-pi/2, pi/2)"),
    "asin": (lambda v: np.arcsin(v), "arc sine, in [-pi/2, pi/2]; NaN outside [-1, 1]"),
    "acos": (lambda v: np.arccos(v), "arc cosine, in [0, pi]; NaN outside [-1, 1]"),
    "sinh": (lambda v: np.sinh(v), "hyperbolic sine"),
    "cosh": (lambda v: np.cosh(v), "hyperbolic cosine"),
    "asinh": (lambda v: np.arcsinh(v), "inverse hyperbolic sine"),
    "acosh": (lambda v: np.arccosh(v), "inverse hyperbolic cosine; NaN below 1"),
    "atanh": (lambda v: np.arctanh(v), "inverse hyperbolic tangent; ±inf at ±1, NaN beyond"),
}
for _name, (_fn, _doc) in MORE_FLOAT_UNARY.items():
    register(Builtin(_name, "math", (Param("x"),), _float_unary_typing, _unary_ref(_fn),
                     doc=f"`{_name}(x)`: {_doc}, element-wise, on float tiles and scalars",
                     ref_hints=dtype_hint))


def _bool_of_float_typing(bound: BoundArgs, span) -> TileType:
    """isnan/isinf/isfinite: numbers in, bools out (integers are finite, never NaN)."""
    t = _numeric_unary_typing(bound, span)
    return TileType(BOOL, t.shape)


def _classify_ref(fn):
    def ref(x, dtype: DType | None = None):
        v = np.asarray(x)
        return np.asarray(fn(v.astype(np.float64) if v.dtype.kind in "iub" else v))
    return ref


for _name, _fn, _doc in (("isnan", lambda v: np.isnan(v), "x is NaN"),
                         ("isinf", lambda v: np.isinf(v), "x is +inf or -inf"),
                         ("isfinite", lambda v: np.isfinite(v), "x is neither inf nor NaN")):
    register(Builtin(_name, "math", (Param("x"),), _bool_of_float_typing, _classify_ref(_fn),
                     doc=f"true where {_doc} (always false/false/true on integers)"))


# ---------------------------------------------------------------------------------------------
# Binary / ternary functions

def elementwise_typing(names: list[str], *, float_only: bool = False,
                       allow_bool: bool = True):
    """Promote the named operands to one dtype and broadcast their shapes."""
    def typing(bound: BoundArgs, span) -> TileType:
        for n in names:
            require_not_restricted(bound, n, span)
        dt = common_dtype(bound, names, span)
        shape = common_shape(bound, names, span)
        if dt is None:  # all loose: the default dtype of the widest kind
            kinds = {tile_of(bound, n, span).loose_kind for n in names}
            dt = F32 if float_only or "float" in kinds else DEFAULT_INT
        if float_only and not dt.is_float:
            n = next(n for n in names if isinstance(tile_of(bound, n, span), TileType))
            raise fail("E0508", bound, n, f"must have a float dtype, found "
                                          f"{tile_of(bound, n, span)}", span,
                       help=f"convert first: `astype({n}, f32)`")
        if not allow_bool and dt.is_bool:
            raise fail("E0508", bound, names[0], "must be numbers, found bool operands", span,
                       help="convert first: `astype(x, i32)`")
        return TileType(dt, shape)
    return typing


def _nary_ref(fn, narrow_in_f32: bool = False):
    def ref(*args, dtype: DType | None = None):
        vs = [to_compute(a, dtype) for a in args]
        if narrow_in_f32:
            vs = [in_f32(v) for v in vs]
        with np.errstate(all="ignore"):
            return finish(fn(*vs), dtype)
    return ref


def _named(fn, *names):
    """Give a positional reference the parameter names of its entry."""
    def ref(dtype: DType | None = None, **kw):
        return fn(*[kw[n] for n in names], dtype=dtype)
    return ref


register(Builtin("minimum", "math", (Param("a"), Param("b")),
                 elementwise_typing(["a", "b"]), _named(_nary_ref(deferred(np, "minimum")), "a", "b"),
                 doc="element-wise minimum (NaN propagates)", ref_hints=dtype_hint))
register(Builtin("maximum", "math", (Param("a"), Param("b")),
                 elementwise_typing(["a", "b"]), _named(_nary_ref(deferred(np, "maximum")), "a", "b"),
                 doc="element-wise maximum (NaN propagates)", ref_hints=dtype_hint))
register(Builtin("pow", "math", (Param("a"), Param("b")),
                 elementwise_typing(["a", "b"], float_only=True),
                 _named(_nary_ref(deferred(np, "power"), True), "a", "b"),
                 doc="a ** b on floats", ref_hints=dtype_hint))
register(Builtin("atan2", "math", (Param("y"), Param("x")),
                 elementwise_typing(["y", "x"], float_only=True),
                 _named(_nary_ref(deferred(np, "arctan2"), True), "y", "x"),
                 doc="the angle of (x, y), in radians", ref_hints=dtype_hint))


register(Builtin("copysign", "math", (Param("a"), Param("b")),
                 elementwise_typing(["a", "b"], float_only=True),
                 _named(_nary_ref(lambda a, b: np.copysign(a, b)), "a", "b"),
                 doc="the magnitude of a with the sign of b", ref_hints=dtype_hint))
register(Builtin("fmod", "math", (Param("a"), Param("b")),
                 elementwise_typing(["a", "b"], float_only=True),
                 _named(_nary_ref(lambda a, b: np.fmod(a, b), True), "a", "b"),
                 doc="C's remainder: a - trunc(a / b) * b, exact, with the sign of a "
                     "(`%` is the floor remainder with the sign of b)", ref_hints=dtype_hint))
register(Builtin("hypot", "math", (Param("a"), Param("b")),
                 elementwise_typing(["a", "b"], float_only=True),
                 _named(_nary_ref(lambda a, b: np.hypot(a, b), True), "a", "b"),
                 doc="sqrt(a*a + b*b) without overflow or underflow on the way",
                 ref_hints=dtype_hint))


def _div_typing(bound: BoundArgs, span) -> TileType:
    check_precision(bound, span)
    t = elementwise_typing(["a", "b"], allow_bool=False)(bound, span)
    return t if t.dtype.is_float else TileType(F32, t.shape)


def _div_ref(a, b, dtype: DType | None = None, precision: str | None = None):
    return _nary_ref(lambda x, y: np.true_divide(x, y), True)(a, b, dtype=dtype)


register(Builtin("div", "math", (Param("a"), Param("b"), PRECISION_PARAM), _div_typing,
                 _div_ref, doc="a / b with a chosen precision (`precision = \"ieee\"` rounds "
                               "to nearest like Triton's `div_rn`); integers divide in f32",
                 ref_hints=dtype_hint))


def _fma(a, b, c):
    return a.astype(np.float64) * b.astype(np.float64) + c.astype(np.float64)


register(Builtin("fma", "math", (Param("a"), Param("b"), Param("c")),
                 elementwise_typing(["a", "b", "c"], float_only=True),
                 _named(_nary_ref(_fma), "a", "b", "c"),
                 doc="a * b + c with one rounding", ref_hints=dtype_hint))


def _where_typing(bound: BoundArgs, span) -> TileType:
    c = tile_of(bound, "cond", span)
    if not (isinstance(c, TileType) and c.dtype is BOOL):
        raise fail("E0508", bound, "cond", f"must be a bool tile or scalar, found {c}", span,
                   help="compare to get bools, e.g. `x > 0`")
    t = elementwise_typing(["x", "y"])(bound, span)
    shape = common_shape(bound, ["cond", "x", "y"], span)
    return TileType(t.dtype, shape)


def _where_ref(cond, x, y, dtype: DType | None = None):
    return np.where(np.asarray(cond, dtype=bool), to_compute(x, dtype), to_compute(y, dtype))


register(Builtin("where", "math", (Param("cond"), Param("x"), Param("y")), _where_typing,
                 _where_ref, doc="x where cond is true, else y (broadcast together)",
                 ref_hints=dtype_hint))

