"""TMA multicast (sm_90): in a kernel that declares a cluster shape, an operand tile of the
TMA ring that several CTAs of a cluster load from the same place is loaded once for them,
by one of them, with `.multicast::cluster` and the mask of those CTAs: the copy engine
writes the box at the same shared offset in each CTA of the mask and completes its bytes on
each one's mbarrier at the same offset (PTX ISA, cp.async.bulk.tensor).

Which CTAs share a tile: its index may depend on `bid` of some clustered axes (those along
which the cluster is more than one CTA wide); the CTAs that differ only along the other
clustered axes (the operand's *pattern*) read the same tile. The matmul example's clusters
of 2 along x share B (index (k, n)) between both CTAs; clusters of 2 x 2 share A along y
and B along x, each within a column / row of the cluster. An index built from constants,
scalar parameters, array extents and strides, the loop variable and `bid` qualifies; one
that depends on `cluster_rank`, memory or a carried value does not, and the loop's bounds
may depend on no clustered axis (every CTA runs the same iterations). The sub-group of CTAs
whose coordinates off the pattern are equal has as issuer the one at 0 along the pattern;
its mask is the pattern of CTA 0 shifted by the issuer's rank.

The ring's protocol (lower/tensorcore/wgmma_product.tma_loop): every CTA still announces its whole
stage's bytes on its own slot mbarrier (its own copies and the multicasts land on it, in
any order: the tx-count may go below zero while the arrival is pending). A slot an issuer
refills in every CTA of its sub-group must be free in all of them: each CTA has S "empty"
mbarriers per pattern after its S full ones (count: the sub-group's CTAs), of which the
issuers' are used. At iteration j, after the CTA barrier that ends its warp groups' reads
of slot w = (j - 1) mod S, thread 0 of each CTA arrives on each issuer's empty[w] (at its
cluster address, one `mapa` before the loop plus 8 w; `mbarrier.arrive.shared::cluster`,
release semantics as CUTLASS's cluster barrier arrive;
`.release.cluster` costs a MEMBAR.ALL.GPU per iteration), and an issuing CTA waits for that
phase before its thread 0 multicasts into w; the phase is the loop's full-barrier phase of
iteration j (empty[w] completes once per refill, and a refill at iteration j is round
(j - 1) div S of w, or j div S for w = S - 1, both j div S). All of the issuing CTA waits,
not thread 0 alone: a spin loop inside thread 0's branch makes ptxas keep the loop's
descriptor arithmetic in vector registers (38 R2UR per K-step). Only issuers wait on
peers. After initializing the mbarriers thread 0 makes them visible to the cluster
(`fence.mbarrier_init.release.cluster`) and the setup's barrier is a cluster barrier (no
multicast or remote arrival may reach an uninitialized mbarrier). Every arrival and every
byte that reaches a CTA is waited for by it (iterations past the end are neither released
nor issued, by every CTA alike), so after the loop nothing is in flight towards it and the
exit keeps the CTA barriers.
"""

from __future__ import annotations

import llvmlite.ir as ir

from tilelang.codegen.emit.kernel import I32, KernelEmitter
from tilelang.codegen.lower.tensorcore import tma_load
# which operands a cluster shares is decided before emission (plan/loops.py, R4)
from tilelang.codegen.plan.loops import (MAX_SETS, Multicast,  # noqa: F401
                                         cluster_shape)


def _c(v: int) -> ir.Constant:
    return ir.Constant(I32, v)


def _asm(kern: KernelEmitter, text: str, args: list, cons: str, ret=ir.VoidType()):
    asm = ir.InlineAsm(ir.FunctionType(ret, [a.type for a in args]), text, cons,
                       side_effect=True)
    return kern.builder.call(asm, args)


def cluster_sync(kern: KernelEmitter) -> None:
    """Every thread of every CTA of the cluster arrives (release) and waits (acquire)."""
    _asm(kern, "barrier.cluster.arrive.aligned;", [], "~{memory}")
    _asm(kern, "barrier.cluster.wait.aligned;", [], "~{memory}")


def publish_init(kern: KernelEmitter) -> None:
    """After mbarrier.init: the initializations visible to the cluster's other CTAs."""
    _asm(kern, "fence.mbarrier_init.release.cluster;", [], "~{memory}")


def _cta_rank(kern: KernelEmitter) -> ir.Value:
    """This CTA's rank in its cluster, read once at the kernel's entry (an asm with side
    effects stays where it is put: read in the ring's loop, it cost an S2UR and the
    compares of the issuer tests every iteration)."""
    rank = kern.cluster_rank
    if rank is None:
        b = kern.builder                 # not a second builder: see tma_load.issuer
        here = b.block
        b.position_at_start(kern.entry)
        rank = kern.cluster_rank = _asm(kern, "mov.u32 $0, %cluster_ctarank;", [],
                                                  "=r", I32)
        b.position_at_end(here)
    return rank


def _copy(kern: KernelEmitter, dst, tmap, coords, bar, mask: ir.Value | None) -> None:
    n = len(coords)
    cs = ", ".join(f"${i + 2}" for i in range(n))
    mc = ".multicast::cluster" if mask is not None else ""
    tail = f", ${n + 3}" if mask is not None else ""
    text = (f"cp.async.bulk.tensor.{n}d.shared::cluster.global.mbarrier::complete_tx::bytes"
            f"{mc} [$0], [$1, {{{cs}}}], [${n + 2}]{tail};")
    args = [dst, tmap] + coords + [bar]
    cons = "r,l," + "r," * n + "r"
    if mask is not None:
        args.append(mask)
        cons += ",h"
    _asm(kern, text, args, cons + ",~{memory}")


def empties(kern: KernelEmitter, bars: ir.Value, stages: int, ring_bytes: int) -> ir.Value:
    """The address of the empty mbarriers (S per sharing pattern, MAX_SETS patterns), after
    the S full ones at `bars` (which follow the ring's `ring_bytes` at the start of the
    shared buffer, which grows by them)."""
    kern.stats.smem_bytes = max(kern.stats.smem_bytes, ring_bytes + 8 * stages * (1 + MAX_SETS))
    return kern.builder.add(bars, _c(8 * stages))


def init_empties(kern: KernelEmitter, mc: Multicast, addr: ir.Value, stages: int) -> None:
    """Thread 0: the empty mbarriers (one arrival per CTA of the pattern's sub-group), then
    the fence that publishes every initialization of this CTA to the cluster."""
    for k, g in enumerate(mc.sets):
        for i in range(stages):
            tma_load.mbarrier_init(kern, kern.builder.add(addr, _c(8 * (k * stages + i))),
                                   mc.group_size(g))
    publish_init(kern)


def inval_empties(kern: KernelEmitter, mc: Multicast, addr: ir.Value, stages: int) -> None:
    for i in range(len(mc.sets) * stages):
        tma_load.mbarrier_inval(kern, kern.builder.add(addr, _c(8 * i)))


def remote_empties(kern: KernelEmitter, mc: Multicast, empty: ir.Value,
                   stages: int) -> list[ir.Value]:
    """Per sharing pattern, the cluster address (`mapa`) of its issuer's first empty
    mbarrier, made once before the loop: slot w's is that plus 8 w, since a CTA's shared
    memory is one contiguous range of the cluster's window (one `mapa` per K-step less, and
    the vote ptxas puts around a `mapa` in a one-thread branch)."""
    b = kern.builder
    return [_asm(kern, "mapa.shared::cluster.u32 $0, $1, $2;",
                 [b.add(empty, _c(8 * stages * k)), lead], "=r,r,r", I32)
            for k, (lead, _, _) in enumerate(_sub_groups(kern, mc))]


def _release(kern: KernelEmitter, remote: ir.Value) -> None:
    """Arrive on the empty mbarrier at cluster address `remote` (an issuer's)."""
    _asm(kern, "mbarrier.arrive.shared::cluster.b64 _, [$0];", [remote], "r,~{memory}")


def _acquire(kern: KernelEmitter, empty: ir.Value, parity: ir.Value) -> None:
    """Spin until the phase of parity `parity` of this CTA's empty mbarrier completed."""
    b = kern.builder
    head = kern.fn.append_basic_block("mc.empty.wait")
    done = kern.fn.append_basic_block("mc.empty.done")
    b.branch(head)
    b.position_at_end(head)
    ok = _asm(kern, "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 "
                    "p, [$1], $2; selp.u32 $0, 1, 0, p; }", [empty, parity],
              "=r,r,r,~{memory}", I32)
    b.cbranch(b.icmp_unsigned("!=", ok, _c(0)), done, head)
    b.position_at_end(done)


def _when(kern: KernelEmitter, cond: ir.Value, body) -> None:
    b = kern.builder
    then = kern.fn.append_basic_block("mc.when")
    after = kern.fn.append_basic_block("mc.when.end")
    b.cbranch(cond, then, after)
    b.position_at_end(then)
    body()
    b.branch(after)
    b.position_at_end(after)


def _sub_groups(kern: KernelEmitter, mc: Multicast) -> list[tuple]:
    """Per sharing pattern: (the rank of this CTA's sub-group's issuing CTA, whether this CTA
    is it, the mask of the sub-group as i16). A sub-group is the CTAs whose cluster
    coordinates off the pattern's axes are this CTA's; its issuer has 0 along them."""
    b = kern.builder
    cx, cy, _ = mc.cluster
    rank = _cta_rank(kern)
    coord = [b.urem(rank, _c(cx)), b.urem(b.udiv(rank, _c(cx)), _c(cy)),
             b.udiv(rank, _c(cx * cy))]
    stride = (1, cx, cx * cy)
    out = []
    for g in mc.sets:
        lead = _c(0)
        for a in range(3):
            if a not in g and mc.cluster[a] > 1:
                lead = b.add(lead, b.mul(coord[a], _c(stride[a])))
        mask = b.trunc(b.shl(_c(mc.pattern(g)), lead), ir.IntType(16))
        out.append((lead, b.icmp_unsigned("==", rank, lead), mask))
    return out


def union_mask(kern: KernelEmitter, mc: Multicast) -> ir.Value:
    """The CTAs (i16 mask) of this CTA's sub-groups, itself included: those that write into
    its stages or whose stages it writes into (a tcgen05 ring releases a stage to all of
    them, tcgen05_ws.py)."""
    b = kern.builder
    out = None
    for _, _, mask in _sub_groups(kern, mc):
        out = mask if out is None else b.or_(out, mask)
    return out


def union_size(mc: Multicast) -> int:
    """How many CTAs `union_mask` names (the same for every CTA: CTA 0's union of the
    patterns, shifted)."""
    m = 0
    for g in mc.sets:
        m |= mc.pattern(g)
    return bin(m).count("1")


def issue_stage(kern: KernelEmitter, mc: Multicast, ops: list, env_iv, image: ir.Value,
                bar: ir.Value, valid: ir.Value, refill: tuple | None = None, *,
                leader: ir.Value | None = None) -> None:
    """tma_load.issue_stage with multicast: thread 0 of every CTA announces the stage's
    bytes and copies the operands of its own; the issuing CTA of each sub-group also copies
    the operands it shares into every CTA of the sub-group. `refill`: (the slot's first
    empty mbarrier, the phase parity, S, `remote_empties`, the first slot's empty mbarrier)
    when the slot held an earlier iteration: every CTA releases it to each issuer that writes
    into it, and each issuing CTA waits for its sub-group's releases before its multicast;
    the k-th pattern's empty mbarriers are S (`refill[2]`) mbarriers further on. `leader`:
    the issuing thread when it is not the block's (a producer warp's), without `refill`."""
    b = kern.builder
    coords = []
    for op in ops:
        index = tma_load.tile_index(kern, op.d, env_iv)
        start = [b.mul(b.trunc(i, I32), _c(s)) for i, s in zip(index, op.shape)]
        rank = len(op.axes)
        coords.append([start[op.axes.index(a)] for a in reversed(range(rank))])
    # the maps' addresses where every copy's block sees them (one cvta.param each)
    maps = [tma_load.map_address(kern, op.tmap) for op in ops]
    sets = mc.sets
    subs = _sub_groups(kern, mc)
    if refill is not None:
        # every CTA's issuing thread (tma_load.issuer: thread 0) releases the slot to each
        # issuer; all of an issuing CTA waits
        # (a loop in thread 0's branch alone would cost ptxas its proof that the loop's
        # addresses are uniform)
        # the block's issuing thread, not a replica of it (a thread past the layouts'
        # threads)
        t0 = b.and_(valid, tma_load.issuer(kern))

        slot = b.sub(refill[0], refill[4])              # 8 x the slot's index

        def release():
            for remote in refill[3]:
                _release(kern, b.add(remote, slot))
        _when(kern, t0, release)
        for k, (_, mine, _) in enumerate(subs):
            _when(kern, b.and_(valid, mine), lambda k=k: _acquire(
                kern, b.add(refill[0], _c(8 * refill[2] * k)), refill[1]))
    go = b.and_(valid, tma_load.issuer(kern) if leader is None else leader)  # not a replica
    then = kern.fn.append_basic_block("tma.issue")
    after = kern.fn.append_basic_block("tma.issued")
    b.cbranch(go, then, after)
    b.position_at_end(then)
    tma_load.arrive_expect_tx(kern, bar, sum(op.nbytes for op in ops))

    def copies(which, mask) -> None:
        for op, cs, g, tmap in zip(ops, coords, mc.groups, maps):
            if g != which:
                continue
            per = op.sop.span // op.sop.itemsize
            for p in range(op.panels):
                inner = b.add(cs[0], _c(p * per)) if p else cs[0]
                dst = b.add(image, _c(op.image_offset + p * op.sop.panel_bytes))
                _copy(kern, dst, tmap, [inner] + cs[1:], bar, mask)

    copies(None, None)
    for g, (_, mine, mask) in zip(sets, subs):
        _when(kern, mine, lambda g=g, mask=mask: copies(g, mask))
    b.branch(after)
    b.position_at_end(after)
