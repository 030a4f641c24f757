"""Arguments of a `BuiltinOp`, and their translation back to the checker's `ArgInfo`.

An argument is what the checker bound to one registry parameter:
- a `Value` (a run-time tile or scalar, or an array parameter);
- a constant: `ConstValue` (loose or strict), `ConstTuple` (`shape=(128, 64)`), `ConstStr`
  (messages), or a `DType` (`astype(x, f16)`);
- a `TupleArg` of arguments, for tuples that hold run-time values (`index=(%m, 0)`);
- a `FnArg`: a function argument inlined as a region of its own (`reduce`'s combine).
Keeping constants inline (rather than as values) means re-typing an op from its arguments gives
exactly the checker's answer: loose literals stay loose, shapes stay constant.
"""

from __future__ import annotations

from typing import Callable, Iterator, Union

from tilelang.sema.builtins_core import ArgInfo, CombineType, arg_of_const, arg_of_dtype
from tilelang.sema.constants import ConstStr, ConstTuple, ConstValue, loose
from tilelang.sema.types import DType, TupleType

from tilelang.ir.values import Value
from tilelang.record import record


@record(frozen=True)
class FnArg:
    """A function argument (`reduce`'s combine), inlined: `body` is a region (ir.ops.Block)
    whose arguments are two states' scalars (first the left state's, then the right's) and
    which yields the combined state's scalars. It uses nothing from outside (a function sees
    only its parameters and constants), so its values are not the op's operands."""

    type: CombineType
    body: object


@record(frozen=True)
class TupleArg:
    """A tuple argument with at least one run-time element."""

    items: tuple["Arg", ...]


Const = Union[ConstValue, ConstTuple, ConstStr]
Arg = Union[Value, ConstValue, ConstTuple, ConstStr, DType, TupleArg, FnArg]

# How a value defined by a ConstantOp is known to be constant (None: not constant).
ConstOf = Callable[[Value], Union[ConstValue, None]]


def _no_const(v: Value) -> None:
    return None


def make_arg(x) -> Arg:
    """An argument from builder-friendly Python: ints/floats become loose constants, bools
    strict bools, strings messages, tuples `ConstTuple` when all-constant else `TupleArg`."""
    if isinstance(x, (Value, ConstValue, ConstTuple, ConstStr, DType, TupleArg, FnArg)):
        return x
    if isinstance(x, bool):
        return ConstValue(x)
    if isinstance(x, (int, float)):
        return loose(x)
    if isinstance(x, str):
        return ConstStr(x)
    if isinstance(x, (tuple, list)):
        items = tuple(make_arg(i) for i in x)
        if all(isinstance(i, (ConstValue, ConstTuple)) for i in items):
            return ConstTuple(items)  # type: ignore[arg-type]
        return TupleArg(items)
    raise TypeError(f"cannot use {x!r} as an IR argument")


def arg_values(a: Arg) -> Iterator[Value]:
    """The SSA values an argument uses, in order."""
    if isinstance(a, Value):
        yield a
    elif isinstance(a, TupleArg):
        for i in a.items:
            yield from arg_values(i)


def map_arg(a: Arg, f: Callable[[Value], Value]) -> Arg:
    if isinstance(a, Value):
        return f(a)
    if isinstance(a, TupleArg):
        return TupleArg(tuple(map_arg(i, f) for i in a.items))
    return a


def arg_info(a: Arg, const_of: ConstOf = _no_const) -> ArgInfo:
    """The `ArgInfo` the checker would have had for this argument."""
    if isinstance(a, Value):
        return ArgInfo(a.type, const_of(a))
    if isinstance(a, DType):
        return arg_of_dtype(a)
    if isinstance(a, FnArg):
        return ArgInfo(a.type)
    if isinstance(a, TupleArg):
        elems = tuple(arg_info(i, const_of) for i in a.items)
        consts = [e.const for e in elems]
        c = ConstTuple(tuple(consts)) if all(isinstance(x, ConstValue) for x in consts) \
            else None
        return ArgInfo(TupleType(tuple(e.type for e in elems)), c, None, elems)
    return arg_of_const(a)


def fold_tuple(a: Arg, const_of: ConstOf) -> Arg:
    """`a` with ConstantOp-defined values replaced by their constants (for folding)."""
    if isinstance(a, Value):
        c = const_of(a)
        return c if c is not None else a
    if isinstance(a, TupleArg):
        return make_arg(tuple(fold_tuple(i, const_of) for i in a.items))
    return a
