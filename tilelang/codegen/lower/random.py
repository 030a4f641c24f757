"""`randint`, `rand`, `randn` (sema/builtins_random.py): Philox-4x32-10 per register of the
offset tile, in 32-bit integer arithmetic.

Each round needs the high and low halves of two 32 x 32-bit products; they are written as one
64-bit product of zero-extended operands, which LLVM's NVPTX back end turns into `mul.hi.u32`
and `mul.lo.u32` (or one `mul.wide.u32`). The key (k0, k1) is the 64-bit seed's two words and
is the same in every thread; the counter's low word is the offset. The float conversions follow
Triton's `uint_to_uniform_float` and Box-Muller exactly, with the kernel's precision mode
choosing the code of `log`, `sqrt` and `cos`.
"""

from __future__ import annotations

import llvmlite.ir as ir

from tilelang.codegen.emit.kernel import KernelEmitter, TileVal
from tilelang.codegen.lower.table import lowers
from tilelang.ir.ops import BuiltinOp
from tilelang.ir.values import Value
from tilelang.sema.builtins_random import (NORMAL_FLOOR, PHILOX_KEY_A, PHILOX_KEY_B,
                                           PHILOX_ROUND_A, PHILOX_ROUND_B, PHILOX_ROUNDS,
                                           UNIFORM_SCALE)
from tilelang.sema.constants import ConstValue
from tilelang.sema.types import F32, I64, U64, DType

I32T, I64T = ir.IntType(32), ir.IntType(64)


def _c32(v: int) -> ir.Constant:
    return ir.Constant(I32T, v & 0xFFFFFFFF)


def _key(kern: KernelEmitter, seed) -> tuple[ir.Value, ir.Value]:
    """The seed as 64 bits (sign-extended when signed), split into (low, high) words."""
    b = kern.builder
    if isinstance(seed, ConstValue):
        s = int(seed.value) & 0xFFFFFFFFFFFFFFFF
        return _c32(s), _c32(s >> 32)
    dt = kern.tile(seed).dtype
    s = kern.scalar_value(seed, I64 if dt.signed else U64)
    return b.trunc(s, I32T), b.trunc(b.lshr(s, ir.Constant(I64T, 32)), I32T)


def _counter(kern: KernelEmitter, v: ir.Value, dt: DType) -> tuple[ir.Value, ir.Value]:
    """(c0, c1): the offset's low word, and its high word for a 64-bit dtype (else 0)."""
    b = kern.builder
    if dt.bits > 32:
        return b.trunc(v, I32T), b.trunc(b.lshr(v, ir.Constant(v.type, 32)), I32T)
    if dt.bits < 32:
        v = b.sext(v, I32T) if dt.signed else b.zext(v, I32T)
    return v, _c32(0)


def _mul_wide(b: ir.IRBuilder, k: int, x: ir.Value) -> tuple[ir.Value, ir.Value]:
    p = b.mul(ir.Constant(I64T, k), b.zext(x, I64T))
    return b.trunc(b.lshr(p, ir.Constant(I64T, 32)), I32T), b.trunc(p, I32T)


def philox(b: ir.IRBuilder, c: list, k0: ir.Value, k1: ir.Value) -> list:
    c0, c1, c2, c3 = c
    for r in range(PHILOX_ROUNDS):
        hi_b, lo_b = _mul_wide(b, PHILOX_ROUND_B, c2)
        hi_a, lo_a = _mul_wide(b, PHILOX_ROUND_A, c0)
        c0, c1, c2, c3 = (b.xor(b.xor(hi_b, c1), k0), lo_b,
                          b.xor(b.xor(hi_a, c3), k1), lo_a)
        if r + 1 < PHILOX_ROUNDS:
            k0 = b.add(k0, _c32(PHILOX_KEY_A))
            k1 = b.add(k1, _c32(PHILOX_KEY_B))
    return [c0, c1, c2, c3]


def _uniform(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    neg = b.icmp_signed("<", x, _c32(0))
    x = b.select(neg, b.not_(x), x)
    return b.fmul(b.sitofp(x, ir.FloatType()), ir.Constant(ir.FloatType(), UNIFORM_SCALE))


def _normal(kern: KernelEmitter, u1: ir.Value, u2: ir.Value) -> ir.Value:
    b, se, f = kern.builder, kern.se, ir.FloatType()
    u1 = se.emit("maximum", [ir.Constant(f, NORMAL_FLOOR), u1], [F32, F32], F32)
    th = b.fmul(ir.Constant(f, 6.283185307179586), u2)
    r = se.emit("sqrt", [b.fmul(ir.Constant(f, -2.0), se.emit("log", [u1], [F32], F32))],
                [F32], F32)
    return b.fmul(r, se.emit("cos", [th], [F32], F32))


@lowers("randint", "rand", "randn")
def emit_random(kern: KernelEmitter, op: BuiltinOp) -> TileVal:
    args = dict(op.args)
    seed, offset = args["seed"], args["offset"]
    rt = op.result.type
    k0, k1 = _key(kern, seed)
    if isinstance(offset, Value):
        off = kern.tile(offset)
        layout, regs, odt = off.layout, off.regs, off.dtype
    else:
        layout = kern.layout_for(rt)
        v = int(offset.value) & 0xFFFFFFFFFFFFFFFF
        regs, odt = (ir.Constant(I64T, v),) * layout.num_regs, U64
    b, out = kern.builder, []
    for reg in regs:
        c0, c1 = _counter(kern, reg, odt)
        words = philox(b, [c0, c1, _c32(0), _c32(0)], k0, k1)
        if op.name == "randint":
            out.append(words[0])
        elif op.name == "rand":
            out.append(_uniform(b, words[0]))
        else:
            out.append(_normal(kern, _uniform(b, words[0]), _uniform(b, words[1])))
    return TileVal(rt.dtype, layout, tuple(out))
