"""Source line information (`tilec --lineinfo`): LLVM debug metadata in its lightest form, a
compile unit that asks only for line directives, so NVPTX writes `.file`/`.loc` and no DWARF
sections. Each Tile IR op's instructions carry its span's line (walk.py sets it while
lowering the op); the emulator names these lines in its errors (docs/emulator.md)."""

from __future__ import annotations

import os

from llvmlite import ir

from tilelang.diagnostics import Span

I32 = ir.IntType(32)


class LineInfo:
    def __init__(self, module: ir.Module, fn: ir.Function, name: str, span: Span | None):
        self.module = module
        self._files: dict[str, ir.DIValue] = {}
        self._scopes: dict[str, ir.DIValue] = {}
        self._locs: dict[tuple, ir.DIValue] = {}
        path = span.file if span is not None else "<unknown>"
        main = self.file(path)
        cu = module.add_debug_info("DICompileUnit", {
            "language": ir.DIToken("DW_LANG_C"), "file": main, "producer": "tilec",
            "isOptimized": True, "runtimeVersion": 0,
            "emissionKind": ir.DIToken("DebugDirectivesOnly")}, is_distinct=True)
        module.add_named_metadata("llvm.dbg.cu", cu)
        flags = module.add_named_metadata("llvm.module.flags")
        flags.add(module.add_metadata([I32(7), "Dwarf Version", I32(2)]))
        flags.add(module.add_metadata([I32(2), "Debug Info Version", I32(3)]))
        sptype = module.add_debug_info("DISubroutineType", {"types": module.add_metadata([])})
        line = span.line if span is not None else 0
        self.sp = module.add_debug_info("DISubprogram", {
            "name": name, "scope": main, "file": main, "line": line, "type": sptype,
            "scopeLine": line, "spFlags": ir.DIToken("DISPFlagDefinition | DISPFlagOptimized"),
            "unit": cu}, is_distinct=True)
        fn.set_metadata("dbg", self.sp)
        self._main = path
        self._scopes[path] = self.sp
        self.kernel_loc = self.loc(span) if span is not None else self._at(path, line, 0)

    def file(self, path: str) -> ir.DIValue:
        f = self._files.get(path)
        if f is None:
            # `<string>` (source given as text) is no path: keep it as it is
            d, b = ("", path) if path.startswith("<") else os.path.split(os.path.abspath(path))
            f = self._files[path] = self.module.add_debug_info(
                "DIFile", {"filename": b, "directory": d})
        return f

    def _scope(self, path: str) -> ir.DIValue:
        # a line of another file (an imported module's function, inlined) needs a scope of
        # that file inside the kernel's subprogram
        s = self._scopes.get(path)
        if s is None:
            s = self._scopes[path] = self.module.add_debug_info("DILexicalBlockFile", {
                "scope": self.sp, "file": self.file(path), "discriminator": 0})
        return s

    def _at(self, path: str, line: int, col: int) -> ir.DIValue:
        key = (path, line, col)
        loc = self._locs.get(key)
        if loc is None:
            loc = self._locs[key] = self.module.add_debug_info("DILocation", {
                "line": line, "column": col, "scope": self._scope(path)})
        return loc

    def loc(self, span: Span | None) -> ir.DIValue:
        if span is None:
            return self.kernel_loc
        return self._at(span.file, span.line, span.col)
