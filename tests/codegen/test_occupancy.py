"""Occupancy, waves and the report. Worked figures from seed 004_c6dc5fc6aab2fa35.txt (§6.3,
§6.4, §7.1, §9): 1024 threads x 40 regs -> 50 %, 256 x 40 -> 75 %, 48 KB blocks on a 164 KB SM
-> 3 blocks, 577 blocks on a 576-block wave -> a 1-block tail."""

from __future__ import annotations

import pytest

from tilelang.codegen.occupancy import (ARCH_LIMITS, KiB, format_report, kernel_report,
                                        occupancy, waves)
from tilelang.targets import get_target


def test_seed_004_1024_threads_40_regs_is_50_percent():
    o = occupancy("sm_80", (32, 32), 40)
    assert (o.blocks_per_sm, o.active_warps, o.percent, o.limiter) == (1, 32, 50.0, "registers")


def test_seed_004_256_threads_40_regs_is_75_percent():
    o = occupancy("sm_80", (16, 16), 40)
    assert (o.blocks_per_sm, o.active_warps, o.percent, o.limiter) == (6, 48, 75.0, "registers")


def test_seed_004_64_regs_1024_threads():
    """§6.3: 65536 / 64 = 1024 threads -> 50 %."""
    assert occupancy("sm_80", 1024, 64).percent == 50.0


def test_seed_004_48k_blocks_on_164k_sm():
    o = occupancy("sm_80", 128, 32, smem_dynamic=48 * KiB)
    assert (o.blocks_per_sm, o.limiter) == (3, "shared memory")
    assert o.limits["shared memory"] == 3


def test_seed_004_100k_blocks_on_h100():
    """§6.4: 228 KB / 100 KB -> 2 blocks; 2 x 256 threads -> 25 %."""
    o = occupancy("sm_90", 256, 32, smem_static=60 * KiB, smem_dynamic=40 * KiB)
    assert (o.blocks_per_sm, o.percent, o.limiter) == (2, 25.0, "shared memory")


def test_seed_004_tail_wave():
    w = waves(577, 4, 144)
    assert (w.wave_size, w.waves, w.tail_blocks) == (576, 2, 1)
    assert w.last_wave_utilization == pytest.approx(1 / 576)
    full = waves(576, 4, 144)
    assert (full.waves, full.tail_blocks, full.last_wave_utilization) == (1, 576, 1.0)


def test_register_granularity_per_warp():
    """41 regs x 32 = 1312 -> 1536 per warp (unit 256); 16384 per sub-partition / 1536 = 10
    warps each, 40 per SM -> 5 blocks of 8 warps."""
    assert occupancy("sm_80", 256, 41).blocks_per_sm == 5
    assert occupancy("sm_80", 256, 40).blocks_per_sm == 6


def test_shared_memory_granularity_and_reservation():
    """Each block costs user bytes + 1 KiB reserved, rounded up to 128 B."""
    lim = ARCH_LIMITS["sm_86"]
    per_block = 100 * KiB // 4 - 1 * KiB        # exactly 4 blocks fit
    assert occupancy(lim, 32, 0, smem_dynamic=per_block).limits["shared memory"] == 4
    assert occupancy(lim, 32, 0, smem_dynamic=per_block + 1).limits["shared memory"] == 3


@pytest.mark.parametrize("target,threads,blocks,limiter", [
    ("sm_80", 32, 32, "blocks"),        # 32 block slots before 64 warp slots
    ("sm_86", 32, 16, "blocks"),
    ("sm_89", 32, 24, "blocks"),
    ("sm_86", 512, 3, "threads"),       # 48 warps / 16
    ("sm_90", 1024, 2, "threads"),
    ("sm_120", 768, 2, "threads"),
    ("sm_120a", 768, 2, "threads"),
])
def test_slot_limits(target, threads, blocks, limiter):
    o = occupancy(target, threads, 0)
    assert (o.blocks_per_sm, o.limiter) == (blocks, limiter)


def test_per_arch_shared_memory():
    assert {n: (a.smem_per_sm // KiB, a.max_warps_per_sm) for n, a in ARCH_LIMITS.items()} == {
        "sm_80": (164, 64), "sm_86": (100, 48), "sm_89": (100, 48), "sm_90": (228, 64),
        "sm_90a": (228, 64), "sm_100a": (228, 64), "sm_120": (100, 48),
        "sm_120a": (100, 48)}


def test_block_that_does_not_fit():
    o = occupancy("sm_80", 1024, 255)            # 255 x 32 -> 8192 per warp x 32 > 65536
    assert (o.blocks_per_sm, o.limiter) == (0, "registers")
    o = occupancy("sm_86", 32, 0, smem_dynamic=100 * KiB)
    assert (o.blocks_per_sm, o.limiter) == (0, "shared memory")


def test_per_block_register_check_rounds_warps_to_4():
    """15 warps x 136 regs = 15 x 4352 = 65280 fits 64K, but the check counts 16 warps."""
    assert occupancy("sm_80", 480, 136).blocks_per_sm == 0
    assert occupancy("sm_80", 512, 128).blocks_per_sm == 1


def test_invalid_inputs():
    with pytest.raises(ValueError):
        occupancy("sm_80", 2048, 32)
    with pytest.raises(ValueError):
        occupancy("sm_80", 128, 256)


def test_format_report_seed_000_gemm():
    """The seed 000 GEMM (128 threads, 168 regs, 48 KiB dynamic smem) on an H100 SXM."""
    r = kernel_report("gemm_kernel", "sm_90a", (128, 1, 1), registers=168,
                      smem_dynamic=48 * KiB,
                      directives=[".reqntid 128, 1, 1", ".maxnreg 168", ".explicitcluster",
                                  ".reqnctapercluster 2, 1, 1"], grid_blocks=4, num_sms=132)
    small = kernel_report("vadd", "sm_90a", (256,), registers=16, spill_stores=8, spill_loads=4,
                          smem_static=1536)
    assert format_report([r, small]) == """\
kernel       target  threads  regs  spill st/ld  smem static  smem dyn  blocks/SM  occupancy             limited by
-----------  ------  -------  ----  -----------  -----------  --------  ---------  --------------------  ----------
gemm_kernel  sm_90a  128x1x1  168   0/0 B        0 B          48 KiB    3          18.8% (12/64 warps)   registers
vadd         sm_90a  256      16    8/4 B        1536 B       0 B       8          100.0% (64/64 warps)  threads
gemm_kernel:
  directives: .reqntid 128, 1, 1; .maxnreg 168; .explicitcluster; .reqnctapercluster 2, 1, 1
  grid 4 blocks: 1 wave(s) of 396, last wave 4 block(s) = 1.01% of the GPU"""


def test_pipeline_report_from_link_resources():
    """@launch -> contract -> plan -> LLVM -> header -> nvJitLink -> resources -> report."""
    from test_launch_support import gemm_module_ir, launch, llvm_ptx
    from tilelang.codegen.contract import CodegenFeatures, decide_contract
    from tilelang.sema.launch_attrs import resolve_launch
    from tilelang.codegen.target.link import link_ptx
    from tilelang.codegen.occupancy import kernel_report_from
    from tilelang.codegen.target.ptx_header import directive_lines, plan_module, rewrite_ptx

    target = "sm_90a"
    tgt = get_target(target)
    spec = resolve_launch(launch("@launch(reqntid = (128, 1, 1), cluster = (2, 1, 1))"), tgt)
    c = decide_contract("gemm_kernel", spec,
                        CodegenFeatures(wgmma=True, accumulator_regs=128), tgt)
    plan = plan_module(tgt, {"gemm_kernel": c})
    assert (plan.ptx_target, plan.version) == ("sm_90a", (8, 0))
    ptx = rewrite_ptx(llvm_ptx(gemm_module_ir(), plan.llvm_cpu, plan.llvm_features), plan,
                      {"gemm_kernel": c})
    res = link_ptx(ptx, get_target(target), env={}).resources["gemm_kernel"]
    r = kernel_report_from(c, res, target, smem_dynamic=48 * KiB, grid_blocks=4, num_sms=132,
                           directives=directive_lines(c, plan.target))
    assert r.threads == (128, 1, 1) and r.registers == res.registers
    assert r.directives == (".reqntid 128, 1, 1", ".maxnreg 168", ".explicitcluster",
                            ".reqnctapercluster 2, 1, 1")
    # the tiny body needs few registers: shared memory limits (4 x (48 KiB + 1 KiB) <= 228 KiB)
    assert (r.occupancy.blocks_per_sm, r.occupancy.limiter) == (4, "shared memory")
    assert "gemm_kernel  sm_90a  128x1x1" in format_report([r])
