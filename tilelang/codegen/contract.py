"""The launch contract: the `nvvm.*` attribute set of a kernel, its verifier and the policy that
chooses it (docs/launch.md, "Decision policy" and "Emission").

Flow: `resolve_launch` (launch_attrs.py) checks each user attribute alone; `decide_contract`
adds what the generated code needs (`.reqntid` for exact-thread-count code, `.maxnreg` for
warp-group MMA) and runs `verify_attrs`, the cross-attribute rules of docs/launch.md ("Verifier rules").
"""

from __future__ import annotations

from math import prod
from typing import Mapping

from tilelang.diagnostics import (Diagnostic, InternalCompilerError, Label, Severity, Span,
                                  TileLaunchError, register_codes)
from tilelang.sema.launch_attrs import Dims, LaunchSpec
from tilelang.sema.launch_verify import (DEFAULT_THREADS, MAX_CTA_THREADS, MAX_DIM,  # noqa: F401
                                         NONPORTABLE_CLUSTER, PORTABLE_CLUSTER, NvvmAttrs,
                                         _pad3, _show, _SPAN_KEYS, verify_attrs)
from tilelang.targets import FEATURES, Target
from tilelang.record import field, record, replace

register_codes({
    "E0716": "warp-group MMA was requested but the thread shape is not a multiple of 128",
    "E0720": "cluster directives dropped: the target has no thread-block clusters",
    "E0721": "warp-group MMA not usable here: falling back to mma.sync",
    "E0722": ".maxntid not written: ptxas refuses it next to .reqntid",
    "E0723": ".maxclusterrank not written: ptxas refuses it next to .reqnctapercluster",
    "E0724": "the kernel's tcgen05 accumulators need more tensor memory than an SM has",
    "W0728": "CTAs resident together on an SM wait for each other's tensor memory",
    "E0729": "tcgen05 not usable here: falling back to mma.sync",
    "E0799": "internal: inconsistent launch contract input",
})

# Tensor memory (sm_100a): 128 lanes x 512 columns of 32-bit cells per SM, shared by the CTAs
# resident on it; `tcgen05.alloc` takes a power of two of 32 to 512 columns (docs/launch.md,
# "tcgen05").
TMEM_COLUMNS = 512

# `.maxnreg` for warp-group MMA kernels when the user gives none (docs/launch.md: accumulator_regs +
# working_regs + slack). Working registers hold the two SMEM descriptors (2 x 64-bit), loop
# indices, addresses and the epilogue's live values; slack absorbs ptxas's temporaries. The sum is
# rounded up to 8 because ptxas allocates registers per thread in units of 8. An m64n256k16 FP32
# accumulator is 64*256/128 = 128 registers per thread: 128 + 32 + 8 = 168, the worked Hopper GEMM's figure in docs/launch.md.
WGMMA_WORKING_REGS = 32
WGMMA_SLACK_REGS = 8


def wgmma_maxnreg(accumulator_regs: int) -> int:
    n = accumulator_regs + WGMMA_WORKING_REGS + WGMMA_SLACK_REGS
    return max(24, min(255, -(-n // 8) * 8))


@record(frozen=True)
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
    tmem_columns: int = 0                # tensor-memory columns of its tcgen05 products
    tc5_pair: bool = False               # tcgen05 on the cluster's CTA pair (cta_group::2)
    tc5_declined: bool = False           # a product fits tcgen05 but for the thread count

    @property
    def needs_exact_threads(self) -> bool:
        return self.wgmma or self.warp_specialized or self.named_barriers or \
            self.cross_warp_reduction


@record(frozen=True)
class KernelContract:
    name: str
    attrs: NvvmAttrs
    use_wgmma: bool                      # False after a fallback to mma.sync
    nonportable_cluster: bool = False
    spans: Mapping[str, Span] = field(default_factory=dict, hash=False, compare=False)
    diagnostics: tuple[Diagnostic, ...] = ()   # notes/warnings from the decision
    # `.maxnreg` is the policy's `wgmma_maxnreg`, not the user's: the link may drop it where
    # it spills and the kernel without it does not (codegen/target/register_fit.py)
    default_maxnreg: bool = False

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




def decide_contract(name: str, spec: LaunchSpec | None, features: CodegenFeatures | None,
                    target: Target, *, kernel_span: Span | None = None) -> KernelContract:
    """Choose the kernel's nvvm.* attributes from the user's spec and what codegen needs.

    - `.reqntid` when the generated code relies on the exact thread count (warp-group MMA, warp
      specialization, named barriers, cross-warp reductions sized by the warp count); `.maxntid`
      otherwise, so one cubin serves every smaller launch shape.
    - warp-group MMA with a thread count that is not a multiple of 128: an error when the kernel
      asked for it explicitly, else a fallback to mma.sync with a note.
    - `.maxnreg` for warp-group MMA kernels without a user value: `wgmma_maxnreg(acc)`
      (`default_maxnreg`: the link drops it where it spills and no cap does not).
    """
    tgt = target
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
    default_maxnreg = maxnreg is None and use_wgmma
    if default_maxnreg:
        maxnreg = wgmma_maxnreg(feats.accumulator_regs)
        spans.setdefault("maxnreg", kernel_span)

    if feats.tmem_columns:
        notes += _tcgen05_rules(feats, spec, reqntid, spans, kernel_span)
    if feats.tc5_declined:
        notes.append(Diagnostic(
            Severity.NOTE, "E0729", f"tcgen05 needs a block of 128 threads (four warps, one "
            f"for each quarter of tensor memory's lanes) or 192 (and a producer and an MMA "
            f"warp), but the block shape {_show(shape)} has {prod(shape)}; using mma.sync "
            f"instead", shape_span))

    attrs = NvvmAttrs(kernel=True, maxntid=maxntid, reqntid=reqntid, minctasm=spec.minctasm,
                      maxnreg=maxnreg, cluster_dim=spec.cluster,
                      maxclusterrank=spec.maxclusterrank,
                      blocksareclusters=spec.blocksareclusters,
                      grid_constant=tuple(feats.grid_constant))
    verify_attrs(attrs, spans, nonportable_cluster=spec.nonportable_cluster,
                 default_span=kernel_span)
    return KernelContract(name, attrs, use_wgmma, spec.nonportable_cluster, spans, tuple(notes),
                          default_maxnreg)


def _tcgen05_rules(feats: CodegenFeatures, spec: LaunchSpec, reqntid, spans,
                   kernel_span) -> list[Diagnostic]:
    """The launch contract of tcgen05 code (docs/launch.md, "tcgen05"): its epilogue warps
    reach TMEM's lane quarters by warp index, so the thread count is exact (`.reqntid`: 128,
    or 192 with a producer and an MMA warp); a CTA pair's products need the cluster of two
    along x (M) that `.reqnctapercluster` declares; the accumulators' columns fit the 512 of
    an SM, and CTAs kept resident together share them."""
    cols = feats.tmem_columns
    if cols > TMEM_COLUMNS or cols < 32 or cols & (cols - 1):
        raise TileLaunchError.at(
            "E0724", f"the kernel's tcgen05 accumulators need {cols} tensor-memory columns; an "
            f"allocation is a power of two from 32 to the {TMEM_COLUMNS} columns of an SM",
            kernel_span, help="use a narrower tile (N) for the product, or split it")
    if reqntid is None or prod(reqntid) not in (128, 192):    # plan/tensor_cores.py R4
        raise InternalCompilerError.at(
            "E0799", f"tcgen05 code with threads {_show(reqntid) if reqntid else 'not fixed'} "
            f"(it needs `.reqntid` 128 or 192)", kernel_span)
    if feats.tc5_pair and _pad3(spec.cluster or (1,)) != (2, 1, 1):
        raise InternalCompilerError.at(
            "E0799", f"a CTA pair's tcgen05 code with cluster {_show(spec.cluster or (1,))} "
            f"(it needs (2, 1, 1))", kernel_span)
    out = []
    if spec.minctasm and spec.minctasm * cols > TMEM_COLUMNS:
        out.append(Diagnostic(
            Severity.WARNING, "W0728", f"`minctasm = {spec.minctasm}` keeps {spec.minctasm} "
            f"CTAs on an SM, but each allocates {cols} of its {TMEM_COLUMNS} tensor-memory "
            f"columns: the later ones wait in tcgen05.alloc until an earlier one ends",
            spans.get("minctasm", kernel_span)))
    return out


def with_attrs(contract: KernelContract, **changes) -> KernelContract:
    """A copy with some attributes replaced (re-verified)."""
    attrs = replace(contract.attrs, **changes)
    verify_attrs(attrs, contract.spans, nonportable_cluster=contract.nonportable_cluster)
    return replace(contract, attrs=attrs)
