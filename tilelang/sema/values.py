"""What the checker knows about a value, and the kinds of names it binds.

A value is an `ArgInfo` (the registry's own description of an argument: type, constant value,
span, tuple elements), so that any checked expression can be handed to a built-in's typing
rule unchanged. Functions, kernels, modules and built-ins are values too, with the types below.
"""

from __future__ import annotations


from ..diagnostics import Span
from ..frontend import ast
from ..record import field, record
from .builtins_core import ArgInfo, Builtin


@record(frozen=True)
class ErrorType:
    """The type of an expression that already failed: it silences follow-on errors."""

    def __str__(self) -> str:
        return "{error}"


ERROR = ErrorType()


@record(frozen=True, eq=False)
class FnType:
    fn: ast.FnDef
    module: "ModuleInfo"

    def __str__(self) -> str:
        return f"fn {self.fn.name}"


@record(frozen=True, eq=False)
class KernelType:
    kernel: ast.KernelDef

    def __str__(self) -> str:
        return f"kernel {self.kernel.name}"


@record(frozen=True, eq=False)
class ModuleType:
    info: "ModuleInfo"

    def __str__(self) -> str:
        return f"module {self.info.name}"


@record(frozen=True, eq=False)
class BuiltinType:
    builtin: Builtin

    def __str__(self) -> str:
        return f"built-in {self.builtin.name}"


def value(type_, const=None, span: Span | None = None, elements=None, ir=None) -> ArgInfo:
    return ArgInfo(type_, const, span, elements, ir)


def error_value(span: Span | None = None) -> ArgInfo:
    return ArgInfo(ERROR, None, span)


def is_error(v: ArgInfo) -> bool:
    if isinstance(v.type, ErrorType):
        return True
    return bool(v.elements) and any(is_error(e) for e in v.elements)


@record
class Binding:
    """A name in a scope."""

    name: str
    kind: str            # let | var | param | const | loop | fn | kernel | module | import
    value: ArgInfo
    span: Span | None    # where it was declared
    assigned_at: Span | None = None  # the last assignment (for `var`)
    used: bool = False


@record
class ModuleInfo:
    """A checked module: its top-level names."""

    name: str
    path: str
    module: ast.Module
    names: dict[str, Binding] = field(default_factory=dict)
