"""The tcgen05 accumulator pipeline (sm_100a; plan/loops.py R13): a persistent kernel's loop
over output tiles, run warp-specialized with two accumulators in tensor memory, so that the
epilogue of one tile overlaps the MMAs of the next (the accumulator pipeline of CUTLASS's and
Triton's persistent Blackwell matmuls; docs/codegen.md, "sm_100a"). The block is the four
epilogue warps, a producer warp and an MMA warp (`reqntid = (192, 1, 1)`, tcgen05_ws.py's);
the tensor memory holds accumulator 0 at column 0 and accumulator 1 at column N; the ring's
images are dynamic shared memory of their own (the epilogue's stores use the scratch buffer
while the producer copies).

    setup:    barrier; thread 0 initializes the ring's full[s] and empty[s] (count 1 each),
              acc_full[0..1] (count 1: the MMA thread's commit) and acc_empty[0..1] (count
              128: every epilogue thread); the epilogue warps store the ring's initial
              accumulator into both accumulators; fences around a barrier of the block
    producer: (warp 4, its elected thread) for every tile, the loop body's scalars (the
              tile's coordinates), then the ring's copies as tcgen05_ws.py's producer, its
              slot and phase carried from tile to tile
    MMA:      (warp 5, its elected thread) for tile i (the i-th this block computes): wait for
              acc_empty[i mod 2]'s release of tile i - 2 (none for i < 2), the ring's MMAs
              into accumulator i mod 2, each stage committed to its empty mbarrier; then
              tcgen05.commit to acc_full[i mod 2]
    epilogue: (warps 0-3) the loop as written, but for the ring: wait for acc_full[i mod 2];
              tcgen05.ld of their rows; tcgen05.st of the initial accumulator into them
              (tile i + 2 starts from it); tcgen05.fence::before_thread_sync; arrive on
              acc_empty[i mod 2]; then the rest of the body (the store) with the rows read.
              After the loop thread 0 invalidates the mbarriers; from there on only these
              128 threads run (named barriers, `kern.barrier_threads`)
Every mbarrier phase that completes is waited for: the producer's last copies by the MMA
thread, its last MMAs by the epilogue's waits for acc_full, the epilogue's releases of the
last two tiles by no one (the MMA thread has left; nothing reaches the block after them).
"""

from __future__ import annotations

import llvmlite.ir as ir

from tilelang.codegen.emit.kernel import I32, KernelEmitter, TileVal
from tilelang.codegen.lower.tensorcore import pipe_loop, tcgen05_tmem as tmem, tma_load
from tilelang.codegen.lower.tensorcore.mma_epilogue import remember_acc_layout
from tilelang.codegen.lower.tensorcore.mma_sync import shared_address
from tilelang.codegen.lower.tensorcore.tcgen05_pipeline import (Tc5Ring, init_bars,
                                                                invalidate, ring_setup)
from tilelang.codegen.lower.tensorcore.tcgen05_product import (commit, issue_mmas,
                                                               lane_quarter, tmem_io)
from tilelang.codegen.lower.tensorcore.tcgen05_ws import (EPILOGUE, ISSUER, PRODUCER, latch,
                                                          lead, on_epilogue, split_roles)
from tilelang.ir.ops import BuiltinOp, ForOp
from tilelang.record import record

BUFFERS = 2


def _c(v: int) -> ir.Constant:
    return ir.Constant(I32, v)


@record
class AccPipe:
    """The pipeline's state the epilogue warps' drain reads (kept on the kernel's Tmem): the
    ring, the accumulator mbarriers (acc_full[i] at bars + 8i, acc_empty[i] 16 bytes on) and
    the tile counter (an i32 variable of the entry block)."""

    ring: Tc5Ring
    bars: ir.Value
    count: ir.Value

    def full(self, buf: ir.Value) -> ir.Value:
        return self.ring.kern.builder.add(self.bars, self.ring.kern.builder.shl(buf, _c(3)))

    def empty(self, buf: ir.Value) -> ir.Value:
        return self.ring.kern.builder.add(self.full(buf), _c(8 * BUFFERS))


def emit_outer(kern: KernelEmitter, op: ForOp, emit_loop) -> None:
    """The loop over output tiles `op` as the accumulator pipeline; `emit_loop(kern, op)` is
    the region walker's ordinary loop, which the epilogue warps run."""
    b = kern.builder
    at = next(i for i, o in enumerate(op.body.ops) if isinstance(o, ForOp))
    inner, pre = op.body.ops[at], op.body.ops[:at]
    lp = kern.plan.loops.pipelined(inner)
    ring = ring_setup(kern, inner, lp, bounds=False, own=True)
    pipe = AccPipe(ring, shared_address(kern, kern.kept_smem(16 * BUFFERS, 8)),
                   _counter(kern))
    n, m = lp.plan.tc5.n, lp.plan.tc5.m
    kern.barrier()                      # earlier users of the scratch buffer are done
    init_bars(ring)
    pipe_loop.on_thread0(kern, "tc5.acc.init", lambda: [
        tma_load.mbarrier_init(kern, b.add(pipe.bars, _c(8 * i)),
                               1 if i < BUFFERS else EPILOGUE)
        for i in range(2 * BUFFERS)])
    mine = lane_quarter(kern, kern.tmem.address)
    on_epilogue(kern, "tc5.acc.reset", lambda: [
        tmem_io(kern, b.add(mine, _c(buf * n)), list(ring.init.regs), n, m)
        for buf in range(BUFFERS)])
    tmem.thread_sync(kern)              # also publishes the mbarriers' initialization
    kern.tmem.pipe = pipe

    epilogue, mma, gone = split_roles(kern, "tc5.acc")
    lead(kern, PRODUCER, gone, lambda: (tma_load.hoist(kern, ring.tma),
                                        _tiles(kern, op, pre, ring, _produce, [])),
         name="tc5.acc.lead")
    b.position_at_end(mma)
    lead(kern, ISSUER, gone, lambda: _tiles(kern, op, pre, ring,
                                            lambda r, st: _issue(pipe, st), [_c(0)]),
         name="tc5.acc.lead")
    b.position_at_end(gone)
    b.branch(kern.return_target)

    b.position_at_end(epilogue)
    kern.barrier_threads = EPILOGUE
    emit_loop(kern, op)
    pipe_loop.on_thread0(kern, "tc5.acc.inval", lambda: [
        tma_load.mbarrier_inval(kern, b.add(pipe.bars, _c(8 * i)))
        for i in range(2 * BUFFERS)])
    invalidate(ring)
    kern.barrier()                      # the ring is free for the next user


def drain(kern: KernelEmitter, inner: ForOp, lp) -> None:
    """The epilogue warps' part of the ring `inner` for tile i: its accumulator read out of
    tensor memory once the MMAs are done, reset for tile i + 2 and released to the MMA
    warp."""
    b = kern.builder
    pipe: AccPipe = kern.tmem.pipe
    n, m = lp.plan.tc5.n, lp.plan.tc5.m
    i = b.load(pipe.count)
    buf = b.and_(i, _c(1))
    tma_load.wait_parity(kern, pipe.full(buf), b.and_(b.lshr(i, _c(1)), _c(1)))
    tmem.void(kern, "tcgen05.fence::after_thread_sync;")
    acc = b.add(lane_quarter(kern, kern.tmem.address), b.mul(buf, _c(n)))
    regs = tmem_io(kern, acc, None, n, m)
    tmem_io(kern, acc, list(pipe.ring.init.regs), n, m)
    tmem.void(kern, "tcgen05.fence::before_thread_sync;")
    tma_load._asm(kern, "mbarrier.arrive.shared::cta.b64 _, [$0];", [pipe.empty(buf)],
                  "r,~{memory}")
    b.store(b.add(i, _c(1)), pipe.count)
    kern.env[inner.results[0].id] = TileVal(pipe.ring.init.dtype, lp.plan.acc, tuple(regs))
    remember_acc_layout(kern, lp.plan.acc)


def _counter(kern: KernelEmitter) -> ir.Value:
    """The epilogue's tile counter: an i32 variable of the entry block, 0 at the start."""
    b = kern.builder
    here = b.block
    b.position_at_start(kern.entry)
    var = b.alloca(I32, name="tc5.acc.tile")
    b.store(_c(0), var)
    b.position_at_end(here)
    return var


def _tiles(kern: KernelEmitter, op: ForOp, pre, ring: Tc5Ring, body, extra: list) -> None:
    """The loop over output tiles for one issuing thread: per tile the body's scalars, the
    ring's bounds, then `body(ring, state)`, which returns the next state; the state is the
    ring's slot and phase (carried from tile to tile) and `extra`."""
    b = kern.builder
    start, stop, step = (kern.tile(v).value for v in (op.start, op.stop, op.step))
    ivt = op.start.type.dtype
    zero = ir.Constant(step.type, 0)
    positive = b.icmp_signed(">", step, zero) if ivt.signed else \
        b.icmp_unsigned(">", step, zero)
    t, (slot, par), more, header, exit_ = pipe_loop.loop_header(
        kern, "tc5.acc.tiles", "tc5.acc.tile", "tc5.acc.tiles.exit", start, stop, ivt,
        positive, named=[("slot", I32, _c(0)), ("parity", I32, _c(0))], carried=extra)
    kern.env[op.iv.id] = TileVal(ivt, kern.scalar_layout, (t,))
    for o in pre:
        if isinstance(o, BuiltinOp):
            kern.emit_builtin(o)
        else:
            kern.emit_constant(o)
    ring.bind_bounds()
    nxt = body(ring, [slot, par] + list(more))
    tail = b.block
    t.add_incoming(b.add(t, step), tail)
    for phi, v in zip([slot, par] + list(more), nxt):
        phi.add_incoming(v, tail)
    b.branch(header)
    b.position_at_end(exit_)


def _ring_loop(ring: Tc5Ring, name: str, slot, par):
    """The ring's loop over K from the carried slot and phase: (iv, slot, parity, header,
    exit); the builder in the body."""
    iv, (s, p), _, header, exit_ = pipe_loop.loop_header(
        ring.kern, f"{name}.loop", f"{name}.body", f"{name}.exit", ring.start, ring.stop,
        ring.ivt, ring.positive, named=[("slot", I32, slot), ("parity", I32, par)])
    return iv, s, p, header, exit_


def _produce(ring: Tc5Ring, state: list) -> list:
    """One tile's copies: as tcgen05_ws.py's producer, from the carried slot and phase."""
    b = ring.kern.builder
    iv, slot, par, header, exit_ = _ring_loop(ring, "tc5.acc.produce", *state)
    tma_load.wait_parity(ring.kern, ring.empty(slot), b.xor(par, _c(1)))
    ring.copy(iv, 0, slot, valid=ir.Constant(ir.IntType(1), 1))   # the loop's test holds
    latch(ring, header, iv, slot, par)
    b.position_at_end(exit_)
    return [slot, par]


def _issue(pipe: AccPipe, state: list) -> list:
    """Tile i's MMAs into accumulator i mod 2, once the epilogue released it (its use by
    tile i - 2: acc_empty's completion i div 2 - 1, the parity one less, which a fresh
    mbarrier reports complete), then the commit that hands it to the epilogue."""
    ring = pipe.ring
    kern, b = ring.kern, ring.kern.builder
    slot0, par0, i = state
    buf = b.and_(i, _c(1))
    tma_load.wait_parity(kern, pipe.empty(buf),
                         b.xor(b.and_(b.lshr(i, _c(1)), _c(1)), _c(1)))
    tmem.void(kern, "tcgen05.fence::after_thread_sync;")
    acc = b.add(kern.tmem.address, b.mul(buf, _c(ring.lp.plan.tc5.n)))
    iv, slot, par, header, exit_ = _ring_loop(ring, "tc5.acc.mma", slot0, par0)
    tma_load.wait_parity(kern, ring.full(slot), par)
    issue_mmas(kern, ring.da, ring.db, ring.idesc, acc, b.add(ring.base, slot),
               b_offset=ring.offs[1], k=ring.k, kstep=ring.lp.plan.tc5.k,
               bar=ring.empty(slot))
    latch(ring, header, iv, slot, par)
    b.position_at_end(exit_)
    commit(kern, pipe.full(buf))
    return [slot, par, b.add(i, _c(1))]
