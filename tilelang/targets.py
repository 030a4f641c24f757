"""The compilation targets Tile supports, and the checks that must run before any LLVM call.

Some LLVM NVPTX errors abort the whole process (for example `setmaxnreg` on plain sm_90, or
`.blocksareclusters` below PTX 9.0), so every target/feature combination is validated here and
turned into a diagnostic first. The PTX ISA minimums below were measured against nvJitLink 13.5
("PTX .version 7.7 does not support .target sm_89") and agree with LLVM 22's NVPTX.td `Proc`
table (sm_80 PTX70, sm_86 PTX71, sm_89 PTX78, sm_90 PTX78, sm_90a PTX80, sm_100a PTX86,
sm_120 PTX87, sm_120a PTX87).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Iterable, NamedTuple

from tilelang.diagnostics import Span, TileLaunchError, TileUsageError, register_codes

PtxVersion = tuple[int, int]

register_codes({
    "E0750": "unknown compilation target",
    "E0751": "feature needs an arch-specific (`a`) target",
    "E0752": "feature needs a newer SM than the target",
    "E0753": "required PTX ISA version is newer than the toolchain supports",
    "E0754": "unknown codegen feature name",
    "E0755": "requested PTX ISA version is below what the target and features need",
})


# NamedTuples, not frozen dataclasses: `tilec check` imports this module, and a frozen
# dataclass costs ~1.5 ms of CPU to create against ~0.2 ms for a NamedTuple.
class Target(NamedTuple):
    name: str                 # what the user writes: "sm_90a"
    sm: int                   # 90
    arch_specific: bool       # has the `a` suffix: may use wgmma/setmaxnreg/tcgen05
    min_ptx: PtxVersion       # lowest PTX ISA that accepts `.target <name>`
    llvm_cpu: str             # the LLVM NVPTX processor name
    clusters: bool            # thread-block clusters exist (SM90+)

    @property
    def base_name(self) -> str:
        """The portable spelling (`sm_90` for `sm_90a`)."""
        return f"sm_{self.sm}"

    def llvm_features(self, ptx: PtxVersion) -> str:
        return f"+ptx{ptx[0]}{ptx[1]}"


TARGETS: dict[str, Target] = {t.name: t for t in (
    Target("sm_80", 80, False, (7, 0), "sm_80", False),
    Target("sm_86", 86, False, (7, 1), "sm_86", False),
    Target("sm_89", 89, False, (7, 8), "sm_89", False),
    Target("sm_90", 90, False, (7, 8), "sm_90", True),
    Target("sm_90a", 90, True, (8, 0), "sm_90a", True),
    Target("sm_100a", 100, True, (8, 6), "sm_100a", True),
    Target("sm_120", 120, False, (8, 7), "sm_120", True),
    Target("sm_120a", 120, True, (8, 7), "sm_120a", True),
)}

# The `a` targets' portable twins, used for `.target` when no arch-specific instruction is used.
_PORTABLE_MIN_PTX: dict[str, PtxVersion] = {"sm_90": (7, 8), "sm_100": (8, 6),
                                             "sm_120": (8, 7)}


class Feature(NamedTuple):
    """A codegen feature with its target gate. `arch_targets` non-empty means arch-specific:
    only those exact `a` targets accept it."""

    name: str
    min_sm: int
    min_ptx: PtxVersion
    arch_targets: tuple[str, ...] = ()


FEATURES: dict[str, Feature] = {f.name: f for f in (
    Feature("mma_sync", 80, (7, 0)),
    Feature("mma_f8", 89, (8, 4)),      # mma.sync with .e4m3/.e5m2 operands
    Feature("cp_async", 80, (7, 0)),
    Feature("cluster", 90, (7, 8)),
    Feature("griddepcontrol", 90, (7, 8)),
    Feature("tma", 90, (8, 0)),
    Feature("blocksareclusters", 90, (9, 0)),
    Feature("wgmma", 90, (8, 0), ("sm_90a",)),
    # setmaxnreg: sm_90a, sm_100a and sm_120a (PTX ISA, "setmaxnreg": target notes); sm_120a
    # has TMA (not arch-specific) but neither wgmma nor tcgen05
    Feature("setmaxnreg", 90, (8, 0), ("sm_90a", "sm_100a", "sm_120a")),
    Feature("tcgen05", 100, (8, 6), ("sm_100a",)),
    # tcgen05.mma .kind::mxf4 / .kind::mxf4nvf4 with .scale_vec::2X/4X (packed FP4): PTX ISA 8.7
    Feature("tcgen05_mxf4", 100, (8, 7), ("sm_100a",)),
    # cvt of e2m1x2/e2m3x2/e3m2x2/ue8m0x2 (PTX ISA: sm_100a, sm_101a and sm_120a)
    Feature("mx_cvt", 100, (8, 6), ("sm_100a", "sm_120a")),
    # mma.sync.aligned.m16n8k32...kind::mxf8f6f4.block_scale (PTX ISA 8.7, sm_120a only)
    Feature("mma_block_scale", 120, (8, 7), ("sm_120a",)),
    # NVSHMEM's device library (codegen/target/nvshmem_bitcode.py): its bitcode is built for
    # PTX 8.8 (`"target-features"="+ptx88"` of NVSHMEM 3.8) and its inline PTX needs 8.6
    Feature("nvshmem", 70, (8, 8)),
    Feature("multimem", 90, (8, 1)),    # multimem.st / multimem.ld_reduce (NVLink SHARP)
)}

# LLVM 22 knows +ptx up to 90 (`+ptx91` is "not a recognized feature").
LLVM_MAX_PTX: PtxVersion = (9, 0)

# CUDA release -> newest PTX ISA its ptxas (and so nvJitLink) accepts, from the PTX release notes.
_CUDA_TO_PTX: dict[tuple[int, int], PtxVersion] = {
    (12, 0): (8, 0), (12, 1): (8, 1), (12, 2): (8, 2), (12, 3): (8, 3), (12, 4): (8, 4),
    (12, 5): (8, 5), (12, 6): (8, 5), (12, 7): (8, 6), (12, 8): (8, 7), (12, 9): (8, 8),
}


def ptx_for_cuda(major: int, minor: int) -> PtxVersion:
    """Newest PTX ISA of a CUDA release: 13.x -> 9.x (nvJitLink 13.5 measured: 9.5)."""
    if major >= 13:
        return (9, minor)
    return _CUDA_TO_PTX.get((major, minor), (8, 0) if major == 12 else (7, 0))


@lru_cache(maxsize=1)
def linker_max_ptx() -> PtxVersion:
    """Newest PTX ISA the installed nvJitLink accepts (nvJitLink 13.5 -> 9.5)."""
    # The library is loaded here once per process and the link reuses it (tilelang/nvjitlink.py)
    from tilelang import nvjitlink
    try:
        major, minor = nvjitlink.version()
    except nvjitlink.NvJitLinkUnavailable:  # be conservative; a link reports the real problem
        return LLVM_MAX_PTX
    return ptx_for_cuda(major, minor)


def fmt_ptx(v: PtxVersion) -> str:
    return f"{v[0]}.{v[1]}"


def get_target(name: str, span: Span | None = None) -> Target:
    target = TARGETS.get(name)
    if target is None:
        raise TileUsageError.at(
            "E0750", f"unknown target `{name}`", span, label="not a supported target",
            help="supported targets: " + ", ".join(TARGETS))
    return target


class PtxPlan(NamedTuple):
    """Everything LLVM and the header writer need, decided before LLVM runs."""

    target: Target
    ptx_target: str          # what `.target` says: `sm_90a` only when `a` instructions are used
    version: PtxVersion      # `.version`: the lowest ISA the `.target` and features need
    llvm_cpu: str
    llvm_features: str


def validate_target(name: str | Target, features: Iterable[str] = (), *,
                    span: Span | None = None, max_ptx: PtxVersion | None = None,
                    ptx_version: PtxVersion | None = None) -> PtxPlan:
    """Check a target and the codegen features it will be asked for; return the PTX plan.

    `ptx_version` pins `.version` (e.g. to match another toolchain's output); it may not be
    below what the target and features need (E0755: LLVM would abort on some of those, e.g.
    `.blocksareclusters` below PTX 9.0).

    Raises a TileError (never lets LLVM abort) for unknown targets, arch-specific features on
    a target without them, features above the target's SM, or a PTX version above what LLVM and
    the linker support.
    """
    target = name if isinstance(name, Target) else get_target(name, span)
    feats = sorted(set(features))
    arch_used = False
    version = target.min_ptx
    for fname in feats:
        feat = FEATURES.get(fname)
        if feat is None:
            raise TileLaunchError.at("E0754", f"unknown codegen feature `{fname}`", span,
                                     help="known features: " + ", ".join(FEATURES))
        if target.sm < feat.min_sm:
            raise TileLaunchError.at(
                "E0752", f"`{fname}` needs sm_{feat.min_sm} or newer; the target is {target.name}",
                span, help=f"compile for a newer target, or avoid `{fname}`")
        if feat.arch_targets:
            if target.name not in feat.arch_targets:
                *most, last = feat.arch_targets
                want = f"{', '.join(most)} or {last}" if most else last
                raise TileLaunchError.at(
                    "E0751", f"`{fname}` is arch-specific and needs {want}; "
                    f"the target is {target.name}", span,
                    help=f"use `--target {feat.arch_targets[0]}`")
            arch_used = True
        version = max(version, feat.min_ptx)
    if target.arch_specific and not arch_used:
        # No `a` instruction: write the portable `.target`, which also lowers `.version`.
        ptx_target = target.base_name
        version = max(_PORTABLE_MIN_PTX[ptx_target],
                      max((FEATURES[f].min_ptx for f in feats), default=(0, 0)))
    else:
        ptx_target = target.name
    if ptx_version is not None:
        if ptx_version < version:
            raise TileLaunchError.at(
                "E0755", f"PTX ISA {fmt_ptx(ptx_version)} was requested, but {ptx_target} with "
                f"{', '.join(feats) or 'no features'} needs {fmt_ptx(version)}", span,
                help=f"ask for {fmt_ptx(version)} or newer, or leave the version to the compiler")
        version = ptx_version
    limit = min(LLVM_MAX_PTX, max_ptx or linker_max_ptx())
    if version > limit:
        raise TileLaunchError.at(
            "E0753", f"{target.name} with {', '.join(feats) or 'no features'} needs PTX ISA "
            f"{fmt_ptx(version)}, but the toolchain supports at most {fmt_ptx(limit)}", span,
            help="upgrade nvidia-nvjitlink / llvmlite, or drop the feature")
    # LLVM compiles for the `.target` we will write, so it never uses what that target lacks.
    return PtxPlan(target, ptx_target, version, ptx_target, target.llvm_features(version))
