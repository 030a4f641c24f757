"""AST → canonical Tile source. `parse(print_module(m)) == m` for every module `m`.

Parentheses are written only where precedence requires them; tuples are always parenthesised.
"""

from __future__ import annotations

import math

from . import ast

# Binding strength, higher binds tighter (Python's order).
_IFEXPR, _OR, _AND, _NOT, _CMP, _BOR, _BXOR, _BAND, _SHIFT, _ADD, _MUL, _UNARY, _POW, _POSTFIX, \
    _ATOM = range(2, 17)

_BINARY = {"|": _BOR, "^": _BXOR, "&": _BAND, "<<": _SHIFT, ">>": _SHIFT, "+": _ADD, "-": _ADD,
           "*": _MUL, "/": _MUL, "%": _MUL, "@": _MUL, "**": _POW}

_STR_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t", "\r": "\\r", "\0": "\\0",
                "\a": "\\a", "\b": "\\b", "\f": "\\f", "\v": "\\v"}

INDENT = "    "


def precedence(e: ast.Expr) -> int:
    if isinstance(e, ast.IfExpr):
        return _IFEXPR
    if isinstance(e, ast.BoolOp):
        return _OR if e.op == "or" else _AND
    if isinstance(e, ast.UnaryOp):
        return _NOT if e.op == "not" else _UNARY
    if isinstance(e, ast.Compare):
        return _CMP
    if isinstance(e, ast.BinOp):
        return _BINARY[e.op]
    if isinstance(e, (ast.Call, ast.Index, ast.Member)):
        return _POSTFIX
    if isinstance(e, ast.IntLit) and e.value < 0:
        return _UNARY
    if isinstance(e, ast.FloatLit) and (e.value < 0 or math.copysign(1.0, e.value) < 0):
        return _UNARY
    return _ATOM


def expr(e: ast.Expr, need: int = 0) -> str:
    """Source of `e`, parenthesised if it binds less tightly than `need`."""
    text = _expr(e)
    return f"({text})" if precedence(e) < need else text


def _float(v: float) -> str:
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "-inf" if v < 0 else "inf"
    r = repr(v)
    if "." not in r and "e" not in r:
        r += ".0"
    return r


def string(s: str) -> str:
    out = []
    for ch in s:
        if ch in _STR_ESCAPES:
            out.append(_STR_ESCAPES[ch])
        elif ord(ch) < 32 or ord(ch) == 127:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _args(args) -> str:
    return ", ".join(expr(a.value) if a.name is None else f"{a.name} = {expr(a.value)}"
                     for a in args)


def _tuple(items: list[str]) -> str:
    if len(items) == 1:
        return f"({items[0]},)"
    return "(" + ", ".join(items) + ")"


def _expr(e: ast.Expr) -> str:
    if isinstance(e, ast.Name):
        return e.id
    if isinstance(e, ast.IntLit):
        return str(e.value)
    if isinstance(e, ast.FloatLit):
        return _float(e.value)
    if isinstance(e, ast.BoolLit):
        return "true" if e.value else "false"
    if isinstance(e, ast.StrLit):
        return string(e.value)
    if isinstance(e, ast.TupleExpr):
        return _tuple([expr(x) for x in e.elts])
    if isinstance(e, ast.UnaryOp):
        if e.op == "not":
            return f"not {expr(e.operand, _NOT)}"
        inner = expr(e.operand, _UNARY)
        # `- -x` must not print as `--x`; keep a space between two signs.
        sep = " " if inner[:1] in "+-~" else ""
        return f"{e.op}{sep}{inner}"
    if isinstance(e, ast.BinOp):
        p = _BINARY[e.op]
        if e.op == "**":
            return f"{expr(e.left, _POSTFIX)} ** {expr(e.right, _UNARY)}"
        return f"{expr(e.left, p)} {e.op} {expr(e.right, p + 1)}"
    if isinstance(e, ast.BoolOp):
        p = _OR if e.op == "or" else _AND
        return f"{expr(e.left, p)} {e.op} {expr(e.right, p + 1)}"
    if isinstance(e, ast.Compare):
        return f"{expr(e.left, _CMP + 1)} {e.op} {expr(e.right, _CMP + 1)}"
    if isinstance(e, ast.IfExpr):
        return f"{expr(e.then, _OR)} if {expr(e.cond, _OR)} else {expr(e.orelse, _IFEXPR)}"
    if isinstance(e, ast.Call):
        return f"{expr(e.func, _POSTFIX)}({_args(e.args)})"
    if isinstance(e, ast.Index):
        return f"{expr(e.value, _POSTFIX)}[{', '.join(_subscript(i) for i in e.indices)}]"
    if isinstance(e, ast.Member):
        return f"{expr(e.value, _POSTFIX)}.{e.attr}"
    raise TypeError(f"not an expression: {e!r}")


def _subscript(e: ast.Expr) -> str:
    if isinstance(e, ast.Slice):
        lo = expr(e.lower) if e.lower is not None else ""
        hi = expr(e.upper) if e.upper is not None else ""
        return f"{lo}:{hi}"
    return expr(e)


def type_expr(t: ast.AnyTypeExpr) -> str:
    if isinstance(t, ast.TupleTypeExpr):
        return _tuple([type_expr(x) for x in t.elts]) if t.elts else "()"
    if t.args is None:
        return t.name
    return f"{t.name}[{', '.join(expr(a) for a in t.args)}]"


def _block(b: ast.Block, depth: int) -> list[str]:
    lines = []
    for s in b.stmts:
        lines += stmt(s, depth + 1)
    return lines


def _braced(b: ast.Block, head: str, depth: int) -> list[str]:
    pad = INDENT * depth
    if not b.stmts:
        return [f"{pad}{head}{{ }}" if head else f"{pad}{{ }}"]
    return [f"{pad}{head}{{"] + _block(b, depth) + [f"{pad}}}"]


def stmt(s: ast.Stmt, depth: int = 0) -> list[str]:
    pad = INDENT * depth
    if isinstance(s, ast.Let):
        kw = "var" if s.mutable else "let"
        pat = _tuple(list(s.names)) if s.is_tuple else s.names[0]
        ann = f": {type_expr(s.type)}" if s.type is not None else ""
        return [f"{pad}{kw} {pat}{ann} = {expr(s.value)};"]
    if isinstance(s, ast.Assign):
        return [f"{pad}{expr(s.target)} = {expr(s.value)};"]
    if isinstance(s, ast.AugAssign):
        return [f"{pad}{expr(s.target)} {s.op}= {expr(s.value)};"]
    if isinstance(s, ast.ExprStmt):
        return [f"{pad}{expr(s.expr)};"]
    if isinstance(s, ast.If):
        lines = _braced(s.then, f"if {expr(s.cond)} ", depth)
        orelse = s.orelse
        while orelse is not None:
            if isinstance(orelse, ast.If):
                more = _braced(orelse.then, f"if {expr(orelse.cond)} ", depth)
                lines[-1] += " else " + more[0].lstrip()
                lines += more[1:]
                orelse = orelse.orelse
            else:
                more = _braced(orelse, "", depth)
                lines[-1] += " else " + more[0].lstrip()
                lines += more[1:]
                orelse = None
        return lines
    if isinstance(s, ast.While):
        return _braced(s.body, f"while {expr(s.cond)} ", depth)
    if isinstance(s, ast.For):
        head = ("static " if s.is_static else "") + f"for {s.var} in {expr(s.iter)} "
        return _braced(s.body, head, depth)
    if isinstance(s, ast.Break):
        return [f"{pad}break;"]
    if isinstance(s, ast.Continue):
        return [f"{pad}continue;"]
    if isinstance(s, ast.Return):
        return [f"{pad}return;" if s.value is None else f"{pad}return {expr(s.value)};"]
    if isinstance(s, ast.Block):
        return _braced(s, "", depth)
    raise TypeError(f"not a statement: {s!r}")


def _param(p: ast.Param) -> str:
    text = ("const " if p.is_const else "") + p.name
    if p.type is not None:
        text += f": {type_expr(p.type)}"
    if p.default is not None:
        text += f" = {expr(p.default)}"
    return text


def _attr(a: ast.Attribute) -> str:
    return f"@{a.name}" if a.args is None else f"@{a.name}({_args(a.args)})"


def item(it: ast.Item) -> list[str]:
    if isinstance(it, ast.Import):
        return [f"import {'.'.join(it.path)}" + (f" as {it.alias}" if it.alias else "") + ";"]
    if isinstance(it, ast.FromImport):
        names = ", ".join(n.name + (f" as {n.alias}" if n.alias else "") for n in it.names)
        return [f"from {'.'.join(it.path)} import {names};"]
    if isinstance(it, ast.ConstDef):
        ann = f": {type_expr(it.type)}" if it.type is not None else ""
        return [f"const {it.name}{ann} = {expr(it.value)};"]
    if isinstance(it, (ast.FnDef, ast.KernelDef)):
        lines = [_attr(a) for a in it.attrs]
        params = ", ".join(_param(p) for p in it.params)
        if isinstance(it, ast.FnDef):
            ret = f" -> {type_expr(it.ret)}" if it.ret is not None else ""
            head = f"fn {it.name}({params}){ret} "
        else:
            head = f"kernel {it.name}({params}) "
        return lines + _braced(it.body, head, 0)
    raise TypeError(f"not an item: {it!r}")


def print_module(m: ast.Module) -> str:
    chunks = []
    prev = None
    for it in m.items:
        simple = isinstance(it, (ast.Import, ast.FromImport, ast.ConstDef))
        if chunks and not (simple and prev):
            chunks.append("")
        chunks += item(it)
        prev = simple
    return "\n".join(chunks) + ("\n" if chunks else "")
