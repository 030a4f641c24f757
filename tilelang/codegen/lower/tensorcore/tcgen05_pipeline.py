"""A pipelined product loop on tcgen05 (sm_100a; plan/loops.py R7): a ring of S stages filled
by TMA, one thread issuing the copies and the MMAs, the accumulator in tensor memory for the
whole loop (docs/codegen.md, "sm_100a").

    setup:    barrier; thread 0 initializes full[s] and empty[s] (count 1 each); every warp
              stores its rows of the initial accumulator into TMEM (tcgen05.st); fences
              around a barrier
    issuer:   (the elected thread of warp 0) copies iterations 0 .. S-2 (expect_tx on full[s],
              then the bulk tensor copies); for every iteration j in slot j mod S: wait for
              full's phase; one tcgen05.mma per k-step; tcgen05.commit to empty[j mod S]
              (it completes when those MMAs are done reading the stage); wait for empty of
              iteration j-1's slot (j > 0) and copy iteration j+S-1 into it; after the loop
              tcgen05.commit to the kernel's completion mbarrier (tcgen05_tmem.py)
    everyone: wait for the completion; tcgen05.ld of its rows; tcgen05.wait::ld; thread 0
              invalidates the ring's mbarriers; barrier
An iteration past the end is not copied, so nothing is in flight at the exit. A block with a
producer and an MMA warp after its four epilogue warps runs the ring specialized instead
(tcgen05_ws.py, which shares this module's `Tc5Ring`).
"""

from __future__ import annotations

import llvmlite.ir as ir

from tilelang.codegen.emit.kernel import I32, I64, KernelEmitter, TileVal
from tilelang.codegen.lower.tensorcore import (mma_sync, pipe_loop, tcgen05_scaled_ring,
                                               tcgen05_tmem as tmem, tma_load, tma_multicast)
from tilelang.codegen.lower.tensorcore.tcgen05_scaled_ring import SCALE_ARRIVALS
from tilelang.codegen.lower.tensorcore.cp_async import _c64
from tilelang.codegen.lower.tensorcore.mma_epilogue import remember_acc_layout
from tilelang.codegen.lower.tensorcore.mma_plan import to_layout
from tilelang.codegen.lower.tensorcore.tcgen05_product import (acc_type, commit,
                                                               descriptors, issue_mmas,
                                                               lane_quarter, tmem_io)
from tilelang.codegen.lower.tensorcore.wgmma_product import (_ahead_limit, _carried_state,
                                                             _ring_add, align_smem,
                                                             ring_images)
from tilelang.record import record


def _c(v: int) -> ir.Constant:
    return ir.Constant(I32, v)


@record
class Tc5Ring:
    """A tcgen05 loop's TMA ring as `ring_setup` lays it out: the loop, its plan, the
    initial accumulator (tc5_acc_layout), the stage size, the operand images' offsets, the
    TMA operands, the ring's and its mbarriers' 32-bit shared addresses (full[s] at
    bars + 8s, empty[s] 8S bytes further), the descriptors, K and the loop's bounds."""

    kern: KernelEmitter
    op: object
    lp: object
    init: TileVal
    stage_bytes: int
    offs: list
    tma: list
    base: ir.Value
    bars: ir.Value
    da: object
    db: object
    idesc: int
    k: int
    start: ir.Value
    stop: ir.Value
    step: ir.Value
    ivt: object
    positive: ir.Value
    rank: ir.Value | None = None      # a CTA pair's (plan/loops.py R9): this CTA's rank
    release: ir.Value | None = None   # a multicast ring's (R4): the CTAs (i16 mask) each
                                      # stage is released to (tma_multicast.union_mask)

    @property
    def pair(self) -> bool:
        return self.rank is not None

    @property
    def ring_bytes(self) -> int:
        return self.lp.stages * self.stage_bytes

    def bind_bounds(self) -> None:
        """The loop's bounds from the values in scope (a persistent kernel's ring binds them
        per output tile: tcgen05_persistent.py)."""
        kern, b = self.kern, self.kern.builder
        self.start, self.stop, self.step = (kern.tile(v).value
                                            for v in (self.op.start, self.op.stop,
                                                      self.op.step))
        zero = ir.Constant(self.step.type, 0)
        self.positive = b.icmp_signed(">", self.step, zero) if self.ivt.signed else \
            b.icmp_unsigned(">", self.step, zero)

    def full(self, slot) -> ir.Value:
        """full[s] of the stage at byte offset `slot` (an int or an i32 value)."""
        b = self.kern.builder
        if isinstance(slot, int):
            return b.add(self.bars, _c(slot // self.stage_bytes * 8))
        # `slot` is a multiple of the stage's bytes (a multiple of 8), so its mbarrier's
        # offset slot / (stage / 8) is an exact division: one shift for a power-of-two
        # stage (a plain udiv and shl leave LLVM a shift and a mask), a shift and one
        # multiplication by the inverse otherwise (docs/codegen.md, "The pipelined loop")
        return b.add(self.bars, b.udiv(slot, _c(self.stage_bytes // 8), flags=("exact",)))

    def empty(self, slot) -> ir.Value:
        return self.kern.builder.add(self.full(slot), _c(8 * self.lp.stages))

    def _wide(self, v):
        b = self.kern.builder
        return b.sext(v, I64) if self.ivt.signed else b.zext(v, I64)

    def valid_ahead(self, iv, s: int) -> ir.Value:
        b = self.kern.builder
        return b.and_(self.positive, b.icmp_signed(
            "<", b.mul(self._wide(self.step), _c64(s)),
            b.sub(self._wide(self.stop), self._wide(iv))))

    def iv_ahead(self, iv, s: int) -> ir.Value:
        b = self.kern.builder
        return b.add(iv, b.mul(self.step, ir.Constant(self.step.type, s))) if s else iv

    @property
    def multicast(self):
        return self.lp.multicast

    def copy(self, iv, s: int, slot, valid=None) -> None:
        """The issuing thread copies iteration iv + s * step (when it exists, or `valid`)
        into the stage at byte offset `slot`, announcing its bytes on full[slot] (a
        multicast ring's shared operands: by its sub-group's issuing CTA into each CTA of
        the sub-group, tma_multicast.py)."""
        kern, b = self.kern, self.kern.builder
        kern.env[self.op.iv.id] = TileVal(self.ivt, kern.scalar_layout, (iv,))
        true = ir.Constant(ir.IntType(1), 1)
        env_iv = (self.iv_ahead(iv, s), self.op.iv, self.lp.scalars)
        image = b.add(self.base, slot if not isinstance(slot, int) else _c(slot))
        full = self.full(slot)
        if self.pair:                   # both CTAs' copies complete on the even CTA's
            full = tma_load._asm(kern, "mapa.shared::cluster.u32 $0, $1, 0;", [full],
                                 "=r,r", I32)
        valid = self.valid_ahead(iv, s) if valid is None else valid
        if self.multicast is not None:
            tma_multicast.issue_stage(kern, self.multicast, self.tma, env_iv, image, full,
                                      valid, leader=true)
            return
        tma_load.issue_stage(kern, self.tma, env_iv, image, full, valid, leader=true,
                             pair=self.pair)

    def mmas(self, slot) -> None:
        """The issuing thread's MMAs of the stage at byte offset `slot`, committed to its
        empty mbarrier (it completes when they are done reading the stage); a block-scaled
        ring's copy their scales into TMEM first (tcgen05_scaled_ring.py)."""
        if self.lp.scales:
            tcgen05_scaled_ring.mmas(self, slot)
            return
        image = self.kern.builder.add(self.base, slot)
        issue_mmas(self.kern, self.da, self.db, self.idesc, self.kern.tmem.address, image,
                   b_offset=self.offs[1], k=self.k, kstep=self.lp.plan.tc5.k,
                   bar=self.empty(slot), pair=self.pair, kind=self.lp.plan.tc5.kind,
                   mask=self.release)

    def finish(self, regs) -> None:
        """The loop's result: the accumulator read back from TMEM."""
        self.kern.env[self.op.results[0].id] = TileVal(self.init.dtype, self.lp.plan.acc,
                                                       tuple(regs))
        remember_acc_layout(self.kern, self.lp.plan.acc)


def ring_setup(kern: KernelEmitter, op, lp, bounds: bool = True, own: bool = False
               ) -> Tc5Ring:
    """The ring's images and mbarriers (in the scratch buffer after the images, unless the
    ring is nested in another run-time loop: then a static buffer of their own); without
    `bounds` the loop's bounds are bound later (`Tc5Ring.bind_bounds`); `own`: the images in
    dynamic shared memory of their own, for a ring whose copies run while other warps use
    the scratch buffer (tcgen05_persistent.py)."""
    b = kern.builder
    plan, S = lp.plan, lp.stages
    form = plan.form
    kern.require_exact()
    kern.stats.features.add("tcgen05")
    ivt = op.start.type.dtype
    init = to_layout(kern, kern.tile(op.init[0]), plan.acc)
    stage_bytes, offs, sops = ring_images(lp, form.itemsize)
    stage_bytes += lp.scale_bytes       # a block-scaled ring's scale tiles (R12)
    rank = None
    if lp.pair:                         # this CTA's image of B: half of it along N (its
        # panels, or for a K-major B the rows of each panel)
        rank = tma_load._asm(kern, "mov.u32 $0, %cluster_ctarank;", [], "=r", I32)
        sb = sops[1]
        sops[1] = mma_sync.SmemOperand(None, (sb.shape[0], sb.shape[1] // 2), sb.cax,
                                       sb.itemsize, sb.span)
    tma = tma_load.plan_operands(kern, lp.operands, sops, offs,
                                 pair_rows=lp.pair and sops[1].cax == 0)
    if rank is not None and tma is not None:
        tma[1].pair_rank = rank
    ring_bytes = S * stage_bytes
    carried = lp.nested
    if own:
        # the images' address past the buffers before them, made opaque: otherwise LLVM
        # moves that constant offset after the stage's, one more add a K-step per image
        dyn = kern.dynamic_smem(ring_bytes, 1024)[0]
        base = tma_load._asm(kern, "mov.u32 $0, $1;", [dyn], "=r,r", I32)
    else:
        ring = kern.smem(ring_bytes + (0 if carried else 16 * S), ir.IntType(8), 0)
        align_smem(kern)
        base = mma_sync.shared_address(kern, ring)
    bars = mma_sync.shared_address(kern, kern.kept_smem(16 * S, 8)) if carried else \
        b.add(base, _c(ring_bytes))
    da, db, idesc = descriptors(plan, sops, lp.pair)
    k = sops[0].shape[-1]
    release = tma_multicast.union_mask(kern, lp.multicast) if lp.multicast else None
    ring = Tc5Ring(kern, op, lp, init, stage_bytes, offs, tma, base, bars, da, db, idesc, k,
                   None, None, None, ivt, None, rank, release)
    if bounds:
        ring.bind_bounds()
    return ring


def init_bars(ring: Tc5Ring) -> None:
    """Thread 0 initializes full[s] and empty[s] (count 1 each: the issuing thread's
    expect_tx, the MMAs' commit; a CTA pair's full[s] counts both CTAs' expect_tx, a
    block-scaled ring's the producer lanes' arrivals after their scale stores too; a
    multicast ring's empty[s] the commits of every CTA it shares stages with)."""
    kern, b = ring.kern, ring.kern.builder
    S = ring.lp.stages
    empties = tma_multicast.union_size(ring.multicast) if ring.multicast else 1

    def init():
        for i in range(2 * S):
            full = 2 if ring.pair else 1 + (SCALE_ARRIVALS if ring.lp.scales else 0)
            tma_load.mbarrier_init(kern, b.add(ring.bars, _c(8 * i)),
                                   full if i < S else empties)
        if ring.pair or ring.multicast:     # other CTAs arrive on them, copies complete
            tmem.void(kern, "fence.mbarrier_init.release.cluster;")
    pipe_loop.on_thread0(kern, "tc5.ring.init", init)


def read_back(ring: Tc5Ring, mine: ir.Value) -> list:
    """Wait for the completion mbarrier, then this thread's rows of the accumulator."""
    kern = ring.kern
    tmem.wait(kern)
    tmem.void(kern, "tcgen05.fence::after_thread_sync;")
    regs = tmem_io(kern, mine, None, ring.lp.plan.tc5.n, ring.lp.plan.tc5.m,
                   acc_type(ring.lp.plan))
    tmem.void(kern, "tcgen05.fence::before_thread_sync;")
    return regs


def commit_done(kern: KernelEmitter, pair: bool = False) -> None:
    """The issuing thread: every MMA issued so far completes the kernel's completion
    mbarrier (a CTA pair's: in both CTAs)."""
    commit(kern, kern.tmem.bar, pair)


def emit_pipelined(kern: KernelEmitter, op, lp) -> None:
    b = kern.builder
    ring = ring_setup(kern, op, lp)
    S, stage_bytes, ring_bytes = lp.stages, ring.stage_bytes, ring.ring_bytes
    start, step, stop = ring.start, ring.step, ring.stop
    carried = lp.nested
    true = ir.Constant(ir.IntType(1), 1)

    kern.barrier()                      # earlier users of the scratch buffer are done
    if carried:
        state = _carried_state(kern, op)
        first = kern.fn.append_basic_block("tc5.ring.first")
        ready = kern.fn.append_basic_block("tc5.ring.ready")
        b.cbranch(b.icmp_unsigned("==", b.load(state[2]), _c(0)), first, ready)
        b.position_at_end(first)        # the first run initializes (thread_sync publishes)
        init_bars(ring)
        b.store(_c(1), state[2])
        b.branch(ready)
        b.position_at_end(ready)
        slot0, phase0 = b.load(state[0]), b.load(state[1])
    else:
        init_bars(ring)
        slot0, phase0 = _c(0), _c(0)
    mine = lane_quarter(kern, kern.tmem.address)
    tmem_io(kern, mine, list(ring.init.regs), lp.plan.tc5.n, lp.plan.tc5.m)
    tmem.thread_sync(kern)              # also publishes the mbarriers' initialization

    lead = kern.fn.append_basic_block("tc5.issuer")
    after = kern.fn.append_basic_block("tc5.issued")
    b.cbranch(tma_load.issuer(kern), lead, after)
    b.position_at_end(lead)
    tma_load.hoist(kern, ring.tma)
    for s in range(S - 1):
        ring.copy(start, s, _ring_add(kern, slot0, s * stage_bytes, ring_bytes) if carried
                  else s * stage_bytes)
    # the refill's test of its iteration's existence: one 32-bit compare with a bound made
    # here (valid_ahead's 64-bit one is two SASS compares a K-step)
    ahead = _ahead_limit(kern, stop, step, ring.ivt, S - 1)
    # iteration j refills iteration j-1's stage, once empty's completion of that use
    # (iteration j-1's full parity) says it is free: carried as the previous iteration's slot
    # and parity rather than computed back from this one's (a compare and three selects a
    # K-step)
    last = _c(ring_bytes - stage_bytes)
    if carried:
        first = b.icmp_unsigned("==", slot0, _c(0))
        wslot0 = b.select(first, last, b.sub(slot0, _c(stage_bytes)))
        wpar0 = b.select(first, b.xor(phase0, _c(1)), phase0)
    else:
        wslot0, wpar0 = last, _c(1)
    iv, (slot, phase, wslot, wpar, started), _, header, exit_ = pipe_loop.loop_header(
        kern, "tc5.pipe", "tc5.pipe.body", "tc5.pipe.exit", start, stop, ring.ivt,
        ring.positive, named=[("slot", I32, slot0), ("phase", I32, phase0),
                              ("wslot", I32, wslot0), ("wpar", I32, wpar0),
                              ("started", ir.IntType(1), ir.Constant(ir.IntType(1), 0))])
    tma_load.wait_parity(kern, ring.full(slot), phase)
    ring.mmas(slot)
    wait = kern.fn.append_basic_block("tc5.wait.empty")
    refill = kern.fn.append_basic_block("tc5.refill")
    b.cbranch(started, wait, refill)
    b.position_at_end(wait)
    tma_load.wait_parity(kern, ring.empty(wslot), wpar)
    b.branch(refill)
    b.position_at_end(refill)
    ring.copy(iv, S - 1, wslot, None if ahead is None else
              b.and_(ring.positive, b.icmp_signed("<", iv, ahead)))
    nxt = b.add(slot, _c(stage_bytes))
    wrap = b.icmp_unsigned("==", nxt, _c(ring_bytes))
    tail = b.block
    iv.add_incoming(b.add(iv, step), tail)
    slot.add_incoming(b.select(wrap, _c(0), nxt), tail)
    phase.add_incoming(b.xor(phase, b.zext(wrap, I32)), tail)
    wslot.add_incoming(slot, tail)
    wpar.add_incoming(phase, tail)
    started.add_incoming(true, tail)
    b.branch(header)
    b.position_at_end(exit_)
    if carried:                         # only the issuer's copies are read
        b.store(slot, state[0])
        b.store(phase, state[1])
    commit_done(kern)
    b.branch(after)
    b.position_at_end(after)

    regs = read_back(ring, mine)
    if not carried:
        invalidate(ring)
    kern.barrier()                      # the ring is free for the next user
    ring.finish(regs)


def invalidate(ring: Tc5Ring) -> None:
    kern, b = ring.kern, ring.kern.builder
    pipe_loop.on_thread0(kern, "tc5.ring.inval", lambda: [
        tma_load.mbarrier_inval(kern, b.add(ring.bars, _c(8 * i)))
        for i in range(2 * ring.lp.stages)])
