"""Prefetching the operand loads of a loop whose body does more than load -> one `mma`
(attention: two products with a softmax between them), on warp-group MMA (sm_90a).

A deferred load (lower/tensorcore/mma_operands.py) in the loop body that a warp-group product copies
into its image, whose index depends only on the loop variable, values from outside the loop
and pure scalar ops of the body, gets a ring of S images in a shared buffer of its own
(`kern.kept_smem`, so the body's other shared-memory users keep the scratch buffer):

    before:  barrier (in an outer loop: the previous run's readers are done); copy
             iterations 0 .. S-2 into slots 0 .. S-2, one cp.async group each
    top j:   wait until at most S-2 groups are pending (iteration j's copies have landed);
             barrier (everyone's copies are visible, everyone is done with iteration j-1's
             slot); fence.proxy.async; copy iteration j+S-1 into slot (j-1) mod S (zeros
             past the end); commit
    body:    as ever, except that the products read slot j mod S (`prefetched`) instead of
             copying their operand and passing two barriers
    exit:    wait for every copy group (the zero-filled ones past the end)

So the copies of iteration j+1 run under iteration j's arithmetic, as Triton's two-stage
pipeline does. S = `@launch(num_stages = n)` when given, else 2, as far as the static shared
memory left (48 KiB) allows; below 2 the loop is not prefetched. A body with `break`,
`continue` or `return` is not prefetched (its copies would outlive the loop's structure).
"""

from __future__ import annotations

import llvmlite.ir as ir

from tilelang.codegen.emit.kernel import I32, I64, STATIC_SMEM_LIMIT, KernelEmitter, TileVal
from tilelang.codegen.lower.tensorcore import (mma_operands, mma_sync, pipe_loop, tma_load,
                                               wgmma_ops, wgmma_product)
from tilelang.codegen.lower.tensorcore.cp_async import Stream
from tilelang.codegen.lower.tensorcore.mma_operands import DeferredLoad
from tilelang.codegen.plan.loops import DEFAULT_STAGES, PrefetchPlan  # noqa: F401
from tilelang.ir.ops import ForOp
from tilelang.record import record


def _c(v: int) -> ir.Constant:
    return ir.Constant(I32, v)


@record
class Fetch:
    d: DeferredLoad
    sop: mma_sync.SmemOperand     # its image (base None: the ring holds it)
    offset: int                   # byte offset of its image in a stage


def plan(kern: KernelEmitter, op: ForOp) -> "Prefetch | None":
    """The prefetch of loop `op` (plan/loops.py, R2), or None; as many of the planned stages
    as the static shared memory left now allows (the kernel's kept buffers so far), and
    none below 2."""
    pp = kern.plan.loops.prefetch(op)
    if pp is None:
        return None
    stages = pp.stages
    if not pp.dynamic:
        room = (STATIC_SMEM_LIMIT - kern._kept_smem) // pp.stage_bytes
        # or an earlier loop's ring, done by now (`finish`)
        room = max([room] + [(n - 16 * pp.stages) // pp.stage_bytes
                             for _, n in kern.free_rings])
        stages = min(stages, room)
    if stages < 2:
        return None
    fetches = [Fetch(f.d, mma_sync.SmemOperand(None, f.d.shape, f.cax, f.itemsize, f.span),
                     f.offset) for f in pp.fetches]
    return Prefetch(op, fetches, list(pp.scalars), stages, pp.stage_bytes, pp)


class Prefetch:
    def __init__(self, op: ForOp, fetches: list[Fetch], scalars: list, stages: int,
                 stage_bytes: int, planned: PrefetchPlan):
        self.op, self.fetches, self.scalars = op, fetches, scalars
        self.S, self.stage_bytes = stages, stage_bytes
        self.planned = planned

    # the loop variable `s` iterations ahead, and whether that iteration exists (compared in
    # i64: no overflow)
    def _limit(self, kern: KernelEmitter, s: int) -> ir.Value | None:
        """For a signed i32 loop variable: the bound L (i32) with iteration iv + s * step
        existing iff step > 0 and iv < L, i.e. stop - s * step computed in i64 and clamped
        below to the i32 minimum (then no iv is below it); made before the loop, so the
        test in the loop is one 32-bit compare. None for other loop variables."""
        if not (self.ivt.signed and self.step.type == I32):
            return None
        b = kern.builder
        lim = b.sub(b.sext(self.stop, I64), b.mul(b.sext(self.step, I64), ir.Constant(I64, s)))
        low = ir.Constant(I64, -2 ** 31)
        lim = b.select(b.icmp_signed("<", lim, low), low, lim)
        return self.positive, b.trunc(lim, I32)

    def _ahead(self, kern: KernelEmitter, iv, s: int):
        """(the loop variable s iterations ahead, whether that iteration exists)."""
        b = kern.builder
        step, stop, ivt = self.step, self.stop, self.ivt
        nxt = b.add(iv, b.mul(step, ir.Constant(step.type, s))) if s else iv
        lim = self.limits.get(s)
        if lim is not None:
            return nxt, b.and_(lim[0], b.icmp_signed("<", iv, lim[1]))

        def wide(v):
            return b.sext(v, I64) if ivt.signed else b.zext(v, I64)

        ahead = b.mul(wide(step), ir.Constant(I64, s))
        ok = b.and_(self.positive, b.icmp_signed("<", ahead, b.sub(wide(stop), wide(iv))))
        return nxt, ok

    def _issue(self, kern: KernelEmitter, iv, s: int, slot) -> None:
        """Copy iteration iv + s * step into the stage at byte offset `slot` (i32)."""
        nxt, ok = self._ahead(kern, iv, s)
        image = kern.builder.add(self.base, slot) if not (
            isinstance(slot, ir.Constant) and slot.constant == 0) else self.base
        for st in self.streams:
            st.issue((nxt, self.op.iv, self.scalars), image, ok)
        mma_operands.commit_group(kern)

    def _issue_tma(self, kern: KernelEmitter, iv, s: int, slot) -> None:
        """Thread 0 copies iteration iv + s * step, if it exists, into the stage at `slot`
        with TMA, completing on that stage's mbarrier."""
        nxt, ok = self._ahead(kern, iv, s)
        b = kern.builder
        tma_load.issue_stage(kern, self.tma, (nxt, self.op.iv, self.scalars),
                             b.add(self.base, slot), self._bar(kern, slot), ok,
                             spread=self.spread)

    def _bar(self, kern: KernelEmitter, slot) -> ir.Value:
        """The mbarrier (32-bit shared address) of the stage at byte offset `slot`."""
        b = kern.builder
        sb = self.stage_bytes
        if sb & (sb - 1) == 0:          # slot is a multiple of sb: one shift
            return b.add(self.bars, b.lshr(slot, _c(sb.bit_length() - 1 - 3)))
        return b.add(self.bars, b.shl(b.udiv(slot, _c(sb)), _c(3)))

    def _on_thread0(self, kern: KernelEmitter, fn) -> None:
        pipe_loop.on_thread0(kern, "prefetch.t0", fn)

    def begin(self, kern: KernelEmitter, start, stop, step, ivt) -> None:
        """Before the loop (in its preheader): the ring, the copies' setup, the prologue."""
        b = kern.builder
        S, sb = self.S, self.stage_bytes
        self.start, self.stop, self.step, self.ivt = start, stop, step, ivt
        zero = ir.Constant(step.type, 0)
        self.positive = b.icmp_signed(">", step, zero) if ivt.signed else \
            b.icmp_unsigned(">", step, zero)
        self.limits = {}
        lim = self._limit(kern, S - 1)
        if lim is not None:
            self.limits[S - 1] = lim
        # TMA when every operand qualifies (lower/tensorcore/tma_load.py: its images in the load's
        # own axes), else cp.async
        tsops = [mma_sync.SmemOperand(None, tuple(f.d.op.result.type.shape),
                                      f.d.load_axis(f.sop.cax), f.sop.itemsize, f.sop.span)
                 for f in self.fetches]
        self.tma = tma_load.plan_operands(kern, [f.d for f in self.fetches], tsops,
                                          [f.offset for f in self.fetches]) \
            if self.planned.tma else None
        # the loads copied beside the operands (plan/loops.py R10), by the same TMA issue
        self.sides = tma_load.side_operands(kern, self.planned.sides) if self.tma else []
        self.tma = self.tma + self.sides if self.tma else self.tma
        # a block of 2^k warp groups and a producer group splits (plan/loops.py, R5)
        self.ws = bool(self.tma) and self.planned.warp_specialized
        bar_bytes = (16 if self.ws else 8) * S if self.tma else 0
        # whole 1024-byte units (the buffers' alignment), as the static size counts them
        nbytes = wgmma_product.image_bytes((S * sb + bar_bytes,), 1)
        self.mark = self.buffer = None
        self.reused = False
        if self.planned.dynamic:
            self.base, self.mark = kern.dynamic_smem(nbytes, wgmma_product.IMAGE_ALIGN)
        else:
            self.base = mma_sync.shared_address(kern, self._buffer(kern, nbytes))
        saved = kern.env.get(self.op.iv.id)
        kern.env[self.op.iv.id] = TileVal(ivt, kern.scalar_layout, (start,))
        if self.tma:
            tma_load.hoist(kern, self.tma)
            # barrier (the previous run's waiters are done); thread 0 initializes the
            # stages' mbarriers; barrier (everyone sees them initialized)
            self.bars = b.add(self.base, _c(S * sb))
            # a stage's copies spread over the warps, one each (plan/loops.py R3,
            # tma_load.issue_stage): each issuing warp arrives on the stage's mbarrier
            self.spread = self.planned.spread and \
                1 < tma_load.copies(self.tma) <= kern.declared_threads // 32
            arrivals = tma_load.copies(self.tma) if self.spread else 1
            kern.barrier()
            self._on_thread0(kern, lambda: [tma_load.mbarrier_init(
                kern, b.add(self.bars, _c(8 * i)), arrivals) for i in range(S)] + ([
                    tma_load.mbarrier_init(kern, b.add(self.bars, _c(8 * (S + i))),
                                           kern.threads) for i in range(S)] if self.ws else []))
            kern.barrier()
            if self.ws:
                self._producer(kern)
            else:
                for s in range(S - 1):
                    self._issue_tma(kern, start, s, _c(s * sb))
        else:
            kern.stats.features.add("cp_async")
            self.streams = [Stream(kern, f.d, f.d.load_axis(f.sop.cax), f.sop.itemsize,
                                   f.offset, f.sop.span) for f in self.fetches]
            if kern.loops or self.reused or self.planned.dynamic:
                # the previous run's readers of the ring (or of the bytes an earlier loop's
                # ring had) are done
                kern.barrier()
            for s in range(S - 1):
                self._issue(kern, start, s, _c(s * sb))
        if saved is None:
            kern.env.pop(self.op.iv.id, None)
        else:
            kern.env[self.op.iv.id] = saved

    def _buffer(self, kern: KernelEmitter, nbytes: int) -> ir.Value:
        """The ring's buffer: the smallest free one of an earlier loop's ring that is large
        enough (attention's loops split at the causal diagonal run one after the other;
        another's ring is free once its loop's exit passed), else one of its own. In whole
        1024-byte units (the buffers' alignment), as the static size counts them."""
        free = sorted((n, i) for i, (_, n) in enumerate(kern.free_rings) if n >= nbytes)
        self.reused = bool(free)
        if free:
            buf, n = kern.free_rings.pop(free[0][1])
        else:
            buf, n = kern.kept_smem(nbytes, wgmma_product.IMAGE_ALIGN), nbytes
        self.buffer = (buf, n)
        return buf

    def _producer(self, kern: KernelEmitter) -> None:
        """Warp specialization (wgmma_product._ws_loop's protocol): the last warp group's
        first thread issues every iteration's stage once the consumers released it, then the
        group exits; the consumers go on to the loop, whose barriers from here on are named
        barriers of theirs."""
        b = kern.builder
        S, sb, P = self.S, self.stage_bytes, kern.threads
        share = (65536 // kern.declared_threads) // 8 * 8
        consumer = min(256, (share * kern.declared_threads - wgmma_product.WS_PRODUCER_REGS
                             * 128) // P // 8 * 8)
        kern.stats.ws_share = share               # the contract's .maxnreg (note_use)
        kern.stats.wgmma_acc_regs = share - 40
        prod = kern.fn.append_basic_block("ws.producer")
        cons = kern.fn.append_basic_block("ws.consumer")
        b.cbranch(b.icmp_unsigned(">=", kern.tid, _c(P)), prod, cons)
        b.position_at_end(prod)
        tma_load._asm(kern, f"setmaxnreg.dec.sync.aligned.u32 "
                            f"{wgmma_product.WS_PRODUCER_REGS};", [], "~{memory}")
        lead = kern.fn.append_basic_block("ws.lead")
        gone = kern.fn.append_basic_block("ws.producer.done")
        b.cbranch(tma_load.issuer(kern, P), lead, gone)
        b.position_at_end(lead)
        iv, (slot, j), _, header, _ = pipe_loop.loop_header(
            kern, "ws.produce", "ws.produce.body", gone, self.start, self.stop, self.ivt,
            self.positive, named=[("slot", I32, _c(0)), ("j", I32, _c(0))])
        # iteration j >= S refills a stage: wait for the release of iteration j - S, the
        # empty mbarrier's completion j / S - 1
        wait = kern.fn.append_basic_block("ws.wait.empty")
        issue = kern.fn.append_basic_block("ws.issue")
        b.cbranch(b.icmp_unsigned(">=", j, _c(S)), wait, issue)
        b.position_at_end(wait)
        parity = b.and_(b.add(b.udiv(j, _c(S)), _c(1)), _c(1))
        tma_load.wait_parity(kern, b.add(self._bar(kern, slot), _c(8 * S)), parity)
        b.branch(issue)
        b.position_at_end(issue)
        true = ir.Constant(ir.IntType(1), 1)
        kern.env[self.op.iv.id] = TileVal(self.ivt, kern.scalar_layout, (iv,))
        tma_load.issue_stage(kern, self.tma, (iv, self.op.iv, self.scalars),
                             b.add(self.base, slot), self._bar(kern, slot), true, leader=true)
        tail = b.block
        iv.add_incoming(b.add(iv, self.step), tail)
        slot.add_incoming(self._step(kern, slot, 1), tail)
        j.add_incoming(b.add(j, _c(1)), tail)
        b.branch(header)
        b.position_at_end(gone)
        b.branch(kern.return_target)
        b.position_at_end(cons)
        tma_load._asm(kern, f"setmaxnreg.inc.sync.aligned.u32 {consumer};", [], "~{memory}")
        kern.barrier_threads = P

    def header(self, kern: KernelEmitter, pre: ir.Block) -> None:
        """In the loop header: the current iteration's stage (byte offset) and, with TMA,
        the parity of its mbarrier's phase to wait for."""
        b = kern.builder
        self.slot = b.phi(I32, "prefetch.slot")
        self.slot.add_incoming(_c(0), pre)
        if self.tma:
            self.phase = b.phi(I32, "prefetch.phase")
            self.phase.add_incoming(_c(0), pre)

    def enter(self, kern: KernelEmitter, iv) -> None:
        """At the top of the body: wait for this iteration's copies, publish them, refill the
        previous iteration's stage, and point the products at this one."""
        b = kern.builder
        S, sb = self.S, self.stage_bytes
        slot = self.slot
        wslot = self._step(kern, slot, S - 1)
        if self.ws:                     # the producer fills it: wait for it, no barrier
            tma_load.wait_parity(kern, self._bar(kern, slot), self.phase)
        elif self.tma:
            # the TMA's writes are the async proxy's, as the MMAs' reads: the phase is all
            # they need; the barrier tells thread 0 that everyone is done with iteration
            # j-1's stage
            tma_load.wait_parity(kern, self._bar(kern, slot), self.phase)
            kern.barrier()
            self._issue_tma(kern, iv, S - 1, wslot)
        else:
            mma_operands.wait_group(kern, S - 2)
            kern.barrier()
            wgmma_ops.fence_proxy_async(kern)
            self._issue(kern, iv, S - 1, wslot)
        table = kern.prefetched
        for f in self.fetches:
            image = b.add(self.base, _c(f.offset)) if f.offset else self.base
            table[f.d.op.result.id] = (f.sop, image, slot, f.d)
        for t in self.sides:
            kern.prefetched_sides[t.d.op.result.id] = b.add(b.add(self.base, slot),
                                                            _c(t.image_offset))

    def latch(self, kern: KernelEmitter) -> None:
        """At the end of the body: the next iteration's stage (and phase parity)."""
        b = kern.builder
        if self.ws:                     # this iteration's products are done with its stage
            tma_load._asm(kern, "mbarrier.arrive.shared::cta.b64 _, [$0];",
                          [b.add(self._bar(kern, self.slot), _c(8 * self.S))], "r,~{memory}")
        nxt = self._step(kern, self.slot, 1)
        self.slot.add_incoming(nxt, b.block)
        if self.tma:                    # the ring wrapped: the next pass waits for the
            wrap = b.icmp_unsigned("==", nxt, _c(0))    # other parity
            self.phase.add_incoming(b.xor(self.phase, b.zext(wrap, I32)), b.block)

    def _step(self, kern: KernelEmitter, slot, k: int) -> ir.Value:
        """The stage k stages after `slot` in the ring (byte offsets)."""
        b = kern.builder
        ring = self.S * self.stage_bytes
        nxt = b.add(slot, _c(k * self.stage_bytes))
        if ring & (ring - 1) == 0:
            return b.and_(nxt, _c(ring - 1))
        return b.select(b.icmp_unsigned(">=", nxt, _c(ring)), b.sub(nxt, _c(ring)), nxt)

    def finish(self, kern: KernelEmitter) -> None:
        """At the loop's exit: the cp.async copies past the end have landed (TMA issues
        none), or the mbarriers are invalidated once nobody waits on them; the products of
        code after the loop copy their operands again."""
        if self.ws:
            pass                        # the producer is gone: nobody to invalidate with
        elif self.tma:
            b = kern.builder
            kern.barrier()
            self._on_thread0(kern, lambda: [tma_load.mbarrier_inval(
                kern, b.add(self.bars, _c(8 * i))) for i in range(self.S)])
        else:
            mma_operands.wait_group(kern, 0)
        if not self.ws and self.buffer is not None:
            # nothing is in flight into the ring any more and everyone is past its last
            # reads (TMA: the barrier above; cp.async: every thread waited for its own copies
            # and the next ring's setup starts with a barrier): a later loop may take it
            # (a dynamic ring's bytes are released below instead)
            kern.free_rings.append(self.buffer)
        table = kern.prefetched
        for f in self.fetches:
            table.pop(f.d.op.result.id, None)
        for t in self.sides:
            kern.prefetched_sides.pop(t.d.op.result.id, None)
        # a later loop's ring may have these bytes; not a warp-specialized ring's, whose
        # mbarriers nobody invalidates (the producer is gone)
        if self.mark is not None and not self.ws:
            kern.release_dynamic_smem(self.mark)

