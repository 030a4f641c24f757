"""The software path of block-scaled products (docs/codegen.md "Block-scaled products"):
`mma_scaled(a, a_scale, b, b_scale, acc)` becomes, in ordinary ops,

    a' = astype(a, bf16) * repeat(astype(a_scale, bf16), V along K)
    b' = astype(b, bf16) * repeat(astype(b_scale, bf16), V along K)
    mma(a', b', acc)

where `repeat` is expand_dims → broadcast_to → reshape. Packed FP4 operands (f4e2m1x2) are
unpacked along K first (ir/passes/packed_f4.py: a along its last axis, b along its first). Every element format has at most 4
significant bits and every scale is a power of two (ue8m0) or has 4 significant bits (an
f8e4m3 scale), so each element times its scale is exact in bf16 whenever it lies in bf16's
range (8 exponent bits, as f32's): the product then differs from the reference only by the
order in which the bf16 product's f32 accumulator adds. Triton dequantizes to bf16 likewise
where a GPU has no block-scaled instruction.

Code generation runs this before planning on every product the target has no block-scaled
instruction for (codegen/plan/scaled.py decides which: `keep`); the interpreter keeps the op
and its exact reference.
"""

from __future__ import annotations

import itertools
from typing import Callable, Iterator

from tilelang.ir.builder import Builder
from tilelang.ir.ops import Block, BuiltinOp, ForOp, IfOp, Kernel, Op, WhileOp, walk
from tilelang.ir.passes.rewrite import with_ops, with_regions
from tilelang.record import replace
from tilelang.ir.passes.packed_f4 import unpacked_values
from tilelang.sema.builtins_matmul import PACKED_F4, SCALE_BLOCKS
from tilelang.sema.types import BF16


def fresh_ids(k: Kernel) -> Iterator[int]:
    top = max((v.id for op in walk(k.body) for v in (*op.results, *(
        a for r in op.regions for a in r.args))), default=0)
    return itertools.count(max([top, *(p.id for p in k.params)]) + 1)


def _repeat(b: Builder, s, axis: int, v: int, span):
    """`s` (…, K / v, …) with each entry repeated v times along `axis` (K), as bf16."""
    s16 = b.op("astype", s, BF16, span=span)
    shape = s.type.shape
    rank = len(shape)
    ax = axis % rank
    e = b.op("expand_dims", s16, ax + 1, span=span)
    wide = shape[:ax + 1] + (v,) + shape[ax + 1:]
    e = b.op("broadcast_to", e, wide, span=span)
    flat = shape[:ax] + (shape[ax] * v,) + shape[ax + 1:]
    return b.op("reshape", e, flat, span=span)


def _dequantize(b: Builder, x, s, axis: int, v: int, span):
    if x.type.dtype.name == PACKED_F4:
        x = unpacked_values(b, x, axis, span)
    return b.op("*", b.op("astype", x, BF16, span=span), _repeat(b, s, axis, v, span), span=span)


def _expand(ids: Iterator[int], op: BuiltinOp) -> list[Op]:
    b = Builder(ids=ids)
    m = op.arg_map
    v = SCALE_BLOCKS[m["a_scale"].type.dtype.name][0]
    a = _dequantize(b, m["a"], m["a_scale"], -1, v, op.span)
    bb = _dequantize(b, m["b"], m["b_scale"], -2, v, op.span)
    b.op("mma", a, bb, m["acc"], span=op.span)
    ops = list(b._stack[0])          # the emitted ops, as split_loops takes them
    ops[-1] = replace(ops[-1], result=op.result)   # the product keeps the op's result value
    return ops


class _Expander:
    def __init__(self, k: Kernel, keep: Callable[[BuiltinOp], bool]):
        self.ids = fresh_ids(k)
        self.keep = keep

    def block(self, block: Block) -> Block:
        out: list[Op] = []
        for op in block.ops:
            if isinstance(op, (IfOp, ForOp, WhileOp)):
                op = with_regions(op, [self.block(r) for r in op.regions])
            if isinstance(op, BuiltinOp) and op.name == "mma_scaled" and not self.keep(op):
                out.extend(_expand(self.ids, op))
            else:
                out.append(op)
        return with_ops(block, out)


def expand_scaled_products(k: Kernel, keep: Callable[[BuiltinOp], bool] = lambda op: False
                           ) -> Kernel:
    """`k` with every `mma_scaled` but those `keep` accepts (a block-scaled instruction
    computes them) replaced by its software path (itself when none changes)."""
    if not any(isinstance(op, BuiltinOp) and op.name == "mma_scaled" and not keep(op)
               for op in walk(k.body)):
        return k
    return replace(k, body=_Expander(k, keep).block(k.body))

