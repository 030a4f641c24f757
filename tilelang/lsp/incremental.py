"""Re-checking only what an edit changed, where that is cheap.

* Parsing: the grammar is context-free at the level of top-level items (`start: item*`), so
  the document is cut into items at the `;` or `}` that ends each at bracket depth 0, and each
  item is parsed on its own, padded to its place in the document (its spans are the ones a
  parse of the whole text gives) and kept by (text, line, column). After an edit inside one
  item only that item is parsed again; an edit that adds or removes lines parses the items
  below it again (their spans moved).
* Imports: each imported file is parsed once per content (SHA-256 of its text), whichever
  document imports it, instead of once per check.

The checker then runs on the whole module (its cost is per kernel and per call of a function;
see benchmarks/lsp_bench.py for what an edit costs).
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections import OrderedDict

from tilelang.diagnostics import Span, TileSyntaxError, remember_source
from tilelang.frontend import ast
from tilelang.frontend.imports import LoadedModule, ModuleLoader
from tilelang.frontend.parser import MAX_ERRORS, parse
from tilelang.frontend.source import read_source

#: Parsed items kept per document, and imported files kept (each by content).
MAX_ITEMS = 4096
MAX_IMPORTS = 256


# What item boundaries depend on: braces and `;` (no bracket of a valid program holds one, and
# a text whose items all parse parses as a whole), and the comments and strings that may hold
# them. Everything else is skipped by the regex engine, not by Python.
_BOUNDARY = re.compile(r'//[^\n]*|/\*.*?(?:\*/|\Z)|"(?:[^"\\\n]|\\.)*"?|[{};]', re.S)
_GAP = re.compile(r"(?:\s+|//[^\n]*|/\*.*?\*/)*", re.S)  # (an unclosed comment: a chunk)


def item_chunks(text: str) -> list[tuple[int, int, int, int]]:
    """(start offset, end offset, line, column) of each top-level item of `text`: each ends
    at the `;` or `}` that brings the brace depth back to 0. A stray `}` makes the rest of the
    text one chunk (its parse reports it)."""
    out = []
    depth = 0
    start = _GAP.match(text, 0).end()
    line, line_at = 1, 0  # the line of offset `line_at`
    for m in _BOUNDARY.finditer(text, start):
        c = m.group(0)
        if len(c) != 1:
            continue  # a comment or a string
        if c == "{":
            depth += 1
            continue
        if c == "}":
            depth -= 1
            if depth < 0:
                break
            if depth:
                continue
        elif depth:  # `;` inside brackets
            continue
        line += text.count("\n", line_at, start)
        line_at = start
        col = start - (text.rfind("\n", 0, start) + 1) + 1
        end = m.end()
        out.append((start, end, line, col))
        start = _GAP.match(text, end).end()
    if start < len(text):
        line += text.count("\n", line_at, start)
        col = start - (text.rfind("\n", 0, start) + 1) + 1
        out.append((start, len(text), line, col))
    return out


class ItemCache:
    """Parses documents item by item, reusing the items parsed before (one per document)."""

    def __init__(self, limit: int = MAX_ITEMS):
        self._items: OrderedDict = OrderedDict()
        self._limit = limit
        self.parsed = self.reused = 0  # counters, for the benchmark and the tests

    def parse(self, text: str, path: str) -> ast.Module:
        """The module of `text`, equal to `parse(text, path)`; raises what `parse(text, path)`
        raises when an item does not parse."""
        items: list = []
        errors: list = []
        for start, end, line, col in item_chunks(text):
            chunk = text[start:end]
            key = (chunk, line, col)
            got = self._items.get(key)
            if got is not None:
                self._items.move_to_end(key)
                self.reused += 1
                items += got
                continue
            padded = "\n" * (line - 1) + " " * (col - 1) + chunk
            self.parsed += 1
            try:
                module = parse(padded, path)
            except TileSyntaxError as e:
                errors += e.diagnostics
                continue
            self._items[key] = module.items
            items += module.items
            while len(self._items) > self._limit:
                self._items.popitem(last=False)
        remember_source(path, text)  # each item's parse remembered its padded text instead
        if errors:
            # The whole text's parse reports what `tilec check` reports (after a lexical error
            # it keeps only the errors before it, which an item's parse cannot know).
            parse(text, path)
            raise TileSyntaxError(errors[:MAX_ERRORS])  # pragma: no cover - it raised
        lines = text.split("\n")
        return ast.Module(tuple(items), path, Span(path, 1, 1, len(lines), len(lines[-1]) + 1))


class _ImportCache:
    def __init__(self):
        self._lock = threading.Lock()
        self._by_path: OrderedDict = OrderedDict()  # real path -> (sha256, module)

    def get(self, real: str, digest: str):
        with self._lock:
            hit = self._by_path.get(real)
            if hit is not None and hit[0] == digest:
                self._by_path.move_to_end(real)
                return hit[1]
        return None

    def put(self, real: str, digest: str, module) -> None:
        with self._lock:
            self._by_path[real] = (digest, module)
            self._by_path.move_to_end(real)
            while len(self._by_path) > MAX_IMPORTS:
                self._by_path.popitem(last=False)


IMPORTS = _ImportCache()


class CachedLoader(ModuleLoader):
    """The checker's module loader, with each imported file parsed once per content."""

    def load(self, path, importer, span) -> LoadedModule:
        real = self.find(path, importer, span)
        if real in self.loaded or real in [p for p, _ in self._loading]:
            return super().load(path, importer, span)  # the cycle check, or loaded already
        text = read_source(real)
        digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
        module = IMPORTS.get(real, digest)
        if module is None:
            module = parse(text, real)
            IMPORTS.put(real, digest, module)
        else:
            remember_source(real, text)
        lm = LoadedModule(".".join(path), real, module)
        self.loaded[real] = lm
        return lm


def check_module(module: ast.Module):
    """`tilelang.sema.checker.check_module` with the default options (no `-I`, no `-D`, the
    default target), its imports read through `CachedLoader`. Returns (typed program,
    diagnostics, loader)."""
    from tilelang.diagnostics import TileError
    from tilelang.sema.check_context import TypedProgram
    from tilelang.sema.checker import Checker
    from tilelang.sema.values import ModuleInfo

    checker = Checker()
    checker.loader = CachedLoader(list(checker.loader.include_dirs))
    try:
        program = checker.check_root(module)
    except TileError as e:
        checker.report(e.diagnostics)
        program = TypedProgram(ModuleInfo(module.file, module.file, module))
    return program, checker.diags, checker.loader
