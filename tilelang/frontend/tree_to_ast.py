"""Lark parse tree → AST dataclasses, with the checks a grammar cannot express:
literal values (escapes, leading zeros, out-of-range floats), chained comparisons and
assignment targets. Problems are collected, not raised, so that all of them are reported.
"""

from __future__ import annotations

import math

from lark import Token, Transformer, Tree, v_args
from lark.exceptions import VisitError

from ..diagnostics import Diagnostic, Severity, Span
from . import ast

_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "\\": "\\", '"': '"', "'": "'",
            "a": "\a", "b": "\b", "f": "\f", "v": "\v"}

_AUG = {"+=": "+", "-=": "-", "*=": "*", "/=": "/", "%=": "%", "**=": "**", "&=": "&",
        "|=": "|", "^=": "^", "<<=": "<<", ">>=": ">>", "@=": "@"}


def _is_type(x) -> bool:
    return isinstance(x, (ast.TypeExpr, ast.TupleTypeExpr))


# Beyond any use (no dtype holds more than 64 bits) and beyond what converts quickly; the
# checker reports the too-large literals below this bound in its own terms.
MAX_INT_DIGITS = 100_000


def _abbrev(text: str) -> str:
    """A literal as a message quotes it: a very long one is shortened (the caret shows it all)."""
    return text if len(text) <= 40 else f"{text[:20]}…{text[-10:]}"


def _int_value(digits: str, kind: str) -> int:
    """The value of an integer literal's digits. Decimal text converts in pieces: Python refuses
    to convert more than 4,300 digits at once (hexadecimal and binary have no such limit)."""
    if kind != "DEC_INT":
        return int(digits, 0)
    value = 0
    for i in range(0, len(digits), 4000):
        piece = digits[i:i + 4000]
        value = value * 10 ** len(piece) + int(piece)
    return value


@v_args(meta=True)
class TreeToAst(Transformer):
    def __init__(self, file: str):
        super().__init__()
        self.file = file
        self.errors: list[Diagnostic] = []

    def build(self, tree: Tree, text: str) -> ast.Module:
        try:
            module = self.transform(tree)
        except VisitError as e:  # pragma: no cover - a bug in this class, not in user input
            raise e.orig_exc
        lines = text.split("\n")
        return ast.Module(module.items, self.file,
                          Span(self.file, 1, 1, len(lines), len(lines[-1]) + 1))

    # ---- helpers ----
    def _span(self, meta) -> Span:
        if getattr(meta, "empty", True):
            return Span(self.file, 1, 1, 1, 1)
        return Span(self.file, meta.line, meta.column, meta.end_line, meta.end_column)

    def _tspan(self, tok: Token) -> Span:
        return Span(self.file, tok.line, tok.column, tok.end_line, tok.end_column)

    def _error(self, code: str, message: str, span: Span, help: str | None = None,
               label: str | None = None) -> None:
        self.errors.append(Diagnostic(Severity.ERROR, code, message, span, label, help))

    # ---- items ----
    def start(self, meta, items):
        return ast.Module(tuple(items), self.file)

    def dotted_name(self, meta, names):
        return tuple(str(n) for n in names)

    def import_item(self, meta, ch):
        alias = str(ch[1]) if len(ch) > 1 else None
        return ast.Import(ch[0], alias, self._span(meta))

    def import_name(self, meta, ch):
        return ast.ImportName(str(ch[0]), str(ch[1]) if len(ch) > 1 else None, self._span(meta))

    def from_item(self, meta, ch):
        return ast.FromImport(ch[0], tuple(ch[1:]), self._span(meta))

    def const_item(self, meta, ch):
        name = ch[0]
        typ = ch[1] if len(ch) == 3 else None
        return ast.ConstDef(str(name), typ, ch[-1], self._span(meta), self._tspan(name))

    def attribute(self, meta, ch):
        name = ch[0]
        has_parens = (meta.end_line, meta.end_column) != (name.end_line, name.end_column)
        args = tuple(ch[1]) if len(ch) > 1 else (() if has_parens else None)
        return ast.Attribute(str(name), args, self._span(meta))

    def attributes(self, meta, ch):
        return tuple(ch)

    def params(self, meta, ch):
        return tuple(ch)

    def param(self, meta, ch):
        is_const = isinstance(ch[0], Token) and ch[0].type == "CONST"
        if is_const:
            ch = ch[1:]
        name = str(ch[0])
        typ = next((c for c in ch[1:] if _is_type(c)), None)
        default = next((c for c in ch[1:] if isinstance(c, ast.Expr)), None)
        return ast.Param(name, typ, default, is_const, self._span(meta))

    def _def_parts(self, ch):
        attrs, name = ch[0], ch[1]
        params: tuple = ()
        ret = None
        for c in ch[2:-1]:
            if isinstance(c, tuple):
                params = c
            elif _is_type(c):
                ret = c
        return attrs, name, params, ret, ch[-1]

    def fn_def(self, meta, ch):
        attrs, name, params, ret, body = self._def_parts(ch)
        return ast.FnDef(str(name), params, ret, body, attrs, self._span(meta), self._tspan(name))

    def kernel_def(self, meta, ch):
        attrs, name, params, _, body = self._def_parts(ch)
        return ast.KernelDef(str(name), params, body, attrs, self._span(meta), self._tspan(name))

    # ---- types ----
    def named_type(self, meta, ch):
        return ast.TypeExpr(str(ch[0]), None, self._span(meta))

    def generic_type(self, meta, ch):
        return ast.TypeExpr(str(ch[0]), tuple(ch[1:]), self._span(meta))

    def unit_type(self, meta, ch):
        return ast.TupleTypeExpr((), self._span(meta))

    def tuple_type(self, meta, ch):
        return ast.TupleTypeExpr(tuple(ch), self._span(meta))

    # ---- statements ----
    def block(self, meta, ch):
        return ast.Block(tuple(ch), self._span(meta))

    def name_pattern(self, meta, ch):
        return (tuple(str(c) for c in ch), False, tuple(self._tspan(c) for c in ch))

    def tuple_pattern(self, meta, ch):
        return (tuple(str(c) for c in ch), True, tuple(self._tspan(c) for c in ch))

    def let_stmt(self, meta, ch):
        kw, (names, is_tuple, spans) = ch[0], ch[1]
        typ = ch[2] if len(ch) == 4 else None
        return ast.Let(str(kw) == "var", names, is_tuple, typ, ch[-1], self._span(meta), spans)

    def _check_target(self, target: ast.Expr) -> None:
        if not isinstance(target, (ast.Name, ast.Index, ast.Member)):
            what = {ast.Call: "a call", ast.TupleExpr: "a tuple"}.get(type(target), "this expression")
            self._error("E0110", f"cannot assign to {what}", target.span,
                        help="only a `var` name can be re-bound: `x = ...;`")

    def assign_stmt(self, meta, ch):
        self._check_target(ch[0])
        return ast.Assign(ch[0], ch[1], self._span(meta))

    def aug_assign_stmt(self, meta, ch):
        self._check_target(ch[0])
        return ast.AugAssign(ch[0], _AUG[ch[1]], ch[2], self._span(meta))

    def expr_stmt(self, meta, ch):
        return ast.ExprStmt(ch[0], self._span(meta))

    def if_stmt(self, meta, ch):
        return ast.If(ch[0], ch[1], ch[2] if len(ch) > 2 else None, self._span(meta))

    def while_stmt(self, meta, ch):
        return ast.While(ch[0], ch[1], self._span(meta))

    def for_stmt(self, meta, ch):
        is_static = isinstance(ch[0], Token) and ch[0].type == "STATIC"
        if is_static:
            ch = ch[1:]
        return ast.For(str(ch[0]), ch[1], ch[2], is_static, self._span(meta), self._tspan(ch[0]))

    def break_stmt(self, meta, ch):
        return ast.Break(self._span(meta))

    def continue_stmt(self, meta, ch):
        return ast.Continue(self._span(meta))

    def return_stmt(self, meta, ch):
        return ast.Return(ch[0] if ch else None, self._span(meta))

    # ---- expressions ----
    def _token_text(self, meta, ch):
        return str(ch[0])

    comp_op = add_op = mul_op = shift_op = unary_op = augop = _token_text

    def tuple_expr(self, meta, ch):
        return ast.TupleExpr(tuple(ch), self._span(meta))

    def if_expr(self, meta, ch):
        return ast.IfExpr(ch[1], ch[0], ch[2], self._span(meta))

    def or_op(self, meta, ch):
        return ast.BoolOp("or", ch[0], ch[1], self._span(meta))

    def and_op(self, meta, ch):
        return ast.BoolOp("and", ch[0], ch[1], self._span(meta))

    def not_op(self, meta, ch):
        return ast.UnaryOp("not", ch[0], self._span(meta))

    def compare(self, meta, ch):
        if len(ch) > 3:
            a, op1, b, op2, c = ch[0], ch[1], ch[2], ch[3], ch[4]
            self._error("E0109", "comparisons cannot be chained", self._span(meta),
                        help=f"write the two comparisons joined with `and`: "
                             f"`... {op1} ... and ... {op2} ...`")
        return ast.Compare(ch[1], ch[0], ch[2], self._span(meta))

    def binop(self, meta, ch):
        return ast.BinOp(ch[1], ch[0], ch[2], self._span(meta))

    def binop_or(self, meta, ch):
        return ast.BinOp("|", ch[0], ch[1], self._span(meta))

    def binop_xor(self, meta, ch):
        return ast.BinOp("^", ch[0], ch[1], self._span(meta))

    def binop_and(self, meta, ch):
        return ast.BinOp("&", ch[0], ch[1], self._span(meta))

    def unary(self, meta, ch):
        return ast.UnaryOp(ch[0], ch[1], self._span(meta))

    def pow_op(self, meta, ch):
        return ast.BinOp("**", ch[0], ch[1], self._span(meta))

    def call(self, meta, ch):
        args = tuple(ch[1]) if len(ch) > 1 else ()
        seen: set[str] = set()
        positional_after_keyword = False
        for a in args:
            if a.name is not None:
                if a.name in seen:
                    self._error("E0101", f"keyword argument `{a.name}` given twice", a.span)
                seen.add(a.name)
            elif seen and not positional_after_keyword:
                positional_after_keyword = True
                self._error("E0101", "positional argument after a keyword argument", a.span,
                            help="put positional arguments first")
        return ast.Call(ch[0], args, self._span(meta))

    def arguments(self, meta, ch):
        return tuple(ch)

    def positional(self, meta, ch):
        return ast.Arg(ch[0], None, self._span(meta))

    def keyword(self, meta, ch):
        return ast.Arg(ch[1], str(ch[0]), self._span(meta))

    def index(self, meta, ch):
        return ast.Index(ch[0], tuple(ch[1:]), self._span(meta))

    def slice_both(self, meta, ch):
        return ast.Slice(ch[0], ch[1], self._span(meta))

    def slice_lower(self, meta, ch):
        return ast.Slice(ch[0], None, self._span(meta))

    def slice_upper(self, meta, ch):
        return ast.Slice(None, ch[0], self._span(meta))

    def slice_all(self, meta, ch):
        return ast.Slice(None, None, self._span(meta))

    def member(self, meta, ch):
        return ast.Member(ch[0], str(ch[1]), self._span(meta))

    def name(self, meta, ch):
        return ast.Name(str(ch[0]), self._span(meta))

    def int_lit(self, meta, ch):
        tok = ch[0]
        text = str(tok)
        digits = text.replace("_", "")
        span = self._span(meta)
        if len(digits) > MAX_INT_DIGITS:
            self._error("E0108", f"this integer literal has {len(digits)} digits, too many for "
                        "any integer type", span, help="no integer type holds more than 64 bits")
            return ast.IntLit(0, text, span)
        if tok.type == "DEC_INT" and len(digits) > 1 and digits[0] == "0":
            shown = _abbrev(digits.lstrip("0") or "0")
            self._error("E0108", f"leading zeros are not allowed in the integer `{_abbrev(text)}`",
                        span, help=f"write `{shown}`; hexadecimal is `0x…`, binary `0b…`")
        return ast.IntLit(_int_value(digits, tok.type), text, span)

    def float_lit(self, meta, ch):
        text = str(ch[0])
        value = float(text.replace("_", ""))
        span = self._span(meta)
        if math.isinf(value):
            self._error("E0108", f"the float literal `{_abbrev(text)}` is too large for a double",
                        span, help="write `inf` for infinity")
        return ast.FloatLit(value, text, span)

    def inf_lit(self, meta, ch):
        return ast.FloatLit(math.inf, "inf", self._span(meta))

    def nan_lit(self, meta, ch):
        return ast.FloatLit(math.nan, "nan", self._span(meta))

    def true_lit(self, meta, ch):
        return ast.BoolLit(True, self._span(meta))

    def false_lit(self, meta, ch):
        return ast.BoolLit(False, self._span(meta))

    def string_lit(self, meta, ch):
        tok = ch[0]
        raw = str(tok)[1:-1]
        out = []
        i = 0
        while i < len(raw):
            c = raw[i]
            if c != "\\":
                out.append(c)
                i += 1
                continue
            nxt = raw[i + 1]
            col = tok.column + 1 + i
            if nxt in _ESCAPES:
                out.append(_ESCAPES[nxt])
                i += 2
            elif nxt == "x" and len(raw) >= i + 4 and all(h in "0123456789abcdefABCDEF"
                                                         for h in raw[i + 2:i + 4]):
                out.append(chr(int(raw[i + 2:i + 4], 16)))
                i += 4
            else:
                self._error("E0107", f"unknown escape sequence `\\{nxt}` in a string",
                            Span(self.file, tok.line, col, tok.line, col + 2),
                            help='known escapes: \\n \\t \\r \\0 \\\\ \\" \\\' \\a \\b \\f \\v \\xHH')
                out.append(nxt)
                i += 2
        return ast.StrLit("".join(out), self._span(meta))

    def paren(self, meta, ch):
        return ch[0]

    def empty_tuple(self, meta, ch):
        return ast.TupleExpr((), self._span(meta))

    def paren_tuple(self, meta, ch):
        return ast.TupleExpr(tuple(ch), self._span(meta))
