"""Streamed stores: `store(y, index = ..., tile = f(load(a, ...), load(w, ...), t))` where the
loads and the element-wise ops of `f` are used nowhere else is emitted one vector at a time —
load that vector of each operand, compute `f` on it, store it — instead of loading whole tiles
first. A thread then holds one vector per streamed load instead of its whole share of the tile:
vadd over 4,096 f32 elements kept 2 x 32 loaded registers per thread live at once, layernorm's
weights and bias 2 x 32 next to its centred row (issue 14's registers at width 4,096).

Planned once per kernel over the top-level ops of its body (`_plan`); the load and element-wise
lowerings leave a planned op to the store (`deferred`), which emits the stream (`emit`). The
loads move down to the store, so every op between the first streamed load and the store must
write no global memory (`mma_operands._writes_nothing`); each streamed value has one use.
The layouts must line up (`_lines_up`: each load's registers and vectors are the store's, no
replicated registers), else the statement is emitted as written.

The stream has one uniform test for all its accesses: every load and the store inside their
arrays takes the straight path (plain vector loads, the element-wise code, plain vector stores,
per vector); otherwise each vector is loaded and stored predicated, as memory.py's edge tiles.

Order: a thread loads and stores its vectors in turn, so an array stored into is read by the
stream's loads either at the very elements being stored (the same array, or another argument
viewing the same elements: each vector is read before it is written) or not at all. Arguments
that are partially overlapping views of one buffer are not ordered by a statement (docs/
language.md: the block's threads race on them in the plain code too). Only tiles of two
vectors or more per thread are streamed: one vector has nothing to interleave.
"""

from __future__ import annotations

import llvmlite.ir as ir

from tilelang.codegen.layouts import convert as C
from tilelang.codegen.llvm.kernel import KernelEmitter
from tilelang.codegen.llvm.sync import broadcast
from tilelang.codegen.lower.memory import (TileAccess, _padding, access_layout,
                                           access_vector_width, tile_indexed, tile_start)
from tilelang.codegen.lower.mma_operands import PRODUCTS, _writes_nothing, use_counts
from tilelang.codegen.lower.table import lookup
from tilelang.codegen.scalar.emitter import ELEMENTWISE
from tilelang.ir.ops import BuiltinOp, walk
from tilelang.ir.values import Value
from tilelang.sema.constants import ConstStr, ConstValue
from tilelang.sema.types import DType
from tilelang.record import field, record

# element-wise ops a stream recomputes per vector: `/` is left out (a divisor shared by a row
# becomes one reciprocal per row in elementwise.py, which a per-vector emission would not see)
_GROUPS = ("operator", "math")
_EXCLUDED = ("/", "div")


@record
class Stream:
    store: BuiltinOp
    ops: list[BuiltinOp]              # the streamed loads and element-wise ops, program order
    loads: list[BuiltinOp]


@record
class Plan:
    streams: dict[int, Stream] = field(default_factory=dict)     # store op id -> its stream
    deferred: dict[int, Stream] = field(default_factory=dict)    # result id -> its stream


class Deferred:
    """The placeholder a streamed op leaves in the environment (only its stream reads it)."""

    __slots__ = ("op",)

    def __init__(self, op: BuiltinOp):
        self.op = op


def _plan(kern: KernelEmitter) -> Plan:
    got = kern._cache.get("stream.plan")
    if got is None:
        got = kern._cache["stream.plan"] = _make_plan(kern)
    return got


def _make_plan(kern: KernelEmitter) -> Plan:
    out = Plan()
    ops = kern.kernel.body.ops
    if not any(isinstance(o, BuiltinOp) and o.name == "store" for o in ops):
        return out
    if any(isinstance(o, BuiltinOp) and o.name in PRODUCTS for o in walk(kern.kernel.body)):
        return out          # accumulator epilogues have stores of their own (mma_epilogue.py)
    uses = use_counts(kern)
    pos = {o.result.id: i for i, o in enumerate(ops)
           if isinstance(o, BuiltinOp) and o.result is not None}
    for p, st in enumerate(ops):
        if not (isinstance(st, BuiltinOp) and st.name == "store" and tile_indexed(st)):
            continue
        chain: list[BuiltinOp] = []

        def visit(v) -> None:
            if not isinstance(v, Value) or v.id not in pos or uses.get(v.id) != 1 or \
                    v.id in out.deferred:
                return
            op = ops[pos[v.id]]
            if op.name == "load" and tile_indexed(op) and "order" not in op.arg_map:
                chain.append(op)
            elif op.builtin.group in _GROUPS and op.name in ELEMENTWISE and \
                    op.name not in _EXCLUDED and tuple(op.result.type.shape) == shape and \
                    _lowered_elementwise(op):
                chain.append(op)
                for _, a in op.args:
                    visit(a)

        tile = st.arg_map["tile"]
        shape = tuple(tile.type.shape)
        visit(tile)
        loads = [o for o in chain if o.name == "load"]
        if not loads:
            continue
        first = min(pos[o.result.id] for o in chain)
        inner = {id(o) for o in chain}
        if not all(_writes_nothing(o) or id(o) in inner for o in ops[first:p]) or \
                not _lines_up(kern, st, loads):
            continue
        chain.sort(key=lambda o: pos[o.result.id])
        s = Stream(st, chain, loads)
        out.streams[id(st)] = s
        for o in chain:
            out.deferred[o.result.id] = s
    return out


def _lowered_elementwise(op: BuiltinOp) -> bool:
    """The op's lowering is elementwise.py's (one ScalarEmitter.emit per register), which the
    stream repeats per vector; not one registered over it."""
    fn = lookup(op.name, op.builtin.group)
    return getattr(fn, "__module__", None) == "tilelang.codegen.lower.elementwise"


def _store_layout(kern: KernelEmitter, st: BuiltinOp):
    """(array, layout, registers per vector) of a streamed store."""
    arr = kern.array(st.arg_map["A"])
    t = st.arg_map["tile"].type
    axes = tuple(range(arr.rank))
    lay = access_layout(kern, arr, axes, tuple(t.shape), t.dtype)
    return arr, lay, access_vector_width(arr, axes, lay)


def _load_layout(kern: KernelEmitter, op: BuiltinOp):
    src = kern.array(op.arg_map["A"])
    t = op.result.type
    axes = tuple(range(src.rank))
    lay = access_layout(kern, src, axes, tuple(t.shape), t.dtype)
    return src, lay, access_vector_width(src, axes, lay)


def _lines_up(kern: KernelEmitter, st: BuiltinOp, loads: list[BuiltinOp]) -> bool:
    """Every thread owns its registers of the store (no replicas to gate), has two vectors or
    more, and each load's registers are the store's, in vectors as wide."""
    _, lay, vw = _store_layout(kern, st)
    if lay.replicated_thread_mask() or kern.primary is not None or lay.num_regs <= vw or \
            len(lay.owned_regs()) != lay.num_regs:
        return False
    for op in loads:
        _, llay, lvw = _load_layout(kern, op)
        if lvw != vw or llay.num_regs != lay.num_regs or C.rename_map(
                llay, C.need_of(lay, tuple(op.result.type.shape))) != list(range(lay.num_regs)):
            return False
    return True


def deferred(kern: KernelEmitter, op: BuiltinOp) -> Deferred | None:
    """The placeholder when `op` is left to the store of its stream (its lowering returns it),
    else None."""
    plan = _plan(kern)
    if op.result is None or op.result.id not in plan.deferred:
        return None
    return Deferred(op)


def streams(kern: KernelEmitter, store: BuiltinOp) -> Stream | None:
    return _plan(kern).streams.get(id(store))


def emit(kern: KernelEmitter, s: Stream) -> None:
    """The stream's store: per vector of the store's layout, that vector of each load, the
    element-wise ops on it, the vector store (layouts checked by `_lines_up`)."""
    st = s.store
    arr, lay, vw = _store_layout(kern, st)
    shape = tuple(st.arg_map["tile"].type.shape)
    start, _ = tile_start(kern, st, shape)
    out = TileAccess(kern, arr, start, shape, None, lay)
    loads = []
    for op in s.loads:
        src, llay, _ = _load_layout(kern, op)
        ldt = op.result.type
        lstart, _ = tile_start(kern, op, tuple(ldt.shape))
        acc = TileAccess(kern, src, lstart, tuple(ldt.shape), None, llay)
        loads.append((op, acc, kern.to_storage(_padding(kern, op, ldt.dtype), src.dtype)))
    b = kern.builder
    # materialized operands, broadcast into the store's layout once
    inner = {o.result.id for o in s.ops}
    fixed: dict[int, tuple] = {}
    for op in s.ops:
        for _, a in op.args if op.name != "load" else ():
            if isinstance(a, Value) and a.id not in inner and a.id not in fixed:
                fixed[a.id] = broadcast(kern, kern.tile(a), lay)
    inside = out.inside()
    for _, acc, _ in loads:
        inside = b.and_(inside, acc.inside())
    fast_bb = kern.fn.append_basic_block("stream.full")
    edge_bb = kern.fn.append_basic_block("stream.edge")
    done = kern.fn.append_basic_block("stream.done")
    b.cbranch(inside, fast_bb, edge_bb).set_weights([1024, 1])
    groups = [list(range(g, g + vw)) for g in range(0, lay.num_regs, vw)]
    for bb, edge in ((fast_bb, False), (edge_bb, True)):
        b.position_at_end(bb)
        for grp in groups:
            vals: dict[tuple[int, int], ir.Value] = {}
            for op, acc, spad in loads:
                if edge:
                    got = [kern.from_storage(v, acc.arr.dtype)
                           for v in acc._edge_group(grp, None, spad)]
                else:
                    got = acc._load_vector(grp[0], vw)
                for r, v in zip(grp, got):
                    vals[(op.result.id, r)] = v
            regs = {r: _value(kern, st.arg_map["tile"], r, vals, fixed) for r in grp}
            if edge:
                out._edge_group(grp, [kern.to_storage(regs[r], arr.dtype) for r in grp], None)
            else:
                out._store_vector(grp, regs)
        b.branch(done)
    b.position_at_end(done)


def _value(kern: KernelEmitter, v, r: int, vals: dict, fixed: dict) -> ir.Value:
    """Register r of streamed value v (its loads' registers of this vector in `vals`)."""
    key = (v.id, r)
    got = vals.get(key)
    if got is not None:
        return got
    if v.id in fixed:
        return fixed[v.id][r]
    op = _plan(kern).deferred[v.id]
    op = next(o for o in op.ops if o.result.id == v.id)
    args, dtypes, params = [], [], {}
    for name, a in op.args:
        if isinstance(a, (DType, ConstStr)):
            params[name] = a
        elif isinstance(a, Value):
            args.append(_value(kern, a, r, vals, fixed))
            dtypes.append(a.type.dtype)
        elif a.dtype is None:
            args.append(a.value)
            dtypes.append(None)
        else:
            args.append(kern.se.constant(a.value, a.dtype))
            dtypes.append(a.dtype)
    got = vals[key] = kern.se.emit(op.name, args, dtypes, op.result.type.dtype, params)
    return got

