"""Global memory: `load`/`store` (tile-indexed or at an element offset, optionally masked),
`gather`/`scatter` (element-indexed), `num_tiles`, `dim`, `stride`.

Tile access (builtins_memory.py): element x of the tile is A[start + x], start = index * shape
or `offset` (through the `order` permutation of the array's axes for loads); outside the array
or where `mask` is false a load reads `padding` and a store leaves the element. Each thread
touches the elements its layout gives it:

- without a mask, one uniform test decides whether the whole tile is inside the array (every
  block but the edge ones): that path has no per-element tests, and when the array is
  contiguous and 16-byte aligned (ArrayFacts) each run of consecutive registers along the last
  axis is one vector access (`ld.global.v4.f32` for 4 x f32);
- edge tiles and masked accesses are straight-line predicated instructions (predicated.py),
  never a branch per element: one predicated vector where the vector is wholly in or out
  (the extent16 fact for the array's end, a mask broadcast along the contiguous axis), else
  the vector where all of it is in plus one predicated element access per element;
- a run-time `offset` along the contiguous axis may break the vectors' alignment: one uniform
  test of it picks the vector code or the element code.

Stores are made by the owning thread of each element only (layouts.Layout.replicated_thread_mask)
so a replicated tile (a reduction result, a scalar) is written once. gather/scatter are one
predicated element access per register.
"""

from __future__ import annotations

from math import prod

import llvmlite.ir as ir

from tilelang.codegen.layouts.distributed import Layout
from tilelang.codegen.emit.kernel import I1, I32, I64, ArrayVal, KernelEmitter, TileVal
from tilelang.codegen.layouts import convert as C
from tilelang.codegen.emit.sync import (broadcast, convert, gather_elements, read_shared,
                                        shared_ptr)
from tilelang.codegen.plan.access import (access_layout, access_vector_width,  # noqa: F401
                                          tile_indexed, vectorizable)
from tilelang.codegen.lower.predicated import predicated_load, predicated_store
from tilelang.codegen.scalar.cast import F8_SPEC
from tilelang.codegen.lower.rearrange import tile_gather
from tilelang.codegen.lower.table import lowers
from tilelang.ir.ops import BuiltinOp
from tilelang.ir.values import Value
from tilelang.sema.constants import ConstValue


def _i64(v: int) -> ir.Constant:
    return ir.Constant(I64, v)


class TileAccess:
    """Addresses and bounds of one tile of an array in one layout. `start` is the tile's
    first element per tile axis (i64); `mask` (optional) is one i1 per register of the
    layout, `mask_rows` when it is broadcast along the array's contiguous axis (one value per
    vector); `aligned` says whether the start along the array's contiguous last axis is a
    multiple of every vector width (True), is not known to be (None: tested at run time), or
    is the constant given (an int: vectors as wide as it allows)."""

    def __init__(self, kern: KernelEmitter, arr: ArrayVal, start: list[ir.Value],
                 shape: tuple[int, ...], order: tuple[int, ...] | None, layout: Layout, *,
                 mask: tuple[ir.Value, ...] | None = None, aligned: bool | int | None = True,
                 mask_rows: bool = False):
        b = kern.builder
        self.kern, self.arr, self.layout, self.shape = kern, arr, layout, shape
        axes = order if order is not None else tuple(range(arr.rank))
        self.axes = axes
        self.g0 = start
        self.mask, self.aligned, self.mask_rows = mask, aligned, mask_rows
        self.ext = [arr.extents[a] for a in axes]
        self.stride = [arr.strides[a] for a in axes]
        # This thread's first coordinate per tile axis (i64 but below: the bounds tests stay
        # exact for any start), and its element offset: in 32 bits when every element's
        # offset fits (the `small` fact), where an element inside the array gets its exact
        # offset and one outside, whose offset may wrap, is never accessed.
        self.ity = I32 if arr.facts.small else I64
        # Bounds in 32 bits along the extent-1 axes (a row) whose start is exactly an i32 (a
        # row index, a constant): `small` also bounds every extent below 2^31, so the narrow
        # extent is exact, and the narrow coordinate x + t (x an i32, t = 0 here) cannot
        # wrap. A start index * shape may wrap any number of times in 32 bits: it stays
        # 64-bit. So do the longer axes: a narrow coordinate along them is the very value
        # the full tile's offsets use, and LLVM would compute it once for both, before the
        # branch, holding one register per vector through the kernel (layernorm over 4,096:
        # +7 registers); and the extent would be loaded in both widths.
        self.g32 = [_exact_i32(g) if arr.facts.small and n == 1 else None
                    for g, n in zip(start, shape)]
        # A longer axis with a constant start x (the columns of a row) is narrow too: its
        # edge test is t < extent - (x + c), whose right side the full tile does not use, so
        # nothing is shared with the offsets; 0 <= x + c < 2^31 keeps it exact.
        self.cx = [int(g.constant) if arr.facts.small and n > 1 and isinstance(
            g, ir.Constant) and 0 <= int(g.constant) and int(g.constant) + n <= 1 << 31
            else None for g, n in zip(start, shape)]
        # A start i * 2^k (an i32 tile index: vadd's `bid(0)`) along a longer axis: its
        # tile end (i + 1) * 2^k <= extent is i < extent >> k, exact for every i and extent
        # in 32 bits under `small` (no 64-bit start on the full tile's path; the edge path
        # makes its own, below).
        self.ix = [_scaled_i32(g, n) if arr.facts.small and n > 1 else None
                   for g, n in zip(start, shape)]
        tc = [kern.thread_coord(layout, k) for k in range(len(self.g0))]
        self.tc = tc
        self._bases: dict = {}
        off = ir.Constant(self.ity, 0)
        self.x32: list = []
        for g, x, t, s in zip(self.g0, self.ix, tc, self.stride):
            # the narrow offset from narrow terms (not a truncated wide coordinate, which
            # LLVM would sign-extend again at every access); i * 2^k may wrap there, but
            # only on tiles that take the edge path, whose accesses are predicated exactly
            n32 = b.mul(x[0], ir.Constant(I32, 1 << x[1])) if x is not None else None
            c = b.add(n32 or self._narrow(g), t) if self.ity is I32 else \
                b.add(g, b.zext(t, I64))
            self.x32.append(c if x is not None else None)
            off = b.add(off, b.mul(c, self._narrow(s)))
        self.off = off
        self.elem = kern.storage_type(arr.dtype)
        self.ptr = b.inttoptr(arr.address, ir.PointerType(self.elem, addrspace=1))
        # The thread's first address, made here, before the full/edge branch, so that both
        # paths' accesses share it: a GEP of the i32 offset in each block would widen it in
        # each. Its byte offset is what LLVM then shares between accesses of equal offsets
        # (vadd's three arrays: one `mul.wide.s32`, where the widened element offset would
        # cost a `cvt` and a `shl` per array).
        if self.ity is I64:
            self.p0 = b.gep(self.ptr, [off])
        else:
            i8p = ir.PointerType(ir.IntType(8), addrspace=1)
            nbytes = b.mul(b.sext(off, I64), _i64(arr.dtype.itemsize), flags=["nsw"])
            self.p0 = b.bitcast(b.gep(b.bitcast(self.ptr, i8p), [nbytes]), self.ptr.type)
        self.itemsize = arr.dtype.itemsize

    @property
    def base(self) -> list[ir.Value]:
        """This thread's first coordinate per tile axis (i32 where the axis's bounds are
        narrow, else i64), made in the block that first asks (the predicated edge code): the
        full-tile path needs the offset alone."""
        b = self.kern.builder
        got = self._bases.get(id(b.block))
        if got is None:
            got = self._bases[id(b.block)] = [
                None if x is not None else b.add(g, b.zext(t, I64)) if n is None else
                b.add(n, t) for g, n, x, t in zip(self.g0, self.g32, self.ix, self.tc)]
        return got

    def _extent(self, k: int, narrow: bool) -> ir.Value:
        """The extent of tile axis k, narrowed to 32 bits or not."""
        return self._narrow(self.ext[k]) if narrow else self.ext[k]

    def _narrow(self, v: ir.Value) -> ir.Value:
        """An i64 offset term in the offsets' width. A kernel parameter (a stride) is narrowed
        once, in the entry block, where the back end loads its low half (`ld.param.b32`)
        instead of converting a 64-bit load in each block that uses it."""
        if self.ity is I64:
            return v
        b = self.kern.builder
        if not isinstance(v, ir.Argument):
            return b.trunc(v, I32)
        cache = self.kern.narrowed
        got = cache.get(id(v))
        if got is None:
            with b.goto_block(self.kern.entry):
                got = cache[id(v)] = b.trunc(v, I32)
        return got

    def outside(self) -> ir.Value:
        """i1, uniform: part of the tile lies outside the array (the edge path's test). Made
        as the `or` of the failed bounds, not as a negated inside-test: the branch to the
        edge path then needs no `not.pred`, which LLVM otherwise computes once and keeps for
        every later access with the same bounds (a row kernel's load and store: one
        instruction per thread)."""
        b = self.kern.builder
        out = ir.Constant(I1, 0)
        for k, (g, s) in enumerate(zip(self.g0, self.shape)):
            x = self.g32[k]
            e = self._extent(k, x is not None or self.cx[k] is not None)
            if self.cx[k] is not None:
                out = b.or_(out, b.icmp_signed("<", e, ir.Constant(I32, self.cx[k] + s)))
            elif self.ix[k] is not None:
                i, sh = self.ix[k]
                e = self._extent(k, True)
                out = b.or_(out, b.icmp_signed("<", i, ir.Constant(I32, 0)))
                out = b.or_(out, b.icmp_signed(">=", i, b.ashr(e, ir.Constant(I32, sh))))
            elif x is None:
                out = b.or_(out, b.icmp_signed("<", g, _i64(0)))
                out = b.or_(out, b.icmp_signed(">", b.add(g, _i64(s)), e))
            else:
                out = b.or_(out, b.icmp_signed("<", x, ir.Constant(I32, 0)))
                out = b.or_(out, b.icmp_signed(">=", x, e))
        return out

    def element(self, r: int) -> tuple[ir.Value, ir.Value]:
        """(pointer, in-bounds-and-unmasked i1) of register r."""
        ptr, imm, ok = self.element_parts(r)
        if imm:
            ptr = self.kern.builder.gep(ptr, [_i64(imm // self.itemsize)])
        return ptr, ok

    def element_parts(self, r: int) -> tuple[ir.Value, int, ir.Value]:
        """(pointer, constant byte offset, in-bounds-and-unmasked i1) of register r: the
        offsets along axes of constant stride (the contiguous one) are the constant part, which
        a predicated access folds into its address (`[%rd4+2048]`)."""
        b = self.kern.builder
        rc = self.layout.reg_coord(r)
        off, imm = self.off, 0
        for c, s in zip(rc, self.stride):
            if c and isinstance(s, ir.Constant):
                imm += c * int(s.constant) * self.itemsize
            elif c:
                off = b.add(off, b.mul(ir.Constant(self.ity, c), self._narrow(s)))
        ok = ir.Constant(I1, 1) if self.mask is None else self.mask[r]
        for k, (base, c) in enumerate(zip(self.base, rc)):
            if self.ix[k] is not None:
                # Start i * 2^k, extent e: only 0 <= i <= e >> k has elements inside, and
                # there the narrow coordinate i * 2^k + t + c (the offsets' own) does not
                # wrap: it is at most e rounded down to 2^k, plus 2^k - 1, below 2^31.
                # (Tested against e, not as t + c < e mod 2^k: that is one more uniform
                # value, which LLVM hoists out of a virtual-thread loop onto the full
                # tile's path.)
                i, sh = self.ix[k]
                e = self._extent(k, True)
                ok = b.and_(ok, b.and_(b.icmp_signed("<=", i, b.ashr(e, ir.Constant(I32, sh))),
                                       b.icmp_signed(">=", i, ir.Constant(I32, 0))))
                x = b.add(self.x32[k], ir.Constant(I32, c)) if c else self.x32[k]
                ok = b.and_(ok, b.icmp_unsigned("<", x, e))
                continue
            if self.cx[k] is not None:
                e = self._extent(k, True)
                k0 = self.cx[k] + c
                ok = b.and_(ok, b.icmp_signed("<", self.tc[k], b.sub(
                    e, ir.Constant(I32, k0), flags=["nsw"]) if k0 else e))
                continue
            coord = b.add(base, ir.Constant(base.type, c)) if c else base
            e = self._extent(k, self.g32[k] is not None)
            ok = b.and_(ok, b.icmp_unsigned("<", coord, e))
        return (self.p0 if off is self.off else b.gep(self.ptr, [off])), imm, ok

    def vector_width(self) -> int:
        """Registers per vector access (1: scalar accesses)."""
        return access_vector_width(self.arr, self.axes, self.layout, self.aligned)

    def _start_aligned(self, vw: int) -> ir.Value:
        """i1, uniform: the start along the contiguous axis is a multiple of vw."""
        b = self.kern.builder
        g = self.g0[self.axes.index(self.arr.rank - 1)]
        return b.icmp_unsigned("==", b.and_(g, _i64(vw - 1)), _i64(0))

    def _vector_or_scalar(self, emit, merge: bool):
        """emit(vw) under the widest vector width the start allows: when the alignment is
        only known at run time, one uniform branch picks the vector or the scalar code."""
        vw = self.vector_width()
        if vw == 1 or self.aligned is not None:
            return emit(vw)
        kern, b = self.kern, self.kern.builder
        vec_bb = kern.fn.append_basic_block("access.vec")
        one_bb = kern.fn.append_basic_block("access.scalar")
        join = kern.fn.append_basic_block("access.join")
        b.cbranch(self._start_aligned(vw), vec_bb, one_bb)
        b.position_at_end(vec_bb)
        x = emit(vw)
        x_end = b.block
        b.branch(join)
        b.position_at_end(one_bb)
        y = emit(1)
        y_end = b.block
        b.branch(join)
        b.position_at_end(join)
        if not merge:
            return None
        return tuple(_phi2(b, u, x_end, v, y_end) for u, v in zip(x, y))

    # -- loads ------------------------------------------------------------------------------
    def load(self, pad: ir.Value) -> tuple[ir.Value, ...]:
        return self._vector_or_scalar(lambda vw: self._load(pad, vw), merge=True)

    def _load(self, pad: ir.Value, vw: int) -> tuple[ir.Value, ...]:
        kern, b = self.kern, self.kern.builder
        n = self.layout.num_regs
        spad = kern.to_storage(pad, self.arr.dtype)

        def edge():
            # Straight-line predicated accesses (`@p ld.global.v4`), the padding already in
            # the destination registers where the predicate is false.
            out = []
            for g in range(0, n, vw):
                out += [kern.from_storage(v, self.arr.dtype)
                        for v in self._edge_group(list(range(g, g + vw)), None, spad)]
            return out

        if self.mask is not None:
            return tuple(edge())      # every tile tests its elements
        fast_bb = kern.fn.append_basic_block("load.full")
        edge_bb = kern.fn.append_basic_block("load.edge")
        join = kern.fn.append_basic_block("load.join")
        b.cbranch(self.outside(), edge_bb, fast_bb).set_weights([1, 1024])

        # f8 codes meet as whole vectors: a value per byte across the join would be moved out
        # of its word on each side (a PRMT per byte), where their conversion reads two at once
        # from the word (elementwise._f8_pairs)
        packed = vw > 1 and self.arr.dtype.name in F8_SPEC
        b.position_at_end(fast_bb)
        fast = []
        for g in range(0, n, vw):
            fast += self._load_vector(g, vw, packed)
        fast_end = b.block
        b.branch(join)

        b.position_at_end(edge_bb)
        part = edge()
        if packed:
            part = [_vector(b, part[g:g + vw]) for g in range(0, n, vw)]
        edge_end = b.block
        b.branch(join)

        b.position_at_end(join)
        merged = [_phi2(b, f, fast_end, e, edge_end) for f, e in zip(fast, part)]
        if packed:
            merged = [b.extract_element(v, ir.Constant(I32, k)) for v in merged
                      for k in range(vw)]
        return tuple(merged)

    def _uniform(self, grp: list[int]) -> bool:
        """The group's elements are all in or all out: a vector starts on a multiple of its
        width along the contiguous last axis, whose extent (extent16) is a multiple of 16
        bytes; and the mask, if any, is one value over the group (broadcast along that
        axis)."""
        if len(grp) == 1:
            return True
        if not (self.arr.facts.extent16 and len(grp) * self.itemsize <= 16):
            return False
        return self.mask is None or self.mask_rows or \
            all(self.mask[r] is self.mask[grp[0]] for r in grp)

    def _edge_group(self, grp: list[int], vals, spad) -> list[ir.Value] | None:
        """Load (vals None; padding spad) or store one vector group of registers under
        predicates: one vector access when the group is uniformly in or out, else the vector
        where all of it is in and one element access per element where only part is."""
        b = self.kern.builder
        size = self.itemsize
        elems = [self.element_parts(r) for r in grp]
        ptr, imm, ok0 = elems[0]
        if self._uniform(grp):
            if vals is None:
                return predicated_load(b, ptr, ok0, [spad] * len(grp), size, imm)
            predicated_store(b, ptr, ok0, vals, size, imm)
            return None
        whole = ok0
        for _, _, ok in (elems[1:] if self.mask is not None else elems[-1:]):
            whole = b.and_(whole, ok)        # bounds alone: the two ends decide
        part = b.not_(whole)
        if vals is None:
            out = predicated_load(b, ptr, whole, [spad] * len(grp), size, imm)
            for k, (p, i, ok) in enumerate(elems):
                out[k] = predicated_load(b, p, b.and_(ok, part), [out[k]], size, i)[0]
            return out
        predicated_store(b, ptr, whole, vals, size, imm)
        for k, (p, i, ok) in enumerate(elems):
            predicated_store(b, p, b.and_(ok, part), [vals[k]], size, i)
        return None

    def _load_vector(self, g: int, vw: int, whole: bool = False) -> list[ir.Value]:
        """The registers of vector group `g` (`whole`: the vector itself, in a list)."""
        b = self.kern.builder
        ptr, _ = self.element(g)
        if vw == 1:
            return [self.kern.from_storage(b.load(ptr, align=self.itemsize), self.arr.dtype)]
        vty = ir.VectorType(self.elem, vw)
        vec = b.load(b.bitcast(ptr, ir.PointerType(vty, addrspace=1)), align=vw * self.itemsize)
        if whole:
            return [vec]
        return [self.kern.from_storage(b.extract_element(vec, ir.Constant(I32, k)),
                                       self.arr.dtype) for k in range(vw)]

    # -- stores -----------------------------------------------------------------------------
    def store(self, regs: tuple[ir.Value, ...]) -> None:
        self._vector_or_scalar(lambda vw: self._store(regs, vw), merge=False)

    def _store(self, regs: tuple[ir.Value, ...], vw: int) -> tuple:
        kern, b = self.kern, self.kern.builder
        owned = self.layout.owned_regs()
        if len(owned) != self.layout.num_regs:
            vw = 1
        groups = [list(range(g, g + vw)) for g in range(0, self.layout.num_regs, vw)] \
            if vw > 1 else [[r] for r in owned]
        dt = self.arr.dtype

        def edge():
            for grp in groups:
                self._edge_group(grp, [kern.to_storage(regs[r], dt) for r in grp], None)

        if self.mask is not None:
            edge()
            return ()
        fast_bb = kern.fn.append_basic_block("store.full")
        edge_bb = kern.fn.append_basic_block("store.edge")
        done = kern.fn.append_basic_block("store.done")
        b.cbranch(self.outside(), edge_bb, fast_bb).set_weights([1, 1024])

        b.position_at_end(fast_bb)
        for grp in groups:
            self._store_vector(grp, regs)
        b.branch(done)

        b.position_at_end(edge_bb)
        edge()
        b.branch(done)
        b.position_at_end(done)
        return ()

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


def _vector(b: ir.IRBuilder, regs) -> ir.Value:
    vec = ir.Constant(ir.VectorType(regs[0].type, len(regs)), ir.Undefined)
    for k, v in enumerate(regs):
        vec = b.insert_element(vec, v, ir.Constant(I32, k))
    return vec


def _phi2(b: ir.IRBuilder, x: ir.Value, bx: ir.Block, y: ir.Value, by: ir.Block) -> ir.Value:
    phi = b.phi(x.type)
    phi.add_incoming(x, bx)
    phi.add_incoming(y, by)
    return phi


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


def _exact_i32(g: ir.Value) -> ir.Value | None:
    """An i32 whose value is exactly the i64 `g` (a sign-extended i32, a constant in range),
    else None."""
    if isinstance(g, ir.Constant):
        v = int(g.constant)
        return ir.Constant(I32, v) if -(1 << 31) <= v < 1 << 31 else None
    if isinstance(g, ir.CastInstr) and g.opname == "sext" and g.operands[0].type == I32:
        return g.operands[0]
    return None


def _scaled_i32(g: ir.Value, n: int) -> tuple[ir.Value, int] | None:
    """(i, k) when the i64 `g` is sext(i) * n for an i32 i and n = 2^k (`_times`), else
    None."""
    if not (isinstance(g, ir.Instruction) and g.opname == "mul" and n & (n - 1) == 0):
        return None
    x, c = g.operands
    if not (isinstance(c, ir.Constant) and int(c.constant) == n and
            isinstance(x, ir.CastInstr) and x.opname == "sext" and x.operands[0].type == I32):
        return None
    return x.operands[0], n.bit_length() - 1


def _times(kern: KernelEmitter, i: ir.Value, s: int) -> ir.Value:
    """i * s, folded for a constant index or s = 1 (so that TileAccess sees the index itself
    and can narrow the axis's bounds)."""
    if isinstance(i, ir.CastInstr) and i.opname in ("sext", "zext") and \
            isinstance(i.operands[0], ir.Constant):
        c = int(i.operands[0].constant)      # a constant op's i32, widened
        i = _i64(c if i.opname == "sext" or c >= 0 else c + (1 << 32))
    if isinstance(i, ir.Constant):
        return _i64(int(i.constant) * s)
    return i if s == 1 else kern.builder.mul(i, _i64(s))


def tile_start(kern: KernelEmitter, op: BuiltinOp, shape: tuple[int, ...]):
    """(per-axis i64 first element, alignment) of a load/store: `index * shape`, aligned to
    any vector (True); or `offset`, whose last entry is a constant (that int) or a run-time
    value (None: tested at run time)."""
    args = op.arg_map
    if "offset" not in args:
        return [_times(kern, kern.index_i64(i), s)
                for i, s in zip(kern.tuple_items(args["index"]), shape)], True
    items = kern.tuple_items(args["offset"])
    last = kern.const_of(items[-1]) if items else None
    aligned = None if last is None else int(last.value)
    return [kern.index_i64(i) for i in items], aligned


def _mask_regs(kern: KernelEmitter, op: BuiltinOp, layout: Layout, arr: ArrayVal,
               axes: tuple[int, ...]) -> tuple[tuple | None, bool]:
    """(the mask's registers in `layout`, or None; whether the mask is broadcast along the
    tile axis that is the array's contiguous one)."""
    m = op.arg_map.get("mask")
    if m is None:
        return None, False
    if isinstance(m, ConstValue):
        return (ir.Constant(I1, int(bool(m.value))),) * layout.num_regs, True
    t = kern.tile(m)
    k = axes.index(arr.rank - 1) - (len(layout.shape) - len(t.shape))
    rows = k < 0 or t.shape[k] == 1
    if t.layout == layout:
        return t.regs, rows
    # Registers that need the same mask element share one value (a row mask: one per row),
    # fetched once.
    need = C.need_of(layout, tuple(t.shape))
    uniq = list(dict.fromkeys(need.regs))
    got = dict(zip(uniq, gather_elements(kern, t, need.thread, uniq)))
    return tuple(got[i] for i in need.regs), rows


@lowers("load")
def load(kern: KernelEmitter, op: BuiltinOp) -> TileVal:
    args = op.arg_map
    arr = kern.array(args["A"])
    rt = op.result.type
    shape = tuple(rt.shape)
    order = kern.const_ints(args["order"]) if "order" in args else None
    axes = order if order is not None else tuple(range(arr.rank))
    lay = access_layout(kern, arr, axes, shape, rt.dtype)
    staged = kern.prefetched_sides.get(op.result.id)
    if staged is not None and lay.is_one_hot():
        return _from_stage(kern, rt.dtype, lay, staged)
    start, aligned = tile_start(kern, op, shape)
    mask, rows = _mask_regs(kern, op, lay, arr, axes)
    acc = TileAccess(kern, arr, start, shape, order, lay, mask=mask, aligned=aligned,
                     mask_rows=rows)
    return TileVal(rt.dtype, lay, acc.load(_padding(kern, op, rt.dtype)))


def _from_stage(kern: KernelEmitter, dtype, lay: Layout, addr: ir.Value) -> TileVal:
    """A tile the loop around it copied ahead into shared memory, row-major at the 32-bit
    shared address `addr` (lower/tensorcore/mma_prefetch.py: the stage's copies have landed),
    read in layout `lay`: each register's element from the thread's base."""
    b = kern.builder
    ptr = shared_ptr(kern, addr, dtype)
    base = kern.thread_linear(lay.thread_weights())
    regs = []
    for r in range(lay.num_regs):
        off = lay.reg_linear(r)
        i = b.add(base, ir.Constant(I32, off)) if off else base
        regs.append(read_shared(kern, ptr, i, dtype))
    return TileVal(dtype, lay, tuple(regs), staged=addr)


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
    start, aligned = tile_start(kern, op, tuple(t.shape))
    mask, rows = _mask_regs(kern, op, t.layout, arr, tuple(range(arr.rank)))
    acc = TileAccess(kern, arr, start, tuple(t.shape), None, t.layout, mask=mask,
                     aligned=aligned, mask_rows=rows)
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
    """(pointer, in-bounds-and-unmasked i1) of register r's element: the bounds tested on
    the 64-bit indices, the offset in 32 bits under the `small` fact (an index outside,
    whose offset may wrap, is never accessed)."""
    b = kern.builder
    small = arr.facts.small
    off = ir.Constant(I32, 0) if small else _i64(0)
    ok = ir.Constant(I1, 1) if mask is None else mask[r]
    for k in range(arr.rank):
        i = idx[k][r]
        if small:
            off = b.add(off, b.mul(b.trunc(i, I32), b.trunc(arr.strides[k], I32)))
        else:
            off = b.add(off, b.mul(i, arr.strides[k]))
        ok = b.and_(ok, b.icmp_unsigned("<", i, arr.extents[k]))
    ptr = b.inttoptr(arr.address, ir.PointerType(kern.storage_type(arr.dtype), addrspace=1))
    return b.gep(ptr, [off]), ok


@lowers("gather")
def gather(kern: KernelEmitter, op: BuiltinOp) -> TileVal:
    if "axis" in op.arg_map:                    # within a tile (lower/rearrange.py)
        return tile_gather(kern, op)
    arr = kern.array(op.arg_map["A"])
    rt = op.result.type
    layout, idx, mask, _ = _element_operands(kern, op, arr, tuple(rt.shape))
    spad = kern.to_storage(_padding(kern, op, rt.dtype), arr.dtype)
    b = kern.builder
    regs = []
    for r in range(layout.num_regs):
        ptr, ok = _element_ptr(kern, arr, idx, r, mask)
        v = predicated_load(b, ptr, ok, [spad], arr.dtype.itemsize)[0]
        regs.append(kern.from_storage(v, arr.dtype))
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
            predicated_store(b, ptr, ok, [kern.to_storage(vals[r], arr.dtype)],
                             arr.dtype.itemsize)
    gated(kern, kern.owner(layout), body)


def _broadcast_shapes(shapes) -> tuple[int, ...]:
    rank = max((len(s) for s in shapes), default=0)
    out = [1] * rank
    for s in shapes:
        for i, d in enumerate(s):
            k = rank - len(s) + i
            out[k] = max(out[k], d)
    return tuple(out)

