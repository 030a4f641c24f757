"""Global -> shared copies of product operands (`cp.async`), for the pipelined loops
(lower/tensorcore/mma_pipeline.py, wgmma_product.py, mma_prefetch.py).

A `Stream` copies one deferred load (lower/tensorcore/mma_operands.py) for any value of the loop
variable: each thread moves 16-byte chunks in the blocked order (a warp's lanes take
consecutive chunks: coalesced), to its swizzled place in the operand's shared image, with
src-size zero-fill for what lies outside the array (and for iterations past the end of the
loop, so no branch is needed). When the array's facts say its contiguous extent is whole
16-byte chunks (`extent16`), every chunk is wholly inside or outside: its src-size is 16 or 0
by one predicate (one compare per chunk, which ptxas folds into the predicated LDGSTS);
otherwise the contiguous axis takes a clamped byte count per chunk (about 5 more
instructions each). The address arithmetic is arranged for the main loop's register budget:
one 64-bit pointer per thread per iteration, the others chained from it by one add each (in
asm, so LLVM does not hoist a separate invariant offset per chunk); the shared destinations
are one per-thread offset plus immediates.
"""

from __future__ import annotations

import llvmlite.ir as ir

from tilelang.codegen.emit.kernel import I1, I32, I64, KernelEmitter, TileVal
from tilelang.codegen.layouts.distributed import blocked, log2
from tilelang.codegen.lower.memory import gated
from tilelang.codegen.lower.tensorcore.mma_operands import DeferredLoad
from tilelang.codegen.lower.tensorcore.mma_sync import SmemOperand, element_row_col
from tilelang.ir.ops import ConstantOp


def _c(v: int) -> ir.Constant:
    return ir.Constant(I32, v)


def _c64(v: int) -> ir.Constant:
    return ir.Constant(I64, v)


def _add64(kern: KernelEmitter, x: ir.Value, y: ir.Value) -> ir.Value:
    """x + y (i64) that LLVM cannot re-associate (see the module docstring)."""
    asm = ir.InlineAsm(ir.FunctionType(I64, [I64, I64]), "add.s64 $0, $1, $2;", "=l,l,l")
    return kern.builder.call(asm, [x, y])


class Stream:
    """Copies of one deferred load into a shared operand image (see the module docstring).
    Construct before the loop: it computes the per-thread invariants there."""

    def __init__(self, kern: KernelEmitter, d: DeferredLoad, cax: int, itemsize: int,
                 image_offset: int, span: int = 0):
        b = kern.builder
        self.kern, self.d = kern, d
        args = d.op.arg_map
        self.arr = kern.array(args["A"])
        shape = tuple(d.op.result.type.shape)
        self.shape = shape
        order = kern.const_ints(args["order"]) if "order" in args else None
        self.axes = order if order is not None else tuple(range(self.arr.rank))
        self.cax, self.itemsize, self.image_offset = cax, itemsize, image_offset
        self.e = 16 // itemsize
        # With a contiguous last axis whose extent is whole 16-byte chunks, and a tile (so each
        # thread's chunks) starting on a chunk boundary, a chunk lies wholly inside or wholly
        # outside the array: one compare per axis, no partial src-size.
        facts = self.arr.facts
        self.whole = facts.contiguous and facts.extent16 and shape[cax] % self.e == 0
        self.lay = lay = blocked(shape, itemsize, kern.threads, 16, fast_axis=cax)
        # shared destination: this thread's first chunk + an immediate per chunk
        self.sop = SmemOperand(None, shape, cax, itemsize, span)
        tc = [kern.thread_coord(lay, ax) for ax in range(lay.rank)]
        self.tc = tc
        self.chunks = list(range(0, lay.num_regs, self.e))
        self.dst_const: dict[int, int] = {}
        self.dst_rt: dict[int, ir.Value] = {}
        row0, col0 = element_row_col(self.sop, tc, kern)
        first = self._dst(row0, col0)
        sh, mask = self.sop.swizzle_bits()
        period = (mask + 1) << sh
        for g in self.chunks:
            rc = lay.reg_coord(g)
            rrow, rcol = self._row_col_const(rc)
            if rrow % period == 0 and rrow % 8 == 0 and (rcol // self.e) % 8 == 0:
                self.dst_const[g] = self.sop.const_offset(rrow, rcol // self.e)
            else:
                coord = [b.add(tc[ax], _c(rc[ax])) if rc[ax] else tc[ax]
                         for ax in range(lay.rank)]
                self.dst_rt[g] = self._dst(*element_row_col(self.sop, coord, kern))
        self.dst_first = first
        # source: bytes per register bit of the chunk index (the chain's increments)
        strides = [self.arr.strides[a] for a in self.axes]
        self.strides = strides
        self.thread_off = self._dot(tc, strides, extend=True)
        # chunk j's pointer is chunk j-1's plus a step: one register per distinct step (one
        # for the blocked layouts, whose chunks are evenly spaced)
        self.delta: dict[int, tuple[int, ...]] = {}
        self.steps: dict[tuple[int, ...], ir.Value] = {}
        prev = lay.reg_coord(0)
        for g in self.chunks[1:]:
            rc = lay.reg_coord(g)
            d = tuple(x - y for x, y in zip(rc, prev))
            self.delta[g] = d
            if d not in self.steps:
                self.steps[d] = b.mul(self._dot([ir.Constant(I64, v) for v in d], strides,
                                                extend=False), _c64(itemsize))
            prev = rc

    def _row_col_const(self, rc) -> tuple[int, int]:
        r = self.sop.rank
        other = r - 1 if self.cax == r - 2 else r - 2
        row = rc[other] + (rc[0] * self.sop.rows_per_batch if r == 3 else 0)
        return row, rc[self.cax]

    def _dst(self, row: ir.Value, col: ir.Value) -> ir.Value:
        """Byte offset of (row, column) in the swizzled image (i32)."""
        b = self.kern.builder
        return self.sop.offset(b, row, b.lshr(col, _c(log2(self.e))))

    def _dot(self, coords, strides, extend: bool) -> ir.Value:
        b = self.kern.builder
        acc = _c64(0)
        for c, s in zip(coords, strides):
            if isinstance(c, ir.Constant) and c.constant == 0:
                continue
            cc = b.zext(c, I64) if extend else c
            acc = b.add(acc, b.mul(cc, s))
        return acc

    def issue(self, env_iv: tuple | None, image: ir.Value, valid: ir.Value | None) -> None:
        """Copy the tile the load names when the loop variable is `env_iv` = (iv value, its
        Value, the scalar ops to re-evaluate) (None: the current bindings) into the image at
        32-bit shared address `image`; nothing is read (zero-fill) where `valid` is false."""
        kern, b = self.kern, self.kern.builder
        saved = {}
        if env_iv is not None:
            iv_val, iv_var, ops = env_iv
            for o in [None] + list(ops):
                rid = iv_var.id if o is None else o.results[0].id
                saved[rid] = kern.env.get(rid)
            kern.env[iv_var.id] = TileVal(kern.env[iv_var.id].dtype, kern.scalar_layout,
                                          (iv_val,))
            for o in ops:
                if isinstance(o, ConstantOp):
                    kern.emit_constant(o)
                else:
                    kern.emit_builtin(o)
        index = [kern.index_i64(i) for i in kern.tuple_items(self.d.op.arg_map["index"])]
        for rid, v in saved.items():
            if v is None:
                kern.env.pop(rid, None)
            else:
                kern.env[rid] = v
        g0 = [b.mul(i, _c64(s)) for i, s in zip(index, self.shape)]
        # first chunk's element offset and pointer
        off = self.thread_off
        for g, s in zip(g0, self.strides):
            off = b.add(off, b.mul(g, s))
        p0 = b.add(self.arr.address, b.mul(off, _c64(self.itemsize)))
        # The tile starts inside the array (coordinates only grow from g0) and the iteration
        # exists; otherwise every axis counts as empty. Elements left per axis from this
        # thread's first chunk, clamped to [0, tile extent] so that i32 holds them: computed
        # per copy, so no per-chunk test is loop-invariant (hoisted into registers).
        inside = valid if valid is not None else ir.Constant(I1, 1)
        for g in g0:
            inside = b.and_(inside, b.icmp_signed(">=", g, _c64(0)))
        left = []
        for ax in range(len(self.shape)):
            start = b.add(g0[ax], b.zext(self.tc[ax], I64))
            m = b.sub(self.arr.extents[self.axes[ax]], start)
            m = b.select(b.icmp_signed("<", m, _c64(0)), _c64(0), m)
            m = b.select(b.icmp_signed(">", m, _c64(self.shape[ax])), _c64(self.shape[ax]), m)
            left.append(b.trunc(m, I32))
        # threads that replicate another's chunks (a tile smaller than the block's 16-byte
        # slots) copy nothing: two warps writing the same words would race
        gated(kern, kern.owner(self.lay), lambda: self._copies(p0, image, left, inside))

    def _copies(self, p0: ir.Value, image: ir.Value, left: list, inside: ir.Value) -> None:
        kern, b = self.kern, self.kern.builder
        ptr = p0
        dst0 = b.add(image, self.dst_first)
        # the axes along which no chunk moves: their tests (`0 < left`) are the same for every
        # chunk, combined once so that each chunk adds one test (ptxas folds it into the
        # compare that feeds the predicated copy)
        fixed = [ax for ax in range(len(self.shape))
                 if all(self.lay.reg_coord(g)[ax] == 0 for g in self.chunks)
                 and (ax != self.cax or self.whole)]
        common = inside
        for ax in fixed:
            common = b.and_(common, b.icmp_signed("<", _c(0), left[ax]))
        for g in self.chunks:
            if g:
                ptr = _add64(kern, ptr, self.steps[self.delta[g]])
            rc = self.lay.reg_coord(g)
            ok, n = common, None
            for ax in range(len(self.shape)):
                if ax in fixed:
                    continue
                lim = left[ax]
                if ax == self.cax and not self.whole:
                    m = b.sub(lim, _c(rc[ax])) if rc[ax] else lim
                    m = b.select(b.icmp_signed("<", m, _c(0)), _c(0), m)
                    n = b.select(b.icmp_signed(">", m, _c(self.e)), _c(self.e), m)
                else:
                    t = b.icmp_signed("<", _c(rc[ax]), lim)
                    ok = t if ok is None else b.and_(ok, t)
            if g in self.dst_const:
                dst, imm = dst0, self.dst_const[g] + self.image_offset
            else:
                dst, imm = b.add(image, self.dst_rt[g]), self.image_offset
            if n is None:
                b.call(_cp_async_pred_asm(imm), [dst, ptr, ok])
                continue
            nbytes = b.select(ok, b.mul(n, _c(self.itemsize)), _c(0))
            b.call(_cp_async_asm(imm), [dst, ptr, nbytes])


def _cp_async_asm(offset: int) -> ir.InlineAsm:
    return ir.InlineAsm(ir.FunctionType(ir.VoidType(), [I32, I64, I32]),
                        f"cp.async.cg.shared.global [$0+{offset}], [$1], 16, $2;",
                        "r,l,r,~{memory}", side_effect=True)


def _cp_async_pred_asm(offset: int) -> ir.InlineAsm:
    """A whole chunk or zeros: the src-size is 16 or 0 by a predicate (PTX 7.0's form, which
    ptxas turns into one predicated zero-fill copy)."""
    return ir.InlineAsm(ir.FunctionType(ir.VoidType(), [I32, I64, I1]),
                        "{ .reg .b32 n; selp.b32 n, 16, 0, $2; "
                        f"cp.async.cg.shared.global [$0+{offset}], [$1], 16, n; }}",
                        "r,l,b,~{memory}", side_effect=True)
