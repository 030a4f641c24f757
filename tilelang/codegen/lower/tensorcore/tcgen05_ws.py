"""A warp-specialized tcgen05 ring (sm_100a; plan/loops.py R5): a block of the four
epilogue warps the accumulator's layout uses (P = 128 threads; warp w owns TMEM lanes
32w .. 32w + 31), then a producer warp and an MMA warp (`reqntid = (192, 1, 1)`), as
docs/codegen.md, "sm_100a", describes:

    setup:    barrier; thread 0 initializes full[s] and empty[s] (count 1 each); the
              epilogue warps store their rows of the initial accumulator into TMEM;
              fences around a barrier of the whole block
    producer: (warp 4, its elected thread) for every iteration j in slot j mod S: wait
              for empty[j mod S]'s completion of iteration j - S (none for j < S); announce
              the stage's bytes on full[j mod S] and copy iteration j into it; then exit
    MMA:      (warp 5, its elected thread) for every j: wait for full[j mod S]'s phase;
              one tcgen05.mma per k-step of 16; tcgen05.commit to empty[j mod S] (it
              completes when those MMAs are done reading the stage); after the loop
              tcgen05.commit to the kernel's completion mbarrier; then exit
    epilogue: (warps 0-3) wait for the completion; tcgen05.ld of their rows; thread 0
              invalidates the ring's mbarriers; from here on only these P threads run:
              later barriers are named barriers of P threads (`kern.barrier_threads`)
Neither issuing thread waits for the other's work but through the mbarriers, so the copies
of later stages overlap the MMAs of earlier ones, and the loops carry nothing but the
iteration, the slot and its phase.

On a cluster's CTA pair (plan/loops.py R9; the protocol facts are tcgen05_pair.py's) both
CTAs run this block: the kernel's tensor memory is the pair's, a cluster barrier after the
setup publishes each CTA's mbarriers and accumulator rows to the other; each CTA's producer
copies its A rows and its half of B's panels, announced on and completing on the even CTA's
full[s] (count 2); only the even CTA's MMA thread issues (`cta_group::2`, M = 256) and
commits each stage to empty[s] of both CTAs and the accumulator to both CTAs' completion
mbarriers (multicast, mask 0b11); the odd CTA's MMA warp has nothing to do. Each CTA's
epilogue warps read their 128 rows from their own tensor memory. The producer and MMA warps
do not leave before the teardown's cluster barrier (tcgen05_tmem.py), which frees the pair's
columns once both CTAs are done with them.

A multicast ring (plan/loops.py R4: a cluster whose CTAs share an operand's tile, not a CTA
pair) copies each shared operand once per sub-group, by its issuing CTA into every CTA of
the sub-group (tma_multicast.py); every CTA still announces its whole stage on its own
full[s]. A stage must be free in every CTA a copy writes into: the MMA thread commits each
stage to empty[s] of every CTA it shares a stage with (`tcgen05.commit...multicast::cluster`
with tma_multicast.union_mask), and empty[s] counts that many commits, so a producer's wait
for its own empty[s] covers its sub-groups. Setup: `fence.mbarrier_init.release.cluster`
and a cluster barrier before any copy or commit reaches a peer. After its loop the producer
waits for the releases of the last S stages (the peers' commits arrive on its mbarriers),
then arrives on a named barrier the epilogue warps wait at before they invalidate them.
"""

from __future__ import annotations

import llvmlite.ir as ir

from tilelang.codegen.emit.kernel import I32, KernelEmitter
from tilelang.codegen.lower.tensorcore import (pipe_loop, tcgen05_scaled_ring,
                                               tcgen05_tmem as tmem, tma_load)
from tilelang.codegen.lower.tensorcore.tcgen05_pipeline import (Tc5Ring, commit_done,
                                                                init_bars, invalidate,
                                                                read_back, ring_setup)
from tilelang.codegen.lower.tensorcore.tcgen05_product import lane_quarter, tmem_io

EPILOGUE = 128              # the epilogue warps' threads (the layouts' P)
PRODUCER = EPILOGUE         # the producer warp's first thread
ISSUER = EPILOGUE + 32      # the MMA warp's first thread
TAIL_BARRIER = 2            # a multicast ring's producer -> epilogue named barrier (1: the
                            # epilogue warps' own, KernelEmitter.barrier)


def _c(v: int) -> ir.Constant:
    return ir.Constant(I32, v)


def emit_specialized(kern: KernelEmitter, op, lp) -> None:
    b = kern.builder
    ring = ring_setup(kern, op, lp)
    kern.barrier()                      # earlier users of the scratch buffer are done
    init_bars(ring)
    mine = lane_quarter(kern, kern.tmem.address)
    on_epilogue(kern, "tc5.ws.init", lambda: tmem_io(
        kern, mine, list(ring.init.regs), lp.plan.tc5.n, lp.plan.tc5.m))
    tmem.thread_sync(kern)              # also publishes the mbarriers' initialization
    if ring.pair or ring.multicast:
        kern.stats.features.add("cluster")
        tmem.cluster_sync(kern)         # the peers' mbarriers (and accumulator) are ready

    epilogue, mma, gone = split_roles(kern, "tc5.ws")
    if lp.scales:                       # every lane stages scales (tcgen05_scaled_ring.py)
        _produce_scaled(ring)
        b.branch(gone)
    elif ring.multicast:
        # the producer warp tells the epilogue warps that no peer arrives on this CTA's
        # mbarriers any more (its tail waited for every release), so they may invalidate
        produced = kern.fn.append_basic_block("tc5.ws.produced")
        lead(kern, PRODUCER, produced, lambda: _produce(ring))
        b.position_at_end(produced)
        tmem.void(kern, f"barrier.arrive {TAIL_BARRIER}, {EPILOGUE + 32};")
        b.branch(gone)
    else:
        lead(kern, PRODUCER, gone, lambda: _produce(ring))
    b.position_at_end(mma)
    if ring.pair:                       # the even CTA's MMA thread issues for both
        issuing = kern.fn.append_basic_block("tc5.ws.pair.mma")
        b.cbranch(b.icmp_unsigned("==", ring.rank, _c(0)), issuing, gone)
        b.position_at_end(issuing)
    lead(kern, ISSUER, gone, lambda: _issue(ring))
    b.position_at_end(gone)
    b.branch(kern.return_target)

    b.position_at_end(epilogue)
    regs = read_back(ring, mine)
    kern.barrier_threads = EPILOGUE
    if ring.multicast:
        tmem.void(kern, f"barrier.sync {TAIL_BARRIER}, {EPILOGUE + 32};")
    invalidate(ring)
    kern.barrier()                      # the ring is free for the next user
    ring.finish(regs)


def split_roles(kern: KernelEmitter, name: str) -> tuple:
    """Branch the block into its warps' roles: the epilogue warps (threads below EPILOGUE),
    the producer warp and the MMA warp. Returns the (epilogue, mma, gone) blocks, the builder
    left in the producer's; the producer and MMA warps end in `gone`."""
    b = kern.builder
    epilogue = kern.fn.append_basic_block(f"{name}.epilogue")
    workers = kern.fn.append_basic_block(f"{name}.workers")
    b.cbranch(b.icmp_unsigned("<", kern.tid, _c(EPILOGUE)), epilogue, workers)
    b.position_at_end(workers)
    producer = kern.fn.append_basic_block(f"{name}.producer")
    mma = kern.fn.append_basic_block(f"{name}.mma")
    gone = kern.fn.append_basic_block(f"{name}.gone")
    b.cbranch(b.icmp_unsigned("<", kern.tid, _c(ISSUER)), producer, mma)
    b.position_at_end(producer)
    return epilogue, mma, gone


def on_epilogue(kern: KernelEmitter, name: str, fn) -> None:
    """`fn()` in the epilogue warps only (whole warps: tcgen05.st is .sync.aligned)."""
    b = kern.builder
    then = kern.fn.append_basic_block(name)
    after = kern.fn.append_basic_block(f"{name}.end")
    b.cbranch(b.icmp_unsigned("<", kern.tid, _c(EPILOGUE)), then, after)
    b.position_at_end(then)
    fn()
    b.branch(after)
    b.position_at_end(after)


def lead(kern: KernelEmitter, first: int, gone, fn, name: str = "tc5.ws.lead") -> None:
    """`fn()` by the elected thread of the warp starting at thread `first`; then the warp
    goes to `gone`."""
    b = kern.builder
    block = kern.fn.append_basic_block(f"{name}{first}")
    b.cbranch(tma_load.issuer(kern, first), block, gone)
    b.position_at_end(block)
    fn()
    b.branch(gone)


def _ring_loop(ring: Tc5Ring, name: str, extra=()):
    """A loop over the iterations with the slot (byte offset) and its full phase's parity:
    (iv, slot, parity, extra phis, header, exit); the builder in the body."""
    iv, (slot, par), phis, header, exit_ = pipe_loop.loop_header(
        ring.kern, f"{name}.loop", f"{name}.body", f"{name}.exit", ring.start, ring.stop,
        ring.ivt, ring.positive, named=[("slot", I32, _c(0)), ("parity", I32, _c(0))],
        carried=list(extra))
    return iv, slot, par, phis, header, exit_


def latch(ring: Tc5Ring, header, iv, slot, par, phis=(), vals=()) -> None:
    b = ring.kern.builder
    nxt = b.add(slot, _c(ring.stage_bytes))
    wrap = b.icmp_unsigned("==", nxt, _c(ring.ring_bytes))
    tail = b.block
    iv.add_incoming(b.add(iv, ring.step), tail)
    slot.add_incoming(b.select(wrap, _c(0), nxt), tail)
    par.add_incoming(b.xor(par, b.zext(wrap, I32)), tail)
    for p, v in zip(phis, vals):
        p.add_incoming(v, tail)
    b.branch(header)


def _produce(ring: Tc5Ring) -> None:
    """The producer's loop: iteration j refills its stage once the MMAs of iteration j - S
    released it, empty's completion j / S - 1: the parity one less than full's, which a
    fresh mbarrier reports complete (the phase before its first), so the first round does
    not wait and needs no test of its own."""
    kern, b = ring.kern, ring.kern.builder
    tma_load.hoist(kern, ring.tma)
    iv, slot, par, _, header, exit_ = _ring_loop(ring, "tc5.produce")
    tma_load.wait_parity(kern, ring.empty(slot), b.xor(par, _c(1)))
    ring.copy(iv, 0, slot, valid=ir.Constant(ir.IntType(1), 1))   # the loop's test holds
    latch(ring, header, iv, slot, par)
    b.position_at_end(exit_)
    if ring.multicast:
        _tail(ring, slot, par)


def _tail(ring: Tc5Ring, slot, par) -> None:
    """A multicast ring's producer after its loop: the waits of S more iterations, i.e. for
    the releases of the last S stages, by this CTA's MMAs and those of every CTA it shares
    stages with (their commits arrive on this CTA's empty mbarriers), so that nothing is in
    flight towards its mbarriers when they are invalidated."""
    b = ring.kern.builder
    for _ in range(ring.lp.stages):
        tma_load.wait_parity(ring.kern, ring.empty(slot), b.xor(par, _c(1)))
        nxt = b.add(slot, _c(ring.stage_bytes))
        wrap = b.icmp_unsigned("==", nxt, _c(ring.ring_bytes))
        slot = b.select(wrap, _c(0), nxt)
        par = b.xor(par, b.zext(wrap, I32))


def _produce_scaled(ring: Tc5Ring) -> None:
    """A block-scaled ring's producer (plan/loops.py R12): the whole warp waits for the
    stage as `_produce` does, its elected lane copies the operands, and every lane then
    stores its words of the scale tiles and arrives on full[s] (tcgen05_scaled_ring.py)."""
    kern, b = ring.kern, ring.kern.builder
    tma_load.hoist(kern, ring.tma)
    lead = tma_load.issuer(kern, PRODUCER)
    iv, slot, par, _, header, exit_ = _ring_loop(ring, "tc5.produce")
    tma_load.wait_parity(kern, ring.empty(slot), b.xor(par, _c(1)))
    ring.copy(iv, 0, slot, valid=lead)
    tcgen05_scaled_ring.stage_scales(ring, iv, slot)
    latch(ring, header, iv, slot, par)
    b.position_at_end(exit_)


def _issue(ring: Tc5Ring) -> None:
    """The MMA warp's loop, then the commit that completes the accumulator."""
    kern = ring.kern
    iv, slot, par, _, header, exit_ = _ring_loop(ring, "tc5.mma")
    tma_load.wait_parity(kern, ring.full(slot), par)
    ring.mmas(slot)
    latch(ring, header, iv, slot, par)
    kern.builder.position_at_end(exit_)
    commit_done(kern, pair=ring.pair)
