"""Products pass: each matrix product's tensor-core plan and why (plan/tensor_cores.py, rules
R1-R3 there), and which of its operands are deferred loads copied straight into shared
memory (plan/operands.py). docs/codegen.md, Plans."""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping

from tilelang.codegen.plan.inputs import PlanInputs
from tilelang.codegen.plan.operands import PRODUCTS, DeferredLoad, deferrable
from tilelang.codegen.plan.scaled import ScaledPath
from tilelang.codegen.plan.uses import UseCounts
from tilelang.ir.ops import Block, BuiltinOp, walk
from tilelang.record import record

if TYPE_CHECKING:
    from tilelang.codegen.plan.tensor_cores import TensorCorePlan


@record(frozen=True)
class ProductDecision:
    """One product's plan and why (plan/tensor_cores.py's R1-R3)."""

    name: str                       # mma, matmul or @
    result: int                     # its result's value id
    shape: tuple[int, ...]          # the accumulator's
    plan: TensorCorePlan | None     # None: the FMA path
    why: str
    declined_wgmma: bool = False    # fits wgmma but for the block's thread count
    deferred: tuple[bool, bool] = (False, False)   # a, b copied straight to shared memory
    # a block-scaled product's path (plan/scaled.py): its instruction, or the software path's
    # reason on the bf16 `mma` that dequantisation left in its place (`tilec --emit plan`)
    scaled: ScaledPath | None = None
    declined_tc5: bool = False      # fits tcgen05 (R4) but for the block's thread count


@record(frozen=True)
class ProductsPlan:
    decisions: tuple[ProductDecision, ...]     # in program order (walk)
    by_result: Mapping[int, ProductDecision]
    # result id of a deferred load (or a view of one) -> its DeferredLoad; None for the
    # load and views under a view operand (the product emits them if it must)
    deferred: Mapping[int, DeferredLoad | None]
    # the fragment layouts tensor-core products leave their accumulators in: a store of a
    # tile in one of them goes through lower/tensorcore/mma_epilogue.py
    acc_layouts: frozenset = frozenset()

    @property
    def has_products(self) -> bool:
        return bool(self.decisions)

    @property
    def tmem_columns(self) -> int:
        """The TMEM columns the kernel allocates once for its tcgen05 products (0: none)."""
        return max((d.plan.tc5.columns for d in self.decisions
                    if d.plan is not None and d.plan.tc5 is not None), default=0)

    @property
    def tc5_declined(self) -> tuple[int, ...]:
        """Shapes of the products that fit tcgen05 but for the block's thread count."""
        return tuple(d.shape for d in self.decisions if d.declined_tc5)

    @property
    def wgmma_declined(self) -> bool:
        return any(d.declined_wgmma for d in self.decisions)


    def of(self, op: BuiltinOp) -> TensorCorePlan | None:
        return self.by_result[op.result.id].plan


def _blocks(block: Block):
    yield block
    for op in block.ops:
        for r in op.regions:
            yield from _blocks(r)


def has_products(block: Block) -> bool:
    return any(isinstance(o, BuiltinOp) and o.name in PRODUCTS for o in walk(block))


def plan_products(inputs: PlanInputs, uses: UseCounts) -> ProductsPlan:
    if not has_products(inputs.kernel.body):
        return ProductsPlan((), {}, {})
    # the tensor-core layouts (layouts/mma.py, wgmma.py: a few ms of a cold compile) are
    # imported only for a kernel that has a product (tests/codegen/test_llvm_shape.py)
    from tilelang.codegen.plan.tensor_cores import tc5_declined, tensor_core_plan
    deferred: dict = {}
    for blk in _blocks(inputs.kernel.body):
        if any(isinstance(o, BuiltinOp) and o.name in PRODUCTS for o in blk.ops):
            deferred.update(deferrable(uses.counts, blk))
    out = []
    for op in walk(inputs.kernel.body):
        if not (isinstance(op, BuiltinOp) and op.name in PRODUCTS):
            continue
        plan, why, declined = tensor_core_plan(inputs, op)
        ab = tuple(isinstance(deferred.get(getattr(op.arg_map.get(k), "id", None)),
                              DeferredLoad) for k in ("a", "b"))
        form = plan.scaled if plan is not None else None
        scaled = ScaledPath(form, "") if form is not None else None
        out.append(ProductDecision(op.name, op.result.id, tuple(op.result.type.shape), plan,
                                   why, declined, ab, scaled,
                                   plan is not None and tc5_declined(inputs, op)))
    return ProductsPlan(tuple(out), {d.result: d for d in out}, deferred,
                        frozenset(d.plan.acc for d in out if d.plan is not None))
