"""The formatter's lexer: the grammar's terminals (grammar/tile.lark) with comments and line
breaks kept, which the parser drops.

It only ever reads text the parser has accepted, and the formatter compares the parsed program
before and after, so a disagreement with the parser's lexer cannot change a program.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# The keywords that are values: they end an operand like a name does.
VALUE_WORDS = frozenset({"true", "false", "inf", "nan"})
KEYWORDS = frozenset({
    "import", "from", "as", "const", "fn", "kernel", "let", "var", "if", "else", "while",
    "for", "in", "static", "break", "continue", "return", "and", "or", "not",
}) | VALUE_WORDS

# Longest operators first, so `**=` is not read as `**` `=`.
_OPERATORS = sorted(
    ["**=", "<<=", ">>=", "->", "**", "<<", ">>", "==", "!=", "<=", ">=", "+=", "-=", "*=", "/=",
     "%=", "&=", "|=", "^=", "@=", *"+-*/%@&|^~<>=()[]{},;:."], key=len, reverse=True)

_TOKEN = re.compile("|".join([
    r"(?P<ws>[ \t\r\f]+)",
    r"(?P<nl>\n)",
    r"(?P<line_comment>//[^\n]*)",
    r"(?P<block_comment>/\*(?:.|\n)*?\*/)",
    r'(?P<string>"(?:[^"\\\n]|\\[^\n])*")',
    r"(?P<number>[0-9](?:_?[0-9])*\.[0-9](?:_?[0-9])*(?:[eE][+-]?[0-9](?:_?[0-9])*)?"
    r"|[0-9](?:_?[0-9])*[eE][+-]?[0-9](?:_?[0-9])*"
    r"|0[xX](?:_?[0-9A-Fa-f])+|0[bB](?:_?[01])+|[0-9](?:_?[0-9])*)",
    r"(?P<name>[A-Za-z_][A-Za-z0-9_]*)",
    "(?P<op>" + "|".join(re.escape(o) for o in _OPERATORS) + ")",
]))


class LexError(ValueError):
    pass


@dataclass
class Tok:
    kind: str  # name, keyword, number, string, op, comment
    text: str
    line: int  # 1-based line of its first character
    newlines: int  # line breaks between the previous token or comment and this one
    pos: int = 0  # offset of its first character in the text
    col: int = 1  # 1-based column (code points) of its first character
    #: For a comment: whether a line must end after it (a `//` comment, a block comment with a
    #: line break inside or after it); the others stay inline: `f(a, /* b */ c)`.
    breaks: bool = False

    @property
    def own_line(self) -> bool:
        return self.newlines > 0

    @property
    def blank_before(self) -> bool:
        return self.newlines > 1

    @property
    def is_comment(self) -> bool:
        return self.kind == "comment"

    @property
    def ends_operand(self) -> bool:
        """Whether an expression can end with this token (so a following `-` is binary and a
        following `(` is a call)."""
        if self.kind in ("name", "number", "string"):
            return True
        if self.kind == "keyword":
            return self.text in VALUE_WORDS
        return self.text in (")", "]")


def tokenize(text: str, strict: bool = True) -> list[Tok]:
    """The tokens and comments of `text`. An unknown character is a LexError, or with
    `strict=False` (the language server, on text being typed) a token of kind "error"."""
    out: list[Tok] = []
    pos, line, newlines, line_start = 0, 1, 0, 0
    n = len(text)
    while pos < n:
        m = _TOKEN.match(text, pos)
        if m is None:
            if strict:
                raise LexError(f"unexpected character {text[pos]!r} at line {line}")
            out.append(Tok("error", text[pos], line, newlines, pos, pos - line_start + 1))
            pos += 1
            newlines = 0
            continue
        kind, value, start = m.lastgroup, m.group(0), pos
        pos = m.end()
        if kind == "ws":
            continue
        if kind == "nl":
            line += 1
            newlines += 1
            line_start = pos
            continue
        col = start - line_start + 1
        if kind in ("line_comment", "block_comment"):
            out.append(Tok("comment", value.rstrip() if kind == "line_comment" else value,
                           line, newlines, start, col))
            if "\n" in value:
                line += value.count("\n")
                line_start = start + value.rindex("\n") + 1
            newlines = 0
            continue
        if kind == "name" and value in KEYWORDS:
            kind = "keyword"
        out.append(Tok(kind, value, line, newlines, start, col))
        newlines = 0
    for i, t in enumerate(out):
        if t.is_comment:
            t.breaks = (t.text.startswith("//") or "\n" in t.text or i + 1 == len(out)
                        or out[i + 1].own_line)
    return out
