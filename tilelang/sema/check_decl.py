"""The checker's module-level walk: top-level names and imports, `const` items, attributes and
`@launch`, kernels and their parameters, and functions (checked alone, and instantiated per
call signature where they are called). Part of `Checker` (tilelang/sema/checker.py); the
statement and expression walks it calls are its sibling parts, check_stmt.py and
check_expr.py.
"""

from __future__ import annotations

from ..diagnostics import Diagnostic, Label, Severity, Span, TileError, TileSemanticError
from ..frontend import ast
from ..frontend.parser import parse_expr
from ..record import replace
from .builtins_core import ArgInfo
from .check_context import (MAX_ERRORS, MAX_UNROLLED_STATEMENTS, Ctx, KernelInfo, NeedsValue,
                            Scope, TooLarge, TypedProgram, close_matches, with_note)
from .constants import ConstTuple, ConstValue, materialize
from .control_flow import liftable_ifs
from .launch_attrs import (AttrValue, ByTarget, ConstChoice, chosen_entry, entries,
                           is_by_target, resolve_launch)
from .launch_verify import check_spec
from .types import (ANY_DTYPE, DTYPES, VOID, AbsentArrayType, ArrayListType, ArrayType,
                    SymmetricArrayType, DType,
                    DTypeType, OptionalArrayType, Sym, TileType, dtype_var)
from .values import (Binding, FnType, KernelType, ModuleInfo, ModuleType, error_value, is_error,
                     value)


class DeclarationChecks:
    """Modules, kernels and functions: the part of `Checker` that walks declarations."""

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
                if self.only_kernels is not None and item.name not in self.only_kernels:
                    continue
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
                            close = close_matches(n.name, list(sub.names), n=1)
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
        done: dict[int, tuple] = {}
        self.const_choices: list[ConstChoice] = []     # by_target defaults taken, in order
        for i in _dtype_params_first(k.params):   # `Array[T, 1]` may come before `const T`
            p = k.params[i]
            try:
                name, t, is_const, val = done[i] = self.kernel_param(p, scope, ctx)
                if is_const and (isinstance(val, ConstValue) and val.is_symbolic
                                 or isinstance(val, DType) and val.is_var):
                    symbolic.append(name)
            except TileError as e:
                self.report(e.diagnostics)
                ok = False
                # a failed `const T: dtype` still names a dtype: `Array[T, 1]` adds no error
                bad = error_value(p.span)
                if p.is_const and _is_dtype_annotation(p):
                    bad = value(DTypeType(dtype_var(p.name)), None, p.span)
                    done[i] = (p.name, ANY_DTYPE, True, bad.type.dtype)
                self.declare_local(scope, p.name, "param", bad, p.span, ctx, record=False)
        params = [done[i] for i in sorted(done)]
        launch = None
        try:
            launch = self.launch_spec(k, scope, ctx)
        except TileError as e:
            self.report(e.diagnostics)
        self.statements, self.in_body = 0, True
        variables = [n for n, _, c, v in params if c and isinstance(v, DType) and v.is_var]
        try:
            if variables and not ok:
                pass                  # a `const T: dtype` failed: its error says it all
            elif variables:
                # a body is typed by its dtypes: with a type variable it waits for the value
                raise NeedsValue(k.name_span, "the types of its body depend on "
                                 + ", ".join(f"`{n}`" for n in variables))
            else:
                # rank() and world_size() read a symmetric parameter (E0248 without one)
                self.symmetric_kernel = any(isinstance(t, SymmetricArrayType)
                                            for _, t, _, _ in params)
                self.block(k.body, scope, ctx)
        except TooLarge as tl:
            self.report([_too_large(f"kernel `{k.name}`", tl.span)])
        except NeedsValue as nv:
            names = ", ".join(f"`{s}`" for s in symbolic) or "a const parameter"
            self.report([Diagnostic(
                Severity.NOTE, "N0201",
                f"the rest of `{k.name}` is checked once {names} "
                f"{'has a value' if len(symbolic) == 1 else 'have values'}: {nv.message}",
                nv.span, help="give a value with `-D NAME=VALUE`, a default, or at launch"
                if not variables else f"give a value with `-D {variables[0]}=f16` (or another "
                "dtype) or a default; a launch takes it from the arrays passed")])
        finally:
            self.in_body = False
            self.symmetric_kernel = None
        self.finish_scope(scope)
        return KernelInfo(k.name, k, params, launch, tuple(self.const_choices)) if ok else None

    def kernel_param(self, p: ast.Param, scope: Scope, ctx: Ctx):
        if p.type is None:
            raise TileSemanticError.at(
                "E0240", f"kernel parameter `{p.name}` needs a type", p.span,
                help="write `a: Array[f32, 1]`, `n: i32` or `const N: i32 = 1024`")
        t = self.resolve_type(p.type, scope, ctx)
        if p.is_const and t == ANY_DTYPE:
            d = self.dtype_param_value(p, scope, ctx)
            self.declare_local(scope, p.name, "const", value(DTypeType(d), None, p.span),
                               p.span, ctx, used=True)
            return p.name, t, True, d
        if p.is_const:
            if not (isinstance(t, TileType) and not t.shape):
                raise TileSemanticError.at(
                    "E0240", f"`const` parameter `{p.name}` must have a scalar type such as "
                             f"`i32`, found {t}", p.type.span)
            # `const N: T` with `T` still a variable: its value waits for `T` (as the body)
            val = ConstValue(Sym(p.name), None) if t.dtype.is_var else \
                self.const_param_value(p, t.dtype, scope, ctx)
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
        if not isinstance(t, (ArrayType, TileType, OptionalArrayType, ArrayListType)):
            raise TileSemanticError.at(
                "E0240", f"kernel parameter `{p.name}` must be an array or a scalar, found {t}",
                p.type.span)
        bound = t
        if isinstance(t, OptionalArrayType):
            bound = AbsentArrayType(t.array) if self.absent_array(p) else t.array
        self.declare_local(scope, p.name, "param", value(bound, None, p.span), p.span, ctx,
                           used=True)
        return p.name, t, False, None

    def dtype_param_value(self, p: ast.Param, scope, ctx) -> DType:
        """The dtype a `const T: dtype` parameter is specialized with: -D, else its default,
        else a type variable (docs/language.md, "Generic kernels")."""
        if p.name in self.defines:
            text = self.defines[p.name].strip()
            if text not in DTYPES:
                close = close_matches(text, list(DTYPES), n=1)
                raise TileSemanticError.at(
                    "E0243", f"-D {p.name}={text}: `{text}` is not a dtype (kernel "
                             f"`{ctx.name}` declares `const {p.name}: dtype`)", p.span,
                    help=(f"did you mean `{close[0]}`? " if close else "")
                    + "dtypes are: " + ", ".join(DTYPES))
            return DTYPES[text]
        if p.default is None:
            return dtype_var(p.name)
        if is_by_target(p.default):
            found = entries(p.default, f"`const {p.name}`")
            picked = {key: self.dtype_default(p, a.value, scope, ctx) for key, a in found.items()}
            key = chosen_entry(found, self.target.name)
            if key is None:
                return dtype_var(p.name)
            self.const_choices.append(ConstChoice(p.name, key, picked[key]))
            return picked[key]
        return self.dtype_default(p, p.default, scope, ctx)

    def dtype_default(self, p: ast.Param, e: ast.Expr, scope, ctx) -> DType:
        v = self.expr(e, scope, ctx)
        if is_error(v) or not isinstance(v.type, DTypeType) or v.type.dtype is None \
                or v.type.dtype.is_var:
            raise TileSemanticError.at(
                "E0243", f"the default of `const {p.name}: dtype` must be a dtype such as "
                         f"`f16`, found {v.type}", e.span)
        return v.type.dtype

    def absent_array(self, p: ast.Param) -> bool:
        """Whether this specialization gives the optional array `p` as `None`: `-D p=None`
        (the runtime passes it so for a launch with `None`); present otherwise."""
        text = self.defines.get(p.name)
        if text is None:
            return False
        if text.strip() != "None":
            raise TileSemanticError.at(
                "E0243", f"-D {p.name}={text}: an optional array takes only `None`", p.span,
                help=f"`-D {p.name}=None` compiles the specialization where `{p.name}` is "
                     f"`None`; without it, the one where an array is passed")
        return True

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
            if is_by_target(e):
                raise TileSemanticError.at(
                    "E0243", f"-D {p.name}={text}: `by_target` chooses a default in the "
                             f"source; -D gives this compile's value", p.span,
                    help=f"write the value for the target compiled, e.g. `-D {p.name}=128`")
            v = self.expr(e, Scope(), ctx)
            return self.const_of(p, dtype, v, p.span)
        if p.default is None:
            return ConstValue(Sym(p.name), None)
        if not is_by_target(p.default):
            return self.const_of(p, dtype, self.expr(p.default, scope, ctx), p.default.span)
        found = entries(p.default, f"`const {p.name}`")
        picked = {key: self.const_of(p, dtype, self.expr(a.value, scope, ctx), a.value.span)
                  for key, a in found.items()}          # every entry checked on every target
        key = chosen_entry(found, self.target.name)
        if key is None:
            return ConstValue(Sym(p.name), None)       # no default on this target
        self.const_choices.append(ConstChoice(p.name, key, _plain(picked[key])))
        return picked[key]

    def const_of(self, p: ast.Param, dtype, v, where) -> ConstValue:
        """`v` as the value of `const p: dtype`, or E0243 at `where`."""
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
                t = self.fn_param_type(p, scope, Ctx("fn", f.name, info, f.name))
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
        except TooLarge as tl:
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
            for i in _dtype_params_first(f.params):
                (name, a), p = bound[i], f.params[i]
                if p.type is not None:
                    t = self.fn_param_type(p, scope, ctx)
                    a = self.coerce(a, t, a.span or p.span, f"parameter `{name}` of `{f.name}`")
                self.declare_local(scope, name, "param", replace(a, span=p.span), p.span, ctx,
                                   used=True)
            self.block(f.body, scope, ctx)
            self.finish_scope(scope)
        except TileError as e:
            if ctx.note is None:
                raise
            raise type(e)([with_note(d, ctx.note) for d in e.diagnostics]) from None
        finally:
            self.call_stack.pop()
        result = self.return_value(f, ctx, scope)
        self.instances[key] = result
        self.instance_cost[key] = self.statements - before
        return result

    def fn_param_type(self, p: ast.Param, scope: Scope, ctx: Ctx):
        t = self.resolve_type(p.type, scope, ctx)
        if isinstance(t, (OptionalArrayType, ArrayListType)):
            what = "Optional" if isinstance(t, OptionalArrayType) else \
                "Symmetric" if isinstance(t, SymmetricArrayType) else "List"
            raise TileSemanticError.at(
                "E0240", f"`{what}[...]` is a type of kernel parameters only", p.type.span,
                help=f"a function takes an `{t.array}`; the kernel tests `is_none` or picks "
                     f"the list's element (`ws[e]`) before the call" if what == "List" else
                     f"a function takes an `{t.array}`; the kernel tests `is_none` before the "
                     f"call")
        return t

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
            if a is None and p.default is None and p.is_const and _is_dtype_annotation(p):
                a = _inferred_dtype(f, p, given, span)
            if a is None:
                if p.default is None:
                    raise TileSemanticError.at(
                        "E0224", f"`{f.name}` is missing the argument `{p.name}`", span,
                        help=f"the signature is `{_fn_sig(f)}`")
                a = self.expr(p.default, Scope(), Ctx("fn", f.name, self._module_of(f), f.name))
            if p.is_const and a.const is None and not is_error(a) and \
                    not isinstance(a.type, DTypeType):
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


def _type_key(a: ArgInfo):
    c = a.const
    return (str(a.type), str(c) if c is not None else None)


def _dtype_params_first(params) -> list[int]:
    """Indices of the parameters in the order they are declared: `const T: dtype` ones first,
    so that any other parameter's type may name them."""
    first = [i for i, p in enumerate(params) if p.is_const and _is_dtype_annotation(p)]
    return first + [i for i in range(len(params)) if i not in first]


def _is_dtype_annotation(p: ast.Param) -> bool:
    return isinstance(p.type, ast.TypeExpr) and p.type.name == "dtype" and p.type.args is None


def _inferred_dtype(f: ast.FnDef, p: ast.Param, given: dict, span) -> ArgInfo | None:
    """A `const T: dtype` parameter left out of a call takes the dtype of the arguments whose
    declared types name `T` (`x: Tile[T, 64]`, `a: Array[T, 2]`, `s: T`); they must agree."""
    found: list[tuple[str, ArgInfo]] = []
    for q in f.params:
        t, a = q.type, given.get(q.name)
        if a is None or not isinstance(t, ast.TypeExpr):
            continue
        names = t.name == p.name and t.args is None or (
            t.name in ("Tile", "Array") and t.args and isinstance(t.args[0], ast.Name)
            and t.args[0].id == p.name)
        if names and isinstance(a.type, (TileType, ArrayType)):
            found.append((q.name, a))
    if not found:
        return None
    (n0, a0), dt = found[0], found[0][1].type.dtype
    for n, a in found[1:]:
        if a.type.dtype != dt:
            raise TileSemanticError.at(
                "E0224", f"`{f.name}`: `{p.name}` is {dt} from argument `{n0}` but "
                         f"{a.type.dtype} from argument `{n}`", a.span or span,
                related=(Label(a0.span, f"`{n0}` is {a0.type}"),) if a0.span else (),
                help="convert one with `astype` so that both have one dtype")
    return value(DTypeType(dt), None, a0.span)


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
