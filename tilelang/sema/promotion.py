"""Dtype promotion and shape broadcasting (language.md §4 and §6).

Promotion of two strict dtypes (`promote`):
- equal dtypes give themselves (also for restricted floats: tf32 ⊕ tf32 is tf32);
- bool < integer < float by category: across categories the higher category wins whatever the
  widths (i64 ⊕ f16 is f16, as in Triton/cuTile);
- within a category the wider wins;
- signed ⊕ unsigned integers, f16 ⊕ bf16, and any restricted float (tf32, f8, f6, f4, ue8m0) with a
  different dtype are errors asking for an explicit `astype`.

A loose constant against a strict dtype (`promote_loose`):
- loose int with an int or float dtype, or loose float with a float dtype: the strict dtype
  (restricted floats included: the constant is materialized as that dtype, nothing is promoted);
- loose int with bool: the default int i32; loose float with bool or int: the default float f32
  (as Triton and cuTile do: `i32_tile * 0.5` is f32).
The value itself is checked to fit by `constants.materialize`; `constants.operand_dtype` does
both (it lives there so that this module imports nothing of constants).
"""

from __future__ import annotations

from tilelang.diagnostics import Span, TileSemanticError, register_codes
from tilelang.sema.types import (DEFAULT_FLOAT, DEFAULT_INT, Dim, DType, Sym, format_shape)

register_codes({
    "E0302": "signed and unsigned integers mixed without an explicit astype",
    "E0303": "a restricted float (tf32, the f8, f6 and f4 formats, ue8m0) mixed with another "
             "dtype",
    "E0304": "f16 and bf16 mixed without an explicit astype",
    "E0306": "tile shapes cannot be broadcast together",
})


def promote(a: DType, b: DType, span: Span | None) -> DType:
    """The common dtype of two strict operands (see the module docstring)."""
    if a == b:
        return a
    if a.restricted or b.restricted:
        r = a if a.restricted else b
        other = b if r is a else a
        if r.name == "f4e2m1x2":        # bytes of two values: nothing converts them
            raise TileSemanticError.at(
                "E0303", f"cannot mix {a} and {b}: {r} is packed FP4 (two values a byte), "
                         f"never promoted implicitly", span,
                help="`astype` does not convert it: `unpack_f4(x)` gives its f4e2m1 "
                     "elements, `bitcast(x, u8)` its bytes")
        raise TileSemanticError.at(
            "E0303", f"cannot mix {a} and {b}: {r} is a restricted float that is never "
                     f"promoted implicitly", span,
            help=f"convert explicitly, e.g. `x.astype({other})` or `y.astype({r})`")
    if a.category != b.category:
        return a if a.category_rank > b.category_rank else b
    if a.is_int and a.signed != b.signed:
        s, u = (a, b) if a.signed else (b, a)
        raise TileSemanticError.at(
            "E0302", f"cannot mix signed {s} and unsigned {u}", span,
            help=f"convert one side explicitly with `astype`, e.g. `x.astype({s})`")
    if a.is_float and {a.name, b.name} == {"f16", "bf16"}:
        raise TileSemanticError.at(
            "E0304", "cannot mix f16 and bf16: neither represents the other", span,
            help="convert explicitly: `x.astype(f32)` keeps both exactly, or `x.astype(f16)`")
    return a if a.bits >= b.bits else b


def promote_loose(strict: DType, loose_kind: str) -> DType:
    """The dtype of `strict ⊕ loose` where the loose constant is an "int" or "float"."""
    if loose_kind == "int":
        return DEFAULT_INT if strict.is_bool else strict
    if loose_kind == "float":
        return strict if strict.is_float else DEFAULT_FLOAT
    raise ValueError(f"loose kind {loose_kind!r}")


# ---------------------------------------------------------------------------------------------
# Broadcasting

def broadcast_shapes(a: tuple[Dim, ...], b: tuple[Dim, ...],
                     span: Span | None) -> tuple[Dim, ...]:
    """NumPy broadcasting: align on the right; equal dimensions stay, a 1 stretches.
    A symbolic dimension matches only itself or 1."""
    out: list[Dim] = []
    n = max(len(a), len(b))
    pa = (1,) * (n - len(a)) + tuple(a)
    pb = (1,) * (n - len(b)) + tuple(b)
    for i, (x, y) in enumerate(zip(pa, pb)):
        if x == y or y == 1:
            out.append(x)
        elif x == 1:
            out.append(y)
        else:
            sym = isinstance(x, Sym) or isinstance(y, Sym)
            raise TileSemanticError.at(
                "E0306", f"shapes {format_shape(tuple(a))} and {format_shape(tuple(b))} cannot "
                         f"be broadcast together: {x} and {y} differ and neither is 1", span,
                help=("a dimension named by a const parameter only matches itself or 1"
                      if sym else
                      "dimensions must be equal or 1; use `reshape`, `expand_dims` or "
                      "`broadcast_to` to line them up"))
    return tuple(out)


def broadcast_all(shapes: list[tuple[Dim, ...]], span: Span | None) -> tuple[Dim, ...]:
    out: tuple[Dim, ...] = ()
    for s in shapes:
        out = broadcast_shapes(out, s, span)
    return out
