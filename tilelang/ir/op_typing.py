"""Re-typing a `BuiltinOp` through the registry: rebuild the checker's `ArgInfo`s from the
op's arguments, bind them (`bind_call`) and ask the entry's typing rule. The verifier checks the
answer against the op's result type; the folder and the interpreter reuse the `BoundArgs`."""

from __future__ import annotations

from tilelang.diagnostics import Span
from tilelang.sema.builtins_core import ArgInfo, Builtin, BoundArgs, bind_call
from tilelang.sema.types import Type

from tilelang.ir.args import Arg, ConstOf, _no_const, arg_info
from tilelang.ir.ops import BuiltinOp


def bind_args(builtin: Builtin, args: tuple[tuple[str, Arg], ...], varargs: tuple[Arg, ...],
              const_of: ConstOf = _no_const, span: Span | None = None) -> BoundArgs:
    """`bind_call` over IR arguments. Named parameters go by keyword; with a variadic entry
    the named (all positional) parameters go first, positionally, then the tail."""
    infos = {name: arg_info(a, const_of) for name, a in args}
    if builtin.variadic:
        positional: list[ArgInfo] = [infos.pop(p.name) for p in builtin.params
                                     if not p.keyword_only and p.name in infos]
        positional += [arg_info(a, const_of) for a in varargs]
        return bind_call(builtin, positional, infos, span)
    return bind_call(builtin, [], infos, span)


def bound_of(op: BuiltinOp, const_of: ConstOf = _no_const) -> BoundArgs:
    return bind_args(op.builtin, op.args, op.varargs, const_of, op.span)


def registry_type(op: BuiltinOp, const_of: ConstOf = _no_const) -> Type:
    """The result type the registry gives this op's arguments (raises TileSemanticError)."""
    b = op.builtin
    return b.result_type(bound_of(op, const_of), op.span)
