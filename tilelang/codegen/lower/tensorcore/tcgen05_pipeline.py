"""A pipelined product loop on tcgen05 (sm_100a; plan/loops.py R7): a ring of S stages filled
by TMA, one thread issuing the copies and the MMAs, the accumulator in tensor memory for the
whole loop (docs/codegen.md, "sm_100a").

    setup:    barrier; thread 0 initializes full[s] and empty[s] (count 1 each); every warp
              stores its rows of the initial accumulator into TMEM (tcgen05.st); fences
              around a barrier
    issuer:   (the elected thread of warp 0) copies iterations 0 .. S-2 (expect_tx on full[s],
              then the bulk tensor copies); for every iteration j in slot j mod S: wait for
              full's phase; one tcgen05.mma per k-step of 16; tcgen05.commit to empty[j mod S]
              (it completes when those MMAs are done reading the stage); wait for empty of
              iteration j-1's slot (j > 0) and copy iteration j+S-1 into it; after the loop
              tcgen05.commit to the kernel's completion mbarrier (tcgen05_tmem.py)
    everyone: wait for the completion; tcgen05.ld of its rows; tcgen05.wait::ld; thread 0
              invalidates the ring's mbarriers; barrier
An iteration past the end is not copied, so nothing is in flight at the exit.
"""

from __future__ import annotations

import llvmlite.ir as ir

from tilelang.codegen.emit.kernel import I32, I64, KernelEmitter, TileVal
from tilelang.codegen.lower.tensorcore import (mma_sync, pipe_loop, tcgen05_tmem as tmem,
                                               tma_load)
from tilelang.codegen.lower.tensorcore.cp_async import _c64
from tilelang.codegen.lower.tensorcore.mma_epilogue import remember_acc_layout
from tilelang.codegen.lower.tensorcore.mma_plan import to_layout
from tilelang.codegen.lower.tensorcore.tcgen05_product import (descriptors, issue_mmas,
                                                               lane_quarter, tmem_io)
from tilelang.codegen.lower.tensorcore.wgmma_product import (_carried_state, _ring_add,
                                                             align_smem, ring_images)


def _c(v: int) -> ir.Constant:
    return ir.Constant(I32, v)


def emit_pipelined(kern: KernelEmitter, op, lp) -> None:
    b = kern.builder
    plan, S = lp.plan, lp.stages
    form, t = plan.form, plan.tc5
    kern.require_exact()
    kern.stats.features.add("tcgen05")
    start, stop, step = (kern.tile(v).value for v in (op.start, op.stop, op.step))
    ivt = kern.tile(op.start).dtype
    init = to_layout(kern, kern.tile(op.init[0]), plan.acc)
    stage_bytes, offs, sops = ring_images(lp, form.itemsize)
    tma = tma_load.plan_operands(kern, lp.operands, sops, offs)
    ring_bytes = S * stage_bytes
    # inside an outer run-time loop (a persistent kernel's tiles) the ring carries on from one
    # run to the next: mbarriers of their own, initialized once, the stage and phase kept
    carried = lp.nested
    ring = kern.smem(ring_bytes + (0 if carried else 16 * S), ir.IntType(8), 0)
    align_smem(kern)
    base = mma_sync.shared_address(kern, ring)
    bars = mma_sync.shared_address(kern, kern.kept_smem(16 * S, 8)) if carried else \
        b.add(base, _c(ring_bytes))
    da, db, idesc = descriptors(plan, sops)
    k = sops[0].shape[-1]
    tm = kern.tmem
    iv_var = op.iv

    def full(slot):                     # slot: a byte offset into the ring
        idx = _c(slot // stage_bytes) if isinstance(slot, int) else \
            b.udiv(slot, _c(stage_bytes))
        return b.add(bars, b.shl(idx, _c(3)))

    def empty(slot):
        return b.add(full(slot), _c(8 * S))

    def wide(v):
        return b.sext(v, I64) if ivt.signed else b.zext(v, I64)

    positive = b.icmp_signed(">", step, ir.Constant(step.type, 0)) if ivt.signed else \
        b.icmp_unsigned(">", step, ir.Constant(step.type, 0))

    def valid_ahead(iv, s):
        return b.and_(positive, b.icmp_signed("<", b.mul(wide(step), _c64(s)),
                                              b.sub(wide(stop), wide(iv))))

    def iv_ahead(iv, s):
        return b.add(iv, b.mul(step, ir.Constant(step.type, s))) if s else iv

    true = ir.Constant(ir.IntType(1), 1)

    def copy(iv, s, slot):
        kern.env[iv_var.id] = TileVal(ivt, kern.scalar_layout, (iv,))
        tma_load.issue_stage(kern, tma, (iv_ahead(iv, s), iv_var, lp.scalars),
                             b.add(base, slot if not isinstance(slot, int) else _c(slot)),
                             full(slot), valid_ahead(iv, s), leader=true)

    def init_bars():
        pipe_loop.on_thread0(kern, "tc5.ring.init", lambda: [
            tma_load.mbarrier_init(kern, b.add(bars, _c(8 * i)), 1) for i in range(2 * S)])

    kern.barrier()                      # earlier users of the scratch buffer are done
    if carried:
        state = _carried_state(kern, op)
        first = kern.fn.append_basic_block("tc5.ring.first")
        ready = kern.fn.append_basic_block("tc5.ring.ready")
        b.cbranch(b.icmp_unsigned("==", b.load(state[2]), _c(0)), first, ready)
        b.position_at_end(first)        # the first run initializes (thread_sync publishes)
        init_bars()
        b.store(_c(1), state[2])
        b.branch(ready)
        b.position_at_end(ready)
        slot0, phase0 = b.load(state[0]), b.load(state[1])
    else:
        init_bars()
        slot0, phase0 = _c(0), _c(0)
    mine = lane_quarter(kern, tm.address)
    tmem_io(kern, mine, list(init.regs), t.n)
    tmem.thread_sync(kern)              # also publishes the mbarriers' initialization

    lead = kern.fn.append_basic_block("tc5.issuer")
    after = kern.fn.append_basic_block("tc5.issued")
    b.cbranch(tma_load.issuer(kern), lead, after)
    b.position_at_end(lead)
    tma_load.hoist(kern, tma)
    for s in range(S - 1):
        copy(start, s, _ring_add(kern, slot0, s * stage_bytes, ring_bytes) if carried
             else s * stage_bytes)
    iv, (slot, phase, started), _, header, exit_ = pipe_loop.loop_header(
        kern, "tc5.pipe", "tc5.pipe.body", "tc5.pipe.exit", start, stop, ivt, positive,
        named=[("slot", I32, slot0), ("phase", I32, phase0),
               ("started", ir.IntType(1), ir.Constant(ir.IntType(1), 0))])
    tma_load.wait_parity(kern, full(slot), phase)
    issue_mmas(kern, da, db, idesc, tm.address, b.add(base, slot), b_offset=offs[1], k=k,
               kstep=t.k, bar=empty(slot))
    # iteration j-1's slot: free once its MMAs are done (empty's completion of that use:
    # this round's parity, or the previous round's when slot j wrapped to 0)
    wslot = b.select(b.icmp_unsigned("==", slot, _c(0)), _c(ring_bytes - stage_bytes),
                     b.sub(slot, _c(stage_bytes)))
    wpar = b.select(b.icmp_unsigned("==", slot, _c(0)), b.xor(phase, _c(1)), phase)
    wait = kern.fn.append_basic_block("tc5.wait.empty")
    refill = kern.fn.append_basic_block("tc5.refill")
    b.cbranch(started, wait, refill)
    b.position_at_end(wait)
    tma_load.wait_parity(kern, empty(wslot), wpar)
    b.branch(refill)
    b.position_at_end(refill)
    copy(iv, S - 1, wslot)
    nxt = b.add(slot, _c(stage_bytes))
    wrap = b.icmp_unsigned("==", nxt, _c(ring_bytes))
    tail = b.block
    iv.add_incoming(b.add(iv, step), tail)
    slot.add_incoming(b.select(wrap, _c(0), nxt), tail)
    phase.add_incoming(b.xor(phase, b.zext(wrap, I32)), tail)
    started.add_incoming(true, tail)
    b.branch(header)
    b.position_at_end(exit_)
    if carried:                         # only the issuer's copies are read
        b.store(slot, state[0])
        b.store(phase, state[1])
    tmem.void(kern, "tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 "
                    "[$0];", [tm.bar], "r")
    b.branch(after)
    b.position_at_end(after)

    tmem.wait(kern)
    tmem.void(kern, "tcgen05.fence::after_thread_sync;")
    regs = tmem_io(kern, mine, None, t.n)
    tmem.void(kern, "tcgen05.fence::before_thread_sync;")
    if not carried:
        pipe_loop.on_thread0(kern, "tc5.ring.inval", lambda: [
            tma_load.mbarrier_inval(kern, b.add(bars, _c(8 * i))) for i in range(2 * S)])
    kern.barrier()                      # the ring is free for the next user
    kern.env[op.results[0].id] = TileVal(init.dtype, plan.acc, tuple(regs))
    remember_acc_layout(kern, plan.acc)
