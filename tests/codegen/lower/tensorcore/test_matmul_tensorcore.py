"""Issue 13's definition of done for the shipped examples/matmul.tile at its default tile
(128 x 128 x 64, f16 inputs, f32 accumulator, 4 warps), on sm_80 and sm_90a:

* `mma.sync` in the PTX;
* in the SASS (cuobjdump from the nvidia-cuda-cuobjdump / nvidia-cuda-nvdisasm wheels):
  HMMA instructions, no LDL/STL (no spills, no local memory), 16-byte global loads in the
  main loop;
* on the emulator: the right product, no bank conflicts in the main loop and a global-load
  sector efficiency of at least 90% there, and no shared-memory race between warps (the
  emulator's race check: a pipeline stage refilled while another warp may still read it, or
  read before every warp's copy landed and a barrier passed).

The SASS tests skip when the wheels are not installed.
"""

from __future__ import annotations

import functools
import math
import pathlib

import numpy as np
import pytest

from tilelang.diagnostics import render_all
from tilelang.driver import compile_source
from tilelang.options import CompileOptions
from tilelang.tools import sass
from tilelang.targets import get_target

ROOT = pathlib.Path(__file__).resolve().parents[4]
EXAMPLE = ROOT / "examples" / "matmul.tile"
ARCHS = ["sm_80", "sm_90a"]
MMA_SYNC_ARCHS = ["sm_80", "sm_90"]     # sm_90a uses wgmma (test_wgmma.py)
needs_sass = pytest.mark.skipif(not sass.tools_available(),
                                reason="cuobjdump/nvdisasm wheels not installed")


@functools.lru_cache(maxsize=None)
def compiled(arch):
    res = compile_source(EXAMPLE.read_text(), str(EXAMPLE), CompileOptions(target=arch),
                         until="cubin")
    assert res.ok, render_all(res.diagnostics)
    return res


@functools.lru_cache(maxsize=None)
def sass_of(arch):
    res = compiled(arch)
    return sass.summarize(sass.disassemble(res.cubin)["matmul"])


@pytest.mark.parametrize("arch", MMA_SYNC_ARCHS)
def test_ptx_has_mma_sync(arch):
    assert "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in compiled(arch).ptx


@needs_sass
@pytest.mark.parametrize("arch", MMA_SYNC_ARCHS)
def test_sass_has_hmma(arch):
    s = sass_of(arch)
    assert s.hmma > 0 and s.loop_ops.get("HMMA", 0) > 0, s.ops.most_common(10)


@needs_sass
@pytest.mark.parametrize("arch", ARCHS)
def test_no_spills_no_local_memory(arch):
    res = compiled(arch)
    r = res.link.resources["matmul"]
    assert (r.spill_stores, r.spill_loads, r.stack_frame) == (0, 0, 0), r
    assert ".local" not in res.ptx
    assert sass_of(arch).local == 0


@needs_sass
@pytest.mark.parametrize("arch", ARCHS)
def test_main_loop_global_loads_are_16_bytes(arch):
    s = sass_of(arch)
    if arch == "sm_90a":        # the operands come by TMA (test_tma.py, beside this file)
        assert s.loop_ops.get("UTMALDG", 0) > 0 and not s.loop_ops.get("LDG", 0), s.loop_ops
        return
    loads = {w: n for w, n in s.ldg_widths.items()}
    loop_loads = s.loop_ops.get("LDG", 0) + s.loop_ops.get("LDGSTS", 0)
    assert loop_loads > 0, "no global load in the main loop"
    lp = sass.main_loop(sass.disassemble(compiled(arch).cubin)["matmul"])
    widths = {sass.access_width(i) for i in lp.instrs if i.op in ("LDG", "LDGSTS")}
    assert widths == {128}, (widths, loads)


def run_on_emulator(arch, M, N, K, seed):
    """examples/matmul.tile for these operands (specialized for their facts, docs/abi.md) on
    the emulator with the shared-memory race check; returns (a, b, c, report, ptx)."""
    from tilelang.codegen.api import ArrayFacts
    from tilelang.emulator import EmulatorDevice
    from tilelang.runtime.args import facts_key
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    arrays = {"a": a, "b": b, "c": np.zeros((M, N), np.float32)}
    facts = {n: ArrayFacts.from_key(facts_key(0, x.shape, (x.shape[1], 1), x.itemsize))
             for n, x in arrays.items()}         # the emulator's allocations: 256-byte aligned
    res = compile_source(EXAMPLE.read_text(), str(EXAMPLE), CompileOptions(target=arch),
                         facts={"matmul": facts})
    assert res.ok, render_all(res.diagnostics)
    art = res.codegen.kernel("matmul")
    dev = EmulatorDevice(race_check=True)
    ptrs, args = {}, []
    for p in art.params:                      # address, extents, strides in elements
        x = arrays[p.name]
        ptrs[p.name] = dev.to_device(x)
        args += [np.uint64(int(ptrs[p.name])), *map(np.int64, x.shape),
                 np.int64(x.shape[1]), np.int64(1)]
    from gen_support import tensor_maps
    args += tensor_maps(art, args)            # sm_90a: TMA tensor maps (docs/abi.md)
    dev.memset(ptrs["c"], 0xFF, 4 * M * N)    # NaN: every element must be written
    gx = -(-M // 128)
    gx += gx % (art.cluster[0] if art.cluster else 1)
    rep = dev.launch(dev.load_module(res.ptx).get_function("matmul"), (gx, -(-N // 128), 1),
                     art.block, args, cluster=art.cluster, shared_mem=art.dynamic_smem)
    return a, b, dev.from_device(ptrs["c"], (M, N), np.float32), rep, res.ptx


def check_product(a, b, c):
    ad, bd = a.astype(np.float64), b.astype(np.float64)
    # f16 products are exact in f32; one f32 rounding per 16-deep mma step at most
    bound = math.ceil(a.shape[1] / 16) * 2.0 ** -23 * (np.abs(ad) @ np.abs(bd))
    assert np.all(np.abs(c - ad @ bd) <= bound)


@pytest.mark.parametrize("arch", ARCHS)
def test_emulator_main_loop_conflict_free_and_coalesced(arch):
    # 2 x 2 blocks (a cluster pair on sm_90a), 3 K-steps
    a, b, c, rep, ptx = run_on_emulator(arch, 256, 256, 192, 13)
    check_product(a, b, c)
    loop = sass.ptx_loop_lines(ptx)
    if "mbarrier" in ptx:       # sm_90a: TMA into the images, wgmma reads them (no race
        # check through mbarriers on the emulator; the copies are the TMA unit's, not lines')
        assert "cp.async.bulk.tensor" in ptx
        assert rep.bank_conflicts_in(loop) == 0
        return
    assert rep.race_check == "checked: no shared-memory race"
    assert loop, "no main loop in the PTX"
    in_loop_shared = [n for n in loop if n in rep.shared_lines]
    in_loop_global = [n for n in loop if n in rep.global_lines]
    assert in_loop_shared and in_loop_global, "the main loop does no memory traffic?"
    assert rep.bank_conflicts_in(loop) == 0, {n: rep.shared_lines[n] for n in in_loop_shared}
    assert rep.coalescing_in(loop) >= 0.9, rep.coalescing_in(loop)


@pytest.mark.slow
@pytest.mark.parametrize("arch", ARCHS)
def test_emulator_ragged_without_races(arch):
    a, b, c, rep, _ = run_on_emulator(arch, 127, 129, 65, 14)
    check_product(a, b, c)
    assert rep.race_check == "checked: no shared-memory race"


@needs_sass
@pytest.mark.parametrize("arch", ARCHS)
def test_no_more_instructions_per_k_step_than_triton(arch):
    # Triton 3.9's mma.sync kernel for the same tile (the emulator fixture, assembled by the
    # same nvJitLink for the same arch): 336 SASS instructions per K-step on sm_80
    from tilelang.codegen.target.link import link_ptx
    ptx = (ROOT / "tests" / "emulator" / "fixtures" / "triton_matmul_sm80.ptx").read_text()
    theirs = sass.summarize(sass.disassemble(link_ptx(ptx, get_target(arch)).cubin)["tiled_matmul"])
    k_step = 128 * 128 * 64 // 4
    ours = sass_of(arch).per_k_step(k_step)
    assert ours is not None, "no main loop with multiply-adds in our SASS"
    assert ours[0] <= theirs.per_k_step(k_step)[0], (ours, theirs.per_k_step(k_step))
