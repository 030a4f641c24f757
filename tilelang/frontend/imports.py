"""Module resolution: `import std.math;` and `from std.nn import x;`.

A dotted path `a.b.c` names the file `a/b/c.tile`. Folders are searched in this order: the
importing file's folder, each `-I` folder, then the standard library (`stdlib/`, shipped
inside the package). A missing module lists every folder searched; an import cycle lists the
modules in it.
"""

from __future__ import annotations

import os

from ..diagnostics import Label, Span, TileError, TileImportError, register_codes
from ..record import field, record
from . import ast
from .parser import parse
from .resources import stdlib_dir
from .source import read_source

register_codes({
    "E0601": "module not found",
    "E0602": "import cycle",
    "E0603": "a name imported with `from` does not exist in the module",
})


@record
class LoadedModule:
    name: str            # dotted name, or the file path for the root module
    path: str
    module: ast.Module


@record
class ModuleLoader:
    """Loads each module once; detects cycles through the chain of modules being loaded."""

    include_dirs: list[str] = field(default_factory=list)
    loaded: dict[str, LoadedModule] = field(default_factory=dict)  # by real path
    _loading: list[tuple[str, Span | None]] = field(default_factory=list)

    def search_dirs(self, importer: str) -> list[str]:
        # The importer's folder as the user wrote it ("." for a bare file name), so messages
        # show paths the user recognises.
        here = (os.path.dirname(importer) or ".") if importer and \
            not importer.startswith("<") else "."
        return [here, *self.include_dirs, stdlib_dir()]

    def find(self, path: tuple[str, ...], importer: str, span: Span | None) -> str:
        rel = os.path.join(*path) + ".tile"
        dirs = self.search_dirs(importer)
        for d in dirs:
            candidate = os.path.join(d, rel)
            if os.path.isfile(candidate):
                return os.path.realpath(candidate)
        shown = "\n".join(f"  {d}" for d in dirs)
        raise TileImportError.at(
            "E0601", f"cannot find module `{'.'.join(path)}`", span,
            label="not found",
            notes=(f"looked for `{rel}` in:\n{shown}",),
            help="add the folder that holds it with `-I DIR`")

    def load(self, path: tuple[str, ...], importer: str, span: Span | None) -> LoadedModule:
        real = self.find(path, importer, span)
        name = ".".join(path)
        chain = [p for p, _ in self._loading]
        if real in chain:
            start = chain.index(real)
            names = [self._name_of(p) for p in chain[start:]] + [name]
            related = tuple(Label(s, "imported here") for _, s in self._loading[start + 1:] if s)
            raise TileImportError.at("E0602", "import cycle: " + " → ".join(names), span,
                                     related=related,
                                     help="move what both modules need into a third module")
        if real in self.loaded:
            return self.loaded[real]
        text = read_source(real)
        module = parse(text, real)
        lm = LoadedModule(name, real, module)
        self.loaded[real] = lm
        return lm

    def _name_of(self, real: str) -> str:
        lm = self.loaded.get(real)
        return lm.name if lm else os.path.basename(real)

    def enter(self, real: str, span: Span | None) -> None:
        self._loading.append((real, span))

    def leave(self) -> None:
        self._loading.pop()


__all__ = ["ModuleLoader", "LoadedModule", "stdlib_dir", "TileError"]
