"""Function arguments of built-ins (`reduce(x, combine, axis=1)`): part of the checker.

A parameter of kind `FN` names a `fn` or a built-in that combines two *states*, each one scalar
per operand tile (`x` a tile: a scalar; `x` a tuple of tiles: a tuple of scalars). The checker
instantiates the function once on scalars of the operands' element dtypes, checks that it
returns a state of the same dtypes, and hands the built-in's typing rule a `CombineType`. The IR
builder (tilelang/ir/build.py) overrides `call_combine` to inline the body into a region of its
own, which the code generator emits at every combining step of its reduction tree.
"""

from __future__ import annotations

from ..diagnostics import TileSemanticError
from ..record import replace
from .builtins_core import FN, ArgInfo, Builtin, CombineType
from .types import LooseType, TileType, TupleType, scalar
from .values import BuiltinType, FnType, error_value, is_error, value


class CombineChecks:
    """The part of `Checker` that resolves function arguments of built-ins."""

    def fn_arguments(self, b: Builtin, pos: list[ArgInfo], kw: dict[str, ArgInfo], span):
        """`pos`, `kw` with each FN parameter's function resolved to a `CombineType`."""
        operand = b.extra.get("fn_operand", "x")
        positional = [p for p in b.params if not p.keyword_only]
        names = [p.name for p in positional]
        pos = list(pos)
        kw = dict(kw)

        def find(name):
            if name in kw:
                return ("kw", name)
            if name in names and names.index(name) < len(pos):
                return ("pos", names.index(name))
            return None

        where_x = find(operand)
        if where_x is None:
            return pos, kw                      # bind_call reports the missing operand
        x = kw[where_x[1]] if where_x[0] == "kw" else pos[where_x[1]]
        dtypes = _element_dtypes(x)
        for p in b.params:
            if p.kind != FN:
                continue
            at = find(p.name)
            if at is None or dtypes is None:
                continue
            f = kw[at[1]] if at[0] == "kw" else pos[at[1]]
            if is_error(f):
                continue
            resolved = self.combine_fn(b, f, dtypes, span)
            if at[0] == "kw":
                kw[at[1]] = resolved
            else:
                pos[at[1]] = resolved
        return pos, kw

    def combine_fn(self, b: Builtin, f: ArgInfo, dtypes: tuple, span) -> ArgInfo:
        ct = f.type
        if not isinstance(ct, (FnType, BuiltinType)):
            return f                            # the parameter kind check says what is wrong
        name = ct.fn.name if isinstance(ct, FnType) else ct.builtin.name
        where = f.span or span
        if isinstance(ct, FnType):
            params = ct.fn.params
            required = sum(1 for p in params if p.default is None)
            consts = any(p.is_const for p in params[:2])
            if required > 2 or len(params) < 2 or consts:
                what = f"{len(params)}" + (", `const` ones among them" if consts else "")
                raise TileSemanticError.at(
                    "E0530", f"`{b.name}`: the combine function `{name}` must take two "
                             f"arguments (two {_state_text(dtypes)}), but it takes {what}",
                    where, help=f"write `fn {name}(a, b) {{ ... }}`")
        args = [self.combine_state(dtypes, where) for _ in range(2)]
        res, body = self.call_combine(ct, args, dtypes, where)
        if is_error(res):
            return error_value(f.span)      # the function's own error is reported already
        types = _check_result(b, name, res, dtypes, where)
        return replace(value(CombineType(name, tuple(dtypes), types), None, f.span), ir=body)

    def combine_state(self, dtypes: tuple, span) -> ArgInfo:
        """One state argument: a scalar, or a tuple of scalars for several operands."""
        if len(dtypes) == 1:
            return value(scalar(dtypes[0]), None, span)
        elems = tuple(value(scalar(d), None, span) for d in dtypes)
        return value(TupleType(tuple(e.type for e in elems)), None, span, elements=elems)

    def call_combine(self, ct, args: list[ArgInfo], dtypes: tuple, span):
        """(the function's result for two states, the IR body or None when only checking)."""
        if isinstance(ct, FnType):
            return self.instantiate(ct.fn, ct.module, args, {}, span), None
        return self.call_builtin(ct.builtin, args, {}, span), None


def _element_dtypes(x: ArgInfo) -> tuple | None:
    """The operand's element dtypes: one per tile (None when it is not tiles; the typing rule
    reports that)."""
    if isinstance(x.type, TileType):
        return (x.type.dtype,)
    if isinstance(x.type, TupleType) and x.type.elements and \
            all(isinstance(t, TileType) for t in x.type.elements):
        return tuple(t.dtype for t in x.type.elements)
    return None


def _state_text(dtypes: tuple) -> str:
    if len(dtypes) == 1:
        return f"{dtypes[0]} scalars"
    return "tuples (" + ", ".join(str(d) for d in dtypes) + ")"


def _leaf_types(res: ArgInfo) -> list:
    if isinstance(res.type, TupleType):
        return list(res.type.elements)
    return [res.type]


def _check_result(b: Builtin, name: str, res: ArgInfo, dtypes: tuple, span) -> tuple:
    got = _leaf_types(res) if len(dtypes) > 1 else [res.type]
    ok = len(got) == len(dtypes) and all(
        (isinstance(t, TileType) and not t.shape and t.dtype == d) or
        (isinstance(t, LooseType) and (d.is_float or t.kind == "int") and not d.is_bool)
        for t, d in zip(got, dtypes))
    if not ok:
        want = str(dtypes[0]) if len(dtypes) == 1 else \
            "(" + ", ".join(str(d) for d in dtypes) + ")"
        raise TileSemanticError.at(
            "E0530", f"`{b.name}`: the combine function `{name}` must return {want} for two "
                     f"{_state_text(dtypes)}, but it returns {res.type}", span,
            help="the combined value has the type of one element (one per operand tile); "
                 "convert with `astype` inside the function")
    return tuple(got)
