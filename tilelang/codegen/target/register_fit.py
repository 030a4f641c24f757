"""Give back the registers nvJitLink's relocatable compilation costs, when they cost an
occupancy step.

nvJitLink compiles PTX as relocatable code (`ptxas -c`), and for a kernel with `.maxntid` or
`.reqntid` but no `.minnctapersm` that loses the occupancy target a whole-program ptxas applies:
examples/vadd.tile as emitted on 2026-11-24 took 34 registers where ptxas takes 28, so 12 blocks
of 128 threads fit on an SM instead of 16 (75% occupancy instead of 100%). No nvJitLink option
changes that (link.py), so after the link each kernel whose register count is at most `MARGIN`
above the largest count that would fit one more block per SM (the step below) is linked again
with `.maxnreg` at that count, and the result is kept only if it spills nothing and uses no more
stack; otherwise the first link stands. Kernels whose launch contract already fixes `.maxnreg`
or `.minnctapersm`, and those limited by something other than registers, are left alone. The
added directive is part of the PTX the cubin was made from (`CompileResult.ptx`); PTX emitted
without linking (`tilec --emit ptx`) cannot know it.

A kernel further than MARGIN above the step, below `LOW` occupancy and of at most `DEEP_MAX`
registers is tried deeper (`deep`), since the relocatable compile can cost far more than one
allocation unit: softmax at N = 4,096 in precision "ieee" with its row kept in registers (before
lower/reload.py re-read it) links at 96 registers (31% at 128 threads) where whole-program
ptxas takes 56, and capped at 64 it spills nothing. At most two
more links: first the largest count that reaches `LOW`, then, when that spills, the step just
below the first link's count; a cap is kept only when it spills nothing and adds no stack, else
the first link stands. A kernel the MARGIN steps leave below LOW is tried once more at the
count that reaches LOW (softmax ieee@4,096 with its row kept: 85 -> 80 -> 72, then 64). The
examples' layernorm, vadd and matmul never take these paths (checked on sm_90a and sm_80 in
both precisions; the examples' dropout does: 92 -> 60).

Last (`full`), a kernel left at FULL_MAX registers or fewer, still limited by them, is linked
once more at the count where they stop limiting (32 at 128 threads on sm_90a), unless that
cap was tried already; kept only without spills, else what was linked before stands.

First of all (`relax`), a kernel that spills under the launch contract's own `.maxnreg` (the
warp-group MMA default, not a user's value) is linked without it; when that spills nothing the
cap is dropped and the kernel is fitted as above. So no cap this module or the contract chooses
spills where a higher one (or none) does not; a user's `maxnreg` always stands.
"""

from __future__ import annotations

import re
from math import prod
from typing import TYPE_CHECKING, Mapping, NamedTuple

from tilelang.codegen.occupancy import ARCH_LIMITS, occupancy

if TYPE_CHECKING:
    from tilelang.targets import Target

# At most one register-allocation unit (256 per warp = 8 per thread) above the step: the
# relocatable-code overhead measured on most examples is 2-8 registers; a larger gap is usually
# the kernel's own need (but see LOW).
MARGIN = 8
MIN_REGS = 24          # below this a cap is not worth a second link
# Below this theoretical occupancy a register-limited kernel is tried deeper than MARGIN, up to
# the count that reaches it: a memory-bound kernel hides latency with resident warps, and
# whole-program ptxas left the examples' kernels at least there (softmax ieee@4,096: 56, 56%).
LOW = 0.5
# ... and only up to this many registers: above it a kernel is register-tiled (matmul, attention
# on sm_80 at 230) and its allocation is its own need; two failing links of one cost ~1 s.
DEEP_MAX = 128
# A kernel the steps above leave at most this many registers (50% at 128 threads), limited by
# registers, is tried once at the count where registers stop limiting (`full`): a streamed
# memory-bound kernel is allocated its loads hoisted for latency, which full occupancy hides
# as well (softmax, layernorm, RMSNorm over 8,192-wide rows: 64 -> 32; the examples' dropout
# 62 -> 30; none of them spills there).
FULL_MAX = 64


class KernelShape(NamedTuple):
    name: str
    threads: int
    smem: int               # static + dynamic shared memory, bytes
    fixed: bool             # the contract already sets .maxnreg or .minnctapersm
    default_cap: bool = False   # ... and that .maxnreg is its policy's, not the user's


def shapes(codegen) -> list[KernelShape]:
    """The facts `caps` needs, from a codegen.api.CodegenResult."""
    out = []
    for k in codegen.kernels:
        a = k.attrs
        fixed = getattr(a, "maxnreg", None) is not None or getattr(a, "minctasm", None) is not None
        default_cap = bool(getattr(k, "default_maxnreg", False)) and \
            getattr(a, "maxnreg", None) is not None and getattr(a, "minctasm", None) is None
        out.append(KernelShape(k.name, prod(k.block), k.static_smem + k.dynamic_smem, fixed,
                               default_cap))
    return out


def _spills(r) -> bool:
    return bool(r.spill_stores or r.spill_loads)


def without_maxnreg(ptx: str, names) -> str:
    """`ptx` with the `.maxnreg` directive of each named entry removed."""
    out, pos = [], 0
    for em in _ENTRY.finditer(ptx):
        if em.group(1) not in names:
            continue
        close = ptx.find(")", em.end())
        brace = ptx.find("{", close)
        block = re.sub(r"\n[ \t]*\.maxnreg[ \t]+\d+[ \t]*(?=\n)", "", ptx[close:brace])
        out.append(ptx[pos:close] + block)
        pos = brace
    out.append(ptx[pos:])
    return "".join(out)


def relax(ptx: str, kernels: list[KernelShape], first, link):
    """(ptx, link result, kernels) after dropping the launch contract's default `.maxnreg`
    (wgmma_maxnreg, docs/launch.md) from each kernel that spills under it, where the kernel
    spills nothing without it: a default cap is an occupancy hint, never worth local memory
    (examples/matmul_epilogue.tile on sm_90a: 72 registers and 52 B of spill stores under the
    default, 81 and none without it). Those kernels are then fitted like any other (their
    `fixed` cleared); a kernel that spills either way keeps its cap. At most two links."""
    want = {k.name for k in kernels if k.default_cap and k.name in first.resources
            and _spills(first.resources[k.name])}
    for _ in range(2):                  # once more without the kernels that spill either way
        if not want:
            return ptx, first, kernels
        trial_ptx = without_maxnreg(ptx, want)
        try:
            trial = link(trial_ptx)
        except Exception:               # noqa: BLE001 - the first link stands
            return ptx, first, kernels
        freed = {n for n in want if n in trial.resources and not _spills(trial.resources[n])}
        if freed == want:
            return trial_ptx, trial, [k._replace(fixed=False, default_cap=False)
                                      if k.name in freed else k for k in kernels]
        want = freed
    return ptx, first, kernels


def step_below(target: str, threads: int, registers: int, smem: int) -> int | None:
    """The largest register count under `registers` that fits more blocks per SM, when
    registers are what limits the kernel and that count is within MARGIN; else None."""
    if target not in ARCH_LIMITS or registers <= MIN_REGS:
        return None
    occ = occupancy(target, threads, registers, smem)
    if occ.limiter != "registers":
        return None
    for r in range(registers - 1, max(registers - MARGIN, MIN_REGS) - 1, -1):
        if occupancy(target, threads, r, smem).blocks_per_sm > occ.blocks_per_sm:
            # the largest such r: every count from here down to the next step fits as many
            return r
    return None


def caps(target: str, kernels: list[KernelShape], resources: Mapping) -> dict[str, int]:
    """kernel -> the `.maxnreg` worth trying."""
    out = {}
    for k in kernels:
        r = resources.get(k.name)
        if k.fixed or r is None or r.spill_stores or r.spill_loads:
            continue
        cap = step_below(target, k.threads, r.registers, k.smem)
        if cap is not None:
            out[k.name] = cap
    return out


def deep(target: str, threads: int, registers: int, smem: int, stepped: bool = False) -> list[int]:
    """The caps to try, in order, for a kernel of at most DEEP_MAX registers below LOW
    occupancy, limited by registers and further than MARGIN above its step: the largest count
    that reaches LOW (when one above MIN_REGS does), then the largest count that fits one more
    block. Empty otherwise. `stepped`: `registers` is where the MARGIN steps left the kernel,
    still below LOW (softmax ieee@4,096 with its row kept: 85 -> 80 -> 72); only the count
    that reaches LOW is tried."""
    if target not in ARCH_LIMITS or not MIN_REGS < registers <= DEEP_MAX:
        return []
    occ = occupancy(target, threads, registers, smem)
    if occ.limiter != "registers" or occ.fraction >= LOW:
        return []
    if not stepped and step_below(target, threads, registers, smem) is not None:
        return []                                   # the MARGIN path handles it
    to_low = step = None
    for r in range(registers - 1, MIN_REGS - 1, -1):
        o = occupancy(target, threads, r, smem)
        if step is None and o.blocks_per_sm > occ.blocks_per_sm:
            step = r
        if o.fraction >= LOW:
            to_low = r
            break
    if stepped:
        return [to_low] if to_low is not None else []
    return [c for c in dict.fromkeys((to_low, step)) if c is not None]


def full(target: str, threads: int, registers: int, smem: int) -> int | None:
    """The largest count below `registers` at which registers no longer limit the kernel's
    occupancy, for a kernel of at most FULL_MAX registers that they limit; else None."""
    if target not in ARCH_LIMITS or not MIN_REGS < registers <= FULL_MAX:
        return None
    if occupancy(target, threads, registers, smem).limiter != "registers":
        return None
    for r in range(registers - 1, MIN_REGS - 1, -1):
        if occupancy(target, threads, r, smem).limiter != "registers":
            return r
    return None


_ENTRY = re.compile(r"^(?:\.visible\s+|\.weak\s+)?\.entry\s+([A-Za-z_$][\w$]*)\s*\(", re.M)
# the directives ptx_header writes before `.maxnreg`, in its order
_BEFORE = (".maxntid", ".reqntid", ".minnctapersm", ".maxnctapersm")


def with_maxnreg(ptx: str, caps_by_kernel: Mapping[str, int]) -> str:
    """`ptx` with `.maxnreg N` added to the directive block of each named entry (after the
    thread-shape and residency directives, where ptx_header's order puts it)."""
    out, pos = [], 0
    for em in _ENTRY.finditer(ptx):
        name = em.group(1)
        if name not in caps_by_kernel:
            continue
        close = ptx.find(")", em.end())
        brace = ptx.find("{", close)
        lines = ptx[close + 1:brace].split("\n")
        at = 1                              # just after the `)` line's end
        for i, ln in enumerate(lines):
            if ln.strip().split(" ")[0] in _BEFORE:
                at = i + 1
        lines.insert(at, f".maxnreg {caps_by_kernel[name]}")
        out.append(ptx[pos:close + 1] + "\n".join(lines))
        pos = brace
    out.append(ptx[pos:])
    return "".join(out)


def accepted(before, after, caps_by_kernel: Mapping[str, int]) -> list[str]:
    """The kernels whose capped link spills nothing, uses no more stack and meets the cap."""
    ok = []
    for name, cap in caps_by_kernel.items():
        b, a = before.get(name), after.get(name)
        if b is None or a is None:
            continue
        if a.spill_stores == 0 and a.spill_loads == 0 and a.stack_frame <= b.stack_frame \
                and a.registers <= cap:
            ok.append(name)
    return ok


_CAPS = re.compile(r"\.entry\s+([A-Za-z_$][\w$]*)\s*\([^{]*?\.maxnreg (\d+)", re.S)


def caps_in(ptx: str) -> dict[str, int]:
    """kernel -> the `.maxnreg` its directives have."""
    return {n: int(c) for n, c in _CAPS.findall(ptx)}


def refit(ptx: str, codegen, target: Target, first, link):
    """(ptx, link result) after dropping a spilling default cap (`relax`), the step-down, the
    deep tries and the full-occupancy try described above; `first` is the link of `ptx`,
    `link(ptx)` links another PTX."""
    arch = target.name                      # the occupancy tables are by target name
    ptx, first, kernels = relax(ptx, shapes(codegen), first, link)
    tried: dict[str, set] = {}

    def tracked(text: str):
        for n, c in caps_in(text).items():
            tried.setdefault(n, set()).add(c)
        return link(text)
    got_ptx, got = _steps(ptx, kernels, arch, first, tracked)
    own = caps_in(ptx)                      # the contract's, on kernels refit leaves alone
    caps = {n: c for n, c in caps_in(got_ptx).items() if n not in own}
    more = {}
    for k in kernels:
        r, r0 = got.resources.get(k.name), first.resources.get(k.name)
        if k.fixed or r is None or r0 is None or r0.spill_stores or r0.spill_loads:
            continue
        c = full(arch, k.threads, r.registers, k.smem)
        if c is not None and c not in tried.get(k.name, ()):
            more[k.name] = c
    if not more:
        return got_ptx, got
    want = {**caps, **more}
    trial_ptx = with_maxnreg(ptx, want)
    try:
        trial = link(trial_ptx)
    except Exception:                   # noqa: BLE001 - what was linked before stands
        return got_ptx, got
    if len(accepted(first.resources, trial.resources, want)) == len(want):
        return trial_ptx, trial
    return got_ptx, got


def _steps(ptx: str, kernels, target: str, first, link):
    """(ptx, link result) after the step-down and the deep tries."""
    got_ptx, got, chosen = _margin(ptx, kernels, target, first, link)
    pending = {}
    for k in kernels:
        r = first.resources.get(k.name)
        if k.fixed or r is None or r.spill_stores or r.spill_loads:
            continue
        if k.name in chosen:
            # stepped down within MARGIN and still below LOW: the count that reaches LOW
            tries = deep(target, k.threads, got.resources[k.name].registers, k.smem, True)
        else:
            tries = deep(target, k.threads, r.registers, k.smem)
        if tries:
            pending[k.name] = tries
    unlinked = False                    # caps in `chosen` no kept link has yet
    for _ in range(2):                  # at most two more links
        tries = {k: c.pop(0) for k, c in pending.items() if c}
        if not tries and not unlinked:
            break
        trial_ptx = with_maxnreg(ptx, {**chosen, **tries})
        try:
            trial = link(trial_ptx)
        except Exception:               # noqa: BLE001 - what was linked before stands
            break
        ok = set(accepted(first.resources, trial.resources, {**chosen, **tries}))
        if not set(chosen) <= ok:
            break
        if set(tries) <= ok:
            return trial_ptx, trial
        # a refused kernel leaves its spilling code in this cubin: link again with the kernels
        # that passed kept and the refused ones at their next cap, if any
        passed = {k: c for k, c in tries.items() if k in ok}
        chosen, unlinked = {**chosen, **passed}, unlinked or bool(passed)
        pending = {k: c for k, c in pending.items() if k not in ok}
    return got_ptx, got


def _margin(ptx: str, kernels, target: str, first, link):
    """(ptx, link result, the caps it holds) after the step-down within MARGIN; `first` is the
    link of `ptx`, `link(ptx)` links another PTX. Returns (ptx, first, {}) when nothing is
    gained. Where the step is taken and the result is again within MARGIN of the next step,
    that one is tried too (one more link): nvJitLink's scheduling can hoist a streamed kernel's
    loads well above what it needs (vadd over 4,096-wide tiles links at 44 registers and fits
    40, then 32, with no spill)."""
    want = caps(target, kernels, first.resources)
    if not want:
        return ptx, first, {}
    got = None
    for _ in range(2):                  # one more try without the kernels that refused
        trial_ptx = with_maxnreg(ptx, want)
        try:
            trial = link(trial_ptx)
        except Exception:               # noqa: BLE001 - the first link stands
            return ptx, first, {}
        ok = accepted(first.resources, trial.resources, want)
        if len(ok) == len(want):
            got = trial_ptx, trial
            break
        if not ok:
            return ptx, first, {}
        want = {k: want[k] for k in ok}
    if got is None:
        return ptx, first, {}
    more = {k: c for k, c in caps(target, kernels, got[1].resources).items() if k in want}
    if not more:
        return (*got, want)
    trial_ptx = with_maxnreg(ptx, {**want, **more})
    try:
        trial = link(trial_ptx)
    except Exception:                   # noqa: BLE001 - the first step stands
        return (*got, want)
    if len(accepted(first.resources, trial.resources, more)) == len(more):
        return trial_ptx, trial, {**want, **more}
    return (*got, want)
