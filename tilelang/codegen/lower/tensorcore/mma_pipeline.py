"""Software pipelining of a `for` loop whose body is loads -> `mma`: a ring of shared operand
images that lower/tensorcore/cp_async.py's `Stream`s fill.

The pipelined loop (S stages, a ring of S operand images):

    prologue: copy iterations 0 .. S-2 into slots 0 .. S-2, one commit group each
    loop j:   wait until at most S-2 groups are pending (iteration j has landed); barrier
              (everyone's copies are visible and everyone is done with slot (j-1) mod S);
              copy iteration j+S-1 into slot (j+S-1) mod S; commit; mma from slot j mod S
    exit:     wait for all groups; barrier (the shared buffer is free again)

S comes from the shared-memory budget: the largest S <= 4 whose ring fits the SM's shared
memory divided by the blocks per SM the registers allow (at most 2), and one block's limit.
"""

from __future__ import annotations

import llvmlite.ir as ir

from tilelang.codegen.emit.kernel import I32, I64, KernelEmitter, TileVal
from tilelang.codegen.lower.tensorcore import pipe_loop, wgmma_product
from tilelang.codegen.lower.tensorcore.cp_async import Stream, _c, _c64
from tilelang.codegen.lower.tensorcore.mma_epilogue import remember_acc_layout
from tilelang.codegen.lower.tensorcore.mma_operands import (DeferredLoad, async_axis,
                                                            commit_group, deferrable,
                                                            is_pure_scalar, wait_group)
from tilelang.codegen.lower.tensorcore.mma_plan import tensor_core_plan, to_layout
from tilelang.codegen.lower.tensorcore.mma_sync import (SmemOperand, fragment_loaders,
                                                        product_from, shared_address)
from tilelang.codegen.occupancy import ARCH_LIMITS
from tilelang.ir.ops import BuiltinOp, ForOp, YieldOp
from tilelang.ir.values import Value
from tilelang.record import record

MAX_STAGES = 4


# ---------------------------------------------------------------------------------------------
# The pipelined loop

@record
class LoopPlan:
    mma: BuiltinOp
    operands: tuple[DeferredLoad, DeferredLoad]
    axes: tuple[int, int]          # each operand's contiguous tile axis (its image rows)
    scalars: list                  # the body's pure scalar ops (re-evaluated per copy)
    plan: object                   # matmul.TensorCorePlan
    stages: int
    image_bytes: tuple[int, int]


def _round(n: int, unit: int = 128) -> int:
    return -(-n // unit) * unit


def choose_stages(kern: KernelEmitter, stage_bytes: int, acc_regs: int) -> int:
    """See the module docstring: the ring depth for one stage of `stage_bytes`; the user's
    `@launch(num_stages = n)` wins, as far as one block's shared memory allows."""
    lim = ARCH_LIMITS.get(kern.target.name)
    if lim is None:
        return 1
    spec = kern.kernel.launch
    user = getattr(spec, "num_stages", None) if spec is not None else \
        kern.kernel.attributes.get("num_stages")
    if user is not None:
        return max(1, min(int(user), lim.smem_per_block // stage_bytes))
    regs = min(lim.max_regs_per_thread, acc_regs + 40)
    by_regs = lim.regs_per_sm // max(regs * kern.threads, 1)
    for blocks in sorted({max(1, min(2, by_regs)), 1}, reverse=True):
        budget = min(lim.smem_per_block,
                     lim.smem_per_sm // blocks - lim.smem_reserved_per_block)
        s = min(MAX_STAGES, budget // stage_bytes)
        if s >= 2:
            return s
    return 1


def loop_plan(kern: KernelEmitter, op: ForOp) -> LoopPlan | None:
    """The plan for pipelining `op`, or None when its body is not (pure scalar ops,) two
    deferred operand loads and one tensor-core `mma` that updates the only carried value."""
    if not kern.exact or len(op.carried) != 1:
        return None
    body = op.body
    term = body.terminator
    if not isinstance(term, YieldOp) or len(term.values) != 1:
        return None
    deferred = deferrable(kern, body)
    mma = None
    loads, scalars = {}, []
    for o in body.ops[:-1]:
        if isinstance(o, BuiltinOp) and o.name == "mma" and mma is None:
            mma = o
        elif isinstance(o, BuiltinOp) and o.name == "load" and o.result.id in deferred:
            loads[o.result.id] = o
        elif is_pure_scalar(o):
            scalars.append(o)
        else:
            return None
    if mma is None or mma.result.id != term.values[0].id:
        return None
    args = mma.arg_map
    acc, a, b = args.get("acc"), args.get("a"), args.get("b")
    if not (isinstance(acc, Value) and acc.id == op.carried[0].id and isinstance(a, Value)
            and isinstance(b, Value) and a.id in loads and b.id in loads and a.id != b.id
            and len(loads) == 2):
        return None
    plan = tensor_core_plan(kern, mma)
    if plan is None:
        return None
    rank = plan.acc.rank
    ops = (DeferredLoad(loads[a.id]), DeferredLoad(loads[b.id]))
    if plan.wg is not None:
        axes = wgmma_product.ring_axes(kern, plan, ops)
    else:
        axes = tuple(async_axis(kern, d, k_axis, plan.form.itemsize)
                     for d, k_axis in zip(ops, (rank - 1, rank - 2)))
    if axes is None or None in axes:
        return None
    unit = wgmma_product.IMAGE_ALIGN if plan.wg is not None else 128
    sizes = tuple(_round(_elems(d) * plan.form.itemsize, unit) for d in ops)
    stages = choose_stages(kern, sum(sizes), plan.acc.num_regs)
    if stages < 2:
        return None
    return LoopPlan(mma, ops, axes, scalars, plan, stages, sizes)


def _elems(d: DeferredLoad) -> int:
    n = 1
    for s in d.op.result.type.shape:
        n *= s
    return n


def emit_pipelined(kern: KernelEmitter, op: ForOp, lp: LoopPlan) -> None:
    if lp.plan.wg is not None:
        wgmma_product.emit_pipelined(kern, op, lp)
        return
    b = kern.builder
    plan, S = lp.plan, lp.stages
    form = plan.form
    kern.stats.features.add("mma_f8" if form.ab in ("e4m3", "e5m2") else "mma_sync")
    kern.stats.features.add("cp_async")
    start, stop, step = (kern.tile(v).value for v in (op.start, op.stop, op.step))
    ivt = kern.tile(op.start).dtype
    init = to_layout(kern, kern.tile(op.init[0]), plan.acc)
    stage_bytes = sum(lp.image_bytes)
    ring = kern.smem(S * stage_bytes, ir.IntType(8), 0)
    base = shared_address(kern, ring)
    offs = (0, lp.image_bytes[0])
    streams = [Stream(kern, d, cax, form.itemsize, o)
               for d, cax, o in zip(lp.operands, lp.axes, offs)]
    sops = [SmemOperand(None, s.shape, s.cax, form.itemsize) for s in streams]
    loaders = fragment_loaders(kern, plan.tiling, sops[0], sops[1], plan.acc)
    k = sops[0].shape[-1]
    iv_var = op.iv

    def wide(v):
        return b.sext(v, I64) if ivt.signed else b.zext(v, I64)

    positive = b.icmp_signed(">", step, ir.Constant(step.type, 0)) if ivt.signed else \
        b.icmp_unsigned(">", step, ir.Constant(step.type, 0))

    def valid_ahead(iv, s):
        """Iteration `iv + s * step` exists (no overflow: compared in i64); s: int or i32."""
        s64 = _c64(s) if isinstance(s, int) else b.zext(s, I64)
        ahead = b.mul(wide(step), s64)
        left = b.sub(wide(stop), wide(iv))
        return b.and_(positive, b.icmp_signed("<", ahead, left))

    def iv_ahead(iv, s):
        if isinstance(s, int):
            return b.add(iv, b.mul(step, ir.Constant(step.type, s))) if s else iv
        sv = s if step.type == I32 else (b.zext(s, step.type) if step.type.width > 32
                                         else b.trunc(s, step.type))
        return b.add(iv, b.mul(step, sv))

    def issue(iv, s, image):
        kern.env[iv_var.id] = TileVal(ivt, kern.scalar_layout, (iv,))
        for st in streams:
            st.issue((iv_ahead(iv, s), iv_var, lp.scalars), image, valid_ahead(iv, s))
        commit_group(kern)

    kern.barrier()                       # earlier users of the shared buffer are done
    if S == 2:
        issue(start, 0, base)
    else:                                # the prologue as a loop: its copy code once
        entry = b.block
        ploop = kern.fn.append_basic_block("mma.prologue")
        pdone = kern.fn.append_basic_block("mma.prologue.end")
        b.branch(ploop)
        b.position_at_end(ploop)
        s = b.phi(I32, "stage")
        s.add_incoming(_c(0), entry)
        issue(start, s, b.add(base, b.mul(s, _c(stage_bytes))))
        s1 = b.add(s, _c(1))
        s.add_incoming(s1, b.block)
        b.cbranch(b.icmp_unsigned("<", s1, _c(S - 1)), ploop, pdone)
        b.position_at_end(pdone)
    # slot: the byte offset of this iteration's stage
    iv, (slot,), accs, header, exit_ = pipe_loop.loop_header(
        kern, "mma.pipe", "mma.pipe.body", "mma.pipe.exit", start, stop, ivt, positive,
        [("slot", I32, _c(0))], init.regs)
    wait_group(kern, S - 2)
    kern.barrier()
    last = _c((S - 1) * stage_bytes)
    wslot = b.select(b.icmp_unsigned("==", slot, _c(0)), last, b.sub(slot, _c(stage_bytes)))
    issue(iv, S - 1, b.add(base, wslot))
    image = b.add(base, slot)
    regs = product_from(kern, form, plan.b_class, plan.tiling, loaders,
                        (image, b.add(image, _c(offs[1]))), accs, k)
    nxt = b.add(slot, _c(stage_bytes))
    nxt = b.select(b.icmp_unsigned("==", nxt, _c(S * stage_bytes)), _c(0), nxt)
    tail = b.block
    iv.add_incoming(b.add(iv, step), tail)
    slot.add_incoming(nxt, tail)
    for p, r in zip(accs, regs):
        p.add_incoming(r, tail)
    b.branch(header)

    b.position_at_end(exit_)
    wait_group(kern, 0)
    kern.barrier()                       # the ring is free for the next user
    kern.env[op.results[0].id] = TileVal(init.dtype, plan.acc, tuple(accs))
    remember_acc_layout(kern, plan.acc)
