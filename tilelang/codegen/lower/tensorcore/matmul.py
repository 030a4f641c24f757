"""Matrix products `mma(a, b, acc)` and `matmul(a, b)` (`@`).

On sm_80 and newer, operand dtypes with a tensor-core form (f16, bf16, tf32, i8/u8, f8 on
sm_89+; layouts/mma.py) go through `mma.sync` (lower/tensorcore/mma_sync.py): operands in swizzled shared
memory, ldmatrix fragments, the accumulator in the instruction's fragment layout. Everything
else (f32/f64 products, older targets, tiles smaller than one warp tile) takes the FMA path:

a and b are staged in shared memory (emit.sync.stage); each thread then computes the
accumulator elements its layout gives it, walking K with one fused multiply-add per step
(floats: products of the operands converted to f32, accumulated in f32 and rounded once to the
accumulator dtype; integers: i32 multiply-add, wrapping). Batched (B, M, K) @ (B, K, N) tiles
work the same way with the batch coordinate in the addresses.
"""

from __future__ import annotations

from math import prod

import llvmlite.ir as ir

from tilelang.codegen.emit.kernel import I32, KernelEmitter, TileVal
from tilelang.codegen.emit.sync import _padded_ir, stage
from tilelang.codegen.lower.tensorcore import (mma_block_scale, mma_operands, mma_sync,
                                               tcgen05_attention, tcgen05_product,
                                               wgmma_product)
from tilelang.codegen.lower.tensorcore.mma_epilogue import remember_acc_layout
from tilelang.codegen.lower.tensorcore.cp_async import Stream
from tilelang.codegen.lower.tensorcore.mma_plan import TensorCorePlan, tensor_core_plan, to_layout
from tilelang.codegen.lower.table import lowers
from tilelang.ir.ops import BuiltinOp
from tilelang.sema.types import F32, DType


def _product(kern: KernelEmitter, a: TileVal, b: TileVal, acc: TileVal, out: DType) -> TileVal:
    O = acc.layout
    rank = O.rank
    K, N = a.shape[-1], b.shape[-1]
    M = a.shape[-2]
    pa, pb = stage(kern, [a, b])
    bld, se = kern.builder, kern.se
    comp = F32 if out.is_float else out

    def lin_a(c):   # (batch..., m) -> row start in a
        batch = c[0] if rank == 3 else 0
        return (batch * M + c[-2]) * K

    def lin_b(c):   # (batch..., n) -> column in b (row 0)
        batch = c[0] if rank == 3 else 0
        return batch * K * N + c[-1]

    ta = kern.thread_linear(tuple(lin_a(bs) for bs in O.thread_bases))
    tb = kern.thread_linear(tuple(lin_b(bs) for bs in O.thread_bases))
    coords = [O.reg_coord(r) for r in range(O.num_regs)]
    init = [acc.regs[r] if acc.dtype == comp else se.cast(acc.regs[r], acc.dtype, comp)
            for r in range(O.num_regs)]
    # One loop over K (not unrolled here: a 128x128x64 tile would be 8,192 FMAs per thread and
    # minutes of LLVM time). Each step loads every distinct row of a and column of b this
    # thread needs once, then does one FMA per accumulator register (an outer product).
    fn = bld.function
    pre, head = bld.block, fn.append_basic_block("mma.k")
    done = fn.append_basic_block("mma.done")
    bld.branch(head)
    bld.position_at_end(head)
    k = bld.phi(I32, "k")
    k.add_incoming(ir.Constant(I32, 0), pre)
    phis = []
    for v in init:
        p = bld.phi(v.type)
        p.add_incoming(v, pre)
        phis.append(p)
    kn = bld.mul(k, ir.Constant(I32, N))
    rows, cols = {}, {}
    for rc in coords:
        la, lb = lin_a(rc), lin_b(rc)
        if la not in rows:
            ia = _padded_ir(kern, bld.add(bld.add(ta, ir.Constant(I32, la)), k))
            x = kern.from_storage(bld.load(bld.gep(pa, [ia])), a.dtype)
            rows[la] = x if a.dtype == comp else se.cast(x, a.dtype, comp)
        if lb not in cols:
            ib = _padded_ir(kern, bld.add(bld.add(tb, ir.Constant(I32, lb)), kn))
            y = kern.from_storage(bld.load(bld.gep(pb, [ib])), b.dtype)
            cols[lb] = y if b.dtype == comp else se.cast(y, b.dtype, comp)
    new = []
    for rc, s in zip(coords, phis):
        x, y = rows[lin_a(rc)], cols[lin_b(rc)]
        new.append(se.fma(x, y, s) if comp.is_float else bld.add(bld.mul(x, y), s))
    k1 = bld.add(k, ir.Constant(I32, 1))
    tail = bld.block
    k.add_incoming(k1, tail)
    for p, v in zip(phis, new):
        p.add_incoming(v, tail)
    bld.cbranch(bld.icmp_signed("<", k1, ir.Constant(I32, K)), head, done)
    bld.position_at_end(done)
    regs = [v if comp == out else se.cast(v, comp, out) for v in new]
    return TileVal(out, O, tuple(regs))


# ---------------------------------------------------------------------------------------------
# Tensor cores

def _tensor_core(kern: KernelEmitter, plan: TensorCorePlan, a, b, acc: TileVal,
                 scales: tuple[TileVal, TileVal] | None = None) -> TileVal:
    """`a`, `b`: TileVals or DeferredLoads (lower/tensorcore/mma_operands.py); `scales`:
    a block-scaled product's (a_scale, b_scale) (plan.scaled)."""
    if plan.tc5 is not None:
        return tcgen05_product.product(kern, plan, a, b, acc, scales)
    if plan.wg is not None:
        return wgmma_product.product(kern, plan, a, b, acc)
    kern.require_exact()
    # mma.sync's copies take a load's own tile only: a viewed one goes through registers
    a, b = (mma_operands.materialize(kern, x) if getattr(x, "chain", ()) else x for x in (a, b))
    form = plan.form
    kern.stats.features.add("mma_block_scale" if plan.scaled is not None else
                            "mma_f8" if form.ab in ("e4m3", "e5m2") else "mma_sync")
    acc = to_layout(kern, acc, plan.acc)
    rank = acc.layout.rank
    shapes = [tuple(x.op.result.type.shape) if isinstance(x, mma_operands.DeferredLoad)
              else x.shape for x in (a, b)]
    k = shapes[0][-1]
    sixteen = form.itemsize == 2
    ops, sources, offsets, offset = [], [], [], 0
    for x, shape, k_axis in ((a, shapes[0], rank - 1), (b, shapes[1], rank - 2)):
        cax = None
        if isinstance(x, mma_operands.DeferredLoad):
            cax = mma_operands.async_axis(kern, x, k_axis, form.itemsize)
            if cax is None:
                x = mma_operands.materialize(kern, x)
        if cax is None:
            cax = mma_sync.choose_cax(x, k_axis, sixteen)
        nbytes = prod(shape) * form.itemsize
        base = kern.smem(nbytes, ir.IntType(8), offset)
        ops.append(mma_sync.SmemOperand(base, shape, cax, form.itemsize))
        sources.append(x)
        offsets.append(offset)
        offset += -(-nbytes // 16) * 16
    scale_bases = []
    for t in scales or ():
        scale_bases.append(kern.smem(prod(t.shape), ir.IntType(8), offset))
        offset += -(-prod(t.shape) // 16) * 16
    kern.barrier()
    for i, (t, base) in enumerate(zip(scales or (), scale_bases)):
        flip = i == 1 and mma_block_scale.transposed_b(plan.scaled)    # b_scale of FP4
        mma_block_scale.store_rows(kern, t, base, transposed=flip)
    copies = False
    smem32 = mma_sync.shared_address(kern, ops[0].base)
    for x, sop, off in zip(sources, ops, (0, offsets[1])):
        if isinstance(x, mma_operands.DeferredLoad):
            Stream(kern, x, sop.cax, sop.itemsize, off).issue(None, smem32, None)
            copies = True
        else:
            mma_sync.fill_from_registers(kern, x, sop, kern.storage_type(x.dtype))
    if copies:
        kern.stats.features.add("cp_async")
        mma_operands.commit_group(kern)
        mma_operands.wait_group(kern, 0)
    kern.barrier()
    def scaled(offs):
        return mma_block_scale.BlockScaledMma(kern, plan.scaled, *scale_bases, k,
                                              shapes[1][-1], offs)
    regs = mma_sync.product(kern, form, plan.b_class, plan.tiling, ops[0], ops[1], acc, k,
                            scaled=scaled if plan.scaled is not None else None)
    remember_acc_layout(kern, plan.acc)
    return TileVal(acc.dtype, plan.acc, tuple(regs))


def _operands(kern: KernelEmitter, op: BuiltinOp):
    args = op.arg_map
    return [kern.env[args[n].id] for n in ("a", "b")]


@lowers("mma")
def mma(kern: KernelEmitter, op: BuiltinOp) -> TileVal:
    a, b = _operands(kern, op)
    resident = kern.plan.loops.resident_product(op.result.id)
    if resident is not None:        # the output in tensor memory (plan/loops.py R11)
        return tcgen05_attention.product(kern, resident, op, a, b)
    if kern.plan.loops.resident_scores(op.result.id) is not None:
        return tcgen05_attention.scores(kern, op, a, b)     # S of that loop
    acc = kern.tile(op.arg_map["acc"])
    plan = tensor_core_plan(kern, op)
    if plan is not None:
        return _tensor_core(kern, plan, a, b, acc)
    a, b = (mma_operands.materialize(kern, x) for x in (a, b))
    return _product(kern, a, b, acc, op.result.type.dtype)


@lowers("mma_scaled")
def mma_scaled(kern: KernelEmitter, op: BuiltinOp) -> TileVal:
    """A block-scaled product that plan/scaled.py gave an instruction (the software path
    rewrote every other into a bf16 `mma` before planning)."""
    a, b = _operands(kern, op)
    acc = kern.tile(op.arg_map["acc"])
    plan = tensor_core_plan(kern, op)
    assert plan is not None and plan.scaled is not None, "planned with plan/scaled.py's rules"
    scales = tuple(kern.tile(op.arg_map[n]) for n in ("a_scale", "b_scale"))
    return _tensor_core(kern, plan, a, b, acc, scales)


@lowers("matmul", "@")
def matmul(kern: KernelEmitter, op: BuiltinOp) -> TileVal:
    a, b = _operands(kern, op)
    rt = op.result.type
    plan = tensor_core_plan(kern, op)
    if plan is not None:
        return _tensor_core(kern, plan, a, b, kern.splat(0, rt.dtype, plan.acc))
    a, b = (mma_operands.materialize(kern, x) for x in (a, b))
    zero = kern.splat(0, rt.dtype, kern.layout_for(rt))
    return _product(kern, a, b, zero, rt.dtype)



