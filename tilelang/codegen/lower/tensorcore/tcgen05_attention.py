"""Attention's output kept in tensor memory across the key loop (sm_100a; plan/loops.py R11,
plan/tmem_resident.py; docs/codegen.md, "Attention with S, P and O in tensor memory").

Inside the loop, the carried O is a *token* (a scalar placeholder the walker's phis pass
around for free): its f32 values live in TMEM columns o_column .. o_column + D - 1, thread
32w + l owning lane 32w + l (row 32w + l, tc5_acc_layout). The walker calls

    enter   before the loop: tcgen05.st of O's initial value (unless the previous loop left
            it there), the token in its place;
    product for P's `mma(a, v, O * f)`: O *= f on TMEM (per warp, skipped when f is 1 for
            all its rows), `a` packed two 16-bit elements a word and stored over the first
            K / 2 columns, V's image in shared memory, one thread issuing
            tcgen05.mma [O], [P], V-desc (the "ts" form) and the commit, every thread waiting;
    leave   after the loop: tcgen05.ld of O (unless the next loop takes it over in TMEM).
The rescale `O * f` itself emits nothing (walk.emit_builtin binds the token): the product
does it on TMEM.
"""

from __future__ import annotations

import llvmlite.ir as ir

from tilelang.codegen.emit.kernel import I32, KernelEmitter, TileVal
from tilelang.codegen.layouts.distributed import drop_axes
from tilelang.codegen.lower.tensorcore import mma_operands, mma_sync, pipe_loop, wgmma_ops
from tilelang.codegen.lower.tensorcore import tcgen05_tmem as tmem
from tilelang.codegen.lower.tensorcore.mma_epilogue import remember_acc_layout
from tilelang.codegen.lower.tensorcore.mma_plan import image_span, tensor_core_plan, to_layout
from tilelang.codegen.lower.tensorcore.tcgen05_product import (LD_CHUNK, _const, commit,
                                                               descriptors, instr_descriptor,
                                                               lane_quarter, tmem_io)
from tilelang.codegen.lower.tensorcore.wgmma_product import (Descriptors, align_smem,
                                                             fill_images, kept_image,
                                                             place_image, register_cax)

from tilelang.codegen.plan.tensor_cores import tc5_acc_layout
from tilelang.codegen.plan.tmem_resident import TmemResident
from tilelang.sema.types import F32

RESCALE_CHUNK = 32          # O's columns per tcgen05.ld / st of the rescale (32 registers)
_void = tmem.void


def _c(v: int) -> ir.Constant:
    return ir.Constant(I32, v)


def token(kern: KernelEmitter) -> TileVal:
    """The placeholder the loop carries for O (its values are in TMEM)."""
    return TileVal(F32, kern.scalar_layout, (ir.Constant(ir.FloatType(), 0.0),))


def _o_lanes(kern: KernelEmitter, r: TmemResident) -> ir.Value:
    return lane_quarter(kern, kern.builder.add(kern.tmem.address, _c(r.o_column)))


def enter(kern: KernelEmitter, r: TmemResident, init: list[TileVal]) -> list[TileVal]:
    """Before the loop: O's initial value into its columns; the token carried instead."""
    init = list(init)
    if not r.init_in_tmem:
        o = to_layout(kern, init[r.index], tc5_acc_layout((128, r.d)))
        tmem_io(kern, _o_lanes(kern, r), list(o.regs), r.d)
    init[r.index] = token(kern)
    return init


def leave(kern: KernelEmitter, r: TmemResident, results) -> None:
    """After the loop: O read back into registers (tc5_acc_layout), unless the next
    resident loop starts from it in TMEM."""
    if r.result_in_tmem:
        return
    _void(kern, "tcgen05.fence::after_thread_sync;")
    regs = tmem_io(kern, _o_lanes(kern, r), None, r.d)
    _void(kern, "tcgen05.fence::before_thread_sync;")
    lay = tc5_acc_layout((128, r.d))
    remember_acc_layout(kern, lay)
    res = results[r.index]
    kern.env[res.id] = TileVal(res.type.dtype, lay, tuple(regs))


def _st_words(kern: KernelEmitter, taddr: ir.Value, words: list) -> None:
    """tcgen05.st.32x32b of this thread's 32-bit `words` (column j: word j), then the wait."""
    for c0 in range(0, len(words), LD_CHUNK):
        w = min(LD_CHUNK, len(words) - c0)      # K is a power of two (tile shapes are)
        addr = kern.builder.add(taddr, _c(c0)) if c0 else taddr
        names = ", ".join(f"${i + 1}" for i in range(w))
        _void(kern, f"tcgen05.st.sync.aligned.32x32b.x{w}.b32 [$0], {{{names}}};",
              [addr] + list(words[c0:c0 + w]), ",".join(["r"] + ["r"] * w))
    _void(kern, "tcgen05.wait::st.sync.aligned;")


def _packed(kern: KernelEmitter, p: TileVal) -> list:
    """P's registers (one row, column j in register j) two to a word: column 2c in the low
    half of word c, as the ts form reads A (K = 16 is 8 columns)."""
    b = kern.builder
    i16 = ir.IntType(16)
    out = []
    for j in range(0, len(p.regs), 2):
        lo, hi = (b.zext(b.bitcast(x, i16), I32) for x in p.regs[j:j + 2])
        out.append(b.or_(lo, b.shl(hi, _c(16))))
    return out


def _converted(kern: KernelEmitter, x: TileVal, dtype: str) -> list:
    """`_packed` of astype(x, dtype) for f32 `x`: one cvt.rn.{f16x2,bf16x2}.f32 a word (the
    same round-to-nearest-even as astype's, column 2c in the low half)."""
    f32 = ir.FloatType()
    asm = ir.InlineAsm(ir.FunctionType(I32, [f32, f32]), f"cvt.rn.{dtype}x2.f32 $0, $1, $2;",
                       "=r,f,f")
    return [kern.builder.call(asm, [x.regs[j + 1], x.regs[j]])
            for j in range(0, len(x.regs), 2)]


def _all_one(kern: KernelEmitter, f: ir.Value) -> ir.Value:
    """Whether the rescale factor is exactly 1 in every thread of the warp (vote.sync.all)."""
    b = kern.builder
    one = b.fcmp_ordered("==", f, ir.Constant(ir.FloatType(), 1.0))
    vote = kern.module.globals.get("llvm.nvvm.vote.all.sync") or ir.Function(
        kern.module, ir.FunctionType(ir.IntType(1), [I32, ir.IntType(1)]),
        "llvm.nvvm.vote.all.sync")
    return b.call(vote, [ir.Constant(I32, 0xFFFFFFFF), one])


def _rescale(kern: KernelEmitter, r: TmemResident, f: ir.Value) -> None:
    """O *= f in TMEM, 32 columns at a time; a warp whose 32 rows all have f = 1 skips it
    (x * 1.0 is x for every f32, NaN included: the same bits as rescaling)."""
    b = kern.builder
    then = kern.fn.append_basic_block("tc5.rescale")
    after = kern.fn.append_basic_block("tc5.rescale.end")
    b.cbranch(_all_one(kern, f), after, then)
    b.position_at_end(then)
    lanes = _o_lanes(kern, r)
    chunk = min(RESCALE_CHUNK, r.d)     # D is a power of two (R4's N)
    for c0 in range(0, r.d, chunk):
        addr = b.add(lanes, _c(c0)) if c0 else lanes
        regs = tmem_io(kern, addr, None, chunk)
        tmem_io(kern, addr, [b.fmul(x, f) for x in regs], chunk)
    b.branch(after)
    b.position_at_end(after)


def scores(kern: KernelEmitter, op, a, b) -> TileVal:
    """S = `a @ b` into TMEM columns 0 .. N - 1 from a zero accumulator (R11's `scores`):
    no tcgen05.st of the zeros, the first k-step's enable-input-d false; then tcgen05.ld."""
    kern.require_exact()
    kern.stats.features.add("tcgen05")
    plan = tensor_core_plan(kern, op)
    t = plan.tc5
    shapes = [tuple(x.shape) for x in (a, b)]     # a deferred load's: its viewed shape
    k = shapes[0][-1]
    itemsize = plan.form.itemsize
    sops, sources, offsets, offset = [], [], [], 0
    kept = None
    if isinstance(a, TileVal):          # Q: an image of its own, filled before the loop
        cax = register_cax(shapes[0], 1, itemsize)
        kept = kept_image(kern, a, lambda base: mma_sync.SmemOperand(
            base, shapes[0], cax, itemsize, image_span(shapes[0][cax], itemsize)))
    for i, (x, shape, k_axis) in enumerate(((a, shapes[0], 1), (b, shapes[1], 0))):
        if i == 0 and kept is not None:
            sops.append(kept[0])
            sources.append(None)
            offsets.append(None)
            continue
        sop, x, nbytes = place_image(kern, x, shape, k_axis, itemsize, offset)
        sops.append(sop)
        sources.append(x)
        offsets.append(offset)
        offset += nbytes
    align_smem(kern)
    kern.barrier()                      # earlier users of the scratch buffer are done
    scratch = next(s.base for s, x in zip(sops, sources) if x is not None)
    smem32 = mma_sync.shared_address(kern, scratch)
    tm = kern.tmem
    fill_images(kern, sources, sops, offsets, smem32)
    wgmma_ops.fence_proxy_async(kern)
    tmem.thread_sync(kern)              # the images are written; earlier TMEM reads done
    da, db, idesc = descriptors(plan, sops)
    bld = kern.builder
    addr = [kept[1] if i == 0 and kept is not None else
            (bld.add(smem32, _c(offsets[i])) if offsets[i] else smem32) for i in range(2)]

    def issue():
        starts = (da.base(kern, addr[0]), db.base(kern, addr[1]))
        for k0 in range(0, k, t.k):
            pa = da.at(kern, starts[0], da.offset(0, 0, k0) >> 4)
            pb = db.at(kern, starts[1], db.offset(0, 0, k0) >> 4)
            _void(kern, "{ .reg .pred p; setp.ne.b32 p, $4, 0; "
                        "tcgen05.mma.cta_group::1.kind::f16 [$0], $1, $2, $3, p; }",
                  [tm.address, pa, pb, _c(idesc), _c(int(k0 > 0))], "r,l,l,r,r")
        commit(kern, tm.bar)

    pipe_loop.on_thread0(kern, "tc5.mma.s", issue)
    tmem.wait(kern)
    _void(kern, "tcgen05.fence::after_thread_sync;")
    regs = tmem_io(kern, lane_quarter(kern, tm.address), None, t.n)
    _void(kern, "tcgen05.fence::before_thread_sync;")
    remember_acc_layout(kern, plan.acc)
    return TileVal(op.result.type.dtype, plan.acc, tuple(regs))


def product(kern: KernelEmitter, r: TmemResident, op, a, v) -> TileVal:
    """P's product `mma(a, v, O * f)` with O in TMEM (module docstring); returns the token."""
    kern.require_exact()
    kern.stats.features.add("tcgen05")
    plan = tensor_core_plan(kern, op)
    assert plan is not None and plan.tc5 is not None and plan.tc5.m == 128, "R11 plans it"
    bld = kern.builder
    tm = kern.tmem
    a = mma_operands.materialize(kern, a) if isinstance(a, mma_operands.DeferredLoad) else a
    k = a.shape[-1]
    if r.p_source is not None:          # P = astype(x, T): packed from x's f32 directly
        x = to_layout(kern, kern.env[r.p_source], tc5_acc_layout((128, k)))
        words = _converted(kern, x, a.dtype.name)
    else:
        words = _packed(kern, to_layout(kern, a, tc5_acc_layout((128, k))))
    _st_words(kern, lane_quarter(kern, tm.address), words)
    if r.rescale is not None:           # after P's store: P's f32 registers are dead by then
        f = kern.env[r.factor]
        f = to_layout(kern, f, drop_axes(tc5_acc_layout((128, r.d)), (1,), True))
        _rescale(kern, r, f.regs[0])
    shape = tuple(v.shape)
    sop, src, _ = place_image(kern, v, shape, 0, plan.form.itemsize, 0)
    align_smem(kern)
    kern.barrier()                      # earlier users of the scratch buffer are done
    smem32 = mma_sync.shared_address(kern, sop.base)
    fill_images(kern, [src], [sop], [0], smem32)
    wgmma_ops.fence_proxy_async(kern)   # the image (generic proxy) is read by the MMAs
    tmem.thread_sync(kern)              # every warp's P and rescaled O are in TMEM
    b_mn = sop.cax != 0
    db = Descriptors(sop, False, b_mn, _const(sop, b_mn), _c(0))
    idesc = instr_descriptor(plan, False, b_mn)
    o_addr = bld.add(tm.address, _c(r.o_column))

    def issue():
        start = db.base(kern, smem32)
        for k0 in range(0, k, plan.tc5.k):
            pb = db.at(kern, start, db.offset(0, 0, k0) >> 4)
            pa = bld.add(tm.address, _c(k0 // 2)) if k0 else tm.address
            _void(kern, "{ .reg .pred p; setp.ne.b32 p, 1, 0; "
                        "tcgen05.mma.cta_group::1.kind::f16 [$0], [$1], $2, $3, p; }",
                  [o_addr, pa, pb, _c(idesc)], "r,r,l,r")
        commit(kern, tm.bar)

    pipe_loop.on_thread0(kern, "tc5.mma.ts", issue)
    tmem.wait(kern)
    _void(kern, "tcgen05.fence::after_thread_sync;")
    return token(kern)
