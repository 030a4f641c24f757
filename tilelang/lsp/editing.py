"""Signature help, code actions, formatting and folding ranges.

Signature help reads the text before the cursor (the document need not parse: it is being
typed); formatting and folding read the text; code actions read the checker's "did you mean"
suggestions from the diagnostics the client sends back.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from lsprotocol import types as lsp

from tilelang.fmt.tokens import Tok, tokenize

from . import items
from .analysis import Analysis, too_large
from .positions import UTF16, from_lsp_position, to_lsp_position

#: How far back signature help looks for the call's opening parenthesis.
LOOKBACK_LINES = 40
_SUGGESTION = re.compile(r"did you mean `([A-Za-z_][A-Za-z0-9_]*)`\?")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass
class OpenCall:
    callee: list[str]  # `load` or `m`, `gelu` for `m.gelu(`
    active: int  # the index of the argument being typed
    keyword: str | None  # its keyword, when it is `name = ...`
    used: list[str]  # the keywords given already


def _tokens_before(a: Analysis, position: lsp.Position, encoding: str) -> list[Tok]:
    ln, idx = from_lsp_position(a.lines, position, encoding)
    if not 0 <= ln < len(a.lines):
        return []
    first = max(ln - LOOKBACK_LINES, 0)
    text = "\n".join(a.lines[first:ln] + [a.lines[ln][:idx]])
    return [t for t in tokenize(text, strict=False) if t.kind != "comment"]


def open_call(a: Analysis, position: lsp.Position, encoding: str = UTF16) -> OpenCall | None:
    """The innermost call whose `(` is open at `position`."""
    toks = _tokens_before(a, position, encoding)
    stack: list[int] = []
    for i, t in enumerate(toks):
        if t.kind == "op" and t.text in "([{":
            stack.append(i)
        elif t.kind == "op" and t.text in ")]}" and stack:
            stack.pop()
    while stack:
        i = stack.pop()
        if toks[i].text != "(" or i == 0 or toks[i - 1].kind != "name":
            continue
        callee = [toks[i - 1].text]
        j = i - 2
        while j >= 1 and toks[j].text == "." and toks[j - 1].kind == "name":
            callee.insert(0, toks[j - 1].text)
            j -= 2
        active, depth, keyword, used = 0, 0, None, []
        start = i + 1
        for k in range(i + 1, len(toks)):
            t = toks[k]
            if t.text in "([{":
                depth += 1
            elif t.text in ")]}":
                depth -= 1
            elif t.text == "," and depth == 0:
                active += 1
                start = k + 1
            elif t.text == "=" and depth == 0 and k == start + 1 and toks[start].kind == "name":
                used.append(toks[start].text)
        if start + 1 < len(toks) and toks[start].kind == "name" and toks[start + 1].text == "=":
            keyword = toks[start].text
        return OpenCall(callee, active, keyword, used)
    return None


@dataclass
class Signature:
    label: str
    params: list[tuple[str, int, int]]  # name, start and end offsets in the label
    doc: str


def _build(name: str, parts: list[tuple[str, str]], suffix: str, doc: str) -> Signature:
    label, params = name + "(", []
    for k, (pname, text) in enumerate(parts):
        if k:
            label += ", "
        params.append((pname, len(label), len(label) + len(text)))
        label += text
    return Signature(label + ")" + suffix, params, doc)


def builtin_signature(name: str) -> Signature | None:
    b = items.registry().get(name)
    if b is None:
        return None
    parts = [(p.name, str(p)) for p in b.params]
    if getattr(b, "variadic", None):
        parts.append((b.variadic, f"*{b.variadic}"))
    return _build(name, parts, "", getattr(b, "doc", "") or "")


def item_signature(item, doc: str = "") -> Signature:
    parts = []
    for p in item.params:
        s = ("const " if p.is_const else "") + p.name
        if p.type is not None:
            s += f": {items.type_text(p.type)}"
        if p.default is not None:
            s += f" = {items.expr_text(p.default)}"
        parts.append((p.name, s))
    ret = getattr(item, "ret", None)
    suffix = f" -> {items.type_text(ret)}" if ret is not None else ""
    kw = "kernel" if type(item).__name__ == "KernelDef" else "fn"
    sig = _build(f"{kw} {item.name}", parts, suffix, doc)
    return sig


def resolve_callee(a: Analysis, callee: list[str], position: lsp.Position,
                   encoding: str = UTF16) -> Signature | None:
    """The signature of what `callee` names at `position`: a built-in, a function of the
    document, or one of an imported module."""
    from .navigation import imported_item

    index_of = items.index_for(a)
    sym = None
    if index_of is not None:
        ln, idx = from_lsp_position(a.lines, position, encoding)
        sym = index_of.visible(ln + 1, idx + 1).get(callee[0])
    if len(callee) == 1:
        if sym is None:
            return builtin_signature(callee[0])
        if sym.kind in ("fn", "kernel"):
            return item_signature(sym.node, items.doc_comment(a.lines, sym.node))
        if sym.kind == "import":
            return _imported(a, sym.target, imported_item)
        return None
    if sym is not None and sym.kind == "module":
        prefix = [sym.name] if sym.node.alias else list(sym.target)
        if callee[:-1] == prefix:
            return _imported(a, (sym.target, callee[-1]), imported_item)
    return None


def _imported(a: Analysis, target, imported_item) -> Signature | None:
    path, item = imported_item(a, target)
    if item is None or not hasattr(item, "params"):
        return None
    return item_signature(item, items.doc_comment(items.file_lines(path), item))


def signature_help(a: Analysis, position: lsp.Position,
                   encoding: str = UTF16) -> lsp.SignatureHelp | None:
    call = open_call(a, position, encoding)
    if call is None:
        return None
    sig = resolve_callee(a, call.callee, position, encoding)
    if sig is None:
        return None
    names = [p[0] for p in sig.params]
    active = call.active
    if call.keyword is not None:
        active = names.index(call.keyword) if call.keyword in names else len(names)
    elif active >= len(names) and sig.params and sig.label.count("*"):
        active = len(names) - 1  # the variadic parameter takes the rest
    params = [lsp.ParameterInformation(label=(s, e)) for _, s, e in sig.params]
    info = lsp.SignatureInformation(
        label=sig.label, parameters=params,
        documentation=lsp.MarkupContent(kind=lsp.MarkupKind.Markdown, value=sig.doc)
        if sig.doc else None)
    return lsp.SignatureHelp(signatures=[info], active_signature=0,
                             active_parameter=min(active, max(len(params), 1)))


# ---- code actions -----------------------------------------------------------------------------
def code_actions(a: Analysis, params: lsp.CodeActionParams,
                 encoding: str = UTF16) -> list[lsp.CodeAction]:
    """A quick fix for each diagnostic with the checker's `did you mean `x`?`: the name it
    points at replaced by `x`."""
    out = []
    for d in params.context.diagnostics or ():
        m = _SUGGESTION.search(d.message or "")
        if m is None:
            continue
        rng = _name_range(a, d.range, encoding)
        if rng is None:
            continue
        fix = m.group(1)
        out.append(lsp.CodeAction(
            title=f"Change to `{fix}`", kind=lsp.CodeActionKind.QuickFix, diagnostics=[d],
            is_preferred=True,
            edit=lsp.WorkspaceEdit(changes={a.uri: [lsp.TextEdit(range=rng, new_text=fix)]})))
    return out


def _name_range(a: Analysis, rng: lsp.Range, encoding: str) -> lsp.Range | None:
    """The identifier at the start of `rng` (a diagnostic may cover `name = value`)."""
    ln, idx = from_lsp_position(a.lines, rng.start, encoding)
    if not 0 <= ln < len(a.lines):
        return None
    m = _IDENT.match(a.lines[ln], idx)
    if m is None:
        return None
    return lsp.Range(start=to_lsp_position(a.lines, ln + 1, m.start() + 1, encoding),
                     end=to_lsp_position(a.lines, ln + 1, m.end() + 1, encoding))


# ---- formatting -------------------------------------------------------------------------------
def formatting(a: Analysis, encoding: str = UTF16) -> list[lsp.TextEdit]:
    """The whole document in `tilec fmt`'s layout as one edit; none when it does not parse
    (the diagnostics say why) or is formatted already."""
    from tilelang.diagnostics import TileError
    from tilelang.fmt import FormatError, format_source

    if too_large(a.text):
        return []
    try:
        out = format_source(a.text, a.uri)
    except (TileError, FormatError, RecursionError):
        return []
    if out == a.text:
        return []
    end = to_lsp_position(a.lines, len(a.lines), len(a.lines[-1]) + 1, encoding)
    return [lsp.TextEdit(range=lsp.Range(start=lsp.Position(line=0, character=0), end=end),
                         new_text=out)]


# ---- folding ----------------------------------------------------------------------------------
def folding_ranges(a: Analysis) -> list[lsp.FoldingRange]:
    """Blocks and bracket groups over several lines, block comments, runs of `//` comments and
    of imports."""
    out: list[lsp.FoldingRange] = []
    stack: list[Tok] = []
    run: list[Tok] = []  # consecutive line comments or imports

    def close_run() -> None:
        if len(run) > 1 and run[-1].line > run[0].line:
            kind = (lsp.FoldingRangeKind.Comment if run[0].kind == "comment"
                    else lsp.FoldingRangeKind.Imports)
            out.append(lsp.FoldingRange(start_line=run[0].line - 1, end_line=run[-1].line - 1,
                                        kind=kind))
        run.clear()

    if too_large(a.text):
        return []
    toks = tokenize(a.text, strict=False)
    for i, t in enumerate(toks):
        first = t.own_line or i == 0  # the first token on its line
        if t.kind == "comment" and t.text.startswith("/*") and "\n" in t.text:
            close_run()
            out.append(lsp.FoldingRange(start_line=t.line - 1,
                                        end_line=t.line - 1 + t.text.count("\n"),
                                        kind=lsp.FoldingRangeKind.Comment))
            continue
        if t.kind == "comment" and t.text.startswith("//") and first:
            if run and (run[0].kind != "comment" or t.line != run[-1].line + 1):
                close_run()
            run.append(t)
            continue
        if t.kind == "keyword" and t.text in ("import", "from") and first and not stack:
            if run and run[0].kind == "comment":
                close_run()
            run.append(t)
            continue
        if run and run[0].kind == "comment":
            close_run()
        elif run and t.text == ";" and not stack:
            run[-1] = Tok(run[-1].kind, run[-1].text, t.line, 0)  # the import ends here
        elif run and first:
            close_run()
        if t.kind == "op" and t.text in "([{":
            stack.append(t)
        elif t.kind == "op" and t.text in ")]}" and stack:
            o = stack.pop()
            if t.line > o.line:  # the closing line stays visible
                out.append(lsp.FoldingRange(start_line=o.line - 1, end_line=t.line - 2
                                            if t.line - 2 >= o.line - 1 else o.line - 1))
    close_run()
    return [r for r in out if r.end_line > r.start_line]
