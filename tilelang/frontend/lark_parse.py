"""The Lark path of the parser: source text → Lark parse tree → AST, with error recovery.

`parser.parse` comes here when the fast parser (`descent`) declines a text: for every file with
an error and for the rare well-formed ones it leaves to Lark. The grammar (`grammar/tile.lark`)
ships with its LALR tables as plain JSON data (`grammar_tables`), so no cache file is ever read.
A clean file takes Lark's own loop. A file with errors is parsed again through Lark's
interactive parser, which lets us report each error in the language's terms ("expected `)` to
close the `(` at 3:14") and resume at the next statement or item boundary to report the errors
after it.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import lark
from lark import Token, Tree
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken

from ..diagnostics import Diagnostic, Label, Severity, Span, TileSyntaxError, remember_source
from . import ast, grammar_tables
from .limits import MAX_ERRORS
from .tree_to_ast import TreeToAst
from .resources import grammar_path

_OPEN = {"LPAR": "RPAR", "LSQB": "RSQB", "LBRACE": "RBRACE"}
_CLOSE = {v: k for k, v in _OPEN.items()}
_CLOSE_TO_OPEN = {")": "(", "]": "[", "}": "{"}

# Friendly names for the regex terminals; string terminals are shown as `text`.
_KIND = {
    "NAME": "an identifier",
    "DEC_INT": "an integer",
    "HEX_INT": "an integer",
    "BIN_INT": "an integer",
    "FLOAT": "a float",
    "STRING": "a string",
    "$END": "end of file",
}
# Terminals that can begin an expression: summarised as "an expression" in messages.
_OPERATORS = {"PLUS", "MINUS", "STAR", "SLASH", "PERCENT", "AT", "VBAR", "CIRCUMFLEX",
              "AMPERSAND", "LESSTHAN", "MORETHAN", "IF", "AND", "OR"}
_EXPR_START = {"NAME", "DEC_INT", "HEX_INT", "BIN_INT", "FLOAT", "STRING", "LPAR", "INF", "NAN",
               "TRUE", "FALSE", "NOT", "PLUS", "MINUS", "TILDE"}


def grammar_text() -> str:
    """The grammar as shipped with the installed package."""
    with open(grammar_path(), encoding="utf-8") as f:
        return f.read()


@functools.lru_cache(maxsize=1)
def _lark() -> lark.Lark:
    # The shipped tables (plain JSON, never a pickle), or the grammar built in memory.
    return grammar_tables.parser_for(grammar_text())


@functools.lru_cache(maxsize=1)
def keywords() -> frozenset[str]:
    """Every reserved word of the grammar (its quoted alphabetic terminals)."""
    return frozenset(t.pattern.value for t in _lark().terminals
                     if t.pattern.type == "str" and t.pattern.value.isidentifier())


def _describe_terminal(name: str) -> str:
    if name in _KIND:
        return _KIND[name]
    try:
        term = _lark().get_terminal(name)
    except KeyError:
        return name.lower()
    if term.pattern.type == "str":
        return f"`{term.pattern.value}`"
    return name.lower()


def _describe_token(tok: Token) -> str:
    if tok.type == "$END":
        return "end of file"
    if tok.type == "NAME":
        return f"identifier `{tok}`"
    if tok.type in ("DEC_INT", "HEX_INT", "BIN_INT"):
        return f"integer `{tok}`"
    if tok.type == "FLOAT":
        return f"float `{tok}`"
    if tok.type == "STRING":
        return "a string"
    if str(tok).isidentifier():
        return f"keyword `{tok}`"
    return f"`{tok}`"


def token_span(file: str, tok: Token) -> Span:
    return Span(file, tok.line, tok.column, tok.end_line or tok.line,
                tok.end_column or tok.column + len(str(tok)))


def _after(file: str, tok: Token) -> Span:
    """A one-column span just after a token (where a missing `;` goes)."""
    line, col = tok.end_line or tok.line, tok.end_column or tok.column + len(str(tok))
    return Span(file, line, col, line, col + 1)


# ---- lexing with recovery -------------------------------------------------------------------


def _lex_with_recovery(text: str, file: str) -> tuple[list[Token], list[Diagnostic]]:
    """Tokens of `text`; each bad character is reported and blanked out, then lexing resumes."""
    diags: list[Diagnostic] = []
    work = text
    start = _unterminated_comment(text)
    if start is not None:
        line = text.count("\n", 0, start) + 1
        col = start - (text.rfind("\n", 0, start) + 1) + 1
        diags.append(Diagnostic(Severity.ERROR, "E0106", "unterminated block comment",
                                Span(file, line, col, line, col + 2),
                                "this comment is never closed", help="close it with `*/`"))
        work = work[:start] + "".join(c if c == "\n" else " " for c in work[start:])
    while True:
        try:
            return list(_lark().lex(work)), diags
        except UnexpectedCharacters as e:
            pos = e.pos_in_stream
            ch = work[pos]
            span = Span(file, e.line, e.column, e.line, e.column + 1)
            if work.startswith("/*", pos):
                diags.append(Diagnostic(Severity.ERROR, "E0106", "unterminated block comment",
                                        Span(file, e.line, e.column, e.line, e.column + 2),
                                        "this comment is never closed",
                                        help="close it with `*/`"))
                stop = len(work)
            elif ch == '"':
                eol = work.find("\n", pos)
                stop = len(work) if eol < 0 else eol
                line_end = e.column + (stop - pos)
                diags.append(Diagnostic(Severity.ERROR, "E0105", "unterminated string literal",
                                        Span(file, e.line, e.column, e.line, line_end),
                                        help='close the string with `"` on the same line'))
            elif ch == "'":
                eol = work.find("\n", pos)
                close = work.find("'", pos + 1, len(work) if eol < 0 else eol)
                stop = pos + 1 if close < 0 else close + 1
                diags.append(Diagnostic(Severity.ERROR, "E0104",
                                        "strings are written with double quotes",
                                        Span(file, e.line, e.column, e.line, e.column + stop - pos),
                                        help=f'write "{work[pos + 1:stop - 1]}"' if close >= 0
                                        else 'write "..."'))
            else:
                shown = repr(ch)[1:-1] if not ch.isprintable() else ch
                hint = None
                if ch == "#":
                    hint = "comments start with `//` or are written `/* ... */`"
                diags.append(Diagnostic(Severity.ERROR, "E0104", f"unexpected character `{shown}`",
                                        span, help=hint))
                stop = pos + 1
            work = work[:pos] + "".join(c if c == "\n" else " " for c in work[pos:stop]) + work[stop:]
            if len(diags) >= MAX_ERRORS:
                return [], diags


def _unterminated_comment(text: str) -> int | None:
    """Offset of a `/*` that is never closed, skipping strings and line comments."""
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            j = i + 1
            while j < n and text[j] not in '"\n':
                j += 2 if text[j] == "\\" else 1
            i = j + 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j + 1
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            if j < 0:
                return i
            i = j + 2
        else:
            i += 1
    return None


# ---- parsing with recovery ------------------------------------------------------------------


@dataclass
class _Snapshot:
    parser: object
    brackets: list[Token]
    index: int  # the token the snapshot was taken before


def _comment_division_hint(text: str, prev: Token | None) -> str | None:
    if prev is None:
        return None
    lines = text.split("\n")
    line = lines[(prev.end_line or prev.line) - 1] if (prev.end_line or prev.line) <= len(lines) else ""
    rest = line[(prev.end_column or prev.column) - 1:].lstrip()
    if rest.startswith("//") and not rest.startswith("///"):
        return ("`//` starts a comment in Tile, so the rest of that line was ignored; "
                "floor division is written `floordiv(a, b)`")
    return None


_NUMBERS = {"DEC_INT", "HEX_INT", "BIN_INT", "FLOAT"}
_STMT_START = {"LET", "VAR", "IF", "WHILE", "FOR", "STATIC", "BREAK", "CONTINUE", "RETURN"}
_ITEM_START = {"FN", "KERNEL", "IMPORT", "FROM", "CONST", "AT"}


def _bad_number(file: str, text: str, prev: Token, tok: Token) -> Diagnostic:
    """A number glued to letters or digits that cannot follow it: `0b102`, `1__0`, `0x`."""
    lines = text.split("\n")
    line = lines[prev.line - 1]
    end = prev.column - 1
    while end < len(line) and (line[end].isalnum() or line[end] in "_."):
        end += 1
    spelled = line[prev.column - 1:end]
    low = spelled.lower()
    if low.startswith("0b"):
        help = "binary literals use only the digits 0 and 1: `0b1011`"
    elif low.startswith("0x"):
        help = "hexadecimal literals need at least one digit 0-9 or a-f after `0x`: `0x2A`"
    elif "__" in spelled or spelled.endswith("_"):
        help = "an underscore may only stand between two digits: `1_000`"
    else:
        help = "integers are written `42`, `0x2A`, `0b101`; floats `1.0`, `2.5e-3`"
    return Diagnostic(Severity.ERROR, "E0108", f"invalid number literal `{spelled}`",
                      Span(file, prev.line, prev.column, prev.line, prev.column + len(spelled)),
                      help=help)


def _syntax_error(file: str, text: str, tok: Token, expected: set[str], brackets: list[Token],
                  prev: Token | None) -> Diagnostic:
    found = _describe_token(tok)
    span = token_span(file, tok) if tok.type != "$END" else _eof_span(file, text)
    hint = _comment_division_hint(text, prev)
    if hint is None and tok.type in ("LET", "VAR") and prev is not None and str(prev) == "(":
        hint = "`let` and `var` are statements, not expressions"
    if hint is None and "NAME" in expected and str(tok) in keywords():
        hint = f"`{tok}` is a reserved word and cannot be used as a name"

    if prev is not None and prev.type in _NUMBERS and tok.type in (_NUMBERS | {"NAME"}) \
            and tok.line == prev.end_line and tok.column == prev.end_column:
        return _bad_number(file, text, prev, tok)

    if tok.type == "ELSE" and "ELSE" not in expected:
        return Diagnostic(Severity.ERROR, "E0101", "`else` without an `if` before it", span,
                          help="`else` must follow the closing `}` of an `if` block")

    if tok.type in _CLOSE and not brackets:
        return Diagnostic(Severity.ERROR, "E0103",
                          f"unexpected `{tok}`: there is no open `{_CLOSE_TO_OPEN[str(tok)]}` "
                          "to close", span, help="remove it, or add the opening bracket it closes")

    # A closer that does not match the innermost open bracket.
    if tok.type in _CLOSE and brackets and _OPEN[brackets[-1].type] != tok.type \
            and tok.type not in expected:
        opener = brackets[-1]
        return Diagnostic(Severity.ERROR, "E0103",
                          f"mismatched closing delimiter: `{tok}` does not close the "
                          f"`{opener}` at {opener.line}:{opener.column}",
                          span, related=(Label(token_span(file, opener), "unclosed delimiter"),),
                          help=hint or f"close the `{opener}` with `{_close_text(opener)}` first")

    if brackets:
        opener = brackets[-1]
        closer = _OPEN[opener.type]
        if closer in expected and (tok.type not in _EXPR_START or "COMMA" not in expected):
            return Diagnostic(Severity.ERROR, "E0101",
                              f"expected `{_close_text(opener)}` to close the `{opener}` at "
                              f"{opener.line}:{opener.column}, found {found}", span,
                              related=(Label(token_span(file, opener), "opened here"),),
                              help=hint)

    if brackets and tok.type in _EXPR_START and "COMMA" in expected \
            and _OPEN[brackets[-1].type] in expected:
        opener = brackets[-1]
        return Diagnostic(Severity.ERROR, "E0101",
                          f"expected `,` or `{_close_text(opener)}`, found {found}", span,
                          help="separate the elements with `,`")

    if "LBRACE" in expected and tok.type not in _EXPR_START and not _is_operator(tok.type) \
            and tok.type not in ("LBRACE", "$END") and "SEMICOLON" not in expected:
        return Diagnostic(Severity.ERROR, "E0101", f"expected `{{` to begin a block, found {found}",
                          span, help="the bodies of `if`, `else`, `while`, `for`, `fn` and "
                                     "`kernel` are always blocks in braces: `if a { ... }`")

    if "SEMICOLON" in expected and prev is not None and tok.type != "$END" \
            and tok.line > (prev.end_line or prev.line):
        return Diagnostic(Severity.ERROR, "E0111", f"expected `;`, found {found}",
                          _after(file, prev), "add `;` here",
                          help=hint or "every statement and item ends with `;`")

    many_ops = len({t for t in expected if _is_operator(t)}) > 3
    items = "FN" in expected and "IMPORT" in expected
    stmts = "LET" in expected and "IF" in expected

    def category(t: str) -> str:
        if items and t in _ITEM_START:
            return "an item (`fn`, `kernel`, `const`, `import`, `from`)"
        if stmts and (t in _STMT_START or t == "LBRACE" or t in _EXPR_START):
            return "a statement"
        if t in _EXPR_START and len(expected & _EXPR_START) > 3:
            return "an expression"
        if many_ops and _is_operator(t):
            return "an operator"
        return _describe_terminal(t)

    names = sorted({category(t) for t in expected},
                   key=lambda s: (not s.startswith("`"), s))
    if not names:
        wanted = "nothing more"
    elif len(names) == 1:
        wanted = names[0]
    elif len(names) <= 8:
        wanted = ", ".join(names[:-1]) + " or " + names[-1]
    else:
        wanted = "one of " + ", ".join(names[:8]) + ", …"
    if hint is None and "FN" in expected and "IMPORT" not in expected \
            and tok.type in ("CONST", "IMPORT", "FROM"):
        hint = "attributes such as `@host` and `@launch` apply only to `fn` and `kernel` items"
    return Diagnostic(Severity.ERROR, "E0101", f"expected {wanted}, found {found}", span,
                      help=hint)


def _is_operator(name: str) -> bool:
    if name in _OPERATORS:
        return True
    desc = _describe_terminal(name)
    return desc.startswith("`") and not any(ch.isalnum() for ch in desc) and desc not in (
        "`;`", "`,`", "`(`", "`)`", "`[`", "`]`", "`{`", "`}`", "`.`", "`:`", "`=`", "`->`")


def _close_text(opener: Token) -> str:
    return {"(": ")", "[": "]", "{": "}"}[str(opener)]


def _eof_span(file: str, text: str) -> Span:
    lines = text.split("\n")
    line = len(lines)
    col = len(lines[-1]) + 1
    return Span(file, line, col, line, col + 1)


def _parse_with_recovery(text: str, file: str, tokens: list[Token]) -> list[Diagnostic]:
    diags: list[Diagnostic] = []
    ip = _lark().parse_interactive("")
    brackets: list[Token] = []
    snap = _Snapshot(ip.copy(deepcopy_values=False), [], 0)
    prev: Token | None = None
    last_error_at = -1
    i = 0
    while i < len(tokens) and len(diags) < MAX_ERRORS:
        tok = tokens[i]
        try:
            ip.feed_token(tok)
        except UnexpectedToken as e:
            if i == last_error_at:  # resuming here failed again: drop the token
                i += 1
                continue
            last_error_at = i
            diag = _syntax_error(file, text, tok, _exact_expected(snap, tokens, i, e), brackets,
                                 prev)
            diags.append(diag)
            # A mismatched closer stands in for the missing one: skip it and go on.
            i = _resync(tokens, i + 1 if diag.code == "E0103" and brackets else i)
            ip = snap.parser.copy(deepcopy_values=False)
            brackets = list(snap.brackets)
            prev = tokens[i - 1] if i > 0 else None
            continue
        if tok.type in _OPEN:
            brackets.append(tok)
        elif tok.type in _CLOSE and brackets:
            brackets.pop()
        prev = tok
        i += 1
        if tok.type in ("SEMICOLON", "LBRACE", "RBRACE"):
            snap = _Snapshot(ip.copy(deepcopy_values=False), list(brackets), i)
    if len(diags) >= MAX_ERRORS:
        diags.append(Diagnostic(Severity.NOTE, None,
                                f"stopped after {MAX_ERRORS} syntax errors; fix these first"))
        return diags
    try:
        ip.feed_eof(tokens[-1] if tokens else None)
    except UnexpectedToken as e:
        if brackets:
            opener = brackets[-1]
            diags.append(Diagnostic(
                Severity.ERROR, "E0102",
                f"this file ends before the `{opener}` at {opener.line}:{opener.column} is closed",
                token_span(file, opener), "unclosed delimiter",
                help=f"add the missing `{_close_text(opener)}`"))
        else:
            end = Token("$END", "", 0, *(lambda s: (s.line, s.col, s.line, s.col))(
                _eof_span(file, text)))
            diags.append(_syntax_error(file, text, end, set(e.expected), brackets, prev))
    return diags


def _exact_expected(snap: _Snapshot, tokens: list[Token], i: int, e: UnexpectedToken) -> set[str]:
    """The terminals really acceptable before token `i`. LALR's table after default reductions
    over-approximates; replaying from the last snapshot and asking each terminal is exact."""
    try:
        ip = snap.parser.copy(deepcopy_values=False)
        for t in tokens[snap.index:i]:
            ip.feed_token(t)
        return set(ip.accepts())
    except UnexpectedInput:  # pragma: no cover - the replay saw the same tokens already
        return set(e.expected)


def _resync(tokens: list[Token], i: int) -> int:
    """Index of the token to resume at after an error at `i`: just after the next `;` or the
    `}` matching a skipped `{`, or at a `}` that closes an enclosing block."""
    depth = 0
    j = i
    while j < len(tokens):
        t = tokens[j].type
        if t in _OPEN:
            depth += 1
        elif t in _CLOSE:
            if depth == 0:
                if t == "RBRACE":
                    return j
            else:
                depth -= 1
                if depth == 0 and t == "RBRACE":
                    return j + 1
        elif t == "SEMICOLON" and depth == 0:
            return j + 1
        j += 1
    return j


# ---- entry points ---------------------------------------------------------------------------


def parse_tree(text: str, file: str = "<input>") -> Tree:
    """The Lark parse tree (no recovery); raises TileSyntaxError with every error found."""
    remember_source(file, text)
    try:
        return _lark().parse(text)
    except UnexpectedInput:
        pass
    tokens, diags = _lex_with_recovery(text, file)
    if len(diags) < MAX_ERRORS:
        parse_diags = _parse_with_recovery(text, file, tokens)
        if diags:
            # After a lexical error the token stream is damaged; keep only the syntax errors
            # found before it, which cannot be its consequences.
            first = min((d.span.line, d.span.col) for d in diags if d.span)
            parse_diags = [d for d in parse_diags if d.code != "E0102"
                           and d.span and (d.span.line, d.span.col) < first]
        diags += parse_diags
    if not any(d.severity is Severity.ERROR for d in diags):  # pragma: no cover - defensive
        diags.append(Diagnostic(Severity.ERROR, "E0101", "the file could not be parsed",
                                Span.point(file, 1, 1)))
    raise TileSyntaxError(diags)


def parse(text: str, file: str = "<input>") -> ast.Module:
    """Parse a whole module; raises TileSyntaxError listing every syntax error (up to 20)."""
    tree = parse_tree(text, file)
    builder = TreeToAst(file)
    module = builder.build(tree, text)
    if builder.errors:
        raise TileSyntaxError(builder.errors[:MAX_ERRORS])
    return module
