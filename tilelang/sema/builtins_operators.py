"""The operator table: `+ - * / // % ** & | ^ << >>`, comparisons, `and or`, unary `- + ~ not`,
with the same entry structure as the named built-ins so that the checker types `a + b` exactly
like a call. Keys are the spellings; unary minus and plus are "u-" and "u+". `@` is the
`matmul` entry (registered by builtins_matmul).

Typing: operands promote (promotion.py) and broadcast (NumPy rules). Two loose constants give a
loose result whose value `fold` computes (constants.binary). `/` on integers gives f32;
arithmetic on bools is an error; bitwise operators take integers or bools, shifts integers;
comparisons give bool tiles; `and`/`or`/`not` take bool scalars (use `&`, `|`, `~` on tiles).
Restricted floats (tf32, f8*) take no operators.

Run-time semantics (the references): integer arithmetic wraps (two's complement); `//` floors
and `%` takes the divisor's sign like Python; integer division by zero gives 0 in the reference
and is unspecified on the device; `**` on integers with a negative exponent gives 0 unless the
base is ±1; shift counts outside 0..bits-1 give 0 (`<<`, unsigned `>>`) or the sign fill
(signed `>>`), as PTX `shl`/`shr` clamp.
"""

from __future__ import annotations

from tilelang.lazy import lazy_module

from tilelang.sema.builtins_core import (Builtin, BoundArgs, Param, common_dtype, common_shape,
                                         fail, register_operator, tile_of)
from tilelang.sema.builtins_math import finish, restricted_help, to_compute
from tilelang.sema.constants import ConstValue, binary, unary
from tilelang.sema.types import (BOOL, F32, LOOSE_FLOAT, LOOSE_INT, DType, TileType, Type,
                                 scalar)

np = lazy_module("numpy")

ARITH = {"+": "add", "-": "sub", "*": "mul", "/": "truediv", "//": "floordiv", "%": "mod",
         "**": "pow"}
BITWISE = {"&": "and_", "|": "or_", "^": "xor"}
SHIFTS = {"<<": "lshift", ">>": "rshift"}
COMPARE = {"==": "eq", "!=": "ne", "<": "lt", "<=": "le", ">": "gt", ">=": "ge"}


def _no_restricted(bound: BoundArgs, names, span) -> None:
    for n in names:
        t = tile_of(bound, n, span)
        if isinstance(t, TileType) and t.dtype.restricted:
            raise fail("E0311", bound, n, f"cannot be {t}", span, help=restricted_help(t.dtype))


def _both_loose(bound: BoundArgs, span) -> tuple[ConstValue, ConstValue] | None:
    a, b = tile_of(bound, "a", span), tile_of(bound, "b", span)
    if isinstance(a, ConstValue) and isinstance(b, ConstValue):
        return a, b
    return None


def _binary_typing(op: str):
    def typing(bound: BoundArgs, span) -> Type:
        _no_restricted(bound, ("a", "b"), span)
        loose = _both_loose(bound, span)
        if loose is not None:
            if op in COMPARE:
                return scalar(BOOL)
            floaty = op == "/" or any(c.loose_kind == "float" for c in loose)
            return LOOSE_FLOAT if floaty else LOOSE_INT
        dt = common_dtype(bound, ["a", "b"], span)
        shape = common_shape(bound, ["a", "b"], span)
        if op in COMPARE:
            return TileType(BOOL, shape)
        if op in ARITH and dt.is_bool:
            raise _bool_error(bound, op, span)
        if op in BITWISE and dt.is_float:
            raise fail("E0311", bound, None, f"`{op}` is not defined on {dt} operands", span,
                       help="bitwise operators take integers or bools")
        if op in SHIFTS and not dt.is_int:
            raise fail("E0311", bound, None, f"`{op}` is not defined on {dt} operands", span,
                       help="shifts take integers")
        if op == "/" and not dt.is_float:
            dt = F32
        return TileType(dt, shape)
    return typing


def _bool_error(bound: BoundArgs, op: str, span):
    return fail("E0305", bound, None, f"`{op}` is not defined on bool operands", span,
                help="convert first, e.g. `astype(b, i32)`")


def _compute_hint(op: str):
    def hints(bound: BoundArgs, span) -> dict:
        t = bound.builtin.result_type(bound, span)
        if op in COMPARE:
            dt = common_dtype(bound, ["a", "b"], span)
            return {"dtype": dt} if dt is not None else {}
        return {"dtype": t.dtype} if isinstance(t, TileType) else {}
    return hints


def _int_pow(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a, b = np.broadcast_arrays(a, b)
    neg = b < 0
    with np.errstate(all="ignore"):
        r = np.power(a, np.where(neg, 0, b).astype(b.dtype)).astype(a.dtype)
    odd = (b % 2) != 0
    special = np.where(a == 1, 1, np.where(a == -1, np.where(odd, -1, 1), 0)).astype(a.dtype)
    return np.where(neg, special, r)


def _shift(a: np.ndarray, b: np.ndarray, left: bool) -> np.ndarray:
    a, b = np.broadcast_arrays(a, b)
    bits = a.dtype.itemsize * 8
    count = b.astype(np.int64)
    out_of_range = (count < 0) | (count >= bits)
    c = np.clip(count, 0, bits - 1).astype(a.dtype)
    if left:
        return np.where(out_of_range, np.zeros_like(a), np.left_shift(a, c))
    fill = np.where(a < 0, -1, 0).astype(a.dtype) if a.dtype.kind == "i" else np.zeros_like(a)
    return np.where(out_of_range, fill, np.right_shift(a, c))


def _apply(op: str, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    intlike = x.dtype.kind in "iu"
    if op == "**" and intlike:
        return _int_pow(x, y)
    if op in SHIFTS:
        return _shift(x, y, op == "<<")
    if op in ("//", "%") and intlike:
        zero = y == 0
        safe = np.where(zero, 1, y).astype(y.dtype)
        r = np.floor_divide(x, safe) if op == "//" else np.mod(x, safe)
        return np.where(zero, 0, r).astype(r.dtype)
    fn = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.true_divide,
          "//": np.floor_divide, "%": np.mod, "**": np.power, "&": np.bitwise_and,
          "|": np.bitwise_or, "^": np.bitwise_xor, "==": np.equal, "!=": np.not_equal,
          "<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal}[op]
    if x.dtype == np.float16 and op in ("**", "//", "%"):
        x, y = x.astype(np.float32), y.astype(np.float32)
    return fn(x, y)


def _binary_ref(op: str):
    def ref(a, b, dtype: DType | None = None):
        x, y = to_compute(a, dtype), to_compute(b, dtype)
        with np.errstate(all="ignore"):
            r = _apply(op, x, y)
        if op in COMPARE:
            return np.asarray(r, dtype=bool)
        return finish(r, dtype) if dtype is not None else np.asarray(r)
    return ref


def _binary_fold(op: str):
    def fold(bound: BoundArgs, span):
        return binary(op, bound["a"].const, bound["b"].const, span)
    return fold


for _table in (ARITH, BITWISE, SHIFTS, COMPARE):
    for _op, _word in _table.items():
        register_operator(_op, Builtin(
            _op, "operator", (Param("a"), Param("b")), _binary_typing(_op), _binary_ref(_op),
            doc=f"`a {_op} b` ({_word})", fold=_binary_fold(_op), ref_hints=_compute_hint(_op),
            symbol=_op))


# --- `and` / `or` / `not`: bool scalars ----------------------------------------------------

def _logic_typing(names):
    def typing(bound: BoundArgs, span) -> Type:
        for n in names:
            t = tile_of(bound, n, span)
            if not (isinstance(t, TileType) and t.dtype is BOOL):
                raise fail("E0506", bound, n, f"must be a bool scalar, found {t}", span,
                           help="compare explicitly, e.g. `x != 0`")
        return scalar(BOOL)
    return typing


def _logic_ref(op):
    def ref(**kw):
        v = [bool(np.asarray(x)) for x in kw.values()]
        return np.bool_({"and": lambda: v[0] and v[1], "or": lambda: v[0] or v[1],
                         "not": lambda: not v[0]}[op]())
    return ref


register_operator("and", Builtin(
    "and", "operator", (Param("a"), Param("b")), _logic_typing(["a", "b"]), _logic_ref("and"),
    doc="logical and of bool scalars (`&` on tiles)", scalar_only=True,
    fold=_binary_fold("and"), symbol="and"))
register_operator("or", Builtin(
    "or", "operator", (Param("a"), Param("b")), _logic_typing(["a", "b"]), _logic_ref("or"),
    doc="logical or of bool scalars (`|` on tiles)", scalar_only=True,
    fold=_binary_fold("or"), symbol="or"))
register_operator("not", Builtin(
    "not", "operator", (Param("x"),), _logic_typing(["x"]), _logic_ref("not"),
    doc="logical not of a bool scalar (`~` on tiles)", scalar_only=True,
    fold=lambda bound, span: unary("not", bound["x"].const, span), symbol="not"))


# --- unary `-`, `+`, `~` --------------------------------------------------------------------

def _unary_typing(op: str):
    def typing(bound: BoundArgs, span) -> Type:
        _no_restricted(bound, ("x",), span)
        t = tile_of(bound, "x", span)
        if isinstance(t, ConstValue):
            if op == "~" and t.loose_kind == "float":
                raise fail("E0311", bound, "x", "of `~` must be an integer, found a float",
                           span)
            return t.type
        if op == "~" and t.dtype.is_float:
            raise fail("E0311", bound, "x", f"of `~` must be an integer or bool, found {t}",
                       span)
        if op != "~" and t.dtype.is_bool:
            raise _bool_error(bound, op, span)
        return t
    return typing


def _unary_ref(op: str):
    def ref(x, dtype: DType | None = None):
        v = to_compute(x, dtype)
        with np.errstate(all="ignore"):
            if op == "-":
                r = np.negative(v)
            elif op == "+":
                r = v.copy()
            else:
                r = np.logical_not(v) if v.dtype == bool else np.invert(v)
        return finish(r, dtype) if dtype is not None else np.asarray(r)
    return ref


def _unary_hint(bound: BoundArgs, span) -> dict:
    t = bound.builtin.result_type(bound, span)
    return {"dtype": t.dtype} if isinstance(t, TileType) else {}


for _op in ("-", "+", "~"):
    register_operator("u" + _op if _op != "~" else "~", Builtin(
        _op, "operator", (Param("x"),), _unary_typing(_op), _unary_ref(_op),
        doc=f"unary `{_op}x`", fold=(lambda o: lambda bound, span:
                                     unary(o, bound["x"].const, span))(_op),
        ref_hints=_unary_hint, symbol=_op))
