"""TMA multicast across a cluster on sm_90a (issue 16, scope 1): in a kernel that declares a
cluster shape, a TMA ring operand whose tile is the same for every CTA of the cluster is
copied once, by the cluster's CTA 0, with `.multicast::cluster` and the mask of every CTA;
the mbarrier init is published to the cluster and the ring's barriers become cluster
barriers (lower/tensorcore/tma_multicast.py).

Results are the emulator's (its multicast writes each CTA of the mask and completes the
bytes on each CTA's mbarrier, clusters and cluster barriers follow the PTX ISA) against
NumPy, exact (operands are multiples of 1/8 in [-1, 1]: every sum is exact in f32), under
the race checker."""

from __future__ import annotations

import re
import shutil
import subprocess

import numpy as np
import pytest

from test_tma_store import padded, product, run_views
from test_wgmma import MATMUL, operands
from wgmma_support import compile_for

needs_ptxas = pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas not on PATH")
MULTICAST = re.compile(r"cp\.async\.bulk\.tensor\.2d\.shared::cluster\.global\."
                       r"mbarrier::complete_tx::bytes\.multicast::cluster \[%r\d+\], "
                       r"\[(%rd\d+), \{%r\d+, %r\d+\}\], \[%r\d+\], %rs\d+;")


def arrays_for(M, N, K):
    a, b = operands((M, K), (K, N))
    return a, b, {"a": padded(a, -K % 8 + 8), "b": padded(b, -N % 8 + 8),
                  "c": padded(np.full((M, N), np.nan, np.float32), -N % 4 + 4)}


def copies(ptx: str) -> tuple[int, int]:
    """(multicast copies, plain copies) of the TMA loads."""
    loads = re.findall(r"cp\.async\.bulk\.tensor\.2d\.shared::cluster\.global\.\S+", ptx)
    mc = sum("multicast::cluster" in t for t in loads)
    return mc, len(loads) - mc


def test_ptx_structure():
    # examples/matmul.tile: clusters of 2 CTAs along x (m); both CTAs of a cluster read the
    # same B tiles (index (k, n)), not the same A tiles (index (m, k))
    _, _, arrays = arrays_for(256, 256, 256)
    ptx = compile_for(MATMUL, "matmul", arrays).ptx
    # B is 2 boxes of 64 columns per stage, issued at 3 places (2 prologue stages, the loop);
    # A one box, by every CTA
    assert copies(ptx) == (2 * 3, 1 * 3)
    # the mask names both CTAs; the copy is issued by the cluster's CTA 0 only (were both
    # to issue it, each mbarrier would get twice B's bytes: the emulator tests below report
    # that as a tx-count underflow)
    assert re.search(r"mov\.b16 \s*%rs\d+, 3;", ptx)
    assert "%cluster_ctarank" in ptx
    assert "fence.mbarrier_init.release.cluster;" in ptx
    # the setup's barrier is a cluster barrier (mbarriers initialized before any multicast
    # or remote arrival); the loop keeps its CTA barrier
    assert ptx.count("barrier.cluster.arrive.aligned;") == 1
    assert ptx.count("barrier.cluster.wait.aligned;") == 1
    # 3 full + 3 empty mbarriers, the empty ones counting the cluster's 2 CTAs
    assert ptx.count("mbarrier.init.shared::cta.b64") == 6
    assert len(re.findall(r"mbarrier\.init\.shared::cta\.b64 \[%r\d+\], 2;", ptx)) == 3
    assert ptx.count("mbarrier.inval.shared::cta.b64") == 6
    order = ["mbarrier.init", "fence.mbarrier_init.release.cluster", "barrier.cluster.arrive",
             "barrier.cluster.wait", "multicast::cluster"]
    pos = [ptx.find(s) for s in order]
    assert -1 not in pos and pos == sorted(pos), list(zip(order, pos))
    # in the loop: the CTA barrier, every CTA's release of the slot to CTA 0 (a remote
    # arrive on CTA 0's empty mbarrier), CTA 0's wait for all of them, then the copies
    body = ptx[ptx.rfind("wgmma.wait_group.sync.aligned 1"):]
    order = ["bar.sync", "mbarrier.arrive.shared::cluster.b64 _,",
             "mbarrier.try_wait.parity.shared::cta.b64", "mbarrier.arrive.expect_tx",
             "multicast::cluster"]
    pos = [body.find(s) for s in order]
    assert -1 not in pos and pos == sorted(pos), list(zip(order, pos))
    # the remote address is CTA 0's first empty mbarrier mapped once before the loop (one
    # `mapa`) plus the slot's offset: no `mapa` in the loop
    assert ptx.count("mapa.shared::cluster.u32") == 1
    assert "mapa" not in ptx[ptx.find("wgmma.mma_async"):]


def test_no_multicast_without_a_cluster():
    src = MATMUL.replace(", cluster = (2, 1, 1)", "")
    _, _, arrays = arrays_for(256, 256, 256)
    ptx = compile_for(src, "matmul", arrays).ptx
    assert copies(ptx) == (0, 3 * 3)
    assert "barrier.cluster" not in ptx and "fence.mbarrier_init" not in ptx


def test_square_matches_numpy():
    a, b, arrays = arrays_for(256, 256, 320)
    res, _ = run_views(MATMUL, "matmul", arrays, (2, 2), race_check=True)
    assert copies(res.ptx)[0] > 0
    assert np.array_equal(arrays["c"], product(a, b))


def test_ragged_and_odd_grid():
    # 200 x 136 x 200: 2 x 2 tiles; M = 200 is 2 tile rows (one cluster), and with 3 tile
    # rows the grid is padded to 4 so the last cluster's second CTA lies wholly outside
    for M in (200, 300):
        a, b, arrays = arrays_for(M, 136, 200)
        run_views(MATMUL, "matmul", arrays, (-(-M // 128), 2))
        assert np.array_equal(arrays["c"], product(a, b)), M


def test_cluster_along_y_shares_a():
    # clusters of 2 CTAs along y (n): now the A tiles are common and the B tiles are not
    src = MATMUL.replace("cluster = (2, 1, 1)", "cluster = (1, 2, 1)")
    a, b, arrays = arrays_for(256, 384, 192)
    res, _ = run_views(src, "matmul", arrays, (2, 3), race_check=True)
    # A: 1 box per stage, multicast; B: 2 boxes, each CTA its own
    assert copies(res.ptx) == (1 * 3, 2 * 3)
    assert np.array_equal(arrays["c"], product(a, b))


@pytest.mark.parametrize("M,N", [(256, 256), (300, 200)])
def test_2x2_cluster_shares_a_along_y_and_b_along_x(M, N):
    # each operand is common to a sub-group of the cluster: A to the CTAs of one m (a
    # column of the cluster), B to those of one n; each sub-group's first CTA multicasts it
    # with a partial mask and waits for its sub-group's releases on its own empty mbarriers
    src = MATMUL.replace("cluster = (2, 1, 1)", "cluster = (2, 2, 1)")
    a, b, arrays = arrays_for(M, N, 192)
    res, _ = run_views(src, "matmul", arrays, (-(-M // 128), -(-N // 128)), race_check=True)
    assert copies(res.ptx) == (1 * 3 + 2 * 3, 0)
    # 3 full mbarriers, then 3 empty ones per pattern, each counting its 2 CTAs
    assert len(re.findall(r"mbarrier\.init\.shared::cta\.b64 \[%r\d+\], 2;", res.ptx)) == 6
    assert np.array_equal(arrays["c"], product(a, b))


NONUNIFORM = """
@launch(reqntid = (128, 1, 1), cluster = (2, 1, 1))
kernel skew(a: Array[f16, 2], b: Array[f16, 2], c: Array[f32, 2]) {
    let m = bid(0);
    let n = bid(1);
    var acc = zeros((128, 128), f32);
    // the B tile row depends on m (the clustered axis): the CTAs of a cluster differ
    for k in range(num_tiles(a, axis = 1, shape = (128, 64))) {
        let ta = load(a, index = (m, k), shape = (128, 64), padding = 0);
        let tb = load(b, index = (k + m % 2, n), shape = (64, 128), padding = 0);
        acc = mma(ta, tb, acc);
    }
    store(c, index = (m, n), tile = acc);
}
"""


def test_tile_depending_on_the_clustered_axis_is_not_multicast():
    a, b, arrays = arrays_for(256, 128, 192)
    # b has one extra tile row of K so that m % 2 = 1 reads inside
    b2 = operands((256, 128), (256, 128))[1]
    arrays["b"] = padded(b2, 8)
    res, _ = run_views(NONUNIFORM, "skew", arrays, (2, 1), race_check=True)
    assert copies(res.ptx) == (0, 3 * 3) and "barrier.cluster" not in res.ptx
    want = np.zeros((256, 128))
    for m in range(2):
        rows = slice(128 * m, 128 * (m + 1))
        bm = b2.astype(np.float64)[64 * (m % 2):64 * (m % 2) + 192]
        want[rows] = a.astype(np.float64)[rows] @ bm
    assert np.array_equal(arrays["c"], want)


def test_loop_bound_depending_on_the_clustered_axis_is_not_multicast():
    src = NONUNIFORM.replace("k + m % 2", "k").replace(
        "range(num_tiles(a, axis = 1, shape = (128, 64)))",
        "range(num_tiles(a, axis = 1, shape = (128, 64)) - m % 2)")
    a, b, arrays = arrays_for(256, 128, 192)
    res, _ = run_views(src, "skew", arrays, (2, 1))
    assert copies(res.ptx)[0] == 0 and "barrier.cluster" not in res.ptx
    want = product(a, b)
    want[128:] = product(a[128:, :128], b[:128])        # m = 1 skips the last K tile
    assert np.array_equal(arrays["c"], want)


@needs_ptxas
@pytest.mark.parametrize("cluster", ["(2, 1, 1)", "(2, 2, 1)"])
def test_ptxas_accepts(tmp_path, cluster):
    _, _, arrays = arrays_for(256, 256, 256)
    p = tmp_path / "m.ptx"
    src = MATMUL.replace("cluster = (2, 1, 1)", f"cluster = {cluster}")
    p.write_text(compile_for(src, "matmul", arrays).ptx)
    out = subprocess.run(["ptxas", "-arch=sm_90a", "-v", str(p), "-o", str(tmp_path / "m.o")],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "0 bytes spill stores, 0 bytes spill loads" in out.stderr, out.stderr


@pytest.mark.gpu
@pytest.mark.parametrize("cluster", ["(2, 1, 1)", "(1, 2, 1)", "(2, 2, 1)"])
def test_matches_numpy_on_gpu(cluster):
    # the driver's tensor maps and a real cluster launch: B (x), A (y) or both multicast
    import tilelang
    mod = tilelang.compile(MATMUL.replace("cluster = (2, 1, 1)", f"cluster = {cluster}"),
                           backend="cuda")
    M, N, K = 1000, 1000, 520
    a, b = operands((M, K), (K, N))
    full = np.full((M, N + 8), np.nan, np.float32)
    dc = tilelang.to_device(full, backend=mod.backend)
    gx, gy = -(-M // 128), -(-N // 128)
    cx, cy = int(cluster[1]), int(cluster[4])
    gx, gy = gx + -gx % cx, gy + -gy % cy
    mod.matmul[(gx, gy)](tilelang.to_device(a, backend=mod.backend),
                         tilelang.to_device(b, backend=mod.backend), dc[:, :N])
    mod.backend.synchronize()
    got = np.asarray(dc)
    assert np.array_equal(got[:, :N], product(a, b)) and np.isnan(got[:, N:]).all()


def test_a_replicating_warp_group_neither_releases_nor_copies_again():
    # 384 threads: the layouts use 256, the third warp group replicates the first; only the
    # block's thread 0 (not its replica, thread 256) may release a slot to the issuer,
    # announce a stage and issue its copies (a replica's second release completes the
    # issuer's empty phase early and its copies land twice: the launch hangs)
    src = MATMUL.replace("reqntid = (128, 1, 1)", "reqntid = (384, 1, 1)")
    M, N, K = 256, 256, 320
    a, b, arrays = arrays_for(M, N, K)
    res, rep = run_views(src, "matmul", arrays, (2, 2))
    assert np.array_equal(arrays["c"], product(a, b))
    ops = rep.instructions
    blocks, steps, stages = 4, K // 64, 3
    load = "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
    # every CTA announces each of its K-steps once and copies its own A box (one per step);
    # each cluster's CTA 0 multicasts B (two boxes of 64 columns per step)
    assert ops["mbarrier.arrive.expect_tx.shared::cta.b64"] == blocks * steps
    assert ops[load] == blocks * steps
    assert ops[load + ".multicast::cluster"] == (blocks // 2) * steps * 2
    # every CTA releases each refilled slot (iterations S-1 .. steps-1) once
    assert ops["mbarrier.arrive.shared::cluster.b64"] == blocks * (steps - (stages - 1))
