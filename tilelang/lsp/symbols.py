"""The names of one checked document: where each is defined and where each is used.

Built from the parsed module by the language's scoping rules: a module's constants, functions,
kernels and imports are visible everywhere in it; a parameter in its function; a `let`/`var`
name from the statement after its own to the end of its block (`let x = x + 1;` reads the
outer `x`); a `for` variable in the loop's body. A name that no definition covers is a
built-in, a dtype or a mistake (the checker says which). Positions are the compiler's: 1-based
lines, code-point columns; `end` is exclusive.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from tilelang.diagnostics import Span
from tilelang.frontend import ast


@dataclass(eq=False)
class Symbol:
    name: str
    kind: str  # param, let, var, for, const, fn, kernel, module, import
    file: str  # the file that defines it
    line: int
    col: int
    node: object = None  # the definition's AST node (Param, Let, FnDef, ...)
    #: For `module`: the dotted path; for `import` (from-imports): (path, name in that module).
    target: tuple | None = None
    #: For a `fn` or `kernel`: its parameters by name (keyword arguments refer to them).
    params: dict = field(default_factory=dict)


@dataclass
class Occurrence:
    line: int
    col: int
    name: str
    symbol: Symbol | None  # None: a built-in, a dtype, or an unknown name
    role: str  # "def", "ref", "member" (after `.`), "keyword" (a keyword argument's name)
    builtin: str | None = None  # for a keyword argument of a built-in: the built-in's name

    @property
    def end(self) -> int:
        return self.col + len(self.name)


@dataclass
class Scope:
    start: tuple[int, int]
    end: tuple[int, int]
    names: dict = field(default_factory=dict)


class Index:
    def __init__(self, analysis):
        self.analysis = analysis
        self.occurrences: list[Occurrence] = []
        self.scopes: list[Scope] = []  # every block and function, for completion
        self.top: dict[str, Symbol] = {}
        module = analysis.module
        if module is None:
            return
        self.file = module.file
        self._tokens = None
        self._build(module)
        self.occurrences.sort(key=lambda o: (o.line, o.col))

    # ---- positions of names the AST does not give ------------------------------------------
    def _name_in(self, span: Span | None, name: str, nth: int = 0) -> tuple[int, int] | None:
        """The position of the `nth` identifier token `name` inside `span`."""
        if span is None or span.line < 1:
            return None
        if self._tokens is None:
            from tilelang.fmt.tokens import tokenize

            self._tokens = [t for t in tokenize(self.analysis.text, strict=False)
                            if t.kind in ("name", "keyword")]
        seen = 0
        for t in self._tokens:
            if (t.line, t.col) < (span.line, span.col):
                continue
            if (t.line, t.col) >= (span.end_line, span.end_col):
                break
            if t.text == name:
                if seen == nth:
                    return t.line, t.col
                seen += 1
        return None

    def _define(self, scope: dict, sym: Symbol) -> None:
        scope[sym.name] = sym
        self.occurrences.append(Occurrence(sym.line, sym.col, sym.name, sym, "def"))

    # ---- the walk -------------------------------------------------------------------------
    def _build(self, module: ast.Module) -> None:
        top = self.top
        for item in module.items:
            if isinstance(item, (ast.ConstDef, ast.FnDef, ast.KernelDef)):
                kind = {ast.ConstDef: "const", ast.FnDef: "fn", ast.KernelDef: "kernel"}[
                    type(item)]
                sp = item.name_span
                sym = Symbol(item.name, kind, self.file, sp.line, sp.col, item)
                self._define(top, sym)
            elif isinstance(item, ast.Import):
                bound = item.alias or item.path[0]
                nth = 0 if item.alias is None else sum(1 for p in item.path if p == bound)
                pos = self._name_in(item.span, bound, nth)
                if pos:
                    self._define(top, Symbol(bound, "module", self.file, *pos, item,
                                             target=item.path))
            elif isinstance(item, ast.FromImport):
                for n in item.names:
                    bound = n.alias or n.name
                    pos = self._name_in(n.span, bound, 1 if n.alias == n.name else 0)
                    if pos:
                        sym = Symbol(bound, "import", self.file, *pos, n,
                                     target=(item.path, n.name))
                        self._define(top, sym)
                        if n.alias:
                            p2 = self._name_in(n.span, n.name)
                            if p2:
                                self.occurrences.append(Occurrence(*p2, n.name, sym, "member"))
        for item in module.items:
            if isinstance(item, ast.ConstDef):
                self._type(item.type, [top])
                self._expr(item.value, [top])
            elif isinstance(item, (ast.FnDef, ast.KernelDef)):
                fn_sym = top.get(item.name)
                for a in item.attrs:
                    for arg in a.args or ():
                        self._expr(arg.value, [top])
                params: dict = {}
                for p in item.params:
                    self._type(p.type, [top])
                    if p.default is not None:
                        self._expr(p.default, [top])
                    pos = self._name_in(p.span, p.name)
                    if pos:
                        sym = Symbol(p.name, "param", self.file, *pos, p)
                        self._define(params, sym)
                if fn_sym is not None and fn_sym.node is item:
                    fn_sym.params = dict(params)
                if isinstance(item, ast.FnDef):
                    self._type(item.ret, [top])
                body = item.body.span
                self.scopes.append(Scope((item.span.line, item.span.col),
                                         (body.end_line, body.end_col), params))
                self._block(item.body, [top, params])

    def _block(self, b: ast.Block, scopes: list) -> None:
        scope = Scope((b.span.line, b.span.col), (b.span.end_line, b.span.end_col))
        self.scopes.append(scope)
        scopes = scopes + [scope.names]
        for s in b.stmts:
            self._stmt(s, scopes)

    def _stmt(self, s, scopes: list) -> None:
        if isinstance(s, ast.Let):
            self._type(s.type, scopes)
            self._expr(s.value, scopes)
            for name, sp in zip(s.names, s.name_spans):
                self._define(scopes[-1], Symbol(name, "var" if s.mutable else "let", self.file,
                                                sp.line, sp.col, s))
        elif isinstance(s, (ast.Assign, ast.AugAssign)):
            self._expr(s.target, scopes)
            self._expr(s.value, scopes)
        elif isinstance(s, ast.ExprStmt):
            self._expr(s.expr, scopes)
        elif isinstance(s, ast.Return):
            if s.value is not None:
                self._expr(s.value, scopes)
        elif isinstance(s, ast.If):
            self._expr(s.cond, scopes)
            self._block(s.then, scopes)
            if isinstance(s.orelse, ast.Block):
                self._block(s.orelse, scopes)
            elif s.orelse is not None:
                self._stmt(s.orelse, scopes)
        elif isinstance(s, ast.While):
            self._expr(s.cond, scopes)
            self._block(s.body, scopes)
        elif isinstance(s, ast.For):
            self._expr(s.iter, scopes)
            loop = Scope((s.span.line, s.span.col), (s.span.end_line, s.span.end_col))
            self.scopes.append(loop)
            sp = s.var_span
            if sp.line >= 1:
                self._define(loop.names, Symbol(s.var, "for", self.file, sp.line, sp.col, s))
            self._block(s.body, scopes + [loop.names])
        elif isinstance(s, ast.Block):
            self._block(s, scopes)

    def _type(self, t, scopes: list) -> None:
        if isinstance(t, ast.TypeExpr):
            for a in t.args or ():
                self._expr(a, scopes)
        elif isinstance(t, ast.TupleTypeExpr):
            for e in t.elts:
                self._type(e, scopes)

    @staticmethod
    def _lookup(name: str, scopes: list) -> Symbol | None:
        for scope in reversed(scopes):
            sym = scope.get(name)
            if sym is not None:
                return sym
        return None

    def _expr(self, e, scopes: list) -> None:
        if isinstance(e, ast.Name):
            sp = e.span
            self.occurrences.append(Occurrence(sp.line, sp.col, e.id, self._lookup(e.id, scopes),
                                               "ref"))
        elif isinstance(e, ast.Member):
            chain = _chain(e)
            if chain is not None:
                root = self._lookup(chain[0].id, scopes)
                if root is not None and root.kind == "module":
                    self._module_member(e, chain, root)
                    return
            self._expr(e.value, scopes)
        elif isinstance(e, ast.Call):
            self._expr(e.func, scopes)
            callee = self._callee(e.func, scopes)
            for a in e.args:
                if a.name is not None and a.span is not None and a.span.line >= 1:
                    target = callee.params.get(a.name) if isinstance(callee, Symbol) else None
                    self.occurrences.append(Occurrence(
                        a.span.line, a.span.col, a.name, target, "keyword",
                        builtin=callee if isinstance(callee, str) else None))
                self._expr(a.value, scopes)
        else:
            for c in e.children() if isinstance(e, ast.Node) else ():
                if isinstance(c, ast.Expr):
                    self._expr(c, scopes)
                elif isinstance(c, ast.Arg):
                    self._expr(c.value, scopes)

    def _callee(self, func, scopes: list):
        """The user function a call calls (a Symbol), a built-in's name, or None."""
        if isinstance(func, ast.Name):
            sym = self._lookup(func.id, scopes)
            if sym is None:
                return func.id
            return sym if sym.kind in ("fn", "kernel") else None
        return None

    def _module_member(self, e: ast.Member, chain: list, root: Symbol) -> None:
        """`m.f` after `import a.b as m;`, `a.b.f` after `import a.b;`: `f` of that module."""
        members = _members(e)
        names = [chain[0].id] + [m.attr for m in members]
        first = chain[0].span
        self.occurrences.append(Occurrence(first.line, first.col, names[0], root, "ref"))
        prefix = (root.name,) if root.node.alias else tuple(root.target)
        k = len(prefix)
        if len(names) <= k or tuple(names[:k]) != prefix:
            return
        member = members[k - 1]
        sp = member.span
        col = sp.end_col - len(member.attr)
        target = Symbol(member.attr, "import", self.file, sp.end_line, col, member,
                        target=(tuple(root.target), member.attr))
        self.occurrences.append(Occurrence(sp.end_line, col, member.attr, target, "member"))

    # ---- queries ----------------------------------------------------------------------------
    def at(self, line: int, col: int) -> Occurrence | None:
        """The occurrence whose name covers (line, col), 1-based (its end counts too)."""
        lo, hi = 0, len(self.occurrences)
        while lo < hi:
            mid = (lo + hi) // 2
            o = self.occurrences[mid]
            if (o.line, o.col) <= (line, col):
                lo = mid + 1
            else:
                hi = mid
        for o in reversed(self.occurrences[max(lo - 2, 0):lo]):
            if o.line == line and o.col <= col <= o.end:
                return o
        return None

    def uses(self, sym: Symbol) -> list[Occurrence]:
        """Every occurrence of `sym` in the document, its definition included."""
        return [o for o in self.occurrences if o.symbol is sym]  # (sorted by position)

    def visible(self, line: int, col: int) -> dict[str, Symbol]:
        """The names visible at (line, col): the module's, then those of every enclosing
        scope defined before the position (inner ones shadow outer ones)."""
        out = dict(self.top)
        for scope in sorted(self.scopes, key=lambda s: s.start):
            if scope.start <= (line, col) <= scope.end:
                for name, sym in scope.names.items():
                    if (sym.line, sym.col) < (line, col) or sym.kind in ("param", "for"):
                        out[name] = sym
        return out


def _chain(e: ast.Member) -> list | None:
    """[Name] when `e` is `name.a.b...`, else None."""
    v = e
    while isinstance(v, ast.Member):
        v = v.value
    return [v] if isinstance(v, ast.Name) else None


def _members(e: ast.Member) -> list[ast.Member]:
    """The Member nodes of `name.a.b`, innermost (`name.a`) first."""
    out = []
    v = e
    while isinstance(v, ast.Member):
        out.append(v)
        v = v.value
    return out[::-1]


def module_path_of(analysis, dotted: tuple) -> str | None:
    """The file the document's import of `dotted` reads."""
    loader = analysis.loader
    if loader is None:
        from tilelang.frontend.imports import ModuleLoader

        loader = ModuleLoader([])
    try:
        return loader.find(tuple(dotted), analysis.module.file if analysis.module else "", None)
    except Exception:
        return None


def imported_module(analysis, dotted: tuple):
    """The parsed module of `dotted` as imported by the document (None if it is not found or
    does not parse): from the check's loader, else parsed through the import cache."""
    path = module_path_of(analysis, dotted)
    if path is None:
        return None, None
    loader = analysis.loader
    if loader is not None:
        for lm in loader.loaded.values():
            if os.path.realpath(lm.path) == os.path.realpath(path):
                return path, lm.module
    try:
        from .incremental import CachedLoader

        lm = CachedLoader([]).load(tuple(dotted), analysis.module.file, None)
        return path, lm.module
    except Exception:
        return path, None
