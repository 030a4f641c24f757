"""The launch contract: the `nvvm.*` attribute set of a kernel, its verifier and the policy that
chooses it (seed 000 "Kernel Attribute Decision", seed 002 "How tileiras chooses each directive").

Flow: `resolve_launch` (launch_attrs.py) checks each user attribute alone; `decide_contract`
adds what the generated code needs (`.reqntid` for exact-thread-count code, `.maxnreg` for
warp-group MMA) and runs `verify_attrs`, the cross-attribute rules of seed 002.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from math import prod
from typing import Mapping

from tilelang.diagnostics import (Diagnostic, InternalCompilerError, Label, Severity, Span,
                                  TileLaunchError, register_codes)
from tilelang.sema.launch_attrs import Dims, LaunchSpec
from tilelang.targets import FEATURES, Target, get_target

register_codes({
    "E0716": "warp-group MMA was requested but the thread shape is not a multiple of 128",
    "E0720": "cluster directives dropped: the target has no thread-block clusters",
    "E0721": "warp-group MMA not usable here: falling back to mma.sync",
    "E0722": ".maxntid not written: ptxas refuses it next to .reqntid",
    "E0723": ".maxclusterrank not written: ptxas refuses it next to .reqnctapercluster",
    "E0799": "internal: inconsistent launch contract input",
})

MAX_CTA_THREADS = 1024
MAX_DIM = (1024, 1024, 64)
PORTABLE_CLUSTER = 8
NONPORTABLE_CLUSTER = 16
DEFAULT_THREADS: Dims = (128, 1, 1)

# `.maxnreg` for warp-group MMA kernels when the user gives none (seed 002: accumulator_regs +
# working_regs + slack). Working registers hold the two SMEM descriptors (2 x 64-bit), loop
# indices, addresses and the epilogue's live values; slack absorbs ptxas's temporaries. The sum is
# rounded up to 8 because ptxas allocates registers per thread in units of 8. An m64n256k16 FP32
# accumulator is 64*256/128 = 128 registers per thread: 128 + 32 + 8 = 168, the seed's figure.
WGMMA_WORKING_REGS = 32
WGMMA_SLACK_REGS = 8


def wgmma_maxnreg(accumulator_regs: int) -> int:
    n = accumulator_regs + WGMMA_WORKING_REGS + WGMMA_SLACK_REGS
    return max(24, min(255, -(-n // 8) * 8))


@dataclass(frozen=True)
class NvvmAttrs:
    """The explicit `nvvm.*` attribute set of one kernel (seed 002's table)."""

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


@dataclass(frozen=True)
class CodegenFeatures:
    """What the generated code relies on, reported by codegen before the contract is fixed."""

    wgmma: bool = False                  # warp-group MMA (wgmma.mma_async) is planned
    warp_specialized: bool = False       # producer/consumer warps split by warp index
    named_barriers: bool = False         # bar.sync with an id and a thread count
    cross_warp_reduction: bool = False   # reductions sized by the warp count
    explicit_wgmma_request: bool = False # the kernel-spec asked for warp-group MMA itself
    threads: Dims | None = None          # block shape codegen chose (when the user gave none)
    accumulator_regs: int = 0            # per-thread accumulator registers of the MMA
    grid_constant: tuple[int, ...] = ()  # 1-based indices of __grid_constant__ parameters

    @property
    def needs_exact_threads(self) -> bool:
        return self.wgmma or self.warp_specialized or self.named_barriers or \
            self.cross_warp_reduction


@dataclass(frozen=True)
class KernelContract:
    name: str
    attrs: NvvmAttrs
    use_wgmma: bool                      # False after a fallback to mma.sync
    nonportable_cluster: bool = False
    spans: Mapping[str, Span] = field(default_factory=dict, hash=False, compare=False)
    diagnostics: tuple[Diagnostic, ...] = ()   # notes/warnings from the decision

    @property
    def threads(self) -> Dims:
        return self.attrs.reqntid or self.attrs.maxntid or DEFAULT_THREADS

    def features(self, target: Target) -> set[str]:
        """Codegen features the contract itself adds (for targets.validate_target)."""
        out = set()
        if self.use_wgmma:
            out.add("wgmma")
        if target.clusters and (self.attrs.cluster_dim or self.attrs.maxclusterrank):
            out.add("cluster")
        if target.clusters and self.attrs.blocksareclusters:
            out.add("blocksareclusters")
        return out


def _pad3(d: Dims) -> Dims:
    return tuple(d) + (1,) * (3 - len(d))


def _err(code: str, msg: str, span: Span | None, label: str | None = None,
         help: str | None = None, related: tuple[Label, ...] = ()) -> Diagnostic:
    return Diagnostic(Severity.ERROR, code, msg, span, label, help, (), related)


def _show(d: Dims) -> str:
    return "(" + ", ".join(map(str, d)) + ")"


def verify_attrs(attrs: NvvmAttrs, spans: Mapping[str, Span] | None = None, *,
                 nonportable_cluster: bool = False, default_span: Span | None = None) -> None:
    """Seed 002's well-formedness rules plus the hardware caps; raises every violation at once.
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


def decide_contract(name: str, spec: LaunchSpec | None, features: CodegenFeatures | None,
                    target: str | Target, *, kernel_span: Span | None = None) -> KernelContract:
    """Choose the kernel's nvvm.* attributes from the user's spec and what codegen needs.

    - `.reqntid` when the generated code relies on the exact thread count (warp-group MMA, warp
      specialization, named barriers, cross-warp reductions sized by the warp count); `.maxntid`
      otherwise, so one cubin serves every smaller launch shape.
    - warp-group MMA with a thread count that is not a multiple of 128: an error when the kernel
      asked for it explicitly, else a fallback to mma.sync with a note.
    - `.maxnreg` for warp-group MMA kernels without a user value: `wgmma_maxnreg(acc)`.
    """
    tgt = target if isinstance(target, Target) else get_target(target, kernel_span)
    spec = spec or LaunchSpec()
    feats = features or CodegenFeatures()
    spans = {_SPAN_KEYS.get(k, k): v for k, v in spec.spans.items()}
    notes: list[Diagnostic] = []
    user_key = "reqntid" if spec.reqntid else "maxntid" if spec.maxntid else None
    shape_span = spans.get(user_key, kernel_span) if user_key else kernel_span

    if spec.reqntid:
        shape = spec.reqntid
        if feats.threads and _pad3(feats.threads) != _pad3(spec.reqntid):
            raise InternalCompilerError.at(
                "E0799", f"codegen chose threads {_show(feats.threads)} but `reqntid` is "
                f"{_show(spec.reqntid)}", shape_span)
    elif feats.threads:
        shape = feats.threads
        if spec.maxntid and any(a > b for a, b in zip(_pad3(shape), _pad3(spec.maxntid))):
            raise InternalCompilerError.at(
                "E0799", f"codegen chose threads {_show(shape)} above `maxntid` "
                f"{_show(spec.maxntid)}", shape_span)
    else:
        shape = spec.maxntid or DEFAULT_THREADS

    use_wgmma = feats.wgmma
    if use_wgmma:
        total = prod(shape)
        reason = None
        if total % 128:
            reason = (f"warp-group MMA needs a multiple of 128 threads per CTA, but the block "
                      f"shape {_show(shape)} has {total}")
        elif tgt.name not in FEATURES["wgmma"].arch_targets:
            need = " or ".join(FEATURES["wgmma"].arch_targets)
            reason = f"warp-group MMA (wgmma) needs {need}, but the target is {tgt.name}"
        if reason and feats.explicit_wgmma_request:
            raise TileLaunchError.at(
                "E0716", reason, shape_span, label="not a whole number of warp groups"
                if total % 128 else None,
                help="use a thread shape whose product is a multiple of 128, e.g. "
                "`reqntid = (128, 1, 1)`" if total % 128 else "compile with `--target sm_90a`")
        if reason:
            use_wgmma = False
            notes.append(Diagnostic(Severity.NOTE, "E0721", reason + "; using mma.sync instead",
                                    shape_span))
    exact = use_wgmma or feats.warp_specialized or feats.named_barriers or \
        feats.cross_warp_reduction

    if spec.reqntid:
        reqntid, maxntid = spec.reqntid, spec.maxntid
    elif exact:
        reqntid, maxntid = _pad3(shape), spec.maxntid
        spans.setdefault("reqntid", shape_span)
    else:
        reqntid, maxntid = None, spec.maxntid or _pad3(shape)
        spans.setdefault("maxntid", shape_span)
    maxnreg = spec.maxnreg
    if maxnreg is None and use_wgmma:
        maxnreg = wgmma_maxnreg(feats.accumulator_regs)
        spans.setdefault("maxnreg", kernel_span)

    attrs = NvvmAttrs(kernel=True, maxntid=maxntid, reqntid=reqntid, minctasm=spec.minctasm,
                      maxnreg=maxnreg, cluster_dim=spec.cluster,
                      maxclusterrank=spec.maxclusterrank,
                      blocksareclusters=spec.blocksareclusters,
                      grid_constant=tuple(feats.grid_constant))
    verify_attrs(attrs, spans, nonportable_cluster=spec.nonportable_cluster,
                 default_span=kernel_span)
    return KernelContract(name, attrs, use_wgmma, spec.nonportable_cluster, spans, tuple(notes))


def with_attrs(contract: KernelContract, **changes) -> KernelContract:
    """A copy with some attributes replaced (re-verified)."""
    attrs = replace(contract.attrs, **changes)
    verify_attrs(attrs, contract.spans, nonportable_cluster=contract.nonportable_cluster)
    return replace(contract, attrs=attrs)
