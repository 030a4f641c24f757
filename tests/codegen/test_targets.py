"""The target table and the pre-LLVM validation (combinations LLVM would abort on become
diagnostics). PTX ISA minimums were measured against nvJitLink and checked here by linking."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from tilelang.codegen.target.link import link_ptx
from tilelang.targets import (FEATURES, LLVM_MAX_PTX, TARGETS, fmt_ptx, linker_max_ptx,
                              ptx_for_cuda, validate_target)
from tilelang.diagnostics import (InternalCompilerError, Span, TileLaunchError, TileUsageError,
                                  remember_source, render)

EXPECTED = {  # name: (sm, arch-specific, min PTX, clusters)
    "sm_80": (80, False, (7, 0), False), "sm_86": (86, False, (7, 1), False),
    "sm_89": (89, False, (7, 8), False), "sm_90": (90, False, (7, 8), True),
    "sm_90a": (90, True, (8, 0), True), "sm_100a": (100, True, (8, 6), True),
    "sm_120": (120, False, (8, 7), True), "sm_120a": (120, True, (8, 7), True),
}

EMPTY_KERNEL = """\
.version {v}
.target {t}
.address_size 64

.visible .entry k()
{{
\tret;
}}
"""


def test_table():
    assert {n: (t.sm, t.arch_specific, t.min_ptx, t.clusters) for n, t in TARGETS.items()} == \
        EXPECTED
    assert all(t.llvm_cpu == n for n, t in TARGETS.items())


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_min_ptx_is_really_the_minimum(name):
    """nvJitLink accepts `.target` at the table's version and refuses the one just below."""
    t = TARGETS[name]
    link_ptx(EMPTY_KERNEL.format(v=fmt_ptx(t.min_ptx), t=name), t, verbose=False)
    below = (t.min_ptx[0], t.min_ptx[1] - 1) if t.min_ptx[1] else (t.min_ptx[0] - 1, 8)
    with pytest.raises(InternalCompilerError) as e:
        link_ptx(EMPTY_KERNEL.format(v=fmt_ptx(below), t=name), t, verbose=False)
    assert "does not support .target" in "\n".join(e.value.diagnostics[0].notes) or \
        "Unsupported .version" in "\n".join(e.value.diagnostics[0].notes)


def test_linker_version_mapping():
    assert ptx_for_cuda(13, 5) == (9, 5) and ptx_for_cuda(13, 0) == (9, 0)
    assert ptx_for_cuda(12, 4) == (8, 4) and ptx_for_cuda(12, 8) == (8, 7)
    assert linker_max_ptx() >= (9, 0)      # nvidia-nvjitlink 13.x is a dependency


def test_unknown_target_rendered():
    remember_source("cli", "tilec --target sm_75 k.tile\n")
    with pytest.raises(TileUsageError) as e:
        validate_target("sm_75", span=Span("cli", 1, 16, 1, 21))
    assert render(e.value.diagnostics[0]) == """\
error[E0750]: unknown target `sm_75`
 --> cli:1:16
  |
1 | tilec --target sm_75 k.tile
  |                ^^^^^ not a supported target
  |
  = help: supported targets: sm_80, sm_86, sm_89, sm_90, sm_90a, sm_100a, sm_120, sm_120a"""


@pytest.mark.parametrize("target,features,code", [
    ("sm_90", ["setmaxnreg"], "E0751"),    # LLVM aborts on this one
    ("sm_90", ["wgmma"], "E0751"),
    ("sm_100a", ["wgmma"], "E0751"),
    ("sm_120", ["tcgen05"], "E0751"),
    ("sm_120", ["setmaxnreg"], "E0751"),
    ("sm_120a", ["tcgen05"], "E0751"),
    ("sm_120a", ["wgmma"], "E0751"),
    ("sm_90a", ["tcgen05"], "E0752"),
    ("sm_80", ["cluster"], "E0752"),
    ("sm_89", ["tma"], "E0752"),
    ("sm_86", ["blocksareclusters"], "E0752"),
    ("sm_90a", ["warp_magic"], "E0754"),
])
def test_feature_combos_rejected(target, features, code):
    with pytest.raises(TileLaunchError) as e:
        validate_target(target, features)
    assert e.value.code == code


def test_arch_specific_rejection_text():
    with pytest.raises(TileLaunchError) as e:
        validate_target("sm_90", ["setmaxnreg"])
    d = e.value.diagnostics[0]
    assert d.message == "`setmaxnreg` is arch-specific and needs sm_90a, sm_100a or sm_120a; " \
        "the target is sm_90"
    assert d.help == "use `--target sm_90a`"


@pytest.mark.parametrize("target,features,ptx_target,version", [
    ("sm_90a", ["setmaxnreg"], "sm_90a", (8, 0)),
    ("sm_100a", ["setmaxnreg"], "sm_100a", (8, 6)),
    ("sm_100a", ["tcgen05", "tma"], "sm_100a", (8, 6)),
    ("sm_120a", ["setmaxnreg"], "sm_120a", (8, 7)),
    ("sm_120a", ["tma", "mma_sync", "cluster"], "sm_120", (8, 7)),
    ("sm_120a", [], "sm_120", (8, 7)),
    ("sm_90a", ["wgmma", "blocksareclusters"], "sm_90a", (9, 0)),
    ("sm_90", ["blocksareclusters"], "sm_90", (9, 0)),
    ("sm_90a", ["tma"], "sm_90", (8, 0)),
    ("sm_90a", [], "sm_90", (7, 8)),
    ("sm_80", ["mma_sync", "cp_async"], "sm_80", (7, 0)),
])
def test_plan(target, features, ptx_target, version):
    plan = validate_target(target, features)
    assert (plan.ptx_target, plan.version) == (ptx_target, version)
    assert plan.llvm_cpu == ptx_target and plan.llvm_features == f"+ptx{version[0]}{version[1]}"


def test_version_above_toolchain_rejected():
    with pytest.raises(TileLaunchError) as e:
        validate_target("sm_90", ["blocksareclusters"], max_ptx=(8, 8))
    assert e.value.code == "E0753"
    assert e.value.diagnostics[0].message == \
        "sm_90 with blocksareclusters needs PTX ISA 9.0, but the toolchain supports at most 8.8"


def test_every_plan_is_safe_for_llvm():
    """Every accepted target x feature plan runs LLVM in a child process without aborting, and
    the PTX links. (A rejected combination never reaches LLVM.)"""
    plans = []
    for name in TARGETS:
        for feat in [[], *([f] for f in FEATURES)]:
            try:
                plans.append(validate_target(name, feat))
            except TileLaunchError:
                pass
    assert all(p.version <= LLVM_MAX_PTX for p in plans)
    combos = sorted({(p.llvm_cpu, p.llvm_features) for p in plans})
    script = textwrap.dedent("""
        import sys, llvmlite.binding as llvm
        llvm.initialize_all_targets(); llvm.initialize_all_asmprinters()
        ir = 'target triple = "nvptx64-nvidia-cuda"\\n' \\
             'define ptx_kernel void @k() {\\n  ret void\\n}\\n'
        t = llvm.Target.from_triple("nvptx64-nvidia-cuda")
        for cpu, feat in %r:
            tm = t.create_target_machine(cpu=cpu, features=feat, opt=2)
            sys.stdout.write(tm.emit_assembly(llvm.parse_assembly(ir)) + "\\f")
    """) % (combos,)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "not a recognized" not in proc.stderr
    outs = proc.stdout.split("\f")[:-1]
    assert len(outs) == len(combos)
    # linked as the compiler links them: for the user's target (`sm_90a` for `.target sm_90`)
    target_of = {p.llvm_cpu: p.target for p in plans}
    for (cpu, _), ptx in zip(combos, outs):
        link_ptx(ptx, target_of[cpu], verbose=False)


def test_pinned_version():
    assert validate_target("sm_90a", ["wgmma"], ptx_version=(8, 4)).version == (8, 4)
    with pytest.raises(TileLaunchError) as e:
        validate_target("sm_90", ["blocksareclusters"], ptx_version=(8, 8))
    assert e.value.code == "E0755"
    assert e.value.diagnostics[0].message == \
        "PTX ISA 8.8 was requested, but sm_90 with blocksareclusters needs 9.0"
    with pytest.raises(TileLaunchError) as e:
        validate_target("sm_80", ptx_version=(9, 1))      # above LLVM's +ptx90
    assert e.value.code == "E0753"
