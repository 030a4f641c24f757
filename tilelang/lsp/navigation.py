"""Go-to-definition, references and rename, answered from the document's `symbols.Index`.

Definitions in the document (parameters, `let`/`var`/`for` names, constants, functions,
kernels, import names) are found in it; an imported module's functions and constants in the
module's file (read through the checker's loader); a module name leads to its file.
"""

from __future__ import annotations

import re

from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcInvalidParams
from pygls.uris import from_fs_path

from .analysis import Analysis
from .positions import UTF16, from_lsp_position, to_lsp_position
from .symbols import Occurrence, Symbol, imported_module

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def occurrence_at(a: Analysis, position: lsp.Position, encoding: str = UTF16
                  ) -> Occurrence | None:
    if a.module is None:
        return None
    ln, idx = from_lsp_position(a.lines, position, encoding)
    if not 0 <= ln < len(a.lines):
        return None
    return a.index.at(ln + 1, idx + 1)


def name_range(lines: list[str], line: int, col: int, name: str,
               encoding: str = UTF16) -> lsp.Range:
    return lsp.Range(start=to_lsp_position(lines, line, col, encoding),
                     end=to_lsp_position(lines, line, col + len(name), encoding))


def _file_lines(path: str) -> list[str]:
    from .diagnostics import _read_lines

    return _read_lines(path)


def imported_item(a: Analysis, target: tuple):
    """(path, item) of `name` in module `path` for a target (path, name), or (path, None)."""
    dotted, name = target
    path, module = imported_module(a, dotted)
    if module is None:
        return path, None
    for item in module.items:
        if getattr(item, "name", None) == name:
            return path, item
    return path, None


def _location_in(path: str, line: int, col: int, name: str, encoding: str) -> lsp.Location:
    lines = _file_lines(path)
    return lsp.Location(uri=from_fs_path(path) or path,
                        range=name_range(lines, line, col, name, encoding))


def definition(a: Analysis, position: lsp.Position, encoding: str = UTF16
               ) -> lsp.Location | None:
    occ = occurrence_at(a, position, encoding)
    if occ is None or occ.symbol is None:
        return None
    sym = occ.symbol
    if sym.kind == "module" and occ.role == "def":  # the import itself: the module's file
        path, _ = imported_module(a, sym.target)
        if path is None:
            return None
        zero = lsp.Position(line=0, character=0)
        return lsp.Location(uri=from_fs_path(path) or path, range=lsp.Range(start=zero, end=zero))
    if sym.kind == "import":  # a name a module gives: where that module defines it
        path, item = imported_item(a, sym.target)
        if item is None:
            return None
        sp = item.name_span
        return _location_in(path, sp.line, sp.col, item.name, encoding)
    return lsp.Location(uri=a.uri, range=name_range(a.lines, sym.line, sym.col, sym.name,
                                                    encoding))


def _same_import(o: Occurrence, sym: Symbol) -> bool:
    s = o.symbol
    return s is not None and s.kind == "import" and s.target == sym.target


def references(a: Analysis, position: lsp.Position, include_declaration: bool = True,
               encoding: str = UTF16) -> list[lsp.Location]:
    occ = occurrence_at(a, position, encoding)
    if occ is None:
        return []
    if occ.symbol is None:  # a built-in: its uses in the document
        if occ.role != "ref":
            return []
        found = [o for o in a.index.occurrences
                 if o.symbol is None and o.role == "ref" and o.name == occ.name]
    elif occ.symbol.kind == "import":  # an imported function: its uses, whichever way named
        found = [o for o in a.index.occurrences if _same_import(o, occ.symbol)]
        if not include_declaration:
            found = [o for o in found if o.role != "def"]
    else:
        found = a.index.uses(occ.symbol)
        if not include_declaration:
            found = [o for o in found if o.role != "def"]
    return [lsp.Location(uri=a.uri, range=name_range(a.lines, o.line, o.col, o.name, encoding))
            for o in found]


def _renameable(a: Analysis, occ: Occurrence | None) -> Symbol | None:
    """The symbol a rename at `occ` renames: one the document defines (an imported function
    is named by its module; a built-in by the language)."""
    if occ is None or occ.symbol is None:
        return None
    sym = occ.symbol
    if sym.kind == "import" and (occ.role == "member" or sym.node is None
                                 or getattr(sym.node, "alias", None) is None):
        return None
    if sym.kind == "module" and getattr(sym.node, "alias", None) is None:
        return None
    return sym


def prepare_rename(a: Analysis, position: lsp.Position, encoding: str = UTF16):
    occ = occurrence_at(a, position, encoding)
    sym = _renameable(a, occ)
    if sym is None:
        return None
    return lsp.PrepareRenamePlaceholder(
        range=name_range(a.lines, occ.line, occ.col, occ.name, encoding), placeholder=occ.name)


def rename(a: Analysis, position: lsp.Position, new_name: str,
           encoding: str = UTF16) -> lsp.WorkspaceEdit | None:
    from tilelang.fmt.tokens import KEYWORDS

    occ = occurrence_at(a, position, encoding)
    sym = _renameable(a, occ)
    if sym is None:
        if occ is not None:
            raise JsonRpcInvalidParams(f"`{occ.name}` cannot be renamed here: it is not "
                                       f"defined in this document")
        return None
    if not isinstance(new_name, str) or not _IDENT.match(new_name) or new_name in KEYWORDS:
        raise JsonRpcInvalidParams(f"`{new_name}` is not a name: a name is a letter or `_` "
                                   f"followed by letters, digits and `_`, and not a keyword")
    uses = a.index.uses(sym)
    if sym.kind == "import":  # `from m import f as g`: rename `g`, not `f`
        uses = [o for o in uses if o.role != "member"]
    edits = [lsp.TextEdit(range=name_range(a.lines, o.line, o.col, o.name, encoding),
                          new_text=new_name) for o in uses]
    return lsp.WorkspaceEdit(changes={a.uri: edits})


def highlights(a: Analysis, position: lsp.Position,
               encoding: str = UTF16) -> list[lsp.DocumentHighlight]:
    """The occurrences of the name at `position` in the document: where it is defined (Write)
    and used (Read)."""
    occ = occurrence_at(a, position, encoding)
    if occ is None or occ.symbol is None:
        return []
    return [lsp.DocumentHighlight(
        range=name_range(a.lines, o.line, o.col, o.name, encoding),
        kind=lsp.DocumentHighlightKind.Write if o.role == "def" else lsp.DocumentHighlightKind.Read)
        for o in (a.index.uses(occ.symbol) if occ.symbol.kind != "import" else
                  [o for o in a.index.occurrences if _same_import(o, occ.symbol)])]
