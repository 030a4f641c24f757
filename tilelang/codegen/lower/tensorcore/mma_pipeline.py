"""Software pipelining of a `for` loop whose body is loads -> `mma`: a ring of shared operand
images that lower/tensorcore/cp_async.py's `Stream`s fill.

The pipelined loop (S stages, a ring of S operand images):

    prologue: copy iterations 0 .. S-2 into slots 0 .. S-2, one commit group each
    loop j:   wait until at most S-2 groups are pending (iteration j has landed); barrier
              (everyone's copies are visible and everyone is done with slot (j-1) mod S);
              copy iteration j+S-1 into slot (j+S-1) mod S; commit; mma from slot j mod S
    exit:     wait for all groups; barrier (the shared buffer is free again)

S comes from the shared-memory budget: the largest S <= 4 whose ring fits the SM's shared
memory divided by the blocks per SM the registers allow (at most 2), and one block's limit
(decided before emission, with whether the loop is pipelined at all: plan/loops.py).

On sm_120a (plan/loops.py R8) the ring is filled by TMA instead, on wgmma_product.py's TMA
ring protocol (one mbarrier per slot, one issuing thread, the refill after a barrier); the
images are TMA's swizzled panels, which the same `ldmatrix` fragments read
(mma_sync.FragmentLoader), and every thread fences its `ldmatrix` reads to the async proxy
before the barrier that lets the refill overwrite them (a write-after-read across proxies).
"""

from __future__ import annotations

import llvmlite.ir as ir

from tilelang.codegen.emit.kernel import I32, I64, KernelEmitter, TileVal
from tilelang.codegen.lower.tensorcore import (pipe_loop, tcgen05_pair, tcgen05_persistent,
                                               tcgen05_pipeline, tcgen05_ws, tma_load,
                                               wgmma_ops, wgmma_product)
from tilelang.codegen.lower.tensorcore.cp_async import Stream, _c, _c64
from tilelang.codegen.lower.tensorcore.mma_epilogue import remember_acc_layout
from tilelang.codegen.lower.tensorcore.mma_operands import commit_group, wait_group
from tilelang.codegen.lower.tensorcore.mma_plan import to_layout
from tilelang.codegen.lower.tensorcore.mma_sync import (SmemOperand, fragment_loaders,
                                                        product_from, shared_address)
from tilelang.codegen.plan.loops import (MAX_STAGES, LoopPlan,  # noqa: F401
                                         choose_stages)
from tilelang.ir.ops import ForOp


# ---------------------------------------------------------------------------------------------
# The pipelined loop

def loop_plan(kern: KernelEmitter, op: ForOp) -> LoopPlan | None:
    """The plan for pipelining `op` (plan/loops.py), or None."""
    return kern.plan.loops.pipelined(op)


def emit_pipelined(kern: KernelEmitter, op: ForOp, lp: LoopPlan) -> None:
    if lp.plan.tc5 is not None and lp.acc_buffers > 1:
        # the epilogue warps' part of a persistent kernel's ring (plan/loops.py R13)
        tcgen05_persistent.drain(kern, op, lp)
        return
    if lp.plan.tc5 is not None:
        emit = tcgen05_ws.emit_specialized if lp.warp_specialized else \
            tcgen05_pair.emit_pair if lp.pair else tcgen05_pipeline.emit_pipelined
        emit(kern, op, lp)
        return
    if lp.plan.wg is not None:
        wgmma_product.emit_pipelined(kern, op, lp)
        return
    b = kern.builder
    plan, S = lp.plan, lp.stages
    form = plan.form
    kern.stats.features.add("mma_f8" if form.ab in ("e4m3", "e5m2") else "mma_sync")
    start, stop, step = (kern.tile(v).value for v in (op.start, op.stop, op.step))
    ivt = kern.tile(op.start).dtype
    init = to_layout(kern, kern.tile(op.init[0]), plan.acc)
    if lp.tma and _tma_ring(kern, op, lp, init, _Ahead(kern, start, stop, step, ivt)):
        return
    kern.stats.features.add("cp_async")
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

    ahead = _Ahead(kern, start, stop, step, ivt)
    valid_ahead, iv_ahead, positive = ahead.valid_ahead, ahead.iv_ahead, ahead.positive

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
        named=[("slot", I32, _c(0))], carried=init.regs)
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


class _Ahead:
    """A pipelined loop's iterations ahead: `iv_ahead(iv, s)` is iteration iv + s * step and
    `valid_ahead(iv, s)` whether it exists (compared in i64: no overflow); s: int or i32."""

    def __init__(self, kern: KernelEmitter, start, stop, step, ivt):
        b = kern.builder
        self.b, self.start, self.stop, self.step, self.ivt = b, start, stop, step, ivt
        self.positive = b.icmp_signed(">", step, ir.Constant(step.type, 0)) if ivt.signed \
            else b.icmp_unsigned(">", step, ir.Constant(step.type, 0))

    def wide(self, v):
        return self.b.sext(v, I64) if self.ivt.signed else self.b.zext(v, I64)

    def valid_ahead(self, iv, s):
        b = self.b
        s64 = _c64(s) if isinstance(s, int) else b.zext(s, I64)
        ahead = b.mul(self.wide(self.step), s64)
        left = b.sub(self.wide(self.stop), self.wide(iv))
        return b.and_(self.positive, b.icmp_signed("<", ahead, left))

    def iv_ahead(self, iv, s):
        b, step = self.b, self.step
        if isinstance(s, int):
            return b.add(iv, b.mul(step, ir.Constant(step.type, s))) if s else iv
        sv = s if step.type == I32 else (b.zext(s, step.type) if step.type.width > 32
                                         else b.trunc(s, step.type))
        return b.add(iv, b.mul(step, sv))


def _tma_ring(kern: KernelEmitter, op: ForOp, lp: LoopPlan, init: TileVal,
              ahead: _Ahead) -> bool:
    """The loop as a TMA ring of panel images read by ldmatrix (plan/loops.py R8); False
    (nothing emitted) when the kernel has no tensor-map parameters for its operands."""
    b = kern.builder
    plan, S = lp.plan, lp.stages
    form = plan.form
    stage_bytes, offs, sops = wgmma_product.ring_images(lp, form.itemsize)
    tma = tma_load.plan_operands(kern, lp.operands, sops, offs)
    if tma is None:
        return False
    kern.stats.features.add("tma")
    ring = kern.smem(S * stage_bytes + 8 * S, ir.IntType(8), 0)
    wgmma_product.align_smem(kern)
    base = shared_address(kern, ring)
    loaders = fragment_loaders(kern, plan.tiling, sops[0], sops[1], plan.acc)
    k = sops[0].shape[-1]

    def mmas(image, accs):
        regs = product_from(kern, form, plan.b_class, plan.tiling, loaders,
                            (image, b.add(image, _c(offs[1]))), accs, k)
        wgmma_ops.fence_proxy_async(kern)     # these reads before the refill's TMA writes
        return regs

    wgmma_product.tma_loop(kern, wgmma_product.RingLoop(
        op, lp, tma, base, None, None, k, init, ahead.start, ahead.stop, ahead.step,
        ahead.ivt, ahead.valid_ahead, ahead.iv_ahead, ahead.positive, mmas=mmas,
        drain=lambda accs: accs, shift_bars=True))
    return True
