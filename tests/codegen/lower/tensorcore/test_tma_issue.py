"""Who issues a CTA's TMA copies (lower/tensorcore/tma_load.issuer): the thread that `elect.sync` picks
in warp 0, elected once at the kernel's entry. Under `tid == 0` ptxas proved the matmul
ring's issue block single-threaded but not the persistent matmul's, and wrapped each copy in
an ELECT loop over the active threads; these tests pin the election (PTX shape), that one
thread issues each copy once (instructions executed on the emulator, results against NumPy,
replica warp groups included) and, where cuobjdump is installed, the SASS of the rings."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from tilelang.tools import sass
from wgmma_support import compile_for, one_group_matmul, run

ROOT = Path(__file__).resolve().parents[4]
PERSISTENT = (ROOT / "examples" / "matmul_persistent.tile").read_text()
MATMUL = one_group_matmul()
SMALL = {"BM": "64", "BN": "64", "BK": "32", "GROUP_M": "2"}
LOAD = "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
ELECT = "{ .reg .pred p; .reg .b32 l; elect.sync l|p, -1; selp.u32"

needs_sass = pytest.mark.skipif(not sass.tools_available(),
                                reason="cuobjdump/nvdisasm wheels not installed")


def _operands(m, n, k, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.integers(-3, 4, (m, k)).astype(np.float16)
    b = rng.integers(-3, 4, (k, n)).astype(np.float16)
    return a, b, {"a": a, "b": b, "c": np.full((m, n), np.nan, np.float32)}


def _entry(ptx: str) -> str:
    """The kernel body's text before its first label (the entry block)."""
    body = ptx[ptx.index("{", ptx.index(".entry")):]
    return body[:body.index("$L__BB")]


def test_one_election_in_the_entry_block():
    _, _, arrays = _operands(128, 128, 128)
    ptx = compile_for(PERSISTENT, "matmul_persistent", arrays).ptx
    # three issue sites (two prologue stages, the loop's refill), one election
    assert ptx.count("elect.sync") == 1 and ELECT in _entry(ptx)
    assert ptx.count("mbarrier.arrive.expect_tx") == 3
    # the copies' boxes start at 32-bit products of the tile indices (no mul.wide + cvt)
    assert ptx.count(LOAD + " ") == 9


def test_multicast_reads_the_cluster_rank_once_in_the_entry_block():
    _, _, arrays = _operands(256, 256, 128)
    ptx = compile_for(MATMUL, "matmul", arrays).ptx
    assert ".multicast::cluster" in ptx
    assert ptx.count("%cluster_ctarank") == 1 and "%cluster_ctarank" in _entry(ptx)
    assert ptx.count("elect.sync") == 1 and ELECT in _entry(ptx)


@pytest.mark.parametrize("threads", [128, 384])
def test_persistent_ring_issues_each_copy_once(threads):
    # 2 x 3 tiles of 64 x 64 over 4 blocks, K = 96: 3 K-steps per tile. With 384 threads the
    # layouts use 256 and the third warp group replicates the first: warp 8 must not issue.
    m, n, k, blocks = 128, 192, 96, 4
    src = PERSISTENT.replace("by_target(sm_100a = (192, 1, 1), default = (128, 1, 1))",
                             f"({threads}, 1, 1)")
    assert src != PERSISTENT
    a, b, arrays = _operands(m, n, k)
    res, rep = run(src, "matmul_persistent", arrays, (blocks,), defines=SMALL)
    assert np.array_equal(arrays["c"], a.astype(np.float64) @ b.astype(np.float64))
    ops = rep.instructions
    stages = (m // 64) * (n // 64) * (k // 32)          # (tile, K-step) pairs, all blocks
    assert ops["mbarrier.arrive.expect_tx.shared::cta.b64"] == stages
    # one box of A (64 x 32) and one of B (32 x 64) per stage
    assert ops[LOAD] == 2 * stages
    assert ops["elect.sync"] == blocks * threads         # once per thread, at the entry


def test_multicast_ring_issues_each_copy_once_with_a_replica_group():
    # examples/matmul.tile's clusters of 2 along x, 384 threads (a replicating warp group):
    # each CTA announces each K-step once and copies its A box; each cluster's CTA 0
    # multicasts B (two boxes of 64 columns)
    src = MATMUL.replace("reqntid = (128, 1, 1)", "reqntid = (384, 1, 1)")
    M, N, K = 256, 256, 192
    a, b, arrays = _operands(M, N, K, seed=1)
    res, rep = run(src, "matmul", arrays, (2, 2))
    assert np.array_equal(arrays["c"], a.astype(np.float64) @ b.astype(np.float64))
    ops = rep.instructions
    blocks, steps = 4, K // 64
    assert ops["mbarrier.arrive.expect_tx.shared::cta.b64"] == blocks * steps
    assert ops[LOAD] == blocks * steps
    assert ops[LOAD + ".multicast::cluster"] == (blocks // 2) * steps * 2


def _main_loop(src: str, kernel: str):
    from tilelang.driver import compile_source
    from tilelang.options import CompileOptions
    res = compile_source(src, f"{kernel}.tile", CompileOptions(target="sm_90a"), until="cubin")
    assert res.ok
    instrs = sass.disassemble(res.cubin)[kernel]
    return sass.main_loop(instrs), sass.summarize(instrs)


@needs_sass
def test_persistent_loop_has_no_elect_loops_and_costs_what_the_matmul_ring_does():
    loop, s = _main_loop(PERSISTENT, "matmul_persistent")
    ops = s.loop_ops
    assert ops.get("UTMALDG", 0) == 3 and ops.get("HGMMA", 0) == 8
    assert "ELECT" not in ops, ops
    assert not [i for i in loop.instrs if i.opcode.startswith("BRA.U.ANY")]
    # the same ring without the loop over tiles: examples/matmul.tile without its cluster
    plain = re.sub(r",\s*cluster = \(2, 1, 1\)", "", MATMUL)
    assert "cluster" not in plain.split("kernel matmul")[0].split("@launch")[1]
    _, ref = _main_loop(plain, "matmul")
    step = 128 * 128 * 64 // 4
    assert s.per_k_step(step)[0] <= ref.per_k_step(step)[0], (s.loop_ops, ref.loop_ops)


@needs_sass
def test_multicast_loop_reads_no_special_register():
    _, s = _main_loop(MATMUL, "matmul")
    ops = s.loop_ops
    assert ops.get("UTMALDG", 0) == 3 and "ELECT" not in ops
    assert "S2UR" not in ops and "S2R" not in ops, ops


WS_MATMUL = MATMUL.replace("@launch(reqntid = (128, 1, 1), maxnreg = by_target(sm_90a = 168), cluster = (2, 1, 1))",
                           "@launch(reqntid = (384, 1, 1))")
WS_ATTENTION = (ROOT / "examples" / "attention.tile").read_text().replace(
    "@launch(reqntid = by_target(sm_90a = (256, 1, 1), default = (128, 1, 1)))", "@launch(reqntid = (384, 1, 1))")


def test_warp_specialized_producer_is_elected_and_descriptors_warp_uniform():
    _, _, arrays = _operands(256, 256, 256)
    ptx = compile_for(WS_MATMUL, "matmul", arrays).ptx
    assert ".reqntid 384, 1, 1" in ptx
    # the producer's issuing thread: elected in warp 8 (thread 256), the election the
    # kernel's one
    assert ptx.count("elect.sync") == 1 and ELECT in _entry(ptx)
    # the consumer warp group's row offset in A's image from lane 0's thread index
    assert ptx.count("shfl.sync.idx.b32") == 1


def test_warp_specialized_ring_issues_each_copy_once():
    m, n, k = 256, 128, 320
    a, b, arrays = _operands(m, n, k, seed=2)
    _, rep = run(WS_MATMUL, "matmul", arrays, (m // 128, n // 128))
    assert np.array_equal(arrays["c"], a.astype(np.float64) @ b.astype(np.float64))
    ops = rep.instructions
    stages = (m // 128) * (n // 128) * (k // 64)
    assert ops["mbarrier.arrive.expect_tx.shared::cta.b64"] == stages
    # per stage: A (128 x 64: one panel), B (64 x 128: two 64-column panels)
    assert ops[LOAD] == 3 * stages
    # the descriptors' shuffle: once per thread, before the split
    assert ops["shfl.sync.idx.b32"] == (m // 128) * (n // 128) * 384


@needs_sass
@pytest.mark.parametrize("src,kernel,defines", [
    (WS_MATMUL, "matmul", {}),
    (WS_ATTENTION, "attention", {"BM": "128", "BN": "64", "D": "64", "CAUSAL": "false"}),
], ids=["matmul", "attention"])
def test_warp_specialized_sass(src, kernel, defines):
    from tilelang.driver import compile_source
    from tilelang.options import CompileOptions
    res = compile_source(src, f"{kernel}.tile", CompileOptions(target="sm_90a", defines=defines),
                         kernels=[kernel], until="cubin")
    assert res.ok
    instrs = sass.disassemble(res.cubin)[kernel]
    # the producer issues each copy once: no ELECT loop anywhere
    assert not [i for i in instrs if i.opcode.startswith("BRA.U.ANY")]
    # the consumers' loop keeps its descriptors in uniform registers
    ops = sass.summarize(instrs).loop_ops
    assert ops.get("HGMMA", 0) > 0 and ops.get("R2UR", 0) <= 1, ops


STRAIGHT = """
@launch(reqntid = (128, 1, 1))
kernel one(a: Array[f16, 2], b: Array[f16, 2], c: Array[f32, 2]) {
    let m = bid(0);
    let t = load(a, index = (m, 0), shape = (64, 64)) @ load(b, index = (0, 0), shape = (64, 64));
    store(c, index = (m, 0), tile = t);
}
"""


def test_store_issued_from_the_entry_block():
    # no loop and no branch before the epilogue: the TMA store's election lands in the block
    # being emitted (the entry), ahead of everything else in it
    m, blocks = 192, 3
    a, b, arrays = _operands(m, 64, 64, seed=3)
    res, rep = run(STRAIGHT, "one", arrays, (blocks,))
    assert np.array_equal(arrays["c"], a.astype(np.float64) @ b.astype(np.float64))
    ptx = res.ptx
    assert ptx.count("elect.sync") == 1 and ELECT in _entry(ptx)
    assert _entry(ptx).index(ELECT) < _entry(ptx).index("%tid.x")
    store = "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group"
    panels = ptx.count(store)
    assert panels >= 1 and rep.instructions[store] == blocks * panels
