"""Semantic tokens and inlay hints.

Semantic tokens classify every token of the text (so a document being typed still gets them):
names by what the document's index resolves them to (parameter, variable, function, module;
`declaration` where defined, `readonly` for `let` and `const`, `defaultLibrary` for
built-ins and dtypes), attributes as decorators, and keywords, numbers, strings, comments and
operators by their kind. Inlay hints show the checker's inferred type after each `let`/`var`
name without a written type, after each `for` variable and after each parameter without one
(where every instantiation of the function agrees).
"""

from __future__ import annotations

from lsprotocol import types as lsp

from tilelang import highlight as hl
from tilelang.fmt.layout import mark_spacing
from tilelang.fmt.tokens import tokenize

from .analysis import Analysis, too_large
from .positions import UTF16, from_lsp_position, text_units, to_lsp_position

TOKEN_TYPES = ["namespace", "type", "function", "parameter", "variable", "keyword", "comment",
               "string", "number", "operator", "decorator"]
TOKEN_MODIFIERS = ["declaration", "readonly", "defaultLibrary"]
LEGEND = lsp.SemanticTokensLegend(token_types=TOKEN_TYPES, token_modifiers=TOKEN_MODIFIERS)
_T = {t: i for i, t in enumerate(TOKEN_TYPES)}
_DECL, _READONLY, _LIB = 1, 2, 4
_SYMBOL = {"param": ("parameter", 0), "let": ("variable", _READONLY), "var": ("variable", 0),
           "for": ("variable", 0), "const": ("variable", _READONLY), "fn": ("function", 0),
           "kernel": ("function", 0), "module": ("namespace", 0), "import": ("function", 0)}


def _classify_name(text: str, occ, prev) -> tuple[str, int] | None:
    if prev is not None and prev.attr:  # `@launch`, not `a @ b`
        return "decorator", 0
    if occ is not None:
        if occ.role == "keyword":
            return "parameter", 0
        if occ.symbol is not None:
            kind, mods = _SYMBOL[occ.symbol.kind]
            return kind, mods | (_DECL if occ.role == "def" else 0)
    if text in hl.builtins():
        return "function", _LIB
    if text in hl.dtypes() or text in hl.TYPE_CONSTRUCTORS:
        return "type", _LIB
    if occ is None and prev is not None and prev.text == ".":
        return None
    return "variable", 0


def semantic_tokens(a: Analysis, encoding: str = UTF16) -> lsp.SemanticTokens:
    if too_large(a.text):  # as for the check: no answer that reads every character
        return lsp.SemanticTokens(data=[])
    index = a.index if a.module is not None else None
    occ_at = {(o.line, o.col): o for o in index.occurrences} if index is not None else {}
    data: list[int] = []
    last_line = last_col = 0  # 0-based line and column (in encoding units)
    prev = None  # the previous token that is not a comment
    lines = a.lines

    def emit(line: int, col: int, length_cp: int, kind: str, mods: int) -> None:
        nonlocal last_line, last_col
        text = lines[line - 1] if 0 < line <= len(lines) else ""
        start = text_units(text[:col - 1], encoding)
        length = text_units(text[col - 1:col - 1 + length_cp], encoding)
        if length <= 0:
            return
        dl = line - 1 - last_line
        data.extend([dl, start - last_col if dl == 0 else start, length, _T[kind], mods])
        last_line, last_col = line - 1, start

    toks = tokenize(a.text, strict=False)
    mark_spacing(toks)  # the formatter's reading of which `@` starts an attribute
    for t in toks:
        if t.kind == "comment":
            for k, part in enumerate(t.text.split("\n")):  # one token per line
                col = t.col if k == 0 else 1
                emit(t.line + k, col, len(part), "comment", 0)
            continue
        if t.kind == "name":
            got = _classify_name(t.text, occ_at.get((t.line, t.col)), prev)
            if got is not None:
                emit(t.line, t.col, len(t.text), *got)
        elif t.kind == "keyword":
            emit(t.line, t.col, len(t.text), "keyword", 0)
        elif t.kind == "number":
            emit(t.line, t.col, len(t.text), "number", 0)
        elif t.kind == "string":
            emit(t.line, t.col, len(t.text), "string", 0)
        elif t.kind == "op" and t.attr:
            emit(t.line, t.col, 1, "decorator", 0)
        elif t.kind == "op" and t.text not in "()[]{},;.:":
            emit(t.line, t.col, len(t.text), "operator", 0)
        prev = t
    return lsp.SemanticTokens(data=data)


def inlay_hints(a: Analysis, rng: lsp.Range, encoding: str = UTF16) -> list[lsp.InlayHint]:
    from tilelang.frontend import ast

    if a.module is None or a.typed is None:
        return []
    lo = from_lsp_position(a.lines, rng.start, encoding)
    hi = from_lsp_position(a.lines, rng.end, encoding)
    types: dict = {}
    for r in a.typed.records:
        if r.span is None or r.kind not in ("let", "var", "loop", "param"):
            continue
        if r.span.file != a.module.file:
            continue
        types.setdefault((r.span.line, r.span.col, r.name), set()).add(str(r.type))
    out = []
    for o in a.index.occurrences:
        sym = o.symbol
        if o.role != "def" or sym is None or sym.kind not in ("let", "var", "for", "param"):
            continue
        if not (lo <= (o.line - 1, o.col - 1) <= hi):
            continue
        node = sym.node
        if isinstance(node, (ast.Let, ast.Param)) and node.type is not None:
            continue  # the type is written
        found = types.get((o.line, o.col, o.name))
        if not found or len(found) != 1:
            continue  # not checked, or a generic function's instantiations disagree
        (typ,) = found
        if typ.endswith(" literal") or " literal " in typ:
            continue
        pos = to_lsp_position(a.lines, o.line, o.end, encoding)
        out.append(lsp.InlayHint(position=pos, label=f": {typ}", kind=lsp.InlayHintKind.Type,
                                 padding_left=False))
    return out
