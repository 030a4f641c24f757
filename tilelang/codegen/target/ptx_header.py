"""Write the PTX header and each kernel's directive block ourselves.

LLVM prints launch directives in its own order and with its own policy (it omits
`.explicitcluster` next to `.blocksareclusters`), so LLVM-produced PTX is rewritten: `.version`
and `.target` come from the `PtxPlan` (targets.py), and every `.entry`'s directives are stripped
and replaced by the block below, in the fixed order of docs/launch.md ("Emission"):

    .maxntid  .reqntid  .minnctapersm  .maxnreg      (thread shape, then residency hints)
    .blocksareclusters  .explicitcluster  .reqnctapercluster  .maxclusterrank   (SM90+ only)

Two measured ptxas rules override the documented "print both": ptxas 13.x rejects `.maxntid` next
to `.reqntid` and `.maxclusterrank` next to `.reqnctapercluster` ("Conflicting directives").
In both pairs the first is implied by the second, so it stays in the nvvm.* attributes and is
left out of the PTX with a note.
"""

from __future__ import annotations

import re
from typing import Iterable, Mapping

from tilelang.diagnostics import (Diagnostic, DiagnosticSink, InternalCompilerError, Severity,
                                  Span)
from tilelang.codegen.contract import KernelContract
from tilelang.targets import PtxPlan, PtxVersion, Target, fmt_ptx, validate_target

DIRECTIVES = (".maxntid", ".reqntid", ".minnctapersm", ".maxnctapersm", ".maxnreg",
              ".blocksareclusters", ".explicitcluster", ".reqnctapercluster", ".maxclusterrank")
CLUSTER_GROUP = (".blocksareclusters", ".explicitcluster", ".reqnctapercluster",
                 ".maxclusterrank")


def _dims(d) -> str:
    return ", ".join(map(str, d))


def directive_lines(contract: KernelContract, target: Target,
                    sink: DiagnosticSink | None = None) -> list[str]:
    """The kernel's directive block for `target`, one directive per line."""
    a, spans = contract.attrs, contract.spans

    def tell(sev: Severity, code: str, msg: str, key: str, help: str | None = None,
             label: str | None = None) -> None:
        if sink is not None:
            sink.add(Diagnostic(sev, code, msg, spans.get(key), label, help))

    out = []
    if a.maxntid and a.reqntid:
        tell(Severity.NOTE, "E0722", f"`.maxntid {_dims(a.maxntid)}` is implied by `.reqntid "
             f"{_dims(a.reqntid)}` and not written (ptxas rejects both together)", "maxntid")
    elif a.maxntid:
        out.append(f".maxntid {_dims(a.maxntid)}")
    if a.reqntid:
        out.append(f".reqntid {_dims(a.reqntid)}")
    if a.minctasm is not None:
        out.append(f".minnctapersm {a.minctasm}")
    if a.maxnreg is not None:
        out.append(f".maxnreg {a.maxnreg}")
    has_cluster = a.cluster_dim is not None or a.maxclusterrank is not None or \
        a.blocksareclusters
    if not has_cluster:
        return out
    if not target.clusters:
        key = next(k for k, v in (("cluster_dim", a.cluster_dim),
                                  ("maxclusterrank", a.maxclusterrank),
                                  ("blocksareclusters", a.blocksareclusters)) if v)
        tell(Severity.WARNING, "E0720", f"{target.name} has no thread-block clusters: the "
             "cluster directives are not written", key,
             help="clusters need sm_90 or newer; use `by_target(...)` to give the cluster "
             "shape only for those targets", label=f"ignored for {target.name}")
        return out
    if a.blocksareclusters:
        out.append(".blocksareclusters")
    if a.cluster_dim is not None:
        out += [".explicitcluster", f".reqnctapercluster {_dims(a.cluster_dim)}"]
    if a.maxclusterrank is not None:
        if a.cluster_dim is not None:
            tell(Severity.NOTE, "E0723", f"`.maxclusterrank {a.maxclusterrank}` is implied by "
                 f"`.reqnctapercluster {_dims(a.cluster_dim)}` and not written (ptxas rejects "
                 "both together)", "maxclusterrank")
        else:
            out.append(f".maxclusterrank {a.maxclusterrank}")
    return out


def plan_module(target: Target, contracts: Mapping[str, KernelContract],
                extra_features: Iterable[str] = (), *, span: Span | None = None,
                ptx_version: PtxVersion | None = None) -> PtxPlan:
    """The module's PtxPlan: the target validated against every kernel's contract features
    (wgmma, clusters, blocksareclusters) plus codegen's own (tma, setmaxnreg, ...). Call it
    before LLVM and compile with `plan.llvm_cpu` / `plan.llvm_features`."""
    tgt = target
    feats = set(extra_features)
    for c in contracts.values():
        feats |= c.features(tgt)
    return validate_target(tgt, feats, span=span, ptx_version=ptx_version)


_VERSION = re.compile(r"^\.version\s+(\d+)\.(\d+)\s*$", re.M)
_TARGET = re.compile(r"^\.target\s+([A-Za-z0-9_]+)(.*)$", re.M)
_ENTRY = re.compile(r"^(?:\.visible\s+|\.weak\s+)?\.entry\s+([A-Za-z_$][\w$]*)\s*\(", re.M)


def rewrite_ptx(ptx: str, plan: PtxPlan, contracts: Mapping[str, KernelContract],
                sink: DiagnosticSink | None = None) -> str:
    """Rewrite LLVM's PTX: `.version`/`.target` from the plan, every `.entry`'s directive block
    from its contract. An entry without a contract is a compiler bug."""
    m = _VERSION.search(ptx)
    if not m or not _TARGET.search(ptx):
        raise InternalCompilerError.at("E0799", "PTX from LLVM has no .version/.target header",
                                       None)
    # Keep LLVM's version if it is higher: the body may use what that version allows.
    version = max(plan.version, (int(m.group(1)), int(m.group(2))))
    ptx = _VERSION.sub(f".version {fmt_ptx(version)}", ptx, count=1)
    ptx = _TARGET.sub(lambda t: f".target {plan.ptx_target}{t.group(2)}", ptx, count=1)

    out, pos, seen = [], 0, set()
    for em in _ENTRY.finditer(ptx):
        name = em.group(1)
        close = ptx.find(")", em.end())
        brace = ptx.find("{", close)
        if close < 0 or brace < 0:
            raise InternalCompilerError.at("E0799", f"cannot parse the `.entry {name}` header",
                                           None)
        contract = contracts.get(name)
        if contract is None:
            raise InternalCompilerError.at("E0799", f"kernel `{name}` has no launch contract",
                                           None)
        seen.add(name)
        # Between `)` and `{`: LLVM's directives (and blank lines); drop them, write ours.
        between = ptx[close + 1:brace]
        leftover = [ln for ln in between.splitlines()
                    if ln.strip() and ln.strip().split()[0] not in DIRECTIVES]
        block = leftover + directive_lines(contract, plan.target, sink)
        out.append(ptx[pos:close + 1] + "\n" + "".join(ln + "\n" for ln in block))
        pos = brace
    out.append(ptx[pos:])
    missing = set(contracts) - seen
    if missing:
        raise InternalCompilerError.at("E0799", "no `.entry` in the PTX for kernel(s) " +
                                       ", ".join(sorted(missing)), None)
    return "".join(out)


def header_text(ptx: str, kernel: str) -> str:
    """The PTX from `.version` up to the kernel's `{` (what golden tests compare)."""
    start = ptx.index(".version")
    em = next(m for m in _ENTRY.finditer(ptx) if m.group(1) == kernel)
    brace = ptx.index("{", ptx.index(")", em.end()))
    text = ptx[start:brace]
    return "\n".join(ln for ln in text.splitlines() if not ln.lstrip().startswith("//")).strip()
