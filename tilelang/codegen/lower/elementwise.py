"""Element-wise ops (operators, math, astype/bitcast, where, cdiv, floordiv): one
`ScalarEmitter.emit` per register of the result, with NumPy broadcasting of the operands.

The result takes the layout of the first operand that already has the result's shape (so a
chain of element-wise ops never moves data); other operands are broadcast into it, which is a
renaming of registers when they are scalars or reductions of it (llvm.sync.broadcast).
"""

from __future__ import annotations

from tilelang.codegen.llvm.kernel import InternalCompilerError, KernelEmitter, TileVal
from tilelang.codegen.llvm.sync import broadcast
from tilelang.codegen.lower.table import lowers, lowers_group
from tilelang.codegen.scalar.emitter import ELEMENTWISE
from tilelang.ir.ops import BuiltinOp
from tilelang.ir.values import Value
from tilelang.sema.constants import ConstValue, construct
from tilelang.sema.types import DTYPES, DType


@lowers_group("operator", "math", "dtype")
def elementwise(kern: KernelEmitter, op: BuiltinOp) -> TileVal:
    if op.name in DTYPES:
        return _constructor(kern, op)
    if op.name not in ELEMENTWISE:
        raise InternalCompilerError.at("E0780", f"`{op.name}` has no code generation yet",
                                       op.span)
    return emit_elementwise(kern, op)


@lowers("cdiv")
def emit_elementwise(kern: KernelEmitter, op: BuiltinOp) -> TileVal:
    rt = op.result.type
    operands, params = [], {}
    for name, a in op.args:
        if isinstance(a, DType):
            params[name] = a
        elif isinstance(a, Value):
            operands.append(kern.tile(a))
        elif isinstance(a, ConstValue):
            operands.append(a)
        else:
            raise InternalCompilerError.at("E0781", f"`{op.name}`: unexpected argument "
                                           f"`{name}`", op.span)
    layout = next((t.layout for t in operands if isinstance(t, TileVal) and t.shape == rt.shape),
                  None) or kern.layout_for(rt)
    cols, dtypes = [], []
    for t in operands:
        if isinstance(t, TileVal):
            cols.append(broadcast(kern, t, layout))
            dtypes.append(t.dtype)
        elif t.dtype is None:
            cols.append((t.value,) * layout.num_regs)
            dtypes.append(None)
        else:
            cols.append((kern.se.constant(t.value, t.dtype),) * layout.num_regs)
            dtypes.append(t.dtype)
    regs = []
    for r in range(layout.num_regs):
        regs.append(kern.se.emit(op.name, [c[r] for c in cols], dtypes, rt.dtype, params))
    return TileVal(rt.dtype, layout, tuple(regs))


def _constructor(kern: KernelEmitter, op: BuiltinOp) -> TileVal:
    """`f32(0.5)` that no pass folded: a strict constant."""
    dt = DTYPES[op.name]
    c = construct(dt, kern.const_of(op.arg_map["x"]), op.span)
    return TileVal(dt, kern.scalar_layout, (kern.se.constant(c.value, dt),))
