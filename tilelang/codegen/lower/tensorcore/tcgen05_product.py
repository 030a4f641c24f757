"""Matrix products with tcgen05 (sm_100a): the accumulator in tensor memory (TMEM), operands
in the swizzled shared-memory images of warp-group MMA (the canonical layouts are the same;
only the descriptor's version bits differ), one thread issuing the MMAs and
`tcgen05.commit` signalling their completion on an mbarrier. docs/codegen.md, "sm_100a".

One product outside a pipelined loop (plan/tensor_cores.py R4: M = 128, a block of four
warps; tcgen05_pipeline.py is the loop's ring), in the kernel's tensor memory and with its
completion mbarrier (tcgen05_tmem.py):

    barrier; the operands into their images (cp.async for a deferred load, else stores from
    registers); fence.proxy.async
    every warp: tcgen05.st of its 32 accumulator rows (32x32b: thread 32w + l owns TMEM lane
    32w + l, register j column j); tcgen05.wait::st; fences around a barrier
    thread 0: one tcgen05.mma.cta_group::1.kind::<kind> per k-step (32 bytes of each row:
    K = 16 for f16/bf16, 8 for tf32, 32 for the 8-bit kinds); tcgen05.commit to the mbarrier
    every thread: wait for the mbarrier's next phase; tcgen05.fence::after_thread_sync;
    tcgen05.ld of its rows; tcgen05.wait::ld; tcgen05.fence::before_thread_sync

The accumulator comes back in tc5_acc_layout (one row per thread), which the epilogue stores
like any other layout.
"""

from __future__ import annotations

import llvmlite.ir as ir

from tilelang.codegen.emit.kernel import I32, KernelEmitter, TileVal
from tilelang.codegen.lower.tensorcore import (mma_sync, pipe_loop, tcgen05_scaled,
                                               tcgen05_tmem as tmem, wgmma_ops)
from tilelang.codegen.lower.tensorcore.mma_block_scale import store_rows
from tilelang.codegen.lower.tensorcore.mma_epilogue import remember_acc_layout
from tilelang.codegen.lower.tensorcore.mma_plan import TensorCorePlan, to_layout
from tilelang.codegen.plan.tensor_cores import TC5_THREADS, tc5_mn
from tilelang.codegen.lower.tensorcore.wgmma_product import (Descriptors, align_smem,
                                                             fill_images, place_image)

SM100_VERSION = 1 << 46       # the tcgen05 descriptor's fixed bits 46-48 = 0b001
LD_CHUNK = 128                # the widest tcgen05.ld/st shape: 32x32b.x128


def _c(v: int) -> ir.Constant:
    return ir.Constant(I32, v)


_void = tmem.void


# the instruction descriptor's A / B type codes (bits 7-9, 10-12) and D type (bits 4-5) of
# the dense kinds (PTX ISA, tcgen05 "Instruction descriptor"), by the operand class
# (layouts/mma.MmaForm.ab, mma_form's b_class) and the accumulator dtype
IDESC_AB = {"f16": 0, "bf16": 1,            # .kind::f16
            "tf32": 2,                      # .kind::tf32
            "e4m3": 0, "e5m2": 1,           # .kind::f8f6f4
            "u8": 0, "s8": 1}               # .kind::i8
IDESC_D = {"f16": 0, "f32": 1, "i32": 2}


def instr_descriptor(plan: TensorCorePlan, a_mn: bool, b_mn: bool, pair: bool = False) -> int:
    """The dense kinds' instruction descriptor (PTX ISA, tcgen05 "Instruction descriptor"):
    D type (bits 4-5: f32 1, s32 2), A and B types (7-9, 10-12: IDESC_AB), A / B MN-major
    (15, 16), N >> 3 (17-22), M >> 4 (24-28); a CTA pair's M is both CTAs' rows."""
    t = plan.tc5
    m = 2 * t.m if pair else t.m
    return IDESC_D[plan.form.acc] << 4 | IDESC_AB[plan.form.ab] << 7 | \
        IDESC_AB[plan.b_class] << 10 | int(a_mn) << 15 | int(b_mn) << 16 | \
        (t.n >> 3) << 17 | (m >> 4) << 24


def acc_type(plan: TensorCorePlan) -> ir.Type:
    """The registers of the accumulator's 32-bit TMEM cells: f32, or i32 for kind::i8."""
    return I32 if plan.form.acc == "i32" else ir.FloatType()


def tmem_io(kern: KernelEmitter, taddr: ir.Value, regs: list | None, n: int,
            m: int = 128, ty: ir.Type | None = None) -> list:
    """tcgen05.ld (regs None) or tcgen05.st of this thread's 32-bit columns of an M x `n`
    accumulator at `taddr` (tc5_acc_layout: M = 128 in chunks of LD_CHUNK columns of the
    32x32b shape; M = 64 in one 16x32bx2 of n / 2 columns split at n / 2), then the
    matching wait. The registers are f32, or `ty` (i32: acc_type), or the type of `regs`."""
    b = kern.builder
    rty = ty or (regs[0].type if regs else ir.FloatType())
    reg = "r" if isinstance(rty, ir.IntType) else "f"
    out = []
    shape, split = ("32x32b", "") if m == 128 else ("16x32bx2", f", {n // 2}")
    per = n if m == 128 else n // 2
    for c0 in range(0, per, LD_CHUNK):
        w = min(LD_CHUNK, per - c0)
        addr = b.add(taddr, _c(c0)) if c0 else taddr
        if regs is None:
            names = ", ".join(f"${i}" for i in range(w))
            sty = ir.LiteralStructType([rty] * w)
            text = f"tcgen05.ld.sync.aligned.{shape}.x{w}.b32 {{{names}}}, [${w}]{split};"
            cons = ",".join([f"={reg}"] * w + ["r"])
            asm = ir.InlineAsm(ir.FunctionType(sty, [I32]), text, cons, side_effect=True)
            res = b.call(asm, [addr])
            out += [b.extract_value(res, i) for i in range(w)]
        else:
            names = ", ".join(f"${i + 1}" for i in range(w))
            _void(kern, f"tcgen05.st.sync.aligned.{shape}.x{w}.b32 [$0]{split}, "
                        f"{{{names}}};",
                  [addr] + list(regs[c0:c0 + w]), ",".join(["r"] + [reg] * w))
    if regs is None:
        # the wait and the values: tied through an asm that passes them on, so no use of a
        # value is scheduled above the wait
        names = ", ".join(f"${i}" for i in range(len(out)))
        sty = ir.LiteralStructType([rty] * len(out))
        cons = ",".join([f"={reg}"] * len(out) + [str(i) for i in range(len(out))])
        asm = ir.InlineAsm(ir.FunctionType(sty, [rty] * len(out)),
                           "tcgen05.wait::ld.sync.aligned;", cons, side_effect=True)
        res = b.call(asm, out)
        return [b.extract_value(res, i) for i in range(len(out))]
    _void(kern, "tcgen05.wait::st.sync.aligned;")
    return []


def product(kern: KernelEmitter, plan: TensorCorePlan, a, b, acc: TileVal,
            scales: tuple[TileVal, TileVal] | None = None) -> TileVal:
    """acc + a @ b on tcgen05; `a`, `b`: TileVals or DeferredLoads; `scales`: a
    block-scaled product's (a_scale, b_scale) (plan.scaled: tcgen05_scaled.py)."""
    kern.require_exact()
    kern.stats.features.add("tcgen05")
    form, t = plan.form, plan.tc5
    acc = to_layout(kern, acc, plan.acc)
    bld = kern.builder
    shapes = [tuple(x.shape) for x in (a, b)]
    k = shapes[0][-1]
    sops, sources, offsets, offset = [], [], [], 0
    # packed FP4's nibble pairs run along K: its kinds read K-major images only
    mn = tc5_mn(form.itemsize) and not (scales is not None and plan.scaled.per_byte == 2)
    for x, shape, k_axis in ((a, shapes[0], 1), (b, shapes[1], 0)):
        sop, x, nbytes = place_image(kern, x, shape, k_axis, form.itemsize, offset, mn)
        sops.append(sop)
        sources.append(x)
        offsets.append(offset)
        offset += nbytes
    if scales is not None:
        scale_bases, _ = tcgen05_scaled.place(kern, scales, offset)
    align_smem(kern)
    kern.barrier()                      # earlier users of the scratch buffer are done
    smem32 = mma_sync.shared_address(kern, sops[0].base)
    tm = kern.tmem
    fill_images(kern, sources, sops, offsets, smem32)
    wgmma_ops.fence_proxy_async(kern)   # the images (generic proxy) are read by the MMAs
    mine = lane_quarter(kern, tm.address)
    if scales is not None:
        for x, base in zip(scales, scale_bases):
            store_rows(kern, x, base)
        kern.barrier()                  # every scale byte is written
        tcgen05_scaled.write(kern, plan, scales, scale_bases, mine)
    tmem_io(kern, mine, list(acc.regs), t.n, t.m)
    tmem.thread_sync(kern)
    da, db, idesc = descriptors(plan, sops)
    if scales is not None:
        def scaled_mmas():
            tcgen05_scaled.issue(kern, plan, da, db, tm.address, smem32,
                                 b_offset=offsets[1], k=k)
            commit(kern, tm.bar)
        pipe_loop.on_thread0(kern, "tc5.mma", scaled_mmas)
    else:
        pipe_loop.on_thread0(kern, "tc5.mma", lambda: issue_mmas(
            kern, da, db, idesc, tm.address, smem32, b_offset=offsets[1], k=k, kstep=t.k,
            bar=tm.bar, kind=t.kind))
    tmem.wait(kern)
    _void(kern, "tcgen05.fence::after_thread_sync;")
    regs = tmem_io(kern, mine, None, t.n, t.m, acc_type(plan))
    # the next product's tcgen05.st must not overwrite what a slower warp still reads
    _void(kern, "tcgen05.fence::before_thread_sync;")
    remember_acc_layout(kern, plan.acc)
    return TileVal(acc.dtype, plan.acc, tuple(regs))


def lane_quarter(kern: KernelEmitter, taddr: ir.Value) -> ir.Value:
    """The TMEM address of this warp's lanes: warp w reads and writes lanes 32(w mod 4) ..
    32(w mod 4) + 31 (the lane is the address's high half; a warp past the fourth, in a
    block with a producer and an MMA warp, replicates warp w mod 4 outside their ring)."""
    b = kern.builder
    if kern.declared_threads == TC5_THREADS:
        return b.add(taddr, b.shl(b.lshr(kern.tid, _c(5)), _c(21)))
    return b.add(taddr, b.and_(b.shl(kern.tid, _c(16)), _c(3 << 21)))


def descriptors(plan: TensorCorePlan, sops, pair: bool = False) -> tuple:
    """(A's Descriptors, B's, the instruction descriptor) for the operand images `sops`
    (K-major unless the image's rows run along M / N: the MN-major bits)."""
    a_mn, b_mn = sops[0].cax != 1, sops[1].cax != 0
    da = Descriptors(sops[0], True, a_mn, _const(sops[0], a_mn), _c(0))
    db = Descriptors(sops[1], False, b_mn, _const(sops[1], b_mn), _c(0))
    # a block-scaled product's descriptor changes per k-step (tcgen05_scaled.py)
    idesc = instr_descriptor(plan, a_mn, b_mn, pair) if plan.scaled is None else 0
    return da, db, idesc


def issue_mmas(kern: KernelEmitter, da: Descriptors, db: Descriptors, idesc: int,
               taddr: ir.Value, image: ir.Value, *, b_offset: int, k: int, kstep: int,
               bar: ir.Value, pair: bool = False, kind: str = "f16",
               mask: ir.Value | None = None) -> None:
    """The issuing thread's tcgen05.mma.kind::`kind` per k-step (accumulating into TMEM at
    `taddr`) over the images at 32-bit shared address `image` (B `b_offset` bytes past A), then
    tcgen05.commit to the mbarrier `bar`. `pair`: the CTA pair's products (cta_group::2),
    committed to `bar`'s offset in both CTAs; `mask` (i16): committed to `bar`'s offset in
    each CTA it names (a multicast ring's release, tcgen05_ws.py)."""
    bld = kern.builder
    group = "cta_group::2" if pair else "cta_group::1"
    starts = (da.base(kern, image), db.base(kern, bld.add(image, _c(b_offset))))
    for k0 in range(0, k, kstep):
        pa = da.at(kern, starts[0], da.offset(0, 0, k0) >> 4)
        pb = db.at(kern, starts[1], db.offset(0, 0, k0) >> 4)
        _void(kern, "{ .reg .pred p; setp.ne.b32 p, 1, 0; "
                    f"tcgen05.mma.{group}.kind::{kind} [$0], $1, $2, $3, p; }}",
              [taddr, pa, pb, _c(idesc)], "r,l,l,r")
    commit(kern, bar, pair, mask)


def commit(kern: KernelEmitter, bar: ir.Value, pair: bool = False,
           mask: ir.Value | None = None) -> None:
    """tcgen05.commit of the thread's MMAs to the mbarrier `bar` (a CTA pair's: to `bar`'s
    offset in both CTAs, mask 0b11; with `mask`, an i16: in each CTA it names)."""
    if mask is not None:
        _void(kern, "tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster."
                    "multicast::cluster.b64 [$0], $1;", [bar, mask], "r,h")
        return
    if not pair:
        _void(kern, "tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 "
                    "[$0];", [bar], "r")
        return
    _void(kern, "tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster."
                "multicast::cluster.b64 [$0], $1;", [bar, ir.Constant(ir.IntType(16), 3)],
          "r,h")


def _const(sop: mma_sync.SmemOperand, trans: bool) -> int:
    """The descriptor's fields other than the start address (the images' LBO / SBO and
    swizzle as for wgmma, whose layout-type values at bits 62-63 are tcgen05's at 61-63),
    with tcgen05's version bits."""
    lbo = sop.panel_bytes if trans else 16
    return wgmma_ops.descriptor_const(lbo, 8 * sop.span, sop.span) | SM100_VERSION
