"""Persistent kernels (issue 16 scope 3): examples/matmul_persistent.tile loops over output
tiles in grouped order (std.grid.grouped) with the matmul's TMA + wgmma ring inside the
outer run-time loop. The ring carries on across tiles (wgmma_product.tma_loop: mbarriers of
their own initialized once, the stage and phase parity kept from one tile to the next, the
images reused); results on the emulator against NumPy, with fewer blocks than tiles, more,
and ragged edges."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from wgmma_support import run

ROOT = Path(__file__).resolve().parents[4]
SRC = (ROOT / "examples" / "matmul_persistent.tile").read_text()
SMALL = {"BM": "64", "BN": "64", "BK": "32", "GROUP_M": "2"}


def _run(m, n, k, blocks, defines, seed=0, race_check=True):
    rng = np.random.default_rng(seed)
    a = rng.integers(-3, 4, (m, k)).astype(np.float16)
    b = rng.integers(-3, 4, (k, n)).astype(np.float16)
    arrays = {"a": a, "b": b, "c": np.full((m, n), np.nan, np.float32)}
    res, _ = run(SRC, "matmul_persistent", arrays, (blocks,), defines=defines,
                 race_check=race_check)
    assert np.array_equal(arrays["c"], a.astype(np.float64) @ b.astype(np.float64))
    return res


@pytest.mark.parametrize("m,n,k,blocks", [
    (128, 192, 96, 2),      # 2 x 3 tiles over 2 blocks: 3 tiles each, the ring wraps across
    (200, 136, 104, 5),     # 4 x 3 ragged tiles over 5 blocks (3 or 2 each)
    (64, 64, 64, 3),        # one tile: two blocks have none
    (130, 72, 24, 4),       # K shorter than one step: zero-filled, one iteration per tile
])
def test_matches_numpy(m, n, k, blocks):
    # (the race checker does not model mbarriers: it checks these launches' other shared
    # memory traffic, the epilogue's, only)
    _run(m, n, k, blocks, SMALL)


def test_operands_through_registers():
    # rows of 40 and 140 bytes: no TMA nor cp.async, both operands go through registers into
    # their images on every step, inside the loop over tiles. (Not race-checked: the checker
    # flags two warps' 2-byte stores into one 4-byte word, which this staging makes)
    _run(130, 70, 20, 4, SMALL, race_check=False)


def test_default_tiles():
    # the example's own 128 x 128 x 64 tiles and group of 8 rows: 2 x 2 tiles over 3 blocks
    _run(256, 256, 192, 3, {})


def test_ring_carried_across_tiles():
    res = _run(128, 192, 96, 2, SMALL)
    ptx = res.ptx
    # the stage's mbarriers live in a buffer of their own (8 bytes per stage), are
    # initialized by one block of code (run once) and never invalidated between tiles
    stages = int(re.search(r"\.shared \.align 8 \.b8 __tile_kept\d+_matmul_persistent\[(\d+)\]",
                           ptx).group(1)) // 8
    assert stages >= 2 and ptx.count("mbarrier.init.shared::cta.b64") == stages
    assert "mbarrier.inval" not in ptx
    # the carried stage and phase live in registers (LLVM promoted their slots)
    assert ".local" not in ptx


def test_no_spill_warning():
    # the accumulator's zeros, hoisted out of the loop over tiles, hold no registers (W0787
    # warned of 380 bytes of spills once; ptxas allocates 154 registers and spills none)
    from tilelang.driver import compile_source
    from tilelang.options import CompileOptions
    res = compile_source(SRC, "matmul_persistent.tile", CompileOptions(target="sm_90a"),
                         until="cubin")
    assert res.ok and not res.diagnostics, [d.message for d in res.diagnostics]
    r = res.link.resources["matmul_persistent"]
    assert (r.spill_stores, r.spill_loads) == (0, 0)


@pytest.mark.gpu
def test_matches_numpy_on_gpu():
    # the example at its own tiles, one block per SM of an H100/H200 (132) over 8 x 8 tiles
    # with ragged edges; eighths of small integers keep every sum exact in f32
    import tilelang
    mod = tilelang.compile(SRC, backend="cuda")
    rng = np.random.default_rng(0)
    m, n, k = 1000, 1000, 520
    a = (rng.integers(-8, 9, (m, k)) / 8).astype(np.float16)
    b = (rng.integers(-8, 9, (k, n)) / 8).astype(np.float16)
    da, db = (tilelang.to_device(x, backend=mod.backend) for x in (a, b))
    dc = tilelang.to_device(np.full((m, n), np.nan, np.float32), backend=mod.backend)
    mod.matmul_persistent[(132,)](da, db, dc)
    mod.backend.synchronize()
    assert np.array_equal(np.asarray(dc), a.astype(np.float64) @ b.astype(np.float64))


def test_a_replicating_warp_group_does_not_copy_again():
    # 384 threads inside the loop over tiles: the ring is the carried one (not specialized),
    # and the third warp group, a replica of the first, issues no TMA of its own
    src = SRC.replace("by_target(sm_100a = (192, 1, 1), default = (128, 1, 1))",
                      "(384, 1, 1)")
    assert src != SRC
    rng = np.random.default_rng(4)
    a = rng.integers(-3, 4, (200, 104)).astype(np.float16)
    b = rng.integers(-3, 4, (104, 136)).astype(np.float16)
    arrays = {"a": a, "b": b, "c": np.full((200, 136), np.nan, np.float32)}
    res, rep = run(src, "matmul_persistent", arrays, (3,), defines=SMALL)
    assert "setmaxnreg" not in res.ptx
    assert np.array_equal(arrays["c"], a.astype(np.float64) @ b.astype(np.float64))
    # 4 x 3 tiles of 4 K-steps: 48 stages announced, an A and a B tile each, by one thread
    ops = rep.instructions
    assert ops["mbarrier.arrive.expect_tx.shared::cta.b64"] == 48
    assert sum(n for o, n in ops.items()
               if o.startswith("cp.async.bulk.tensor.2d.shared::cluster.global")) == 96
