"""What a planning pass may look at: the IR kernel, the target, the launch block and thread
mode, the array facts and whether TMA tensor maps are available (docs/codegen.md, Plans).

`PlanInputs` answers the questions a decision asks of the kernel's arrays and default
layouts with the same names the kernel emitter uses (`threads`, `exact`, `array(v).facts`,
`layout_for_shape`, ...), so a decision written once (plan/operands.py, plan/access.py) is
asked by a pass before emission and by a lowering during it alike."""

from __future__ import annotations

from math import prod
from typing import Callable, Mapping

from tilelang.codegen.api import ArrayFacts, DEFAULT_FACTS
from tilelang.codegen.layouts.defaults import DefaultLayouts
from tilelang.codegen.layouts.distributed import Layout, floor_pow2
from tilelang.ir.args import TupleArg
from tilelang.ir.ops import BuiltinOp, Kernel, walk
from tilelang.record import record, replace
from tilelang.sema.builtins_math import DEFAULT_PRECISION
from tilelang.sema.constants import ConstTuple, ConstValue
from tilelang.sema.types import ArrayListType, ArrayType, DType, TileType
from tilelang.targets import Target


@record(frozen=True)
class ArrayInfo:
    """An `Array` parameter as the planning passes see it (the emitter's ArrayVal without
    its LLVM values)."""

    dtype: DType
    rank: int
    facts: ArrayFacts
    name: str


def const_ints(a) -> tuple[int, ...]:
    """The integers of a constant argument (a tuple or one value)."""
    if isinstance(a, ConstTuple):
        return tuple(int(i.value) for i in a.items)
    if isinstance(a, ConstValue):
        return (int(a.value),)
    raise TypeError(f"expected constant integers, found {a!r}")


def tuple_items(a) -> tuple:
    if isinstance(a, (TupleArg, ConstTuple)):
        return a.items
    return (a,)


class PlanInputs:
    """One kernel's planning inputs for one emission mode (`exact`: the code may rely on the
    block's thread count; docs/codegen.md, Execution model)."""

    def __init__(self, kernel: Kernel, target: Target, block: tuple[int, ...], *, exact: bool,
                 facts: Mapping[str, ArrayFacts] | None = None, tma: bool = False,
                 precision: str = DEFAULT_PRECISION,
                 lowered_by: Callable[[str, str], str | None] | None = None,
                 distributed: str = "peers"):
        self.kernel = kernel
        self.distributed = distributed      # options.DISTRIBUTED_LOWERINGS
        self.target = target
        self.block = tuple(block) + (1,) * (3 - len(block))
        self.declared_threads = prod(self.block)
        self.threads = floor_pow2(self.declared_threads)
        self.exact = exact
        self.facts = dict(facts or {})
        self.tma = tma
        self.precision = precision          # the kernel's precision mode (docs/numerics.md)
        # (op name, registry group) -> the module of its lowering (lower/table.py), which the
        # caller hands in: plan/streams.py repeats only elementwise.py's lowerings per vector
        self.lowered_by = lowered_by or (lambda name, group: None)
        self.default_layouts = DefaultLayouts(kernel, self.threads)
        self._arrays: dict[int, ArrayInfo] = {}
        lists = {}
        for p in kernel.params:
            if isinstance(p.type, ArrayType):
                name = p.hint or f"p{p.id}"
                self._arrays[p.id] = ArrayInfo(p.type.dtype, p.type.rank,
                                               self.facts.get(name, DEFAULT_FACTS), name)
            elif isinstance(p.type, ArrayListType):
                name = p.hint or f"p{p.id}"
                lists[p.id] = ArrayInfo(p.type.array.dtype, p.type.array.rank, replace(
                    self.facts.get(name, DEFAULT_FACTS), same_shape=-1, tensor_map=False),
                    f"{name}[]")
        if lists:       # `ws[e]`: an array with its list's facts (lower/array_list.py)
            for op in walk(kernel.body):
                if isinstance(op, BuiltinOp) and op.builtin.name == "list_item":
                    self._arrays[op.result.id] = lists[op.arg_map["L"].id]
                elif isinstance(op, BuiltinOp) and op.builtin.name == "peer":
                    # a symmetric array's peer (lower/distributed.py): a list's entry
                    self._arrays[op.result.id] = lists[op.arg_map["x"].id]

    const_ints = staticmethod(const_ints)
    tuple_items = staticmethod(tuple_items)

    @property
    def replicas(self) -> bool:
        """Exact mode with more threads than the layouts use (the emitter's `primary` test)."""
        return self.exact and self.threads != self.declared_threads

    def array(self, v) -> ArrayInfo:
        return self._arrays[v.id]

    @property
    def scalar_layout(self) -> Layout:
        return self.default_layouts.scalar

    def layout_for(self, t: TileType) -> Layout:
        return self.layout_for_shape(tuple(t.shape), t.dtype)

    def layout_for_shape(self, shape: tuple[int, ...], dtype: DType) -> Layout:
        return self.default_layouts.for_shape(shape, dtype)
