"""Element-wise ops (operators, math, astype/bitcast, where, cdiv, floordiv): one
`ScalarEmitter.emit` per register of the result, with NumPy broadcasting of the operands.

The result takes the layout of the first operand that already has the result's shape (so a
chain of element-wise ops never moves data); other operands are broadcast into it, which is a
renaming of registers when they are scalars or reductions of it (emit.sync.broadcast).

A divisor shared by many elements (`x / sum(x, axis = 1, keepdims = true)`, a scalar) becomes
one reciprocal per register it has and a multiply per element, where the precision mode lets
`/` be approximated (ScalarEmitter.reciprocal); exact `/` divides every element.
"""

from __future__ import annotations

from tilelang.codegen.emit.kernel import InternalCompilerError, KernelEmitter, TileVal
from tilelang.codegen.emit.sync import broadcast
from tilelang.codegen.lower.table import lowers, lowers_group
from tilelang.codegen.scalar.cast import F8_SPEC, f8_pair_decode
from tilelang.codegen.scalar.emitter import ELEMENTWISE
from tilelang.codegen.scalar.rounding import f32
from tilelang.ir.ops import BuiltinOp
from tilelang.ir.values import Value
from tilelang.sema.constants import ConstStr, ConstValue, construct
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
        if isinstance(a, (DType, ConstStr)):
            params[name] = a
        elif isinstance(a, Value):
            operands.append(kern.tile(a))
        elif isinstance(a, ConstValue):
            operands.append(a)
        else:
            raise InternalCompilerError.at("E0781", f"`{op.name}`: unexpected argument "
                                           f"`{name}`", op.span)
    # an operand that could be computed again in any layout (emit/remat.py: a mask from
    # aranges) follows the others
    full = sorted((t for t in operands if isinstance(t, TileVal) and t.shape == rt.shape),
                  key=lambda t: t.origin is not None)
    layout = full[0].layout if full else kern.layout_for(rt)
    if op.name in ("/", "div") and len(operands) == 2:
        recip = _shared_reciprocal(kern, operands[1], layout, rt.dtype, params)
        if recip is not None:
            x = operands[0]
            xs = broadcast(kern, x, layout) if isinstance(x, TileVal) else None
            regs = []
            for r in range(layout.num_regs):
                xv = xs[r] if xs is not None else x
                xd = x.dtype if isinstance(x, TileVal) else x.dtype
                xv = kern.se.emit("astype", [xv], [xd], rt.dtype, {"dtype": rt.dtype}) \
                    if xd != rt.dtype else xv
                regs.append(kern.builder.fmul(xv, recip[r]))
            return TileVal(rt.dtype, layout, tuple(regs))
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
    if op.name == "astype" and dtypes[0] is not None and dtypes[0].name in F8_SPEC:
        pairs = _f8_pairs(kern, cols[0], dtypes[0], rt.dtype)
        if pairs is not None:
            return TileVal(rt.dtype, layout, pairs)
    regs = []
    for r in range(layout.num_regs):
        regs.append(kern.se.emit(op.name, [c[r] for c in cols], dtypes, rt.dtype, params))
    return TileVal(rt.dtype, layout, tuple(regs))


def _f8_pairs(kern: KernelEmitter, regs, src: DType, dst: DType) -> tuple | None:
    """`astype` of f8 registers two at a time (scalar/cast.f8_pair_decode: one cvt for
    both, from their 16 bits as loaded), or None where that does not apply."""
    if len(regs) % 2:
        return None
    out = []
    for r in range(0, len(regs), 2):
        pair = f8_pair_decode(kern.se, regs[r], regs[r + 1], src.name, dst)
        if pair is None:
            return None
        out.extend(pair)
    return tuple(out)


def _shared_reciprocal(kern: KernelEmitter, d, layout, dtype: DType, params: dict):
    """The reciprocals of divisor `d` broadcast into `layout`, computed once per register of
    `d`, or None: `d` is not shared (it has as many registers as the result), not f32, or `/`
    is exact in this op's mode."""
    se = kern.se
    if isinstance(d, ConstValue) and dtype.name == "f32" and isinstance(d.value, (int, float)) \
            and not isinstance(d.value, bool) and se.mode_of(params) == se.precision \
            and se.reciprocal_divides(dtype):
        # a constant divisor: its reciprocal rounded once here (x * RN(1/c) is within 1.5 ulp,
        # inside div.full's 2), where 1/c is a normal number
        c = float(d.value)
        if 2.0 ** -125 < abs(c) < 2.0 ** 125:
            # f32 operands divided in double, then rounded to f32: the f32 quotient (53 >= 2*24+2)
            r = se.constant(f32(1.0 / f32(c)), dtype)
            return (r,) * layout.num_regs
        return None
    if not isinstance(d, TileVal) or d.dtype != dtype or dtype.name != "f32":
        return None
    if len(d.regs) * 2 > layout.num_regs or not se.approximates("/", dtype, params):
        return None
    if se.mode_of(params) != se.precision:
        return None          # a per-call mode other than the kernel's: divide element-wise
    inv = tuple(se.reciprocal(v, dtype) for v in d.regs)
    if any(v is None for v in inv):
        return None
    return broadcast(kern, TileVal(dtype, d.layout, inv), layout)


def _constructor(kern: KernelEmitter, op: BuiltinOp) -> TileVal:
    """`f32(0.5)` that no pass folded: a strict constant."""
    dt = DTYPES[op.name]
    c = construct(dt, kern.const_of(op.arg_map["x"]), op.span)
    return TileVal(dt, kern.scalar_layout, (kern.se.constant(c.value, dt),))
