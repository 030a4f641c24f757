"""Per-element semantics of every element-wise operation, emitted as LLVM IR.

The tile code generator calls `ScalarEmitter.emit` once per element (or per register) of an
element-wise Tile IR op; this module decides what one element computes. The definition is the
registry's NumPy reference (`tilelang/sema/builtins_*.py`, `Builtin.evaluate`): integer
arithmetic wraps, `//`/`%` floor like Python and give 0 on division by zero, shifts past the
width give 0 or the sign fill, float→int conversion truncates and saturates (NaN gives 0),
f16/bf16 math is computed in f32 and rounded, `minimum`/`maximum` propagate NaN and return the
IEEE 754-2019 order on signed zeros. docs/numerics.md lists every function's
accuracy and each precision mode's hardware approximations.

Precision: `precision` ("ieee", "fast", "approx"; sema/builtins_math.PRECISIONS) is the mode
of the ops emitted; an op's own `precision` parameter overrides it. While one op is emitted,
`fast_math` says whether that op uses its hardware approximation, so the functions an op is
built from (tanh's exp) follow the op's choice, not their own.

    se = ScalarEmitter(builder, module, TARGETS["sm_90a"])
    v = se.emit("+", [x, 1], [F32, None], F32)     # a loose constant is materialized as f32

Nothing emitted here becomes a call: transcendental functions are polynomials with explicit
range reduction (scalar/functions.py, scalar/math.py), conversions are instructions or integer code
(scalar/cast.py), so the PTX always links without libdevice.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import llvmlite.ir as ir

from tilelang.codegen.scalar import cast as scalar_cast
from tilelang.codegen.scalar import functions as scalar_functions
from tilelang.codegen.scalar.ir import IRKit
from tilelang.sema.builtins_math import APPROXIMATED, PRECISIONS
from tilelang.sema.constants import ConstStr, ConstValue, materialize
from tilelang.sema.promotion import promote, promote_loose
from tilelang.sema.types import BOOL, F32, F64, DType
from tilelang.targets import Target

ARITH = frozenset({"+", "-", "*", "/", "%", "**", "//", "floordiv"})
BITWISE = frozenset({"&", "|", "^", "<<", ">>"})
COMPARE = frozenset({"==", "!=", "<", "<=", ">", ">="})
LOGIC = frozenset({"and", "or", "not"})
UNARY = frozenset({"u-", "u+", "~"})
FLOAT_MATH = frozenset({"exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos", "tanh",
                        "sigmoid", "erf", "log10", "log1p", "expm1", "cbrt", "tan", "atan",
                        "asin", "acos", "sinh", "cosh", "asinh", "acosh", "atanh"})
NUMERIC_MATH = frozenset({"floor", "ceil", "abs", "trunc", "rint", "round", "sign"})
CLASSIFY = frozenset({"isnan", "isinf", "isfinite"})
NARY_MATH = frozenset({"minimum", "maximum", "pow", "atan2", "fma", "where", "copysign", "fmod",
                       "hypot", "div"})
ELEMENTWISE: frozenset[str] = (ARITH | BITWISE | COMPARE | LOGIC | UNARY | FLOAT_MATH
                               | NUMERIC_MATH | CLASSIFY | NARY_MATH
                               | {"astype", "bitcast", "cdiv"})

REDUCTIONS = ("sum", "prod", "max", "min")


class ScalarEmitter(IRKit):
    """Emits the per-element computation of element-wise ops with the registry's semantics.

    `builder` may be re-pointed by the caller (`se.builder = other`). Most ops are straight-line
    code; integer `**`, float `%`/`floordiv` and the large-argument path of `sin`/`cos` add
    basic blocks, so after `emit` the caller continues at `se.builder.block`."""

    def __init__(self, builder: ir.IRBuilder, module: ir.Module, target: Target,
                 fast_math: bool = False, precision: str | None = None):
        super().__init__(builder, module)
        self.target = target
        # the emitter's own default stays "ieee" (its callers test exact bounds); kernels
        # pass the language's mode (KernelEmitter)
        self.precision = precision or ("approx" if fast_math else "ieee")
        if self.precision not in PRECISIONS:
            raise ValueError(f"unknown precision `{self.precision}`")
        # targets.FEATURES names of what the element code used (`mx_cvt`); the kernel
        # emitter hands in its own set so that the PTX header learns of them
        self.features: set = set()
        self.fast_math = False      # the op being emitted uses its approximation
        self.op_mode = self.precision   # the precision of the op being emitted

    def mode_of(self, params: Mapping | None) -> str:
        """The precision an op runs in: its own `precision=`, else the emitter's."""
        p = (params or {}).get("precision")
        if isinstance(p, ConstStr):
            p = p.value
        return p if p in PRECISIONS else self.precision

    def approximates(self, op_name: str, dtype: DType, params: Mapping | None = None) -> bool:
        """Whether `op_name` on `dtype` uses a hardware approximation (f32 compute only)."""
        if dtype.is_float and dtype.bits <= 32 and dtype.bits > 0:
            op = "/" if op_name == "div" else op_name
            return op in APPROXIMATED[self.mode_of(params)]
        return False

    # -- public interface ---------------------------------------------------------------------

    def llvm_type(self, dtype: DType) -> ir.Type:
        return scalar_cast.llvm_type(dtype)

    def constant(self, value, dtype: DType) -> ir.Value:
        """A constant of `dtype` (value already representable, or rounded like `astype`)."""
        return scalar_cast.constant(value, dtype)

    def cast(self, v: ir.Value, from_dtype: DType, to_dtype: DType) -> ir.Value:
        """`astype(v, to_dtype)` exactly as the registry converts."""
        return scalar_cast.convert(self, v, from_dtype, to_dtype)

    def emit(self, op_name: str, args: Sequence, arg_dtypes: Sequence[DType | None],
             result_dtype: DType, params: Mapping | None = None) -> ir.Value:
        params = dict(params or {})
        if op_name not in ELEMENTWISE:
            raise ValueError(f"`{op_name}` is not an element-wise operation")
        self.fast_math = self.approximates(op_name, result_dtype, params)
        self.op_mode = self.mode_of(params)
        try:
            return self._emit(op_name, args, arg_dtypes, result_dtype, params)
        finally:
            self.fast_math = False
            self.op_mode = self.precision

    def _emit(self, op_name, args, arg_dtypes, result_dtype: DType, params: dict) -> ir.Value:
        if op_name == "astype":
            dst = params.get("dtype", result_dtype)
            src = arg_dtypes[0]
            if src is None:
                return self.constant(scalar_cast.convert_const(args[0], dst), dst)
            return self.cast(args[0], src, dst)
        if op_name == "bitcast":
            return scalar_cast.bitcast(self, args[0], arg_dtypes[0],
                                       params.get("dtype", result_dtype))
        if op_name == "where":
            cond = self._operand(args[0], arg_dtypes[0], BOOL)
            x = self._operand(args[1], arg_dtypes[1], result_dtype)
            y = self._operand(args[2], arg_dtypes[2], result_dtype)
            return self.builder.select(cond, x, y)
        if op_name in LOGIC:
            vals = [self._operand(a, d, BOOL) for a, d in zip(args, arg_dtypes)]
            b = self.builder
            if op_name == "and":
                return b.and_(vals[0], vals[1])
            if op_name == "or":
                return b.or_(vals[0], vals[1])
            return b.xor(vals[0], ir.Constant(ir.IntType(1), 1))
        if op_name in COMPARE:
            dt = compute_dtype(arg_dtypes, args)
            a, b = (self._operand(x, d, dt) for x, d in zip(args, arg_dtypes))
            return self.compare(op_name, a, b, dt)
        if op_name in CLASSIFY:
            dt = compute_dtype(arg_dtypes, args)
            return self._classify(op_name, self._operand(args[0], arg_dtypes[0], dt), dt)
        if op_name == "div":
            op_name = "/"
        dt = result_dtype
        vals = [self._operand(x, d, dt) for x, d in zip(args, arg_dtypes)]
        if op_name in UNARY:
            return self._unary(op_name, vals[0], dt)
        if op_name in BITWISE:
            return self._bitwise(op_name, vals[0], vals[1], dt)
        if op_name in ("//", "floordiv", "cdiv", "%") and dt.is_int:
            return self._int_divmod(op_name, vals[0], vals[1], dt)
        if op_name == "**" and dt.is_int:
            return self.int_pow(vals[0], vals[1], dt)
        if op_name in ("+", "-", "*", "/") or (op_name in ("minimum", "maximum")):
            return self._arith(op_name, vals[0], vals[1], dt)
        if op_name in NUMERIC_MATH:
            return self._numeric_unary(op_name, vals[0], dt)
        if op_name == "copysign":
            return self.intrinsic("llvm.copysign", vals)
        # Float functions: f16/bf16 are evaluated in f32 and rounded once (the reference).
        if not dt.is_float:
            raise ValueError(f"`{op_name}` on {dt}")
        if op_name == "fma" and dt.bits < 32:
            # the reference: exact product and one sum in f64, then one rounding to dt
            w = [self.cast(v, dt, F64) for v in vals]
            return self.cast(self.builder.fadd(self.builder.fmul(w[0], w[1]), w[2]), F64, dt)
        wide = F32 if dt.bits < 32 else dt
        wvals = [self.cast(v, dt, wide) for v in vals]
        r = scalar_functions.evaluate(self, op_name, wvals, wide)
        return self.cast(r, wide, dt)

    def combine(self, kind: str, a: ir.Value, b: ir.Value, dtype: DType) -> ir.Value:
        """Reduction step: "sum", "prod", "max" (NaN propagates), "min"."""
        bld = self.builder
        if kind == "sum":
            if dtype.is_bool:
                return bld.or_(a, b)
            return bld.fadd(a, b) if dtype.is_float else bld.add(a, b)
        if kind == "prod":
            if dtype.is_bool:
                return bld.and_(a, b)
            return bld.fmul(a, b) if dtype.is_float else bld.mul(a, b)
        if kind in ("max", "min"):
            if dtype.is_float:
                name = "llvm.maximum" if kind == "max" else "llvm.minimum"
                return self.intrinsic(name, [a, b])
            return self.int_minmax(kind, a, b, dtype)
        raise ValueError(f"unknown reduction `{kind}`")

    def identity(self, kind: str, dtype: DType) -> int | float | bool:
        """The neutral element of a reduction in `dtype`."""
        if kind == "sum":
            return False if dtype.is_bool else (0.0 if dtype.is_float else 0)
        if kind == "prod":
            return True if dtype.is_bool else (1.0 if dtype.is_float else 1)
        if kind == "max":
            if dtype.is_bool:
                return False
            return float("-inf") if dtype.is_float else dtype.min
        if kind == "min":
            if dtype.is_bool:
                return True
            return float("inf") if dtype.is_float else dtype.max
        raise ValueError(f"unknown reduction `{kind}`")

    # -- operands -----------------------------------------------------------------------------

    def _operand(self, v, dtype: DType | None, want: DType) -> ir.Value:
        """An argument as a value of `want`: loose constants are materialized as the registry
        does, others converted along the promotion edge."""
        if dtype is None or not isinstance(v, ir.Value):
            if isinstance(v, ConstValue):
                v = v.value
            if dtype is None and not isinstance(v, bool):
                v = materialize(ConstValue(v), want, None).value
                return self.constant(v, want)
            src = dtype if dtype is not None else BOOL
            return self.constant(scalar_cast.convert_const(v, want) if src != want else v,
                                 want)
        if dtype == want:
            return v
        return self.cast(v, dtype, want)

    # -- integer and float arithmetic ---------------------------------------------------------

    def _arith(self, op: str, a, b, dt: DType):
        bld = self.builder
        if op in ("minimum", "maximum"):
            if dt.is_float:
                return self.float_minmax(op, a, b)
            return self.int_minmax("max" if op == "maximum" else "min", a, b, dt)
        if op == "/" and self.fast_math and dt.bits <= 32:
            return self.fast_div(a, b, dt)
        if dt.is_float:
            fn = {"+": bld.fadd, "-": bld.fsub, "*": bld.fmul, "/": bld.fdiv}[op]
            if op != "/" and self.contracts(dt):
                return fn(a, b, flags=("contract",))
            return fn(a, b)
        return {"+": bld.add, "-": bld.sub, "*": bld.mul}[op](a, b)

    def contracts(self, dt: DType) -> bool:
        """Whether f32 `a * b + c` may become one `fma.rn.f32` (one rounding instead of two):
        in modes "fast" and "approx", as Triton's default FP fusion; never in "ieee"
        (docs/numerics.md, "Contraction")."""
        return dt.is_float and dt.bits == 32 and self.op_mode != "ieee"

    def fast_div(self, a, b, dt: DType):
        """`div.full.f32` (2 ulp over the full range; Triton's f32 `/`); f16/bf16 in f32."""
        if dt.bits < 32:
            w = [self.cast(v, dt, F32) for v in (a, b)]
            return self.cast(self.fast_div(*w, F32), F32, dt)
        return self.builder.call(self.declare("llvm.nvvm.div.full", a.type, [a.type, a.type]),
                                 [a, b])

    def reciprocal_divides(self, dt: DType) -> bool:
        """Whether x / d may become x * (1 / d) in this emitter's mode (f32 only)."""
        return dt.is_float and dt.bits == 32 and "/" in APPROXIMATED[self.precision]

    def reciprocal(self, v, dt: DType):
        """1 / v once, for a divisor shared by many elements: `rcp.approx.f32` (1 ulp, full
        range, subnormals kept) when `/` may be approximated, else None (the caller divides
        every element correctly rounded)."""
        if not self.reciprocal_divides(dt):
            return None
        return self.builder.fdiv(self.c(v.type, 1.0), v, flags=("afn",))

    def float_minmax(self, op: str, a, b):
        """NaN propagates (`max.NaN`/`min.NaN`, IEEE 754-2019 maximum/minimum). Between -0 and
        +0 the result is +0 for maximum and -0 for minimum; NumPy's own answer there depends on
        which loop its build picks, so the reference leaves it open (docs/numerics.md)."""
        return self.intrinsic("llvm.maximum" if op == "maximum" else "llvm.minimum", [a, b])

    def int_minmax(self, kind: str, a, b, dt: DType):
        bld = self.builder
        signed = dt.signed and not dt.is_bool
        if kind == "max":
            c = bld.icmp_signed(">=", a, b) if signed else bld.icmp_unsigned(">=", a, b)
        else:
            c = bld.icmp_signed("<=", a, b) if signed else bld.icmp_unsigned("<=", a, b)
        return bld.select(c, a, b)

    def compare(self, op: str, a, b, dt: DType):
        bld = self.builder
        if dt.is_float:
            if op == "!=":
                return bld.fcmp_unordered("!=", a, b)   # NaN != anything
            return bld.fcmp_ordered(op, a, b)
        if dt.is_int and dt.signed:
            return bld.icmp_signed(op, a, b)
        return bld.icmp_unsigned(op, a, b)

    def _unary(self, op: str, v, dt: DType):
        bld = self.builder
        if op == "u+":
            return v
        if op == "u-":
            return bld.fneg(v) if dt.is_float else bld.neg(v)
        return bld.not_(v)            # `~`: bitwise not; logical not on i1

    def _bitwise(self, op: str, a, b, dt: DType):
        bld = self.builder
        if op == "&":
            return bld.and_(a, b)
        if op == "|":
            return bld.or_(a, b)
        if op == "^":
            return bld.xor(a, b)
        # Shifts: a count outside 0..bits-1 (negative included) gives 0, or the sign fill for
        # a signed `>>` (PTX shl/shr clamp the same way; LLVM would make it poison).
        bits = dt.bits
        ty = a.type
        oob = bld.icmp_unsigned(">=", b, ir.Constant(ty, bits))
        count = bld.and_(b, ir.Constant(ty, bits - 1))
        if op == "<<":
            return bld.select(oob, ir.Constant(ty, 0), bld.shl(a, count))
        if dt.signed:
            return bld.ashr(a, bld.select(oob, ir.Constant(ty, bits - 1), count))
        return bld.select(oob, ir.Constant(ty, 0), bld.lshr(a, count))

    def _int_divmod(self, op: str, a, b, dt: DType):
        """Floor division / Python remainder / ceiling division; a zero divisor gives 0.
        MIN // -1 wraps to MIN (NumPy), so that divisor is replaced by 1 (same quotient and
        remainder, and no LLVM poison)."""
        bld = self.builder
        ty = a.type
        zero, one = ir.Constant(ty, 0), ir.Constant(ty, 1)
        is_zero = bld.icmp_unsigned("==", b, zero)
        if dt.signed:
            overflow = bld.and_(bld.icmp_signed("==", a, ir.Constant(ty, dt.min)),
                                bld.icmp_signed("==", b, ir.Constant(ty, -1)))
            safe = bld.select(bld.or_(is_zero, overflow), one, b)
            q = bld.sdiv(a, safe)
            r = bld.srem(a, safe)
            # C truncation → floor: adjust when the remainder is non-zero with the other sign
            adjust = bld.and_(bld.icmp_signed("!=", r, zero),
                              bld.icmp_signed("<", bld.xor(r, safe), zero))
            if op == "cdiv":
                up = bld.and_(bld.icmp_signed("!=", r, zero),
                              bld.icmp_signed(">=", bld.xor(r, safe), zero))
                res = bld.add(q, bld.zext(up, ty))
            elif op == "%":
                res = bld.select(adjust, bld.add(r, safe), r)
            else:
                res = bld.sub(q, bld.zext(adjust, ty))
        else:
            safe = bld.select(is_zero, one, b)
            if op == "%":
                res = bld.urem(a, safe)
            else:
                q = bld.udiv(a, safe)
                if op == "cdiv":
                    nz = bld.icmp_unsigned("!=", bld.urem(a, safe), zero)
                    q = bld.add(q, bld.zext(nz, ty))
                res = q
        return bld.select(is_zero, zero, res)

    def int_pow(self, base, exp, dt: DType):
        """Integer `**` by squaring (wrapping); a negative exponent gives 0 unless the base is
        ±1 (1, or ±1 by the exponent's parity)."""
        bld = self.builder
        ty = base.type
        fn = bld.function
        pre = bld.block
        loop = fn.append_basic_block(name="ipow.loop")
        done = fn.append_basic_block(name="ipow.done")
        neg = bld.icmp_signed("<", exp, ir.Constant(ty, 0)) if dt.signed else None
        e0 = bld.select(neg, ir.Constant(ty, 0), exp) if neg is not None else exp
        bld.branch(loop)
        bld.position_at_end(loop)
        r = bld.phi(ty)
        p = bld.phi(ty)
        e = bld.phi(ty)
        r.add_incoming(ir.Constant(ty, 1), pre)
        p.add_incoming(base, pre)
        e.add_incoming(e0, pre)
        odd = bld.trunc(e, ir.IntType(1))
        r2 = bld.select(odd, bld.mul(r, p), r)
        p2 = bld.mul(p, p)
        e2 = bld.lshr(e, ir.Constant(ty, 1))
        r.add_incoming(r2, loop)
        p.add_incoming(p2, loop)
        e.add_incoming(e2, loop)
        bld.cbranch(bld.icmp_unsigned("!=", e2, ir.Constant(ty, 0)), loop, done)
        bld.position_at_end(done)
        res = bld.phi(ty)
        res.add_incoming(r2, loop)
        if neg is None:
            return res
        one = ir.Constant(ty, 1)
        is_one = bld.icmp_signed("==", base, one)
        is_mone = bld.icmp_signed("==", base, ir.Constant(ty, -1))
        odd_e = bld.trunc(exp, ir.IntType(1))
        special = bld.select(is_one, one,
                             bld.select(is_mone, bld.select(odd_e, ir.Constant(ty, -1), one),
                                        ir.Constant(ty, 0)))
        return bld.select(neg, special, res)

    def _numeric_unary(self, op: str, v, dt: DType):
        bld = self.builder
        if dt.is_int:
            if op == "abs":
                if not dt.signed:
                    return v
                return self.intrinsic("llvm.abs", [v, ir.Constant(ir.IntType(1), 0)])
            if op == "sign":
                zero = ir.Constant(v.type, 0)
                pos = bld.zext(bld.icmp_unsigned("!=", v, zero) if not dt.signed
                               else bld.icmp_signed(">", v, zero), v.type)
                if not dt.signed:
                    return pos
                return bld.sub(pos, bld.zext(bld.icmp_signed("<", v, zero), v.type))
            return v                     # the rounding functions are the identity on integers
        if op == "sign":
            # NaN stays, ±0 gives +0 (NumPy)
            t = v.type
            r = bld.select(bld.fcmp_ordered(">", v, self.c(t, 0.0)), self.c(t, 1.0),
                           bld.select(bld.fcmp_ordered("<", v, self.c(t, 0.0)),
                                      self.c(t, -1.0), self.c(t, 0.0)))
            return bld.select(self.isnan(v), v, r)
        # round is NumPy's: half to even, the same as rint (cvt.rni)
        name = {"floor": "llvm.floor", "ceil": "llvm.ceil", "abs": "llvm.fabs",
                "trunc": "llvm.trunc", "rint": "llvm.rint", "round": "llvm.rint"}[op]
        return self.intrinsic(name, [v])

    def _classify(self, op: str, v, dt: DType):
        bld = self.builder
        if not dt.is_float:
            return ir.Constant(ir.IntType(1), int(op == "isfinite"))
        if op == "isnan":
            return self.isnan(v)
        inf = self.c(v.type, float("inf"))
        if op == "isinf":
            return bld.fcmp_ordered("==", self.fabs(v), inf)
        return bld.fcmp_ordered("<", self.fabs(v), inf)


def compute_dtype(arg_dtypes: Sequence[DType | None], args: Sequence) -> DType:
    """The dtype operands are compared in: the promoted dtype of the strict operands, with a
    loose constant taking promote_loose's answer."""
    strict = [d for d in arg_dtypes if d is not None]
    if not strict:
        raise ValueError("an element-wise op needs at least one operand with a dtype")
    dt = strict[0]
    for d in strict[1:]:
        dt = promote(dt, d, None)
    for a, d in zip(args, arg_dtypes):
        if d is None:
            v = a.value if isinstance(a, ConstValue) else a
            kind = "float" if isinstance(v, float) else "int"
            dt = promote_loose(dt, kind)
    return dt
