"""The float functions by name: `evaluate` picks the function of an op in the math library
(scalar/math.py: exp, log, sqrt, ...; trig.py: sin, cos; special.py: tanh, erf, atan2, pow and
the float `//`, `%`, fmod; more_math.py: the functions built from those). The last three are
imported on the first op that needs one (~10 ms of CPU to import, mostly their coefficient
tables), so a kernel without them does not pay for them.
"""

from __future__ import annotations

import llvmlite.ir as ir

from tilelang.codegen.scalar.ir import IRKit
from tilelang.codegen.scalar.math import (exp, exp2, exp2_dd, log, log2, log2_dd, rsqrt, sigmoid,
                                          sqrt)


def evaluate(k: IRKit, op: str, args, dtype) -> ir.Value:
    """`op` on f32 or f64 registers (dtype F32 or F64); returns a register of the same type."""
    fn = _OPS.get(op)
    if fn is None:
        raise NotImplementedError(f"`{op}` on {dtype} is not implemented yet")
    return fn(k, *args)


def _special(name):
    def fn(k, *args):
        from tilelang.codegen.scalar import special as S
        if name == "tanh":
            return S.tanh(k, args[0], exp)
        if name in ("pow", "**"):
            return S.pow_(k, args[0], args[1], log2_dd, exp2_dd)
        if name in ("//", "floordiv"):
            return S.float_floordiv(k, *args)
        if name == "%":
            return S.float_mod(k, *args)
        return getattr(S, name)(k, *args)
    return fn


def _trig(name):
    def fn(k, x):
        from tilelang.codegen.scalar import trig as scalar_trig
        return getattr(scalar_trig, name)(k, x)
    return fn


def fma(k: IRKit, a, b_, c):
    return k.fma(a, b_, c)


def _more(name):
    def fn(k, *args):
        from tilelang.codegen.scalar import more_math
        return getattr(more_math, name)(k, *args)
    return fn


_OPS = {"exp": exp, "exp2": exp2, "log": log, "log2": log2, "sqrt": sqrt, "rsqrt": rsqrt,
        "sigmoid": sigmoid, "sin": _trig("sin"), "cos": _trig("cos"), "fma": fma,
        **{n: _special(n) for n in ("tanh", "erf", "atan2", "pow", "**", "%", "//",
                                    "floordiv", "fmod")},
        **{n: _more(n) for n in ("log10", "log1p", "expm1", "cbrt", "hypot", "tan", "atan",
                                 "asin", "acos", "sinh", "cosh", "asinh", "acosh",
                                 "atanh")}}
