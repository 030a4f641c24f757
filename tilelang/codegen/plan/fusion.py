"""Fusion pass: which reductions and stores compute their input piecewise, so that the
element-wise producers and broadcasts that feed only them never exist as a whole tile
(docs/codegen.md, Plans; lower/fused.py emits them).

A block-private histogram compares a (512,) tile of keys with `arange(64)` and sums the
(512, 64) booleans over axis 0: written out, every thread of 128 would hold 256 booleans at
once, but the sum needs only one element of each row at a time. The consumer computes each of
its registers from the operands that are held (the keys, the bins) and feeds it straight into
the reduction's in-thread tree, one register of the reduced axis after another, so what is
live is the operands, the tree's partial sums and one element being computed. The limits of
docs/codegen.md (E0783, E0787) count what is live after this pass: the fused values are not
tiles any thread holds.

A plain tile store (`index`, no mask) of such a tile is fused the same way: the store computes
each vector of its access layout and stores it before computing the next.

Scans and `argmax`/`argmin` keep their input: a scan's result is as large as its input (the
limits would refuse it all the same), and the index reductions are not fused yet.

Rules:
  R1 a consumer is a `sum`/`prod`/`max`/`min` over some axes of a tile (not of a scalar), or
     a plain tile store (`index`, no mask) of a tile made only from smaller ones (a tile with
     an operand of its own shape is stored in that operand's layout, as written) whose access
     layout replicates no registers; and no stream computes its input already (plan/streams.py
     emits it per vector);
  R2 a member is an op of the consumer's input shape, in the consumer's region and before it:
     an element-wise op lowered by elementwise.py (operators, math, `where`, `astype`, ...), or
     a `broadcast_to`; its other operands (smaller tiles, scalars, constants, tiles computed
     otherwise) are the group's leaves, held as they are computed;
  R3 a member's value is used exactly once, by the consumer or another member: a value used
     twice is needed whole by its other use, so it is computed as written (and the limits
     count it);
  R4 none in a kernel with matrix products (their epilogues take element-wise ops of the
     accumulator over, lower/tensorcore/mma_epilogue.py);
  R5 a reduction's input is computed in the layout it would have had written out (the
     values and the order of the combines are then those of the tile kept whole) when a
     leaf has its shape; made only from smaller tiles, it has no such layout, and the one
     that holds fewest registers is chosen (`fused_layout`): elementwise.py's default for a
     (1024, 256) comparison would give each of 128 threads 512 keys and 512 weights.
"""

from __future__ import annotations

from itertools import product
from typing import Mapping

from tilelang.codegen.layouts.distributed import Layout, log2, thread_bits
from tilelang.codegen.plan.access import tile_indexed
from tilelang.codegen.plan.inputs import PlanInputs
from tilelang.codegen.plan.streams import REDUCE, StreamPlan, reduced_axes, store_layout
from tilelang.codegen.plan.uses import UseCounts
from tilelang.codegen.scalar.emitter import ELEMENTWISE
from tilelang.ir.ops import BuiltinOp, Kernel, walk
from tilelang.ir.values import Value
from tilelang.record import field, record

_ELEMENTWISE_MODULE = "tilelang.codegen.lower.elementwise"
BROADCAST = "broadcast_to"
STORE = "store"


@record(frozen=True)
class FusedGroup:
    consumer: BuiltinOp               # the reduction or the store
    ops: tuple[BuiltinOp, ...]        # the members, in program order: never held whole
    leaves: tuple[int, ...]           # ids of the values they take as computed
    shape: tuple[int, ...]            # the shape of the tile that is never held
    axes: tuple[int, ...]             # the axes a reduction combines (a store: none)
    layout: Layout | None = None      # a store's access layout, a reduction's input's (R5;
                                      # None: the layout it has written out)
    vector: int = 1                   # a store's registers per vector access

    @property
    def stores(self) -> bool:
        return self.consumer.name == STORE

    @property
    def root(self) -> Value:
        return self.consumer.arg_map["tile" if self.stores else "x"]

    def op_of(self, vid: int) -> BuiltinOp:
        return next(o for o in self.ops if o.result.id == vid)

    def fused_ids(self) -> frozenset[int]:
        return frozenset(o.result.id for o in self.ops)


@record(frozen=True)
class Declined:
    consumer: BuiltinOp
    value: int                        # the consumer's input, computed as written
    why: str


@record(frozen=True)
class FusionPlan:
    groups: tuple[FusedGroup, ...] = ()                 # in program order of their consumers
    # id(consumer op) -> its group (the IR's ops live as long as the emission that asks)
    by_consumer: Mapping[int, FusedGroup] = field(default_factory=dict)
    # value id -> the group that computes it piecewise
    fused: Mapping[int, FusedGroup] = field(default_factory=dict)
    declined: tuple[Declined, ...] = ()                 # consumers of a producer left whole
    why_none: str = ""                # why nothing is fused although something might be

    def piecewise(self) -> dict[int, BuiltinOp]:
        """Value id -> the consumer that computes it (ir/resources.py's input: what is never
        live whole, and where its operands are last read)."""
        return {vid: g.consumer for vid, g in self.fused.items()}


def plan_fusion(inputs: PlanInputs, uses: UseCounts, streams: StreamPlan,
                has_products: bool) -> FusionPlan:
    """The fused groups of the kernel's reductions and stores (R1-R4)."""
    if has_products:
        return FusionPlan(why_none="the kernel has matrix products (R4)")
    groups, declined = [], []
    for block in _blocks(inputs.kernel):
        pos = {o.result.id: i for i, o in enumerate(block.ops)
               if isinstance(o, BuiltinOp) and o.result is not None}
        for p, c in enumerate(block.ops):
            if not _consumer(c, streams):
                continue
            g, why = _group(inputs, block.ops, pos, uses, p, c)
            if g is not None:
                groups.append(g)
            elif why:
                declined.append(Declined(c, _input(c).id, why))
    fused = {o.result.id: g for g in groups for o in g.ops}
    return FusionPlan(tuple(groups), {id(g.consumer): g for g in groups}, fused,
                      tuple(declined))


def _blocks(kernel: Kernel):
    yield kernel.body
    for op in walk(kernel.body):
        yield from op.regions


def _input(op: BuiltinOp):
    return op.arg_map.get("tile" if op.name == STORE else "x")


def _consumer(op, streams: StreamPlan) -> bool:
    """R1 (a store's layout is checked with its group)."""
    if not isinstance(op, BuiltinOp) or op.name not in REDUCE and not (
            op.name == STORE and tile_indexed(op)):
        return False
    x = _input(op)
    if not isinstance(x, Value) or not getattr(x.type, "shape", None):
        return False
    return id(op) not in streams.by_consumer and x.id not in streams.deferred


def _member_kind(inputs: PlanInputs, op, shape: tuple) -> bool:
    """R2: an op of the consumer's input shape the consumer can compute per register."""
    if not isinstance(op, BuiltinOp) or op.result is None or \
            tuple(getattr(op.result.type, "shape", ()) or ()) != shape:
        return False
    if op.name == BROADCAST:
        return True
    return op.name in ELEMENTWISE and \
        inputs.lowered_by(op.name, op.builtin.group) == _ELEMENTWISE_MODULE


def _group(inputs: PlanInputs, ops, pos: dict, uses: UseCounts, p: int,
           c: BuiltinOp) -> tuple[FusedGroup | None, str]:
    """The group of consumer c (at position p of its region), or (None, why not; "" when
    its input is not a producer at all)."""
    root = _input(c)
    shape = tuple(root.type.shape)
    if root.id not in pos or pos[root.id] >= p or not _member_kind(inputs, ops[pos[root.id]],
                                                                   shape):
        return None, ""
    if uses.get(root.id) != 1:
        return None, (f"its input is used {uses.get(root.id)} times: computed whole for its "
                      f"other uses (R3)")
    members: dict[int, BuiltinOp] = {}
    leaves: dict[int, None] = {}

    def visit(v) -> None:
        op = ops[pos[v.id]] if v.id in pos and pos[v.id] < p else None
        if v.id in members:
            return
        if op is None or not _member_kind(inputs, op, shape) or uses.get(v.id) != 1:
            leaves[v.id] = None                                                  # R2, R3
            return
        members[v.id] = op
        for a in op.operands:
            visit(a)

    visit(root)
    chain = tuple(sorted(members.values(), key=lambda o: pos[o.result.id]))
    if c.name != STORE:
        axes = reduced_axes(c, len(shape))[0]
        small = [_leaf_shape(ops, pos, v, len(shape)) for v in leaves]
        lay = None if shape in small else \
            fused_layout(shape, inputs.threads, tuple(small), axes)                  # R5
        return FusedGroup(c, chain, tuple(leaves), shape, axes, lay), ""
    if any(_leaf_shape(ops, pos, v, len(shape)) == shape for v in leaves):
        return None, ""          # R1: the tile is stored in its own layout, streams' business
    _, lay, vw = store_layout(inputs, c)
    if len(lay.owned_regs()) != lay.num_regs:
        return None, "its access layout repeats registers (R1)"
    return FusedGroup(c, chain, tuple(leaves), shape, (), lay, vw), ""


def _leaf_shape(ops, pos: dict, vid: int, rank: int) -> tuple[int, ...]:
    """A leaf's shape, padded with leading 1s to the group's rank (scalars and constants
    are all 1s)."""
    v = next((o.result for o in ops if getattr(o, "result", None) is not None and
              o.result.id == vid), None)
    shape = tuple(getattr(getattr(v, "type", None), "shape", ()) or ())
    return (1,) * (rank - len(shape)) + shape


def fused_layout(shape: tuple[int, ...], threads: int, leaves: tuple[tuple[int, ...], ...],
                 axes: tuple[int, ...]) -> Layout:
    """R5: the layout of a fused reduction's input made only from smaller tiles. A thread
    holds its share of every leaf broadcast into the layout (the distinct elements of a leaf
    along the register bits of its non-1 axes) and, at the end, its result registers (the
    register bits along the kept axes); the split of thread bits between the axes that holds
    fewest of those, then needs fewest shuffles and exchanges (results times thread bits along
    the reduced axes), is taken. Registers take the low coordinate bits of each axis, the
    lanes and then the warps the next ones, along the reduced axes first."""
    rank = len(shape)
    nl, nw = thread_bits(threads)
    sizes = [log2(n) for n in shape]
    place = min(nl + nw, sum(sizes))
    kept = [d for d in range(rank) if d not in axes]
    best = None
    for t in product(*(range(min(n, place) + 1) for n in sizes)):
        if sum(t) != place:
            continue
        r = [n - k for n, k in zip(sizes, t)]
        held = sum(1 << sum(r[d] for d in range(rank) if lf[d] != 1) for lf in leaves)
        results = 1 << sum(r[d] for d in kept)
        key = (held + results, results * sum(t[d] for d in axes), t)
        best = key if best is None or key < best else best
    t = best[2]
    unit = [[tuple(1 << b if e == d else 0 for e in range(rank)) for b in range(sizes[d])]
            for d in range(rank)]
    reg = [u for d in reversed(range(rank)) for u in unit[d][:sizes[d] - t[d]]]
    spread = [u for d in [*axes, *kept] for u in unit[d][sizes[d] - t[d]:]]
    zero = (0,) * rank
    spread += [zero] * (nl + nw - len(spread))
    return Layout(tuple(shape), tuple(reg), tuple(spread[:nl]), tuple(spread[nl:]))
