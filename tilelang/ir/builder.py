"""Building Tile IR conveniently (tests by hand, the AST lowering for real).

    kb = KernelBuilder("vadd", attributes={"maxntid": (256, 1, 1)})
    a, c = kb.param("a", ArrayType(F32, 1)), kb.param("c", ArrayType(F32, 1))
    i = kb.op("bid", 0)
    x = kb.op("load", a, index=(i,), shape=(1024,), padding=0.0)
    kb.op("store", c, index=(i,), tile=kb.op("+", x, x))
    kernel = kb.finish()

`op(name, *positional, **keywords)` binds like a source call: Python ints/floats are loose
literals, tuples mixing values and constants are tuple arguments, dtypes are dtypes. The
lowering, which already has the checker's `BoundArgs`, calls `call_bound(bound, values)` with
the IR value of each run-time argument; constant arguments come from the ArgInfo's `const`.

Regions are entered with context managers and closed with `end()`:

    ifb = b.if_(cond)                 loop = b.for_(lo, hi, step, init=(acc0,))
    with ifb.then_(): b.yield_(x)     with loop.body() as (k, acc): ...; b.yield_(acc2)
    with ifb.else_(): b.yield_(y)     (acc_out,) = loop.end()
    (r,) = ifb.end()
                                      w = b.while_(init=(x0,))
                                      with w.cond() as (x,): b.condition(pred)
                                      with w.body() as (x,): ...; b.yield_(x2)
                                      (x_out,) = w.end()
A region left without a terminator gets an empty `yield` when nothing is carried.
"""

from __future__ import annotations

import itertools
from contextlib import contextmanager
from typing import Any, Iterator, Mapping, Sequence

from tilelang.diagnostics import Span
from tilelang.sema.builtins_core import BoundArgs, Builtin, DTypeType
from tilelang.sema.constants import ConstValue, loose, materialize
from tilelang.sema.types import I32, ArrayType, DType, TileType, TupleType, Type, VoidType, scalar

from tilelang.ir.args import Arg, make_arg
from tilelang.ir.op_typing import bind_args
from tilelang.ir.ops import (Block, BreakOp, BuiltinOp, ConditionOp, ConstantOp, ContinueOp,
                             ForOp, IfOp, IRModule, Kernel, Op, ReturnOp, WhileOp, YieldOp,
                             builtin_key, resolve_builtin)
from tilelang.ir.values import Value


class IRBuildError(Exception):
    """The builder was used in a way that cannot give well-formed IR."""


class Builder:
    """Emits ops into the innermost open region. Share one id counter per module so value
    ids stay unique (`Builder(ids=other.ids)`)."""

    def __init__(self, ids: Iterator[int] | None = None):
        self.ids = ids if ids is not None else itertools.count()
        self._stack: list[list[Op]] = [[]]
        self._consts: dict[Value, ConstValue] = {}

    # -- values and emission -----------------------------------------------------------------
    def new_value(self, type: Type, hint: str = "") -> Value:
        return Value(next(self.ids), type, hint)

    def emit(self, op: Op) -> Op:
        ops = self._stack[-1]
        if ops and ops[-1].is_terminator:
            raise IRBuildError(f"emitting {type(op).__name__} after the region's terminator")
        ops.append(op)
        return op

    def constant(self, value: Any, dtype: DType, span: Span | None = None) -> Value:
        """A strict scalar constant value of `dtype` (range-checked like the checker does)."""
        c = value if isinstance(value, ConstValue) else ConstValue(value)
        c = materialize(c, dtype, span)
        v = self.new_value(scalar(dtype))
        self.emit(ConstantOp(v, c, span))
        self._consts[v] = c
        return v

    def _const_of(self, v: Value) -> ConstValue | None:
        return self._consts.get(v)

    def op(self, name: str | Builtin, *positional, span: Span | None = None,
           **keywords) -> Value | None:
        """A registry call; returns its result value (None for `store`, `print`, ...).
        Raises the registry's TileSemanticError when the arguments do not type."""
        b = name if isinstance(name, Builtin) else resolve_builtin(name)
        named = [p for p in b.params if not p.keyword_only]
        args: dict[str, Arg] = {}
        varargs: list[Arg] = []
        for i, x in enumerate(positional):
            if i < len(named):
                args[named[i].name] = make_arg(x)
            elif b.variadic:
                varargs.append(make_arg(x))
            else:
                raise IRBuildError(f"`{b.name}` takes {len(named)} positional arguments")
        for k, x in keywords.items():
            if x is not None:
                args[k] = make_arg(x)
        return self._emit_builtin(b, args, tuple(varargs), span)

    def call_bound(self, bound: BoundArgs, values: Mapping[str, Arg],
                   varargs: Sequence[Arg] | None = None, span: Span | None = None
                   ) -> Value | None:
        """Lower a call the checker bound: `values` gives the IR argument of each parameter
        that has a run-time part (a Value, or a TupleArg of values and constants); every other
        bound parameter is taken from its ArgInfo's constant or dtype. `varargs` likewise
        (default: all constant)."""
        args: dict[str, Arg] = {}
        for name, info in bound.args.items():
            if info is None:
                continue
            if name in values:
                args[name] = make_arg(values[name])
            elif isinstance(info.type, DTypeType):
                args[name] = info.type.dtype
            elif info.const is not None:
                args[name] = info.const
            else:
                raise IRBuildError(f"`{bound.builtin.name}`: no IR value given for the "
                                   f"run-time argument `{name}`")
        if varargs is None:
            if any(v.const is None for v in bound.varargs):
                raise IRBuildError(f"`{bound.builtin.name}`: no IR values given for varargs")
            va = tuple(v.const for v in bound.varargs)  # type: ignore[misc]
        else:
            va = tuple(make_arg(v) for v in varargs)
        return self._emit_builtin(bound.builtin, args, va, span or bound.span)

    def _emit_builtin(self, b: Builtin, args: dict[str, Arg], varargs: tuple[Arg, ...],
                      span: Span | None) -> Value | tuple | None:
        ordered = tuple((p.name, args.pop(p.name)) for p in b.params if p.name in args)
        if args:
            raise IRBuildError(f"`{b.name}` has no parameter `{next(iter(args))}`")
        bound = bind_args(b, ordered, varargs, self._const_of, span)
        t = b.result_type(bound, span)
        if isinstance(t, TupleType) and any(p.name == "part" for p in b.params):
            # a tuple result (`reduce` of a tuple of tiles): one op per element, the same
            # arguments and `part=k`; the code generator computes them once (lower/combine.py)
            return tuple(self._emit_builtin(b, dict(ordered, part=loose(k)), varargs,
                                            span) for k in range(len(t.elements)))
        if isinstance(t, VoidType):
            result = None
        elif isinstance(t, (TileType, ArrayType)):     # an array: `list_item` (`ws[e]`)
            result = self.new_value(t)
        else:
            raise IRBuildError(f"`{b.name}` gives {t}, which is not a run-time value: fold "
                               f"it while lowering (loose results are constants)")
        self.emit(BuiltinOp(builtin_key(b), ordered, varargs, result, span))
        return result

    # -- terminators ---------------------------------------------------------------------------
    def yield_(self, *values: Value, span: Span | None = None) -> None:
        self.emit(YieldOp(tuple(values), span))

    def break_(self, *values: Value, span: Span | None = None) -> None:
        self.emit(BreakOp(tuple(values), span))

    def continue_(self, *values: Value, span: Span | None = None) -> None:
        self.emit(ContinueOp(tuple(values), span))

    def condition(self, cond: Value, span: Span | None = None) -> None:
        self.emit(ConditionOp((cond,), span))

    def return_(self, span: Span | None = None) -> None:
        self.emit(ReturnOp((), span))

    # -- regions -------------------------------------------------------------------------------
    @contextmanager
    def _region(self, args: tuple[Value, ...], sink: list, auto_yield: bool):
        self._stack.append([])
        try:
            yield args
        finally:
            ops = self._stack.pop()
        if auto_yield and (not ops or not ops[-1].is_terminator):
            ops.append(YieldOp())
        sink.append(Block(args, tuple(ops)))

    def _scalar(self, x: Value | int, like: Type | None) -> Value:
        if isinstance(x, Value):
            return x
        dt = like.dtype if isinstance(like, TileType) else I32
        return self.constant(x, dt)

    def if_(self, cond: Value, result_types: Sequence[Type] | None = None,
            span: Span | None = None) -> "IfBuilder":
        return IfBuilder(self, cond, result_types, span)

    def for_(self, start: Value | int, stop: Value | int, step: Value | int = 1,
             init: Sequence[Value] = (), span: Span | None = None,
             hints: Sequence[str] = ()) -> "LoopBuilder":
        like = next((x.type for x in (start, stop, step) if isinstance(x, Value)), None)
        lo, hi, st = (self._scalar(x, like) for x in (start, stop, step))
        iv = self.new_value(lo.type, "i")
        carried = tuple(self.new_value(v.type, h) for v, h in
                        itertools.zip_longest(init, hints[:len(init)], fillvalue=""))
        return LoopBuilder(self, (lo, hi, st), tuple(init), (iv,) + carried, span)

    def while_(self, init: Sequence[Value] = (), span: Span | None = None) -> "WhileBuilder":
        return WhileBuilder(self, tuple(init), span)

    def _result_values(self, types: Sequence[Type]) -> tuple[Value, ...]:
        return tuple(self.new_value(t) for t in types)


def _yield_types(blocks: Sequence[Block]) -> tuple[Type, ...] | None:
    for b in blocks:
        t = b.terminator
        if isinstance(t, YieldOp):
            return tuple(v.type for v in t.values)
    return None


class IfBuilder:
    def __init__(self, b: Builder, cond: Value, result_types, span):
        self.b, self.cond, self.span = b, cond, span
        self.result_types = tuple(result_types) if result_types is not None else None
        self._then: list[Block] = []
        self._else: list[Block] = []

    def then_(self):
        return self.b._region((), self._then, auto_yield=not self.result_types)

    def else_(self):
        return self.b._region((), self._else, auto_yield=not self.result_types)

    def end(self) -> tuple[Value, ...]:
        if not self._then:
            raise IRBuildError("if without a then region")
        else_ = self._else[0] if self._else else Block((), (YieldOp(),))
        types = self.result_types
        if types is None:
            types = _yield_types([self._then[0], else_]) or ()
        results = self.b._result_values(types)
        self.b.emit(IfOp(self.cond, self._then[0], else_, results, self.span))
        return results


class LoopBuilder:
    def __init__(self, b: Builder, bounds, init, args, span):
        self.b, self.bounds, self.init, self.args, self.span = b, bounds, init, args, span
        self._body: list[Block] = []

    def body(self):
        """Context manager giving (iv, *carried)."""
        return self.b._region(self.args, self._body, auto_yield=not self.init)

    def end(self) -> tuple[Value, ...]:
        results = self.b._result_values([v.type for v in self.init])
        lo, hi, st = self.bounds
        self.b.emit(ForOp(lo, hi, st, self.init, self._body[0], results, self.span))
        return results


class WhileBuilder:
    def __init__(self, b: Builder, init, span):
        self.b, self.init, self.span = b, init, span
        self._cond: list[Block] = []
        self._body: list[Block] = []

    def _args(self) -> tuple[Value, ...]:
        return tuple(self.b.new_value(v.type, v.hint) for v in self.init)

    def cond(self):
        """Context manager giving the carried values; end with `condition(pred)`."""
        return self.b._region(self._args(), self._cond, auto_yield=False)

    def body(self):
        return self.b._region(self._args(), self._body, auto_yield=not self.init)

    def end(self) -> tuple[Value, ...]:
        results = self.b._result_values([v.type for v in self.init])
        self.b.emit(WhileOp(self.init, self._cond[0], self._body[0], results, self.span))
        return results


class KernelBuilder(Builder):
    def __init__(self, name: str, attributes: Mapping[str, Any] | None = None,
                 span: Span | None = None, ids: Iterator[int] | None = None,
                 launch: Any = None):
        super().__init__(ids)
        self.name, self.attributes, self.span = name, dict(attributes or {}), span
        self.launch = launch
        self.const_choices: tuple = ()
        self.params: list[Value] = []

    def param(self, name: str, type: Type) -> Value:
        v = self.new_value(type, name)
        self.params.append(v)
        return v

    def finish(self) -> Kernel:
        if len(self._stack) != 1:
            raise IRBuildError("a region is still open")
        ops = self._stack[0]
        if not ops or not ops[-1].is_terminator:
            ops.append(ReturnOp())
        return Kernel(self.name, tuple(self.params), Block((), tuple(ops)), self.attributes,
                      self.span, self.launch, self.const_choices)


def module(*kernels: Kernel) -> IRModule:
    return IRModule(tuple(kernels))

