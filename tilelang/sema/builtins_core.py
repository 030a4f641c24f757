"""The machinery of the built-in operation registry: parameters, entries, argument binding and
the helpers typing rules share. The operations themselves live in `builtins_<group>.py`;
`builtins.py` is the public face.

Conventions every entry follows:
- a typing rule `(bound, span) -> Type` raises `TileSemanticError` naming the operation and the
  parameter ("`load`: parameter `shape` must be a tuple of constant integers, found `x`"),
  pointing at the argument's span when it has one, else at the call;
- a reference `ref(**values)` takes NumPy values by parameter name: tiles are arrays (a scalar may
  be a 0-d array or a Python/NumPy scalar), arrays are mutable `np.ndarray` views, dtypes are
  `DType`, constant tuples are tuples of ints, strings are `str`, optional parameters left out
  are None. bf16/tf32/f8 values are float32 arrays holding representable values. Extra keyword
  arguments that only the typing knows (the dtype to compute in) come from `ref_hints`;
  `Builtin.evaluate` merges both.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from tilelang.diagnostics import Span, TileSemanticError, register_codes, source_line
from tilelang.record import field, record, replace
from tilelang.sema.constants import (Const, ConstStr, ConstTuple, ConstValue, materialize,
                                     operand_dtype)
from tilelang.sema.promotion import broadcast_all, promote
from tilelang.sema.types import (STRING, ArrayType, Dim, DType, DTypeType, LooseType, Sym,
                                 TileType, TupleType, Type, check_shape, check_tile_size,
                                 scalar)

register_codes({
    "E0311": "an operator is not defined for these operand types",
    "E0501": "unknown built-in operation",
    "E0502": "too many positional arguments",
    "E0503": "a required argument is missing",
    "E0504": "an unknown or repeated keyword argument",
    "E0505": "a parameter that must be constant was given a run-time value",
    "E0506": "an argument has the wrong kind of type",
    "E0507": "a constant argument has an invalid value (axis, shape, permutation, format)",
    "E0508": "an argument's dtype is not supported by the operation",
    "E0509": "argument shapes do not fit the operation",
    "E0510": "an operation that takes scalars was given a tile",
    "E0511": "a static assertion failed",
    "E0530": "a combine function does not fit the operation (not a function, wrong arity or "
             "types)",
})


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


class _Absent:
    def __repr__(self) -> str:
        return "None"


REQUIRED = _Required()  # no default: the caller must pass it
ABSENT = _Absent()      # optional with no value (`padding=None`): the bound arg is None

# Parameter kinds checked by `bind_call` before the typing rule runs.
VALUE, CONST, DTYPE, STRING_KIND = "value", "const", "dtype", "string"
# A function applied element by element (`reduce`'s combine): the checker instantiates the
# named `fn` (or built-in) on scalars of the operand's dtypes and passes a `CombineType`.
FN = "fn"


@record(frozen=True)
class CombineType:
    """The type of a function argument (`reduce`'s combine) as the checker resolved it
    (check_combine.py): the function instantiated once on scalars of the operands' element
    dtypes. `state` holds one DType per operand tile, `results` the types the function returns
    for two states (checked to be the state's). The IR carries the inlined body beside it
    (tilelang/ir/args.py, `FnArg`)."""

    name: str                       # the function's name, for messages
    state: tuple
    results: tuple

    def __str__(self) -> str:
        inner = ", ".join(str(d) for d in self.state)
        return f"fn {self.name}(({inner}), ({inner}))"


@record(frozen=True)
class Param:
    name: str
    kind: str = VALUE            # value | const | dtype | string | fn
    default: Any = REQUIRED      # REQUIRED, ABSENT, a Const or a DType
    keyword_only: bool = False

    def __str__(self) -> str:
        if self.default is REQUIRED:
            return self.name
        return f"{self.name}={self.default}"


@record(frozen=True)
class ArgInfo:
    """What the checker knows about one argument: its type, its constant value if it has one,
    its span, and for a tuple expression the ArgInfo of each element (optional). `ir` is an
    opaque payload a later stage attaches (the AST lowering keeps the IR value there); the
    checker never looks at it."""

    type: Type
    const: Const | None = None
    span: Span | None = None
    elements: tuple["ArgInfo", ...] | None = None
    ir: object = field(default=None, compare=False, hash=False, repr=False)


def arg_of_const(c: Const, span: Span | None = None) -> ArgInfo:
    """ArgInfo for a constant value (used for defaults and in tests)."""
    if isinstance(c, ConstValue):
        return ArgInfo(c.type, c, span)
    if isinstance(c, ConstStr):
        return ArgInfo(STRING, c, span)
    elems = tuple(arg_of_const(i, span) for i in c.items)
    return ArgInfo(TupleType(tuple(e.type for e in elems)), c, span, elems)


def arg_of_dtype(d: DType, span: Span | None = None) -> ArgInfo:
    return ArgInfo(DTypeType(d), None, span)


@record(frozen=True)
class BoundArgs:
    """Arguments matched to parameters; defaults filled in, absent optionals are None."""

    builtin: "Builtin"
    args: Mapping[str, ArgInfo | None]
    varargs: tuple[ArgInfo, ...] = ()
    span: Span | None = None

    def __getitem__(self, name: str) -> ArgInfo | None:
        return self.args[name]

    def given(self, name: str) -> bool:
        return self.args.get(name) is not None


@record(frozen=True)
class Builtin:
    name: str
    group: str
    params: tuple[Param, ...]
    typing: Callable[[BoundArgs, Span | None], Type]
    ref: Callable[..., Any]
    doc: str = ""
    variadic: str | None = None     # name of a trailing *args parameter (print)
    scalar_only: bool = False       # all value arguments must be scalars (0-d)
    side_effects: bool = False      # never removed or reordered by optimizations
    fold: Callable[[BoundArgs, Span | None], Const] | None = None  # constant evaluation
    ref_hints: Callable[[BoundArgs, Span | None], dict] | None = None
    symbol: str | None = None       # operator spelling (`+`), for operator entries
    extra: Mapping[str, Any] = field(default_factory=dict)  # per-entry data (dtype tables)

    def result_type(self, bound: BoundArgs, span: Span | None = None) -> Type:
        where = span if span is not None else bound.span
        try:
            t = self.typing(bound, where)
            _check_sizes(t, where)  # broadcasting can multiply shapes past the limit
            return t
        except TileSemanticError as e:
            # promotion/constant errors do not know the call they come from: say it
            d = e.diagnostics[0]
            if not d.message.startswith(f"`{self.name}`"):
                where = f"`{self.symbol}`" if self.symbol else f"this call to `{self.name}`"
                e.diagnostics[0] = replace(d, notes=d.notes + (f"in {where}",))
            raise

    def can_fold(self, bound: BoundArgs) -> bool:
        """Whether `fold` applies: a fold exists and every given argument is a constant whose
        value is known (a symbolic const parameter makes the result a run-time value)."""
        if self.fold is None:
            return False
        vals = [a for a in bound.args.values() if a is not None] + list(bound.varargs)
        return all((a.const is not None and not _has_sym(a.const))
                   or isinstance(a.type, DTypeType) for a in vals)

    def hints(self, bound: BoundArgs, span: Span | None = None) -> dict:
        return self.ref_hints(bound, span) if self.ref_hints else {}

    def evaluate(self, bound: BoundArgs, values: Mapping[str, Any], varargs=()) -> Any:
        """Run the reference with the interpreter's values plus the typing-derived hints."""
        kwargs = dict(values)
        kwargs.update(self.hints(bound, bound.span))
        if self.variadic:
            return self.ref(*[kwargs.pop(p.name) for p in self.params], *varargs, **kwargs)
        return self.ref(**kwargs)

    def signature(self) -> str:
        parts = []
        star = False
        for p in self.params:
            if p.keyword_only and not star:
                parts.append("*")
                star = True
            parts.append(str(p))
        if self.variadic:
            parts.append(f"*{self.variadic}")
        return f"{self.name}({', '.join(parts)})"


def _has_sym(c: Const) -> bool:
    if isinstance(c, ConstValue):
        return isinstance(c.value, Sym)
    if isinstance(c, ConstTuple):
        return any(_has_sym(i) for i in c.items)
    return False


# ---------------------------------------------------------------------------------------------
# Binding

def _check_sizes(t: Type, span: Span | None) -> None:
    if isinstance(t, TileType):
        check_tile_size(t, span)
    elif isinstance(t, TupleType):
        for e in t.elements:
            _check_sizes(e, span)


def bind_call(builtin: Builtin, positional: list[ArgInfo], keywords: Mapping[str, ArgInfo],
              span: Span | None) -> BoundArgs:
    """Match a call's arguments to the parameters, fill defaults and check parameter kinds."""
    name = builtin.name
    params = builtin.params
    given: dict[str, ArgInfo] = {}
    pos_params = [p for p in params if not p.keyword_only]
    varargs: tuple[ArgInfo, ...] = ()
    if len(positional) > len(pos_params):
        if builtin.variadic:
            varargs = tuple(positional[len(pos_params):])
        else:
            extra = positional[len(pos_params)]
            raise TileSemanticError.at(
                "E0502", f"`{name}` takes at most {len(pos_params)} positional argument"
                         f"{'s' if len(pos_params) != 1 else ''}, found {len(positional)}",
                extra.span or span, help=f"the signature is `{builtin.signature()}`")
    for p, a in zip(pos_params, positional):
        given[p.name] = a
    by_name = {p.name: p for p in params}
    for kw, a in keywords.items():
        if kw not in by_name:
            raise TileSemanticError.at(
                "E0504", f"`{name}` has no parameter `{kw}`", a.span or span,
                help=f"the signature is `{builtin.signature()}`")
        if kw in given:
            raise TileSemanticError.at(
                "E0504", f"`{name}`: parameter `{kw}` is given twice", a.span or span)
        given[kw] = a
    bound: dict[str, ArgInfo | None] = {}
    for p in params:
        a = given.get(p.name)
        if a is None:
            if p.default is REQUIRED:
                raise TileSemanticError.at(
                    "E0503", f"`{name}` is missing the argument `{p.name}`", span,
                    help=f"the signature is `{builtin.signature()}`")
            if p.default is ABSENT:
                bound[p.name] = None
                continue
            a = (arg_of_dtype(p.default, None) if isinstance(p.default, DType)
                 else arg_of_const(p.default, None))
        _check_kind(builtin, p, a, span)
        bound[p.name] = a
    b = BoundArgs(builtin, bound, varargs, span)
    if builtin.scalar_only:
        for pname, a in list(bound.items()) + [(builtin.variadic, v) for v in varargs]:
            if a is not None and isinstance(a.type, TileType) and a.type.shape:
                raise TileSemanticError.at(
                    "E0510", f"`{name}`: parameter `{pname}` must be a scalar, found "
                             f"{a.type}", a.span or span)
    return b


def _check_kind(builtin: Builtin, p: Param, a: ArgInfo, span: Span | None) -> None:
    if p.kind == CONST and a.const is None:
        raise TileSemanticError.at(
            "E0505", f"`{builtin.name}`: parameter `{p.name}` must be a constant, found "
                     f"{found(a)}", a.span or span,
            help="use a literal, a `const` item or a `const` parameter")
    if p.kind == DTYPE and not isinstance(a.type, DTypeType):
        raise TileSemanticError.at(
            "E0506", f"`{builtin.name}`: parameter `{p.name}` must be a dtype such as `f32`, "
                     f"found {found(a)}", a.span or span)
    if p.kind == FN and not isinstance(a.type, CombineType):
        raise TileSemanticError.at(
            "E0530", f"`{builtin.name}`: parameter `{p.name}` must be a function of two "
                     f"elements, such as a `fn` or `maximum`, found {found(a)}", a.span or span,
            help="name a `fn` (or a built-in) without calling it: `reduce(x, add, axis=0)`")
    if p.kind == STRING_KIND and not isinstance(a.const, ConstStr):
        raise TileSemanticError.at(
            "E0506", f"`{builtin.name}`: parameter `{p.name}` must be a string literal, "
                     f"found {found(a)}", a.span or span)


# ---------------------------------------------------------------------------------------------
# Helpers for typing rules

def found(a: ArgInfo) -> str:
    """How an argument is named in a message: its source text, else its value or type."""
    sp = a.span
    if sp is not None and sp.end_line == sp.line:
        line = source_line(sp.file, sp.line)
        if line is not None and sp.end_col > sp.col:
            text = line[sp.col - 1: sp.end_col - 1]
            if text.strip():
                return f"`{text}`"
    if a.const is not None:
        return f"`{a.const}`"
    return f"a value of type {a.type}"


def found_typed(a: ArgInfo) -> str:
    """Like `found`, always mentioning the type: "`x` of type Tile[f32, 4]"."""
    text = found(a)
    return text if text.startswith("a value of type") else f"{text} of type {a.type}"


def fail(code: str, bound: BoundArgs, param: str | None, message: str,
         span: Span | None, help: str | None = None) -> TileSemanticError:
    """An error about one parameter of the call (pointing at that argument when possible)."""
    a = bound.args.get(param) if param else None
    where = (a.span if a is not None and a.span is not None else span)
    sym = bound.builtin.symbol
    if sym is not None and bound.builtin.group == "operator":  # operators speak of operands: "the left operand of `+` cannot be tf32"
        unary = len(bound.builtin.params) == 1
        side = "" if unary else ("left " if param == "a" else "right ")
        prefix = f"the {side}operand of `{sym.lstrip('u') or sym}` " if param else ""
    else:
        prefix = f"`{bound.builtin.name}`: " + (f"parameter `{param}` " if param else "")
    return TileSemanticError.at(code, prefix + message, where, help=help)


def arg(bound: BoundArgs, name: str) -> ArgInfo:
    a = bound.args.get(name)
    assert a is not None, f"{bound.builtin.name}: {name} is absent"
    return a


def tile_of(bound: BoundArgs, name: str, span: Span | None, *,
            allow_loose: bool = True) -> TileType | ConstValue:
    """A tile-or-scalar argument: its TileType, or the ConstValue of a loose constant."""
    a = arg(bound, name)
    if isinstance(a.type, TileType):
        return a.type
    if isinstance(a.type, LooseType) and allow_loose and isinstance(a.const, ConstValue):
        return a.const
    raise fail("E0506", bound, name, f"must be a tile or scalar, found {found_typed(a)}",
                   span)


def tile_arg(bound: BoundArgs, name: str, span: Span | None) -> TileType:
    """A tile/scalar argument with a dtype (a loose constant takes its default dtype)."""
    t = tile_of(bound, name, span)
    if isinstance(t, ConstValue):
        from tilelang.sema.promotion import promote_loose
        from tilelang.sema.types import BOOL
        return scalar(promote_loose(BOOL, t.loose_kind))
    return t


def operand(t: TileType | ConstValue) -> DType | ConstValue:
    return t.dtype if isinstance(t, TileType) else t


def shape_of(t: TileType | ConstValue) -> tuple[Dim, ...]:
    return t.shape if isinstance(t, TileType) else ()


def array_arg(bound: BoundArgs, name: str, span: Span | None) -> ArrayType:
    a = arg(bound, name)
    if not isinstance(a.type, ArrayType):
        raise fail("E0506", bound, name, f"must be an array (a kernel parameter of type "
                                         f"`Array[...]`), found {found_typed(a)}",
                   span)
    return a.type


def dtype_arg(bound: BoundArgs, name: str) -> DType:
    t = arg(bound, name).type
    assert isinstance(t, DTypeType)
    return t.dtype


def const_int(bound: BoundArgs, name: str, span: Span | None) -> int:
    a = arg(bound, name)
    c = a.const
    if isinstance(c, ConstValue) and isinstance(c.value, int) \
            and not isinstance(c.value, bool):
        return c.value
    raise fail("E0507", bound, name, f"must be a constant integer, found {found(a)}", span)


def const_bool(bound: BoundArgs, name: str, span: Span | None) -> bool:
    a = arg(bound, name)
    c = a.const
    if isinstance(c, ConstValue) and isinstance(c.value, bool):
        return c.value
    raise fail("E0507", bound, name, f"must be `true` or `false`, found {found(a)}", span)


def const_dims(bound: BoundArgs, name: str, span: Span | None,
               allow_sym: bool = True) -> tuple[Dim, ...]:
    """A constant tuple of integers (a `Sym` element stands for an unspecialized const)."""
    a = arg(bound, name)
    c = a.const
    if isinstance(c, ConstValue) and not isinstance(c.value, (bool, float)):
        c = ConstTuple((c,))  # `shape = 128` is accepted as `(128,)`
    if isinstance(c, ConstTuple):
        out: list[Dim] = []
        for item in c.items:
            v = item.value if isinstance(item, ConstValue) else None
            if isinstance(v, Sym) and allow_sym:
                out.append(v)
            elif isinstance(v, int) and not isinstance(v, bool):
                out.append(v)
            else:
                break
        else:
            return tuple(out)
    raise fail("E0507", bound, name, f"must be a tuple of constant integers, found {found(a)}"
               + _float_note(c), span, help=_float_help(a, c))


def _first_float(c) -> tuple[int, float] | None:
    """The first float element of a constant (tuple), with its position."""
    items = c.items if isinstance(c, ConstTuple) else (c,)
    for i, item in enumerate(items):
        if isinstance(item, ConstValue) and isinstance(item.value, float):
            return i, item.value
    return None


def _float_note(c) -> str:
    got = _first_float(c)
    if got is None:
        return ""
    i, v = got
    return f" (element {i} is the float {v!r})" if isinstance(c, ConstTuple) else \
        f" (the float {v!r})"


def _float_help(a: ArgInfo, c) -> str | None:
    """`/` always divides to a float (docs/language.md §8.4); say how to stay integral."""
    if _first_float(c) is None:
        return None
    if "/" in found(a):
        return ("`/` divides to a float even between integers; use `floordiv(a, b)` (or "
                "`cdiv(a, b)` to round up) for an integer: `//` starts a comment in Tile")
    return "shape dimensions are integers: write integer constants, or convert with `i32(...)`"


def shape_param(bound: BoundArgs, name: str, dtype: DType, span: Span | None,
                rank: int | None = None) -> tuple[Dim, ...]:
    """A constant tile shape: a tuple of power-of-two integers, of `rank` entries if given."""
    dims = const_dims(bound, name, span)
    if rank is not None and len(dims) != rank:
        raise fail("E0509", bound, name, f"has {len(dims)} dimension{'s' if len(dims) != 1 else ''}"
                                         f" but must have {rank}", span)
    a = arg(bound, name)
    try:
        return check_shape(dtype, dims, a.span or span)
    except TileSemanticError as e:
        d = e.diagnostics[0]
        raise TileSemanticError.at(
            d.code, f"`{bound.builtin.name}`: parameter `{name}`: {d.message}", d.span,
            help=d.help) from None


def norm_axis(bound: BoundArgs, name: str, axis: int, rank: int, span: Span | None,
              extra: int = 0) -> int:
    """Normalize a possibly negative axis for a rank (`extra` allows one past the end)."""
    n = rank + extra
    if not -n <= axis < n:
        raise fail("E0507", bound, name, f"is {axis}, out of range for a tile of rank {rank}",
                   span, help=f"axes go from {-n} to {n - 1}" if n else "a scalar has no axes")
    return axis % n if n else 0


def int_scalar(bound: BoundArgs, name: str, a: ArgInfo, span: Span | None,
               what: str | None = None) -> None:
    """Check an argument is an integer scalar (run-time or constant)."""
    t = a.type
    ok = (isinstance(t, TileType) and not t.shape and t.dtype.is_int) or \
        (isinstance(t, LooseType) and t.kind == "int")
    if not ok:
        where = a.span or arg(bound, name).span or span
        raise TileSemanticError.at(
            "E0506", f"`{bound.builtin.name}`: {what or f'parameter `{name}`'} must be an "
                     f"integer scalar, found {found_typed(a)}", where)


def tuple_elements(bound: BoundArgs, name: str, span: Span | None) -> tuple[ArgInfo, ...]:
    """The elements of a tuple argument (a lone scalar counts as a 1-tuple)."""
    a = arg(bound, name)
    if a.elements is not None:
        return a.elements
    if isinstance(a.type, TupleType):
        consts = a.const.items if isinstance(a.const, ConstTuple) else (None,) * len(
            a.type.elements)
        return tuple(ArgInfo(t, c, a.span) for t, c in zip(a.type.elements, consts))
    return (a,)


def common_dtype(bound: BoundArgs, names: list[str], span: Span | None) -> DType | None:
    """The promoted dtype of several operands (loose constants checked to fit)."""
    ops = [operand(tile_of(bound, n, span)) for n in names]
    acc = ops[0]
    for o in ops[1:]:
        acc_dt = operand_dtype(acc, o, span)
        if acc_dt is not None:
            acc = acc_dt
        elif isinstance(acc, ConstValue) and isinstance(o, ConstValue):
            acc = acc if acc.loose_kind == "float" else o  # loose ⊕ loose: float wins
    if isinstance(acc, ConstValue):
        return None
    # re-check loose constants against the final dtype (an early one may have met a narrower)
    for o in ops:
        if isinstance(o, ConstValue) and o.is_loose:
            materialize(o, acc, span)
        elif isinstance(o, DType):
            promote(o, acc, span)
    return acc


def common_shape(bound: BoundArgs, names: list[str], span: Span | None) -> tuple[Dim, ...]:
    return broadcast_all([shape_of(tile_of(bound, n, span)) for n in names], span)


# ---------------------------------------------------------------------------------------------
# The registry tables, filled by the group modules at import time.

REGISTRY: dict[str, Builtin] = {}
OPERATOR_TABLE: dict[str, Builtin] = {}  # keyed by spelling: "+", "u-", "@", "not", ...


def register(b: Builtin) -> Builtin:
    assert b.name not in REGISTRY, f"built-in {b.name} registered twice"
    REGISTRY[b.name] = b
    return b


def register_operator(key: str, b: Builtin) -> Builtin:
    assert key not in OPERATOR_TABLE, f"operator {key} registered twice"
    OPERATOR_TABLE[key] = b
    return b
