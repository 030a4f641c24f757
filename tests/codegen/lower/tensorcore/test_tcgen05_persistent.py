"""The tcgen05 accumulator pipeline (docs/codegen.md, "sm_100a"; plan/loops.py R13):
examples/matmul_persistent.tile on sm_100a (192 threads) runs its loop over output tiles in a
producer warp (the ring's copies), an MMA warp (tile i's MMAs into TMEM accumulator i mod 2)
and four epilogue warps (accumulator i mod 2 read out, reset, released, stored) at once, so
that a tile's stores overlap the next tile's MMAs (lower/tensorcore/tcgen05_persistent.py).
Results on the emulator, with its race checker, against NumPy; the PTX's protocol; the plan;
nvJitLink's assembly."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import numpy as np
import pytest

from wgmma_support import compile_for, product_bound, run

ROOT = Path(__file__).resolve().parents[4]
SRC = (ROOT / "examples" / "matmul_persistent.tile").read_text()
assert "reqntid = by_target(sm_100a = (192, 1, 1)" in SRC


def _arrays(m, n, k, seed, dtype=np.float16, exact=True):
    rng = np.random.default_rng(seed)
    if exact:               # small integers: every product and partial sum exact in f32
        a = rng.integers(-3, 4, (m, k)).astype(dtype)
        b = rng.integers(-3, 4, (k, n)).astype(dtype)
    else:
        a = rng.standard_normal((m, k)).astype(dtype)
        b = rng.standard_normal((k, n)).astype(dtype)
    return {"a": a, "b": b, "c": np.full((m, n), np.nan, np.float32)}


@pytest.mark.parametrize("m,n,k,blocks,dtype,exact", [
    (256, 256, 128, 1, "f16", True),     # four tiles on one block: each accumulator twice
    (384, 256, 448, 2, "f16", True),     # three tiles a block, 7 K-steps in 3 stages: the
                                         # ring's slot and phase carry from tile to tile
    (300, 200, 200, 2, "f16", False),    # ragged on every side
    (200, 136, 8, 3, "f16", True),       # K below one step
    (128, 256, 64, 4, "bf16", False),    # more blocks than tiles: two run no tile at all
])
def test_matches_numpy(m, n, k, blocks, dtype, exact):
    src = SRC
    npdt = np.float16
    if dtype == "bf16":
        import ml_dtypes
        src, npdt = SRC.replace("f16", "bf16"), ml_dtypes.bfloat16
    arrays = _arrays(m, n, k, m + n + k, npdt, exact)
    res, rep = run(src, "matmul_persistent", arrays, (blocks,), target="sm_100a",
                   race_check=True)
    assert ".reqntid 192, 1, 1" in res.ptx and "tcgen05.mma" in res.ptx
    assert rep.race_check == "checked: no shared-memory race"
    a, b = arrays["a"], arrays["b"]
    want = a.astype(np.float64) @ b.astype(np.float64)
    if exact:
        assert np.array_equal(arrays["c"], want)
    else:
        assert (np.abs(arrays["c"] - want) <= product_bound(a, b)).all()


@pytest.mark.parametrize("bm,bn,m,n,k,blocks,columns", [
    (64, 128, 200, 256, 136, 2, 256),    # M = 64: lanes 0-15 of each quarter, N columns each
    (128, 64, 256, 200, 64, 3, 128),     # N = 64: two accumulators in 128 columns
])
def test_other_tiles(bm, bn, m, n, k, blocks, columns):
    arrays = _arrays(m, n, k, bm + bn)
    res, rep = run(SRC, "matmul_persistent", arrays, (blocks,), target="sm_100a",
                   race_check=True, defines={"BM": str(bm), "BN": str(bn)})
    assert re.search(r"tcgen05\.alloc\.cta_group::1\.sync\.aligned\.shared::cta\.b32 "
                     rf"\[%r\d+\], {columns};", res.ptx)
    assert "mbarrier.arrive.shared::cta.b64" in res.ptx     # the epilogue's release
    assert rep.race_check == "checked: no shared-memory race"
    assert np.array_equal(arrays["c"], arrays["a"].astype(np.float64) @
                          arrays["b"].astype(np.float64))


def test_protocol():
    ptx = compile_for(SRC, "matmul_persistent", _arrays(256, 256, 256, 0),
                      target="sm_100a").ptx
    # two 128-column accumulators in one allocation
    assert "tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%r" in ptx
    assert re.search(r"tcgen05\.alloc\.cta_group::1\.sync\.aligned\.shared::cta\.b32 "
                     r"\[%r\d+\], 256;", ptx)
    # the MMA warp: four MMAs a stage committed to its empty mbarrier, and a commit to the
    # tile's acc_full; the epilogue warps: one read of their rows a tile, the reset, the
    # release (every one of the 128 threads arrives on acc_empty)
    assert len(re.findall(r"tcgen05\.mma\.cta_group::1\.kind::f16 ", ptx)) == 4
    assert ptx.count("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64"
                     ) == 2
    inits = re.findall(r"mbarrier\.init\.shared::cta\.b64 \[[^]]+\], (\d+);", ptx)
    assert inits.count("128") == 2
    assert ptx.count("tcgen05.ld.sync.aligned.32x32b.x128.b32") == 1
    assert "mbarrier.arrive.shared::cta.b64" in ptx
    # the ring's images in dynamic shared memory of their own (the epilogue's stores use
    # the scratch buffer while the producer copies)
    assert ".extern .shared .align 1024 .b8 __tile_dyn_matmul_persistent[]" in ptx
    assert ".local" not in ptx


def test_plan(tmp_path):
    from tilelang.cli import main
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main([str(ROOT / "examples" / "matmul_persistent.tile"), "--arch", "sm_100a",
                     "--emit", "plan"]) in (0, None)
    text = out.getvalue()
    assert "the tcgen05 accumulator pipeline: the producer, MMA and epilogue warps each run " \
           "this loop over output tiles (R13)" in text
    assert "warp-specialized: yes; inside another run-time loop; 2 TMEM accumulators" in text


@pytest.mark.parametrize("change", [
    ("by_target(sm_100a = (192, 1, 1), default = (128, 1, 1))", "(128, 1, 1)"),
    ("        store(c, index = (mn[0], mn[1]), tile = acc);\n",
     "        if mn[1] >= 0 {\n            store(c, index = (mn[0], mn[1]), tile = acc);\n"
     "        }\n"),
])
def test_other_persistent_loops_keep_one_accumulator(change):
    # 128 threads: no producer and MMA warps; a branch after the ring: the epilogue warps'
    # part must be straight-line ops (R13)
    src = SRC.replace(*change)
    assert src != SRC
    ptx = compile_for(src, "matmul_persistent", _arrays(256, 256, 128, 0),
                      target="sm_100a").ptx
    assert "tcgen05.mma" in ptx
    assert re.search(r"tcgen05\.alloc\.cta_group::1\.sync\.aligned\.shared::cta\.b32 "
                     r"\[%r\d+\], 128;", ptx)


def test_sass_loops():
    from tilelang import nvjitlink as lib
    from tilelang.tools import sass
    try:
        lib.library()
    except lib.NvJitLinkUnavailable:
        pytest.skip("nvJitLink is not installed")
    if not sass.tools_available():
        pytest.skip("cuobjdump / nvdisasm are not installed")
    from tilelang.driver import compile_source
    from tilelang.options import CompileOptions
    res = compile_source(SRC, "matmul_persistent.tile", CompileOptions(target="sm_100a"),
                         until="cubin")
    assert res.ok
    r = res.link.resources["matmul_persistent"]
    assert (r.spill_stores, r.spill_loads, r.stack_frame) == (0, 0, 0)
    ins = sass.disassemble(res.link.cubin)["matmul_persistent"]
    loops = sass.loops(ins)
    # the MMA warp's K loop: four UTCHMMA and no copies; the producer's: copies and no MMAs
    # (LLVM unrolls it by two: three copies a K-step, A and B's two panels)
    mma = [lp for lp in loops if any(i.op == "UTCHMMA" for i in lp.instrs)]
    copies = [lp for lp in loops if any(i.op == "UTMALDG" for i in lp.instrs)]
    assert mma and copies
    assert not any(i.op == "UTMALDG" for lp in mma for i in lp.instrs)
    assert min(len(lp.instrs) for lp in mma if sum(i.op == "UTCHMMA"
                                                   for i in lp.instrs) == 4) < 60
