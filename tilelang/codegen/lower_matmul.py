"""Matrix products `mma(a, b, acc)` and `matmul(a, b)` (`@`) as plain FMAs: a simple, exact-
enough lowering until a tensor-core path (mma.sync / wgmma) replaces it.

a and b are staged in shared memory (llvm_sync.stage); each thread then computes the
accumulator elements its layout gives it, walking K with one fused multiply-add per step
(floats: products of the operands converted to f32, accumulated in f32 and rounded once to the
accumulator dtype; integers: i32 multiply-add, wrapping). Batched (B, M, K) @ (B, K, N) tiles
work the same way with the batch coordinate in the addresses.
"""

from __future__ import annotations

import llvmlite.ir as ir

from tilelang.codegen.llvm_kernel import I32, KernelEmitter, TileVal
from tilelang.codegen.llvm_sync import _padded_ir, stage
from tilelang.codegen.lower_table import lowers
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
    regs = []
    for r in range(O.num_regs):
        rc = O.reg_coord(r)
        s = acc.regs[r] if acc.dtype == comp else se.cast(acc.regs[r], acc.dtype, comp)
        for k in range(K):
            ia = _padded_ir(kern, bld.add(ta, ir.Constant(I32, lin_a(rc) + k)))
            ib = _padded_ir(kern, bld.add(tb, ir.Constant(I32, lin_b(rc) + k * N)))
            x = kern.from_storage(bld.load(bld.gep(pa, [ia])), a.dtype)
            y = kern.from_storage(bld.load(bld.gep(pb, [ib])), b.dtype)
            x = x if a.dtype == comp else se.cast(x, a.dtype, comp)
            y = y if b.dtype == comp else se.cast(y, b.dtype, comp)
            if comp.is_float:
                s = se.fma(x, y, s)
            else:
                s = bld.add(bld.mul(x, y), s)
        regs.append(s if comp == out else se.cast(s, comp, out))
    return TileVal(out, O, tuple(regs))


@lowers("mma")
def mma(kern: KernelEmitter, op: BuiltinOp) -> TileVal:
    args = op.arg_map
    a, b, acc = (kern.tile(args[n]) for n in ("a", "b", "acc"))
    return _product(kern, a, b, acc, op.result.type.dtype)


@lowers("matmul", "@")
def matmul(kern: KernelEmitter, op: BuiltinOp) -> TileVal:
    args = op.arg_map
    a, b = kern.tile(args["a"]), kern.tile(args["b"])
    rt = op.result.type
    zero = kern.splat(0, rt.dtype, kern.layout_for(rt))
    return _product(kern, a, b, zero, rt.dtype)



