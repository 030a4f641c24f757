"""The `nvvm.*` attribute model of a kernel and the well-formedness rules of docs/launch.md
("Attributes", "Verifier rules") plus the hardware caps listed there. Pure checks on attribute values: semantic analysis runs them on the user's `@launch`
(`check_spec`), and code generation runs them again on the contract it decides.
"""

from __future__ import annotations

from math import prod
from typing import Mapping

from tilelang.diagnostics import Diagnostic, Label, Severity, Span, TileLaunchError
from tilelang.record import record
from tilelang.sema.launch_attrs import Dims, LaunchSpec

MAX_CTA_THREADS = 1024
MAX_DIM = (1024, 1024, 64)
PORTABLE_CLUSTER = 8
NONPORTABLE_CLUSTER = 16
DEFAULT_THREADS: Dims = (128, 1, 1)

@record(frozen=True)
class NvvmAttrs:
    """The explicit `nvvm.*` attribute set of one kernel (docs/launch.md, "Attributes")."""

    kernel: bool = True
    maxntid: Dims | None = None
    reqntid: Dims | None = None
    minctasm: int | None = None
    maxnreg: int | None = None
    cluster_dim: Dims | None = None
    maxclusterrank: int | None = None
    blocksareclusters: bool = False
    grid_constant: tuple[int, ...] = ()      # 1-based parameter indices

    def lines(self) -> list[str]:
        out = ["nvvm.kernel"] if self.kernel else []
        for name in ("maxntid", "reqntid", "minctasm", "maxnreg", "cluster_dim",
                     "maxclusterrank", "blocksareclusters", "grid_constant"):
            v = getattr(self, name)
            if v is None or v is False or v == ():
                continue
            if v is True:
                out.append(f"nvvm.{name}")
            elif isinstance(v, tuple):
                out.append(f"nvvm.{name} = [{', '.join(map(str, v))}]")
            else:
                out.append(f"nvvm.{name} = {v}")
        return out

    def format(self) -> str:
        return "\n".join(self.lines())

    def __str__(self) -> str:
        return "{" + ", ".join(self.lines()) + "}"


def _pad3(d: Dims) -> Dims:
    return tuple(d) + (1,) * (3 - len(d))


def _err(code: str, msg: str, span: Span | None, label: str | None = None,
         help: str | None = None, related: tuple[Label, ...] = ()) -> Diagnostic:
    return Diagnostic(Severity.ERROR, code, msg, span, label, help, (), related)


def _show(d: Dims) -> str:
    return "(" + ", ".join(map(str, d)) + ")"


def verify_attrs(attrs: NvvmAttrs, spans: Mapping[str, Span] | None = None, *,
                 nonportable_cluster: bool = False, default_span: Span | None = None) -> None:
    """The verifier rules of docs/launch.md plus the hardware caps; raises every violation at once.
    `spans` is keyed by NvvmAttrs field name."""
    spans = spans or {}
    sp = lambda k: spans.get(k, default_span)  # noqa: E731
    diags: list[Diagnostic] = []
    for name in ("maxntid", "reqntid"):
        d = getattr(attrs, name)
        if d is None:
            continue
        if not 1 <= len(d) <= 3 or min(d) < 1:
            diags.append(_err("E0703", f"`{name}` needs 1 to 3 positive integers, found "
                              f"{_show(d)}", sp(name), label="not a thread shape"))
            continue
        p = _pad3(d)
        over = [f"{'xyz'[i]} = {p[i]} > {MAX_DIM[i]}" for i in range(3) if p[i] > MAX_DIM[i]]
        if over or prod(p) > MAX_CTA_THREADS:
            why = ", ".join(over) if over else f"{prod(p)} threads > {MAX_CTA_THREADS}"
            diags.append(_err("E0705", f"`{name} = {_show(d)}` exceeds the CTA limits ({why})",
                              sp(name), label="too many threads for one CTA",
                              help="a CTA holds at most 1024 threads, with x, y <= 1024 and "
                              "z <= 64"))
    if attrs.maxntid and attrs.reqntid and not diags:
        mx, rq = _pad3(attrs.maxntid), _pad3(attrs.reqntid)
        bad = [i for i in range(3) if rq[i] > mx[i]]
        if bad:
            i = bad[0]
            rel = (Label(sp("maxntid"), "upper bound given here"),) if sp("maxntid") else ()
            diags.append(_err("E0706", f"`reqntid` {'xyz'[i]} = {rq[i]} exceeds `maxntid` "
                              f"{'xyz'[i]} = {mx[i]}", sp("reqntid"), label="larger than maxntid",
                              help="the exact shape must fit inside the upper bound", related=rel))
    limit = NONPORTABLE_CLUSTER if nonportable_cluster else PORTABLE_CLUSTER
    hint = ("at most 16 CTAs per cluster" if nonportable_cluster else
            "at most 8 CTAs per cluster are portable; add `nonportable_cluster` for up to 16")
    size = None
    if attrs.cluster_dim is not None:
        c = attrs.cluster_dim
        if len(c) != 3 or min(c) < 1:
            diags.append(_err("E0704", f"`cluster` needs exactly 3 positive integers, found "
                              f"{_show(c)}", sp("cluster_dim"), label="not a 3-D cluster shape"))
        else:
            size = prod(c)
            if size > limit:
                diags.append(_err("E0708", f"`cluster = {_show(c)}` has {size} CTAs, more than "
                                  f"{limit}", sp("cluster_dim"), label="cluster too large",
                                  help=hint))
    if attrs.maxclusterrank is not None:
        r = attrs.maxclusterrank
        if not 1 <= r <= limit:
            diags.append(_err("E0708" if r > limit else "E0709",
                              f"`maxclusterrank = {r}` is outside 1..{limit}",
                              sp("maxclusterrank"), label="out of range", help=hint))
        elif size is not None and r < size:
            rel = (Label(sp("cluster_dim"), f"a cluster of {size} CTAs"),) \
                if sp("cluster_dim") else ()
            diags.append(_err("E0709", f"`maxclusterrank = {r}` is smaller than the cluster "
                              f"size {size}", sp("maxclusterrank"), label="below the cluster size",
                              help=f"use `maxclusterrank = {size}` or more, or drop it",
                              related=rel))
    if attrs.blocksareclusters:
        missing = [k for k, v in (("reqntid", attrs.reqntid), ("cluster", attrs.cluster_dim))
                   if v is None]
        if missing:
            diags.append(_err("E0707", "`blocksareclusters` needs " +
                              " and ".join(f"`{m}`" for m in missing),
                              sp("blocksareclusters"), label="missing " + " and ".join(missing),
                              help="give the exact block shape (`reqntid`) and the cluster "
                              "shape (`cluster`) with it"))
    if attrs.minctasm is not None and not 1 <= attrs.minctasm <= 32:
        diags.append(_err("E0710", f"`minctasm` must be between 1 and 32, found "
                          f"{attrs.minctasm}", sp("minctasm"), label="out of range"))
    if attrs.maxnreg is not None and not 24 <= attrs.maxnreg <= 255:
        diags.append(_err("E0711", f"`maxnreg` must be between 24 and 255, found "
                          f"{attrs.maxnreg}", sp("maxnreg"), label="out of range"))
    if diags:
        raise TileLaunchError(diags)



_SPAN_KEYS = {"cluster": "cluster_dim"}


def check_spec(spec: LaunchSpec, kernel_span: Span | None = None) -> None:
    """Verify the user's attributes together, before any code is generated."""
    attrs = NvvmAttrs(kernel=True, maxntid=spec.maxntid, reqntid=spec.reqntid,
                      minctasm=spec.minctasm, maxnreg=spec.maxnreg, cluster_dim=spec.cluster,
                      maxclusterrank=spec.maxclusterrank,
                      blocksareclusters=spec.blocksareclusters)
    spans = {_SPAN_KEYS.get(k, k): v for k, v in spec.spans.items()}
    verify_attrs(attrs, spans, nonportable_cluster=spec.nonportable_cluster,
                 default_span=kernel_span)
