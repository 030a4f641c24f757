"""Completion, hover, document symbols and go-to-definition, answered from an `Analysis`
(definitions and references through `symbols.Index`, see navigation.py).

Nothing here runs the compiler: the parsed module and the checked program come from the
worker's analysis of the document, so a request is answered in the time it takes to look at
one line, however large the document. A document that was not checked (too large) gets the
answers that need no parse: built-ins, dtypes, keywords and attributes.
"""

from __future__ import annotations

import re

from lsprotocol import types as lsp

from tilelang import highlight as hl
from tilelang.diagnostics import Span
from tilelang.sema.launch_attrs import ALIASES, KINDS as LAUNCH_KEYS

from .analysis import Analysis
from .editing import open_call, resolve_callee
from .items import (doc_comment, expr_text as _expr_text, file_lines, index_for,
                    registry as _registry, type_text as _type_text)
from .positions import UTF16, from_lsp_position, span_to_range, to_lsp_position

KEYWORD_DOCS = {
    "kernel": "`kernel name(params) { ... }` — a kernel: each block of the launch grid runs "
              "the body. A kernel is launched, never called.",
    "fn": "`fn name(params) { ... }` — a tile function: generic in unannotated parameters, "
          "inlined at each call. `@host fn` is also callable from Python.",
    "let": "`let name = value;` — binds an immutable name.",
    "var": "`var name = value;` — a name that may be re-bound (`acc += t;`).",
    "const": "`const NAME: i32 = 64;` — a module-level constant, or a constant-embedded kernel "
             "parameter (one machine kernel per distinct value).",
    "static": "`static for i in range(n) { }` — unrolled at compile time.",
    "if": "`if c { } else if d { } else { }`; also the conditional expression `a if c else b`.",
    "else": "The alternative of an `if` statement or expression.",
    "for": "`for i in range(start, stop, step) { }` — a loop; the step must be positive.",
    "in": "`for i in range(...)`.",
    "while": "`while c { }`.",
    "break": "Leaves the innermost loop.",
    "continue": "Starts the next iteration of the innermost loop.",
    "return": "`return value;` — returns from a function.",
    "import": "`import std.math;` — imports a module (std.* from the standard library).",
    "from": "`from std.nn import softmax_rows;` — imports single names.",
    "as": "Renames an import: `import std.math as m;`.",
    "and": "Logical and (short-circuit on scalars).",
    "or": "Logical or (short-circuit on scalars).",
    "not": "Logical negation.",
    "true": "The boolean constant true.",
    "false": "The boolean constant false.",
}
ATTRIBUTE_DOCS = {
    "launch": "`@launch(key = value, ...)` — the kernel's launch contract: "
              + ", ".join("/".join([k, *(a for a, t in ALIASES.items() if t == k)])
                          for k in LAUNCH_KEYS)
              + "; any value may be `by_target(sm_90a = ..., default = ...)`.",
    "host": "`@host fn` — the function is also callable from Python on the host.",
}
HELPER_DOCS = {
    "by_target": "`by_target(sm_90a = ..., default = ...)` — a value per target, in a "
                 "`@launch` attribute or a kernel `const` parameter's default: the target's own "
                 "entry, else `default`, else none on that target.",
}
TYPE_DOCS = {
    "Tile": "`Tile[dtype, d0, d1, ...]` — an immutable tile value; every dimension is a power "
            "of two.",
    "Array": "`Array[dtype, rank]` — a strided view of global memory.",
}
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PREFIX = re.compile(r"[A-Za-z_][A-Za-z0-9_]*$")


# --- the document's own items ----------------------------------------------------------------
def item_signature(item) -> str:
    from tilelang.frontend import ast

    def params(ps) -> str:
        out = []
        for p in ps:
            s = ("const " if p.is_const else "") + p.name
            if p.type is not None:
                s += f": {_type_text(p.type)}"
            if p.default is not None:
                s += f" = {_expr_text(p.default)}"
            out.append(s)
        return ", ".join(out)

    attrs = "".join(f"@{a.name} " for a in getattr(item, "attrs", ()))
    if isinstance(item, ast.KernelDef):
        return f"{attrs}kernel {item.name}({params(item.params)})"
    if isinstance(item, ast.FnDef):
        ret = f" -> {_type_text(item.ret)}" if item.ret is not None else ""
        return f"{attrs}fn {item.name}({params(item.params)}){ret}"
    if isinstance(item, ast.ConstDef):
        typ = f": {_type_text(item.type)}" if item.type is not None else ""
        return f"const {item.name}{typ} = {_expr_text(item.value)}"
    return type(item).__name__


def _name_span(item) -> Span | None:
    span = getattr(item, "name_span", None)
    if span is None or getattr(span, "line", 0) < 1:
        return getattr(item, "span", None)
    return span


def top_level_items(a: Analysis, earlier: bool = False) -> dict:
    """The document's kernels, functions and constants by name; with `earlier`, those of the
    document's last check while the current text is not checked yet (their signatures are
    still worth showing, their positions are not)."""
    from tilelang.frontend import ast

    module = a.module if a.module is not None or not earlier else a.earlier_module
    if module is None:
        return {}
    return {it.name: it for it in module.items
            if isinstance(it, (ast.KernelDef, ast.FnDef, ast.ConstDef))}


def document_symbols(a: Analysis, encoding: str = UTF16) -> list[lsp.DocumentSymbol]:
    from tilelang.frontend import ast

    if a.module is None:
        return []
    out = []
    for item in a.module.items:
        if isinstance(item, (ast.KernelDef, ast.FnDef, ast.ConstDef)):
            kind = {ast.KernelDef: lsp.SymbolKind.Function, ast.FnDef: lsp.SymbolKind.Function,
                    ast.ConstDef: lsp.SymbolKind.Constant}[type(item)]
            detail = "kernel" if isinstance(item, ast.KernelDef) else (
                "fn" if isinstance(item, ast.FnDef) else "const")
            name = item.name
        elif isinstance(item, (ast.Import, ast.FromImport)):
            kind, detail = lsp.SymbolKind.Module, "import"
            name = ".".join(item.path)
        else:
            continue
        full = span_to_range(a.lines, item.span, encoding)
        sel = span_to_range(a.lines, _name_span(item), encoding)
        out.append(lsp.DocumentSymbol(name=name, kind=kind, range=full, selection_range=sel,
                                      detail=detail))
    return out


# --- completion and hover --------------------------------------------------------------------
def builtin_signature(b) -> str:
    params = [str(p) for p in b.params]
    if getattr(b, "variadic", None):
        params.append(f"*{b.variadic}")
    return f"{b.name}({', '.join(params)})"


def dtype_doc(name: str) -> str:
    try:
        from tilelang.sema.types import DTYPES

        d = DTYPES[name]
    except (ImportError, KeyError):
        return f"dtype `{name}`"
    parts = [f"dtype `{name}`"]
    bits = getattr(d, "bits", None)
    if bits:
        parts.append(f"{bits} bits")
    if getattr(d, "restricted", False):
        parts.append("restricted float: no implicit promotion, convert with `astype`")
    return " — ".join(parts) + f". `{name}(x)` is a strictly typed constant."


def _md(text: str) -> lsp.MarkupContent | None:
    if not text:
        return None
    return lsp.MarkupContent(kind=lsp.MarkupKind.Markdown, value=text)


def completions(a: Analysis, position: lsp.Position,
                encoding: str = UTF16) -> list[lsp.CompletionItem]:
    lines = a.lines
    ln, idx = from_lsp_position(lines, position, encoding)
    line = lines[ln] if 0 <= ln < len(lines) else ""
    before = line[:idx]
    prefix = _PREFIX.search(before[-256:])
    start = idx - (len(prefix.group(0)) if prefix else 0)
    if before[:start].endswith("@"):
        return [lsp.CompletionItem(label=n, kind=lsp.CompletionItemKind.Property,
                                   documentation=_md(ATTRIBUTE_DOCS.get(n, "")))
                for n in hl.ATTRIBUTES]
    if before[:start].endswith("."):
        items = member_completions(a, before[:start - 1], ln, start)
    else:
        items = _keyword_arguments(a, position, encoding) + _names(a, ln, start)
    if prefix:
        p = prefix.group(0)
        items = [i for i in items if i.label.startswith(p)]
    return items


_CHAIN = re.compile(r"([A-Za-z_][A-Za-z0-9_]*(?:\s*\.\s*[A-Za-z_][A-Za-z0-9_]*)*)\s*$")
_SYMBOL_KINDS = {
    "param": lsp.CompletionItemKind.Variable, "let": lsp.CompletionItemKind.Variable,
    "var": lsp.CompletionItemKind.Variable, "for": lsp.CompletionItemKind.Variable,
    "const": lsp.CompletionItemKind.Constant, "fn": lsp.CompletionItemKind.Function,
    "kernel": lsp.CompletionItemKind.Function, "module": lsp.CompletionItemKind.Module,
    "import": lsp.CompletionItemKind.Function,
}


def member_completions(a: Analysis, before_dot: str, ln: int, col: int
                       ) -> list[lsp.CompletionItem]:
    """After `m.` (an imported module): its functions and constants; after `std.` (part of
    an imported module's name): the next part; after a tile or array name: its members and the
    built-ins callable as its methods (`t.sum(axis = 1)`)."""
    from .symbols import imported_module

    m = _CHAIN.search(before_dot[-512:])
    index = index_for(a)
    if m is None or index is None:
        return []
    chain = [p.strip() for p in m.group(1).split(".")]
    sym = index.visible(ln + 1, col + 1).get(chain[0])
    if sym is not None and sym.kind in ("param", "let", "var", "for") and len(chain) == 1:
        return _value_members(index.analysis, sym)
    if sym is None or sym.kind != "module":
        return []
    prefix = [sym.name] if sym.node.alias else list(sym.target)
    if len(chain) < len(prefix):  # `std.` of `import std.math;`
        if chain == prefix[:len(chain)]:
            nxt = prefix[len(chain)]
            return [lsp.CompletionItem(label=nxt, kind=lsp.CompletionItemKind.Module,
                                       detail=".".join(prefix[:len(chain) + 1]))]
        return []
    if chain != prefix:
        return []
    path, module = imported_module(index.analysis, sym.target)
    if module is None:
        return []
    from tilelang.frontend import ast

    out = []
    lines = file_lines(path)
    for item in module.items:
        if isinstance(item, (ast.FnDef, ast.ConstDef)):
            kind = (lsp.CompletionItemKind.Constant if isinstance(item, ast.ConstDef)
                    else lsp.CompletionItemKind.Function)
            out.append(lsp.CompletionItem(label=item.name, kind=kind,
                                          detail=item_signature(item),
                                          documentation=_md(doc_comment(lines, item))))
    return out


#: The members of tile and array values (the checker's `member`).
VALUE_MEMBERS = {
    "Tile": {"shape": "the shape: a tuple of constants", "dtype": "the element type",
             "ndim": "the number of dimensions (a constant)"},
    "Array": {"shape": "the extents: a tuple of i32", "stride": "the strides (elements): a "
              "tuple of i32", "dtype": "the element type", "ndim": "the rank (a constant)"},
}


def _value_members(a: Analysis, sym) -> list[lsp.CompletionItem]:
    typed = a.typed
    if typed is None:
        return []
    types = {str(r.type) for r in typed.records if r.name == sym.name and r.span is not None
             and (r.span.line, r.span.col) == (sym.line, sym.col)}
    kinds = {t.split("[", 1)[0] for t in types}
    if len(kinds) != 1 or next(iter(kinds)) not in VALUE_MEMBERS:
        return []
    (kind,) = kinds
    items = [lsp.CompletionItem(label=n, kind=lsp.CompletionItemKind.Property,
                                detail=f"{kind} member", documentation=_md(doc))
             for n, doc in VALUE_MEMBERS[kind].items()]
    reg = _registry()
    for name in hl.builtins():
        b = reg.get(name)
        if b is not None and b.params:
            items.append(lsp.CompletionItem(label=name, kind=lsp.CompletionItemKind.Method,
                                            detail=builtin_signature(b),
                                            documentation=_md(getattr(b, "doc", "") or "")))
    return items


def _member_hover(a: Analysis, ln: int, dot_end: int, word: str) -> str | None:
    """`shape` in `t.shape`, for a tile or array `t`."""
    m = re.search(r"([A-Za-z_][A-Za-z0-9_]*)\s*\.$", a.lines[ln][max(dot_end - 256, 0):dot_end])
    if m is None or a.module is None:
        return None
    occ = a.index.at(ln + 1, dot_end - len(m.group(0)) + 1)
    sym = occ.symbol if occ is not None else None
    if sym is None or sym.kind not in ("param", "let", "var", "for") or a.typed is None:
        return None
    for r in a.typed.records:
        if r.name == sym.name and r.span is not None and \
                (r.span.line, r.span.col) == (sym.line, sym.col):
            kind = str(r.type).split("[", 1)[0]
            doc = VALUE_MEMBERS.get(kind, {}).get(word)
            if doc:
                return f"`{word}` of `{sym.name}: {r.type}` — {doc}"
    return None


def _keyword_arguments(a: Analysis, position: lsp.Position, encoding: str
                       ) -> list[lsp.CompletionItem]:
    """Inside a call's parentheses: the parameters of what it calls not given yet, as
    `name = ` (built-ins from the registry's parameter lists)."""
    call = open_call(a, position, encoding)
    if call is None or call.keyword is not None:
        return []
    sig = resolve_callee(a, call.callee, position, encoding)
    if sig is None:
        return []
    out = []
    for k, (name, s, e) in enumerate(sig.params):
        if name in call.used or sig.label[s:e].startswith("*"):
            continue
        out.append(lsp.CompletionItem(
            label=f"{name}=", kind=lsp.CompletionItemKind.Field, filter_text=name,
            insert_text=f"{name} = ", detail=sig.label[s:e], sort_text=f"0{k:03d}"))
    return out


def _names(a: Analysis, ln: int, col: int) -> list[lsp.CompletionItem]:
    """The document's names visible at the position, then the language's."""
    items: list[lsp.CompletionItem] = []
    index = index_for(a)
    seen = set()
    if index is not None:
        for name, sym in index.visible(ln + 1, col + 1).items():
            if sym.kind in ("fn", "kernel", "const"):
                detail = item_signature(sym.node)
            elif sym.kind == "module":
                detail = "import " + ".".join(sym.target)
            elif sym.kind == "import":
                detail = f"from {'.'.join(sym.target[0])} import {sym.target[1]}"
            else:
                detail = sym.kind
            seen.add(name)
            items.append(lsp.CompletionItem(label=name, kind=_SYMBOL_KINDS[sym.kind],
                                            detail=detail, sort_text=f"1{name}"))
    for kw in hl.keywords():
        items.append(lsp.CompletionItem(label=kw, kind=lsp.CompletionItemKind.Keyword,
                                        documentation=_md(KEYWORD_DOCS.get(kw, ""))))
    for d in hl.dtypes():
        items.append(lsp.CompletionItem(label=d, kind=lsp.CompletionItemKind.TypeParameter,
                                        detail="dtype", documentation=_md(dtype_doc(d))))
    for t in hl.TYPE_CONSTRUCTORS:
        items.append(lsp.CompletionItem(label=t, kind=lsp.CompletionItemKind.Class,
                                        detail=f"{t}[dtype, ...]"))
    for w in hl.FLOAT_WORDS:
        items.append(lsp.CompletionItem(label=w, kind=lsp.CompletionItemKind.Constant))
    reg = _registry()
    for name in hl.builtins():
        if name in seen:
            continue
        b = reg.get(name)
        items.append(lsp.CompletionItem(
            label=name, kind=lsp.CompletionItemKind.Function,
            detail=builtin_signature(b) if b else "built-in",
            documentation=_md(getattr(b, "doc", "") or "") if b else None))
    if index is None:  # no parse yet: at least the items of the last check
        from tilelang.frontend import ast

        for name, item in top_level_items(a, earlier=True).items():
            kind = (lsp.CompletionItemKind.Constant if isinstance(item, ast.ConstDef)
                    else lsp.CompletionItemKind.Function)
            items.append(lsp.CompletionItem(label=name, kind=kind, detail=item_signature(item)))
    return items


def word_at(lines: list[str], position: lsp.Position,
            encoding: str = UTF16) -> tuple[str, int, int, int] | None:
    """(word, line, start, end) of the identifier at `position` (code-point indices), or None
    when there is none (also for a position past the end of the document)."""
    ln, idx = from_lsp_position(lines, position, encoding)
    if not 0 <= ln < len(lines):
        return None
    line = lines[ln]
    # look at a window around the position only: a line may be megabytes long
    lo = max(idx - 256, 0)
    for m in _IDENT.finditer(line, lo, min(idx + 256, len(line))):
        if m.start() <= idx <= m.end():
            return m.group(0), ln, m.start(), m.end()
    return None


def binding_type(a: Analysis, word: str, line: int, col: int) -> str | None:
    """The checker's inferred type of the binding `word` visible at (line, col), 1-based:
    the nearest declaration of that name at or before the position."""
    if a.typed is None:
        return None
    best = None
    for r in a.typed.records:
        if r.name != word or r.span is None or r.kind == "set":
            continue
        if (r.span.line, r.span.col) <= (line, col) and \
                (best is None or (r.span.line, r.span.col) > (best.span.line, best.span.col)):
            best = r
    if best is None:
        return None
    const = f" = {best.const}" if best.const is not None and best.kind != "param" else ""
    return f"```tile\n{best.kind} {word}: {best.type}{const}\n```\n\n*in {best.context}*" \
        + _by_target_note(a, word, best.context)


def _by_target_note(a: Analysis, word: str, context: str) -> str:
    """Which `by_target` entry gave a kernel `const` its value (the editor checks for the
    default target, tilelang.options.DEFAULT_TARGET)."""
    from tilelang.options import DEFAULT_TARGET

    for k in getattr(a.typed, "kernels", ()):
        if f"kernel {k.name}" != context:
            continue
        for c in k.const_choices:
            if c.name == word:
                return f"\n\nfrom `by_target`'s `{c.entry}` entry, for {DEFAULT_TARGET}"
    return ""


def _symbol_hover(a: Analysis, occ) -> str | None:
    """What hover says about a name the document's index resolved."""
    from .navigation import imported_item

    sym = occ.symbol
    if sym is None:
        if occ.role == "keyword" and occ.builtin:
            b = _registry().get(occ.builtin)
            if b is not None:
                return f"parameter `{occ.name}` of\n```tile\n{builtin_signature(b)}\n```"
        return None
    if sym.kind in ("param", "let", "var", "for"):
        typed = binding_type(a, sym.name, sym.line, sym.col)
        if typed is not None:
            return typed
        kind = {"for": "loop"}.get(sym.kind, sym.kind)
        return f"```tile\n{kind} {sym.name}\n```"
    if sym.kind in ("fn", "kernel", "const"):
        doc = doc_comment(a.lines, sym.node)
        return f"```tile\n{item_signature(sym.node)}\n```" + (f"\n\n{doc}" if doc else "")
    if sym.kind == "module":
        from .symbols import module_path_of

        path = module_path_of(a, sym.target)
        where = f"\n\n`{path}`" if path else "\n\nnot found"
        return f"module `{'.'.join(sym.target)}`" + where
    if sym.kind == "import":
        path, item = imported_item(a, sym.target)
        if item is None:
            return f"`{sym.target[1]}` from module `{'.'.join(sym.target[0])}` (not found)"
        doc = doc_comment(file_lines(path), item)
        return (f"```tile\n{item_signature(item)}\n```" + (f"\n\n{doc}" if doc else "")
                + f"\n\n*from {'.'.join(sym.target[0])}*")
    return None


def hover(a: Analysis, position: lsp.Position, encoding: str = UTF16) -> lsp.Hover | None:
    lines = a.lines
    found = word_at(lines, position, encoding)
    if found is None:
        return None
    word, ln, start, end = found
    line = lines[ln]
    before = line[start - 1] if start > 0 else ""
    items = top_level_items(a, earlier=True)
    value = None
    occ = a.index.at(ln + 1, start + 1) if a.module is not None else None
    if occ is not None and occ.name == word:
        value = _symbol_hover(a, occ)
    elif before not in ("@", ".") and word not in items:
        value = binding_type(a, word, ln + 1, start + 1)
    if value is not None:
        pass  # a binding's inferred type is the most specific answer
    elif before == "@" and word in ATTRIBUTE_DOCS:
        value = ATTRIBUTE_DOCS[word]
    elif word in HELPER_DOCS and line[end:end + 1] == "(":
        value = HELPER_DOCS[word]
    elif before == ".":
        value = _member_hover(a, ln, start, word)
        if value is None:
            return None
    elif word in items:
        value = f"```tile\n{item_signature(items[word])}\n```"
    elif word in hl.builtins():
        b = _registry().get(word)
        if b is not None:
            value = f"```tile\n{builtin_signature(b)}\n```\n\n{b.doc}".rstrip()
            value += f"\n\n*built-in ({b.group})*"
        else:
            value = f"built-in `{word}`"
    elif word in hl.dtypes():
        value = dtype_doc(word)
    elif word in hl.keywords():
        value = KEYWORD_DOCS.get(word, f"keyword `{word}`")
    elif word in TYPE_DOCS:
        value = TYPE_DOCS[word]
    elif word in hl.FLOAT_WORDS:
        value = f"the float constant `{word}`"
    if value is None:
        return None
    rng = lsp.Range(start=to_lsp_position(lines, ln + 1, start + 1, encoding),
                    end=to_lsp_position(lines, ln + 1, end + 1, encoding))
    return lsp.Hover(contents=lsp.MarkupContent(kind=lsp.MarkupKind.Markdown, value=value),
                     range=rng)


def definition(a: Analysis, position: lsp.Position,
               encoding: str = UTF16) -> lsp.Location | None:
    if a.module is not None:
        from .navigation import definition as resolved

        return resolved(a, position, encoding)
    found = word_at(a.lines, position, encoding)
    if found is None:
        return None
    word, ln, start, _ = found
    if start > 0 and a.lines[ln][start - 1] in ".@":
        return None
    item = top_level_items(a).get(word)
    if item is None:
        return None
    return lsp.Location(uri=a.uri, range=span_to_range(a.lines, _name_span(item), encoding))
