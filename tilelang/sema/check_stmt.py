"""The checker's statement walk: scopes (bindings, their typed-ast records, unused-variable
warnings), blocks, `let`/`var`, assignment, `if`, `for` (run-time and `static`), `while`,
`break`/`continue` and `return`, with the statement budget that bounds unrolling. Part of
`Checker` (tilelang/sema/checker.py).
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from ..diagnostics import Label, Span, TileError, TileSemanticError
from ..frontend import ast
from ..record import replace
from .builtins_core import ArgInfo
from .check_context import (EIGHTHS, MAX_ERRORS, MAX_STATIC_ITERATIONS, MAX_UNROLLED_STATEMENTS,
                            BindingRecord, Ctx, NeedsValue, Scope, TooLarge, with_note)
from .constants import ConstTuple, ConstValue, as_int, loose, materialize, truth
from .types import (DEFAULT_FLOAT, DEFAULT_INT, I32, VOID, DTypeType, LooseType, TileType,
                    TupleType, scalar)
from .values import Binding, error_value, is_error, value


class StatementChecks:
    """Scopes and statements: the part of `Checker` that walks bodies."""

    # ---- scopes ----
    def declare_local(self, scope: Scope, name: str, kind: str, val: ArgInfo, span, ctx: Ctx,
                      used: bool = False, record: bool = True) -> None:
        scope.names[name] = Binding(name, kind, val, span, span, used)
        if record:
            self.record(ctx.label, span, kind, name, val)

    def record(self, context: str, span, kind: str, name: str, v: ArgInfo) -> None:
        key = (context, span, name)
        if key in self._record_keys:
            return
        self._record_keys.add(key)
        self.records.append(BindingRecord(context, span, kind, name, v.type, v.const))

    def finish_scope(self, scope: Scope) -> None:
        for b in scope.names.values():
            if not b.used and b.kind in ("let", "var", "loop") and not b.name.startswith("_") \
                    and not is_error(b.value):
                self.warn("W0201", f"unused variable `{b.name}`", b.span,
                          help=f"remove it, or name it `_{b.name}` if it is unused on purpose")

    @contextmanager
    def child(self, scope: Scope) -> Iterator[Scope]:
        inner = Scope(scope)
        yield inner
        self.finish_scope(inner)

    # ---- statements ----
    def block(self, b: ast.Block, scope: Scope, ctx: Ctx, new_scope: bool = True) -> None:
        if new_scope:
            with self.child(scope) as inner:
                self.stmts(b.stmts, inner, ctx)
        else:
            self.stmts(b.stmts, scope, ctx)

    def stmts(self, stmts, scope: Scope, ctx: Ctx) -> None:
        for s in stmts:
            if self.error_count >= MAX_ERRORS:
                return
            try:
                self.stmt(s, scope, ctx)
            except TileError as e:
                if any(d.code == "E0408" for d in e.diagnostics):
                    d = next(d for d in e.diagnostics if d.code == "E0408")
                    raise NeedsValue(d.span, d.message) from None
                self.report([with_note(d, ctx.note) for d in e.diagnostics] if ctx.note
                            else e.diagnostics)

    def charge(self, cost: int, span: Span | None) -> None:
        """Spend `cost` eighths of a statement of the unrolling budget (E0216)."""
        self.statements += cost
        if self.statements > MAX_UNROLLED_STATEMENTS * EIGHTHS:
            raise TooLarge(span)

    def stmt(self, s: ast.Stmt, scope: Scope, ctx: Ctx) -> None:
        self.charge(EIGHTHS, getattr(s, "span", None))
        if isinstance(s, ast.Let):
            self.let(s, scope, ctx)
        elif isinstance(s, ast.Assign):
            self.assign(s.target, self.expr(s.value, scope, ctx), scope, ctx, s.span)
        elif isinstance(s, ast.AugAssign):
            cur = self.expr(s.target, scope, ctx) if isinstance(s.target, ast.Name) else None
            if cur is None:
                raise TileSemanticError.at("E0205", "only a `var` name can be updated",
                                           s.target.span)
            rhs = self.expr(s.value, scope, ctx)
            new = self.operator(s.op, [cur, rhs], s.span)
            self.assign(s.target, new, scope, ctx, s.span)
        elif isinstance(s, ast.ExprStmt):
            v = self.expr(s.expr, scope, ctx)
            if not is_error(v) and v.type is not VOID and _pure_expr(s.expr):
                self.warn("W0202", "the value of this expression is not used", s.expr.span,
                          help="bind it with `let`, or remove it")
        elif isinstance(s, ast.If):
            self.if_stmt(s, scope, ctx)
        elif isinstance(s, ast.While):
            self.while_stmt(s, scope, ctx)
        elif isinstance(s, ast.For):
            self.for_stmt(s, scope, ctx)
        elif isinstance(s, (ast.Break, ast.Continue)):
            if ctx.loop_depth == 0:
                word = "break" if isinstance(s, ast.Break) else "continue"
                raise TileSemanticError.at("E0210", f"`{word}` outside a loop", s.span,
                                           help=f"`{word}` may only appear inside `for` or "
                                                f"`while`")
        elif isinstance(s, ast.Return):
            self.return_stmt(s, scope, ctx)
        elif isinstance(s, ast.Block):
            self.block(s, scope, ctx)
        else:  # pragma: no cover
            raise AssertionError(s)

    def while_stmt(self, s: ast.While, scope: Scope, ctx: Ctx) -> None:
        self.condition(s.cond, scope, ctx, "`while`")
        ctx.loop_depth += 1
        ctx.run_loops += 1
        try:
            self.block(s.body, scope, ctx)
        finally:
            ctx.loop_depth -= 1
            ctx.run_loops -= 1

    def let(self, s: ast.Let, scope: Scope, ctx: Ctx) -> None:
        kind = "var" if s.mutable else "let"
        try:
            v = self.expr(s.value, scope, ctx)
            if s.type is not None:
                t = self.resolve_type(s.type, scope, ctx)
                v = self.coerce(v, t, s.value.span, f"`{', '.join(s.names)}`")
        except TileError:
            for n, sp in zip(s.names, s.name_spans):
                self.declare_local(scope, n, kind, error_value(sp), sp, ctx, used=True,
                                   record=False)
            raise
        if s.is_tuple:
            elems = self.unpack(v, len(s.names), s.value.span)
        else:
            elems = [v]
        for n, sp, e in zip(s.names, s.name_spans, elems):
            if s.mutable:
                e = self.fix_var_type(e, sp)
            self.declare_local(scope, n, kind, replace(e, span=sp), sp, ctx)

    def fix_var_type(self, v: ArgInfo, span) -> ArgInfo:
        """A `var` has one dtype and shape for its life, and no constant value (it changes)."""
        if is_error(v):
            return v
        if isinstance(v.type, LooseType):
            dt = DEFAULT_FLOAT if v.type.kind == "float" else DEFAULT_INT
            materialize(v.const, dt, span)
            return value(scalar(dt), None, span)
        if isinstance(v.type, TileType):
            return value(v.type, None, span)
        if isinstance(v.type, TupleType) and v.elements:
            elems = tuple(self.fix_var_type(e, span) for e in v.elements)
            return value(TupleType(tuple(e.type for e in elems)), None, span, elems)
        raise TileSemanticError.at("E0321", f"a `var` cannot hold {v.type}", span,
                                   help="bind it with `let`")

    def unpack(self, v: ArgInfo, n: int, span) -> list[ArgInfo]:
        if is_error(v):
            return [v] * n
        if not isinstance(v.type, TupleType):
            raise TileSemanticError.at("E0206", f"cannot unpack {v.type} into {n} names", span)
        if len(v.type.elements) != n:
            raise TileSemanticError.at(
                "E0206", f"this tuple has {len(v.type.elements)} element"
                         f"{'s' if len(v.type.elements) != 1 else ''}, but the pattern names {n}",
                span)
        if v.elements is not None:
            return list(v.elements)
        consts = v.const.items if isinstance(v.const, ConstTuple) else (None,) * n
        return [value(t, c, span) for t, c in zip(v.type.elements, consts)]

    def assign(self, target: ast.Expr, v: ArgInfo, scope: Scope, ctx: Ctx, span) -> None:
        if not isinstance(target, ast.Name):
            raise TileSemanticError.at(
                "E0205", "only a `var` name can be assigned", target.span,
                help="arrays are written with `store(A, index = ..., tile = ...)`"
                if isinstance(target, ast.Index) else None)
        b = scope.lookup(target.id)
        if b is None:
            if target.id in ctx.module.names:
                b2 = ctx.module.names[target.id]
                raise TileSemanticError.at(
                    "E0203", f"cannot assign to the module-level {b2.kind} `{target.id}`",
                    target.span)
            found = self.lookup(target.id, scope, ctx, target.span)  # E0201 with a suggestion
            what = "the dtype" if isinstance(found.type, DTypeType) else "the built-in"
            raise TileSemanticError.at(
                "E0203", f"cannot assign to {what} `{target.id}`", target.span,
                help=f"`{target.id}` cannot be re-bound; declare a `var` with another name")
        if b.kind != "var":
            what = {"let": "immutable", "param": "the parameter", "const": "the constant",
                    "loop": "the loop variable"}.get(b.kind, b.kind)
            raise TileSemanticError.at(
                "E0203", f"cannot assign twice to {what} `{target.id}`", target.span,
                related=(Label(b.span, "declared here"),) if b.span else (),
                help=f"declare it with `var {target.id} = ...` to re-bind it"
                if b.kind == "let" else None)
        if is_error(v) or is_error(b.value):
            return
        old = b.value.type
        if isinstance(v.type, LooseType) and isinstance(old, TileType) and not old.shape:
            materialize(v.const, old.dtype, v.span or span)
        elif not v.type == old:
            raise TileSemanticError.at(
                "E0204", f"`{target.id}` is {old}, but this assigns {v.type}", v.span or span,
                related=(Label(b.assigned_at, f"`{target.id}` got its type {old} here"),)
                if b.assigned_at else (),
                help="a `var` keeps one dtype and shape; convert with `astype` or "
                     "declare a new name")
        b.assigned_at = target.span
        self.record(ctx.label, target.span, "set", target.id, value(old, None))

    def if_stmt(self, s: ast.If, scope: Scope, ctx: Ctx) -> None:
        c = self.condition(s.cond, scope, ctx, "`if`")
        if isinstance(c.const, ConstValue) and not c.const.is_symbolic:
            taken = truth(c.const, s.cond.span)
            if taken:
                self.block(s.then, scope, ctx)
            elif s.orelse is not None:
                self.else_part(s.orelse, scope, ctx)
            return
        frame = ctx.kind == "fn" and c.const is None and not is_error(c)
        if frame:  # a `return` in here compiles only if every path of this `if` returns
            ctx.if_frames.append(id(s) in ctx.liftable)
        try:
            self.block(s.then, scope, ctx)
            if s.orelse is not None:
                self.else_part(s.orelse, scope, ctx)
        finally:
            if frame:
                ctx.if_frames.pop()

    def else_part(self, e, scope, ctx) -> None:
        if isinstance(e, ast.If):
            try:
                self.if_stmt(e, scope, ctx)
            except TileError as err:
                self.report(err.diagnostics)
        else:
            self.block(e, scope, ctx)

    def condition(self, e: ast.Expr, scope, ctx, what: str) -> ArgInfo:
        v = self.expr(e, scope, ctx)
        if is_error(v):
            return v
        t = v.type
        if not (isinstance(t, TileType) and not t.shape and t.dtype.is_bool):
            hint = "compare it: `x != 0`" if isinstance(t, (TileType, LooseType)) and \
                not (isinstance(t, TileType) and t.shape) else \
                "reduce the tile first, for example with `max(...)` of a comparison"
            raise TileSemanticError.at("E0322", f"the condition of {what} must be a bool "
                                                f"scalar, found {t}", e.span, help=hint)
        return v

    def for_stmt(self, s: ast.For, scope: Scope, ctx: Ctx) -> None:
        it = s.iter
        if not (isinstance(it, ast.Call) and isinstance(it.func, ast.Name)
                and it.func.id == "range" and scope.lookup("range") is None):
            raise TileSemanticError.at("E0212", "`for` loops iterate over `range(...)`",
                                       it.span, help="write `for i in range(n) { ... }`")
        if any(a.name is not None for a in it.args) or not 1 <= len(it.args) <= 3:
            raise TileSemanticError.at(
                "E0212", f"`range` takes 1 to 3 positional arguments, found {len(it.args)}",
                it.span, help="`range(stop)`, `range(start, stop)` or `range(start, stop, step)`")
        args = [self.expr(a.value, scope, ctx) for a in it.args]
        if any(is_error(a) for a in args):
            bounds = None
        else:
            for a in args:
                t = a.type
                if not ((isinstance(t, LooseType) and t.kind == "int") or
                        (isinstance(t, TileType) and not t.shape and t.dtype.is_int)):
                    raise TileSemanticError.at("E0212", f"`range` takes integer scalars, found "
                                                        f"{t}", a.span)
            bounds = args
        start = stop = step = None
        if bounds is not None:
            start = bounds[0] if len(bounds) > 1 else value(LooseType("int"), loose(0))
            stop = bounds[1] if len(bounds) > 1 else bounds[0]
            step = bounds[2] if len(bounds) > 2 else value(LooseType("int"), loose(1))
            if isinstance(step.const, ConstValue) and not step.const.is_symbolic \
                    and step.const.value <= 0:
                raise TileSemanticError.at(
                    "E0213", f"the step of `range` must be strictly positive, found "
                             f"{step.const.value}", step.span or it.span,
                    help="count down by iterating up and computing the index: "
                         "`let j = n - 1 - i;`")
        if s.is_static:
            self.static_for(s, bounds, start, stop, step, scope, ctx)
            return
        dt = I32
        if bounds is not None:
            strict = [a.type.dtype for a in (start, stop, step) if isinstance(a.type, TileType)]
            dt = strict[0] if strict else I32
            for a in strict[1:]:
                if a != dt:
                    from .promotion import promote
                    dt = promote(dt, a, it.span)
            for a in (start, stop, step):  # constant bounds take the loop's dtype
                if isinstance(a.const, ConstValue) and a.const.is_loose:
                    materialize(a.const, dt, a.span or it.span)
        self.for_body(s, scope, ctx, dt, (start, stop, step) if bounds is not None else None)

    def for_body(self, s: ast.For, scope: Scope, ctx: Ctx, dt, bounds) -> None:
        """A run-time `for` loop's body (the AST lowering overrides this to emit the loop)."""
        ctx.loop_depth += 1
        ctx.run_loops += 1
        try:
            with self.child(scope) as inner:
                self.declare_local(inner, s.var, "loop", value(scalar(dt), None, s.var_span),
                                   s.var_span, ctx)
                self.block(s.body, inner, ctx, new_scope=False)
        finally:
            ctx.loop_depth -= 1
            ctx.run_loops -= 1

    def static_for(self, s, bounds, start, stop, step, scope, ctx) -> None:
        if bounds is None:
            return
        vals = []
        for a in (start, stop, step):
            if not isinstance(a.const, ConstValue):
                raise TileSemanticError.at(
                    "E0214", "the bounds of `static for` must be constants", a.span or s.iter.span,
                    help="use a plain `for` for a run-time bound")
            if a.const.is_symbolic:
                raise NeedsValue(a.span, "the bounds of a `static for` depend on it")
            vals.append(as_int(a.const, a.span, "a `static for` bound"))
        r = range(*vals)
        count = max(0, -((vals[0] - vals[1]) // vals[2]))  # len(r) overflows past 2**63
        if count > MAX_STATIC_ITERATIONS:
            raise TileSemanticError.at(
                "E0214", f"`static for` would unroll {count} iterations; the limit is "
                         f"{MAX_STATIC_ITERATIONS}", s.iter.span,
                help="use a plain `for` loop")
        ctx.loop_depth += 1
        try:
            for i in r:
                self.charge(EIGHTHS, s.span)
                with self.child(scope) as inner:
                    self.declare_local(inner, s.var, "loop", value(LooseType("int"), loose(i),
                                                                   s.var_span),
                                       s.var_span, ctx, used=True, record=(i == r.start))
                    self.block(s.body, inner, ctx, new_scope=False)
        finally:
            ctx.loop_depth -= 1

    def return_stmt(self, s: ast.Return, scope: Scope, ctx: Ctx) -> None:
        if ctx.kind == "fn" and (ctx.run_loops or not all(ctx.if_frames)):
            raise TileSemanticError.at(  # what the lowering cannot inline (ir/build.py)
                "E0261", f"`return` inside a run-time `if` or loop of `fn {ctx.name}` cannot be "
                         f"compiled yet", s.span,
                help="compute the result in a `var` and return it at the end of the function, "
                     "or use `where(cond, a, b)`; a `return` in an `if` whose every path "
                     "returns is fine")
        if ctx.kind == "kernel":
            if s.value is not None:
                raise TileSemanticError.at(
                    "E0211", "a kernel cannot return a value", s.value.span,
                    help="write results to an array with `store`; `return;` ends the block")
            return
        try:
            v = self.expr(s.value, scope, ctx) if s.value is not None else value(VOID, None,
                                                                                 s.span)
        except TileError:
            ctx.returns.append(error_value(s.span))  # counts as a return: no follow-on error
            raise
        ctx.returns.append(replace(v, span=s.value.span if s.value is not None else s.span))


# ---------------------------------------------------------------------------------------------
# helpers


def _pure_expr(e: ast.Expr) -> bool:
    """Expressions whose value being dropped is surely a mistake (no call inside)."""
    return not any(isinstance(n, ast.Call) for n in e.walk())
