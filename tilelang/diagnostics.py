"""Source spans, diagnostics and their rustc-style rendering.

Every user mistake the compiler finds becomes a `Diagnostic` with a stable code and a `Span`;
errors are raised as `TileError` (or a subclass), which carries one or more diagnostics.
Stages keep their own code tables (see `register_codes`); this module owns only the mechanism,
so that adding a stage never means editing a central list.
"""

from __future__ import annotations

import os
import sys
from enum import Enum
from typing import Iterable, Mapping, Sequence, TextIO

from .infile import read_regular
from .record import field, record


@record(unsafe_hash=True)
class Span:
    """A region of one source file: 1-based lines and columns, `end_col` exclusive. Hashed by
    value and never changed once made (not guarded by a frozen `__setattr__`: the parser
    makes one per syntax node, and the guard doubled what each costs)."""

    file: str
    line: int
    col: int
    end_line: int
    end_col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"

    @staticmethod
    def point(file: str, line: int, col: int) -> "Span":
        return Span(file, line, col, line, col + 1)

    def merge(self, other: "Span") -> "Span":
        """The smallest span covering both (same file assumed)."""
        start = min((self.line, self.col), (other.line, other.col))
        end = max((self.end_line, self.end_col), (other.end_line, other.end_col))
        return Span(self.file, start[0], start[1], end[0], end[1])


class Severity(Enum):
    ERROR = "error"
    WARNING = "warning"
    NOTE = "note"


@record(frozen=True)
class Label:
    """A secondary span with a short message ("first assigned here")."""

    span: Span
    message: str


@record(frozen=True)
class Diagnostic:
    severity: Severity
    code: str | None
    message: str
    span: Span | None = None
    label: str | None = None  # short text printed after the carets
    help: str | None = None
    notes: tuple[str, ...] = ()
    related: tuple[Label, ...] = ()


# ---------------------------------------------------------------------------------------------
# Error codes: each stage registers its own table once at import time.

_CODES: dict[str, str] = {}


def register_codes(table: Mapping[str, str]) -> None:
    """Record a stage's codes with a one-line meaning each; a code may be defined only once."""
    for code, meaning in table.items():
        if code in _CODES and _CODES[code] != meaning:
            raise ValueError(f"error code {code} registered twice")
        _CODES[code] = meaning


def known_codes() -> dict[str, str]:
    return dict(_CODES)


# ---------------------------------------------------------------------------------------------
# Exceptions


class TileError(Exception):
    """A user-facing compile error. Carries every diagnostic that was found."""

    def __init__(self, diagnostics: Diagnostic | Sequence[Diagnostic] | str):
        if isinstance(diagnostics, str):          # a bare message (no code, no span)
            diagnostics = Diagnostic(Severity.ERROR, None, diagnostics)
        if isinstance(diagnostics, Diagnostic):
            diagnostics = [diagnostics]
        self.diagnostics: list[Diagnostic] = list(diagnostics)
        # the texts the spans point into, as they are now (a later `<string>` module replaces
        # the registry's text, and str() of this error must still show its own lines)
        self._texts = {sp.file: _SOURCES.get(sp.file) for d in self.diagnostics
                       for sp in (d.span, *(r.span for r in d.related)) if sp is not None}
        first = self.diagnostics[0] if self.diagnostics else None
        super().__init__(first.message if first else "error")

    @classmethod
    def at(cls, code: str, message: str, span: Span | None, *, label: str | None = None,
           help: str | None = None, notes: Iterable[str] = (),
           related: Iterable[Label] = ()) -> "TileError":
        return cls(Diagnostic(Severity.ERROR, code, message, span, label, help,
                              tuple(notes), tuple(related)))

    @property
    def code(self) -> str | None:
        return self.diagnostics[0].code if self.diagnostics else None

    def __reduce__(self):
        # pickled (multiprocessing, pytest-xdist) with its diagnostics, not just a message
        return (type(self), (self.diagnostics,))

    def __str__(self) -> str:
        """Every diagnostic as `tilec` prints it, uncoloured (location, source line with
        carets, notes, help), so a Python traceback shows what the CLI would. `args[0]` stays
        the first message and `diagnostics` the structured list."""
        if not self.diagnostics:
            return super().__str__()
        return render_all(self.diagnostics, texts=getattr(self, "_texts", None))


class TileSyntaxError(TileError):
    """The source does not parse."""


class TileSemanticError(TileError):
    """Names, types, shapes, constants, control flow."""


class TileImportError(TileError):
    """A module could not be found or imports form a cycle."""


class TileLaunchError(TileError):
    """An @launch attribute or a launch configuration breaks the launch contract."""


class TileUsageError(TileError):
    """The compiler was invoked wrongly (file missing, bad option value)."""


class InternalCompilerError(TileError):
    """A bug in the compiler; the message says where to report it."""


# ---------------------------------------------------------------------------------------------
# Source text registry so renderers can show lines without re-reading files.

_SOURCES: dict[str, str] = {}


def remember_source(file: str, text: str) -> None:
    _SOURCES[file] = text


def source_line(file: str, line: int, texts: Mapping[str, str | None] | None = None
                ) -> str | None:
    text = texts.get(file) if texts else None
    if text is None:
        text = _SOURCES.get(file)
    if text is None:
        try:    # a span may name a FIFO or a device: never blocks (tilelang/infile.py)
            text = read_regular(file).decode("utf-8")
        except (OSError, UnicodeDecodeError):
            return None
        _SOURCES[file] = text
    lines = text.split("\n")
    if 1 <= line <= len(lines):
        return lines[line - 1].rstrip("\r")
    if line == len(lines) + 1:
        return ""
    return None


# ---------------------------------------------------------------------------------------------
# Rendering

_COLORS = {
    Severity.ERROR: "\x1b[1;31m",
    Severity.WARNING: "\x1b[1;33m",
    Severity.NOTE: "\x1b[1;36m",
}
_BLUE = "\x1b[1;34m"
_BOLD = "\x1b[1m"
_RESET = "\x1b[0m"


def use_color(stream: TextIO) -> bool:
    """Colour only on a terminal, and never when NO_COLOR is set (https://no-color.org)."""
    if os.environ.get("NO_COLOR", "") != "":
        return False
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except (ValueError, OSError):
        return False


def _expand_tabs(text: str) -> str:
    return text.replace("\t", "    ")


def _caret_line(src: str, col: int, end_col: int) -> tuple[int, int]:
    """Columns (0-based display start, width) of the carets, accounting for tabs."""
    prefix = _expand_tabs(src[: max(col - 1, 0)])
    body = _expand_tabs(src[max(col - 1, 0): max(end_col - 1, col)])
    return len(prefix), max(len(body), 1)


# A source line wider than this is shown as a window around the carets (a 5,000-digit literal
# should not flood the terminal).
SNIPPET_WIDTH = 120


def _window(text: str, start: int, width: int) -> tuple[str, int, int]:
    """Cut a long display line to SNIPPET_WIDTH columns around the carets at (start, width);
    '…' marks each cut. Returns the text shown and the carets' new start and width."""
    if len(text) <= SNIPPET_WIDTH:
        return text, start, width
    lo = max(0, min(start - 16, len(text) - SNIPPET_WIDTH))
    hi = min(len(text), lo + SNIPPET_WIDTH)
    shown = ("…" if lo else "") + text[lo:hi] + ("…" if hi < len(text) else "")
    new_start = start - lo + (1 if lo else 0)
    return shown, new_start, max(1, min(width, hi - start))


def _snippet(span: Span, label: str | None, gutter: int, paint, texts=None) -> list[str]:
    src = source_line(span.file, span.line, texts)
    pad = " " * gutter
    if src is None:
        return []
    end_col = span.end_col if span.end_line == span.line else len(src) + 1
    start, width = _caret_line(src, span.col, end_col)
    shown, start, width = _window(_expand_tabs(src), start, width)
    carets = "^" * width
    if span.end_line > span.line:
        label = (label + " " if label else "") + f"(continues to line {span.end_line})"
    out = [
        f"{pad} {paint(_BLUE, '|')}",
        f"{paint(_BLUE, str(span.line).rjust(gutter))} {paint(_BLUE, '|')} {shown}",
        f"{pad} {paint(_BLUE, '|')} {' ' * start}{paint(None, carets)}"
        + (f" {label}" if label else ""),
    ]
    return out


def render(diag: Diagnostic, color: bool = False,
           texts: Mapping[str, str | None] | None = None) -> str:
    """Render one diagnostic in the rustc style:

        error[E0101]: expected `)` to close the `(` at 3:14, found `;`
         --> kernel.tile:3:20
          |
        3 |     let x = f(a;
          |                ^
          |
          = help: ...
    """
    sev_color = _COLORS[diag.severity]

    def paint(c: str | None, text: str) -> str:
        if not color:
            return text
        return f"{c or sev_color}{text}{_RESET}"

    head = diag.severity.value + (f"[{diag.code}]" if diag.code else "")
    lines = [f"{paint(sev_color, head)}{paint(_BOLD, ': ' + diag.message)}"]
    spans = [diag.span] if diag.span else []
    spans += [r.span for r in diag.related]
    gutter = max((len(str(s.line)) for s in spans), default=1)
    pad = " " * gutter
    if diag.span is not None:
        lines.append(f"{pad}{paint(_BLUE, '-->')} {diag.span}")
        lines += _snippet(diag.span, diag.label, gutter, paint, texts)
    for rel in diag.related:
        lines.append(f"{pad}{paint(_BLUE, ':::')} {rel.span}")
        lines += _snippet(rel.span, rel.message, gutter, lambda c, t: paint(c or _BLUE, t),
                          texts)
    tail = [f"{pad} {paint(_BLUE, '=')} note: {n}" for n in diag.notes]
    if diag.help:
        tail.append(f"{pad} {paint(_BLUE, '=')} help: {diag.help}")
    if tail:
        if diag.span is not None:
            lines.append(f"{pad} {paint(_BLUE, '|')}")
        lines += tail
    return "\n".join(lines)


def render_all(diags: Iterable[Diagnostic], color: bool = False,
               texts: Mapping[str, str | None] | None = None) -> str:
    return "\n\n".join(render(d, color, texts) for d in diags)


def emit(diags: Iterable[Diagnostic], stream: TextIO | None = None) -> None:
    stream = stream or sys.stderr
    diags = list(diags)
    if not diags:
        return
    stream.write(render_all(diags, use_color(stream)) + "\n")
    errors = sum(d.severity is Severity.ERROR for d in diags)
    if errors:
        summary = f"error: aborting due to {errors} previous error{'s' if errors != 1 else ''}"
        stream.write("\n" + (f"{_COLORS[Severity.ERROR]}{summary}{_RESET}"
                             if use_color(stream) else summary) + "\n")


@record
class DiagnosticSink:
    """Collects warnings and notes (which never fail a build) and errors (which do)."""

    diagnostics: list[Diagnostic] = field(default_factory=list)

    def add(self, diag: Diagnostic) -> None:
        self.diagnostics.append(diag)

    def warn(self, code: str, message: str, span: Span | None, *, help: str | None = None,
             label: str | None = None) -> None:
        self.add(Diagnostic(Severity.WARNING, code, message, span, label, help))

    def note(self, message: str, span: Span | None = None) -> None:
        self.add(Diagnostic(Severity.NOTE, None, message, span))

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.severity is Severity.ERROR]
