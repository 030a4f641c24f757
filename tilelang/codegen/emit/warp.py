"""Warp shuffles on values of any scalar type (64-bit values as two 32-bit shuffles, narrower
ones widened): `shfl.sync.bfly` for reductions (`emit.sync.shuffle_xor`), `shfl.sync.up`/`.down` for
scans and `shfl.sync.idx` for broadcasts and layout conversions."""

from __future__ import annotations

import llvmlite.ir as ir

from tilelang.codegen.emit.kernel import I32, KernelEmitter

I64 = ir.IntType(64)
_WIDTH = {"half": 16, "bfloat": 16, "float": 32, "double": 64}


def member_mask(kern: KernelEmitter) -> ir.Value:
    """The lanes that exist in this thread's warp: all 32, except in the last warp of a block
    whose size is not a multiple of 32 (exact mode knows the block size). Replica threads
    (tid >= the layouts' power-of-two count) run the same shuffles, so they are members too."""
    n = kern.declared_threads
    if n % 32 == 0:
        return ir.Constant(I32, -1)
    part = ir.Constant(I32, (1 << (n % 32)) - 1)
    if n < 32:
        return part
    b = kern.builder
    last = b.icmp_unsigned(">=", kern.tid, ir.Constant(I32, n // 32 * 32))
    return b.select(last, part, ir.Constant(I32, -1))


def _shuffle(kern: KernelEmitter, mode: str, v: ir.Value, b_operand: ir.Value,
             c: int) -> ir.Value:
    kern.require_exact()
    kern.stats.shuffles += 1
    b = kern.builder
    fn = kern.se.declare(f"llvm.nvvm.shfl.sync.{mode}.i32", I32, [I32, I32, I32, I32])
    member = member_mask(kern)
    t = v.type
    if isinstance(t, ir.IntType):
        iv, width = v, t.width
    else:
        width = _WIDTH[str(t)]
        iv = b.bitcast(v, ir.IntType(width))

    def shfl32(x):
        return b.call(fn, [member, x, b_operand, ir.Constant(I32, c)])

    if width == 64:
        lo = shfl32(b.trunc(iv, I32))
        hi = shfl32(b.trunc(b.lshr(iv, ir.Constant(I64, 32)), I32))
        r = b.or_(b.zext(lo, I64), b.shl(b.zext(hi, I64), ir.Constant(I64, 32)))
    elif width == 32:
        r = shfl32(iv)
    else:
        r = b.trunc(shfl32(b.zext(iv, I32)), ir.IntType(width))
    return r if r.type == t else b.bitcast(r, t)


def shuffle_up(kern: KernelEmitter, v: ir.Value, delta: int) -> ir.Value:
    """The value of lane `lane - delta` (lanes below `delta` get their own value back)."""
    # c = 0: no segments, clamp at lane 0 (PTX ISA, shfl.sync: minLane for .up).
    return _shuffle(kern, "up", v, ir.Constant(I32, delta), 0)


def shuffle_down(kern: KernelEmitter, v: ir.Value, delta: int) -> ir.Value:
    """The value of lane `lane + delta` (lanes past 31 get their own value back)."""
    # c = 31: no segments, clamp at lane 31 (PTX ISA, shfl.sync: maxLane for .down).
    return _shuffle(kern, "down", v, ir.Constant(I32, delta), 31)


def shuffle_idx(kern: KernelEmitter, v: ir.Value, lane: ir.Value | int) -> ir.Value:
    """The value of lane `lane` (i32, may differ per thread) of the same warp."""
    src = lane if isinstance(lane, ir.Value) else ir.Constant(I32, lane)
    return _shuffle(kern, "idx", v, src, 31)


def shuffle_bfly(kern: KernelEmitter, v: ir.Value, lane_mask: int) -> ir.Value:
    """The value of lane `lane ^ lane_mask`."""
    return _shuffle(kern, "bfly", v, ir.Constant(I32, lane_mask), 31)
