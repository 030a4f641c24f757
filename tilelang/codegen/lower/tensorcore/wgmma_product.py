"""Matrix products with warp-group MMA (sm_90a): operands in swizzled shared-memory images
(32-, 64- or 128-byte spans) read through descriptors, the accumulator in the wgmma fragment
layout (layouts/wgmma.py), the fence / commit / wait protocol of lower/tensorcore/wgmma_ops.py.

Operand images (layouts/shared.wgmma_image, `SmemOperand(span=...)`): rows of the operand's
non-contiguous axis, panels `span` bytes wide along the contiguous one (the widest of 128, 64
and 32 that divides it), each image 1024-byte aligned.
A deferred load (lower/tensorcore/mma_operands.py) is copied straight into its image with `cp.async`
when its contiguous axis is whole panels; anything else is loaded into registers and stored
into the image along K when K is whole panels, else along M/N (the instruction transposes
16-bit operands).

Per k-step of 16, each warp group issues one `wgmma.mma_async.m64nNk16` per 64-row tile and
N-instruction (N = min(its columns, 256)), all in one commit group.
"""

from __future__ import annotations

from typing import Callable

import llvmlite.ir as ir

from tilelang.codegen.layouts.distributed import log2
from tilelang.codegen.layouts.wgmma import WG_M, WgTiling, instr_regs, wg_acc_layout
from tilelang.codegen.emit.kernel import I32, I64, KernelEmitter, TileVal
from tilelang.codegen.emit import preheader
from tilelang.codegen.lower.tensorcore import (mma_operands, mma_sync, pipe_loop, tma_load,
                                               tma_multicast, wgmma_ops)
from tilelang.codegen.lower.tensorcore.cp_async import Stream, _c64
from tilelang.codegen.lower.tensorcore.mma_epilogue import remember_acc_layout
from tilelang.codegen.lower.tensorcore.mma_plan import (TensorCorePlan, image_fits, image_span,
                                              to_layout, wg_k)
from tilelang.codegen.plan.loops import IMAGE_ALIGN, deferred_cax, image_bytes  # noqa: F401
from tilelang.record import record



def prefetched(kern: KernelEmitter, x) -> tuple | None:
    """(SmemOperand, 32-bit address of the image in the ring's first stage, byte offset of
    this iteration's stage) of an operand that the loop around the product already copies
    ahead (lower/tensorcore/mma_prefetch.py), else None."""
    if not isinstance(x, mma_operands.DeferredLoad):
        return None
    got = kern.prefetched.get(x.op.result.id)
    if got is None:
        return None
    sop, image, slot, d = got
    if x.chain == d.chain:
        return sop, image, slot
    # another view of the same load (plan/operands.py: a load shared by products): the same
    # image, seen with this operand's axes; its major-ness is then the descriptor's
    lax = d.load_axis(sop.cax)
    cax = next((ax for ax in range(len(x.shape)) if x.load_axis(ax) == lax), None)
    if cax is None or cax < len(x.shape) - 2 or sop.itemsize != 2:
        return None                          # 8-bit operands are K-major only: copy again
    return mma_sync.SmemOperand(sop.base, x.shape, cax, sop.itemsize, sop.span), image, slot


def _c(v: int) -> ir.Constant:
    return ir.Constant(I32, v)


def align_smem(kern: KernelEmitter) -> None:
    """The scratch buffer starts 1024-byte aligned (the swizzle pattern's period)."""
    if kern._smem is not None and (kern._smem.align or 0) < IMAGE_ALIGN:
        kern._smem.align = IMAGE_ALIGN


def note_use(kern: KernelEmitter, plan: TensorCorePlan, pipelined: bool) -> None:
    """The kernel uses wgmma: its `.target` is sm_90a and the contract gets `.reqntid` and,
    for a pipelined product loop (the GEMM docs/launch.md's `.maxnreg` formula describes: the
    accumulator is all that lives across it), `.maxnreg` from the accumulator's registers.
    A product outside such a loop lives among other tiles the formula does not count
    (attention keeps scores, running sums and an output tile): the bound is then the
    hardware's (`.maxnreg 255`), and ptxas decides."""
    kern.stats.features.add("wgmma")
    if not pipelined:
        kern.stats.wgmma_unbounded = True
    if kern.stats.ws_share:
        # a warp-specialized block: .maxnreg is the even share setmaxnreg redistributes
        kern.stats.wgmma_acc_regs = kern.stats.ws_share - 40
    elif kern.stats.wgmma_unbounded:
        kern.stats.wgmma_acc_regs = 255
    else:
        kern.stats.wgmma_acc_regs = max(kern.stats.wgmma_acc_regs, plan.acc.num_regs)


def register_cax(shape: tuple[int, ...], k_axis: int, itemsize: int) -> int:
    """The contiguous axis of a register operand's image: K when it is whole panels."""
    r = len(shape)
    other = r - 1 if k_axis == r - 2 else r - 2
    return k_axis if image_fits(shape[k_axis], itemsize) else other


def place_image(kern: KernelEmitter, x, shape, k_axis: int, itemsize: int, offset: int,
                transposes: bool | None = None):
    """(the operand's swizzled image at `offset` of the scratch buffer, the source to copy
    into it, its bytes): a deferred load keeps the axis its copy makes contiguous
    (plan/loops.deferred_cax) or is loaded into registers first; a register operand's image
    is laid out by `register_cax`. Shared by the wgmma and tcgen05 products (`transposes`:
    plan/operands.async_axis's)."""
    cax = None
    if isinstance(x, mma_operands.DeferredLoad):
        cax = deferred_cax(kern, x, k_axis, itemsize, transposes)
        if cax is None:
            x = mma_operands.materialize(kern, x)
    if cax is None:
        cax = register_cax(shape, k_axis, itemsize)
    nbytes = image_bytes(shape, itemsize)
    base = kern.smem(nbytes, ir.IntType(8), offset)
    sop = mma_sync.SmemOperand(base, shape, cax, itemsize, image_span(shape[cax], itemsize))
    return sop, x, nbytes


def fill_images(kern: KernelEmitter, sources, sops, offsets, smem32) -> None:
    """Write each placed operand image (`place_image`): a deferred load by `cp.async` into the
    image at byte `offset` of the buffer at 32-bit shared address `smem32`, waited for here; a
    register operand by the threads' stores. A source of None is an image already in place."""
    copies = False
    for x, sop, off in zip(sources, sops, offsets):
        if x is None:
            continue
        if isinstance(x, mma_operands.DeferredLoad):
            Stream(kern, x, x.load_axis(sop.cax), sop.itemsize, off, sop.span).issue(
                None, smem32, None)
            copies = True
        else:
            mma_sync.fill_from_registers(kern, x, sop, kern.storage_type(x.dtype))
    if copies:
        kern.stats.features.add("cp_async")
        mma_operands.commit_group(kern)
        mma_operands.wait_group(kern, 0)


def ring_images(lp, itemsize: int) -> tuple[int, tuple[int, int], list]:
    """(bytes of a stage, the operands' offsets in it, their image records without a base) for
    a pipelined loop's plan `lp`: the images every stage of its ring holds."""
    offs = (0, lp.image_bytes[0])
    sops = [mma_sync.SmemOperand(None, tuple(d.op.result.type.shape), cax, itemsize,
                                 image_span(tuple(d.op.result.type.shape)[cax], itemsize))
            for d, cax in zip(lp.operands, lp.axes)]
    return sum(lp.image_bytes), offs, sops


@record
class Descriptors:
    """The descriptors of one operand image for every (batch, tile, k-step) of a warp
    group: a per-warp-group base descriptor (computed once) plus compile-time offsets."""

    sop: mma_sync.SmemOperand
    is_a: bool
    trans: bool
    const: int              # the descriptor's LBO / SBO / swizzle bits
    wg_off: ir.Value        # this warp group's byte offset in the image (i32)

    @classmethod
    def build(cls, kern: KernelEmitter, sop: mma_sync.SmemOperand, is_a: bool,
              plan: TensorCorePlan) -> "Descriptors":
        b = kern.builder
        t: WgTiling = plan.wg
        rank = sop.rank
        k_axis = rank - 1 if is_a else rank - 2
        trans = sop.cax != k_axis
        lbo = sop.panel_bytes if trans else 16
        const = wgmma_ops.descriptor_const(lbo, 8 * sop.span, sop.span)
        # this warp group's first row (A) / column (B) and batch, from the accumulator
        # layout's warp-group bits (warp bits 2 and up)
        acc = plan.acc
        axis = rank - 2 if is_a else rank - 1
        nl, nw = len(acc.lane), len(acc.warp)

        def coord(ax):
            w = (0,) * (nl + 2) + tuple(acc.warp[i][ax] for i in range(2, nw))
            return _warp_uniform(kern, kern.thread_linear, w) if any(w) else _c(0)

        mn = coord(axis)
        batch = coord(0) if rank == 3 else _c(0)
        rows_per_batch = sop.rows_per_batch
        span = sop.span
        if not trans:               # rows are M (N): the warp group's rows
            off = b.mul(b.add(b.mul(batch, _c(rows_per_batch)), mn), _c(span))
        else:                       # rows are K: panels along M (N)
            e = span // sop.itemsize
            panel = b.mul(b.lshr(mn, _c(log2(e))), _c(sop.panel_bytes))
            within = b.mul(b.and_(mn, _c(e - 1)), _c(sop.itemsize))
            off = b.add(b.add(panel, within), b.mul(batch, _c(rows_per_batch * span)))
        return cls(sop, is_a, trans, const, off)

    def offset(self, bi: int, tile0: int, k0: int) -> int:
        """Byte offset (from the warp group's base) of the instruction tile starting at row
        / column `tile0` of the warp group's tile, batch `bi`, k-step at `k0`."""
        s = self.sop
        e = s.span // s.itemsize        # elements of one panel row
        if not self.trans:
            return (k0 // e) * s.panel_bytes + (bi * s.rows_per_batch + tile0) * s.span + \
                (k0 % e) * s.itemsize
        return (tile0 // e) * s.panel_bytes + (tile0 % e) * s.itemsize + \
            (bi * s.rows_per_batch + k0) * s.span

    def base(self, kern: KernelEmitter, image: ir.Value, slot: ir.Value | None = None
             ) -> ir.Value:
        """The low word of the warp group's descriptor for the image at 32-bit shared address
        `image` (+ `slot` bytes, a ring stage that changes per iteration: added to the
        field, so the rest is computed once before the loop): the start-address field
        (16-byte units) and the LBO."""
        b = kern.builder
        addr = b.add(image, self.wg_off)
        start = b.and_(b.lshr(addr, ir.Constant(I32, 4)), ir.Constant(I32, 0x3FFF))
        low = b.or_(start, ir.Constant(I32, self.const & 0xFFFFFFFF))
        return low if slot is None else b.add(low, b.lshr(slot, ir.Constant(I32, 4)))

    def at(self, kern: KernelEmitter, start: ir.Value, off16: int) -> ir.Value:
        """The descriptor (i64) `off16` 16-byte units past `start` (from `base`). The offset
        is added to the 32-bit field: an instruction's tile lies inside the image, so the
        field cannot carry into the others (Triton adds it the same way), and a slot that
        changes per iteration costs one 32-bit add per MMA instead of a 64-bit one."""
        b = kern.builder
        field = b.add(start, ir.Constant(I32, off16)) if off16 else start
        return b.or_(b.zext(field, I64), ir.Constant(I64, self.const & ~0xFFFFFFFF))


def _warp_uniform(kern: KernelEmitter, fn, *args):
    """fn(*args) of the thread index bits above the lane's, computed from lane 0's index
    (`shfl.sync.idx` from lane 0: the same bits, as warps are consecutive linear indices).
    ptxas takes a value shuffled from a fixed lane as warp-uniform, so the warp group's
    descriptors and their per-K-step arithmetic stay in uniform registers; from the thread
    index itself they were vector registers moved over by an R2UR before each wgmma (two
    consumer warp groups: 65 -> 52 SASS per K-step). Called where every warp is converged."""
    first = tma_load._asm(kern, "shfl.sync.idx.b32 $0, $1, 0, 31, -1;", [kern.vtid], "=r,r",
                          I32)
    saved, kern.vtid = kern.vtid, first
    try:
        return fn(*args)
    finally:
        kern.vtid = saved


def issue(kern: KernelEmitter, plan: TensorCorePlan, da: Descriptors, db: Descriptors,
          bases: tuple[ir.Value, ir.Value], regs: list[ir.Value], k: int, *,
          fenced: bool = False, wait: int | None = None) -> list[ir.Value]:
    """Every `wgmma.mma_async` of acc += A @ B over K = k for this warp group (`fenced`: after
    `wgmma.fence` and before `commit_group`, in the same asm; `wait`: then
    `wgmma.wait_group wait`, also in it);
    `bases`: the two operands' warp-group start fields (Descriptors.base)."""
    b = kern.builder
    t: WgTiling = plan.wg
    form = plan.form
    kstep = wg_k(form)
    mmas = []
    for k0 in range(0, k, kstep):
        for bi in range(t.batch_per_group):
            for mi in range(t.m_tiles):
                for ni in range(t.n_instrs):
                    oa = da.offset(bi, mi * WG_M, k0) >> 4
                    ob = db.offset(bi, ni * t.instr_n, k0) >> 4
                    pa = da.at(kern, bases[0], oa)
                    pb = db.at(kern, bases[1], ob)
                    mmas.append((instr_regs(t, bi, mi, ni), pa, pb))
    return wgmma_ops.mma_async(kern, t.instr_n, form.ab, kstep, mmas, regs, da.trans,
                               db.trans, bt=plan.b_class, fence=fenced, commit=fenced, wait=wait)


def a_fragment_layout(plan: TensorCorePlan, shape: tuple[int, ...], threads: int):
    """The layout in which a register operand A (M, K) already is wgmma's A fragment: the
    accumulator layout of an (M, K) product with the same warp groups along M (so a
    product's result, after element-wise ops, feeds the next product from registers, as
    attention's P does)."""
    t: WgTiling = plan.wg
    if len(shape) != 2 or t.groups_n != 1 or t.groups_b != 1 or shape[-1] > 256:
        return None
    ta = WgTiling(1, shape[0], shape[1], 1, t.groups_m, 1)
    return wg_acc_layout(tuple(shape), threads, ta)


def _narrowed(v: ir.Value) -> ir.Value | None:
    """The f32 value `v` was rounded from, when it is an f32 -> f16/bf16 conversion."""
    if isinstance(v, ir.CastInstr) and v.opname == "fptrunc" and \
            v.operands[0].type == ir.FloatType() and str(v.type) in ("half", "bfloat"):
        return v.operands[0]
    return None


def _pack16(kern: KernelEmitter, lo: ir.Value, hi: ir.Value) -> ir.Value:
    """Two 16-bit values as one i32 (lo in the low half). Two f32 values just rounded to
    f16/bf16 (attention's P) are rounded and packed by one `cvt.rn.{f16,bf16}x2.f32`, the
    same round-to-nearest-even per element; the separate conversions are then dead."""
    b = kern.builder
    x, y = _narrowed(lo), _narrowed(hi)
    if x is not None and y is not None and lo.type == hi.type:
        kind = "f16x2" if str(lo.type) == "half" else "bf16x2"
        asm = ir.InlineAsm(ir.FunctionType(I32, [ir.FloatType(), ir.FloatType()]),
                           f"cvt.rn.{kind}.f32 $0, $1, $2;", "=r,f,f")
        return b.call(asm, [y, x])
    i16 = ir.IntType(16)
    x, y = (v if v.type == i16 else b.bitcast(v, i16) for v in (lo, hi))
    return b.or_(b.zext(x, I32), b.shl(b.zext(y, I32), _c(16)))


def _product_rs(kern: KernelEmitter, plan: TensorCorePlan, a: TileVal, b, acc: TileVal,
                k: int) -> TileVal:
    """acc + a @ b with A from registers (already in the fragment layout) and B in smem."""
    form = plan.form
    t: WgTiling = plan.wg
    rank = acc.layout.rank
    shape_b = b.shape
    ready = prefetched(kern, b)
    if ready is not None:                    # the loop copied it ahead: no staging
        db = Descriptors.build(kern, ready[0], False, plan)
        return _rs_issue(kern, plan, a, acc, k, db, db.base(kern, ready[1], ready[2]))
    cax = None
    if isinstance(b, mma_operands.DeferredLoad):
        cax = deferred_cax(kern, b, rank - 2, form.itemsize)
        if cax is None:
            b = mma_operands.materialize(kern, b)
    if cax is None:
        cax = register_cax(shape_b, rank - 2, form.itemsize)
    base = kern.smem(image_bytes(shape_b, form.itemsize), ir.IntType(8), 0)
    sop = mma_sync.SmemOperand(base, shape_b, cax, form.itemsize,
                               image_span(shape_b[cax], form.itemsize))
    align_smem(kern)
    kern.barrier()
    smem32 = mma_sync.shared_address(kern, base)
    if isinstance(b, mma_operands.DeferredLoad):
        Stream(kern, b, b.load_axis(sop.cax), sop.itemsize, 0, sop.span).issue(None, smem32,
                                                                              None)
        kern.stats.features.add("cp_async")
        mma_operands.commit_group(kern)
        mma_operands.wait_group(kern, 0)
    else:
        mma_sync.fill_from_registers(kern, b, sop, kern.storage_type(b.dtype))
    kern.barrier()
    wgmma_ops.fence_proxy_async(kern)
    db = Descriptors.build(kern, sop, False, plan)
    return _rs_issue(kern, plan, a, acc, k, db, db.base(kern, smem32))


def _rs_issue(kern: KernelEmitter, plan: TensorCorePlan, a: TileVal, acc: TileVal, k: int,
              db: "Descriptors", base_b: ir.Value) -> TileVal:
    """The MMAs of a register-A product whose B image is ready (descriptors `db`)."""
    t: WgTiling = plan.wg
    form = plan.form
    bld = kern.builder
    per_tile = k // 8 * 4                    # A registers of one 64-row tile
    # every fragment packed before the first MMA: a register written between two MMAs of a
    # group makes ptxas wait for the earlier ones (one warpgroup.arrive and wait per MMA)
    frags = {}
    for k0 in range(0, k, 16):
        for mi in range(t.m_tiles):
            first = mi * per_tile + k0 // 8 * 4
            r = a.regs[first:first + 8]
            frags[k0, mi] = [_pack16(kern, r[i], r[i + 1]) for i in range(0, 8, 2)]
    mmas = []
    for k0 in range(0, k, 16):
        for mi in range(t.m_tiles):
            for ni in range(t.n_instrs):
                pb = db.at(kern, base_b, db.offset(0, ni * t.instr_n, k0) >> 4)
                mmas.append((instr_regs(t, 0, mi, ni), frags[k0, mi], pb))
    regs = wgmma_ops.mma_async_rs_group(kern, t.instr_n, form.ab, mmas, list(acc.regs),
                                        db.trans, 0)
    remember_acc_layout(kern, plan.acc)
    return TileVal(acc.dtype, plan.acc, tuple(regs))


# Loop-invariant A operands of at most this many registers a thread in all (attention's Q at
# D <= 128: 32) are kept in registers in wgmma's fragment layout, so that each of the loop's MMAs
# needs B's descriptor only; a larger one is kept in an image (kept_image). The fragments kept
# for a loop and the values the loops around them carry stay live through it: together at most
# LIVE_REGS registers a thread (attention forward at D = 128: O's 64 + Q's 32; backward's dK/dV
# at 64-key tiles: dK's and dV's 64 + K's and V's 16 each; at 128-key tiles dK and dV alone are
# 128, and keeping K too spills)
KEPT_FRAGMENT_REGS = 32
LIVE_REGS = 128


def kept_fragment(kern: KernelEmitter, x: TileVal, frag) -> TileVal | None:
    """A loop-invariant register operand A (attention's Q) converted once, before the loop
    (emit/preheader.py), into wgmma's A fragment layout `frag` (docs/codegen.md, Attention),
    or None (not invariant, no single loop entry, more than KEPT_FRAGMENT_REGS registers a
    thread)."""
    found = preheader.entry(kern)
    if found is None or not preheader.invariant(kern, x.regs, found[2]):
        return None
    header = found[1]
    key = ("fragment", id(header), tuple(id(r) for r in x.regs))
    if key in kern.kept_images:
        return kern.kept_images[key]
    kept = sum(len(k[2]) for k in kern.kept_images            # 16-bit elements
               if isinstance(k, tuple) and k and k[0] == "fragment" and k[1] == id(header))
    carried = sum(len(row) for frame in kern.loops for row in frame.phis)
    if (kept + len(x.regs)) * 2 > KEPT_FRAGMENT_REGS * 4 or \
            carried + (kept + len(x.regs)) // 2 > LIVE_REGS:
        return None

    def fill():
        kern.barrier()
        out = to_layout(kern, x, frag)
        kern.barrier()
        return out
    out, _ = preheader.before_loop(kern, fill, "wgmma.keep.frag")
    kern.kept_images[key] = out
    return out


def kept_image(kern: KernelEmitter, x, sop_for) -> tuple | None:
    """A loop-invariant register operand (attention's Q) stored into an image of its own
    once, before the loop (emit/preheader.py), instead of on every iteration: (SmemOperand,
    32-bit address) or None. The fill: barrier; stores; fence.proxy.async; barrier."""
    if not isinstance(x, TileVal):
        return None
    found = preheader.entry(kern)
    if found is None or not preheader.invariant(kern, x.regs, found[2]):
        return None
    header = found[1]
    sop0 = sop_for(None)
    image = (tuple(id(r) for r in x.regs), sop0.shape, sop0.cax, sop0.span)
    key = (id(header),) + image
    if key in kern.kept_images:
        return kern.kept_images[key]
    # the same image filled before an earlier loop that every path here passed (the two
    # loops loop splitting makes of one): nothing else writes a kept buffer, so it is reused
    earlier = kern.kept_images.get(image)
    if earlier is not None and preheader.dominates(kern.fn, earlier[0], header):
        sop = earlier[1]                 # its address again here (the first is the other
        out = (sop, mma_sync.shared_address(kern, sop.base))    # loop's)
        kern.kept_images[key] = out
        return out
    buf = kern.kept_smem(image_bytes(sop0.shape, sop0.itemsize), IMAGE_ALIGN)
    sop = sop_for(buf)

    def fill():
        kern.barrier()                   # a previous fill's readers (an outer loop) are done
        mma_sync.fill_from_registers(kern, x, sop, kern.storage_type(x.dtype))
        wgmma_ops.fence_proxy_async(kern)
        kern.barrier()

    _, block = preheader.before_loop(kern, fill, "wgmma.keep")
    out = (sop, mma_sync.shared_address(kern, buf))
    kern.kept_images[key] = out
    kern.kept_images[image] = (block, sop)
    return out


def product(kern: KernelEmitter, plan: TensorCorePlan, a, b, acc: TileVal) -> TileVal:
    """acc + a @ b on warp-group MMA; `a`, `b`: TileVals or DeferredLoads."""
    kern.require_exact()
    note_use(kern, plan, pipelined=False)
    form = plan.form
    acc = to_layout(kern, acc, plan.acc)
    rank = acc.layout.rank
    if isinstance(a, TileVal) and form.itemsize == 2:
        frag = a_fragment_layout(plan, a.shape, kern.threads)
        if frag is not None and a.layout == frag:
            return _product_rs(kern, plan, a, b, acc, a.shape[-1])
        kept_a = kept_fragment(kern, a, frag) if frag is not None else None  # 16-bit
        if kept_a is not None:
            return _product_rs(kern, plan, kept_a, b, acc, a.shape[-1])
    shapes = [x.shape for x in (a, b)]
    k = shapes[0][-1]
    sops, sources, offsets, offset = [], [], [], 0
    kept = {}
    for x, shape, k_axis in ((a, shapes[0], rank - 1), (b, shapes[1], rank - 2)):
        ready = prefetched(kern, x)
        if ready is not None:                # copied ahead by the loop (lower/tensorcore/mma_prefetch)
            kept[len(sops)] = ready[1:]
            sops.append(ready[0])
            sources.append(None)
            offsets.append(None)
            continue
        if isinstance(x, TileVal):
            cax = register_cax(shape, k_axis, form.itemsize)
            got = kept_image(kern, x, lambda base, shape=shape, cax=cax: mma_sync.SmemOperand(
                base, shape, cax, form.itemsize, image_span(shape[cax], form.itemsize)))
            if got is not None:
                kept[len(sops)] = got[1]
                sops.append(got[0])
                sources.append(None)
                offsets.append(None)
                continue
        sop, x, nbytes = place_image(kern, x, shape, k_axis, form.itemsize, offset)
        sops.append(sop)
        sources.append(x)
        offsets.append(offset)
        offset += nbytes
    align_smem(kern)
    staged = len(kept) < 2
    if staged:
        kern.barrier()
    scratch = next((s.base for s, x in zip(sops, sources) if x is not None), None)
    smem32 = mma_sync.shared_address(kern, scratch) if scratch is not None else None
    fill_images(kern, sources, sops, offsets, smem32)
    if staged:
        kern.barrier()
        wgmma_ops.fence_proxy_async(kern)
    da = Descriptors.build(kern, sops[0], True, plan)
    db = Descriptors.build(kern, sops[1], False, plan)
    # scratch images start at smem32 (offsets[i] past it); kept ones at their own address
    addr = [kept[i] if i in kept else
            (kern.builder.add(smem32, _c(offsets[i])) if offsets[i] else smem32)
            for i in range(2)]
    regs = issue(kern, plan, da, db, tuple(d.base(kern, *(x if isinstance(x, tuple) else (x,)))
                                           for d, x in zip((da, db), addr)),
                 list(acc.regs), k, fenced=True, wait=0)
    remember_acc_layout(kern, plan.acc)
    return TileVal(acc.dtype, plan.acc, tuple(regs))


# ---------------------------------------------------------------------------------------------
# The pipelined loop

def wait_depth(plan: TensorCorePlan, threads: int) -> int:
    """How many wgmma groups may stay in flight when an iteration issues its copies: the
    copies refill the slot the previous iteration's MMAs read, which one pending group
    leaves finished only when the block is one warp group (all readers of that slot are
    this warp group's MMAs); with more, other warp groups may still be reading it."""
    return 1 if threads == 128 else 0


def emit_pipelined(kern: KernelEmitter, op, lp) -> None:
    """lower/tensorcore/mma_pipeline.py's ring with warp-group MMA:

        prologue: copy iterations 0 .. S-2 into slots 0 .. S-2, one cp.async group each
        loop j:   wait until at most S-2 copy groups are pending; barrier; fence.proxy.async;
                  wgmma.fence; the MMAs of slot j mod S; commit; wgmma.wait_group d (the
                  MMAs of iteration j-1 are done, so their slot is free); copy iteration
                  j+S-1 into slot (j-1) mod S; commit
        exit:     wgmma.wait_group 0; wait for all copy groups; barrier
    """
    b = kern.builder
    plan, S = lp.plan, lp.stages
    form = plan.form
    kern.require_exact()
    note_use(kern, plan, pipelined=True)
    kern.stats.features.add("cp_async")
    start, stop, step = (kern.tile(v).value for v in (op.start, op.stop, op.step))
    ivt = kern.tile(op.start).dtype
    init = to_layout(kern, kern.tile(op.init[0]), plan.acc)
    stage_bytes, offs, sops = ring_images(lp, form.itemsize)
    tma = tma_load.plan_operands(kern, lp.operands, sops, offs) if lp.tma else None
    # warp-specialized (a producer warp group: _ws_loop) or not: the loop's plan
    ws = bool(tma) and lp.warp_specialized
    # the TMA ring's mbarriers (8 bytes each; a full and an empty one per stage when
    # specialized) follow the operand images
    ring = kern.smem(S * stage_bytes + ((16 if ws else 8) * S if tma else 0), ir.IntType(8), 0)
    align_smem(kern)
    base = mma_sync.shared_address(kern, ring)
    streams = [] if tma else [Stream(kern, d, sop.cax, form.itemsize, o, sop.span)
                              for d, sop, o in zip(lp.operands, sops, offs)]
    da = Descriptors.build(kern, sops[0], True, plan)
    db = Descriptors.build(kern, sops[1], False, plan)
    k = sops[0].shape[-1]
    depth = wait_depth(plan, kern.threads)
    iv_var = op.iv

    def wide(v):
        return b.sext(v, I64) if ivt.signed else b.zext(v, I64)

    positive = b.icmp_signed(">", step, ir.Constant(step.type, 0)) if ivt.signed else \
        b.icmp_unsigned(">", step, ir.Constant(step.type, 0))

    def valid_ahead(iv, s):
        s64 = _c64(s) if isinstance(s, int) else b.zext(s, I64)
        return b.and_(positive, b.icmp_signed("<", b.mul(wide(step), s64),
                                              b.sub(wide(stop), wide(iv))))

    def iv_ahead(iv, s):
        if isinstance(s, int):
            return b.add(iv, b.mul(step, ir.Constant(step.type, s))) if s else iv
        sv = s if step.type == I32 else (b.zext(s, step.type) if step.type.width > 32
                                         else b.trunc(s, step.type))
        return b.add(iv, b.mul(step, sv))

    def copy(iv, s, image):
        kern.env[iv_var.id] = TileVal(ivt, kern.scalar_layout, (iv,))
        for st in streams:
            st.issue((iv_ahead(iv, s), iv_var, lp.scalars), image, valid_ahead(iv, s))
        mma_operands.commit_group(kern)

    if tma:
        loop = _ws_loop if ws else tma_loop
        loop(kern, RingLoop(op, lp, tma, base, da, db, k, init, start, stop, step, ivt,
                            valid_ahead, iv_ahead, positive))
        return
    kern.barrier()                       # earlier users of the shared buffer are done
    entry = b.block
    if S == 2:
        copy(start, 0, base)
    else:                                # the prologue as a loop: its copy code once
        ploop = kern.fn.append_basic_block("wgmma.prologue")
        pdone = kern.fn.append_basic_block("wgmma.prologue.end")
        b.branch(ploop)
        b.position_at_end(ploop)
        s = b.phi(I32, "stage")
        s.add_incoming(_c(0), entry)
        copy(start, s, b.add(base, b.mul(s, _c(stage_bytes))))
        s1 = b.add(s, _c(1))
        s.add_incoming(s1, b.block)
        b.cbranch(b.icmp_unsigned("<", s1, _c(S - 1)), ploop, pdone)
        b.position_at_end(pdone)
    iv, (slot,), accs, header, exit_ = pipe_loop.loop_header(
        kern, "wgmma.pipe", "wgmma.pipe.body", "wgmma.pipe.exit", start, stop, ivt, positive,
        named=[("slot", I32, _c(0))], carried=init.regs)
    mma_operands.wait_group(kern, S - 2)
    kern.barrier()
    wgmma_ops.fence_proxy_async(kern)
    image = b.add(base, slot)
    regs = issue(kern, plan, da, db, (da.base(kern, image),
                                      db.base(kern, b.add(image, _c(offs[1])))), list(accs), k,
                 fenced=True, wait=depth)
    last = _c((S - 1) * stage_bytes)
    wslot = b.select(b.icmp_unsigned("==", slot, _c(0)), last, b.sub(slot, _c(stage_bytes)))
    copy(iv, S - 1, b.add(base, wslot))
    nxt = b.add(slot, _c(stage_bytes))
    nxt = b.select(b.icmp_unsigned("==", nxt, _c(S * stage_bytes)), _c(0), nxt)
    tail = b.block
    iv.add_incoming(b.add(iv, step), tail)
    slot.add_incoming(nxt, tail)
    for p, r in zip(accs, regs):
        p.add_incoming(r, tail)
    b.branch(header)

    b.position_at_end(exit_)
    out = wgmma_ops.wait_group(kern, 0, list(accs))
    mma_operands.wait_group(kern, 0)
    kern.barrier()                       # the ring is free for the next user
    kern.env[op.results[0].id] = TileVal(init.dtype, plan.acc, tuple(out))
    remember_acc_layout(kern, plan.acc)


def _ahead_limit(kern: KernelEmitter, stop, step, ivt, s: int) -> ir.Value | None:
    """For a signed i32 loop variable: the i32 bound L, made before the loop, such that
    iteration iv + s * step exists iff step > 0 and iv < L: stop - s * step in i64, clamped
    below to the i32 minimum (no iv is below it). The loop's test is then one 32-bit compare
    instead of valid_ahead's 64-bit one (two SASS compares, repeated for each branch that
    uses it). None for other loop variables."""
    if not (ivt.signed and step.type == I32 and stop.type == I32):
        return None
    b = kern.builder
    lim = b.sub(b.sext(stop, I64), b.mul(b.sext(step, I64), ir.Constant(I64, s)))
    low = ir.Constant(I64, -2 ** 31)
    return b.trunc(b.select(b.icmp_signed("<", lim, low), low, lim), I32)


@record
class RingLoop:
    """A pipelined TMA + wgmma loop as emit_pipelined sets it up for `tma_loop` and
    `_ws_loop`: the loop, its plan (mma_pipeline.LoopPlan), the TMA operands
    (tma_load.plan_operands), the ring's 32-bit shared address, both operands' descriptors,
    K, the accumulator's initial value in the fragment layout, the loop's bounds and the
    helpers for iterations ahead (`iv_ahead(iv, s)`, `valid_ahead(iv, s)`)."""

    op: object
    lp: object
    tma: list
    base: ir.Value
    da: "Descriptors"
    db: "Descriptors"
    k: int
    init: TileVal
    start: ir.Value
    stop: ir.Value
    step: ir.Value
    ivt: object
    valid_ahead: Callable
    iv_ahead: Callable
    positive: ir.Value
    # another product on the same ring (tma_loop only; mma_pipeline.py's mma.sync ring on
    # sm_120a): mmas(image, accs) -> the new accumulator registers, and drain(accs) -> the
    # accumulator once the loop is left; None: wgmma's issue_mmas and wait_group 0
    mmas: Callable | None = None
    drain: Callable | None = None
    # a stage's mbarrier from its byte offset by one shift when the stage bytes are a power
    # of two (LLVM cannot tell the offset is a multiple of them, and emits a shift and a
    # mask): 5 SASS instructions less a K-step in sm_120a's matmul. The wgmma ring does not
    # ask for it yet (its PTX would change; likely the same gain)
    shift_bars: bool = False


def tma_loop(kern: KernelEmitter, ring: RingLoop) -> None:
    """The ring filled by TMA (lower/tensorcore/tma_load.py), one mbarrier per slot:

        setup:    barrier; thread 0 initializes the S mbarriers (count 1); barrier
        prologue: thread 0 issues iterations 0 .. S-2 (expect_tx of the stage's bytes, then
                  the bulk tensor copies), those that exist
        loop j:   wait for phase (j / S) mod 2 of slot j mod S's mbarrier; wgmma.fence; the
                  MMAs; commit; wgmma.wait_group 1; barrier (every warp group is done with
                  iteration j-1's slot); thread 0 issues iteration j+S-1 into that slot
        exit:     wgmma.wait_group 0; barrier; thread 0 invalidates the mbarriers; barrier
    An iteration past the end is not issued (so none is in flight at the exit). With a
    multicast plan (plan/loops.py, lower/tensorcore/tma_multicast.py) the cluster's CTA 0 copies the shared operands
    into every CTA once every CTA released the slot on CTA 0's empty mbarriers, and the
    setup's second barrier is a cluster barrier.
    """
    b = kern.builder
    ring_loop = ring
    op, lp, tma, base, da, db, k, init = (ring.op, ring.lp, ring.tma, ring.base, ring.da,
                                          ring.db, ring.k, ring.init)
    start, stop, step, ivt = ring.start, ring.stop, ring.step, ring.ivt
    valid_ahead, iv_ahead, positive = ring.valid_ahead, ring.iv_ahead, ring.positive
    plan, S = lp.plan, lp.stages
    stage_bytes = sum(lp.image_bytes)
    ring = S * stage_bytes
    iv_var = op.iv
    mc = lp.multicast
    if mc is not None:
        kern.stats.features.add("cluster")
    # inside an outer run-time loop (a persistent kernel's loop over output tiles) the ring
    # carries on from one run to the next: mbarriers of their own, initialized once, and the
    # consumer's stage and phase parity kept across runs (`_carried_state`)
    carried = mc is None and bool(kern.loops)
    if carried:
        bars = mma_sync.shared_address(kern, kern.kept_smem(8 * S, 8))
    else:
        bars = b.add(base, _c(ring))

    shift = ring_loop.shift_bars and stage_bytes & (stage_bytes - 1) == 0

    def bar(slot_bytes):           # slot (a byte offset) -> its mbarrier's address
        if shift and not isinstance(slot_bytes, int):
            # slot_bytes is a multiple of stage_bytes: (slot / stage) * 8 is one shift
            return b.add(bars, b.lshr(slot_bytes, _c(log2(stage_bytes) - 3)))
        idx = b.udiv(slot_bytes, _c(stage_bytes)) if not isinstance(slot_bytes, int) else \
            _c(slot_bytes // stage_bytes)
        return b.add(bars, b.shl(idx, _c(3)))

    def on_thread0(fn):
        pipe_loop.on_thread0(kern, "tma.t0", fn)

    empty = tma_multicast.empties(kern, bars, S, S * stage_bytes) if mc else None
    remote = tma_multicast.remote_empties(kern, mc, empty, S) if mc else None

    def issue(iv, s, image, slot_bytes, parity=None, valid=None):
        kern.env[iv_var.id] = TileVal(ivt, kern.scalar_layout, (iv,))
        env_iv = (iv_ahead(iv, s), iv_var, lp.scalars)
        if valid is None:
            valid = valid_ahead(iv, s)
        if mc is None:
            tma_load.issue_stage(kern, tma, env_iv, image, bar(slot_bytes), valid)
        else:                            # a refill (parity given) first frees the slot
            refill = None if parity is None else (b.add(bar(slot_bytes), _c(8 * S)), parity,
                                                  S, remote, empty)
            tma_multicast.issue_stage(kern, mc, tma, env_iv, image, bar(slot_bytes),
                                      valid, refill)

    kern.barrier()                       # earlier users of the shared buffer are done
    if carried:
        state = _carried_state(kern, op)
        first = kern.fn.append_basic_block("tma.init")
        ready = kern.fn.append_basic_block("tma.ready")
        b.cbranch(b.icmp_unsigned("==", b.load(state[2]), _c(0)), first, ready)
        b.position_at_end(first)         # the first run: thread 0 initializes, all see it
        on_thread0(lambda: [tma_load.mbarrier_init(kern, b.add(bars, _c(8 * i)), 1)
                            for i in range(S)])
        kern.barrier()
        b.store(_c(1), state[2])
        b.branch(ready)
        b.position_at_end(ready)
        slot0, phase0 = b.load(state[0]), b.load(state[1])
        for s in range(S - 1):
            sl = _ring_add(kern, slot0, s * stage_bytes, ring)
            issue(start, s, b.add(base, sl), sl)
    else:
        on_thread0(lambda: [tma_load.mbarrier_init(kern, b.add(bars, _c(8 * i)), 1)
                            for i in range(S)] + ([tma_multicast.init_empties(kern, mc, empty, S)]
                                                  if mc else []))
        if mc is None:
            kern.barrier()
        else:
            tma_multicast.cluster_sync(kern)
        slot0, phase0 = _c(0), _c(0)
        for s in range(S - 1):
            issue(start, s, b.add(base, _c(s * stage_bytes)), s * stage_bytes)
    ahead = _ahead_limit(kern, stop, step, ivt, S - 1)
    iv, (slot, phase), accs, header, exit_ = pipe_loop.loop_header(
        kern, "tma.pipe", "tma.pipe.body", "tma.pipe.exit", start, stop, ivt, positive,
        named=[("slot", I32, slot0), ("phase", I32, phase0)], carried=init.regs)
    tma_load.wait_parity(kern, bar(slot), phase)
    image = b.add(base, slot)
    if ring_loop.mmas is not None:
        regs = ring_loop.mmas(image, list(accs))
    else:
        regs = issue_mmas(kern, plan, da, db, image, lp.image_bytes[0], list(accs), k, wait=1)
    kern.barrier()
    last = (S - 1) * stage_bytes
    wslot = b.select(b.icmp_unsigned("==", slot, _c(0)), _c(last), b.sub(slot, _c(stage_bytes)))
    issue(iv, S - 1, b.add(base, wslot), wslot, phase if mc else None,
          None if ahead is None else b.and_(positive, b.icmp_signed("<", iv, ahead)))
    nxt = b.add(slot, _c(stage_bytes))
    wrap = b.icmp_unsigned("==", nxt, _c(S * stage_bytes))
    nxt = b.select(wrap, _c(0), nxt)
    tail = b.block
    iv.add_incoming(b.add(iv, step), tail)
    slot.add_incoming(nxt, tail)
    phase.add_incoming(b.xor(phase, b.zext(wrap, I32)), tail)
    for p, r in zip(accs, regs):
        p.add_incoming(r, tail)
    b.branch(header)

    b.position_at_end(exit_)
    out = ring_loop.drain(list(accs)) if ring_loop.drain is not None else \
        wgmma_ops.wait_group(kern, 0, list(accs))
    if carried:
        # nothing is in flight: the next run goes on from here; the images are the scratch
        # buffer's, whose next user (the epilogue, the next run's setup) passes a barrier
        # before writing it
        b.store(slot, state[0])
        b.store(phase, state[1])
    else:
        kern.barrier()
        on_thread0(lambda: [tma_load.mbarrier_inval(kern, b.add(bars, _c(8 * i)))
                            for i in range(S)] + ([tma_multicast.inval_empties(kern, mc, empty, S)]
                                                  if mc else []))
        kern.barrier()                   # the ring is free for the next user
    kern.env[op.results[0].id] = TileVal(init.dtype, plan.acc, tuple(out))
    remember_acc_layout(kern, plan.acc)


WS_PRODUCER_REGS = 40          # setmaxnreg of the producer warp group (it only issues TMA)


def _ws_loop(kern: KernelEmitter, ring: RingLoop) -> None:
    """The TMA ring of a warp-specialized block (plan/loops.py R5: P = 2^k threads of
    consumer warp groups, the layouts' threads, and one producer warp group after them):

        setup:    barrier; thread 0 initializes full[s] (count 1) and empty[s] (count P);
                  barrier
        producer: setmaxnreg.dec; its first thread, for every iteration j: wait for empty
                  slot j mod S's release of iteration j-S (j >= S), announce the stage's
                  bytes on full[j mod S] and copy iteration j into it; then the warp group
                  exits
        consumer: setmaxnreg.inc; for every j: wait for full[j mod S]'s phase; the MMAs;
                  commit; wgmma.wait_group 1 (iteration j-1's MMAs are done); every thread
                  arrives on empty[(j-1) mod S]; at the end wgmma.wait_group 0
    No barrier of the whole block runs in the loop. From the loop on only the consumers
    run: later barriers are named barriers of P threads (`kern.barrier_threads`). The
    registers move from the producer to the consumers: the block's .maxnreg is the even
    share of the register file, the producer keeps WS_PRODUCER_REGS and the consumers take
    the rest."""
    b = kern.builder
    op, lp, tma, base, da, db, k, init = (ring.op, ring.lp, ring.tma, ring.base, ring.da,
                                          ring.db, ring.k, ring.init)
    start, stop, step, ivt = ring.start, ring.stop, ring.step, ring.ivt
    valid_ahead, iv_ahead, positive = ring.valid_ahead, ring.iv_ahead, ring.positive
    plan, S = lp.plan, lp.stages
    stage_bytes = sum(lp.image_bytes)
    ring = S * stage_bytes
    P = kern.threads
    share = (65536 // kern.declared_threads) // 8 * 8
    consumer_regs = min(256, (share * kern.declared_threads - WS_PRODUCER_REGS * 128) // P
                        // 8 * 8)
    if not kern.stats.wgmma_unbounded:
        kern.stats.wgmma_acc_regs = share - 40      # contract.wgmma_maxnreg: `share`
    bars = b.add(base, _c(ring))
    iv_var = op.iv

    def full(slot):
        return b.add(bars, b.shl(b.udiv(slot, _c(stage_bytes)), _c(3)))

    def empty(slot):
        return b.add(full(slot), _c(8 * S))

    def setmaxnreg(kind, n):
        tma_load._asm(kern, f"setmaxnreg.{kind}.sync.aligned.u32 {n};", [], "~{memory}")

    def ring_loop(name, extra):
        """A loop over the iterations (iv, slot, parity and `extra` phis): returns
        (iv, slot, parity, extra phis, header block, exit block); the builder in the body."""
        iv, (slot, par), phis, header, exit_ = pipe_loop.loop_header(
            kern, f"{name}.loop", f"{name}.body", f"{name}.exit", start, stop, ivt, positive,
            named=[("slot", I32, _c(0)), ("parity", I32, _c(0))], carried=extra)
        return iv, slot, par, phis, header, exit_

    def latch(header, iv, slot, par, phis, vals):
        nxt = b.add(slot, _c(stage_bytes))
        wrap = b.icmp_unsigned("==", nxt, _c(ring))
        tail = b.block
        iv.add_incoming(b.add(iv, step), tail)
        slot.add_incoming(b.select(wrap, _c(0), nxt), tail)
        par.add_incoming(b.xor(par, b.zext(wrap, I32)), tail)
        for p, v in zip(phis, vals):
            p.add_incoming(v, tail)
        b.branch(header)

    kern.barrier()                       # earlier users of the shared buffer are done
    def init_bars():
        for i in range(S):
            tma_load.mbarrier_init(kern, b.add(bars, _c(8 * i)), 1)
            tma_load.mbarrier_init(kern, b.add(bars, _c(8 * (S + i))), P)
    pipe_loop.on_thread0(kern, "ws.init", init_bars)
    kern.barrier()
    producer = kern.fn.append_basic_block("ws.producer")
    consumer = kern.fn.append_basic_block("ws.consumer")
    b.cbranch(b.icmp_unsigned(">=", kern.tid, _c(P)), producer, consumer)

    # the producer warp group: one thread issues every stage, then the group exits
    b.position_at_end(producer)
    setmaxnreg("dec", WS_PRODUCER_REGS)
    lead = kern.fn.append_basic_block("ws.lead")
    gone = kern.fn.append_basic_block("ws.producer.done")
    b.cbranch(tma_load.issuer(kern, P), lead, gone)
    b.position_at_end(lead)
    count = _c(0)
    iv, slot, par, (j,), header, pexit = ring_loop("ws.produce", [count])
    # iteration j >= S refills a stage: wait for the consumers' release of iteration j - S,
    # the empty mbarrier's completion j / S - 1 (parity: one less than the full one's)
    wait = kern.fn.append_basic_block("ws.wait.empty")
    go_on = kern.fn.append_basic_block("ws.issue")
    b.cbranch(b.icmp_unsigned(">=", j, _c(S)), wait, go_on)
    b.position_at_end(wait)
    tma_load.wait_parity(kern, empty(slot), b.xor(par, _c(1)))
    b.branch(go_on)
    b.position_at_end(go_on)
    kern.env[iv_var.id] = TileVal(ivt, kern.scalar_layout, (iv,))
    true = ir.Constant(ir.IntType(1), 1)          # the leader's branch already
    tma_load.issue_stage(kern, tma, (iv, iv_var, lp.scalars), b.add(base, slot), full(slot),
                         true, leader=true)
    latch(header, iv, slot, par, [j], [b.add(j, _c(1))])
    b.position_at_end(pexit)
    b.branch(gone)
    b.position_at_end(gone)
    b.branch(kern.return_target)

    # the consumer warp groups
    b.position_at_end(consumer)
    setmaxnreg("inc", consumer_regs)
    iv, slot, par, phis, header, cexit = ring_loop(
        "ws.consume", list(init.regs) + [ir.Constant(ir.IntType(1), 0)])
    accs, started = phis[:-1], phis[-1]
    tma_load.wait_parity(kern, full(slot), par)
    image = b.add(base, slot)
    regs = issue_mmas(kern, plan, da, db, image, lp.image_bytes[0], list(accs), k, wait=1)
    # iteration j-1's MMAs are done: release its stage
    rel = kern.fn.append_basic_block("ws.release")
    cont = kern.fn.append_basic_block("ws.released")
    b.cbranch(started, rel, cont)
    b.position_at_end(rel)
    prev = b.select(b.icmp_unsigned("==", slot, _c(0)), _c(ring - stage_bytes),
                    b.sub(slot, _c(stage_bytes)))
    tma_load._asm(kern, "mbarrier.arrive.shared::cta.b64 _, [$0];", [empty(prev)],
                  "r,~{memory}")
    b.branch(cont)
    b.position_at_end(cont)
    latch(header, iv, slot, par, phis, list(regs) + [ir.Constant(ir.IntType(1), 1)])
    b.position_at_end(cexit)
    out = wgmma_ops.wait_group(kern, 0, list(accs))
    kern.barrier_threads = P
    kern.env[op.results[0].id] = TileVal(init.dtype, plan.acc, tuple(out))
    remember_acc_layout(kern, plan.acc)


def _carried_state(kern: KernelEmitter, op) -> tuple:
    """Three i32 slots in the kernel's entry block, zero there: the ring's consumer stage
    (byte offset), its phase parity and whether the mbarriers are initialized. LLVM promotes
    them to registers (phis through the outer loop)."""
    b = kern.builder
    here = b.block
    b.position_at_start(kern.entry)
    ptrs = tuple(b.alloca(I32, name=f"tma.ring.{n}") for n in ("slot", "phase", "ready"))
    for p in ptrs:
        b.store(_c(0), p)
    b.position_at_end(here)
    return ptrs


def _ring_add(kern: KernelEmitter, slot: ir.Value, d: int, ring: int) -> ir.Value:
    """(slot + d) mod ring for byte offsets with 0 <= d < ring."""
    b = kern.builder
    if not d:
        return slot
    nxt = b.add(slot, _c(d))
    return b.select(b.icmp_unsigned(">=", nxt, _c(ring)), b.sub(nxt, _c(ring)), nxt)


def issue_mmas(kern, plan, da, db, image, b_offset, regs, k, *, wait=None):
    """issue() between a `wgmma.fence` and a `commit_group` (one asm, with the wait)."""
    return issue(kern, plan, da, db, (da.base(kern, image),
                                      db.base(kern, kern.builder.add(image, _c(b_offset)))),
                 regs, k, fenced=True, wait=wait)
