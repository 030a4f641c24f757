"""Operations, blocks, kernels and modules of the Tile IR.

Structure (docs/ir.md has the full description):
- A `Block` is a list of operations ending in exactly one terminator, with block arguments.
  Every region of a structured op is one block; there is no CFG.
- `BuiltinOp` is the single op for every registry entry (built-ins and operators): it names
  the entry and holds the bound arguments by parameter name, so a new registry entry needs no
  IR change.
- Control flow is structured: `IfOp`, `ForOp`, `WhileOp` carry values through block arguments
  and terminators. `BreakOp` and `ContinueOp` are terminators that leave the innermost
  enclosing loop (break: its results; continue: its next iteration), and may sit inside `IfOp`
  regions nested in that loop; `ReturnOp` ends the kernel for this block of the grid.

All are frozen records (tilelang/record.py: dataclass behaviour without the ~1 ms each that
`@dataclass` costs on every cold compile): passes build new ops with `tilelang.record.replace`.
`span` (source position) is excluded from equality so that CSE and golden comparisons ignore
where an op came from.
"""

from __future__ import annotations

from typing import Any, Iterator, Mapping, Union

from tilelang.diagnostics import Span
from tilelang.record import field, record
from tilelang.sema.builtins import BUILTINS, OPERATORS, Builtin
from tilelang.sema.constants import ConstValue
from tilelang.sema.types import Type, VOID

from tilelang.ir.args import Arg, arg_values
from tilelang.ir.values import Value


def resolve_builtin(name: str) -> Builtin:
    """The registry entry a BuiltinOp names: an operator key ("+", "u-", "not") or a
    built-in name ("load"). Operator keys never collide with built-in names."""
    b = OPERATORS.get(name)
    if b is None:
        b = BUILTINS[name]
    return b


def builtin_key(b: Builtin) -> str:
    """The name a BuiltinOp stores for an entry (`@` is the `matmul` entry)."""
    if BUILTINS.get(b.name) is b:
        return b.name
    for key, entry in OPERATORS.items():
        if entry is b:
            return key
    raise KeyError(f"{b.name} is not a registry entry")


class Op:
    """Common interface: `operands` (values used directly), `results`, `regions`."""

    span: Span | None

    @property
    def operands(self) -> tuple[Value, ...]:
        return ()

    @property
    def results(self) -> tuple[Value, ...]:
        return ()

    @property
    def regions(self) -> tuple["Block", ...]:
        return ()

    is_terminator = False

    def accept(self, visitor: "OpVisitor") -> Any:
        return visitor.visit(self)


@record(frozen=True)
class Block:
    """One region: arguments (loop induction variable, carried values) and operations."""

    args: tuple[Value, ...]
    ops: tuple[Op, ...]

    @property
    def terminator(self) -> Op | None:
        return self.ops[-1] if self.ops and self.ops[-1].is_terminator else None


@record(frozen=True)
class ConstantOp(Op):
    """A strict scalar constant as a value (`i32(0)`, a folded result)."""

    result: Value
    value: ConstValue
    span: Span | None = field(default=None, compare=False)

    @property
    def results(self) -> tuple[Value, ...]:
        return (self.result,)


@record(frozen=True)
class BuiltinOp(Op):
    """A call of registry entry `name` with arguments bound to its parameters (in parameter
    order, absent optionals left out) plus the variadic tail (`print`'s values)."""

    name: str
    args: tuple[tuple[str, Arg], ...]
    varargs: tuple[Arg, ...] = ()
    result: Value | None = None
    span: Span | None = field(default=None, compare=False)

    @property
    def builtin(self) -> Builtin:
        return resolve_builtin(self.name)

    @property
    def arg_map(self) -> Mapping[str, Arg]:
        return dict(self.args)

    @property
    def operands(self) -> tuple[Value, ...]:
        out: list[Value] = []
        for _, a in self.args:
            out.extend(arg_values(a))
        for a in self.varargs:
            out.extend(arg_values(a))
        return tuple(out)

    @property
    def results(self) -> tuple[Value, ...]:
        return (self.result,) if self.result is not None else ()

    @property
    def result_type(self) -> Type:
        return self.result.type if self.result is not None else VOID


@record(frozen=True)
class IfOp(Op):
    """`results = if cond { then... yield } else { else_... yield }`; cond a bool scalar."""

    cond: Value
    then: Block
    else_: Block
    results_: tuple[Value, ...] = ()
    span: Span | None = field(default=None, compare=False)

    @property
    def operands(self) -> tuple[Value, ...]:
        return (self.cond,)

    @property
    def results(self) -> tuple[Value, ...]:
        return self.results_

    @property
    def regions(self) -> tuple[Block, ...]:
        return (self.then, self.else_)


@record(frozen=True)
class ForOp(Op):
    """`for iv in range(start, stop, step)` with carried values. `body.args` is
    (iv, *carried); the body ends in yield/continue (next carried values) or break (results).
    The results are the carried values when the range is exhausted. step <= 0 runs zero
    iterations (language.md)."""

    start: Value
    stop: Value
    step: Value
    init: tuple[Value, ...]
    body: Block
    results_: tuple[Value, ...] = ()
    span: Span | None = field(default=None, compare=False)

    @property
    def operands(self) -> tuple[Value, ...]:
        return (self.start, self.stop, self.step) + self.init

    @property
    def results(self) -> tuple[Value, ...]:
        return self.results_

    @property
    def regions(self) -> tuple[Block, ...]:
        return (self.body,)

    @property
    def iv(self) -> Value:
        return self.body.args[0]

    @property
    def carried(self) -> tuple[Value, ...]:
        return self.body.args[1:]


@record(frozen=True)
class WhileOp(Op):
    """`while` with carried values: `cond` (args: carried) ends in `ConditionOp`; when false
    the loop's results are the carried values. `body` (args: carried) ends in yield/continue
    (next carried values) or break (results)."""

    init: tuple[Value, ...]
    cond: Block
    body: Block
    results_: tuple[Value, ...] = ()
    span: Span | None = field(default=None, compare=False)

    @property
    def operands(self) -> tuple[Value, ...]:
        return self.init

    @property
    def results(self) -> tuple[Value, ...]:
        return self.results_

    @property
    def regions(self) -> tuple[Block, ...]:
        return (self.cond, self.body)


@record(frozen=True)
class _Terminator(Op):
    values: tuple[Value, ...] = ()
    span: Span | None = field(default=None, compare=False)
    is_terminator = True

    @property
    def operands(self) -> tuple[Value, ...]:
        return self.values


@record(frozen=True)
class YieldOp(_Terminator):
    """End of an if branch (its results) or of a loop body (the next carried values)."""


@record(frozen=True)
class BreakOp(_Terminator):
    """Leave the innermost enclosing loop; `values` become its results."""


@record(frozen=True)
class ContinueOp(_Terminator):
    """Start the innermost enclosing loop's next iteration with `values` as carried values."""


@record(frozen=True)
class ConditionOp(_Terminator):
    """End of a while's cond region: `values == (cond,)`, a bool scalar."""


@record(frozen=True)
class ReturnOp(_Terminator):
    """End this block's execution of the kernel (kernels return nothing)."""


TERMINATORS = (YieldOp, BreakOp, ContinueOp, ConditionOp, ReturnOp)
AnyOp = Union[ConstantOp, BuiltinOp, IfOp, ForOp, WhileOp, YieldOp, BreakOp, ContinueOp,
              ConditionOp, ReturnOp]


@record(frozen=True)
class Kernel:
    """A kernel: parameters (arrays and scalars, `hint` is the source name), its body, and
    the launch contract's attributes (NvvmAttrs field → value) that the printer shows."""

    name: str
    params: tuple[Value, ...]
    body: Block
    attributes: Mapping[str, Any] = field(default_factory=dict, hash=False)
    span: Span | None = field(default=None, compare=False)
    # The user's resolved `@launch` (sema.launch_attrs.LaunchSpec, spans included) when the
    # kernel came from source; codegen feeds it to `decide_contract`. Samples leave it None and
    # codegen builds one from `attributes`.
    launch: Any = field(default=None, compare=False, hash=False)
    # The `const` defaults this target took from a `by_target` (sema.launch_attrs'
    # ConstChoice records, each with a `show()`): `--emit plan` prints them.
    const_choices: tuple = field(default=(), compare=False, hash=False)


@record(frozen=True)
class IRModule:
    kernels: tuple[Kernel, ...]

    def kernel(self, name: str) -> Kernel:
        for k in self.kernels:
            if k.name == name:
                return k
        raise KeyError(name)


class OpVisitor:
    """Dispatch on the op's class: `visit_BuiltinOp(op)` etc.; `generic_visit` otherwise."""

    def visit(self, op: Op) -> Any:
        return getattr(self, "visit_" + type(op).__name__, self.generic_visit)(op)

    def generic_visit(self, op: Op) -> Any:
        return None


def walk(block: Block) -> Iterator[Op]:
    """Every op of the block and its nested regions, in program order (pre-order)."""
    for op in block.ops:
        yield op
        for r in op.regions:
            yield from walk(r)
