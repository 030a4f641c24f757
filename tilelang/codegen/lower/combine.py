"""`reduce` and `scan` with a user's combine function (docs/language.md, "Reductions and scans
with a combine function").

The combine is an inlined region (ir.args.FnArg) of scalar ops. `apply` emits it for two states
by binding its arguments to one register each (scalar tiles) and sending its ops through the
ordinary dispatch, so a combine `a + b` emits exactly the `add` that `sum` emits. The reduction
is the built-in one (reduce.py: in-thread tree, butterflies, shared memory across warps) and the
scan the built-in one (scan.py) without an identity element, so the code is the built-ins'
with the combine in place of theirs.

A tuple operand gives one op per element (`part`, ir/builder.py); the first of them computes
every element and the others find the result by their operands (`computed_once`), so the tree runs
once.
"""

from __future__ import annotations

from typing import Callable
from weakref import WeakKeyDictionary

from tilelang.codegen.emit.kernel import KernelEmitter, TileVal
from tilelang.codegen.emit.sync import convert
from tilelang.codegen.lower.reduce import reduce_tile
from tilelang.codegen.lower.scan import scan_states, scan_target
from tilelang.codegen.lower.table import lowers
from tilelang.codegen.plan.streams import reduced_axes
from tilelang.ir.args import FnArg
from tilelang.ir.ops import BuiltinOp, ConstantOp

# per kernel emitter: (op name, the operand tiles' identities, the other arguments) -> results
_DONE: "WeakKeyDictionary[KernelEmitter, dict]" = WeakKeyDictionary()


def apply(kern: KernelEmitter, fn: FnArg, left: list, right: list) -> list:
    """Emit the combine for two states (lists of LLVM values, one per operand)."""
    body = fn.body
    lay = kern.scalar_layout
    for v, reg in zip(body.args, list(left) + list(right)):
        kern.env[v.id] = TileVal(v.type.dtype, lay, (reg,))
    for op in body.ops:
        if isinstance(op, ConstantOp):
            kern.emit_constant(op)
        elif isinstance(op, BuiltinOp):
            kern.emit_builtin(op)
        else:
            return [kern.tile(v).regs[0] for v in op.operands]
    raise AssertionError("a combine region without a yield")


def _operands(kern: KernelEmitter, op: BuiltinOp) -> list[TileVal]:
    return [kern.tile(a) for a in kern.tuple_items(op.arg_map["x"])]


def computed_once(kern: KernelEmitter, op: BuiltinOp, compute: Callable) -> TileVal:
    """Element `part` of `compute(kern, op, operand tiles)`, computed once for the ops of one
    tuple result (the same operand tiles and arguments but `part`)."""
    xs = _operands(kern, op)
    rest = tuple((n, a) for n, a in op.args if n not in ("x", "part"))
    key = (op.name, tuple(id(x) for x in xs), rest)
    done = _DONE.setdefault(kern, {})
    got = done.get(key)
    if got is None or any(a is not b for a, b in zip(got[0], xs)):
        got = (xs, compute(kern, op, xs))
        done[key] = got
    part = kern.const_ints(op.arg_map["part"])[0] if "part" in op.arg_map else 0
    return got[1][part]


def _reduce(kern: KernelEmitter, op: BuiltinOp, xs: list[TileVal]) -> list[TileVal]:
    fn = op.arg_map["combine"]
    L = xs[0].layout
    xs = [xs[0]] + [convert(kern, x, L) for x in xs[1:]]
    dtypes = [x.dtype for x in xs]
    states = [[x.regs[r] for x in xs] for r in range(L.num_regs)]
    axes, keep = reduced_axes(op, L.rank)
    if not axes:     # a scalar: nothing to combine
        lay, out = L, states
    else:
        lay, out = reduce_tile(kern, xs[0], states, dtypes, axes, keep,
                               lambda a, b: apply(kern, fn, a, b))
    return [TileVal(dt, lay, tuple(s[c] for s in out)) for c, dt in enumerate(dtypes)]


def _scan(kern: KernelEmitter, op: BuiltinOp, xs: list[TileVal]) -> list[TileVal]:
    fn = op.arg_map["combine"]
    rank = len(xs[0].shape)
    axis = kern.const_ints(op.arg_map["axis"])[0] % rank if "axis" in op.arg_map else 0
    reverse = bool(op.arg_map["reverse"].value) if "reverse" in op.arg_map else False
    L = scan_target(kern, xs[0].layout, tuple(xs[0].shape), axis)
    xs = [convert(kern, x, L) for x in xs]
    dtypes = [x.dtype for x in xs]
    states = [[x.regs[r] for x in xs] for r in range(L.num_regs)]
    out = scan_states(kern, L, states, dtypes, axis, lambda a, b: apply(kern, fn, a, b), None,
                      reverse)
    return [TileVal(dt, L, tuple(s[c] for s in out)) for c, dt in enumerate(dtypes)]


@lowers("reduce")
def reduce_fn(kern: KernelEmitter, op: BuiltinOp) -> TileVal:
    return computed_once(kern, op, _reduce)


@lowers("scan")
def scan_fn(kern: KernelEmitter, op: BuiltinOp) -> TileVal:
    return computed_once(kern, op, _scan)
