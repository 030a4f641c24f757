"""The IR verifier, run after construction and after every pass.

Checks, per kernel:
- SSA: every value is defined once (op result, block argument or parameter); every use is
  dominated by its definition: defined earlier in the same block or in an enclosing one, never
  inside a region the use is not in;
- every block ends in exactly one terminator, and the terminator fits its region: `yield` of
  an if gives its result types, of a loop body its carried types; `break`/`continue` appear only
  inside a loop body (possibly in nested ifs) and give the loop's carried types; `condition`
  ends a while's cond region with a bool scalar; `return` may appear anywhere;
- `BuiltinOp`: the registry, given the operand types (and the constants of ConstantOp values),
  binds the arguments and gives the op's result type;
- control-flow types: bool scalar conditions, one integer scalar type for a for's bounds and
  induction variable, carried values keeping their types between init, block arguments,
  yields and results.
Messages name the kernel and show the offending op as the printer writes it.
"""

from __future__ import annotations

from typing import Callable

from tilelang.diagnostics import TileError
from tilelang.sema.constants import ConstValue
from tilelang.sema.types import BOOL, TileType, Type, VOID

from tilelang.ir.op_typing import registry_type
from tilelang.ir.ops import (Block, BreakOp, BuiltinOp, ConditionOp, ConstantOp, ContinueOp,
                             ForOp, IfOp, IRModule, Kernel, Op, ReturnOp, WhileOp, YieldOp,
                             walk)
from tilelang.ir.printer import Namer, format_kernel, format_op
from tilelang.ir.values import Value
from tilelang.record import record


class IRVerificationError(Exception):
    """Malformed IR: a compiler bug (or a hand-built kernel's mistake), never a user error."""


@record(frozen=True)
class _Ctx:
    """What a block's terminator must give, and the innermost loop's carried types."""

    region: str                      # kernel | if | loop | cond
    yield_types: tuple[Type, ...] | None
    loop_types: tuple[Type, ...] | None  # None: break/continue not allowed here


def _types(vals: tuple[Value, ...]) -> tuple[Type, ...]:
    return tuple(v.type for v in vals)


def _show(types: tuple[Type, ...]) -> str:
    return "(" + ", ".join(str(t) for t in types) + ")"


class _Verifier:
    def __init__(self, kernel: Kernel, typed: dict | None = None):
        self.kernel = kernel
        self.typed = typed
        self.defined: set[Value] = set()
        self.consts: dict[Value, ConstValue] = {}
        self.all_defs: set[Value] = set(kernel.params)
        for op in walk(kernel.body):
            self.all_defs.update(op.results)
            for r in op.regions:
                self.all_defs.update(r.args)

    def fail(self, op: Op | None, message: Callable[[Namer], str]) -> IRVerificationError:
        name = Namer(self.kernel.params)
        format_kernel(self.kernel, name)  # number values as the dump does
        where = f": `{format_op(op, name)}`" if op is not None else ""
        return IRVerificationError(f"kernel `{self.kernel.name}`{where}: {message(name)}")

    def define(self, op: Op | None, v: Value, scope: set[Value]) -> None:
        if v in self.defined:
            raise self.fail(op, lambda n: f"{n(v)} is defined more than once")
        self.defined.add(v)
        scope.add(v)

    def use(self, op: Op, v: Value, scope: set[Value]) -> None:
        if v in scope:
            return
        if v not in self.all_defs:
            raise self.fail(op, lambda n: f"{n(v)} is used but never defined")
        if v not in self.defined:
            raise self.fail(op, lambda n: f"{n(v)} is used before its definition")
        raise self.fail(op, lambda n: f"{n(v)} is used outside the region that defines it")

    def run(self) -> None:
        scope: set[Value] = set()
        for p in self.kernel.params:
            self.define(None, p, scope)
        self.block(self.kernel.body, scope, _Ctx("kernel", None, None))

    def block(self, block: Block, outer: set[Value], ctx: _Ctx) -> None:
        scope = set(outer)
        for a in block.args:
            self.define(None, a, scope)
        if not block.ops or not block.ops[-1].is_terminator:
            last = block.ops[-1] if block.ops else None
            raise self.fail(last, lambda n: f"a {ctx.region} region does not end in a "
                                            f"terminator")
        for i, op in enumerate(block.ops):
            if op.is_terminator and i != len(block.ops) - 1:
                raise self.fail(op, lambda n: "a terminator is followed by more operations")
            for v in op.operands:
                self.use(op, v, scope)
            self.check(op, scope, ctx)
            for r in op.results:
                self.define(op, r, scope)

    def expect(self, op: Op, what: str, got: tuple[Type, ...], want: tuple[Type, ...]) -> None:
        if got != want:
            raise self.fail(op, lambda n: f"{what} {_show(got)} but {_show(want)} is expected")

    def check(self, op: Op, scope: set[Value], ctx: _Ctx) -> None:
        if isinstance(op, BuiltinOp):
            self.check_builtin(op)
        elif isinstance(op, ConstantOp):
            c = op.value
            if c.dtype is None or op.result.type != TileType(c.dtype, ()):
                raise self.fail(op, lambda n: f"constant {c} does not have the type "
                                              f"{op.result.type}")
            self.consts[op.result] = c
        elif isinstance(op, IfOp):
            self.bool_scalar(op, op.cond, "the condition")
            inner = _Ctx("if", _types(op.results), ctx.loop_types)
            self.block(op.then, scope, inner)
            self.block(op.else_, scope, inner)
        elif isinstance(op, ForOp):
            t = op.start.type
            if not (isinstance(t, TileType) and t.is_scalar and t.dtype.is_int):
                raise self.fail(op, lambda n: f"loop bounds must be integer scalars, found {t}")
            self.expect(op, "the bounds and induction variable have types",
                        (op.stop.type, op.step.type) + _types(op.body.args[:1]), (t, t, t))
            self.carried(op, op.init, op.body.args[1:], op.results)
            self.block(op.body, scope, _Ctx("loop", _types(op.init), _types(op.init)))
        elif isinstance(op, WhileOp):
            self.carried(op, op.init, op.cond.args, op.results)
            self.expect(op, "the body's arguments have types", _types(op.body.args),
                        _types(op.init))
            self.block(op.cond, scope, _Ctx("cond", None, None))
            self.block(op.body, scope, _Ctx("loop", _types(op.init), _types(op.init)))
        elif isinstance(op, YieldOp):
            if ctx.yield_types is None:
                raise self.fail(op, lambda n: f"`yield` cannot end a {ctx.region} region")
            self.expect(op, "yields", _types(op.values), ctx.yield_types)
        elif isinstance(op, (BreakOp, ContinueOp)):
            word = "break" if isinstance(op, BreakOp) else "continue"
            if ctx.loop_types is None:
                raise self.fail(op, lambda n: f"`{word}` outside a loop body")
            self.expect(op, f"`{word}` gives", _types(op.values), ctx.loop_types)
        elif isinstance(op, ConditionOp):
            if ctx.region != "cond":
                raise self.fail(op, lambda n: "`condition` outside a while's cond region")
            if len(op.values) != 1:
                raise self.fail(op, lambda n: "`condition` takes one bool scalar")
            self.bool_scalar(op, op.values[0], "the condition")
        elif isinstance(op, ReturnOp):
            if op.values:
                raise self.fail(op, lambda n: "kernels return no values")
        else:
            raise self.fail(None, lambda n: f"unknown operation {type(op).__name__}")

    def carried(self, op: Op, init, args, results) -> None:
        want = _types(init)
        self.expect(op, "the carried block arguments have types", _types(args), want)
        self.expect(op, "the results have types", _types(results), want)

    def bool_scalar(self, op: Op, v: Value, what: str) -> None:
        if v.type != TileType(BOOL, ()):
            raise self.fail(op, lambda n: f"{what} {n(v)} is {v.type}, not a bool scalar")

    def check_builtin(self, op: BuiltinOp) -> None:
        try:
            b = op.builtin
        except KeyError:
            raise self.fail(op, lambda n: f"`{op.name}` is not in the registry") from None
        t = self.known_type(op)
        if t is None:
            consulted: list[tuple[Value, ConstValue | None]] = []

            def const_of(v: Value) -> ConstValue | None:
                c = self.consts.get(v)
                consulted.append((v, c))
                return c

            try:
                t = registry_type(op, const_of)
            except TileError as e:
                msg = e.diagnostics[0].message
                raise self.fail(op, lambda n: f"the registry rejects the operand types: "
                                              f"{msg}") from None
            if self.typed is not None:
                self.typed[id(op)] = (op, tuple(consulted), t)
        if t != op.result_type:
            raise self.fail(op, lambda n: f"the result type is {op.result_type} but "
                                          f"`{b.name}` gives {t}")
        if op.result is not None and op.result_type == VOID:
            raise self.fail(op, lambda n: "a void operation has a result")

    def known_type(self, op: BuiltinOp) -> Type | None:
        """The registry's type for this very op object from an earlier run over the same
        `typed` table, when the constants it consulted are still the same objects: most ops
        pass through a pass untouched, and re-typing every op through the registry was most
        of each verification (the pass manager verifies five times per compile)."""
        if self.typed is None:
            return None
        hit = self.typed.get(id(op))
        if hit is None or hit[0] is not op:
            return None
        consts = self.consts
        for v, c in hit[1]:
            if consts.get(v) is not c:
                return None
        return hit[2]


def verify_kernel(kernel: Kernel, typed: dict | None = None) -> None:
    _Verifier(kernel, typed).run()


def verify(module: IRModule, typed: dict | None = None) -> IRModule:
    """Raise IRVerificationError on the first problem; return the module unchanged. `typed`
    (a dict the caller keeps across calls, e.g. between passes) remembers the registry's
    result type of each op object checked, keyed by `id` (the op is held, so the id stays
    its own); an op seen before with the same constants is not re-typed."""
    names = [k.name for k in module.kernels]
    if len(set(names)) != len(names):
        raise IRVerificationError("two kernels share a name")
    for k in module.kernels:
        verify_kernel(k, typed)
    return module
