"""Instructions newer than the module's `.target` are load errors, as ptxas makes them."""

import pytest

from tilelang.emulator import EmulatorDevice, PTXParseError
from tilelang.emulator.targets import check


def module(target, body):
    return (f".version 8.7\n.target {target}\n.address_size 64\n"
            ".shared .align 16 .b8 sm[512];\n"
            ".visible .entry k()\n{\n  .reg .b32 %r<16>;\n  .reg .b64 %rd<4>;\n"
            f"  .reg .pred %p<2>;\n  mov.u32 %r1, sm;\n  {body}\n  ret;\n}}\n")


E4M3_MMA = ("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%r2,%r3,%r4,%r5}, "
            "{%r6,%r7,%r8,%r9}, {%r10,%r11}, {%r2,%r3,%r4,%r5};")


@pytest.mark.parametrize("target,body,msg", [
    ("sm_80", E4M3_MMA, r"needs sm_89 or newer; the module's \.target is sm_80"),
    ("sm_80", "stmatrix.sync.aligned.m8n8.x1.shared.b16 [%r1], {%r2};", "needs sm_90"),
    ("sm_75", "cp.async.ca.shared.global [%r1], [%rd1], 4;", "needs sm_80"),
    ("sm_80", "cvt.rn.satfinite.e4m3x2.f32 %r2, %r3, %r4;", "needs sm_89"),
    ("sm_80", "cvt.rn.tf32.f32 %r2, %r3;", "needs sm_90"),
    ("sm_90", "setmaxnreg.inc.sync.aligned.u32 240;", "needs the arch-specific target sm_90a"),
    ("sm_89", "elect.sync %r2|%p1, 0xffffffff;", "needs sm_90"),
    ("sm_89", "fence.proxy.async.shared::cta;", "needs sm_90"),
    ("sm_89", "fence.mbarrier_init.release.cluster;", "needs sm_90"),
    ("sm_89", "prefetch.tensormap [%rd1];", "needs sm_90"),
    ("sm_89", "ld.shared::cluster.u32 %r2, [%r1];", "needs sm_90"),
    ("sm_89", "griddepcontrol.wait;", "needs sm_90"),
    ("sm_89", "mbarrier.expect_tx.shared::cta.b64 [%r1], 16;", "needs sm_90"),
    ("sm_90", "wgmma.fence.sync.aligned;", "needs the arch-specific target sm_90a"),
])
def test_too_new_for_the_target(target, body, msg):
    mod = EmulatorDevice().load_module(module(target, body))
    with pytest.raises(PTXParseError, match=msg):
        mod.get_function("k")


@pytest.mark.parametrize("target,body", [
    ("sm_89", E4M3_MMA),
    ("sm_90a", "setmaxnreg.inc.sync.aligned.u32 240;"),
    ("sm_80", "cp.async.ca.shared.global [%r1], [%rd1], 4;"),
    ("sm_80", "cvt.rna.tf32.f32 %r2, %r3;"),
    ("sm_90", "fence.proxy.async.shared::cta;"),
    ("sm_80", "fence.acq_rel.gpu;"),
    ("sm_90a", "wgmma.fence.sync.aligned;"),
])
def test_allowed_on_the_target(target, body):
    EmulatorDevice().load_module(module(target, body)).get_function("k")


def test_table():
    assert check(("sm_80",), "ldmatrix.sync.aligned.m8n8.x4.shared.b16") is None
    assert check(("sm_70",), "ldmatrix.sync.aligned.m8n8.x4.shared.b16").startswith(
        "ldmatrix.sync.aligned.m8n8.x4.shared.b16 needs sm_75")
    assert check(("sm_75",), "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32") is None
    assert check(("sm_75",), "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32") \
        is not None
    assert check(("sm_120",), "add.s32") is None and check((), "stmatrix.x") is None
