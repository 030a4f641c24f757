"""Fused reductions and stores: a `sum`/`prod`/`max`/`min` whose input is made by element-wise
ops and broadcasts used only by it computes that input one register at a time and feeds each
into its in-thread tree at once, so the input never exists whole (plan/fusion.py decides
which; docs/codegen.md, Plans). A plain tile store of such a tile computes it one vector of
its access layout at a time and stores that vector, as lower/stream.py does for loaded tiles.

The members' lowerings leave a placeholder (`deferred`); the consumer (`emit`) broadcasts the
group's leaves into the layout the input would have had — elementwise.py's choice: the first
operand of the result's shape, one that could be computed again anywhere last, else the
default layout — and then, per result register of the reduction, computes the registers of
the reduced axes it combines, in order, feeding `reduce.Tree`: the combines and their operands
are those of the tile kept whole, only the order they are emitted in differs (a register's
tree is finished before the next one's leaves are computed). Levels 2 and 3 (lanes, warps)
are reduce.py's.
"""

from __future__ import annotations

import llvmlite.ir as ir

from tilelang.codegen.emit.kernel import KernelEmitter, TileVal
from tilelang.codegen.emit.sync import broadcast
from tilelang.codegen.lower import reduce as R
from tilelang.codegen.lower.elementwise import _shared_reciprocal
from tilelang.codegen.lower.memory import TileAccess, gated, tile_start
from tilelang.codegen.plan.fusion import BROADCAST, FusedGroup
from tilelang.ir.ops import BuiltinOp
from tilelang.ir.values import Value
from tilelang.sema.constants import ConstStr
from tilelang.sema.types import DType

DIVIDE = ("/", "div")


class Fused:
    """The placeholder a fused member leaves in the environment (only its consumer reads the
    op behind it)."""

    __slots__ = ("op",)

    def __init__(self, op: BuiltinOp):
        self.op = op


def group(kern: KernelEmitter, op: BuiltinOp) -> FusedGroup | None:
    return kern.plan.fusion.by_consumer.get(id(op))


def deferred(kern: KernelEmitter, op: BuiltinOp) -> Fused | None:
    if op.result is None or op.result.id not in kern.plan.fusion.fused:
        return None
    return Fused(op)


def emit(kern: KernelEmitter, g: FusedGroup) -> TileVal | None:
    """The consumer: a reduction's value, its input computed register by register into the
    tree; a store, its tile computed and stored one vector at a time."""
    if g.stores:
        gated(kern, kern.owner(g.layout), lambda: _store(kern, g))
        return None
    st = g.consumer
    lay = g.layout or _layout(kern, g, g.root)[0]
    red = R.Reduction(kern, st, g.root.type.dtype, len(g.shape))
    out_layout, groups = R.in_thread_groups(lay, red.axes, red.keep)
    ev = _Evaluator(kern, g, lay)
    acc = []
    for regs in groups:
        tree = R.Tree(len(regs), red.combine)
        for j, r in enumerate(regs):
            tree.feed(j, red.state(ev.value(g.root, r)))
        acc.append(tree.result())
    lay_out, final = R.across(kern, lay, out_layout, acc, [red.acc_dt], red.axes, red.combine)
    return red.result(lay_out, final)


def _store(kern: KernelEmitter, g: FusedGroup) -> None:
    """memory.py's store of a tile, one vector at a time: the whole tile inside the array
    takes plain vector stores, else every vector is stored under predicates (the edge
    path); each path computes its own registers (neither dominates the other)."""
    st, lay, b = g.consumer, g.layout, kern.builder
    arr = kern.array(st.arg_map["A"])
    start, aligned = tile_start(kern, st, g.shape)
    out = TileAccess(kern, arr, start, g.shape, None, lay, aligned=aligned)
    ev = _Evaluator(kern, g, lay)
    fast_bb = kern.fn.append_basic_block("fused.full")
    edge_bb = kern.fn.append_basic_block("fused.edge")
    done = kern.fn.append_basic_block("fused.done")
    b.cbranch(out.outside(), edge_bb, fast_bb).set_weights([1, 1024])
    groups = [list(range(r, r + g.vector)) for r in range(0, lay.num_regs, g.vector)]
    for bb, edge in ((fast_bb, False), (edge_bb, True)):
        b.position_at_end(bb)
        ev.memo.clear()
        for grp in groups:
            regs = {r: ev.value(g.root, r) for r in grp}
            if edge:
                out._edge_group(grp, [kern.to_storage(regs[r], arr.dtype) for r in grp], None)
            else:
                out._store_vector(grp, regs)
        b.branch(done)
    b.position_at_end(done)


def _layout(kern: KernelEmitter, g: FusedGroup, v: Value):
    """(the layout `v` would have if computed as written, whether it could be computed again
    in any layout): elementwise.py's and shape.py's choice, followed through the members."""
    if v.id not in g.fused_ids():
        t = kern.tile(v)
        return t.layout, t.origin is not None
    op = g.op_of(v.id)
    if op.name == BROADCAST:
        x = kern.tile(op.arg_map["x"]) if op.arg_map["x"].id not in g.fused_ids() else None
        return kern.layout_for(op.result.type), x is not None and x.origin is not None
    full = [_layout(kern, g, a) for a in op.operands
            if tuple(getattr(a.type, "shape", ()) or ()) == g.shape]
    full.sort(key=lambda lr: lr[1])
    remat = all(_layout(kern, g, a)[1] for a in op.operands
                if getattr(a.type, "shape", None))
    return (full[0][0] if full else kern.layout_for(op.result.type)), remat


class _Evaluator:
    """Register r of a member: its operands' registers r (leaves broadcast into the layout
    once, `/` by a leaf as one reciprocal per register of the divisor, as elementwise.py)."""

    def __init__(self, kern: KernelEmitter, g: FusedGroup, lay):
        self.kern, self.g, self.lay = kern, g, lay
        self.inner = g.fused_ids()
        self.leaves: dict[int, tuple] = {}
        self.recip: dict[int, tuple] = {}
        self.memo: dict[tuple[int, int], ir.Value] = {}
        for op in g.ops:
            vals = [op.arg_map["x"]] if op.name == BROADCAST else \
                [a for _, a in op.args if not isinstance(a, (DType, ConstStr))]
            if op.name in DIVIDE and len(vals) == 2 and not (
                    isinstance(vals[1], Value) and vals[1].id in self.inner):
                d = kern.tile(vals[1]) if isinstance(vals[1], Value) else vals[1]
                params = {n: a for n, a in op.args if isinstance(a, (DType, ConstStr))}
                r = _shared_reciprocal(kern, d, lay, op.result.type.dtype, params)
                if r is not None:
                    self.recip[op.result.id] = r
                    vals = vals[:1]
            for a in vals:
                if isinstance(a, Value) and a.id not in self.inner and a.id not in self.leaves:
                    self.leaves[a.id] = broadcast(kern, kern.tile(a), lay)

    def value(self, v: Value, r: int) -> ir.Value:
        if v.id in self.leaves:
            return self.leaves[v.id][r]
        key = (v.id, r)
        got = self.memo.get(key)
        if got is None:
            got = self.memo[key] = self._compute(self.g.op_of(v.id), r)
        return got

    def _compute(self, op: BuiltinOp, r: int) -> ir.Value:
        kern, rt = self.kern, op.result.type
        if op.name == BROADCAST:
            return self.value(op.arg_map["x"], r)
        if op.result.id in self.recip:
            # elementwise.py's shared reciprocal: the dividend (in the result's dtype) times it
            x = next(a for _, a in op.args if not isinstance(a, (DType, ConstStr)))
            xv = self._operand(x, r)
            xd = x.type.dtype if isinstance(x, Value) else x.dtype
            if xd != rt.dtype:
                xv = kern.se.emit("astype", [xv], [xd], rt.dtype, {"dtype": rt.dtype})
            return kern.builder.fmul(xv, self.recip[op.result.id][r])
        args, dtypes, params = [], [], {}
        for name, a in op.args:
            if isinstance(a, (DType, ConstStr)):
                params[name] = a
                continue
            args.append(self._operand(a, r))
            dtypes.append(a.type.dtype if isinstance(a, Value) else a.dtype)
        return kern.se.emit(op.name, args, dtypes, rt.dtype, params)

    def _operand(self, a, r: int):
        if isinstance(a, Value):
            return self.value(a, r)
        if a.dtype is None:
            return a.value
        return self.kern.se.constant(a.value, a.dtype)
