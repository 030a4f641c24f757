"""A fast tokenizer for well-formed source: the fast parser's (`descent`) input.

It produces the tokens Lark's lexer produces from `grammar/tile.lark` (the same terminals, the
same longest-operator-first and priority order, keywords being names spelled like a quoted word
of the grammar), as four parallel lists. It does not diagnose: at the first character Lark would
refuse it raises `Fallback`, and the Lark path reports the error. tests/frontend/
test_fast_parser.py compares both lexers on every source of the project and a mutated corpus.
"""

from __future__ import annotations

import functools
import re
import sys

from .limits import PARSE_FRAMES, NestingTooDeep

KEYWORDS = frozenset({
    "and", "as", "break", "const", "continue", "else", "false", "fn", "for", "from", "if",
    "import", "in", "inf", "kernel", "let", "nan", "not", "or", "return", "static", "true",
    "var", "while"})

OPERATORS = ("**=", "<<=", ">>=", "->", "==", "!=", "<=", ">=", "**", "<<", ">>", "+=", "-=",
             "*=", "/=", "%=", "&=", "|=", "^=", "@=", "-", "+", "*", "/", "%", "@", "&", "|",
             "^", "~", "<", ">", "=", "(", ")", "[", "]", "{", "}", ",", ";", ":", ".")

_DIGITS = r"[0-9](?:_?[0-9])*"
# One token after optional blanks, as (blanks, token). No two alternatives match at the same
# place except where Lark's order decides, and there the earlier one is Lark's: names; the
# one-character punctuation; the numbers (hex and binary before decimal; a decimal with a
# fraction or an exponent is a FLOAT, as the grammar's priority-2 FLOAT is tried before
# DEC_INT); strings and line comments (`//` before the operator `/`); the operators, longest
# first. The last alternative takes any other character, so nothing is skipped silently.
# (Written with character classes rather than one alternative per operator: compiling the
# pattern is part of every `tilec check`, and this form compiles in half the time.)
_TOKEN = re.compile(
    r"([ \t\r\f]*)("
    r"[A-Za-z_][A-Za-z0-9_]*"
    r"|[(),;\[\]{}.:~]"
    r"|0[xX](?:_?[0-9A-Fa-f])+|0[bB](?:_?[01])+"
    rf"|{_DIGITS}(?:\.{_DIGITS})?(?:[eE][+-]?{_DIGITS})?"
    r'|"(?:[^"\\\n]|\\[^\n])*"'
    r"|//[^\n]*"
    r"|\*\*=?|<<=?|>>=?|->|[-+*/%@&|^=!<>]=|[-+*/%@&|^<>=]"
    r"|[^ \t\r\f])")
# Strings, line comments and block comments, left to right: block comments are blanked out
# (keeping their newlines) before the text is cut into lines. Compiled on first use.
_COMMENTS_PATTERN = r'"(?:[^"\\\n]|\\[^\n])*"|//[^\n]*|/\*[\s\S]*?\*/'

# Keywords and operators: the token is its own kind.
_FIXED = {t: t for t in (*KEYWORDS, *OPERATORS)}
_NAME_START = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")
_DIGIT = frozenset("0123456789")


class Fallback(Exception):
    """The fast path cannot handle this input; the Lark path parses and diagnoses it."""


def _blank_block_comments(text: str) -> str:
    def blank(m: re.Match) -> str:
        s = m.group()
        return "".join(c if c == "\n" else " " for c in s) if s.startswith("/*") else s
    return re.sub(_COMMENTS_PATTERN, blank, text)


@functools.lru_cache(maxsize=4)
def _prefix_run(most: int) -> re.Pattern:
    """More prefix operators in a row than the parser has frames for (each nests once)."""
    return re.compile(r"(?:(?:[-+~]|\bnot\b)[ \t\r\f]*){%d}" % (most + 2))


def _number_kind(tok: str) -> str:
    if len(tok) > 1 and tok[0] == "0" and tok[1] in "xXbB":
        return "HEX_INT" if tok[1] in "xX" else "BIN_INT"
    if "." in tok or "e" in tok or "E" in tok:
        return "FLOAT"
    return "DEC_INT"


def tokenize(text: str) -> tuple[list[str], list[str], list[int], list[int]]:
    """(kinds, texts, lines, columns) of the tokens of `text`, then an `$END` token; a kind is
    the keyword or operator itself, or NAME, DEC_INT, HEX_INT, BIN_INT, FLOAT, STRING.

    Raises `NestingTooDeep` as soon as more brackets are open than the parser has stack for
    (counted at line ends, so it costs a few `str.count` per line and stops an 8 MiB nest after
    its first few thousand lines), and `Fallback` for a character no token starts with."""
    if "/*" in text:
        text = _blank_block_comments(text)
    kinds: list[str] = []
    texts: list[str] = []
    lines: list[int] = []
    cols: list[int] = []
    add_kind, add_text, add_line, add_col = kinds.append, texts.append, lines.append, cols.append
    findall = _TOKEN.findall
    fixed, name_start, digit = _FIXED, _NAME_START, _DIGIT
    lineno = 0
    depth = 0
    most = max(PARSE_FRAMES, sys.getrecursionlimit())   # the parser's stack, raised or not
    unexpected = None
    for line in text.split("\n"):
        lineno += 1
        col = 1
        if '"' in line or "//" in line:     # brackets in strings and comments do not count
            code = "".join(t for _, t in findall(line) if t[0] != '"' and t[:2] != "//")
        else:
            code = line
        depth += (code.count("(") + code.count("[") + code.count("{") - code.count(")")
                  - code.count("]") - code.count("}"))
        if depth > most:           # each open bracket costs the parser at least one frame
            raise NestingTooDeep(f"more than {most} brackets open at line {lineno}")
        if len(code) > most and _prefix_run(most).search(code):   # `- - - ... x`, `not not ...`
            raise NestingTooDeep(f"more than {most} prefix operators in a row at line {lineno}")
        if unexpected is not None:
            continue
        for blanks, tok in findall(line):
            if blanks:
                col += len(blanks)
            kind = fixed.get(tok)
            if kind is not None:
                add_kind(kind)
            elif tok[0] in name_start:
                add_kind("NAME")
            elif tok[0] in digit:
                add_kind(_number_kind(tok))
            elif tok[0] == '"' and len(tok) > 1:
                add_kind("STRING")
            elif tok[:2] == "//":
                col += len(tok)
                continue
            else:
                # the Lark path diagnoses it; the lines after it are still counted above
                unexpected = f"unexpected character at {lineno}:{col}"
                break
            add_text(tok)
            add_line(lineno)
            add_col(col)
            col += len(tok)
    if unexpected is not None:
        raise Fallback(unexpected)
    kinds.append("$END")
    texts.append("")
    lines.append(lineno)
    cols.append(col)
    return kinds, texts, lines, cols
