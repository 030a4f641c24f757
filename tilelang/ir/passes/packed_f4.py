"""Packed FP4 in ordinary ops (docs/language.md "Packed FP4"): `unpack_f4(x, axis)` — each
byte of x holding f4e2m1 elements 2j (bits 0-3) and 2j + 1 (bits 4-7) along `axis` — becomes

    u = bitcast(x, u8);  lo = u & 15;  hi = u >> 4             (the two codes, as u8)
    value(c) = ±(m < 4 ? m / 2 : m < 6 ? m - 2 : 2 m - 8),  m = c & 7, the sign c & 8
    stack(value(lo), value(hi)) along a new axis after `axis`, reshaped to `axis` doubled

in f32, where every f4e2m1 value (0, ±0.5 .. ±6) is exact, then `astype` to f4e2m1 (exact).
The software path of a packed `mma_scaled` (ir/passes/scaled.py) takes the f32 values
directly. No target has an instruction that unpacks a tile; the block-scaled tensor-core
forms read packed bytes as they are (codegen/plan/scaled.py).
"""

from __future__ import annotations

from typing import Iterator

from tilelang.ir.builder import Builder
from tilelang.ir.ops import Block, BuiltinOp, ForOp, IfOp, Kernel, Op, WhileOp, walk
from tilelang.ir.passes.rewrite import with_ops, with_regions
from tilelang.record import replace
from tilelang.sema.types import F32, F4E2M1, U8


def _value(b: Builder, code, span):
    """The f4e2m1 value (f32) of each u8 code (bits 0-3)."""
    m = b.op("astype", b.op("&", code, 7, span=span), F32, span=span)
    mag = b.op("where", b.op("<", m, 4.0, span=span), b.op("*", m, 0.5, span=span),
               b.op("where", b.op("<", m, 6.0, span=span), b.op("-", m, 2.0, span=span),
                    b.op("-", b.op("*", m, 2.0, span=span), 8.0, span=span), span=span),
               span=span)
    neg = b.op("!=", b.op("&", code, 8, span=span), 0, span=span)
    return b.op("where", neg, b.op("u-", mag, span=span), mag, span=span)


def unpacked_values(b: Builder, x, axis: int, span):
    """The f32 values of packed FP4 tile `x`, `axis` doubled (byte j: elements 2j, 2j + 1)."""
    shape = x.type.shape
    ax = axis % len(shape)
    u = b.op("bitcast", x, U8, span=span)
    halves = [b.op("expand_dims", _value(b, c, span), ax + 1, span=span)
              for c in (b.op("&", u, 15, span=span), b.op(">>", u, 4, span=span))]
    both = b.op("cat", *halves, ax + 1, span=span)
    return b.op("reshape", both, shape[:ax] + (2 * shape[ax],) + shape[ax + 1:], span=span)


def _expand(ids: Iterator[int], op: BuiltinOp) -> list[Op]:
    b = Builder(ids=ids)
    m = op.arg_map
    axis = m.get("axis")
    v = unpacked_values(b, m["x"], -1 if axis is None else axis.value, op.span)
    b.op("astype", v, F4E2M1, span=op.span)
    ops = list(b._stack[0])
    ops[-1] = replace(ops[-1], result=op.result)   # the op's result keeps its value
    return ops


class _Expander:
    def __init__(self, ids: Iterator[int]):
        self.ids = ids

    def block(self, block: Block) -> Block:
        out: list[Op] = []
        for op in block.ops:
            if isinstance(op, (IfOp, ForOp, WhileOp)):
                op = with_regions(op, [self.block(r) for r in op.regions])
            if isinstance(op, BuiltinOp) and op.name == "unpack_f4":
                out.extend(_expand(self.ids, op))
            else:
                out.append(op)
        return with_ops(block, out)


def expand_unpack_f4(k: Kernel, ids: Iterator[int]) -> Kernel:
    """`k` with every `unpack_f4` in ordinary ops (itself when it has none)."""
    if not any(isinstance(op, BuiltinOp) and op.name == "unpack_f4" for op in walk(k.body)):
        return k
    return replace(k, body=_Expander(ids).block(k.body))
