"""Streams pass: which consumers — a `store`, or (with reloads, plan/reloads.py) a
reduction — of a tile computed element-wise from loads are emitted one vector at a time,
and which values they take over (lower/stream.py emits them and explains why; docs/codegen.md,
Plans).

Rules:
  R1 only top-level ops of the kernel body; a consumer is a plain tile store (`index`, no
     mask), or a `sum`/`prod`/`max`/`min` over some axis when the kernel has reloads;
  R2 a member is a load (plain, no `order`), `arange`, a relabelling or an element-wise op
     lowered by elementwise.py, of the consumer's elements, used once — or a reload
     candidate (plan/reloads.py), which each of its consumers computes again;
  R3 nothing between the first member and the consumer writes global memory (the loads move
     down to the consumer);
  R4 the layouts line up: no replicated threads or registers, each load's registers and
     vectors are the consumer's;
  R5 none in a kernel with matrix products (the accumulator epilogues store their own);
  R6 a value some use outside the streams still needs in registers is computed as written,
     and the streams that would compute it again are dropped (repeated to a fixed point).
"""

from __future__ import annotations

from typing import Mapping

from tilelang.codegen.layouts import convert as C
from tilelang.codegen.plan.access import access_layout, access_vector_width, tile_indexed
from tilelang.codegen.plan.inputs import PlanInputs, const_ints
from tilelang.codegen.plan.operands import writes_nothing
from tilelang.codegen.plan.reloads import ReloadPlan
from tilelang.codegen.plan.uses import UseCounts
from tilelang.codegen.scalar.emitter import ELEMENTWISE
from tilelang.ir.ops import BuiltinOp
from tilelang.ir.values import Value
from tilelang.record import field, record
from tilelang.sema.constants import ConstStr
from tilelang.sema.types import DType

# element-wise ops a stream recomputes per vector
_GROUPS = ("operator", "math")
DIVIDE = ("/", "div")
RELABEL = ("expand_dims", "reshape")
REDUCE = ("sum", "prod", "max", "min")


@record(frozen=True)
class Stream:
    store: BuiltinOp                  # the consumer: a `store`, or a reduction (see `reduces`)
    ops: tuple[BuiltinOp, ...]        # the streamed loads and element-wise ops, program order
    loads: tuple[BuiltinOp, ...]
    layout: object = None             # the consumer's layout (a reduction's: its first load's)

    @property
    def reduces(self) -> bool:
        return self.store.name in REDUCE

    def op_of(self, vid: int) -> BuiltinOp:
        return next(o for o in self.ops if o.result.id == vid)


@record(frozen=True)
class StreamPlan:
    streams: tuple[Stream, ...] = ()                  # in program order of their consumers
    # id(consumer op) -> its stream (a store has no result to key it by; the IR's ops live
    # as long as the emission that asks)
    by_consumer: Mapping[int, Stream] = field(default_factory=dict)
    deferred: Mapping[int, Stream] = field(default_factory=dict)  # result id -> a stream of it
    why_none: str = ""                # why no consumer streams although some could


def plan_streams(inputs: PlanInputs, uses: UseCounts, reloads: ReloadPlan,
                 has_products: bool) -> StreamPlan:
    """The streams of the kernel's top-level consumers (R1-R6). The helpers below take
    `kern`: these inputs here, the emitter when lower/stream.py asks them again."""
    kern = inputs
    ops = kern.kernel.body.ops
    again = reloads.values
    if not any(isinstance(o, BuiltinOp) and _consumer(o, again) for o in ops):
        return StreamPlan()
    if has_products:
        # accumulator epilogues have stores of their own (mma_epilogue.py)
        return StreamPlan(why_none="the kernel has matrix products (R5)")
    uses = uses.counts
    pos = {o.result.id: i for i, o in enumerate(ops)
           if isinstance(o, BuiltinOp) and o.result is not None}
    allowed = set(again)
    while True:
        found = [s for p, c in enumerate(ops) if isinstance(c, BuiltinOp) and _consumer(c, again)
                 for s in [_chain(kern, ops, pos, uses, allowed, p, c)] if s is not None]
        while True:
            kept = _not_deferred(found, uses)
            # a value some use still needs in registers is computed as written, and no
            # stream computes it again (each takes it as it is)
            drop = kept & allowed
            bad = [s for s in found if any(o.result.id in kept for o in s.ops)]
            if drop or not bad:
                break
            found = [s for s in found if s not in bad]      # emitted as written
        if not drop:
            break
        allowed -= drop
    by_consumer, deferred = {}, {}
    for s in found:
        by_consumer[id(s.store)] = s
        for o in s.ops:
            deferred.setdefault(o.result.id, s)
    return StreamPlan(tuple(found), by_consumer, deferred)


def _consumer(op: BuiltinOp, again) -> bool:
    if op.name == "store":
        return tile_indexed(op)
    # a reduction is streamed where values are computed again (lower/reload.py): elsewhere
    # its input is kept whole as before
    return bool(again) and op.name in REDUCE


def _not_deferred(found: list[Stream], uses: dict[int, int]) -> set[int]:
    """Ids of streamed values that some use needs in registers: a use by an op outside every
    stream, or by a streamed op that is itself kept."""
    users: dict[int, set] = {}                 # value id -> uses (op, operand index) streamed
    member_of: dict[int, list[Stream]] = {}
    for s in found:
        ids = {o.result.id for o in s.ops}
        for o in s.ops:
            member_of.setdefault(o.result.id, []).append(s)
        for o in [*s.ops, s.store]:
            for k, v in enumerate(o.operands):
                if v.id in ids:
                    users.setdefault(v.id, set()).add((id(o), k, o.result.id
                                                       if o is not s.store else None))
    kept = {vid for vid, us in users.items() if len(us) != uses.get(vid, 0)}
    changed = True
    while changed:
        changed = False
        for vid, us in users.items():
            if vid not in kept and any(u[2] is not None and u[2] in kept for u in us):
                kept.add(vid)
                changed = True
    return kept


def _same_elements(a: tuple, b: tuple) -> bool:
    """Shapes equal but for leading 1s: register r of one layout is register r of the other."""
    while a and a[0] == 1:
        a = a[1:]
    while b and b[0] == 1:
        b = b[1:]
    return a == b


def _kind(kern, op: BuiltinOp, shape: tuple) -> str | None:
    """How a stream computes op per vector, or None when it cannot."""
    rs = tuple(getattr(op.result.type, "shape", ()) or ())
    if op.name == "load":
        return "load" if tile_indexed(op) and "order" not in op.arg_map else None
    if not _same_elements(rs, shape):
        return None
    if op.name == "arange":
        return "arange"
    if op.name in RELABEL:
        x = op.arg_map.get("x")
        ok = isinstance(x, Value) and _same_elements(tuple(x.type.shape), shape)
        return "relabel" if ok else None
    if op.builtin.group in _GROUPS and op.name in ELEMENTWISE and _lowered_elementwise(kern, op):
        if op.name in DIVIDE:
            vals = [a for _, a in op.args if not isinstance(a, (DType, ConstStr))]
            return "divide" if len(vals) == 2 and isinstance(vals[0], Value) else None
        return "elementwise"
    return None


def _chain(kern, ops, pos: dict, uses: dict, allowed: set, p: int,
           st: BuiltinOp) -> Stream | None:
    """The stream of consumer st (at position p), or None."""
    root = st.arg_map.get("tile" if st.name == "store" else "x")
    if not isinstance(root, Value) or not getattr(root.type, "shape", None):
        return None
    shape = tuple(root.type.shape)
    members: dict[int, BuiltinOp] = {}

    def visit(v) -> None:
        if not isinstance(v, Value) or v.id not in pos or v.id in members or \
                (uses.get(v.id) != 1 and v.id not in allowed) or pos[v.id] >= p:
            return
        op = ops[pos[v.id]]
        kind = _kind(kern, op, shape)
        if kind is None:
            return
        members[v.id] = op
        if kind != "load":
            for a in op.operands:
                visit(a)

    visit(root)
    chain = sorted(members.values(), key=lambda o: pos[o.result.id])
    loads = [o for o in chain if o.name == "load"]
    if not loads:
        return None
    first = pos[chain[0].result.id]
    if not all(writes_nothing(o) or getattr(o, "result", None) is not None and
               o.result.id in members for o in ops[first:p]):
        return None
    vw = None
    if st.name == "store":
        _, lay, vw = store_layout(kern, st)
    else:
        if st.name not in REDUCE or root.id not in members or \
                reduced_axes(st, len(shape))[0] == ():
            return None
        lay = _reduced_layout(kern, members, root, shape)
        if lay is None:
            return None
    if not _lines_up(kern, lay, vw, loads):
        return None
    return Stream(st, tuple(chain), tuple(loads), lay)


def _reduced_layout(kern, members: dict, root: Value, shape: tuple):
    """The layout the reduction's input has when computed as written, when the stream can tell
    (the tree must combine the same registers): along element-wise ops, the first operand of
    the result's shape (as elementwise.py picks; ones computed from loads first), down to a
    load of that shape; else None."""
    v = root
    while True:
        op = members.get(v.id)
        if op is None:
            return None
        if op.name == "load":
            if tuple(op.result.type.shape) != shape:
                return None
            return load_layout(kern, op)[1]
        if op.name == "arange" or op.name in RELABEL:
            return None
        full = [a for a in op.operands if tuple(getattr(a.type, "shape", ()) or ()) == shape]
        full.sort(key=lambda a: not _has_load(members, a))
        if not full:
            return None
        v = full[0]


def _has_load(members: dict, v: Value) -> bool:
    op = members.get(v.id)
    if op is None:
        return False
    return op.name == "load" or any(_has_load(members, a) for a in op.operands)


def _lowered_elementwise(kern, op: BuiltinOp) -> bool:
    """The op's lowering is elementwise.py's (one ScalarEmitter.emit per register), which the
    stream repeats per vector; not one registered over it."""
    return kern.lowered_by(op.name, op.builtin.group) == "tilelang.codegen.lower.elementwise"


def store_layout(kern, st: BuiltinOp):
    """(array, layout, registers per vector) of a streamed store."""
    arr = kern.array(st.arg_map["A"])
    t = st.arg_map["tile"].type
    axes = tuple(range(arr.rank))
    lay = access_layout(kern, arr, axes, tuple(t.shape), t.dtype)
    return arr, lay, access_vector_width(arr, axes, lay)


def load_layout(kern, op: BuiltinOp):
    src = kern.array(op.arg_map["A"])
    t = op.result.type
    axes = tuple(range(src.rank))
    lay = access_layout(kern, src, axes, tuple(t.shape), t.dtype)
    return src, lay, access_vector_width(src, axes, lay)


def _lines_up(kern, lay, vw: int | None, loads: list[BuiltinOp]) -> bool:
    """Every thread owns its registers of the consumer's layout (no replicas to gate), has a
    vector or more, and each load's registers are the consumer's, in vectors as wide as the
    store's (a reduction: as the first load's)."""
    if lay.replicated_thread_mask() or _replicas(kern) or \
            len(lay.owned_regs()) != lay.num_regs:
        return False
    for op in loads:
        _, llay, lvw = load_layout(kern, op)
        vw = lvw if vw is None else vw
        if lvw != vw or llay.num_regs != lay.num_regs or C.rename_map(
                llay, C.need_of(lay, tuple(op.result.type.shape))) != list(range(lay.num_regs)):
            return False
    return vw is not None and lay.num_regs >= vw


def stream_vector_width(kern, s: Stream) -> int:
    if not s.reduces:
        return store_layout(kern, s.store)[2]
    return load_layout(kern, s.loads[0])[2]


def reduced_axes(op: BuiltinOp, rank: int) -> tuple[tuple[int, ...], bool]:
    """(the axes a reduction combines, keepdims)."""
    args = op.arg_map
    keep = bool(args["keepdims"].value) if "keepdims" in args else False
    if "axis" not in args or args["axis"] is None:
        return tuple(range(rank)), keep
    return (const_ints(args["axis"])[0] % rank,), keep


def _replicas(kern) -> bool:
    """Exact mode with more threads than the layouts use (replica threads to gate)."""
    return kern.exact and kern.threads != kern.declared_threads
