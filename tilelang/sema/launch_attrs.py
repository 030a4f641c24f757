"""`@launch(...)` attributes as the parser hands them over, and their per-target resolution.

The parser builds a mapping `key -> AttrValue(value, span)`; a value is an int, a tuple of ints,
`True` for a flag, a string (`precision = "ieee"`), or a `ByTarget` choosing a value per target
(docs/launch.md, "Attributes"): the target's own entry, else `default`, else the attribute is not
set on that target (as cuTile's `ByTarget` without a default). This module resolves `by_target`, checks each value's kind and range, and returns a `LaunchSpec` that keeps
every attribute's span so later rules (contract.py) can point at the right place.
"""

from __future__ import annotations

from typing import Mapping, Union

from tilelang.diagnostics import (Diagnostic, Label, Severity, Span, TileLaunchError,
                                  TileSemanticError, register_codes)
from tilelang.frontend import ast
from tilelang.record import field, record
from tilelang.targets import TARGETS, Target

register_codes({
    "E0701": "unknown @launch attribute",
    "E0702": "@launch attribute value has the wrong kind",
    "E0703": "thread-shape attribute needs 1 to 3 positive integers",
    "E0704": "cluster needs exactly 3 positive integers",
    "E0705": "block shape exceeds the CTA thread limits",
    "E0706": "reqntid exceeds maxntid",
    "E0707": "blocksareclusters needs reqntid and cluster",
    "E0708": "cluster has too many CTAs",
    "E0709": "maxclusterrank is out of range or below the cluster size",
    "E0710": "minctasm (occupancy) is out of range 1-32",
    "E0711": "maxnreg is out of range 24-255",
    "E0712": "num_ctas is not a power of two from 1 to 16",
    "E0713": "@launch attribute given twice",
    "E0714": "by_target gives no value at all",
    "E0715": "opt_level is out of range 0-3",
    "E0725": "by_target names an unknown target",
    "E0726": "num_stages is out of range 1-8",
    "E0727": "precision is not \"ieee\", \"fast\" or \"approx\"",
})


@record(frozen=True)
class ByTarget:
    """`by_target(sm_90a = 168, default = 128)`: values are raw or `AttrValue`s."""

    values: Mapping[str, object] = field(hash=False)
    span: Span | None = None


@record(frozen=True)
class AttrValue:
    value: Union[int, tuple, bool, ByTarget]
    span: Span | None = None


Dims = tuple[int, ...]

# key -> kind: "dims" (1-3 ints), "dims3" (exactly 3), "int", "flag"
KINDS: dict[str, str] = {
    "maxntid": "dims", "reqntid": "dims", "minctasm": "int", "maxnreg": "int",
    "cluster": "dims3", "num_ctas": "int", "maxclusterrank": "int",
    "blocksareclusters": "flag", "nonportable_cluster": "flag", "opt_level": "int",
    "num_stages": "int", "precision": "choice",
}
# the values a "choice" key takes (sema/builtins_math.PRECISIONS; repeated here because the
# launch attributes are resolved without the built-in registry)
CHOICES: dict[str, tuple[str, ...]] = {"precision": ("ieee", "fast", "approx")}
ALIASES = {"occupancy": "minctasm"}

_KIND_TEXT = {"dims": "an integer or a tuple of 1 to 3 integers", "dims3": "a tuple of 3 integers",
              "int": "an integer", "flag": "a flag (write the key alone)",
              "choice": "a string"}


@record(frozen=True)
class LaunchSpec:
    """The user's verified-in-isolation launch attributes for one target (None: not given).
    Cross-attribute rules live in contract.verify_attrs."""

    maxntid: Dims | None = None
    reqntid: Dims | None = None
    minctasm: int | None = None
    maxnreg: int | None = None
    cluster: Dims | None = None          # num_ctas=n arrives here as (n, 1, 1)
    maxclusterrank: int | None = None
    blocksareclusters: bool = False
    nonportable_cluster: bool = False
    opt_level: int | None = None
    num_stages: int | None = None        # depth of the pipelined cp.async ring (codegen)
    precision: str | None = None         # "ieee" | "fast" | "approx" (docs/numerics.md)
    spans: Mapping[str, Span] = field(default_factory=dict, hash=False, compare=False)

    def span(self, key: str) -> Span | None:
        return self.spans.get(key)


def _err(code: str, message: str, span: Span | None, label: str | None = None,
         help: str | None = None, related: tuple[Label, ...] = ()) -> Diagnostic:
    return Diagnostic(Severity.ERROR, code, message, span, label, help, (), related)


def _describe(value: object) -> str:
    if value is True:
        return "a flag"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, int):
        return f"the integer {value}"
    if isinstance(value, tuple):
        return f"a tuple of {len(value)}"
    if isinstance(value, str):
        return f'the string "{value}"'
    return f"`{value!r}`"


def _resolve(key: str, av: AttrValue, target: Target, diags: list) -> tuple[object, Span | None]:
    """Pick the value of a `by_target` for the target ("default" otherwise; _MISSING when
    neither is given: the attribute is not set for this target)."""
    value, span = av.value, av.span
    if not isinstance(value, ByTarget):
        return value, span
    bt = value
    for name, v in bt.values.items():
        if name != "default" and name not in TARGETS:
            where = (v.span if isinstance(v, AttrValue) else None) or bt.span or span
            diags.append(_err("E0725", f"`by_target` names unknown target `{name}`", where,
                              label="not a target", help="targets: " + ", ".join(TARGETS)))
    if not bt.values:
        diags.append(_err("E0714", f"`by_target` gives `{key}` no value", bt.span or span,
                          label="no entries",
                          help=f"write `{key} = by_target({target.name} = ..., default = ...)`, "
                               f"or leave `{key}` out"))
        return _MISSING, span
    # a target neither named nor covered by `default` leaves the attribute unset there
    chosen = bt.values.get(target.name, bt.values.get("default", _MISSING))
    if chosen is _MISSING:
        return _MISSING, span
    if isinstance(chosen, AttrValue):
        return chosen.value, chosen.span or bt.span or span
    return chosen, bt.span or span


_MISSING = object()


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def resolve_launch(attrs: Mapping[str, AttrValue], target: Target, *,
                   launch_span: Span | None = None) -> LaunchSpec:
    """Resolve and check a kernel's `@launch` attributes for `target` (the compile's resolved
    target record, tilelang/options.py).

    Raises TileLaunchError carrying every problem found (unknown keys, wrong kinds, ranges).
    """
    tgt = target
    diags: list[Diagnostic] = []
    vals: dict[str, object] = {}
    spans: dict[str, Span] = {}
    seen_from: dict[str, tuple[str, Span | None]] = {}
    for raw_key, av in attrs.items():
        if not isinstance(av, AttrValue):
            av = AttrValue(av, launch_span)
        key = ALIASES.get(raw_key, raw_key)
        if key not in KINDS:
            diags.append(_err("E0701", f"unknown @launch attribute `{raw_key}`",
                              av.span or launch_span, label="unknown key",
                              help="known keys: " + ", ".join([*KINDS, *ALIASES])))
            continue
        canon = "cluster" if key == "num_ctas" else key
        if canon in seen_from:
            first_key, first_span = seen_from[canon]
            rel = (Label(first_span, f"`{first_key}` given here"),) if first_span else ()
            diags.append(_err("E0713", f"`{raw_key}` repeats `{first_key}`", av.span,
                              label="given twice", help="keep only one of them", related=rel))
            continue
        seen_from[canon] = (raw_key, av.span)
        value, span = _resolve(key, av, tgt, diags)
        if value is _MISSING:
            continue
        checked = _check_kind(key, raw_key, value, span, diags)
        if checked is not None:
            vals[key], spans[key] = checked, span or launch_span
    if diags:
        raise TileLaunchError(diags)
    cluster = vals.get("cluster")
    if "num_ctas" in vals:
        cluster = (vals["num_ctas"], 1, 1)
        spans["cluster"] = spans["num_ctas"]
    return LaunchSpec(
        maxntid=vals.get("maxntid"), reqntid=vals.get("reqntid"),
        minctasm=vals.get("minctasm"), maxnreg=vals.get("maxnreg"), cluster=cluster,
        maxclusterrank=vals.get("maxclusterrank"),
        blocksareclusters=bool(vals.get("blocksareclusters")),
        nonportable_cluster=bool(vals.get("nonportable_cluster")),
        opt_level=vals.get("opt_level"), num_stages=vals.get("num_stages"),
        precision=vals.get("precision"), spans=spans)


def _check_kind(key: str, shown: str, value: object, span: Span | None, diags: list):
    """Return the normalized value, or None after recording a diagnostic."""
    kind = KINDS[key]
    if not isinstance(value, (int, tuple, ByTarget)) and isinstance(getattr(value, "value", None),
                                                                     str):
        value = value.value          # a string constant (sema's ConstStr)
    wrong = _err("E0702", f"`{shown}` expects {_KIND_TEXT[kind]}, found {_describe(value)}",
                 span, label="wrong kind of value")
    if kind == "flag":
        if value is True:
            return True
        diags.append(wrong)
        return None
    if kind == "choice":
        if not isinstance(value, str):
            diags.append(wrong)
            return None
        if value not in CHOICES[key]:
            shown_choices = ", ".join(f'"{c}"' for c in CHOICES[key])
            diags.append(_err("E0727", f'`{shown}` must be one of {shown_choices}, found '
                              f'"{value}"', span, label="not a precision mode",
                              help='"ieee": exact to the documented bounds; "fast" (the '
                                   'default): exp, exp2, sigmoid, rsqrt and `/` approximated; '
                                   '"approx": also log, log2, sin, cos and tanh'))
            return None
        return value
    if kind == "int":
        if not _is_int(value):
            diags.append(wrong)
            return None
        return _check_range(key, shown, value, span, diags)
    # dimensional
    dims = (value,) if _is_int(value) and kind == "dims" else value
    if not isinstance(dims, tuple) or not all(_is_int(d) for d in dims):
        diags.append(wrong)
        return None
    if kind == "dims3":
        if len(dims) != 3 or min(dims) < 1:
            diags.append(_err("E0704", f"`{shown}` needs exactly 3 positive integers, "
                              f"found {_show_dims(dims)}", span, label="not a 3-D cluster shape",
                              help="write it as `(x, y, z)`, e.g. `cluster = (2, 1, 1)`, "
                              "or use `num_ctas = n`"))
            return None
        return dims
    if not 1 <= len(dims) <= 3 or min(dims) < 1:
        diags.append(_err("E0703", f"`{shown}` needs 1 to 3 positive integers, found "
                          f"{_show_dims(dims)}", span, label="not a thread shape",
                          help="write `(x,)`, `(x, y)` or `(x, y, z)` with every axis >= 1"))
        return None
    return dims


_RANGES = {
    "minctasm": (1, 32, "E0710", "at least 1 and at most 32 CTAs per SM"),
    "maxnreg": (24, 255, "E0711", "ptxas accepts 24 to 255 registers per thread"),
    "opt_level": (0, 3, "E0715", "choose 0, 1, 2 or 3"),
    "num_stages": (1, 8, "E0726", "1 turns pipelining off; 2-4 are the usual depths"),
    "maxclusterrank": (1, 16, "E0709", "a cluster holds 1 to 16 CTAs (over 8 is non-portable)"),
}


def _check_range(key: str, shown: str, value: int, span: Span | None, diags: list):
    if key == "num_ctas":
        if not (1 <= value <= 16 and value & (value - 1) == 0):
            diags.append(_err("E0712", f"`{shown}` must be a power of two from 1 to 16, "
                              f"found {value}", span, label="not 1, 2, 4, 8 or 16",
                              help="use `cluster = (x, y, z)` for other cluster shapes"))
            return None
        return value
    lo, hi, code, why = _RANGES[key]
    if not lo <= value <= hi:
        diags.append(_err(code, f"`{shown}` must be between {lo} and {hi}, found {value}",
                          span, label="out of range", help=why))
        return None
    return value


def _show_dims(dims: tuple) -> str:
    if not dims:
        return "()"
    return "(" + ", ".join(str(d) for d in dims) + ("," if len(dims) == 1 else "") + ")"


# ---------------------------------------------------------------------------------------------
# Kernel `const` parameter defaults chosen per target (docs/language.md, "Per-target defaults"):
# `const BN: i32 = by_target(sm_90a = 256, default = 128)`, by @launch's rule: the target's own
# entry, else `default`, else the parameter has no default on that target (a launch or `-D` must
# give it). Every entry is type-checked on every target (the checker evaluates them all), so a
# mistake in the `sm_90a` entry shows when compiling for sm_80 too. The choice is a typed record
# the checker keeps per kernel; `--emit plan` prints it.


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
