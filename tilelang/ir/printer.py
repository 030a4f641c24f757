"""The textual form of Tile IR (`tilec --emit tir`).

    kernel @vadd(%a: Array[f32, 1], %c: Array[f32, 1]) attributes {maxntid = (256, 1, 1)} {
      %0 = bid(0) : i32
      %1 = load(%a, index=(%0,), shape=(1024,), padding=0.0) : Tile[f32, 1024]
      %2 = %1 + %1 : Tile[f32, 1024]
      store(%c, index=(%0,), tile=%2)
      return
    }

Values are numbered in print order (parameters keep their names), so dumps do not depend on
the builder's id counter and golden files stay stable across passes that drop values.
Operators print infix; other entries print their first parameter positionally (all named
parameters for variadic entries such as `print`) and the rest as keywords.
"""

from __future__ import annotations

from typing import Any

from tilelang.sema.constants import ConstStr, ConstTuple, ConstValue
from tilelang.sema.types import DType

from tilelang.ir.args import Arg, FnArg, TupleArg
from tilelang.ir.ops import (Block, BreakOp, BuiltinOp, ConditionOp, ConstantOp, ContinueOp,
                             ForOp, IfOp, IRModule, Kernel, Op, ReturnOp, WhileOp, YieldOp)
from tilelang.ir.values import Value

_BINARY = {"+", "-", "*", "/", "//", "%", "**", "&", "|", "^", "<<", ">>", "==", "!=", "<",
           "<=", ">", ">=", "and", "or"}
_UNARY = {"u-": "-", "u+": "+", "~": "~", "not": "not "}


class Namer:
    """`%name` of each value: parameters by their source name, others numbered on first
    sight (the printer's walk defines them in order)."""

    def __init__(self, params: tuple[Value, ...] = ()):
        self.names: dict[Value, str] = {p: f"%{p.hint or p.id}" for p in params}
        self.next = 0

    def __call__(self, v: Value) -> str:
        n = self.names.get(v)
        if n is None:
            n = self.names[v] = f"%{self.next}"
            self.next += 1
        return n


def format_attr(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, tuple):
        inner = ", ".join(format_attr(x) for x in v)
        return f"({inner},)" if len(v) == 1 else f"({inner})"
    if isinstance(v, str):
        return '"' + v + '"'
    return str(v)


def format_arg(a: Arg, name: Namer) -> str:
    if isinstance(a, Value):
        return name(a)
    if isinstance(a, TupleArg):
        items = [format_arg(i, name) for i in a.items]
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
    if isinstance(a, (ConstValue, ConstTuple, ConstStr, DType)):
        return str(a)
    if isinstance(a, FnArg):          # the inlined combine, on one line
        params = ", ".join(name(v) for v in a.body.args)
        p = _Printer(name)
        p.block(a.body, 0)
        return f"fn({params}) {{ " + "; ".join(p.lines) + " }"
    return repr(a)


def format_builtin(op: BuiltinOp, name: Namer) -> str:
    args = dict(op.args)
    if op.name in _BINARY and len(args) == 2:
        x, y = (format_arg(a, name) for a in args.values())
        text = f"{x} {op.name} {y}"
    elif op.name in _UNARY and len(args) == 1:
        text = _UNARY[op.name] + format_arg(next(iter(args.values())), name)
    else:
        parts = []
        variadic = op.builtin.variadic is not None
        for k, (pname, a) in enumerate(op.args):
            shown = format_arg(a, name)
            parts.append(shown if (k == 0 or variadic) else f"{pname}={shown}")
        parts += [format_arg(a, name) for a in op.varargs]
        text = f"{op.name}({', '.join(parts)})"
    if op.result is not None:
        return f"{name(op.result)} = {text} : {op.result.type}"
    return text


def _results(op: Op, name: Namer) -> str:
    return ", ".join(name(r) for r in op.results) + " = " if op.results else ""


def _types(op: Op) -> str:
    return " -> (" + ", ".join(str(r.type) for r in op.results) + ")" if op.results else ""


def _carry(args: tuple[Value, ...], init: tuple[Value, ...], name: Namer) -> str:
    if not args:
        return ""
    return " carry(" + ", ".join(f"{name(a)} = {name(i)}" for a, i in zip(args, init)) + ")"


class _Printer:
    def __init__(self, name: Namer):
        self.name = name
        self.lines: list[str] = []

    def block(self, block: Block, indent: int) -> None:
        for op in block.ops:
            self.op(op, indent)

    def op(self, op: Op, indent: int) -> None:
        pad = "  " * indent
        n = self.name
        if isinstance(op, BuiltinOp):
            self.lines.append(pad + format_builtin(op, n))
        elif isinstance(op, ConstantOp):
            self.lines.append(f"{pad}{n(op.result)} = constant {op.value.value!r} : "
                              f"{op.result.type}".replace("True", "true").replace(
                                  "False", "false"))
        elif isinstance(op, IfOp):
            self.lines.append(f"{pad}{_results(op, n)}if {n(op.cond)}{_types(op)} {{")
            self.block(op.then, indent + 1)
            self.lines.append(pad + "} else {")
            self.block(op.else_, indent + 1)
            self.lines.append(pad + "}")
        elif isinstance(op, ForOp):
            self.lines.append(
                f"{pad}{_results(op, n)}for {n(op.iv)} in range({n(op.start)}, {n(op.stop)}, "
                f"{n(op.step)}){_carry(op.carried, op.init, n)}{_types(op)} {{")
            self.block(op.body, indent + 1)
            self.lines.append(pad + "}")
        elif isinstance(op, WhileOp):
            self.lines.append(f"{pad}{_results(op, n)}while{_carry(op.cond.args, op.init, n)}"
                              f"{_types(op)} {{")
            self.block(op.cond, indent + 1)
            body_args = ", ".join(n(a) for a in op.body.args)
            self.lines.append(f"{pad}}} do({body_args}) {{" if body_args else pad + "} do {")
            self.block(op.body, indent + 1)
            self.lines.append(pad + "}")
        else:
            word = {YieldOp: "yield", BreakOp: "break", ContinueOp: "continue",
                    ConditionOp: "condition", ReturnOp: "return"}[type(op)]
            vals = ", ".join(n(v) for v in op.operands)
            self.lines.append(pad + word + (" " + vals if vals else ""))


def format_kernel(k: Kernel, name: Namer | None = None) -> str:
    name = name or Namer(k.params)
    params = ", ".join(f"{name(p)}: {p.type}" for p in k.params)
    attrs = ""
    if k.attributes:
        attrs = " attributes {" + ", ".join(f"{key} = {format_attr(v)}"
                                            for key, v in k.attributes.items()) + "}"
    p = _Printer(name)
    p.lines.append(f"kernel @{k.name}({params}){attrs} {{")
    p.block(k.body, 1)
    p.lines.append("}")
    return "\n".join(p.lines) + "\n"


def format_module(m: IRModule) -> str:
    return "\n".join(format_kernel(k) for k in m.kernels)


def format_op(op: Op, name: Namer) -> str:
    """One op's first line (for messages)."""
    p = _Printer(name)
    p.op(op, 0)
    return p.lines[0]
