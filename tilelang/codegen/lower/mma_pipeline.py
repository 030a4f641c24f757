"""Global -> shared copies of product operands (`cp.async`), and software pipelining of a
`for` loop whose body is loads -> `mma`.

A `Stream` copies one deferred load (lower/mma_operands.py) for any value of the loop
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

The pipelined loop (S stages, a ring of S operand images):

    prologue: copy iterations 0 .. S-2 into slots 0 .. S-2, one commit group each
    loop j:   wait until at most S-2 groups are pending (iteration j has landed); barrier
              (everyone's copies are visible and everyone is done with slot (j-1) mod S);
              copy iteration j+S-1 into slot (j+S-1) mod S; commit; mma from slot j mod S
    exit:     wait for all groups; barrier (the shared buffer is free again)

S comes from the shared-memory budget: the largest S <= 4 whose ring fits the SM's shared
memory divided by the blocks per SM the registers allow (at most 2), and one block's limit
(decided before emission, with whether the loop is pipelined at all: plan/loops.py).
"""

from __future__ import annotations

import llvmlite.ir as ir

from tilelang.codegen.layouts.distributed import blocked, log2
from tilelang.codegen.llvm.kernel import I1, I32, I64, KernelEmitter, TileVal
from tilelang.codegen.lower import pipe_loop, wgmma_product
from tilelang.codegen.lower.memory import gated
from tilelang.codegen.lower.mma_epilogue import remember_acc_layout
from tilelang.codegen.lower.mma_operands import DeferredLoad, commit_group, wait_group
from tilelang.codegen.lower.mma_plan import to_layout
from tilelang.codegen.lower.mma_sync import (SmemOperand, element_row_col, fragment_loaders,
                                             product_from, shared_address)
from tilelang.codegen.plan.loops import (MAX_STAGES, LoopPlan,  # noqa: F401
                                         choose_stages)
from tilelang.ir.ops import ConstantOp, ForOp


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


# ---------------------------------------------------------------------------------------------
# The pipelined loop

def loop_plan(kern: KernelEmitter, op: ForOp) -> LoopPlan | None:
    """The plan for pipelining `op` (plan/loops.py), or None."""
    return kern.plan.loops.pipelined(op)


def emit_pipelined(kern: KernelEmitter, op: ForOp, lp: LoopPlan) -> None:
    if lp.plan.wg is not None:
        wgmma_product.emit_pipelined(kern, op, lp)
        return
    b = kern.builder
    plan, S = lp.plan, lp.stages
    form = plan.form
    kern.stats.features.add("mma_f8" if form.ab in ("e4m3", "e5m2") else "mma_sync")
    kern.stats.features.add("cp_async")
    start, stop, step = (kern.tile(v).value for v in (op.start, op.stop, op.step))
    ivt = kern.tile(op.start).dtype
    init = to_layout(kern, kern.tile(op.init[0]), plan.acc)
    stage_bytes = sum(lp.image_bytes)
    ring = kern.smem(S * stage_bytes, ir.IntType(8), 0)
    base = shared_address(kern, ring)
    offs = (0, lp.image_bytes[0])
    streams = [Stream(kern, d, cax, form.itemsize, o)
               for d, cax, o in zip(lp.operands, lp.axes, offs)]
    sops = [SmemOperand(None, s.shape, s.cax, form.itemsize) for s in streams]
    loaders = fragment_loaders(kern, plan.tiling, sops[0], sops[1], plan.acc)
    k = sops[0].shape[-1]
    iv_var = op.iv

    def wide(v):
        return b.sext(v, I64) if ivt.signed else b.zext(v, I64)

    positive = b.icmp_signed(">", step, ir.Constant(step.type, 0)) if ivt.signed else \
        b.icmp_unsigned(">", step, ir.Constant(step.type, 0))

    def valid_ahead(iv, s):
        """Iteration `iv + s * step` exists (no overflow: compared in i64); s: int or i32."""
        s64 = _c64(s) if isinstance(s, int) else b.zext(s, I64)
        ahead = b.mul(wide(step), s64)
        left = b.sub(wide(stop), wide(iv))
        return b.and_(positive, b.icmp_signed("<", ahead, left))

    def iv_ahead(iv, s):
        if isinstance(s, int):
            return b.add(iv, b.mul(step, ir.Constant(step.type, s))) if s else iv
        sv = s if step.type == I32 else (b.zext(s, step.type) if step.type.width > 32
                                         else b.trunc(s, step.type))
        return b.add(iv, b.mul(step, sv))

    def issue(iv, s, image):
        kern.env[iv_var.id] = TileVal(ivt, kern.scalar_layout, (iv,))
        for st in streams:
            st.issue((iv_ahead(iv, s), iv_var, lp.scalars), image, valid_ahead(iv, s))
        commit_group(kern)

    kern.barrier()                       # earlier users of the shared buffer are done
    if S == 2:
        issue(start, 0, base)
    else:                                # the prologue as a loop: its copy code once
        entry = b.block
        ploop = kern.fn.append_basic_block("mma.prologue")
        pdone = kern.fn.append_basic_block("mma.prologue.end")
        b.branch(ploop)
        b.position_at_end(ploop)
        s = b.phi(I32, "stage")
        s.add_incoming(_c(0), entry)
        issue(start, s, b.add(base, b.mul(s, _c(stage_bytes))))
        s1 = b.add(s, _c(1))
        s.add_incoming(s1, b.block)
        b.cbranch(b.icmp_unsigned("<", s1, _c(S - 1)), ploop, pdone)
        b.position_at_end(pdone)
    # slot: the byte offset of this iteration's stage
    iv, (slot,), accs, header, exit_ = pipe_loop.loop_header(
        kern, "mma.pipe", "mma.pipe.body", "mma.pipe.exit", start, stop, ivt, positive,
        named=[("slot", I32, _c(0))], carried=init.regs)
    wait_group(kern, S - 2)
    kern.barrier()
    last = _c((S - 1) * stage_bytes)
    wslot = b.select(b.icmp_unsigned("==", slot, _c(0)), last, b.sub(slot, _c(stage_bytes)))
    issue(iv, S - 1, b.add(base, wslot))
    image = b.add(base, slot)
    regs = product_from(kern, form, plan.b_class, plan.tiling, loaders,
                        (image, b.add(image, _c(offs[1]))), accs, k)
    nxt = b.add(slot, _c(stage_bytes))
    nxt = b.select(b.icmp_unsigned("==", nxt, _c(S * stage_bytes)), _c(0), nxt)
    tail = b.block
    iv.add_incoming(b.add(iv, step), tail)
    slot.add_incoming(nxt, tail)
    for p, r in zip(accs, regs):
        p.add_incoming(r, tail)
    b.branch(header)

    b.position_at_end(exit_)
    wait_group(kern, 0)
    kern.barrier()                       # the ring is free for the next user
    kern.env[op.results[0].id] = TileVal(init.dtype, plan.acc, tuple(accs))
    remember_acc_layout(kern, plan.acc)
