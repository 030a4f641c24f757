"""TMA multicast (sm_90): in a kernel that declares a cluster shape, an operand tile of the
TMA ring that every CTA of a cluster loads from the same place is loaded once per cluster,
by the cluster's CTA 0, with `.multicast::cluster` and a mask of every CTA: the copy engine
writes the box at the same shared offset in each CTA and completes its bytes on each CTA's
mbarrier at the same offset (PTX ISA, cp.async.bulk.tensor).

An operand qualifies when its tile index and the loop's bounds are the same in every CTA of
a cluster: computed from constants, scalar parameters, array extents and strides, the loop
variable and `bid(axis)` of the axes along which the cluster is one CTA wide (a value that
depends on `bid` of a clustered axis, on `cluster_rank`, or on memory, does not). The
matmul example's clusters of two CTAs along x share their B tiles.

The ring's protocol (lower/wgmma_product._tma_loop): every CTA still announces its whole
stage's bytes on its own slot mbarrier (its own copies and CTA 0's multicast land on it, in
either order: the tx-count may go below zero while the arrival is pending). A slot CTA 0
refills in every CTA must be free in every CTA: each CTA has S "empty" mbarriers after its
S full ones (count: the cluster's CTAs), of which CTA 0's are used. At iteration j, after
the CTA barrier that ends its warp groups' reads of slot w = (j - 1) mod S, thread 0 of each
CTA arrives on CTA 0's empty[w] (`mapa` + `mbarrier.arrive.shared::cluster`, release
semantics as CUTLASS's cluster barrier arrive; `.release.cluster` costs a MEMBAR.ALL.GPU per
iteration), and CTA 0 waits for that phase before its thread 0 multicasts into w; the phase
is the loop's full-barrier phase of iteration j (empty[w] completes once per refill, and a
refill at iteration j is round (j - 1) div S of w, or j div S for w = S - 1, both j div S).
All of CTA 0 waits, not thread 0 alone: a spin loop inside thread 0's branch makes ptxas
keep the loop's descriptor arithmetic in vector registers (38 R2UR per K-step). Only CTA 0
ever waits on a peer, so the other CTAs run free. After initializing the mbarriers thread 0
makes them visible to the cluster (`fence.mbarrier_init.release.cluster`) and the setup's
barrier is a cluster barrier (no multicast or remote arrival may reach an uninitialized mbarrier). Every arrival
and every byte that reaches a CTA is waited for by it (iterations past the end are neither
released nor issued, by every CTA alike), so after the loop nothing is in flight towards it
and the exit keeps the CTA barriers.
"""

from __future__ import annotations

from dataclasses import dataclass

import llvmlite.ir as ir

from tilelang.codegen.llvm.kernel import I32, I64, KernelEmitter
from tilelang.codegen.lower import tma_load
from tilelang.ir.args import arg_values
from tilelang.ir.ops import BuiltinOp, ConstantOp, ForOp, walk

_UNIFORM_GRID = ("num_blocks", "cluster_size", "cdiv")


def _c(v: int) -> ir.Constant:
    return ir.Constant(I32, v)


@dataclass(frozen=True)
class Multicast:
    """The ring's multicast plan: the cluster's size and, per TMA operand, whether the
    cluster's CTA 0 loads it for every CTA."""

    size: int
    shared: tuple[bool, ...]

    @property
    def mask(self) -> int:
        return (1 << self.size) - 1


def cluster_shape(kern: KernelEmitter) -> tuple[int, int, int] | None:
    """The kernel's declared cluster shape on a target with clusters, or None."""
    if not kern.target.clusters:
        return None
    k = kern.kernel
    spec = getattr(k, "launch", None)
    dims = spec.cluster if spec is not None else \
        (k.attributes.get("cluster_dim") or k.attributes.get("cluster"))
    if not dims:
        return None
    return tuple(dims) + (1,) * (3 - len(dims))


class _Uniform:
    """Which values are the same in every CTA of a cluster of shape `cluster`."""

    def __init__(self, kern: KernelEmitter, cluster):
        self.cluster = cluster
        self.defs: dict[int, object] = {}
        self.ivs: dict[int, ForOp] = {}
        for op in walk(kern.kernel.body):
            for r in op.results:
                self.defs[r.id] = op
            if isinstance(op, ForOp) and op.body.args:
                self.ivs[op.body.args[0].id] = op
        self.params = {p.id for p in kern.kernel.params}
        self.memo: dict[int, bool] = {}

    def value(self, v) -> bool:
        got = self.memo.get(v.id)
        if got is not None:
            return got
        self.memo[v.id] = False                 # a cycle (a carried value) is not uniform
        self.memo[v.id] = got = self._compute(v)
        return got

    def _compute(self, v) -> bool:
        if v.id in self.params:
            return True
        loop = self.ivs.get(v.id)
        if loop is not None:
            return self.loop(loop)
        op = self.defs.get(v.id)
        if isinstance(op, ConstantOp):
            return True
        if not isinstance(op, BuiltinOp) or op.result is None:
            return False
        if op.name == "bid":
            axis = op.arg_map["axis"]
            axis = getattr(axis, "value", axis)
            return isinstance(axis, int) and 0 <= axis < 3 and self.cluster[axis] == 1
        group = op.builtin.group
        if group == "grid" and op.name not in _UNIFORM_GRID:
            return False
        from tilelang.codegen.lower.mma_operands import is_pure_scalar
        if not is_pure_scalar(op):
            return False
        return all(self.value(a) for a in op.operands)

    def loop(self, op: ForOp) -> bool:
        return all(self.value(v) for v in (op.start, op.stop, op.step))


def plan(kern: KernelEmitter, op: ForOp, tma: list) -> Multicast | None:
    """Which of the ring's TMA operands the cluster loads once (module docstring); None when
    none or the kernel has no clusters."""
    cluster = cluster_shape(kern)
    if cluster is None or cluster[0] * cluster[1] * cluster[2] <= 1:
        return None
    size = cluster[0] * cluster[1] * cluster[2]
    if size > 16:                                 # the mask is 16 bits
        return None
    uni = _Uniform(kern, cluster)
    if not uni.loop(op):
        return None
    shared = tuple(all(uni.value(v) for v in arg_values(t.d.op.arg_map["index"]))
                   for t in tma)
    if not any(shared):
        return None
    kern.stats.features.add("cluster")
    return Multicast(size, shared)


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
    return _asm(kern, "mov.u32 $0, %cluster_ctarank;", [], "=r", I32)


def _copy(kern: KernelEmitter, dst, tmap, coords, bar, mask: int | None) -> None:
    n = len(coords)
    cs = ", ".join(f"${i + 2}" for i in range(n))
    mc = ".multicast::cluster" if mask is not None else ""
    tail = f", ${n + 3}" if mask is not None else ""
    text = (f"cp.async.bulk.tensor.{n}d.shared::cluster.global.mbarrier::complete_tx::bytes"
            f"{mc} [$0], [$1, {{{cs}}}], [${n + 2}]{tail};")
    args = [dst, tmap] + coords + [bar]
    cons = "r,l," + "r," * n + "r"
    if mask is not None:
        args.append(ir.Constant(ir.IntType(16), mask))
        cons += ",h"
    _asm(kern, text, args, cons + ",~{memory}")


def empties(kern: KernelEmitter, bars: ir.Value, stages: int, ring_bytes: int) -> ir.Value:
    """The address of the S empty mbarriers, after the S full ones at `bars` (which follow
    the ring's `ring_bytes` at the start of the shared buffer, which grows by 8 bytes each)."""
    kern.stats.smem_bytes = max(kern.stats.smem_bytes, ring_bytes + 16 * stages)
    return kern.builder.add(bars, _c(8 * stages))


def init_empties(kern: KernelEmitter, mc: Multicast, addr: ir.Value, stages: int) -> None:
    """Thread 0: the empty mbarriers (one arrival per CTA of the cluster), then the fence that
    publishes every initialization of this CTA to the cluster."""
    for i in range(stages):
        tma_load.mbarrier_init(kern, kern.builder.add(addr, _c(8 * i)), mc.size)
    publish_init(kern)


def inval_empties(kern: KernelEmitter, addr: ir.Value, stages: int) -> None:
    for i in range(stages):
        tma_load.mbarrier_inval(kern, kern.builder.add(addr, _c(8 * i)))


def _release(kern: KernelEmitter, empty: ir.Value) -> None:
    """Arrive on CTA 0's copy of the empty mbarrier at (this CTA's) address `empty`."""
    _asm(kern, "{ .reg .b32 r; mapa.shared::cluster.u32 r, $0, 0; "
               "mbarrier.arrive.shared::cluster.b64 _, [r]; }", [empty], "r,~{memory}")


def _acquire(kern: KernelEmitter, empty: ir.Value, parity: ir.Value) -> None:
    """Spin until the phase of parity `parity` of CTA 0's own empty mbarrier completed."""
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


def issue_stage(kern: KernelEmitter, mc: Multicast, ops: list, env_iv, image: ir.Value,
                bar: ir.Value, valid: ir.Value, refill: tuple | None = None) -> None:
    """tma_load.issue_stage with multicast: thread 0 of every CTA announces the stage's
    bytes and copies the operands of its own; thread 0 of the cluster's CTA 0 also copies
    the shared ones into every CTA. `refill`: (the slot's empty mbarrier, the phase parity)
    when the slot held an earlier iteration: every CTA releases it to CTA 0, which waits for
    all of them before its multicast."""
    b = kern.builder
    coords = []
    for op in ops:
        index = tma_load.tile_index(kern, op.d, env_iv)
        start = [b.trunc(b.mul(i, ir.Constant(I64, s)), I32)
                 for i, s in zip(index, op.shape)]
        rank = len(op.axes)
        coords.append([start[op.axes.index(a)] for a in reversed(range(rank))])
    # the maps' addresses where every copy's block sees them (one cvta.param each)
    maps = [tma_load.map_address(kern, op.tmap) for op in ops]
    rank0 = b.icmp_unsigned("==", _cta_rank(kern), _c(0))
    if refill is not None:
        # every CTA's thread 0 releases the slot; all of CTA 0 waits (a loop in thread 0's
        # branch alone would cost ptxas its proof that the loop's addresses are uniform)
        _when(kern, b.and_(valid, b.icmp_unsigned("==", kern.vtid, _c(0))),
              lambda: _release(kern, refill[0]))
        _when(kern, b.and_(valid, rank0), lambda: _acquire(kern, refill[0], refill[1]))
    go = b.and_(valid, b.icmp_unsigned("==", kern.vtid, _c(0)))
    then = kern.fn.append_basic_block("tma.issue")
    after = kern.fn.append_basic_block("tma.issued")
    b.cbranch(go, then, after)
    b.position_at_end(then)
    tma_load.arrive_expect_tx(kern, bar, sum(op.nbytes for op in ops))

    def copies(which: bool, mask: int | None) -> None:
        for op, cs, shared, tmap in zip(ops, coords, mc.shared, maps):
            if shared != which:
                continue
            per = op.sop.span // op.sop.itemsize
            for p in range(op.panels):
                inner = b.add(cs[0], _c(p * per)) if p else cs[0]
                dst = b.add(image, _c(op.image_offset + p * op.sop.panel_bytes))
                _copy(kern, dst, tmap, [inner] + cs[1:], bar, mask)

    copies(False, None)
    lead = kern.fn.append_basic_block("tma.multicast")
    done = kern.fn.append_basic_block("tma.multicast.end")
    b.cbranch(rank0, lead, done)
    b.position_at_end(lead)
    copies(True, mc.mask)
    b.branch(done)
    b.position_at_end(done)
    b.branch(after)
    b.position_at_end(after)
