"""Streams: a consumer — a store, or (with re-loads) a reduction — of a tile computed
element-wise from loads is emitted one vector at a time: load that vector of each operand,
compute the element-wise ops on it, then store it or feed it to the reduction's in-thread tree.
A thread then holds one vector per streamed load instead of its whole share of the tile: vadd
over 4,096 f32 elements kept 2 x 32 loaded registers per thread live at once, layernorm's
weights and bias 2 x 32 next to its centred row (issue 14's registers at width 4,096).

Planned once per kernel over the top-level ops of its body (`_plan`); the load, element-wise,
`arange` and relabelling lowerings leave a deferred op to its consumer (`deferred`), which
emits the stream (`emit`). A value is streamed when its one use is in the stream, or when
lower/reload.py lets it be computed again (a tile that would be kept across a block reduction:
each consumer re-reads it); it is deferred only when all its uses are streams, else it is
computed as written and the streams take it as it is. The loads move down to the consumer, so
every op between a streamed load and its consumer must write no global memory
(`mma_operands._writes_nothing`). The layouts must line up (`_lines_up`: each load's
registers and vectors are the consumer's, no replicated registers), else the statement is
emitted as written.

The stream has one uniform test for all its accesses: every load and the store inside their
arrays takes the straight path (plain vector loads, the element-wise code, plain vector stores,
per vector); otherwise each vector is loaded and stored predicated, as memory.py's edge tiles.
A reduction combines each register's value in the tree reduce.py's in-thread level builds
(`reduce.Tree`), joins the two paths' partials and goes on across lanes and warps: the same
values as the tile kept whole.

`/` by a divisor outside the stream (a row's sum) is one reciprocal per row before the stream
and a multiply per element, exactly as elementwise.py emits it; exact `/` divides each element.

Order: a thread loads and stores its vectors in turn, so an array stored into is read by the
stream's loads either at the very elements being stored (the same array, or another argument
viewing the same elements: each vector is read before it is written) or not at all. Arguments
that are partially overlapping views of one buffer are not ordered by a statement (docs/
language.md: the block's threads race on them in the plain code too). A tile of one vector
per thread has nothing to interleave but is streamed too: its accesses then share the one
inside-test (vadd@256: 27 -> 25 instructions issued per warp; the branch memory.py
puts before each access of a tile is issued even where a full tile takes none).
"""

from __future__ import annotations

import llvmlite.ir as ir

from tilelang.codegen.layouts import convert as C
from tilelang.codegen.layouts import distributed as L
from tilelang.codegen.emit.kernel import I32, KernelEmitter, TileVal
from tilelang.codegen.emit.sync import broadcast
from tilelang.codegen.lower import reduce as R
from tilelang.codegen.lower import reload
from tilelang.codegen.lower.elementwise import _shared_reciprocal
from tilelang.codegen.lower.memory import (TileAccess, _padding, access_layout,
                                           access_vector_width, tile_indexed, tile_start)
from tilelang.codegen.lower.tensorcore.mma_operands import PRODUCTS, _writes_nothing, use_counts
from tilelang.codegen.lower.table import lookup
from tilelang.codegen.scalar.emitter import ELEMENTWISE
from tilelang.ir.ops import BuiltinOp, walk
from tilelang.ir.values import Value
from tilelang.sema.constants import ConstStr
from tilelang.sema.types import I32 as T_I32, DType
from tilelang.record import field, record

# element-wise ops a stream recomputes per vector
_GROUPS = ("operator", "math")
_DIVIDE = ("/", "div")
_RELABEL = ("expand_dims", "reshape")
_REDUCE = ("sum", "prod", "max", "min")


@record
class Stream:
    store: BuiltinOp                  # the consumer: a `store`, or a reduction (see `reduces`)
    ops: list[BuiltinOp]              # the streamed loads and element-wise ops, program order
    loads: list[BuiltinOp]
    layout: object = None             # the consumer's layout (a reduction's: its first load's)

    @property
    def reduces(self) -> bool:
        return self.store.name in _REDUCE

    def op_of(self, vid: int) -> BuiltinOp:
        return next(o for o in self.ops if o.result.id == vid)


@record
class Plan:
    streams: dict[int, Stream] = field(default_factory=dict)     # consumer op id -> its stream
    deferred: dict[int, Stream] = field(default_factory=dict)    # result id -> a stream of it


class Deferred:
    """The placeholder a streamed op leaves in the environment (only its streams read it)."""

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
    again = reload.again(kern)
    if not any(isinstance(o, BuiltinOp) and _consumer(o, again) for o in ops):
        return out
    if any(isinstance(o, BuiltinOp) and o.name in PRODUCTS for o in walk(kern.kernel.body)):
        return out          # accumulator epilogues have stores of their own (mma_epilogue.py)
    uses = use_counts(kern)
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
    for s in found:
        out.streams[id(s.store)] = s
        for o in s.ops:
            out.deferred.setdefault(o.result.id, s)
    return out


def _consumer(op: BuiltinOp, again) -> bool:
    if op.name == "store":
        return tile_indexed(op)
    # a reduction is streamed where values are computed again (lower/reload.py): elsewhere
    # its input is kept whole as before
    return bool(again) and op.name in _REDUCE


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


def _kind(op: BuiltinOp, shape: tuple) -> str | None:
    """How a stream computes op per vector, or None when it cannot."""
    rs = tuple(getattr(op.result.type, "shape", ()) or ())
    if op.name == "load":
        return "load" if tile_indexed(op) and "order" not in op.arg_map else None
    if not _same_elements(rs, shape):
        return None
    if op.name == "arange":
        return "arange"
    if op.name in _RELABEL:
        x = op.arg_map.get("x")
        ok = isinstance(x, Value) and _same_elements(tuple(x.type.shape), shape)
        return "relabel" if ok else None
    if op.builtin.group in _GROUPS and op.name in ELEMENTWISE and _lowered_elementwise(op):
        if op.name in _DIVIDE:
            vals = [a for _, a in op.args if not isinstance(a, (DType, ConstStr))]
            return "divide" if len(vals) == 2 and isinstance(vals[0], Value) else None
        return "elementwise"
    return None


def _chain(kern: KernelEmitter, ops, pos: dict, uses: dict, allowed: set, p: int,
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
        kind = _kind(op, shape)
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
    if not all(_writes_nothing(o) or getattr(o, "result", None) is not None and
               o.result.id in members for o in ops[first:p]):
        return None
    vw = None
    if st.name == "store":
        _, lay, vw = _store_layout(kern, st)
    else:
        if st.name not in _REDUCE or root.id not in members or \
                R._axes(kern, st, len(shape))[0] == ():
            return None
        lay = _reduced_layout(kern, members, root, shape)
        if lay is None:
            return None
    if not _lines_up(kern, lay, vw, loads):
        return None
    return Stream(st, chain, loads, lay)


def _reduced_layout(kern: KernelEmitter, members: dict, root: Value, shape: tuple):
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
            return _load_layout(kern, op)[1]
        if op.name == "arange" or op.name in _RELABEL:
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


def _lines_up(kern: KernelEmitter, lay, vw: int | None, loads: list[BuiltinOp]) -> bool:
    """Every thread owns its registers of the consumer's layout (no replicas to gate), has a
    vector or more, and each load's registers are the consumer's, in vectors as wide as the
    store's (a reduction: as the first load's)."""
    if lay.replicated_thread_mask() or kern.primary is not None or \
            len(lay.owned_regs()) != lay.num_regs:
        return False
    for op in loads:
        _, llay, lvw = _load_layout(kern, op)
        vw = lvw if vw is None else vw
        if lvw != vw or llay.num_regs != lay.num_regs or C.rename_map(
                llay, C.need_of(lay, tuple(op.result.type.shape))) != list(range(lay.num_regs)):
            return False
    return vw is not None and lay.num_regs >= vw


def _vector_width(kern: KernelEmitter, s: Stream) -> int:
    if not s.reduces:
        return _store_layout(kern, s.store)[2]
    return _load_layout(kern, s.loads[0])[2]


def deferred(kern: KernelEmitter, op: BuiltinOp) -> Deferred | None:
    """The placeholder when `op` is left to the consumers of its streams (its lowering returns
    it), else None."""
    plan = _plan(kern)
    if op.result is None or op.result.id not in plan.deferred:
        return None
    return Deferred(op)


def streams(kern: KernelEmitter, consumer: BuiltinOp) -> Stream | None:
    return _plan(kern).streams.get(id(consumer))


def emit(kern: KernelEmitter, s: Stream) -> TileVal | None:
    """The stream's consumer: per vector of its layout, that vector of each load, the
    element-wise ops on it, then the vector store or the reduction's tree (layouts checked by
    `_lines_up`). Returns a reduction's value."""
    st = s.store
    lay = s.layout
    vw = _vector_width(kern, s)
    shape = tuple(st.arg_map["tile" if not s.reduces else "x"].type.shape)
    out = arr = None
    if not s.reduces:
        arr = kern.array(st.arg_map["A"])
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
    fixed, extra = _before(kern, s, lay)
    outside = out.outside() if out is not None else None
    for _, acc, _ in loads:
        outside = acc.outside() if outside is None else b.or_(outside, acc.outside())
    red = groups_of = None
    root = st.arg_map["x"] if s.reduces else st.arg_map["tile"]
    if s.reduces:
        red = R.Reduction(kern, st, root.type.dtype, len(shape))
        out_layout, groups_of = R.in_thread_groups(lay, red.axes, red.keep)
        where = {r: (ro, j) for ro, g in enumerate(groups_of) for j, r in enumerate(g)}
    fast_bb = kern.fn.append_basic_block("stream.full")
    edge_bb = kern.fn.append_basic_block("stream.edge")
    done = kern.fn.append_basic_block("stream.done")
    b.cbranch(outside, edge_bb, fast_bb).set_weights([1, 1024])
    groups = [list(range(g, g + vw)) for g in range(0, lay.num_regs, vw)]
    ends = []
    lines, here = kern.lineinfo, b.debug_metadata
    for bb, edge in ((fast_bb, False), (edge_bb, True)):
        b.position_at_end(bb)
        trees = [R.Tree(len(g), red.combine) for g in groups_of] if s.reduces else None
        for grp in groups:
            vals: dict[tuple[int, int], ir.Value] = {}
            for op, acc, spad in loads:
                if lines is not None and op.span is not None:
                    b.debug_metadata = lines.loc(op.span)   # a load keeps its own line
                if edge:
                    got = [kern.from_storage(v, acc.arr.dtype)
                           for v in acc._edge_group(grp, None, spad)]
                else:
                    got = acc._load_vector(grp[0], vw)
                for r, v in zip(grp, got):
                    vals[(op.result.id, r)] = v
                b.debug_metadata = here
            regs = {r: _value(kern, s, root, r, vals, fixed, extra) for r in grp}
            if s.reduces:
                for r in grp:
                    ro, j = where[r]
                    trees[ro].feed(j, red.state(regs[r]))
            elif edge:
                out._edge_group(grp, [kern.to_storage(regs[r], arr.dtype) for r in grp], None)
            else:
                out._store_vector(grp, regs)
        ends.append((b.block, [t.result() for t in trees] if trees else None))
        b.branch(done)
    b.position_at_end(done)
    if not s.reduces:
        return None
    (fb, fs), (eb, es) = ends
    acc = []
    for f, e in zip(fs, es):
        state = []
        for fv, ev in zip(f, e):
            phi = b.phi(fv.type)
            phi.add_incoming(fv, fb)
            phi.add_incoming(ev, eb)
            state.append(phi)
        acc.append(state)
    lay_out, final = R.across(kern, lay, out_layout, acc, [red.acc_dt], red.axes,
                              red.combine)
    return red.result(lay_out, final)


def _before(kern: KernelEmitter, s: Stream, lay) -> tuple[dict, dict]:
    """What the stream computes once before its branch: operands from outside it broadcast
    into its layout (`fixed`); each `/`'s shared reciprocals and each `arange`'s thread part
    (`extra`, by op result id)."""
    inner = {o.result.id for o in s.ops}
    fixed: dict[int, tuple] = {}
    extra: dict[int, object] = {}
    for op in s.ops:
        if op.name == "load":
            continue
        if op.name == "arange":
            src = L.reshape(lay, tuple(op.result.type.shape))
            extra[op.result.id] = (kern.thread_linear(src.thread_weights()), src)
            continue
        vals = [a for _, a in op.args if not isinstance(a, (DType, ConstStr))]
        if op.name in _DIVIDE and not (isinstance(vals[1], Value) and vals[1].id in inner):
            d = kern.tile(vals[1]) if isinstance(vals[1], Value) else vals[1]
            params = {n: a for n, a in op.args if isinstance(a, (DType, ConstStr))}
            recip = _shared_reciprocal(kern, d, lay, op.result.type.dtype, params)
            if recip is not None:
                extra[op.result.id] = recip
                vals = vals[:1]
        for a in vals:
            if isinstance(a, Value) and a.id not in inner and a.id not in fixed:
                fixed[a.id] = broadcast(kern, kern.tile(a), lay)
    return fixed, extra


def _value(kern: KernelEmitter, s: Stream, v, r: int, vals: dict, fixed: dict,
           extra: dict) -> ir.Value:
    """Register r of streamed value v (its loads' registers of this vector in `vals`)."""
    key = (v.id, r)
    got = vals.get(key)
    if got is not None:
        return got
    if v.id in fixed:
        return fixed[v.id][r]
    op = s.op_of(v.id)
    rt = op.result.type
    if op.name in _RELABEL:
        got = _value(kern, s, op.arg_map["x"], r, vals, fixed, extra)
    elif op.name == "arange":
        # `arange_in`'s value of this register (creation.py)
        base, src = extra[v.id]
        got = kern.builder.add(base, ir.Constant(I32, src.reg_linear(r)))
        if rt.dtype != T_I32:
            got = kern.se.cast(got, T_I32, rt.dtype)
    elif op.name in _DIVIDE and v.id in extra:
        # elementwise.py's shared reciprocal: the dividend (in the result's dtype) times it
        x = next(a for _, a in op.args if not isinstance(a, (DType, ConstStr)))
        xv = _value(kern, s, x, r, vals, fixed, extra)
        if x.type.dtype != rt.dtype:
            xv = kern.se.emit("astype", [xv], [x.type.dtype], rt.dtype, {"dtype": rt.dtype})
        got = kern.builder.fmul(xv, extra[v.id][r])
    else:
        args, dtypes, params = [], [], {}
        for name, a in op.args:
            if isinstance(a, (DType, ConstStr)):
                params[name] = a
            elif isinstance(a, Value):
                args.append(_value(kern, s, a, r, vals, fixed, extra))
                dtypes.append(a.type.dtype)
            elif a.dtype is None:
                args.append(a.value)
                dtypes.append(None)
            else:
                args.append(kern.se.constant(a.value, a.dtype))
                dtypes.append(a.dtype)
        got = kern.se.emit(op.name, args, dtypes, rt.dtype, params)
    vals[key] = got
    return got
