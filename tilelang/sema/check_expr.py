"""The checker's expression walk: name lookup, type expressions, declared-type coercion, and
every expression (operators, calls of built-ins, functions and dtype constructors, members,
indexing; the subscripts of tiles and arrays in check_index.py) evaluated to an `ArgInfo`.
Part of `Checker` (tilelang/sema/checker.py), as mypy keeps expressions in checkexpr.py apart
from its statement checker.
"""

from __future__ import annotations

from ..diagnostics import Label, TileSemanticError
from ..frontend import ast
from ..record import replace
from .builtins import BUILTINS, OPERATORS, bind_call
from .builtins_core import ArgInfo, Builtin
from .builtins_distributed import NEEDS_SYMMETRIC
from .check_context import TILE_ONLY_GROUPS, TILE_ONLY_NAMES, Ctx, NeedsValue, Scope, close_matches
from .check_index import IndexChecks
from .constants import (ConstStr, ConstTuple, ConstValue, as_int, check_loose_size, construct,
                        loose, materialize)
from .types import (ANY_DTYPE, BOOL, DTYPES, I32, STRING, AbsentArrayType, ArrayListType,
                    SymmetricArrayType, ArrayType, DTypeType, LooseType, OptionalArrayType, Sym, TileType, TupleType,
                    check_shape, scalar)
from .values import (BuiltinType, FnType, KernelType, ModuleInfo, ModuleType, error_value,
                     is_error, value)


class ExpressionChecks(IndexChecks):
    """Names, types and expressions: the part of `Checker` that evaluates expressions."""

    def lookup(self, name: str, scope: Scope, ctx: Ctx, span) -> ArgInfo:
        b = scope.lookup(name) or ctx.module.names.get(name)
        if b is not None:
            b.used = True
            if isinstance(b.value.type, AbsentArrayType):
                raise TileSemanticError.at(
                    "E0246", f"`{name}` is `None` in this specialization, so it cannot be used "
                             f"here", span, related=(Label(b.span, f"`{name}` is declared "
                                                           f"{OptionalArrayType(b.value.type.array)}"
                                                           ),) if b.span else (),
                    help=f"use `{name}` only where `is_none({name})` is false: inside "
                         f"`if not is_none({name}) {{ ... }}`")
            return replace(b.value, span=span)
        if name in DTYPES:
            return value(DTypeType(DTYPES[name]), None, span)
        if name in BUILTINS:
            return value(BuiltinType(BUILTINS[name]), None, span)
        later = ctx.declared.get(name)
        if later is not None and (later.line, later.col) > (span.line, span.col):
            raise TileSemanticError.at(
                "E0201", f"`{name}` is used before it is defined", span,
                related=(Label(later, f"`{name}` is defined here, later"),),
                help=f"move the definition of `{name}` above this use")
        if later is not None:
            raise TileSemanticError.at(
                "E0201", f"cannot find `{name}` in this scope", span,
                related=(Label(later, f"`{name}` is declared here, in a block that has ended"),),
                help=f"declare `{name}` before that block (with `var` if the block sets it)")
        if name == "by_target":
            raise TileSemanticError.at(
                "E0201", "`by_target` is not a value here", span,
                help="`by_target(...)` chooses a value per target as a `@launch` attribute or "
                     "as the whole default of a kernel's `const` parameter")
        from .foreign_names import FOREIGN_NAMES   # on this error path only (tilec check's
        if name in FOREIGN_NAMES:                   # import budget, tests/frontend/test_startup.py)
            raise TileSemanticError.at("E0201", f"cannot find `{name}` in this scope", span,
                                       help=FOREIGN_NAMES[name])
        candidates = scope.all_names() + list(ctx.module.names) + list(BUILTINS) + list(DTYPES)
        close = close_matches(name, candidates, n=1)
        raise TileSemanticError.at(
            "E0201", f"cannot find `{name}` in this scope", span,
            help=f"did you mean `{close[0]}`?" if close else
            "declare it with `let` or `var`, or import it")

    # ---- types ----
    def resolve_type(self, t, scope: Scope, ctx: Ctx):
        if isinstance(t, ast.TupleTypeExpr):
            return TupleType(tuple(self.resolve_type(e, scope, ctx) for e in t.elts))
        if t.args is None:
            if t.name in DTYPES:
                return scalar(DTYPES[t.name])
            if t.name == "dtype":
                return ANY_DTYPE
            var = self.type_variable(t.name, scope, ctx)
            if var is not None:
                return scalar(var)
            if t.name in ("Tile", "Array"):
                raise TileSemanticError.at(
                    "E0320", f"`{t.name}` needs arguments", t.span,
                    help="write `Tile[f32, 128, 64]`" if t.name == "Tile"
                    else "write `Array[f16, 2]` (dtype, rank)")
            close = close_matches(t.name, list(DTYPES) + ["Tile", "Array"], n=1)
            raise TileSemanticError.at("E0320", f"unknown type `{t.name}`", t.span,
                                       help=f"did you mean `{close[0]}`?" if close else None)
        if t.name in ("Optional", "List", "Symmetric"):
            return self.array_wrapper_type(t, scope, ctx)
        if t.name not in ("Tile", "Array"):
            raise TileSemanticError.at("E0320", f"unknown type `{t.name}[...]`", t.span,
                                       help="the generic types are `Tile[...]` and `Array[...]`"
                                            " (and, for kernel parameters, `Optional[Array[...]]`"
                                            " and `List[Array[...]]`)")
        first = t.args[0] if t.args and isinstance(t.args[0], ast.Name) else None
        dtype = None if first is None else (
            DTYPES.get(first.id) or self.type_variable(first.id, scope, ctx))
        if dtype is None:
            raise TileSemanticError.at(
                "E0320", f"the first argument of `{t.name}[...]` must be a dtype such as `f32`"
                         " or a `const` parameter of type `dtype`",
                t.args[0].span if t.args else t.span)
        if t.name == "Array":
            if len(t.args) != 2:
                raise TileSemanticError.at("E0320", "`Array` takes a dtype and a rank: "
                                                    "`Array[f16, 2]`", t.span)
            rank = self.const_int(t.args[1], scope, ctx, "the rank of an `Array`")
            if not 1 <= rank <= 8:
                raise TileSemanticError.at("E0320", f"an `Array` has rank 1 to 8, found {rank}",
                                           t.args[1].span)
            return ArrayType(dtype, rank)
        dims = []
        for d in t.args[1:]:
            v = self.expr(d, scope, ctx)
            c = v.const
            if isinstance(c, ConstValue) and (c.is_symbolic or isinstance(c.value, int)) \
                    and not isinstance(c.value, bool):
                dims.append(c.value)
            else:
                raise TileSemanticError.at("E0310", "a tile dimension must be a constant integer",
                                           d.span)
        return TileType(dtype, check_shape(dtype, tuple(dims), t.span))

    def type_variable(self, name: str, scope: Scope, ctx: Ctx):
        """The dtype a name stands for where a type is written: a `const T: dtype` parameter
        (a type variable while it has no value), else None."""
        b = scope.lookup(name) or ctx.module.names.get(name)
        if b is None or not isinstance(b.value.type, DTypeType) or b.value.type.dtype is None:
            return None
        b.used = True
        return b.value.type.dtype

    def array_wrapper_type(self, t: ast.TypeExpr, scope: Scope, ctx: Ctx):
        """`Optional[Array[...]]` and `List[Array[...]]`: the argument is parsed as an
        expression (`Array[f16, 2]` is an index of the name `Array`), read back as a type."""
        inner = t.args[0] if len(t.args) == 1 else None
        if isinstance(inner, ast.Index) and isinstance(inner.value, ast.Name) and \
                inner.value.id == "Array":
            a = self.resolve_type(ast.TypeExpr("Array", inner.indices, inner.span), scope, ctx)
            if t.name == "Symmetric":          # docs/distributed.md
                return SymmetricArrayType(a)
            return OptionalArrayType(a) if t.name == "Optional" else ArrayListType(a)
        what = {"Optional": "may be `None`", "List": "holds several arrays",
                "Symmetric": "is allocated on every rank"}[t.name]
        raise TileSemanticError.at(
            "E0320", f"`{t.name}[...]` takes one `Array[...]` type", t.span,
            help=f"write `{t.name}[Array[f32, 1]]`: only an array parameter {what}")

    def const_int(self, e: ast.Expr, scope, ctx, what: str) -> int:
        v = self.expr(e, scope, ctx)
        if isinstance(v.const, ConstValue) and v.const.is_symbolic:
            raise NeedsValue(e.span, f"{what} depends on it")
        if not isinstance(v.const, ConstValue):
            raise TileSemanticError.at("E0410", f"{what} must be a constant integer", e.span)
        return as_int(v.const, e.span, what)

    def coerce(self, v: ArgInfo, t, span, what: str) -> ArgInfo:
        """`v` used where a value of type `t` is declared: loose constants take its dtype."""
        if is_error(v):
            return v
        if isinstance(t, TileType) and isinstance(v.type, LooseType):
            if t.shape:
                raise TileSemanticError.at("E0321", f"{what} is declared {t}, found a scalar "
                                                    "constant", span,
                                           help="build the tile with `full(shape, value, dtype)`")
            c = materialize(v.const, t.dtype, span)
            return value(t, c, v.span)
        if t == ANY_DTYPE and isinstance(v.type, DTypeType):
            return v
        if isinstance(t, TupleType) and isinstance(v.type, TupleType) and v.elements and \
                len(v.elements) == len(t.elements):
            elems = tuple(self.coerce(e, et, span, what) for e, et in zip(v.elements, t.elements))
            return value(TupleType(tuple(e.type for e in elems)), _tuple_const(elems), v.span,
                         elems)
        if not v.type == t:
            raise TileSemanticError.at(
                "E0321", f"{what} is declared {t}, found {v.type}", span,
                help=f"convert it: `astype(..., {t.dtype})`" if isinstance(t, TileType) and
                isinstance(v.type, TileType) and v.type.shape == t.shape else None)
        return replace(v, type=t)

    # ---- expressions ----
    def expr(self, e: ast.Expr, scope: Scope, ctx: Ctx) -> ArgInfo:
        if self.in_body:
            self.charge(1, e.span)
        if isinstance(e, ast.IntLit):
            check_loose_size(e.value, e.span, "this integer literal")
            return value(LooseType("int"), loose(e.value), e.span)
        if isinstance(e, ast.FloatLit):
            return value(LooseType("float"), loose(e.value), e.span)
        if isinstance(e, ast.BoolLit):
            c = ConstValue(e.value, BOOL)
            return value(scalar(BOOL), c, e.span)
        if isinstance(e, ast.StrLit):
            return value(STRING, ConstStr(e.value), e.span)
        if isinstance(e, ast.Name):
            return self.lookup(e.id, scope, ctx, e.span)
        if isinstance(e, ast.TupleExpr):
            elems = tuple(self.expr(x, scope, ctx) for x in e.elts)
            return value(TupleType(tuple(x.type for x in elems)), _tuple_const(elems), e.span,
                         elems)
        if isinstance(e, ast.UnaryOp):
            key = {"-": "u-", "+": "u+"}.get(e.op, e.op)
            return self.operator(key, [self.expr(e.operand, scope, ctx)], e.span)
        if isinstance(e, (ast.BinOp, ast.BoolOp, ast.Compare)):
            a = self.expr(e.left, scope, ctx)
            if isinstance(e, ast.BoolOp) and isinstance(a.const, ConstValue) \
                    and isinstance(a.const.value, bool):
                # `false and x` / `true or x`: the right side is not needed, as in Python
                if a.const.value is (e.op == "or"):
                    self.expr(e.right, scope, ctx)
                    return a
            return self.operator(e.op, [a, self.expr(e.right, scope, ctx)], e.span)
        if isinstance(e, ast.IfExpr):
            c = self.condition(e.cond, scope, ctx, "a conditional expression")
            a, b = self.expr(e.then, scope, ctx), self.expr(e.orelse, scope, ctx)
            if is_error(c) or is_error(a) or is_error(b):
                return error_value(e.span)
            if isinstance(c.const, ConstValue) and not c.const.is_symbolic:
                return a if c.const.value else b
            return self.call_builtin(BUILTINS["where"], [c, a, b], {}, e.span)
        if isinstance(e, ast.Call):
            return self.call(e, scope, ctx)
        if isinstance(e, ast.Member):
            return self.member(e, scope, ctx)
        if isinstance(e, ast.Index):
            return self.index(e, scope, ctx)
        if isinstance(e, ast.Slice):
            raise TileSemanticError.at("E0222", "a slice `lo:hi` is only a subscript of a tile",
                                       e.span)
        raise AssertionError(e)  # pragma: no cover

    def operator(self, key: str, operands: list[ArgInfo], span) -> ArgInfo:
        if key in ("==", "!=") and all(isinstance(a.type, DTypeType) for a in operands):
            return _dtype_compare(key, operands, span)
        b = OPERATORS.get(key)
        if b is None:  # pragma: no cover - the grammar only produces known operators
            raise TileSemanticError.at("E0311", f"unknown operator `{key}`", span)
        return self.call_builtin(b, operands, {}, span)

    def call_builtin(self, b: Builtin, pos: list[ArgInfo], kw: dict[str, ArgInfo], span,
                     ctx: Ctx | None = None) -> ArgInfo:
        if any(is_error(a) for a in pos) or any(is_error(a) for a in kw.values()):
            return error_value(span)
        if ctx is not None and ctx.kind == "host" and (b.group in TILE_ONLY_GROUPS
                                                       or b.name in TILE_ONLY_NAMES):
            raise TileSemanticError.at(
                "E0241", f"`{b.name}` is only usable in tile code, but `{ctx.name}` is a "
                         f"`@host` function", span,
                help="a `@host` function may use arithmetic and scalar built-ins only")
        if b.name in NEEDS_SYMMETRIC and getattr(self, "symmetric_kernel", None) is False:
            raise TileSemanticError.at(
                "E0248", f"`{b.name}()` needs a `Symmetric[Array[...]]` parameter, and kernel "
                         f"`{ctx.name if ctx else '?'}` has none", span,
                help="the rank and the world size come with the kernel's symmetric arrays "
                     "(docs/distributed.md)")
        bound = bind_call(b, pos, kw, span)
        t = b.result_type(bound, span)
        args = list(pos) + list(kw.values())
        if b.fold is not None and args and all(a.const is not None for a in args) \
                and any(_symbolic(a.const) for a in args):
            # Arithmetic on an unspecialized const parameter stays symbolic (`BM * 2`), so a
            # shape built from it is checked at specialization.
            return value(t, ConstValue(Sym(_sym_text(b, pos, kw)), None), span)
        const = b.fold(bound, span) if b.can_fold(bound) else None
        if isinstance(const, ConstValue) and const.is_loose is False and \
                isinstance(t, LooseType):
            t = scalar(const.dtype)
        return value(t, const, span)

    def call(self, e: ast.Call, scope: Scope, ctx: Ctx) -> ArgInfo:
        receiver = None
        if isinstance(e.func, ast.Member):
            self.foreign_prefix(e.func, scope, ctx)
            recv = self.expr(e.func.value, scope, ctx)
            if is_error(recv):
                return error_value(e.span)
            if isinstance(recv.type, ModuleType):
                callee = self.module_member(recv.type.info, e.func.attr, e.func.span)
            elif e.func.attr in BUILTINS:
                callee = value(BuiltinType(BUILTINS[e.func.attr]), None, e.func.span)
                receiver = recv
            else:
                raise TileSemanticError.at(
                    "E0221", f"{recv.type} has no method `{e.func.attr}`", e.func.span,
                    help="methods are the built-in operations, such as `x.astype(f16)`")
        else:
            callee = self.expr(e.func, scope, ctx)
        if is_error(callee):
            return error_value(e.span)
        if isinstance(callee.type, BuiltinType) and callee.type.builtin.name == "is_none":
            return self.is_none(callee.type.builtin, e, scope, ctx)
        pos = [self.expr(a.value, scope, ctx) for a in e.args if a.name is None]
        kw = {a.name: replace(self.expr(a.value, scope, ctx), span=a.value.span)
              for a in e.args if a.name is not None}
        if receiver is not None:
            pos.insert(0, receiver)
        ct = callee.type
        if isinstance(ct, BuiltinType):
            if ct.builtin.extra.get("fn_operand"):   # `reduce(x, combine)`: check_combine.py
                pos, kw = self.fn_arguments(ct.builtin, pos, kw, e.span)
            return self.call_builtin(ct.builtin, pos, kw, e.span, ctx)
        if isinstance(ct, DTypeType):
            return self.construct(ct.dtype, pos, kw, e)
        if isinstance(ct, FnType):
            if any(is_error(a) for a in pos) or any(is_error(a) for a in kw.values()):
                return error_value(e.span)
            result = self.instantiate(ct.fn, ct.module, pos, kw, e.span)
            return replace(result, span=e.span)
        if isinstance(ct, KernelType):
            raise TileSemanticError.at(
                "E0220", f"`{ct.kernel.name}` is a kernel: it cannot be called, only launched",
                e.span, help=f"factor the shared code into a `fn` and call that; launch "
                             f"`{ct.kernel.name}` from the host")
        raise TileSemanticError.at("E0223", f"a value of type {ct} cannot be called", e.func.span)

    def is_none(self, b: Builtin, e: ast.Call, scope: Scope, ctx: Ctx) -> ArgInfo:
        """`is_none(x)`: a constant, so `if is_none(x)` keeps one branch per specialization.
        Its argument is the one place an absent optional array may be named."""
        args = []
        for a in e.args:
            b_ = scope.lookup(a.value.id) if isinstance(a.value, ast.Name) and \
                a.name in (None, "A") else None
            if b_ is not None and isinstance(b_.value.type, AbsentArrayType):
                b_.used = True
                args.append((a.name, replace(b_.value, span=a.value.span)))
            else:
                args.append((a.name, replace(self.expr(a.value, scope, ctx), span=a.value.span)))
        pos = [v for n, v in args if n is None]
        kw = {n: v for n, v in args if n is not None}
        if any(is_error(v) for v in pos) or any(is_error(v) for v in kw.values()):
            return error_value(e.span)
        bound = bind_call(b, pos, kw, e.span)
        t = b.result_type(bound, e.span)
        absent = isinstance(bound.args["A"].type, AbsentArrayType)
        return value(t, ConstValue(absent, BOOL), e.span)

    def construct(self, dtype, pos, kw, e: ast.Call) -> ArgInfo:
        if kw or len(pos) != 1:
            raise TileSemanticError.at("E0224", f"`{dtype}(...)` takes one constant", e.span)
        a = pos[0]
        if is_error(a):
            return a
        if not isinstance(a.const, ConstValue):
            raise TileSemanticError.at(
                "E0505", f"`{dtype}(...)` makes a strict constant and takes a constant, "
                         f"found a run-time value of type {a.type}", a.span,
                help=f"convert run-time values with `astype(x, {dtype})`")
        c = construct(dtype, a.const, e.span)
        return value(scalar(dtype), c, e.span)

    def module_member(self, info: ModuleInfo, name: str, span) -> ArgInfo:
        b = info.names.get(name)
        if b is None:
            close = close_matches(name, list(info.names), n=1)
            raise TileSemanticError.at(
                "E0221", f"module `{info.name}` has no `{name}`", span,
                help=f"did you mean `{close[0]}`?" if close else
                f"it defines: {', '.join(sorted(info.names)) or 'nothing'}")
        return replace(b.value, span=span)

    def foreign_prefix(self, e: ast.Member, scope: Scope, ctx: Ctx) -> None:
        """`tl.exp`: an unbound prefix that is another language's module (foreign_names.py)."""
        if isinstance(e.value, ast.Name) and scope.lookup(e.value.id) is None and \
                e.value.id not in ctx.module.names:
            from .foreign_names import foreign_member     # error path only, as in `lookup`
            help = foreign_member(e.value.id, e.attr)
            if help is not None:
                raise TileSemanticError.at("E0201", f"cannot find `{e.value.id}` in this "
                                           "scope", e.value.span, help=help)

    def member(self, e: ast.Member, scope: Scope, ctx: Ctx) -> ArgInfo:
        self.foreign_prefix(e, scope, ctx)
        v = self.expr(e.value, scope, ctx)
        if is_error(v):
            return v
        t = v.type
        if isinstance(t, ModuleType):
            return self.module_member(t.info, e.attr, e.span)
        if isinstance(t, TileType):
            if e.attr == "shape":
                elems = tuple(value(LooseType("int"), ConstValue(d, None), e.span)
                              for d in t.shape)
                return value(TupleType(tuple(x.type for x in elems)), _tuple_const(elems),
                             e.span, elems)
            if e.attr == "dtype":
                return value(DTypeType(t.dtype), None, e.span)
            if e.attr == "ndim":
                return value(LooseType("int"), loose(len(t.shape)), e.span)
        if isinstance(t, ArrayType):
            if e.attr in ("shape", "stride"):
                elems = tuple(value(scalar(I32), None, e.span) for _ in range(t.rank))
                return value(TupleType(tuple(x.type for x in elems)), None, e.span, elems)
            if e.attr == "dtype":
                return value(DTypeType(t.dtype), None, e.span)
            if e.attr == "ndim":
                return value(LooseType("int"), loose(t.rank), e.span)
        members = {TileType: "`shape`, `dtype`, `ndim`", ArrayType: "`shape`, `stride`, `dtype`, "
                   "`ndim`"}.get(type(t))
        raise TileSemanticError.at(
            "E0221", f"{t} has no member `{e.attr}`", e.span,
            help=f"its members are {members}" if members else None)

    def index(self, e: ast.Index, scope: Scope, ctx: Ctx) -> ArgInfo:
        v = self.expr(e.value, scope, ctx)
        if is_error(v):
            return v
        if isinstance(v.type, TupleType):
            if len(e.indices) != 1 or isinstance(e.indices[0], ast.Slice):
                raise TileSemanticError.at("E0222", "a tuple takes one integer index", e.span)
            i = self.const_int(e.indices[0], scope, ctx, "a tuple index")
            n = len(v.type.elements)
            if not -n <= i < n:
                raise TileSemanticError.at(
                    "E0222", f"index {i} is out of range for a tuple of {n} element"
                             f"{'s' if n != 1 else ''}", e.indices[0].span)
            elems = v.elements or tuple(
                value(t, c, e.span) for t, c in zip(
                    v.type.elements, v.const.items if isinstance(v.const, ConstTuple)
                    else (None,) * n))
            return replace(elems[i], span=e.span)
        if isinstance(v.type, ArrayListType):
            if len(e.indices) != 1:
                raise TileSemanticError.at(
                    "E0247", f"a list of arrays takes one index, found {len(e.indices)}",
                    e.span, help="`ws[e]` is array `e` of the list; index it with "
                                 "`load(ws[e], ...)`")
            i = self.expr(e.indices[0], scope, ctx)
            return self.call_builtin(BUILTINS["list_item"], [v, i], {}, e.span, ctx)
        if isinstance(v.type, ArrayType):
            return self.array_subscript(e, v, scope, ctx)
        if isinstance(v.type, TileType) and v.type.shape:
            return self.tile_subscript(e, v, scope, ctx)
        raise TileSemanticError.at("E0222", f"a value of type {v.type} cannot be indexed",
                                   e.span)


# ---------------------------------------------------------------------------------------------
# helpers


def _dtype_compare(key: str, operands: list[ArgInfo], span) -> ArgInfo:
    """`T == f32`, `x.dtype != bf16`: dtypes compare at compile time, to a bool constant
    (docs/language.md, "Generic kernels")."""
    a, b = (o.type.dtype for o in operands)
    if a is None or b is None or a.is_var or b.is_var:
        raise NeedsValue(span, "comparing dtypes needs their values")
    return value(scalar(BOOL), ConstValue((a == b) == (key == "=="), BOOL), span)


def _symbolic(c) -> bool:
    if isinstance(c, ConstValue):
        return c.is_symbolic
    if isinstance(c, ConstTuple):
        return any(_symbolic(i) for i in c.items)
    return False


def _sym_text(b: Builtin, pos, kw) -> str:
    args = [str(a.const) for a in pos]
    if b.symbol and len(args) == 2 and not kw:
        return f"({args[0]} {b.symbol} {args[1]})"
    if b.symbol and len(args) == 1 and not kw:
        return f"{b.symbol.lstrip('u')}{args[0]}"
    args += [f"{k}={a.const}" for k, a in kw.items()]
    return f"{b.name}({', '.join(args)})"


def _tuple_const(elems) -> ConstTuple | None:
    if all(x.const is not None for x in elems):
        return ConstTuple(tuple(x.const for x in elems))
    return None
