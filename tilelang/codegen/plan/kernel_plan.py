"""The kernel plan: every planning pass run once over a kernel, before any LLVM IR is emitted
(docs/codegen.md, Plans). The lowerings read the record (`KernelEmitter.plan`) instead of
deciding while they emit; `tilec --emit plan` prints it (plan/dump.py)."""

from __future__ import annotations

from tilelang.codegen.plan.distributed import DistributedPlan, plan_distributed
from tilelang.codegen.plan.fusion import FusionPlan, plan_fusion
from tilelang.codegen.plan.inputs import PlanInputs
from tilelang.codegen.plan.loops import LoopsPlan, plan_loops
from tilelang.codegen.plan.products import ProductsPlan, plan_products
from tilelang.codegen.plan.reloads import ReloadPlan, plan_reloads
from tilelang.codegen.plan.streams import StreamPlan, plan_streams
from tilelang.codegen.plan.uses import UseCounts, count_uses
from tilelang.record import record


@record(frozen=True)
class KernelPlan:
    kernel: str
    target: str
    threads: int                # the layouts' threads (a power of two)
    declared_threads: int       # the launch block's
    exact: bool                 # the code may rely on the thread count
    precision: str
    uses: UseCounts
    products: ProductsPlan
    reloads: ReloadPlan
    streams: StreamPlan
    loops: LoopsPlan
    fusion: FusionPlan
    distributed: DistributedPlan


def plan_kernel(inputs: PlanInputs) -> KernelPlan:
    """The passes in order; each reads what the earlier ones decided."""
    # how often each value is used: a value used once can move to its use (deferred product
    # operands, streamed tiles)
    uses = count_uses(inputs.kernel)
    # tensor cores or FMA per product, and the operands copied straight to shared memory
    products = plan_products(inputs, uses)
    # before streams: a reloaded tile is computed again by the streams of its consumers
    reloads = plan_reloads(inputs)
    streams = plan_streams(inputs, uses, reloads, products.has_products)
    # after products: a loop is pipelined or prefetched for its products' plans
    loops = plan_loops(inputs, products)
    # after streams: a reduction a stream feeds per vector has its input computed already
    fusion = plan_fusion(inputs, uses, streams, products.has_products)
    # how symmetric arrays reach their peers: the emitter binds the parameters by it
    distributed = plan_distributed(inputs.kernel, inputs.distributed)
    return KernelPlan(inputs.kernel.name, inputs.target.name, inputs.threads,
                      inputs.declared_threads, inputs.exact, inputs.precision, uses, products,
                      reloads, streams, loops, fusion, distributed)
