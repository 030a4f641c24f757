"""Streams: a consumer — a store, or (with re-loads) a reduction — of a tile computed
element-wise from loads is emitted one vector at a time: load that vector of each operand,
compute the element-wise ops on it, then store it or feed it to the reduction's in-thread tree.
A thread then holds one vector per streamed load instead of its whole share of the tile: vadd
over 4,096 f32 elements kept 2 x 32 loaded registers per thread live at once, layernorm's
weights and bias 2 x 32 next to its centred row (the row kernels' registers at width 4,096, docs/codegen.md).

Planned before emission over the top-level ops of its body (plan/streams.py); the load, element-wise,
`arange` and relabelling lowerings leave a deferred op to its consumer (`deferred`), which
emits the stream (`emit`). A value is streamed when its one use is in the stream, or when
lower/reload.py lets it be computed again (a tile that would be kept across a block reduction:
each consumer re-reads it); it is deferred only when all its uses are streams, else it is
computed as written and the streams take it as it is. The loads move down to the consumer, so
every op between a streamed load and its consumer must write no global memory
(`plan/operands.writes_nothing`). The layouts must line up (`_lines_up`: each load's
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

from tilelang.codegen.layouts import distributed as L
from tilelang.codegen.emit.kernel import I32, KernelEmitter, TileVal
from tilelang.codegen.emit.sync import broadcast
from tilelang.codegen.lower import reduce as R
from tilelang.codegen.lower.elementwise import _shared_reciprocal
from tilelang.codegen.lower.memory import TileAccess, _padding, tile_start
from tilelang.codegen.plan.streams import (DIVIDE, RELABEL, Stream,
                                           load_layout, stream_vector_width)
from tilelang.ir.ops import BuiltinOp
from tilelang.ir.values import Value
from tilelang.sema.constants import ConstStr
from tilelang.sema.types import I32 as T_I32, DType

# the plan (which tiles stream, into which consumer) is plan/streams.py's


class Deferred:
    """The placeholder a streamed op leaves in the environment (only its streams read it)."""

    __slots__ = ("op",)

    def __init__(self, op: BuiltinOp):
        self.op = op


def deferred(kern: KernelEmitter, op: BuiltinOp) -> Deferred | None:
    """The placeholder when `op` is left to the consumers of its streams (its lowering returns
    it), else None."""
    plan = kern.plan.streams
    if op.result is None or op.result.id not in plan.deferred:
        return None
    return Deferred(op)


def streams(kern: KernelEmitter, consumer: BuiltinOp) -> Stream | None:
    return kern.plan.streams.by_consumer.get(id(consumer))


def emit(kern: KernelEmitter, s: Stream) -> TileVal | None:
    """The stream's consumer: per vector of its layout, that vector of each load, the
    element-wise ops on it, then the vector store or the reduction's tree (layouts checked by
    `_lines_up`). Returns a reduction's value."""
    st = s.store
    lay = s.layout
    vw = stream_vector_width(kern, s)
    shape = tuple(st.arg_map["tile" if not s.reduces else "x"].type.shape)
    out = arr = None
    if not s.reduces:
        arr = kern.array(st.arg_map["A"])
        start, _ = tile_start(kern, st, shape)
        out = TileAccess(kern, arr, start, shape, None, lay)
    loads = []
    for op in s.loads:
        src, llay, _ = load_layout(kern, op)
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
        if op.name in DIVIDE and not (isinstance(vals[1], Value) and vals[1].id in inner):
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
    if op.name in RELABEL:
        got = _value(kern, s, op.arg_map["x"], r, vals, fixed, extra)
    elif op.name == "arange":
        # `arange_in`'s value of this register (creation.py)
        base, src = extra[v.id]
        got = kern.builder.add(base, ir.Constant(I32, src.reg_linear(r)))
        if rt.dtype != T_I32:
            got = kern.se.cast(got, T_I32, rt.dtype)
    elif op.name in DIVIDE and v.id in extra:
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
