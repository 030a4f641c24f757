"""`COMPILER_ID`: what identifies this compiler in the runtime's cache keys.

A SHA-256 over the compiler's own files (Python code, grammar, standard library) and the
identity of the LLVM and nvJitLink libraries it would use. Apart from the driver (which
re-exports it) so that a runtime process whose kernels are all cached imports neither the front
end nor the libraries to compute its keys.
"""

from __future__ import annotations

import hashlib
import os


def code_files() -> list[tuple[str, str]]:
    """(label, path) of every file of the compiler whose change can change its output: the
    package's Python code, the grammar (and its parser tables) and the standard library,
    wherever they are installed."""
    from .frontend import resources         # wherever the frontend finds them
    pkg = os.path.dirname(os.path.abspath(__file__))
    roots = [("tilelang", pkg), ("grammar", resources.grammar_dir()),
             ("stdlib", resources.stdlib_dir())]
    out: dict[str, tuple[str, str]] = {}
    for label, root in roots:
        for d, dirs, names in os.walk(str(root)):
            dirs[:] = sorted(x for x in dirs if x != "__pycache__")
            for n in sorted(names):
                if n.endswith((".py", ".lark", ".tile", ".json")):
                    path = os.path.join(d, n)
                    out.setdefault(os.path.normpath(path),
                                   (f"{label}/{os.path.relpath(path, str(root))}", path))
    return sorted(out.values())


def code_digest(files: list[tuple[str, str]] | None = None) -> str:
    """SHA-256 over the compiler's own files (and the grammar text the parser loads), so an
    edited or upgraded compiler never reuses kernels cached by another one."""
    h = hashlib.sha256()
    for label, path in code_files() if files is None else files:
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError:
            data = b"<unreadable>"
        h.update(f"{label}\0{len(data)}\0".encode())
        h.update(data)
    if files is None:
        # the grammar file the parser loads, read directly: asking the parser for its text
        # imported Lark (~40 ms of CPU) in every runtime process that computed COMPILER_ID
        from .frontend import resources
        with open(resources.grammar_path(), encoding="utf-8") as f:
            h.update(b"grammar-text\0" + f.read().encode("utf-8"))
    return h.hexdigest()


def _file_identity(path: str) -> str:
    st = os.stat(path)
    return f"{os.path.basename(path)}, {st.st_size} bytes, mtime {st.st_mtime_ns}"


def _version_id() -> str:
    """Identifies this compiler and the LLVM and nvJitLink libraries it would use, without
    loading them: a runtime process that finds its kernels cached needs neither (loading them
    was ~50 ms of CPU). A library is named by its file's identity, which changes whenever it
    is replaced."""
    from .version import __version__
    parts = [f"tilec {__version__} (code {code_digest()[:16]})"]
    try:
        import llvmlite
        from llvmlite.utils import get_library_name
        lib = os.path.join(os.path.dirname(llvmlite.__file__), "binding", get_library_name())
        parts.append(f"llvmlite {llvmlite.__version__} ({_file_identity(lib)})")
    except Exception:  # pragma: no cover - llvmlite is a dependency
        parts.append("llvmlite ?")
    from . import nvjitlink
    files = [c for c in nvjitlink.candidates() if os.path.isabs(c)]
    if files:
        parts.append(f"nvJitLink ({_file_identity(files[0])})")
    else:       # only the system loader knows where it is: ask the library itself
        try:
            parts.append("nvJitLink %d.%d" % nvjitlink.version())
        except nvjitlink.NvJitLinkUnavailable:
            parts.append("nvJitLink none")
    return "; ".join(parts)


class _CompilerId:
    """`COMPILER_ID`: computed on first use (it hashes the compiler's files)."""

    _text: str | None = None

    def __str__(self) -> str:
        if _CompilerId._text is None:
            _CompilerId._text = _version_id()
        return _CompilerId._text

    def __repr__(self) -> str:
        return repr(str(self))

    def __eq__(self, other) -> bool:
        return str(self) == str(other)

    def __hash__(self) -> int:
        return hash(str(self))


COMPILER_ID = _CompilerId()
