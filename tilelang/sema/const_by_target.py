"""Kernel `const` parameter defaults chosen per target (docs/language.md, "Per-target
defaults"): `const BN: i32 = by_target(sm_90a = 256, default = 128)`.

The rule is `@launch`'s (sema/launch_attrs.py): the target's own entry, else `default`, else
the parameter has no default on that target (a launch or `-D` must give it). Every entry is
type-checked on every target (the checker evaluates them all), so a mistake in the `sm_90a`
entry shows when compiling for sm_80 too. The choice is a typed record the checker keeps per
kernel; `--emit plan` prints it.
"""

from __future__ import annotations

from tilelang.diagnostics import TileSemanticError
from tilelang.frontend import ast
from tilelang.record import record
from tilelang.targets import TARGETS

from . import launch_attrs  # noqa: F401  (registers E0714 and E0725, shared with @launch)


@record(frozen=True)
class ConstChoice:
    """`const name` took `value` from the `entry` ("sm_90a" or "default") of its by_target."""

    name: str
    entry: str
    value: object

    def show(self) -> str:
        return f"{self.name} = {self.value} (by_target: {self.entry})"


def is_by_target(e: ast.Expr | None) -> bool:
    return isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id == "by_target"


def entries(call: ast.Call, what: str) -> dict[str, ast.Arg]:
    """The keyword entries of a `by_target(...)` written as `what`'s value, each checked:
    keywords only (the parser refuses one given twice), known target names or
    `default`, at least one."""
    out: dict[str, ast.Arg] = {}
    for a in call.args:
        if a.name is None:
            raise TileSemanticError.at(
                "E0250", "`by_target` takes keyword arguments: `sm_90a = 256, default = 128`",
                a.span)
        if a.name != "default" and a.name not in TARGETS:
            raise TileSemanticError.at(
                "E0725", f"`by_target` names unknown target `{a.name}`", a.span,
                label="not a target", help="targets: " + ", ".join(TARGETS))
        out[a.name] = a
    if not out:
        raise TileSemanticError.at(
            "E0714", f"`by_target` gives {what} no value", call.span, label="no entries",
            help="write `by_target(sm_90a = ..., default = ...)`, or leave the default out")
    return out


def chosen_entry(found: dict[str, ast.Arg], target: str) -> str | None:
    """The entry a target takes: its own, else `default`, else none."""
    if target in found:
        return target
    return "default" if "default" in found else None
