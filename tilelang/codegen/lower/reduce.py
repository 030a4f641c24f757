"""Reductions `sum prod max min argmax argmin` along one axis or over all axes.

Three levels, each only where the layout spreads the reduced axes over it:
1. in-thread: registers that differ only along the reduced axes are combined pairwise (a tree,
   like NumPy's pairwise sum);
2. in-warp: for each lane bit along the reduced axes, a butterfly `shfl.sync.bfly` exchange;
   afterwards every lane of the group holds the same total (the combines are commutative, so
   the two partners compute bit-identical values);
3. across warps: each warp's partial goes to shared memory, a barrier, and every thread reads
   all partials of its outputs and combines them in warp order, so all threads agree. The
   exchange uses one of two alternating slots (KernelEmitter.exchange_slot): the barrier that
   protects the slot's previous readers is left out where an earlier barrier already did it.
The result has the sliced layout (layouts.drop_axes): replicated over the threads that shared
the reduced axes. f16/bf16 accumulate in f32 and round once; sum/prod of small integers and
bools widen (the registry's result dtype). argmax/argmin carry (value, index) pairs and keep
the first index on ties, with NaN counting as the extreme (NumPy).
"""

from __future__ import annotations

from math import prod
from typing import Callable, Sequence

import llvmlite.ir as ir

from tilelang.codegen.layouts.distributed import Layout, drop_axes
from tilelang.codegen.emit.kernel import I32, KernelEmitter, TileVal
from tilelang.codegen.emit.sync import shuffle_xor, storage_bytes
from tilelang.codegen.lower.table import lowers
from tilelang.codegen.plan.streams import reduced_axes
from tilelang.ir.ops import BuiltinOp
from tilelang.sema.types import F32, I32 as T_I32, DType

Pair = list   # the per-element state: [value] or [value, index]


def _tree(items: list, combine: Callable) -> object:
    while len(items) > 1:
        items = [combine(items[i], items[i + 1]) if i + 1 < len(items) else items[i]
                 for i in range(0, len(items), 2)]
    return items[0]


def in_thread_groups(L: Layout, axes: tuple[int, ...], keepdims: bool):
    """(result layout, per result register the registers of L it combines, in `_tree`'s
    order): the in-thread level."""
    def along(basis) -> bool:
        return any(basis[d] for d in axes)

    out_layout = drop_axes(L, axes, keepdims)
    keep_bits = [i for i, bs in enumerate(L.reg) if not along(bs)]
    red_bits = [i for i, bs in enumerate(L.reg) if along(bs)]
    groups = []
    for ro in range(out_layout.num_regs):
        base = sum(1 << keep_bits[k] for k in range(len(keep_bits)) if ro >> k & 1)
        groups.append([base + sum(1 << red_bits[k] for k in range(len(red_bits)) if j >> k & 1)
                       for j in range(1 << len(red_bits))])
    return out_layout, groups


class Tree:
    """`_tree` over leaves that arrive in any order (lower/stream.py feeds them one vector at
    a time): each combine is emitted as soon as both of its operands exist, so the values and
    the operand order are `_tree`'s and only the emission order differs."""

    def __init__(self, n: int, combine: Callable):
        nodes: list = [("leaf", i) for i in range(n)]
        while len(nodes) > 1:
            nodes = [("node", nodes[i], nodes[i + 1]) if i + 1 < len(nodes) else nodes[i]
                     for i in range(0, len(nodes), 2)]
        self.root = nodes[0]
        self.combine = combine
        self.leaves: dict[int, object] = {}
        self.done: dict[int, object] = {}

    def feed(self, i: int, state) -> None:
        self.leaves[i] = state
        self._try(self.root)

    def _try(self, node):
        got = self.done.get(id(node))
        if got is not None:
            return got
        if node[0] == "leaf":
            got = self.leaves.get(node[1])
        else:
            a = self._try(node[1])
            c = self._try(node[2]) if a is not None else None
            got = self.combine(a, c) if c is not None else None
        if got is not None:
            self.done[id(node)] = got
        return got

    def result(self):
        got = self._try(self.root)
        assert got is not None, "Tree.result before every leaf"
        return got


def reduce_tile(kern: KernelEmitter, x: TileVal, states: list[Pair], dtypes: Sequence[DType],
                axes: tuple[int, ...], keepdims: bool, combine: Callable) -> tuple[Layout, list]:
    """Reduce per-register states (lists of LLVM values of `dtypes`) of tile `x` over `axes`.
    Returns the result layout and one state per result register."""
    out_layout, groups = in_thread_groups(x.layout, axes, keepdims)
    acc = [_tree([states[i] for i in g], combine) for g in groups]       # 1. in-thread
    return across(kern, x.layout, out_layout, acc, dtypes, axes, combine)


def across(kern: KernelEmitter, L: Layout, out_layout: Layout, acc: list, dtypes: Sequence[DType],
           axes: tuple[int, ...], combine: Callable) -> tuple[Layout, list]:
    """Levels 2 and 3 over the in-thread results `acc` (one state per register of
    out_layout) of a tile in layout L."""
    def along(basis) -> bool:
        return any(basis[d] for d in axes)

    # 2. in-warp butterflies
    for bit, basis in enumerate(L.lane):
        if along(basis):
            acc = [combine(s, [shuffle_xor(kern, v, 1 << bit) for v in s]) for s in acc]

    # 3. across warps
    wbits = [k for k, basis in enumerate(L.warp) if along(basis)]
    if not wbits:
        return out_layout, acc
    b = kern.builder
    nlane = len(L.lane)
    n_out = prod(out_layout.shape)
    parts = 1 << len(wbits)
    out_w = list(out_layout.thread_weights())
    slot_w = list(out_w)
    for k, wb in enumerate(wbits):
        slot_w[nlane + wb] = (1 << k) * n_out
    result = [[None] * len(dtypes) for _ in acc]
    # One exchange per state component, so each uses the buffer in its own type.
    for c, dt in enumerate(dtypes):
        stype = kern.storage_type(dt)
        # the leading barrier protects the slot's previous readers; consecutive reductions
        # alternate between two slots, so one barrier between them is enough
        ptr, slot = kern.exchange_slot(parts * n_out * storage_bytes(kern, dt), stype)
        kern.stats.exchanges += 1
        wbase = kern.thread_linear(tuple(slot_w))
        for ro, s in enumerate(acc):
            i = b.add(wbase, ir.Constant(I32, out_layout.reg_linear(ro)))
            b.store(kern.to_storage(s[c], dt), b.gep(ptr, [i]))
        kern.barrier()
        rbase = kern.thread_linear(tuple(out_w))
        for ro in range(len(acc)):
            vals = []
            for j in range(parts):
                i = b.add(rbase, ir.Constant(I32, j * n_out + out_layout.reg_linear(ro)))
                vals.append(kern.from_storage(b.load(b.gep(ptr, [i])), dt))
            result[ro][c] = vals
        kern.slot_read(slot)
    final = []
    for ro in range(len(acc)):
        partials = [[result[ro][c][j] for c in range(len(dtypes))] for j in range(parts)]
        final.append(_tree(partials, combine))
    return out_layout, final


def _axes(kern: KernelEmitter, op: BuiltinOp, rank: int) -> tuple[tuple[int, ...], bool]:
    return reduced_axes(op, rank)


def _acc_dtype(kind: str, x: DType, result: DType) -> DType:
    if x.is_float and x.bits < 32:
        return F32
    return result if kind in ("sum", "prod") else x


class Reduction:
    """What a `sum`/`prod`/`max`/`min` op combines: its axes, the accumulator dtype and the
    combine; `state` turns an element of x into a state, `result` the final states into the
    op's value (also lower/stream.py's, which feeds the states one vector at a time)."""

    def __init__(self, kern: KernelEmitter, op: BuiltinOp, x_dtype: DType, rank: int):
        self.kern, self.op = kern, op
        self.rt = op.result.type
        self.x_dtype = x_dtype
        self.axes, self.keep = _axes(kern, op, rank)
        self.acc_dt = _acc_dtype(op.name, x_dtype, self.rt.dtype)

    def state(self, v: ir.Value) -> Pair:
        se = self.kern.se
        return [v if self.x_dtype == self.acc_dt else se.cast(v, self.x_dtype, self.acc_dt)]

    def combine(self, a: Pair, b: Pair) -> Pair:
        return [self.kern.se.combine(self.op.name, a[0], b[0], self.acc_dt)]

    def result(self, lay: Layout, out: list[Pair]) -> TileVal:
        se, rt, acc_dt = self.kern.se, self.rt, self.acc_dt
        regs = tuple(s[0] if acc_dt == rt.dtype else se.cast(s[0], acc_dt, rt.dtype)
                     for s in out)
        return TileVal(rt.dtype, lay, regs)


@lowers("sum", "prod", "max", "min")
def reduce(kern: KernelEmitter, op: BuiltinOp) -> TileVal:
    x = kern.tile(op.arg_map["x"])
    red = Reduction(kern, op, x.dtype, x.layout.rank)
    states = [red.state(r) for r in x.regs]
    if not red.axes:   # a scalar: nothing to reduce
        lay, out = x.layout, states
    else:
        lay, out = reduce_tile(kern, x, states, [red.acc_dt], red.axes, red.keep, red.combine)
    return red.result(lay, out)


@lowers("argmax", "argmin")
def argreduce(kern: KernelEmitter, op: BuiltinOp) -> TileVal:
    x = kern.tile(op.arg_map["x"])
    rt = op.result.type
    L = x.layout
    axes, keep = _axes(kern, op, L.rank)
    cmp_dt = F32 if x.dtype.is_float and x.dtype.bits < 32 else x.dtype
    se, b = kern.se, kern.builder
    # Each element's index: along the axis, or row-major over the whole tile.
    if op.arg_map.get("axis") is not None:
        ax = axes[0]
        w = tuple(basis[ax] for basis in L.thread_bases)
        reg_idx = [L.reg_coord(r)[ax] for r in range(L.num_regs)]
    else:
        w = L.thread_weights()
        reg_idx = [L.reg_linear(r) for r in range(L.num_regs)]
    tbase = kern.thread_linear(w)
    states = [[r if x.dtype == cmp_dt else se.cast(r, x.dtype, cmp_dt),
               b.add(tbase, ir.Constant(I32, reg_idx[i]))] for i, r in enumerate(x.regs)]
    greater = op.name == "argmax"

    def better(p, q):
        """p strictly better than q (NaN beats numbers)."""
        if cmp_dt.is_float:
            strict = b.fcmp_ordered(">" if greater else "<", p, q)
            return b.or_(strict, b.and_(se.isnan(p), b.not_(se.isnan(q))))
        return se.compare(">" if greater else "<", p, q, cmp_dt)

    def same(p, q):
        if cmp_dt.is_float:
            return b.or_(b.fcmp_ordered("==", p, q), b.and_(se.isnan(p), se.isnan(q)))
        return se.compare("==", p, q, cmp_dt)

    def combine(s, t):
        take_t = b.or_(better(t[0], s[0]),
                       b.and_(same(t[0], s[0]), b.icmp_signed("<", t[1], s[1])))
        return [b.select(take_t, t[0], s[0]), b.select(take_t, t[1], s[1])]

    if not L.rank:
        return TileVal(rt.dtype, L, (ir.Constant(I32, 0),))
    lay, out = reduce_tile(kern, x, states, [cmp_dt, T_I32], axes, keep, combine)
    return TileVal(rt.dtype, lay, tuple(s[1] for s in out))
