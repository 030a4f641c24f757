"""TMA multicast on sm_100a (docs/codegen.md, "sm_100a"; plan/loops.py R4): a warp-specialized
tcgen05 ring (192 threads) in a cluster whose CTAs share an operand's tile, and that is not a
CTA pair, copies the shared operand once per sub-group, by the sub-group's issuing CTA into
every CTA of it (lower/tensorcore/tma_multicast.py); each MMA thread releases a stage to
every CTA it shares stages with (`tcgen05.commit...multicast::cluster`), and the producers
wait for the releases of the last stages before the mbarriers are invalidated
(lower/tensorcore/tcgen05_ws.py).

examples/matmul.tile with BN = 64 (one panel of B: no CTA pair) in its clusters of two along
x shares B; clusters of two along y share A; 2 x 2 clusters share both (each CTA releases
its stages to three). Results on the emulator, with its race checker, against NumPy."""

from __future__ import annotations

import contextlib
import io
import re

import numpy as np
import pytest

from wgmma_support import compile_for, one_group_matmul, product_bound, run

WS = one_group_matmul().replace("reqntid = (128, 1, 1)", "reqntid = (192, 1, 1)")
assert WS != one_group_matmul()


def _src(cluster: str, bn: int) -> str:
    src = WS.replace("cluster = (2, 1, 1)", f"cluster = {cluster}")
    return src.replace("const BN: i32 = 128", f"const BN: i32 = {bn}")


def _arrays(m, n, k, seed, exact=True):
    rng = np.random.default_rng(seed)
    if exact:               # small integers: every product and partial sum exact in f32
        a = rng.integers(-3, 4, (m, k)).astype(np.float16)
        b = rng.integers(-3, 4, (k, n)).astype(np.float16)
    else:
        a = rng.standard_normal((m, k)).astype(np.float16)
        b = rng.standard_normal((k, n)).astype(np.float16)
    return {"a": a, "b": b, "c": np.full((m, n), np.nan, np.float32)}


@pytest.mark.parametrize("cluster,bn,m,n,k,exact", [
    ((2, 1, 1), 64, 256, 128, 448, True),    # B shared along x; 7 K-steps in 4 stages
    ((2, 1, 1), 64, 300, 104, 200, False),   # ragged, the second cluster's odd CTA past M
    ((1, 2, 1), 128, 128, 256, 64, True),    # A shared along y; one K-step
    ((2, 2, 1), 64, 300, 200, 136, True),    # both shared, ragged, K not a whole step
])
def test_matches_numpy(cluster, bn, m, n, k, exact):
    src = _src(str(cluster), bn)
    arrays = _arrays(m, n, k, seed=m + n + k, exact=exact)
    cx, cy, _ = cluster
    grid = (cx * -(-m // (128 * cx)), cy * -(-n // (bn * cy)))
    res, rep = run(src, "matmul", arrays, grid, target="sm_100a", race_check=True)
    assert "multicast::cluster" in res.ptx and "cta_group::2" not in res.ptx
    assert rep.race_check == "checked: no shared-memory race"
    a, b = arrays["a"], arrays["b"]
    want = a.astype(np.float64) @ b.astype(np.float64)
    if exact:
        assert np.array_equal(arrays["c"], want)
    else:
        assert (np.abs(arrays["c"] - want) <= product_bound(a, b)).all()


@pytest.mark.parametrize("cluster,bn,releases", [
    ((2, 1, 1), 64, 2), ((1, 2, 1), 128, 2), ((2, 2, 1), 64, 3)])
def test_protocol(cluster, bn, releases):
    ptx = compile_for(_src(str(cluster), bn), "matmul", _arrays(256, 256, 256, 0),
                      target="sm_100a").ptx
    assert ".reqntid 192, 1, 1" in ptx
    assert ".reqnctapercluster {}, {}, {}".format(*cluster) in ptx
    # every stage released to the CTAs this one shares stages with; the accumulator's
    # completion to this CTA alone
    assert ptx.count("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster."
                     "multicast::cluster.b64") == 1
    assert ptx.count("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster."
                     "b64") == 1
    # full[s] count 1, empty[s] one per releasing CTA
    inits = re.findall(r"mbarrier\.init\.shared::cta\.b64 \[[^]]+\], (\d+);", ptx)
    assert inits.count(str(releases)) >= 3 and "fence.mbarrier_init.release.cluster;" in ptx
    assert re.search(r"cp\.async\.bulk\.tensor\.2d\.shared::cluster\.global\.mbarrier::"
                     r"complete_tx::bytes\.multicast::cluster", ptx)
    # the producer's tail hands over to the epilogue warps before they invalidate
    assert "barrier.arrive 2, 160;" in ptx and "barrier.sync 2, 160;" in ptx
    assert ptx.index("barrier.sync 2, 160;") < ptx.index("mbarrier.inval")
    assert ".local" not in ptx


def test_plan_says_multicast(tmp_path):
    from tilelang.cli import main
    path = tmp_path / "matmul.tile"
    path.write_text(_src("(2, 2, 1)", 64))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main([str(path), "--arch", "sm_100a", "--emit", "plan"]) in (0, None)
    assert "multicast: cluster 2x2x1, shared axes y, axes x; warp-specialized: yes\n" in \
        out.getvalue()
    path.write_text(_src("(2, 1, 1)", 64))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main([str(path), "--arch", "sm_100a", "--emit", "plan"]) in (0, None)
    assert "multicast: cluster 2x1x1, shared -, axes x; warp-specialized: yes; not a CTA " \
           "pair: B's tile is not an even number of panels along N" in out.getvalue()


@pytest.mark.parametrize("change", [
    ("reqntid = (192, 1, 1)", "reqntid = (128, 1, 1)"),   # one issuing thread: no multicast
    ("const BN: i32 = 64", "const BN: i32 = 128"),        # two panels of B: the CTA pair
])
def test_other_rings_do_not_multicast(change):
    src = _src("(2, 1, 1)", 64).replace(*change)
    ptx = compile_for(src, "matmul", _arrays(256, 256, 128, 0), target="sm_100a").ptx
    assert "tcgen05.mma" in ptx
    assert "tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.multicast" \
        not in ptx
    assert not re.search(r"complete_tx::bytes\.multicast::cluster", ptx)
