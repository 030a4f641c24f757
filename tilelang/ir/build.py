"""Building Tile IR from the checked syntax tree: the builder that knows the source, above
`KernelBuilder` (builder.py), which knows only IR operations.

The checker already evaluates every expression to the registry's `ArgInfo` (type, constant
value) and binds every call to `BoundArgs`. The builder is the same walk with one addition:
each run-time `ArgInfo` carries the IR value computing it (`ArgInfo.ir`), and every call with
a run-time result, or with effects, is emitted through `KernelBuilder.call_bound`. So the IR
gets exactly the types, promotions and constant folds the checker decided, by construction.
`SourceBuilder` extends `sema.checker.Checker` through the hooks that class documents as its
public interface (docs/ir.md, "Building IR from source"), and nothing else of sema's.

What the walk does beyond checking:
- `const` parameters are specialized: they must have a value (-D, a default, or the runtime's
  specialization); a kernel is built once per value set.
- functions are inlined at every call (the checker's per-signature cache is bypassed);
- a `var` assigned inside an `if` or a loop becomes a value the region yields or carries;
- `break`, `continue` and `return` are terminators; the statements after one are dead code.
The builder runs on source the checker accepted; what it still refuses (a `return` inside
run-time control flow of a `fn`, a `var` holding a tuple across a region) is a diagnostic.
"""

from __future__ import annotations

from typing import Iterable, Sequence

from tilelang.diagnostics import InternalCompilerError, TileError, TileSemanticError, \
    register_codes
from tilelang.frontend import ast
from tilelang.options import CompileOptions
from tilelang.record import replace
from tilelang.sema.builtins import BUILTINS, Builtin, bind_call
from tilelang.sema.builtins_core import ArgInfo, DTypeType
from tilelang.sema.check_context import Ctx, NeedsValue, Scope
from tilelang.sema.checker import Checker
from tilelang.sema.control_flow import returning_else
from tilelang.sema.control_flow import returns_on_every_path as _returns
from tilelang.sema.launch_attrs import is_by_target
from tilelang.sema.constants import ConstStr, ConstTuple, ConstValue, loose
from tilelang.sema.types import (BOOL, ArrayType, LooseType, OptionalArrayType, TileType,
                                 TupleType, scalar)
from tilelang.sema.values import is_error, value

from tilelang.ir.args import FnArg
from tilelang.ir.builder import IRBuildError, KernelBuilder
from tilelang.ir.ops import BuiltinOp, ConstantOp, IRModule, Kernel, YieldOp
from tilelang.ir.values import Value

register_codes({
    "E0260": "a `const` kernel parameter has no value to compile with",
    "E0261": "this construct cannot be compiled yet",
})

_LAUNCH_KEYS = ("maxntid", "reqntid", "minctasm", "maxnreg", "cluster", "maxclusterrank",
                "blocksareclusters", "nonportable_cluster")


class SourceBuilder(Checker):
    """A checker that also emits Tile IR for the kernels it walks."""

    def __init__(self, options: CompileOptions, kernels: Iterable[str] | None = None):
        super().__init__(options)
        self.only = set(kernels) if kernels is not None else None
        self.kb: KernelBuilder | None = None
        self.kernels: list[Kernel] = []
        self.loops: list[list] = []          # the carried bindings of each enclosing loop
        self.return_regions: set[int] = set()  # region depths of returning ifs' branches
        self.fn_depth: list[int] = []        # len(self.loops) where each inlined fn started
        self.region_depth = 0                # run-time regions (if/loop) entered

    # ---- module and kernels ---------------------------------------------------------------
    def check_fn_alone(self, f, info) -> None:
        """Functions are lowered where they are called; the checker already checked them."""

    def check_kernel(self, k: ast.KernelDef, info):
        if self.only is not None and k.name not in self.only:
            return None
        self.kb = KernelBuilder(k.name, span=k.name_span)
        self.loops, self.fn_depth, self.region_depth = [], [], 0
        try:
            kinfo = super().check_kernel(k, info)
        finally:
            kb, self.kb = self.kb, None
        if kinfo is None or self.error_count:
            return kinfo
        kb.const_choices = kinfo.const_choices
        spec = kinfo.launch
        if spec is not None:
            kb.launch = spec
            kb.attributes = {key: getattr(spec, key) for key in _LAUNCH_KEYS
                             if getattr(spec, key) not in (None, False)}
        try:
            self.kernels.append(kb.finish())
        except IRBuildError as e:
            raise _internal(f"lowering `{k.name}`: {e}", k.name_span) from None
        return kinfo

    def kernel_param(self, p: ast.Param, scope: Scope, ctx: Ctx):
        name, t, is_const, val = super().kernel_param(p, scope, ctx)
        if not is_const and self.kb is not None:
            b = scope.names[name]
            # an optional array keeps its ABI slots whether or not this specialization has
            # one (docs/abi.md, "Optional arrays"): the IR parameter is the array
            ir_type = t.array if isinstance(t, OptionalArrayType) else t
            b.value = replace(b.value, ir=self.kb.param(name, ir_type))
        return name, t, is_const, val

    def const_param_value(self, p: ast.Param, dtype, scope, ctx) -> ConstValue:
        v = super().const_param_value(p, dtype, scope, ctx)
        if self.kb is not None and v.is_symbolic and is_by_target(p.default):
            raise TileSemanticError.at(
                "E0260", f"`const {p.name}` has no value on {self.target.name}, so kernel "
                         f"`{ctx.name}` cannot be compiled for it", p.default.span,
                help=f"its `by_target` has neither a `{self.target.name}` nor a `default` "
                     f"entry: add one, or pass `-D {p.name}=VALUE`")
        if self.kb is not None and v.is_symbolic:
            raise TileSemanticError.at(
                "E0260", f"`const {p.name}` has no value, so kernel `{ctx.name}` cannot be "
                         f"compiled", p.span,
                help=f"give it a default (`const {p.name}: {dtype} = ...`), pass "
                     f"`-D {p.name}=VALUE`, or specialize it at launch")
        return v

    def dtype_param_value(self, p: ast.Param, scope, ctx):
        d = super().dtype_param_value(p, scope, ctx)
        if self.kb is not None and d.is_var:
            raise TileSemanticError.at(
                "E0260", f"`const {p.name}: dtype` has no value, so kernel `{ctx.name}` "
                         f"cannot be compiled", p.span,
                help=f"pass `-D {p.name}=f16` (or another dtype), give it a default "
                     f"(`const {p.name}: dtype = f16`), or launch it with arrays: their "
                     f"dtypes fix `{p.name}`")
        return d

    def stmts(self, stmts, scope: Scope, ctx: Ctx) -> None:
        if self.kb is None:
            return super().stmts(stmts, scope, ctx)
        stmts = list(stmts)
        for i, s in enumerate(stmts):
            if self.terminated():
                return  # dead code after break/continue/return
            try:
                if isinstance(s, ast.If) and ctx.kind != "kernel" and self.fn_depth and \
                        _returns(s.then) and self.returning_if(s, stmts[i + 1:], scope, ctx):
                    return
                self.stmt(s, scope, ctx)
            except NeedsValue as nv:  # pragma: no cover - consts are specialized
                raise _internal(nv.message, nv.span) from None
            except TileError as e:
                self.report(e.diagnostics)
                raise
            except IRBuildError as e:
                raise _internal(str(e), getattr(s, "span", None)) from None

    def terminated(self) -> bool:
        ops = self.kb._stack[-1]
        return bool(ops) and ops[-1].is_terminator

    # ---- values ---------------------------------------------------------------------------
    def runtime_arg(self, a: ArgInfo):
        """The IR argument for an ArgInfo with a run-time part (None when it is constant)."""
        if a.ir is not None:
            return a.ir
        if isinstance(a.type, TupleType) and a.elements is not None and \
                any(e.const is None for e in a.elements):
            return tuple(self.runtime_arg(e) if e.const is None else e.const
                         for e in a.elements)
        if a.const is not None or isinstance(a.type, DTypeType):
            return None
        raise _internal(f"no IR value for a run-time {a.type}", a.span)

    def materialize(self, a: ArgInfo, t=None) -> Value:
        """An IR value for `a`: its own, or a constant op (of `t`'s dtype for a loose one)."""
        if a.ir is not None:
            return a.ir
        t = t if t is not None else a.type
        if isinstance(a.const, ConstValue) and isinstance(t, TileType) and not t.shape:
            return self.kb.constant(a.const, t.dtype, a.span)
        raise TileSemanticError.at(
            "E0261", f"a value of type {a.type} cannot be carried through run-time control "
                     f"flow", a.span, help="bind the parts to separate `var`s")

    def call_builtin(self, b: Builtin, pos: list[ArgInfo], kw: dict[str, ArgInfo], span,
                     ctx: Ctx | None = None) -> ArgInfo:
        res = super().call_builtin(b, pos, kw, span, ctx)
        if self.kb is None or is_error(res) or b.name == "static_assert":
            return res
        if res.const is not None and not b.side_effects:
            return res  # folded: constants stay inline in the ops that use them
        bound = bind_call(b, pos, kw, span)
        values = {}
        for name, a in bound.args.items():
            if a is not None:
                r = self.runtime_arg(a)
                if r is not None:
                    values[name] = r
        varargs = None
        if any(v.const is None for v in bound.varargs):
            varargs = [self.runtime_arg(v) if v.const is None else v.const
                       for v in bound.varargs]
        r = self.kb.call_bound(bound, values, varargs, span)
        if isinstance(r, tuple):      # one op per element of a tuple result (builder.py)
            elems = res.elements or tuple(value(t, None, span) for t in res.type.elements)
            return replace(res, elements=tuple(replace(e, ir=v) for e, v in zip(elems, r)))
        return replace(res, ir=r)

    def call_combine(self, ct, args: list[ArgInfo], dtypes, span):
        """The combine function inlined into a region of its own (sema/check_combine.py):
        block arguments for the two states, the body, a yield of the combined state."""
        if self.kb is None:
            return super().call_combine(ct, args, dtypes, span)
        leaves = []
        args = [self._leaves_new(a, leaves) for a in args]
        sink: list = []
        with self.kb._region(tuple(leaves), sink, auto_yield=False):
            res, _ = super().call_combine(ct, args, dtypes, span)
            outs = list(res.elements) if len(dtypes) > 1 and res.elements is not None \
                else [res]
            if len(outs) == len(dtypes):
                self.kb.yield_(*(self.materialize(o, scalar(d)) for o, d in zip(outs, dtypes)),
                               span=span)
        body = sink[0]
        if len(outs) != len(dtypes):
            return res, None                      # the checker reports the result's type
        bad = next((op for op in body.ops if not _straight(op)), None)
        if bad is not None:
            raise TileSemanticError.at(
                "E0530", f"the combine function `{getattr(ct, 'fn', None) and ct.fn.name}` "
                         f"must be straight-line code without effects", bad.span or span,
                help="choose between values with `where(cond, a, b)` instead of `if`; "
                     "a combine function cannot loop, store or print")
        return res, body

    def _leaves_new(self, a: ArgInfo, out: list) -> ArgInfo:
        """`a` (a scalar or a tuple of scalars) with a fresh block argument for each scalar."""
        if a.elements is not None:
            return replace(a, elements=tuple(self._leaves_new(e, out) for e in a.elements))
        v = self.kb.new_value(a.type)
        out.append(v)
        return replace(a, ir=v)

    def combine_fn(self, b, f, dtypes, span):
        res = super().combine_fn(b, f, dtypes, span)
        if self.kb is None or res.ir is None:
            return res
        return replace(res, ir=FnArg(res.type, res.ir))

    def member(self, e: ast.Member, scope: Scope, ctx: Ctx) -> ArgInfo:
        v = super().member(e, scope, ctx)
        if self.kb is None or is_error(v) or e.attr not in ("shape", "stride") or \
                v.const is not None:
            return v  # a tile's shape is constant; only an array's is read at run time
        base = self.expr(e.value, scope, ctx)
        if not isinstance(base.type, ArrayType):
            return v
        entry = BUILTINS["dim" if e.attr == "shape" else "stride"]
        elems = tuple(self.call_builtin(entry, [base, value(LooseType("int"), loose(k), e.span)],
                                        {}, e.span) for k in range(base.type.rank))
        return replace(v, elements=elems)

    def fix_var_type(self, v: ArgInfo, span) -> ArgInfo:
        res = super().fix_var_type(v, span)
        if self.kb is None or is_error(res) or not isinstance(res.type, TileType):
            return res
        return replace(res, ir=self.materialize(v, res.type))

    def assign(self, target: ast.Expr, v: ArgInfo, scope: Scope, ctx: Ctx, span) -> None:
        super().assign(target, v, scope, ctx, span)
        if self.kb is None or is_error(v):
            return
        b = scope.lookup(target.id)
        b.value = self.carry(b.value, v)

    def carry(self, held: ArgInfo, v: ArgInfo) -> ArgInfo:
        """The `var` value `held` now holding `v`'s run-time values (a tuple part by part)."""
        if isinstance(held.type, TupleType) and held.elements is not None \
                and v.elements is not None:
            return replace(held, ir=None, elements=tuple(
                self.carry(h, e) for h, e in zip(held.elements, v.elements)))
        return replace(held, ir=self.materialize(v, held.type))

    # ---- functions --------------------------------------------------------------------------
    def instantiate(self, f, info, pos, kw, span, standalone=False) -> ArgInfo:
        if self.kb is None:
            return super().instantiate(f, info, pos, kw, span, standalone)
        self.forget_instances()  # inline every call: the values differ per call site
        self.fn_depth.append(self.region_depth)
        try:
            res = super().instantiate(f, info, pos, kw, span, standalone)
        finally:
            self.fn_depth.pop()
            self.forget_instances()
        return res

    def return_stmt(self, s: ast.Return, scope: Scope, ctx: Ctx) -> None:
        if self.kb is None:
            return super().return_stmt(s, scope, ctx)
        if ctx.kind == "kernel":
            super().return_stmt(s, scope, ctx)
            self.kb.return_(span=s.span)
            return
        if self.fn_depth and self.region_depth > self.fn_depth[-1] and \
                self.region_depth not in self.return_regions:
            raise TileSemanticError.at(
                "E0261", f"`return` inside a run-time `if` or loop of `fn {ctx.name}` cannot be "
                         f"compiled yet", s.span,
                help="compute the result in a `var` and return it at the end of the function, "
                     "or use `where(cond, a, b)`; a `return` in an `if` whose every path "
                     "returns is fine")
        if ctx.returns:
            raise TileSemanticError.at(
                "E0261", f"`fn {ctx.name}` returns more than once, which cannot be compiled yet",
                s.span, help="return once, at the end of the function")
        super().return_stmt(s, scope, ctx)
        # the statements after it are dead: end the walk of this body
        raise _Returned()

    def block(self, b: ast.Block, scope: Scope, ctx: Ctx, new_scope: bool = True) -> None:
        if self.kb is not None and ctx.kind != "kernel" and self.call_stack and \
                b is self.call_stack[-1][0].body:
            try:
                super().block(b, scope, ctx, new_scope)
            except _Returned:
                pass  # the rest of the function body is dead code
            return
        super().block(b, scope, ctx, new_scope)

    # ---- control flow ---------------------------------------------------------------------
    def carried(self, body: Sequence[ast.Node], scope: Scope) -> list:
        """The `var` bindings visible here that `body` assigns (in source order, once each)."""
        out, seen = [], set()
        for node in body:
            for n in node.walk():
                if isinstance(n, (ast.Assign, ast.AugAssign)) and isinstance(n.target, ast.Name):
                    b = scope.lookup(n.target.id)
                    if b is not None and b.kind == "var" and id(b) not in seen:
                        seen.add(id(b))
                        out.append(b)
        return out

    def current(self, bindings) -> list[Value]:
        """The IR values of `bindings` now (constants materialized), kept on the bindings."""
        vals: list[Value] = []
        for b in bindings:
            b.value = self._leaves(b.value, vals)
        return vals

    def _leaves(self, a: ArgInfo, out: list) -> ArgInfo:
        """A tuple `var` is carried as one IR value per tile in it (depth first)."""
        if isinstance(a.type, TupleType) and a.elements is not None:
            return replace(a, elements=tuple(self._leaves(e, out) for e in a.elements))
        v = self.materialize(a)
        out.append(v)
        return replace(a, ir=v)

    def if_stmt(self, s: ast.If, scope: Scope, ctx: Ctx) -> None:
        if self.kb is None:
            return super().if_stmt(s, scope, ctx)
        c = self.condition(s.cond, scope, ctx, "`if`")
        if isinstance(c.const, ConstValue):
            return super().if_stmt(s, scope, ctx)  # only the branch taken is lowered
        branches = [s.then] + ([s.orelse] if s.orelse is not None else [])
        binds = self.carried(branches, scope)
        before = self.current(binds)
        ifb = self.kb.if_(c.ir, span=s.span)
        self.region_depth += 1
        try:
            with ifb.then_():
                self.block(s.then, scope, ctx)
                if not self.terminated():
                    self.kb.yield_(*self.current(binds))
            _rebind(binds, before)
            with ifb.else_():
                if s.orelse is not None:
                    self.else_part(s.orelse, scope, ctx)
                if not self.terminated():
                    self.kb.yield_(*self.current(binds))
        finally:
            self.region_depth -= 1
        results = ifb.end()
        if len(results) == len(before):
            _rebind(binds, results)
        else:  # both branches left the region: what follows is unreachable
            _rebind(binds, before)

    def returning_if(self, s: ast.If, rest: list, scope: Scope, ctx: Ctx) -> bool:
        """`if c { ...; return a; } [else { ...; return b; }] rest...; return d;` with a run-time
        `c` in an inlined fn: one `if` op that yields the value each path returns (the rest of
        the body is the else branch when there is none). False when it does not apply (a
        constant condition, or a path that does not end in `return`): lowered as usual."""
        other = returning_else(s, rest)
        if not _returns(ast.Block(other, s.span)):
            return False
        c = self.condition(s.cond, scope, ctx, "`if`")
        if isinstance(c.const, ConstValue) or c.ir is None:
            return False
        binds = self.carried([s.then, ast.Block(other, s.span)], scope)
        before = self.current(binds)
        ifb = self.kb.if_(c.ir, span=s.span)
        shapes = []
        self.region_depth += 1
        self.return_regions.add(self.region_depth)
        try:
            for n, body in enumerate((s.then.stmts, other)):
                if n:
                    _rebind(binds, before)
                with (ifb.then_() if n == 0 else ifb.else_()):
                    with self.child(scope) as inner:
                        try:
                            self.stmts(body, inner, ctx)
                        except _Returned:
                            pass
                    v = ctx.returns.pop()
                    f = self.call_stack[-1][0] if self.call_stack else None
                    if getattr(f, "ret", None) is not None:  # `-> T`: every return becomes T
                        v = self.coerce(v, self.resolve_type(f.ret, scope, ctx), v.span,
                                        f"the return value of `{ctx.name}`")
                    if isinstance(v.type, (TileType, TupleType, LooseType)):
                        v = self.fix_var_type(v, s.span)
                    if shapes and v.type != shapes[0].type:
                        raise TileSemanticError.at(
                            "E0215", f"`fn {ctx.name}` returns {shapes[0].type} on one path "
                                     f"and {v.type} on another", s.span,
                            help="convert one with `astype` so that every return has one type")
                    shapes.append(v)
                    vals: list[Value] = []
                    if isinstance(v.type, (TileType, TupleType)):
                        v = self._leaves(v, vals)
                    self.kb.yield_(*vals)
        finally:
            self.return_regions.discard(self.region_depth)
            self.region_depth -= 1
        _rebind(binds, before)
        results = ifb.end()
        ctx.returns.append(_refill(shapes[0], iter(results))
                           if isinstance(shapes[0].type, (TileType, TupleType)) else shapes[0])
        raise _Returned()

    def else_part(self, e, scope, ctx) -> None:
        if self.kb is None or not isinstance(e, ast.If):
            return super().else_part(e, scope, ctx)
        self.if_stmt(e, scope, ctx)

    def for_body(self, s: ast.For, scope: Scope, ctx: Ctx, dt, bounds) -> None:
        if self.kb is None or bounds is None:
            return super().for_body(s, scope, ctx, dt, bounds)
        lo, hi, st = (self._bound(a, dt) for a in bounds)
        binds = self.carried([s.body], scope)
        loop = self.kb.for_(lo, hi, st, init=tuple(self.current(binds)), span=s.span,
                            hints=_names(binds))
        ctx.loop_depth += 1
        self.region_depth += 1
        self.loops.append(binds)
        try:
            with loop.body() as (iv, *args):
                _rebind(binds, args)
                with self.child(scope) as inner:
                    self.declare_local(inner, s.var, "loop",
                                       value(scalar(dt), None, s.var_span, ir=iv),
                                       s.var_span, ctx)
                    self.block(s.body, inner, ctx, new_scope=False)
                if not self.terminated():
                    self.kb.yield_(*self.current(binds))
        finally:
            ctx.loop_depth -= 1
            self.region_depth -= 1
            self.loops.pop()
        _rebind(binds, loop.end())

    def _bound(self, a: ArgInfo, dt) -> Value:
        """A loop bound as a value of the loop's integer type."""
        if a.ir is None:
            return self.kb.constant(ConstValue(a.const.value), dt, a.span)
        if a.ir.type == scalar(dt):
            return a.ir
        return self.kb.op("astype", a.ir, dt, span=a.span)

    def while_stmt(self, s: ast.While, scope: Scope, ctx: Ctx) -> None:
        if self.kb is None:
            return super().while_stmt(s, scope, ctx)
        binds = self.carried([s.body], scope)
        w = self.kb.while_(init=tuple(self.current(binds)), span=s.span)
        self.region_depth += 1
        ctx.loop_depth += 1
        self.loops.append(binds)
        try:
            with w.cond() as args:
                _rebind(binds, args)
                c = self.condition(s.cond, scope, ctx, "`while`")
                cond = c.ir if c.ir is not None else self.kb.constant(c.const, BOOL, c.span)
                self.kb.condition(cond, span=s.cond.span)
            with w.body() as args:
                _rebind(binds, args)
                self.block(s.body, scope, ctx)
                if not self.terminated():
                    self.kb.yield_(*self.current(binds))
        finally:
            self.region_depth -= 1
            ctx.loop_depth -= 1
            self.loops.pop()
        _rebind(binds, w.end())

    def stmt(self, s: ast.Stmt, scope: Scope, ctx: Ctx) -> None:
        if self.kb is not None and isinstance(s, (ast.Break, ast.Continue)) and self.loops:
            super().stmt(s, scope, ctx)
            vals = self.current(self.loops[-1])
            (self.kb.break_ if isinstance(s, ast.Break) else self.kb.continue_)(*vals,
                                                                                span=s.span)
            return
        super().stmt(s, scope, ctx)


def _rebind(bindings, values) -> None:
    """Point each `var` binding at its IR values (one per tile, see `current`) in the region
    being emitted."""
    it = iter(values)
    for b in bindings:
        b.value = _refill(b.value, it)


def _refill(a: ArgInfo, it) -> ArgInfo:
    if isinstance(a.type, TupleType) and a.elements is not None:
        return replace(a, elements=tuple(_refill(e, it) for e in a.elements))
    return replace(a, ir=next(it))


def _names(bindings) -> tuple[str, ...]:
    """Value names for the carried IR values: `st.0`, `st.1` for the tiles of a tuple `st`."""
    def walk(a: ArgInfo, name: str):
        if isinstance(a.type, TupleType) and a.elements is not None:
            for i, e in enumerate(a.elements):
                yield from walk(e, f"{name}.{i}")
        else:
            yield name
    return tuple(n for b in bindings for n in walk(b.value, b.name))


class _Returned(Exception):
    """A `return` ended an inlined function's body."""


def _straight(op) -> bool:
    """An op a combine function's region may hold: the code generator emits the region at
    every step of its tree, as straight-line code."""
    if isinstance(op, BuiltinOp):
        return not op.builtin.side_effects
    return isinstance(op, (ConstantOp, YieldOp))


def _internal(message: str, span) -> InternalCompilerError:
    return InternalCompilerError.at("E9999", f"internal compiler error while lowering to Tile "
                                             f"IR: {message}", span,
                                    help="this is a bug in tilec; please report it with the "
                                         "input file")


def build_module(module: ast.Module, options: CompileOptions,
                 kernels: Iterable[str] | None = None) -> tuple[IRModule, list]:
    """Build Tile IR for the kernels of a parsed module (all, or those named). Returns the
    module and the diagnostics; the module is None when there are errors."""
    sb = SourceBuilder(options, kernels)
    try:
        sb.check_root(module)
    except TileError as e:
        sb.report(e.diagnostics)
    if sb.error_count:
        return None, sb.diags
    return IRModule(tuple(sb.kernels)), sb.diags
