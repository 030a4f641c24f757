"""The semantic checker: names, scopes, types, shapes, constants, control flow, functions,
imports, kernel parameters and `@launch` keys.

It walks each kernel as an abstract interpreter: every expression evaluates to an `ArgInfo`
(type, constant value, span), the form the built-in registry's typing rules take, so `a + b`,
`load(...)` and `x.astype(f16)` are typed by the one registry entry each. A generic `fn` is
checked again for each call signature (it is inlined there), which is also how recursion is
found. Errors are collected per statement; an expression that failed gets the error type,
which silences the errors that would only follow from it.

Decisions (language reference §Names, §Constants):
- `let` binds a value that never changes; a `let` of a constant expression stays a constant
  (loose constants stay loose). `var` may be re-bound; its dtype and shape are fixed by its
  first value (a loose constant takes the default dtype: i32 or f32) and every re-binding must
  keep them, so loop-carried values have one type.
- A name may be shadowed by a later `let`/`var`, in the same or an inner block.
- A `const` kernel parameter acts as the literal it is replaced by (seed 001 "Constant
  Embedding"): its value is checked against the declared type, then it is a loose constant.
  Without a value (no default, no -D) it is symbolic: shapes may use it, and what needs its
  value is checked at specialization (a note says so).
- An `if` on a constant condition checks only the branch taken (like `static if`), so code
  guarded by a const parameter may use shapes only valid when the guard holds.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from ..diagnostics import (Diagnostic, Label, Severity, Span, TileError, TileSemanticError,
                           register_codes)
from ..frontend import ast
from ..frontend.imports import ModuleLoader
from ..frontend.parser import parse_expr
from ..options import CompileOptions
from ..record import field, record, replace
from .builtins import BUILTINS, OPERATORS, bind_call
from .builtins_core import ArgInfo, Builtin
from .launch_attrs import AttrValue, ByTarget, resolve_launch
from .launch_verify import check_spec
from .constants import (ConstStr, ConstTuple, ConstValue, as_int, check_loose_size, construct,
                        loose, materialize, truth)
from .promotion import promote_loose
from .types import (BOOL, DEFAULT_FLOAT, DEFAULT_INT, DTYPES, I32, STRING, VOID, ArrayType,
                    DTypeType, LooseType, Sym, TileType, TupleType, check_shape, scalar)
from .values import (ERROR, Binding, BuiltinType, ErrorType, FnType, KernelType, ModuleInfo,
                     ModuleType, error_value, is_error, value)

register_codes({
    "E0261": "this construct cannot be compiled yet",  # also ir/build.py's: check = compile
    "E0201": "unknown name",
    "E0202": "a top-level name is defined twice",
    "E0203": "assignment to a name that is not a `var`",
    "E0204": "a `var` re-bound with another dtype or shape",
    "E0205": "invalid assignment target",
    "E0206": "a tuple pattern does not match the value",
    "E0210": "`break` or `continue` outside a loop",
    "E0211": "`return` with a value in a kernel",
    "E0212": "`for` does not iterate over `range(...)`",
    "E0213": "`range` step is not strictly positive",
    "E0214": "`static for` is not bounded by constants or has too many iterations",
    "E0215": "returns of one function disagree in type",
    "E0216": "a kernel or function is too large once `static for` is unrolled and calls inlined",
    "E0220": "a kernel is called",
    "E0221": "unknown member",
    "E0222": "indexing a value that cannot be indexed",
    "E0223": "a value is not callable",
    "E0224": "wrong arguments to a function",
    "E0230": "recursive call",
    "E0240": "invalid kernel parameter",
    "E0241": "tile-only operation in a @host function",
    "E0242": "invalid @host function signature",
    "E0243": "invalid `const` parameter value",
    "E0250": "unknown or misplaced attribute",
    "E0320": "unknown type",
    "E0321": "a value does not match its declared type",
    "E0322": "a condition is not a bool scalar",
    "E0410": "a `const` item is not a constant expression",
    "W0201": "unused variable",
    "W0202": "an expression's value is unused",
    "N0201": "checking stopped where a const parameter's value is needed",
})

MAX_STATIC_ITERATIONS = 1024
# Statements one kernel (or a function checked alone) may take once every `static for` is
# unrolled and every call inlined: nested loops and calls multiply, and lowering costs about
# half a millisecond per statement, so this keeps any accepted program compiling in seconds.
MAX_UNROLLED_STATEMENTS = 16384
# The budget is kept in eighths of a statement: a statement or an unrolled iteration (also of an
# empty body) costs EIGHTHS, each expression node one, so long expressions count as several
# statements and nested empty loops cannot run unbounded.
EIGHTHS = 8
MAX_ERRORS = 50
# Built-ins that read the block's position or global memory exist only in tile code.
TILE_ONLY_GROUPS = ("memory",)
TILE_ONLY_NAMES = ("bid", "num_blocks", "cluster_rank", "cluster_size")


def _close_matches(name: str, candidates: list[str], n: int) -> list[str]:
    import difflib      # only a misspelt name needs it: not imported by every check
    return difflib.get_close_matches(name, candidates, n=n)


class _TooLarge(Exception):
    """The statement budget (MAX_UNROLLED_STATEMENTS) ran out: stop walking this body."""

    def __init__(self, span: Span | None):
        self.span = span


class _NeedsValue(Exception):
    """A symbolic const parameter's value is needed: stop checking this kernel."""

    def __init__(self, span: Span | None, message: str):
        self.span = span
        self.message = message


# ---------------------------------------------------------------------------------------------
# Results


@record(frozen=True)
class BindingRecord:
    """One binding for `--emit typed-ast`: where, which name, its type and constant value."""

    context: str
    span: Span | None
    kind: str
    name: str
    type: object
    const: object | None


@record
class KernelInfo:
    name: str
    node: ast.KernelDef
    params: list[tuple[str, object, bool, object | None]]  # name, type, is_const, value
    launch: object | None = None  # the resolved LaunchSpec


@record
class TypedProgram:
    module: ModuleInfo
    kernels: list[KernelInfo] = field(default_factory=list)
    records: list[BindingRecord] = field(default_factory=list)
    files: list[str] = field(default_factory=list)   # the module's path, then its imports

    def format(self) -> str:
        """Each binding's inferred type, grouped by the kernel or function it belongs to."""
        out: list[str] = []
        current = None
        for r in self.records:
            if r.context != current:
                if out:
                    out.append("")
                out.append(r.context)
                current = r.context
            where = f"{r.span.line}:{r.span.col}" if r.span else "-"
            const = ""
            if r.const is not None and not isinstance(r.const, ConstStr):
                const = f" = {r.const}"
            out.append(f"  {where:<8} {r.kind:<5} {r.name}: {r.type}{const}")
        return "\n".join(out) + ("\n" if out else "")


# ---------------------------------------------------------------------------------------------
# Scopes


class Scope:
    def __init__(self, parent: "Scope | None" = None):
        self.parent = parent
        self.names: dict[str, Binding] = {}

    def lookup(self, name: str) -> Binding | None:
        s: Scope | None = self
        while s is not None:
            b = s.names.get(name)
            if b is not None:
                return b
            s = s.parent
        return None

    def all_names(self) -> list[str]:
        out: list[str] = []
        s: Scope | None = self
        while s is not None:
            out += list(s.names)
            s = s.parent
        return out


@record
class Ctx:
    """The function or kernel body being checked."""

    kind: str                  # "kernel" | "fn" | "host"
    name: str
    module: ModuleInfo
    label: str                 # heading for typed-ast records
    loop_depth: int = 0
    run_loops: int = 0         # run-time `for`/`while` loops around this point (not `static`)
    if_frames: list = field(default_factory=list)  # per enclosing run-time `if`: returnable?
    liftable: frozenset = frozenset()  # ids of the fn's `if`s whose every path returns
    returns: list[ArgInfo] = field(default_factory=list)
    note: str | None = None    # "while checking `f` called at ..." for inlined functions
    declared: dict = field(default_factory=dict)  # every name bound in the body -> its span


# ---------------------------------------------------------------------------------------------


class Checker:
    def __init__(self, options: CompileOptions | None = None):
        options = options if options is not None else CompileOptions()
        self.options = options
        self.loader = ModuleLoader(list(options.include_dirs))
        self.defines = options.define_map()
        self.target = options.target
        self.diags: list[Diagnostic] = []
        self._seen: set = set()
        self.records: list[BindingRecord] = []
        self._record_keys: set = set()
        self.call_stack: list[tuple[ast.FnDef, Span | None]] = []
        self.instances: dict = {}
        self.instance_cost: dict = {}  # statements one check of each instance walked
        self.modules: dict[str, ModuleInfo] = {}
        self.statements = 0  # eighths of statements walked in the current kernel or function
        self.in_body = False  # expressions are charged only inside a body being walked

    # ---- diagnostics ----
    def report(self, diags) -> None:
        for d in diags:
            key = (d.code, d.span, d.message)
            if key in self._seen:
                continue
            self._seen.add(key)
            self.diags.append(d)

    def warn(self, code: str, message: str, span: Span | None, help: str | None = None,
             label: str | None = None) -> None:
        self.report([Diagnostic(Severity.WARNING, code, message, span, label, help)])

    @property
    def error_count(self) -> int:
        return sum(d.severity is Severity.ERROR for d in self.diags)

    # ---- modules ----
    def check_root(self, module: ast.Module) -> TypedProgram:
        import os
        path = module.file
        real = os.path.realpath(path) if not path.startswith("<") else path
        info = ModuleInfo(path, path, module)  # imports are searched next to `path` as given
        self.loader.enter(real, None)
        try:
            self.declare(info)
        finally:
            self.loader.leave()
        program = TypedProgram(info, files=list(self.modules))
        for item in module.items:
            if self.error_count >= MAX_ERRORS:
                break
            if isinstance(item, ast.KernelDef):
                k = self.check_kernel(item, info)
                if k is not None:
                    program.kernels.append(k)
            elif isinstance(item, ast.FnDef):
                self.check_fn_alone(item, info)
        program.records = self.records
        return program

    def declare(self, info: ModuleInfo) -> None:
        """Bind every top-level name of a module (imports are loaded and declared first)."""
        self.modules[info.path] = info
        for item in info.module.items:
            try:
                if isinstance(item, ast.Import):
                    sub = self.import_module(item.path, info, item.span)
                    name = item.alias or item.path[-1]
                    self.bind_top(info, name, "module", value(ModuleType(sub)), item.span)
                elif isinstance(item, ast.FromImport):
                    sub = self.import_module(item.path, info, item.span)
                    for n in item.names:
                        b = sub.names.get(n.name)
                        if b is None:
                            close = _close_matches(n.name, list(sub.names), n=1)
                            raise TileSemanticError.at(
                                "E0603", f"module `{sub.name}` has no `{n.name}`", n.span,
                                help=f"did you mean `{close[0]}`?" if close else
                                f"it defines: {', '.join(sorted(sub.names)) or 'nothing'}")
                        self.bind_top(info, n.alias or n.name, "import", b.value, n.span)
                elif isinstance(item, ast.ConstDef):
                    self.declare_const(item, info)
                elif isinstance(item, ast.FnDef):
                    self.check_attrs(item.attrs, allowed=("host",), what="a function")
                    self.bind_top(info, item.name, "fn", value(FnType(item, info)),
                                  item.name_span)
                elif isinstance(item, ast.KernelDef):
                    self.bind_top(info, item.name, "kernel", value(KernelType(item)),
                                  item.name_span)
            except TileError as e:
                self.report(e.diagnostics)
                # a failed import still binds its names, so their uses add no errors
                names = [] if not isinstance(item, (ast.Import, ast.FromImport)) else (
                    [item.alias or item.path[-1]] if isinstance(item, ast.Import)
                    else [n.alias or n.name for n in item.names])
                for n in names:
                    info.names.setdefault(n, Binding(n, "import", error_value(item.span),
                                                     item.span, used=True))

    def import_module(self, path: tuple[str, ...], importer: ModuleInfo, span) -> ModuleInfo:
        lm = self.loader.load(path, importer.path, span)
        if lm.path in self.modules:
            return self.modules[lm.path]
        info = ModuleInfo(lm.name, lm.path, lm.module)
        self.loader.enter(lm.path, span)
        try:
            self.declare(info)
        finally:
            self.loader.leave()
        return info

    def bind_top(self, info: ModuleInfo, name: str, kind: str, val: ArgInfo, span) -> None:
        old = info.names.get(name)
        if old is not None:
            raise TileSemanticError.at(
                "E0202", f"`{name}` is defined twice in this module", span,
                related=(Label(old.span, "first defined here"),) if old.span else (),
                help="rename one of them")
        info.names[name] = Binding(name, kind, val, span, used=True)

    def declare_const(self, item: ast.ConstDef, info: ModuleInfo) -> None:
        ctx = Ctx("fn", item.name, info, f"const {item.name}")
        v = self.expr(item.value, Scope(), ctx)
        if is_error(v):
            self.bind_top(info, item.name, "const", v, item.name_span)
            return
        if v.const is None:
            raise TileSemanticError.at(
                "E0410", f"the value of `const {item.name}` is not a constant expression",
                item.value.span, help="use literals, other `const` items and arithmetic on them")
        if item.type is not None:
            t = self.resolve_type(item.type, Scope(), ctx)
            v = self.coerce(v, t, item.value.span, f"`const {item.name}`")
        self.bind_top(info, item.name, "const", v, item.name_span)
        self.record(ctx.label, item.name_span, "const", item.name, v)

    # ---- attributes ----
    def check_attrs(self, attrs, allowed: tuple[str, ...], what: str) -> None:
        for a in attrs:
            if a.name not in allowed:
                known = {"launch": "kernels", "host": "functions"}
                where = known.get(a.name)
                raise TileSemanticError.at(
                    "E0250", f"`@{a.name}` cannot be used on {what}" if where else
                    f"unknown attribute `@{a.name}`", a.span,
                    help=f"`@{a.name}` applies to {where}" if where else
                    "kernels take `@launch(...)`; functions take `@host`")
            if a.name == "host" and a.args:
                raise TileSemanticError.at("E0250", "`@host` takes no arguments", a.span)

    def launch_spec(self, k: ast.KernelDef, scope: Scope, ctx: Ctx):
        launches = [a for a in k.attrs if a.name == "launch"]
        if len(launches) > 1:
            raise TileSemanticError.at("E0250", "`@launch` is given twice", launches[1].span,
                                       related=(Label(launches[0].span, "first given here"),),
                                       help="merge the keys into one `@launch(...)`")
        attrs: dict[str, AttrValue] = {}
        if launches:
            la = launches[0]
            for arg in la.args or ():
                if arg.name is None:
                    raise TileSemanticError.at(
                        "E0250", "`@launch` takes keyword arguments only", arg.span,
                        help="write `@launch(maxntid = (256, 1, 1))`")
                attrs[arg.name] = AttrValue(self.attr_value(arg.value, scope, ctx, ByTarget,
                                                            AttrValue), arg.span)
        spec = resolve_launch(attrs, self.target, launch_span=launches[0].span if launches
                              else k.name_span)
        check_spec(spec, launches[0].span if launches else k.name_span)
        return spec

    def attr_value(self, e: ast.Expr, scope, ctx, ByTarget, AttrValue):
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id == "by_target":
            values = {}
            for a in e.args:
                if a.name is None:
                    raise TileSemanticError.at(
                        "E0250", "`by_target` takes keyword arguments: `sm_90a = 168, "
                                 "default = 128`", a.span)
                values[a.name] = AttrValue(self.attr_value(a.value, scope, ctx, ByTarget,
                                                           AttrValue), a.span)
            return ByTarget(values, e.span)
        v = self.expr(e, scope, ctx)
        return _plain(v.const) if v.const is not None else ("<run-time value>")

    # ---- kernels and functions ----
    def check_kernel(self, k: ast.KernelDef, info: ModuleInfo) -> KernelInfo | None:
        ctx = Ctx("kernel", k.name, info, f"kernel {k.name}", declared=_declared_names(k.body))
        scope = Scope()
        params = []
        symbolic: list[str] = []
        ok = True
        try:
            self.check_attrs(k.attrs, allowed=("launch",), what="a kernel")
        except TileError as e:
            self.report(e.diagnostics)
        for p in k.params:
            try:
                name, t, is_const, val = self.kernel_param(p, scope, ctx)
                params.append((name, t, is_const, val))
                if is_const and isinstance(val, ConstValue) and val.is_symbolic:
                    symbolic.append(name)
            except TileError as e:
                self.report(e.diagnostics)
                ok = False
                self.declare_local(scope, p.name, "param", error_value(p.span), p.span, ctx,
                                   record=False)
        launch = None
        try:
            launch = self.launch_spec(k, scope, ctx)
        except TileError as e:
            self.report(e.diagnostics)
        self.statements, self.in_body = 0, True
        try:
            self.block(k.body, scope, ctx)
        except _TooLarge as tl:
            self.report([_too_large(f"kernel `{k.name}`", tl.span)])
        except _NeedsValue as nv:
            names = ", ".join(f"`{s}`" for s in symbolic) or "a const parameter"
            self.report([Diagnostic(
                Severity.NOTE, "N0201",
                f"the rest of `{k.name}` is checked once {names} "
                f"{'has a value' if len(symbolic) == 1 else 'have values'}: {nv.message}",
                nv.span, help="give a value with `-D NAME=VALUE`, a default, or at launch")])
        finally:
            self.in_body = False
        self.finish_scope(scope)
        return KernelInfo(k.name, k, params, launch) if ok else None

    def kernel_param(self, p: ast.Param, scope: Scope, ctx: Ctx):
        if p.type is None:
            raise TileSemanticError.at(
                "E0240", f"kernel parameter `{p.name}` needs a type", p.span,
                help="write `a: Array[f32, 1]`, `n: i32` or `const N: i32 = 1024`")
        t = self.resolve_type(p.type, scope, ctx)
        if p.is_const:
            if not (isinstance(t, TileType) and not t.shape):
                raise TileSemanticError.at(
                    "E0240", f"`const` parameter `{p.name}` must have a scalar type such as "
                             f"`i32`, found {t}", p.type.span)
            val = self.const_param_value(p, t.dtype, scope, ctx)
            self.declare_local(scope, p.name, "const", value(val.type, val, p.span), p.span, ctx,
                               used=True)
            return p.name, t, True, val
        if p.default is not None:
            raise TileSemanticError.at(
                "E0240", f"only `const` parameters take a default; `{p.name}` is a run-time "
                         f"argument", p.default.span,
                help=f"write `const {p.name}: ...` to make it a compile-time value")
        if isinstance(t, TileType) and t.shape:
            raise TileSemanticError.at(
                "E0240", f"kernel parameter `{p.name}` cannot be a tile ({t})", p.type.span,
                help=f"pass an `Array[{t.dtype}, {len(t.shape)}]` and `load` the tile from it")
        if not isinstance(t, (ArrayType, TileType)):
            raise TileSemanticError.at(
                "E0240", f"kernel parameter `{p.name}` must be an array or a scalar, found {t}",
                p.type.span)
        self.declare_local(scope, p.name, "param", value(t, None, p.span), p.span, ctx,
                           used=True)
        return p.name, t, False, None

    def const_param_value(self, p: ast.Param, dtype, scope, ctx) -> ConstValue:
        """The value a `const` parameter is specialized with: -D, else its default, else a
        symbol. It is checked against the declared dtype, then acts as a loose literal."""
        if p.name in self.defines:
            text = self.defines[p.name]
            try:
                e = parse_expr(text, f"<-D {p.name}>")
            except TileError:
                raise TileSemanticError.at(
                    "E0243", f"-D {p.name}={text}: `{text}` is not a constant expression",
                    p.span) from None
            v = self.expr(e, Scope(), ctx)
            where = p.span
        elif p.default is not None:
            v = self.expr(p.default, scope, ctx)
            where = p.default.span
        else:
            return ConstValue(Sym(p.name), None)
        if v.const is None or not isinstance(v.const, ConstValue):
            raise TileSemanticError.at(
                "E0243", f"the value of `const {p.name}` must be a constant", where)
        try:
            strict = materialize(v.const, dtype, where) if v.const.is_loose else v.const
            if strict.dtype != dtype:
                materialize(strict, dtype, where)
        except TileError as e:
            d = e.diagnostics[0]
            raise TileSemanticError.at("E0243", f"`const {p.name}: {dtype}`: {d.message}",
                                       where, help=d.help) from None
        return ConstValue(strict.value, None) if not dtype.is_bool else strict

    def check_fn_alone(self, f: ast.FnDef, info: ModuleInfo) -> None:
        """A function whose parameters are all annotated is checked even if never called."""
        is_host = any(a.name == "host" for a in f.attrs)
        if is_host:
            for p in f.params:
                if p.type is None or p.is_const:
                    self.report([Diagnostic(
                        Severity.ERROR, "E0242",
                        f"`@host` function `{f.name}` needs a scalar type on parameter "
                        f"`{p.name}`", p.span, help="write `n: i32`")])
                    return
            if f.ret is None:
                self.report([Diagnostic(Severity.ERROR, "E0242",
                                        f"`@host` function `{f.name}` needs a return type",
                                        f.name_span, help="write `-> i32` after the parameters")])
                return
        if any(p.type is None or p.is_const for p in f.params):
            return  # generic, or needs constant arguments: checked at each call
        scope = Scope()
        args = []
        try:
            for p in f.params:
                t = self.resolve_type(p.type, scope, Ctx("fn", f.name, info, f.name))
                if is_host and not (isinstance(t, TileType) and not t.shape):
                    raise TileSemanticError.at(
                        "E0242", f"`@host` function parameters must be scalars; `{p.name}` is "
                                 f"{t}", p.type.span)
                args.append(value(t, None, p.span))
        except TileError as e:
            self.report(e.diagnostics)
            return
        self.statements, self.in_body = 0, True
        try:
            self.instantiate(f, info, args, {}, f.name_span, standalone=True)
        except TileError as e:
            self.report(e.diagnostics)
        except _TooLarge as tl:
            self.report([_too_large(f"function `{f.name}`", tl.span)])
        finally:
            self.in_body = False

    def instantiate(self, f: ast.FnDef, info: ModuleInfo, pos: list[ArgInfo],
                    kw: dict[str, ArgInfo], span: Span | None, standalone=False) -> ArgInfo:
        """Check `f`'s body for these argument types; the result is its return value."""
        for i, (g, call_span) in enumerate(self.call_stack):
            if g is f:
                names = [h.name for h, _ in self.call_stack[i:]] + [f.name]
                related = tuple(Label(s, f"`{h.name}` is called here")
                                for (h, s) in self.call_stack[i + 1:] if s) + (
                    (Label(span, f"`{f.name}` is called again here"),) if span else ())
                raise TileSemanticError.at(
                    "E0230", "recursive call: " + " → ".join(f"`{n}`" for n in names),
                    f.name_span, related=related,
                    help="functions are inlined at each call, so they cannot recurse; "
                         "write the repetition as a loop")
        bound = self.bind_fn_args(f, pos, kw, span)
        key = (id(f), tuple((n, _type_key(a)) for n, a in bound))
        if key in self.instances:
            # the lowering inlines this call again: count its statements as it will
            self.charge(self.instance_cost.get(key, 0), span)
            return self.instances[key]
        before = self.statements
        is_host = any(a.name == "host" for a in f.attrs)
        sig = ", ".join(f"{n}: {a.type}" for n, a in bound)
        ctx = Ctx("host" if is_host else "fn", f.name, info, f"fn {f.name}({sig})",
                  declared=_declared_names(f.body), liftable=liftable_ifs(f.body.stmts))
        if not standalone and span is not None:
            ctx.note = f"while checking `{f.name}({sig})` called at {span}"
        scope = Scope()
        self.call_stack.append((f, span))
        try:
            for (name, a), p in zip(bound, f.params):
                if p.type is not None:
                    t = self.resolve_type(p.type, scope, ctx)
                    a = self.coerce(a, t, a.span or p.span, f"parameter `{name}` of `{f.name}`")
                self.declare_local(scope, name, "param", replace(a, span=p.span), p.span, ctx,
                                   used=True)
            self.block(f.body, scope, ctx)
            self.finish_scope(scope)
        except TileError as e:
            if ctx.note is None:
                raise
            raise type(e)([_with_note(d, ctx.note) for d in e.diagnostics]) from None
        finally:
            self.call_stack.pop()
        result = self.return_value(f, ctx, scope)
        self.instances[key] = result
        self.instance_cost[key] = self.statements - before
        return result

    def bind_fn_args(self, f: ast.FnDef, pos, kw, span) -> list[tuple[str, ArgInfo]]:
        params = f.params
        if len(pos) > len(params):
            raise TileSemanticError.at(
                "E0224", f"`{f.name}` takes {len(params)} argument{'s' if len(params) != 1 else ''}"
                         f", found {len(pos)}", pos[len(params)].span or span,
                help=f"the signature is `{_fn_sig(f)}`")
        given = {p.name: a for p, a in zip(params, pos)}
        names = {p.name for p in params}
        for k, a in kw.items():
            if k not in names:
                raise TileSemanticError.at("E0224", f"`{f.name}` has no parameter `{k}`",
                                           a.span or span, help=f"the signature is `{_fn_sig(f)}`")
            if k in given:
                raise TileSemanticError.at("E0224", f"`{f.name}`: `{k}` is given twice",
                                           a.span or span)
            given[k] = a
        out = []
        for p in params:
            a = given.get(p.name)
            if a is None:
                if p.default is None:
                    raise TileSemanticError.at(
                        "E0224", f"`{f.name}` is missing the argument `{p.name}`", span,
                        help=f"the signature is `{_fn_sig(f)}`")
                a = self.expr(p.default, Scope(), Ctx("fn", f.name, self._module_of(f), f.name))
            if p.is_const and a.const is None and not is_error(a):
                raise TileSemanticError.at(
                    "E0224", f"`{f.name}`: parameter `{p.name}` is `const`, but the argument "
                             "is a run-time value", a.span or span)
            out.append((p.name, a))
        return out

    def _module_of(self, f: ast.FnDef) -> ModuleInfo:
        for info in self.modules.values():
            if f in info.module.items:
                return info
        raise AssertionError("function outside every module")  # pragma: no cover

    def return_value(self, f: ast.FnDef, ctx: Ctx, scope: Scope) -> ArgInfo:
        rets = ctx.returns
        if any(is_error(r) for r in rets):
            return error_value(f.name_span)
        if f.ret is not None:
            t = self.resolve_type(f.ret, scope, ctx)
            if not rets and t != VOID:
                raise TileSemanticError.at(
                    "E0215", f"`{f.name}` declares `-> {t}` but never returns a value",
                    f.name_span)
            out = [self.coerce(r, t, r.span, f"the return value of `{f.name}`") for r in rets]
            return out[0] if len(out) == 1 else value(t, None, f.name_span)
        if not rets:
            return value(VOID, None, f.name_span)
        first = rets[0]
        for r in rets[1:]:
            if is_error(r) or is_error(first):
                continue
            if _type_key(r)[0] != _type_key(first)[0]:
                raise TileSemanticError.at(
                    "E0215", f"`{f.name}` returns {first.type} here and {r.type} there",
                    r.span, related=(Label(first.span, f"returns {first.type}"),)
                    if first.span else (),
                    help="convert one with `astype` so that every return has one type")
        return first if len(rets) == 1 else value(first.type, None, first.span)

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

    def lookup(self, name: str, scope: Scope, ctx: Ctx, span) -> ArgInfo:
        b = scope.lookup(name) or ctx.module.names.get(name)
        if b is not None:
            b.used = True
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
        candidates = scope.all_names() + list(ctx.module.names) + list(BUILTINS) + list(DTYPES)
        close = _close_matches(name, candidates, n=1)
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
            if t.name in ("Tile", "Array"):
                raise TileSemanticError.at(
                    "E0320", f"`{t.name}` needs arguments", t.span,
                    help="write `Tile[f32, 128, 64]`" if t.name == "Tile"
                    else "write `Array[f16, 2]` (dtype, rank)")
            close = _close_matches(t.name, list(DTYPES) + ["Tile", "Array"], n=1)
            raise TileSemanticError.at("E0320", f"unknown type `{t.name}`", t.span,
                                       help=f"did you mean `{close[0]}`?" if close else None)
        if t.name not in ("Tile", "Array"):
            raise TileSemanticError.at("E0320", f"unknown type `{t.name}[...]`", t.span,
                                       help="the generic types are `Tile[...]` and `Array[...]`")
        if not t.args or not isinstance(t.args[0], ast.Name) or t.args[0].id not in DTYPES:
            raise TileSemanticError.at(
                "E0320", f"the first argument of `{t.name}[...]` must be a dtype such as `f32`",
                t.args[0].span if t.args else t.span)
        dtype = DTYPES[t.args[0].id]
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

    def const_int(self, e: ast.Expr, scope, ctx, what: str) -> int:
        v = self.expr(e, scope, ctx)
        if isinstance(v.const, ConstValue) and v.const.is_symbolic:
            raise _NeedsValue(e.span, f"{what} depends on it")
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
                    raise _NeedsValue(d.span, d.message) from None
                self.report([_with_note(d, ctx.note) for d in e.diagnostics] if ctx.note
                            else e.diagnostics)

    def charge(self, cost: int, span: Span | None) -> None:
        """Spend `cost` eighths of a statement of the unrolling budget (E0216)."""
        self.statements += cost
        if self.statements > MAX_UNROLLED_STATEMENTS * EIGHTHS:
            raise _TooLarge(span)

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
                raise _NeedsValue(a.span, "the bounds of a `static for` depend on it")
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
        raise AssertionError(e)  # pragma: no cover

    def operator(self, key: str, operands: list[ArgInfo], span) -> ArgInfo:
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
        pos = [self.expr(a.value, scope, ctx) for a in e.args if a.name is None]
        kw = {a.name: replace(self.expr(a.value, scope, ctx), span=a.value.span)
              for a in e.args if a.name is not None}
        if receiver is not None:
            pos.insert(0, receiver)
        ct = callee.type
        if isinstance(ct, BuiltinType):
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
            close = _close_matches(name, list(info.names), n=1)
            raise TileSemanticError.at(
                "E0221", f"module `{info.name}` has no `{name}`", span,
                help=f"did you mean `{close[0]}`?" if close else
                f"it defines: {', '.join(sorted(info.names)) or 'nothing'}")
        return replace(b.value, span=span)

    def member(self, e: ast.Member, scope: Scope, ctx: Ctx) -> ArgInfo:
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
            if len(e.indices) != 1:
                raise TileSemanticError.at("E0222", "a tuple takes one index", e.span)
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
        if isinstance(v.type, ArrayType):
            raise TileSemanticError.at(
                "E0222", "arrays are not indexed directly", e.span,
                help="read a tile with `load(A, index = ..., shape = ...)`, or single elements "
                     "with `gather`")
        if isinstance(v.type, TileType) and v.type.shape:
            raise TileSemanticError.at("E0222", f"a tile ({v.type}) cannot be indexed", e.span,
                                       help="use `extract` to take a sub-tile")
        raise TileSemanticError.at("E0222", f"a value of type {v.type} cannot be indexed",
                                   e.span)


# ---------------------------------------------------------------------------------------------
# helpers


def _plain(c):
    """A constant as the plain Python value the launch attributes take."""
    if isinstance(c, ConstTuple):
        return tuple(_plain(i) for i in c.items)
    if isinstance(c, ConstValue):
        return c.value
    return c


def _declared_names(body: ast.Block) -> dict:
    """Names a body binds (`let`/`var` and loop variables), first declaration of each. Only
    statements are visited (no expression holds one), in source order."""
    out: dict = {}

    def visit(s) -> None:
        if isinstance(s, ast.Let):
            for n, sp in zip(s.names, s.name_spans):
                out.setdefault(n, sp)
        elif isinstance(s, ast.Block):
            for t in s.stmts:
                visit(t)
        elif isinstance(s, ast.For):
            out.setdefault(s.var, s.var_span)
            visit(s.body)
        elif isinstance(s, ast.If):
            visit(s.then)
            if s.orelse is not None:
                visit(s.orelse)
        elif isinstance(s, ast.While):
            visit(s.body)

    visit(body)
    return out


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


def _type_key(a: ArgInfo):
    c = a.const
    return (str(a.type), str(c) if c is not None else None)


def _pure_expr(e: ast.Expr) -> bool:
    """Expressions whose value being dropped is surely a mistake (no call inside)."""
    return not any(isinstance(n, ast.Call) for n in e.walk())


def _fn_sig(f: ast.FnDef) -> str:
    from ..frontend.printer import _param
    return f"fn {f.name}({', '.join(_param(p) for p in f.params)})"


def _too_large(what: str, span: Span | None) -> Diagnostic:
    # the message names no kernel, so one place reached from several roots is reported once
    return Diagnostic(
        Severity.ERROR, "E0216",
        f"more than {MAX_UNROLLED_STATEMENTS} statements once `static for` loops are unrolled "
        f"and function calls inlined", span, "the limit is reached here",
        help="use a run-time `for` loop for long repetitions, and unroll only short inner loops",
        notes=(f"while checking {what}",))


def _with_note(d: Diagnostic, note: str) -> Diagnostic:
    if any(n.startswith("while checking") for n in d.notes):
        return d
    return replace(d, notes=d.notes + (note,))


def check_module(module: ast.Module, options: CompileOptions
                 ) -> tuple[TypedProgram, list[Diagnostic]]:
    """Check a parsed module (the driver's entry point). Returns the typed program and every
    diagnostic (errors, warnings, notes); raises nothing for user mistakes."""
    checker = Checker(options)
    try:
        program = checker.check_root(module)
    except TileError as e:
        checker.report(e.diagnostics)
        program = TypedProgram(ModuleInfo(module.file, module.file, module))
    return program, checker.diags


# ---------------------------------------------------------------------------------------------
# Returns from inside a run-time `if` (the lowering inlines them as one `if` that yields)

def returns_on_every_path(node) -> bool:
    """Whether every path through `node` (a statement or block) ends in `return`."""
    if isinstance(node, ast.Return):
        return True
    if isinstance(node, ast.Block):
        return any(returns_on_every_path(s) for s in node.stmts)
    if isinstance(node, ast.If):
        return node.orelse is not None and returns_on_every_path(node.then) and \
            returns_on_every_path(node.orelse)
    return False


def returning_else(s: ast.If, rest) -> tuple:
    """The statements the lowering puts in the else branch of a returning `if` followed by
    `rest`: its own else (an `else if` as one statement), then `rest` if that may fall out."""
    if s.orelse is None:
        return tuple(rest)
    if isinstance(s.orelse, ast.If):
        return (s.orelse,) + tuple(rest)
    return tuple(s.orelse.stmts) + (() if returns_on_every_path(s.orelse) else tuple(rest))


def liftable_ifs(stmts) -> frozenset:
    """The ids of the `if`s of a fn body that ir/build.py lowers as returning `if`s (its
    then-branch and its else branch with the rest of the body both return on every path),
    walking the statement lists as the lowering does."""
    out: set[int] = set()

    def walk(seq) -> None:
        seq = list(seq)
        for i, s in enumerate(seq):
            if isinstance(s, ast.If):
                other = returning_else(s, seq[i + 1:])
                if returns_on_every_path(s.then) and \
                        returns_on_every_path(ast.Block(other, s.span)):
                    out.add(id(s))
                    walk(s.then.stmts)
                    walk(other)
                    return
                walk(s.then.stmts)
                if isinstance(s.orelse, ast.If):
                    walk([s.orelse])
                elif s.orelse is not None:
                    walk(s.orelse.stmts)
            elif isinstance(s, ast.Block):
                walk(s.stmts)
            else:
                body = getattr(s, "body", None)
                if isinstance(body, ast.Block):
                    walk(body.stmts)
    walk(stmts)
    return frozenset(out)
