"""Helpers passes share: replacing an op's operands and regions (ops are frozen)."""

from __future__ import annotations

from typing import Callable, Mapping

from tilelang.ir.args import map_arg
from tilelang.ir.ops import (Block, BuiltinOp, ConstantOp, ForOp, IfOp, Kernel, Op, WhileOp,
                             _Terminator)
from tilelang.ir.values import Value
from tilelang.record import replace


def substituter(subst: Mapping[Value, Value]) -> Callable[[Value], Value]:
    def f(v: Value) -> Value:
        while v in subst:        # chains: a folded value replaced by a CSE'd one
            v = subst[v]
        return v
    return f


def remap_operands(op: Op, f: Callable[[Value], Value]) -> Op:
    """`op` with each directly used value `v` replaced by `f(v)` (regions untouched); `op`
    itself when `f` changes none of them, so that an untouched op keeps its identity (the
    verifier does not re-type an op it has seen, verifier.verify)."""
    for v in op.operands:
        if f(v) is not v:
            break
    else:
        return op
    if isinstance(op, BuiltinOp):
        return replace(op, args=tuple((n, map_arg(a, f)) for n, a in op.args),
                       varargs=tuple(map_arg(a, f) for a in op.varargs))
    if isinstance(op, IfOp):
        return replace(op, cond=f(op.cond))
    if isinstance(op, ForOp):
        return replace(op, start=f(op.start), stop=f(op.stop), step=f(op.step),
                       init=tuple(f(v) for v in op.init))
    if isinstance(op, WhileOp):
        return replace(op, init=tuple(f(v) for v in op.init))
    if isinstance(op, _Terminator):
        return replace(op, values=tuple(f(v) for v in op.values))
    assert isinstance(op, ConstantOp)
    return op


def with_ops(block: Block, ops: list[Op]) -> Block:
    """`block` with these ops (`block` itself when they are its own, in order)."""
    if len(ops) == len(block.ops) and all(new is old for new, old in zip(ops, block.ops)):
        return block
    return replace(block, ops=tuple(ops))


def with_regions(op: Op, regions: list[Block]) -> Op:
    """`op` with its regions replaced (`op` itself when they are the same blocks)."""
    if all(new is old for new, old in zip(regions, op.regions)):
        return op
    if isinstance(op, IfOp):
        return replace(op, then=regions[0], else_=regions[1])
    if isinstance(op, ForOp):
        return replace(op, body=regions[0])
    if isinstance(op, WhileOp):
        return replace(op, cond=regions[0], body=regions[1])
    return op


def map_kernel(k: Kernel, f: Callable[[Block], Block]) -> Kernel:
    return replace(k, body=f(k.body))
