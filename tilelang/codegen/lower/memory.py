"""Global memory: `load`/`store` (tile-indexed), `gather`/`scatter` (element-indexed),
`num_tiles`, `dim`, `stride`.

Tile access (builtins_memory.py): element x of the tile is A[index * shape + x] (through the
`order` permutation of the array's axes for loads); outside the array a load reads `padding`
and a store drops the element. Each thread touches the elements its layout gives it:

- one uniform test decides whether the whole tile is inside the array (every block but the
  edge ones): that path has no per-element masks, and when the array is contiguous and
  16-byte aligned (ArrayFacts) each run of consecutive registers along the last axis is one
  vector access (`ld.global.v4.f32` for 4 x f32);
- the edge path tests every element and branches around the access.

Stores are made by the owning thread of each element only (layouts.Layout.replicated_thread_mask)
so a replicated tile (a reduction result, a scalar) is written once.
"""

from __future__ import annotations

from math import prod

import llvmlite.ir as ir

from tilelang.codegen.layouts.distributed import Layout, blocked, vector_width
from tilelang.codegen.llvm.kernel import I1, I32, I64, ArrayVal, KernelEmitter, TileVal
from tilelang.codegen.llvm.sync import broadcast, convert
from tilelang.codegen.lower.predicated import predicated_load, predicated_store
from tilelang.codegen.lower.table import lowers
from tilelang.ir.ops import BuiltinOp
from tilelang.ir.values import Value
from tilelang.sema.constants import ConstValue


def _i64(v: int) -> ir.Constant:
    return ir.Constant(I64, v)


class TileAccess:
    """Addresses and bounds of one tile of an array in one layout."""

    def __init__(self, kern: KernelEmitter, arr: ArrayVal, index: tuple, shape: tuple[int, ...],
                 order: tuple[int, ...] | None, layout: Layout):
        b = kern.builder
        self.kern, self.arr, self.layout, self.shape = kern, arr, layout, shape
        axes = order if order is not None else tuple(range(arr.rank))
        self.axes = axes
        self.g0 = [b.mul(kern.index_i64(i), _i64(s)) for i, s in zip(index, shape)]
        self.ext = [arr.extents[a] for a in axes]
        self.stride = [arr.strides[a] for a in axes]
        # This thread's first coordinate per tile axis, and its element offset.
        self.base = [b.add(g, b.zext(kern.thread_coord(layout, k), I64))
                     for k, g in enumerate(self.g0)]
        off = _i64(0)
        for c, s in zip(self.base, self.stride):
            off = b.add(off, b.mul(c, s))
        self.off = off
        self.elem = kern.storage_type(arr.dtype)
        self.ptr = b.inttoptr(arr.address, ir.PointerType(self.elem, addrspace=1))
        self.itemsize = arr.dtype.itemsize

    def inside(self) -> ir.Value:
        """i1, uniform: the whole tile lies inside the array."""
        b = self.kern.builder
        ok = ir.Constant(I1, 1)
        for g, s, e in zip(self.g0, self.shape, self.ext):
            ok = b.and_(ok, b.icmp_signed(">=", g, _i64(0)))
            ok = b.and_(ok, b.icmp_signed("<=", b.add(g, _i64(s)), e))
        return ok

    def element(self, r: int) -> tuple[ir.Value, ir.Value]:
        """(pointer, in-bounds i1) of register r."""
        b = self.kern.builder
        rc = self.layout.reg_coord(r)
        off = self.off
        for c, s in zip(rc, self.stride):
            if c:
                off = b.add(off, b.mul(_i64(c), s))
        ok = ir.Constant(I1, 1)
        for base, c, e in zip(self.base, rc, self.ext):
            coord = b.add(base, _i64(c)) if c else base
            ok = b.and_(ok, b.icmp_unsigned("<", coord, e))
        return b.gep(self.ptr, [off]), ok

    def vector_width(self) -> int:
        """Registers per vector access on the fast path (1: scalar accesses)."""
        if not vectorizable(self.arr, self.axes):
            return 1
        vw = vector_width(self.layout, self.axes.index(self.arr.rank - 1))
        while vw > 1 and vw * self.itemsize > 16:
            vw //= 2
        return vw

    # -- loads ------------------------------------------------------------------------------
    def load(self, pad: ir.Value) -> tuple[ir.Value, ...]:
        kern, b = self.kern, self.kern.builder
        n = self.layout.num_regs
        vw = self.vector_width()
        fast_bb = kern.fn.append_basic_block("load.full")
        edge_bb = kern.fn.append_basic_block("load.edge")
        join = kern.fn.append_basic_block("load.join")
        b.cbranch(self.inside(), fast_bb, edge_bb)

        b.position_at_end(fast_bb)
        fast = []
        for g in range(0, n, vw):
            fast += self._load_vector(g, vw)
        fast_end = b.block
        b.branch(join)

        # Edge tile: straight-line predicated accesses (`@p ld.global.v4`), the padding
        # already in the destination registers where the predicate is false.
        b.position_at_end(edge_bb)
        spad = kern.to_storage(pad, self.arr.dtype)
        edge = []
        for g in range(0, n, vw):
            edge += [kern.from_storage(v, self.arr.dtype)
                     for v in self._edge_group(list(range(g, g + vw)), None, spad)]
        edge_end = b.block
        b.branch(join)

        b.position_at_end(join)
        return tuple(_phi2(b, f, fast_end, e, edge_end) for f, e in zip(fast, edge))

    def _uniform(self, vw: int) -> bool:
        """A vector of `vw` elements lies wholly inside or wholly outside the array: it starts
        on a multiple of vw along the contiguous last axis, whose extent (extent16) is a
        multiple of 16 bytes."""
        return vw == 1 or (self.arr.facts.extent16 and vw * self.itemsize <= 16)

    def _edge_group(self, grp: list[int], vals, spad) -> list[ir.Value] | None:
        """Load (vals None; padding spad) or store one vector group of registers under
        predicates: one vector access when the group is uniformly in or out, else the vector
        where all of it is inside and one element access per element where only part is."""
        b = self.kern.builder
        ptr, ok0 = self.element(grp[0])
        size = self.itemsize
        if self._uniform(len(grp)):
            if vals is None:
                return predicated_load(b, ptr, ok0, [spad] * len(grp), size)
            predicated_store(b, ptr, ok0, vals, size)
            return None
        whole = b.and_(ok0, self.element(grp[-1])[1])
        part = b.not_(whole)
        if vals is None:
            out = predicated_load(b, ptr, whole, [spad] * len(grp), size)
            for k, r in enumerate(grp):
                p, ok = self.element(r)
                out[k] = predicated_load(b, p, b.and_(ok, part), [out[k]], size)[0]
            return out
        predicated_store(b, ptr, whole, vals, size)
        for k, r in enumerate(grp):
            p, ok = self.element(r)
            predicated_store(b, p, b.and_(ok, part), [vals[k]], size)
        return None

    def _load_vector(self, g: int, vw: int) -> list[ir.Value]:
        b = self.kern.builder
        ptr, _ = self.element(g)
        if vw == 1:
            return [self.kern.from_storage(b.load(ptr, align=self.itemsize), self.arr.dtype)]
        vty = ir.VectorType(self.elem, vw)
        vec = b.load(b.bitcast(ptr, ir.PointerType(vty, addrspace=1)), align=vw * self.itemsize)
        return [self.kern.from_storage(b.extract_element(vec, ir.Constant(I32, k)),
                                       self.arr.dtype) for k in range(vw)]

    # -- stores -----------------------------------------------------------------------------
    def store(self, regs: tuple[ir.Value, ...]) -> None:
        kern, b = self.kern, self.kern.builder
        owned = self.layout.owned_regs()
        vw = self.vector_width() if len(owned) == self.layout.num_regs else 1
        groups = [list(range(g, g + vw)) for g in range(0, self.layout.num_regs, vw)] \
            if vw > 1 else [[r] for r in owned]
        fast_bb = kern.fn.append_basic_block("store.full")
        edge_bb = kern.fn.append_basic_block("store.edge")
        done = kern.fn.append_basic_block("store.done")
        b.cbranch(self.inside(), fast_bb, edge_bb)

        b.position_at_end(fast_bb)
        for grp in groups:
            self._store_vector(grp, regs)
        b.branch(done)

        b.position_at_end(edge_bb)
        dt = self.arr.dtype
        for grp in groups:
            self._edge_group(grp, [kern.to_storage(regs[r], dt) for r in grp], None)
        b.branch(done)
        b.position_at_end(done)

    def _store_vector(self, grp: list[int], regs) -> None:
        kern, b = self.kern, self.kern.builder
        dt = self.arr.dtype
        ptr, _ = self.element(grp[0])
        if len(grp) == 1:
            b.store(kern.to_storage(regs[grp[0]], dt), ptr, align=self.itemsize)
            return
        vty = ir.VectorType(self.elem, len(grp))
        vec = ir.Constant(vty, ir.Undefined)
        for k, r in enumerate(grp):
            vec = b.insert_element(vec, kern.to_storage(regs[r], dt), ir.Constant(I32, k))
        b.store(vec, b.bitcast(ptr, ir.PointerType(vty, addrspace=1)),
                align=len(grp) * self.itemsize)


def _phi2(b: ir.IRBuilder, x: ir.Value, bx: ir.Block, y: ir.Value, by: ir.Block) -> ir.Value:
    phi = b.phi(x.type)
    phi.add_incoming(x, bx)
    phi.add_incoming(y, by)
    return phi


def vectorizable(arr: ArrayVal, axes: tuple[int, ...]) -> bool:
    """The facts allow 16-byte vectors along the array's last axis: it is contiguous, and
    every other stride keeps a vector that starts on a multiple of its width 16-byte
    aligned (a tile's start along the last axis is a multiple of the tile width)."""
    return bool(axes) and arr.facts.contiguous and arr.facts.aligned16


def access_layout(kern: KernelEmitter, arr: ArrayVal, axes: tuple[int, ...],
                  shape: tuple[int, ...], dtype) -> Layout:
    """The layout a tile is loaded in: vectors and lanes along the tile axis that is
    contiguous in memory; one element per thread when no vector access is possible, so that a
    warp's scalar accesses are still consecutive."""
    if not shape:
        return kern.scalar_layout
    fast = axes.index(arr.rank - 1) if arr.rank - 1 in axes else len(shape) - 1
    if fast == len(shape) - 1 and vectorizable(arr, axes):
        return kern.layout_for_shape(shape, dtype)
    width = 16 if vectorizable(arr, axes) else dtype.itemsize
    return blocked(shape, dtype.itemsize, kern.threads, vector_bytes=width, fast_axis=fast)


def _padding(kern: KernelEmitter, op: BuiltinOp, dtype) -> ir.Value:
    p = op.arg_map.get("padding")
    if p is None:
        return kern.se.constant(0, dtype)
    return kern.scalar_value(p, dtype)


def gated(kern: KernelEmitter, cond: ir.Value | None, body) -> None:
    """Run `body()` only where `cond` (i1) holds; None: always."""
    if cond is None:
        body()
        return
    b = kern.builder
    then = kern.fn.append_basic_block("owned")
    done = kern.fn.append_basic_block("owned.end")
    b.cbranch(cond, then, done)
    b.position_at_end(then)
    body()
    b.branch(done)
    b.position_at_end(done)


@lowers("load")
def load(kern: KernelEmitter, op: BuiltinOp) -> TileVal:
    args = op.arg_map
    arr = kern.array(args["A"])
    rt = op.result.type
    order = kern.const_ints(args["order"]) if "order" in args else None
    axes = order if order is not None else tuple(range(arr.rank))
    lay = access_layout(kern, arr, axes, tuple(rt.shape), rt.dtype)
    acc = TileAccess(kern, arr, kern.tuple_items(args["index"]), tuple(rt.shape), order, lay)
    return TileVal(rt.dtype, lay, acc.load(_padding(kern, op, rt.dtype)))


@lowers("store")
def store(kern: KernelEmitter, op: BuiltinOp) -> None:
    args = op.arg_map
    arr = kern.array(args["A"])
    t = kern.tile(args["tile"])
    if kern.exact and _uncoalesced(t.layout, arr):
        # Shared memory is in use anyway: one exchange turns a transposed or sliced layout
        # into warp-consecutive (vector) stores.
        want = access_layout(kern, arr, tuple(range(arr.rank)), tuple(t.shape), t.dtype)
        t = convert(kern, t, want)
    acc = TileAccess(kern, arr, kern.tuple_items(args["index"]), tuple(t.shape), None,
                     t.layout)
    gated(kern, kern.owner(t.layout), lambda: acc.store(t.regs))


def _uncoalesced(layout: Layout, arr: ArrayVal) -> bool:
    """A warp's consecutive lanes do not write consecutive elements of the contiguous axis,
    and the tile is big enough (a warp's worth of 16-byte vectors) for that to matter."""
    if not layout.rank or not arr.facts.contiguous or not layout.lane:
        return False
    if prod(layout.shape) < 32 * max(16 // arr.dtype.itemsize, 1):
        return False
    first = layout.lane[0]
    return not first[-1] or any(first[:-1])


def _to_i32(kern: KernelEmitter, v: ir.Value) -> ir.Value:
    return kern.builder.trunc(v, I32)


@lowers("num_tiles")
def num_tiles(kern: KernelEmitter, op: BuiltinOp) -> TileVal:
    arr = kern.array(op.arg_map["A"])
    axis = kern.const_ints(op.arg_map["axis"])[0] % arr.rank
    s = kern.const_ints(op.arg_map["shape"])[axis]
    b = kern.builder
    n = b.udiv(b.add(arr.extents[axis], _i64(s - 1)), _i64(s))
    return TileVal(op.result.type.dtype, kern.scalar_layout, (_to_i32(kern, n),))


@lowers("dim", "stride")
def array_meta(kern: KernelEmitter, op: BuiltinOp) -> TileVal:
    arr = kern.array(op.arg_map["A"])
    axis = kern.const_ints(op.arg_map["axis"])[0] % arr.rank
    v = (arr.extents if op.name == "dim" else arr.strides)[axis]
    return TileVal(op.result.type.dtype, kern.scalar_layout, (_to_i32(kern, v),))


# ---------------------------------------------------------------------------------------------
# Element-indexed access

def _element_operands(kern: KernelEmitter, op: BuiltinOp, arr: ArrayVal, shape, extra=()):
    """(layout, per-axis i64 index registers, mask registers or None, extra registers)."""
    args = op.arg_map
    idx_args = list(kern.tuple_items(args["indices"]))
    vals = [a for a in idx_args + [args.get("mask")] + [args.get(e) for e in extra]
            if isinstance(a, Value)]
    tiles = [kern.tile(a) for a in vals]
    layout = next((t.layout for t in tiles if t.shape == tuple(shape)), None) or \
        kern.layout_for_shape(shape, arr.dtype)
    n = layout.num_regs
    b = kern.builder

    def regs_of(a, dtype=None):
        if isinstance(a, Value):
            t = kern.tile(a)
            rs = broadcast(kern, t, layout)
            if dtype is not None and t.dtype != dtype:
                rs = tuple(kern.se.cast(r, t.dtype, dtype) for r in rs)
            return rs, t.dtype
        return (kern.se.constant(a.value, dtype) if dtype is not None else a,) * n, dtype

    idx = []
    for a in idx_args:
        if isinstance(a, ConstValue):
            idx.append((_i64(int(a.value)),) * n)
            continue
        rs, dt = regs_of(a)
        wide = [r if r.type.width == 64 else (b.sext(r, I64) if dt.signed else b.zext(r, I64))
                for r in rs]
        idx.append(tuple(wide))
    mask = None
    if args.get("mask") is not None:
        m = args["mask"]
        mask = regs_of(m)[0] if isinstance(m, Value) else \
            (ir.Constant(I1, int(bool(m.value))),) * n
    extras = [regs_of(args[e], arr.dtype)[0] for e in extra]
    return layout, idx, mask, extras


def _element_ptr(kern: KernelEmitter, arr: ArrayVal, idx, r, mask):
    b = kern.builder
    off = _i64(0)
    ok = ir.Constant(I1, 1) if mask is None else mask[r]
    for k in range(arr.rank):
        i = idx[k][r]
        off = b.add(off, b.mul(i, arr.strides[k]))
        ok = b.and_(ok, b.icmp_unsigned("<", i, arr.extents[k]))
    ptr = b.inttoptr(arr.address, ir.PointerType(kern.storage_type(arr.dtype), addrspace=1))
    return b.gep(ptr, [off]), ok


def _guarded(kern: KernelEmitter, ok: ir.Value, body, default: ir.Value | None = None):
    b = kern.builder
    before = b.block
    then = kern.fn.append_basic_block("elem")
    after = kern.fn.append_basic_block("elem.end")
    b.cbranch(ok, then, after)
    b.position_at_end(then)
    v = body()
    then_end = b.block
    b.branch(after)
    b.position_at_end(after)
    if default is None:
        return None
    phi = b.phi(default.type)
    phi.add_incoming(v, then_end)
    phi.add_incoming(default, before)
    return phi


@lowers("gather")
def gather(kern: KernelEmitter, op: BuiltinOp) -> TileVal:
    arr = kern.array(op.arg_map["A"])
    rt = op.result.type
    layout, idx, mask, _ = _element_operands(kern, op, arr, tuple(rt.shape))
    pad = _padding(kern, op, rt.dtype)
    b = kern.builder
    regs = []
    for r in range(layout.num_regs):
        ptr, ok = _element_ptr(kern, arr, idx, r, mask)
        regs.append(_guarded(kern, ok, lambda: kern.from_storage(
            b.load(ptr, align=arr.dtype.itemsize), arr.dtype), pad))
    return TileVal(rt.dtype, layout, tuple(regs))


@lowers("scatter")
def scatter(kern: KernelEmitter, op: BuiltinOp) -> None:
    arr = kern.array(op.arg_map["A"])
    shapes = [kern.tile(a).shape for a in kern.tuple_items(op.arg_map["indices"])
              + (op.arg_map.get("mask"), op.arg_map["value"]) if isinstance(a, Value)]
    shape = _broadcast_shapes(shapes)
    layout, idx, mask, (vals,) = _element_operands(kern, op, arr, shape, ("value",))
    b = kern.builder

    def body():
        for r in layout.owned_regs():
            ptr, ok = _element_ptr(kern, arr, idx, r, mask)
            _guarded(kern, ok, lambda: b.store(kern.to_storage(vals[r], arr.dtype), ptr,
                                               align=arr.dtype.itemsize))
    gated(kern, kern.owner(layout), body)


def _broadcast_shapes(shapes) -> tuple[int, ...]:
    rank = max((len(s) for s in shapes), default=0)
    out = [1] * rank
    for s in shapes:
        for i, d in enumerate(s):
            k = rank - len(s) + i
            out[k] = max(out[k], d)
    return tuple(out)

