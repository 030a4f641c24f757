"""A tcgen05 ring on a cluster's CTA pair (sm_100a; plan/loops.py R9): a cluster of two CTAs
along M whose B tile is the same, each CTA holding its own 128 accumulator rows in its tensor
memory, the even CTA issuing `tcgen05.mma.cta_group::2` of M = 256 over both CTAs' shared
memory (docs/codegen.md, "sm_100a"; the emulator's reading is judged by Triton's Gluon 2-CTA
kernel, tests/emulator/test_emu_tcgen05_pair.py):

    setup:    the kernel's tensor memory is the pair's (tcgen05_tmem.py: alloc, relinquish
              and dealloc with cta_group::2, a cluster barrier before the dealloc); barrier;
              thread 0 initializes full[s] (count 2: both CTAs' expect_tx) and empty[s]
              (count 1); every warp stores its rows of the initial accumulator into TMEM;
              a cluster barrier between tcgen05's thread-sync fences (the peer's mbarriers
              and accumulator are ready before the even CTA's first MMA)
    issuer:   (the elected thread of warp 0 in each CTA) copies iterations 0 .. S-2: its A
              rows and its half of B's panels (B's columns rank * N/2 ..), announced on and
              completing on the even CTA's full[s] (`mapa` to rank 0, `.cta_group::2`
              copies); per iteration j: the even CTA's thread waits for full's phase (both
              CTAs' bytes), issues the MMAs and commits them to empty[j mod S] of both CTAs
              (multicast, mask 0b11); both threads wait for iteration j-1's empty completion
              in their own CTA and copy iteration j+S-1 into that slot; after the loop the
              even CTA commits to both CTAs' completion mbarriers
    everyone: wait for the completion; tcgen05.ld of its rows from its own TMEM; thread 0
              invalidates the ring's mbarriers; barrier
Each CTA's B image holds half the tile's columns, and a stage only that half (plan/loops.py R9).
"""

from __future__ import annotations

import llvmlite.ir as ir

from tilelang.codegen.emit.kernel import I32, KernelEmitter
from tilelang.codegen.lower.tensorcore import pipe_loop, tcgen05_tmem as tmem, tma_load
from tilelang.codegen.lower.tensorcore.tcgen05_pipeline import (commit_done, init_bars,
                                                                invalidate, read_back,
                                                                ring_setup)
from tilelang.codegen.lower.tensorcore.tcgen05_product import lane_quarter, tmem_io


def _c(v: int) -> ir.Constant:
    return ir.Constant(I32, v)


def emit_pair(kern: KernelEmitter, op, lp) -> None:
    b = kern.builder
    kern.stats.features.add("cluster")
    ring = ring_setup(kern, op, lp)
    S, stage_bytes, ring_bytes = lp.stages, ring.stage_bytes, ring.ring_bytes
    true = ir.Constant(ir.IntType(1), 1)
    kern.barrier()                      # earlier users of the scratch buffer are done
    init_bars(ring)
    mine = lane_quarter(kern, kern.tmem.address)
    tmem_io(kern, mine, list(ring.init.regs), lp.plan.tc5.n, lp.plan.tc5.m)
    tmem.thread_sync(kern)
    tmem.cluster_sync(kern)             # the peer's mbarriers and accumulator are ready
    even = b.icmp_unsigned("==", ring.rank, _c(0))

    lead = kern.fn.append_basic_block("tc5.pair.issuer")
    after = kern.fn.append_basic_block("tc5.pair.issued")
    b.cbranch(tma_load.issuer(kern), lead, after)
    b.position_at_end(lead)
    tma_load.hoist(kern, ring.tma)
    for s in range(S - 1):
        ring.copy(ring.start, s, s * stage_bytes)
    iv, (slot, phase, started), _, header, exit_ = pipe_loop.loop_header(
        kern, "tc5.pair", "tc5.pair.body", "tc5.pair.exit", ring.start, ring.stop, ring.ivt,
        ring.positive, named=[("slot", I32, _c(0)), ("phase", I32, _c(0)),
                              ("started", ir.IntType(1), ir.Constant(ir.IntType(1), 0))])
    _on(kern, even, "tc5.pair.mma", lambda: (
        tma_load.wait_parity(kern, ring.full(slot), phase), ring.mmas(slot)))
    # iteration j-1's slot: free once the pair's MMAs of it are done (its empty's completion
    # in this CTA: this round's parity, or the previous round's when slot j wrapped to 0)
    wslot = b.select(b.icmp_unsigned("==", slot, _c(0)), _c(ring_bytes - stage_bytes),
                     b.sub(slot, _c(stage_bytes)))
    wpar = b.select(b.icmp_unsigned("==", slot, _c(0)), b.xor(phase, _c(1)), phase)
    _on(kern, started, "tc5.pair.wait.empty",
        lambda: tma_load.wait_parity(kern, ring.empty(wslot), wpar))
    ring.copy(iv, S - 1, wslot)
    nxt = b.add(slot, _c(stage_bytes))
    wrap = b.icmp_unsigned("==", nxt, _c(ring_bytes))
    tail = b.block
    iv.add_incoming(b.add(iv, ring.step), tail)
    slot.add_incoming(b.select(wrap, _c(0), nxt), tail)
    phase.add_incoming(b.xor(phase, b.zext(wrap, I32)), tail)
    started.add_incoming(true, tail)
    b.branch(header)
    b.position_at_end(exit_)
    _on(kern, even, "tc5.pair.done", lambda: commit_done(kern, pair=True))
    b.branch(after)
    b.position_at_end(after)

    regs = read_back(ring, mine)
    invalidate(ring)
    kern.barrier()                      # the ring is free for the next user
    ring.finish(regs)


def _on(kern: KernelEmitter, cond: ir.Value, name: str, fn) -> None:
    """`fn()` where `cond` holds; the builder continues after it."""
    b = kern.builder
    then = kern.fn.append_basic_block(name)
    after = kern.fn.append_basic_block(f"{name}.end")
    b.cbranch(cond, then, after)
    b.position_at_end(then)
    fn()
    b.branch(after)
    b.position_at_end(after)
