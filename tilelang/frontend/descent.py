"""The fast parser: recursive descent with precedence climbing over `lexer`'s tokens, building
the same AST, spans included, that Lark's LALR parser and `tree_to_ast` build from the grammar.

It handles well-formed source only. At anything else (a syntax error, a literal `tree_to_ast`
would diagnose, a chained comparison, a bad assignment target, a repeated keyword argument) it
raises `Fallback` and `parser.parse` parses the text again on the Lark path, which reports
exactly what it always did. Nesting deeper than its stack (`limits.PARSE_FRAMES`) is refused
with `NestingTooDeep` (E0112), whatever else the text holds. A span covers the tokens of
its grammar rule, the parentheses around an operand included (as Lark's propagated positions
do): every node records the token range it was parsed from.
"""

from __future__ import annotations

import gc
import math
import sys

from ..diagnostics import Span
from . import ast as A
from .lexer import Fallback, tokenize
from .precedence import AND_LEVEL, COMPARE_LEVEL, INFIX, NOT_LEVEL, OR_LEVEL, PREFIX
from .limits import PARSE_FRAMES, NestingTooDeep, deep_recursion

__all__ = ["Fallback", "parse_module"]

_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "\\": "\\", '"': '"', "'": "'",
            "a": "\a", "b": "\b", "f": "\f", "v": "\v"}
_HEX = frozenset("0123456789abcdefABCDEF")
_AUG = {"+=": "+", "-=": "-", "*=": "*", "/=": "/", "%=": "%", "**=": "**", "&=": "&",
        "|=": "|", "^=": "^", "<<=": "<<", ">>=": ">>", "@=": "@"}
_INT_KINDS = frozenset({"DEC_INT", "HEX_INT", "BIN_INT"})
# Decimal literals longer than this take the Lark path (`tree_to_ast` converts them in pieces).
_MAX_FAST_DIGITS = 4000


def _string_value(raw: str) -> str:
    """The value of a string literal's body; an escape `tree_to_ast` rejects takes the Lark path."""
    out = []
    i, n = 0, len(raw)
    while i < n:
        c = raw[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        nxt = raw[i + 1]
        if nxt in _ESCAPES:
            out.append(_ESCAPES[nxt])
            i += 2
        elif nxt == "x" and n >= i + 4 and raw[i + 2] in _HEX and raw[i + 3] in _HEX:
            out.append(chr(int(raw[i + 2:i + 4], 16)))
            i += 4
        else:
            raise Fallback("unknown escape")
    return "".join(out)


# The most frequent nodes are built without their record `__init__` (a generic one, matching
# arguments to fields): the fields are stored one by one, as the attributes they are. The
# differential test compares every field.
_new = object.__new__


def _name(id, span):
    o = _new(A.Name)
    o.id = id
    o.span = span
    return o


def _arg(value, name, span):
    o = _new(A.Arg)
    o.value = value
    o.name = name
    o.span = span
    return o


def _int(value, text, span):
    o = _new(A.IntLit)
    o.value = value
    o.text = text
    o.span = span
    return o


def _call(func, args, span):
    o = _new(A.Call)
    o.func = func
    o.args = args
    o.span = span
    return o


def _binop(op, left, right, span):
    o = _new(A.BinOp)
    o.op = op
    o.left = left
    o.right = right
    o.span = span
    return o


def _tuple(elts, span):
    o = _new(A.TupleExpr)
    o.elts = elts
    o.span = span
    return o


def _type(name, args, span):
    o = _new(A.TypeExpr)
    o.name = name
    o.args = args
    o.span = span
    return o


def _float(value, text, span):
    o = _new(A.FloatLit)
    o.value = value
    o.text = text
    o.span = span
    return o


def _let(mutable, names, is_tuple, type, value, span, name_spans):
    o = _new(A.Let)
    o.mutable = mutable
    o.names = names
    o.is_tuple = is_tuple
    o.type = type
    o.value = value
    o.span = span
    o.name_spans = name_spans
    return o


def _param(name, type, default, is_const, span):
    o = _new(A.Param)
    o.name = name
    o.type = type
    o.default = default
    o.is_const = is_const
    o.span = span
    return o


def parse_module(text: str, file: str) -> A.Module:
    """The module of `text`, or `Fallback` when the text is not plainly well-formed."""
    # Parsing allocates tens of thousands of objects and frees none: the cycle collector would
    # run every few hundred of them and walk them all again, for nothing. Pause it.
    paused = gc.isenabled()
    gc.disable()
    try:
        with deep_recursion(PARSE_FRAMES):
            return _parse_module(text, file)
    finally:
        if paused:
            gc.enable()


def _parse_module(text: str, file: str) -> A.Module:
    K, T, L, C = tokenize(text)
    most_frames = sys.getrecursionlimit()       # PARSE_FRAMES, or more where the caller raised it
    n_tokens = len(K)
    K.append("$END")        # a second end: looking one token ahead never leaves the list
    pos = 0
    new = object.__new__
    NameNode = A.Name

    def span(a: int, b: int) -> Span:
        """Token a's start to token b's end."""
        s = new(Span)
        s.file = file
        s.line = L[a]
        s.col = C[a]
        s.end_line = L[b]
        s.end_col = C[b] + len(T[b])
        return s

    def name_at(i: int) -> A.Name:
        """The `Name` of token i (the most frequent node: its span built in the same call)."""
        s = new(Span)
        s.file = file
        s.line = line = L[i]
        s.col = c = C[i]
        s.end_line = line
        s.end_col = c + len(T[i])
        o = new(NameNode)
        o.id = T[i]
        o.span = s
        return o

    def expect(kind: str) -> None:
        nonlocal pos
        if K[pos] != kind:
            raise Fallback(kind)
        pos += 1

    def name() -> str:
        nonlocal pos
        if K[pos] != "NAME":
            raise Fallback("NAME")
        pos += 1
        return T[pos - 1]

    # ---- expressions ----
    def atom() -> A.Expr:
        nonlocal pos
        k = K[pos]
        i = pos
        if k == "NAME":
            pos += 1
            return name_at(i)
        if k in _INT_KINDS:
            pos += 1
            tok = T[i]
            digits = tok.replace("_", "") if "_" in tok else tok
            if k == "DEC_INT":
                if len(digits) > 1 and digits[0] == "0" or len(digits) > _MAX_FAST_DIGITS:
                    raise Fallback("literal")
                value = int(digits)
            else:
                if len(digits) > _MAX_FAST_DIGITS:
                    raise Fallback("literal")
                value = int(digits, 0)
            return _int(value, tok, span(i, i))
        if k == "FLOAT":
            pos += 1
            tok = T[i]
            value = float(tok.replace("_", "") if "_" in tok else tok)
            if value == math.inf:
                raise Fallback("literal")
            return _float(value, tok, span(i, i))
        if k == "STRING":
            pos += 1
            raw = T[i][1:-1]
            return A.StrLit(_string_value(raw) if "\\" in raw else raw, span(i, i))
        if k == "(":
            pos += 1
            if K[pos] == ")":
                pos += 1
                return _tuple((), span(i, pos - 1))
            first = test()
            if K[pos] == ")":
                pos += 1
                return first
            expect(",")
            elts = [first]
            while K[pos] != ")":
                elts.append(test())
                if K[pos] != ",":
                    break
                pos += 1
            expect(")")
            return _tuple(tuple(elts), span(i, pos - 1))
        if k == "true" or k == "false":
            pos += 1
            return A.BoolLit(k == "true", span(i, i))
        if k == "inf":
            pos += 1
            return A.FloatLit(math.inf, "inf", span(i, i))
        if k == "nan":
            pos += 1
            return A.FloatLit(math.nan, "nan", span(i, i))
        raise Fallback("expression")

    def arguments(call: bool) -> tuple:
        """The arguments after an open `(`, through the `)`."""
        nonlocal pos
        args = []
        seen = None
        while K[pos] != ")":
            i = pos
            if K[pos] == "NAME" and K[pos + 1] == "=":
                key = T[pos]
                pos += 2
                value = test()
                if call:
                    if seen is None:
                        seen = {key}
                    elif key in seen:
                        raise Fallback("keyword twice")
                    else:
                        seen.add(key)
                args.append(_arg(value, key, span(i, pos - 1)))
            else:
                value = test()
                if call and seen:
                    raise Fallback("positional after keyword")
                # The argument's tokens are the value's, whose span is theirs unless the
                # value is a parenthesized operand (its span leaves the parentheses out).
                args.append(_arg(value, None, value.span if K[i] != "(" else span(i, pos - 1)))
            if K[pos] != ",":
                break
            pos += 1
        expect(")")
        return tuple(args)

    def factor() -> A.Expr:
        """A prefix operator's operand, `**` and the postfix forms."""
        nonlocal pos
        start = pos
        k = K[pos]
        if k in PREFIX:
            pos += 1
            operand = factor()
            return A.UnaryOp(k, operand, span(start, pos - 1))
        if k == "NAME":
            pos += 1
            node = name_at(start)
        else:
            node = atom()
        k = K[pos]
        while k == "(" or k == "[" or k == ".":
            pos += 1
            if k == "(":
                node = _call(node, arguments(True), span(start, pos - 1))
            elif k == "[":
                indices = [subscript()]
                while K[pos] == ",":
                    pos += 1
                    if K[pos] == "]":
                        break
                    indices.append(subscript())
                expect("]")
                node = A.Index(node, tuple(indices), span(start, pos - 1))
            else:
                attr = name()
                node = A.Member(node, attr, span(start, pos - 1))
            k = K[pos]
        if k == "**":
            pos += 1
            right = factor()
            return _binop("**", node, right, span(start, pos - 1))
        return node

    def climb(min_level: int) -> A.Expr:
        """An expression whose infix operators bind at `min_level` or tighter."""
        nonlocal pos
        start = pos
        k = K[pos]
        if k == "NAME" and K[pos + 1] not in _POSTFIX:
            pos += 1
            left = name_at(start)
        elif k == "not":
            if min_level > NOT_LEVEL:
                raise Fallback("not")
            pos += 1
            operand = climb(NOT_LEVEL)
            left = A.UnaryOp("not", operand, span(start, pos - 1))
        else:
            left = factor()
        chain = 0
        while True:
            k = K[pos]
            level = INFIX.get(k)
            if level is None or level < min_level:
                return left
            pos += 1
            chain += 1      # each operator deepens the tree by one: the checker recurses there
            if chain > most_frames:
                raise NestingTooDeep(f"more than {most_frames} operators in a row")
            if level == COMPARE_LEVEL:
                right = climb(level + 1)
                left = A.Compare(k, left, right, span(start, pos - 1))
                if INFIX.get(K[pos]) == COMPARE_LEVEL:
                    raise Fallback("chained comparison")
            elif level == OR_LEVEL or level == AND_LEVEL:
                right = climb(level + 1)
                left = A.BoolOp(k, left, right, span(start, pos - 1))
            else:
                right = climb(level + 1)
                left = _binop(k, left, right, span(start, pos - 1))

    def subscript() -> A.Expr:
        """An index entry: `test`, or a slice `lo:hi` with either bound left out."""
        nonlocal pos
        start = pos
        lo = None
        if K[pos] != ":":
            lo = test()
            if K[pos] != ":":
                return lo
        pos += 1
        hi = test() if K[pos] != "," and K[pos] != "]" else None
        return A.Slice(lo, hi, span(start, pos - 1))

    def test() -> A.Expr:
        nonlocal pos
        start = pos
        if K[pos + 1] in _ENDS_OPERAND:        # the common `f(x, 0.0)`: a single token
            if K[pos] == "NAME":
                pos += 1
                return name_at(start)
            return atom()
        node = climb(1)
        if K[pos] != "if":
            return node
        pos += 1
        cond = climb(1)
        expect("else")
        orelse = test()
        return A.IfExpr(cond, node, orelse, span(start, pos - 1))

    def expr() -> A.Expr:
        """`test`, or a bare tuple `a, b` (at least two elements, an optional trailing comma)."""
        nonlocal pos
        start = pos
        first = test()
        if K[pos] != ",":
            return first
        return tuple_rest(first, start)

    def tuple_rest(first: A.Expr, start: int) -> A.Expr:
        nonlocal pos
        pos += 1
        elts = [first, test()]
        while K[pos] == ",":
            pos += 1
            if K[pos] in _TUPLE_END:
                break
            elts.append(test())
        return _tuple(tuple(elts), span(start, pos - 1))

    # ---- types ----
    def type_expr():
        nonlocal pos
        start = pos
        k = K[pos]
        if k == "NAME":
            pos += 1
            if K[pos] != "[":
                return _type(T[start], None, span(start, start))
            pos += 1
            args = [test()]
            while K[pos] == ",":
                pos += 1
                if K[pos] == "]":
                    break
                args.append(test())
            expect("]")
            return _type(T[start], tuple(args), span(start, pos - 1))
        if k == "(":
            pos += 1
            if K[pos] == ")":
                pos += 1
                return A.TupleTypeExpr((), span(start, pos - 1))
            elts = [type_expr()]
            expect(",")
            while K[pos] != ")":
                elts.append(type_expr())
                if K[pos] != ",":
                    break
                pos += 1
            expect(")")
            return A.TupleTypeExpr(tuple(elts), span(start, pos - 1))
        raise Fallback("type")

    # ---- statements ----
    def block() -> A.Block:
        nonlocal pos
        start = pos
        expect("{")
        stmts = []
        while K[pos] != "}":
            stmts.append(statement())
        pos += 1
        return A.Block(tuple(stmts), span(start, pos - 1))

    def statement() -> A.Stmt:
        nonlocal pos
        start = pos
        k = K[pos]
        if k == "let" or k == "var":
            pos += 1
            if K[pos] == "(":
                pos += 1
                names, spans = [name()], [span(pos - 1, pos - 1)]
                expect(",")
                while K[pos] != ")":
                    names.append(name())
                    spans.append(span(pos - 1, pos - 1))
                    if K[pos] != ",":
                        break
                    pos += 1
                expect(")")
                is_tuple = True
            else:
                names, spans = [name()], [span(pos - 1, pos - 1)]
                is_tuple = False
            typ = None
            if K[pos] == ":":
                pos += 1
                typ = type_expr()
            expect("=")
            value = expr()
            expect(";")
            return _let(k == "var", tuple(names), is_tuple, typ, value, span(start, pos - 1),
                         tuple(spans))
        if k == "if":
            return if_stmt()
        if k == "while":
            pos += 1
            cond = expr()
            body = block()
            return A.While(cond, body, span(start, pos - 1))
        if k == "for" or k == "static":
            is_static = k == "static"
            pos += 1
            if is_static:
                expect("for")
            var = name()
            var_span = span(pos - 1, pos - 1)
            expect("in")
            it = expr()
            body = block()
            return A.For(var, it, body, is_static, span(start, pos - 1), var_span)
        if k == "return":
            pos += 1
            value = None if K[pos] == ";" else expr()
            expect(";")
            return A.Return(value, span(start, pos - 1))
        if k == "break" or k == "continue":
            pos += 1
            expect(";")
            return (A.Break if k == "break" else A.Continue)(span(start, pos - 1))
        if k == "{":
            return block()
        first = test()
        k = K[pos]
        if k == ";":
            pos += 1
            return A.ExprStmt(first, span(start, pos - 1))
        if k == "=" or k in _AUG:
            if not isinstance(first, (A.Name, A.Index, A.Member)):
                raise Fallback("assignment target")
            pos += 1
            value = expr()
            expect(";")
            if k == "=":
                return A.Assign(first, value, span(start, pos - 1))
            return A.AugAssign(first, _AUG[k], value, span(start, pos - 1))
        if k == ",":
            value = tuple_rest(first, start)
            expect(";")
            return A.ExprStmt(value, span(start, pos - 1))
        raise Fallback("statement")

    def if_stmt() -> A.If:
        nonlocal pos
        start = pos
        pos += 1
        cond = expr()
        then = block()
        orelse = None
        if K[pos] == "else":
            pos += 1
            orelse = if_stmt() if K[pos] == "if" else block()
        return A.If(cond, then, orelse, span(start, pos - 1))

    # ---- items ----
    def params() -> tuple:
        nonlocal pos
        out = []
        expect("(")
        while K[pos] != ")":
            start = pos
            is_const = K[pos] == "const"
            if is_const:
                pos += 1
            pname = name()
            typ = default = None
            if K[pos] == ":":
                pos += 1
                typ = type_expr()
            if K[pos] == "=":
                pos += 1
                default = test()
            out.append(_param(pname, typ, default, is_const, span(start, pos - 1)))
            if K[pos] != ",":
                break
            pos += 1
        expect(")")
        return tuple(out)

    def definition() -> A.Item:
        nonlocal pos
        start = pos
        attrs = []
        while K[pos] == "@":
            a = pos
            pos += 1
            aname = name()
            args = None
            if K[pos] == "(":
                pos += 1
                args = arguments(False)
            attrs.append(A.Attribute(aname, args, span(a, pos - 1)))
        k = K[pos]
        if k != "fn" and k != "kernel":
            raise Fallback("item")
        pos += 1
        dname = name()
        name_span = span(pos - 1, pos - 1)
        ps = params()
        if k == "kernel":
            body = block()
            return A.KernelDef(dname, ps, body, tuple(attrs), span(start, pos - 1), name_span)
        ret = None
        if K[pos] == "->":
            pos += 1
            ret = type_expr()
        body = block()
        return A.FnDef(dname, ps, ret, body, tuple(attrs), span(start, pos - 1), name_span)

    def dotted() -> tuple:
        nonlocal pos
        parts = [name()]
        while K[pos] == ".":
            pos += 1
            parts.append(name())
        return tuple(parts)

    def item() -> A.Item:
        nonlocal pos
        start = pos
        k = K[pos]
        if k == "import":
            pos += 1
            path = dotted()
            alias = None
            if K[pos] == "as":
                pos += 1
                alias = name()
            expect(";")
            return A.Import(path, alias, span(start, pos - 1))
        if k == "from":
            pos += 1
            path = dotted()
            expect("import")
            names = []
            while True:
                a = pos
                iname = name()
                alias = None
                if K[pos] == "as":
                    pos += 1
                    alias = name()
                names.append(A.ImportName(iname, alias, span(a, pos - 1)))
                if K[pos] != ",":
                    break
                pos += 1
                if K[pos] == ";":
                    break
            expect(";")
            return A.FromImport(path, tuple(names), span(start, pos - 1))
        if k == "const":
            pos += 1
            cname = name()
            name_span = span(pos - 1, pos - 1)
            typ = None
            if K[pos] == ":":
                pos += 1
                typ = type_expr()
            expect("=")
            value = expr()
            expect(";")
            return A.ConstDef(cname, typ, value, span(start, pos - 1), name_span)
        return definition()

    items = []
    try:
        while pos < n_tokens - 1:
            items.append(item())
    except RecursionError:
        raise NestingTooDeep("nesting deeper than the parser's stack") from None
    lines = text.split("\n")
    return A.Module(tuple(items), file, Span(file, 1, 1, len(lines), len(lines[-1]) + 1))


# Tokens that end an expression: after a name, they make it the whole operand.
_ENDS_OPERAND = frozenset({",", ")", ";", "]", "}", "=", "{", "$END"})
# Tokens that continue an operand: calls, indexing, members and `**`.
_POSTFIX = frozenset({"(", "[", ".", "**"})
# Tokens after a trailing comma that end a bare tuple (`return a, b,;`).
_TUPLE_END = frozenset({";", "=", "{", ")", "]", "}", "$END"})
