"""What the checker's parts share (tilelang/sema/checker.py assembles them): the limits of a
walk, the exceptions that end one, the records a check produces, and the scope and body
context every statement and expression is checked in.
"""

from __future__ import annotations

from ..diagnostics import Diagnostic, Span
from ..frontend import ast
from ..record import field, record, replace
from .builtins_core import ArgInfo
from .constants import ConstStr
from .values import Binding, ModuleInfo


MAX_STATIC_ITERATIONS = 1024
# Statements one kernel (or a function checked alone) may take once every `static for` is
# unrolled and every call inlined: nested loops and calls multiply, and lowering costs about
# half a millisecond per statement, so this keeps any accepted program compiling in seconds.
MAX_UNROLLED_STATEMENTS = 16384
# The budget is kept in eighths of a statement: a statement or an unrolled iteration (also of an
# empty body) costs EIGHTHS, each expression node one, so long expressions count as several
# statements and nested empty loops cannot run unbounded.
EIGHTHS = 8
MAX_ERRORS = 50
# Built-ins that read the block's position or global memory exist only in tile code.
TILE_ONLY_GROUPS = ("memory",)
TILE_ONLY_NAMES = ("bid", "num_blocks", "cluster_rank", "cluster_size")


def close_matches(name: str, candidates: list[str], n: int) -> list[str]:
    import difflib      # only a misspelt name needs it: not imported by every check
    return difflib.get_close_matches(name, candidates, n=n)


class TooLarge(Exception):
    """The statement budget (MAX_UNROLLED_STATEMENTS) ran out: stop walking this body."""

    def __init__(self, span: Span | None):
        self.span = span


class NeedsValue(Exception):
    """A symbolic const parameter's value is needed: stop checking this kernel."""

    def __init__(self, span: Span | None, message: str):
        self.span = span
        self.message = message


def with_note(d: Diagnostic, note: str) -> Diagnostic:
    if any(n.startswith("while checking") for n in d.notes):
        return d
    return replace(d, notes=d.notes + (note,))


# ---------------------------------------------------------------------------------------------
# Results


@record(frozen=True)
class BindingRecord:
    """One binding for `--emit typed-ast`: where, which name, its type and constant value."""

    context: str
    span: Span | None
    kind: str
    name: str
    type: object
    const: object | None


@record
class KernelInfo:
    name: str
    node: ast.KernelDef
    params: list[tuple[str, object, bool, object | None]]  # name, type, is_const, value
    launch: object | None = None  # the resolved LaunchSpec
    # the `const` defaults this target took from a by_target (sema.launch_attrs.ConstChoice)
    const_choices: tuple = ()


@record
class TypedProgram:
    module: ModuleInfo
    kernels: list[KernelInfo] = field(default_factory=list)
    records: list[BindingRecord] = field(default_factory=list)
    files: list[str] = field(default_factory=list)   # the module's path, then its imports

    def format(self) -> str:
        """Each binding's inferred type, grouped by the kernel or function it belongs to."""
        out: list[str] = []
        current = None
        for r in self.records:
            if r.context != current:
                if out:
                    out.append("")
                out.append(r.context)
                current = r.context
            where = f"{r.span.line}:{r.span.col}" if r.span else "-"
            const = ""
            if r.const is not None and not isinstance(r.const, ConstStr):
                const = f" = {r.const}"
            out.append(f"  {where:<8} {r.kind:<5} {r.name}: {r.type}{const}")
        return "\n".join(out) + ("\n" if out else "")


# ---------------------------------------------------------------------------------------------
# Scopes


class Scope:
    def __init__(self, parent: "Scope | None" = None):
        self.parent = parent
        self.names: dict[str, Binding] = {}

    def lookup(self, name: str) -> Binding | None:
        s: Scope | None = self
        while s is not None:
            b = s.names.get(name)
            if b is not None:
                return b
            s = s.parent
        return None

    def all_names(self) -> list[str]:
        out: list[str] = []
        s: Scope | None = self
        while s is not None:
            out += list(s.names)
            s = s.parent
        return out


@record
class Ctx:
    """The function or kernel body being checked."""

    kind: str                  # "kernel" | "fn" | "host"
    name: str
    module: ModuleInfo
    label: str                 # heading for typed-ast records
    loop_depth: int = 0
    run_loops: int = 0         # run-time `for`/`while` loops around this point (not `static`)
    if_frames: list = field(default_factory=list)  # per enclosing run-time `if`: returnable?
    liftable: frozenset = frozenset()  # ids of the fn's `if`s whose every path returns
    returns: list[ArgInfo] = field(default_factory=list)
    note: str | None = None    # "while checking `f` called at ..." for inlined functions
    declared: dict = field(default_factory=dict)  # every name bound in the body -> its span
