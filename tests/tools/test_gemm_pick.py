"""benchmarks/gemm_pick.py: examples/matmul.tile's sm_90a defaults are the tuner's
cost-model pick for a 4096^3 product among the candidates that compile for sm_90a, every other
target keeps 128 x 128 x 64 over one warp group (the example's `const`s and `@launch` are
`by_target`); and the figures the pick rests on hold (the model prefers larger tiles and the
cluster's multicast; a 128 x 256 tile does not fit every target)."""

from __future__ import annotations

import pathlib
import sys

import pytest

from tilelang.tools import sass

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks import gemm_pick as gp                          # noqa: E402


def test_example_defaults_are_read_per_target():
    text = (ROOT / "examples" / "matmul.tile").read_text()
    assert "const BN: i32 = by_target(sm_90a = 256, default = 128)," in text
    assert gp.example_defaults("sm_90a") == gp.Candidate(128, 256, 128, 256, 2)
    for target in ("sm_80", "sm_86", "sm_89"):                 # no clusters there (E0720)
        assert gp.example_defaults(target) == gp.Candidate(128, 128, 64, 128, 1), target
    for target in ("sm_90", "sm_120"):
        assert gp.example_defaults(target) == gp.Candidate(128, 128, 64, 128, 2), target
    # sm_100a: the same tile with a TMA producer and an MMA warp (the warp-specialized tcgen05
    # ring, on the cluster's CTA pair: benchmarks/results/blackwell-static-2026-11-29-cpu.md)
    assert gp.example_defaults("sm_100a") == gp.Candidate(128, 128, 64, 192, 2)


def test_candidate_source_replaces_only_the_launch():
    text = (ROOT / "examples" / "matmul.tile").read_text()
    c = gp.Candidate(128, 256, 64, 256, 1)
    src = gp.source(c)
    assert src.count("@launch(") == 1 and "@launch(reqntid = (256, 1, 1)" in src
    assert src.replace(c.launch, "") == gp._LAUNCH.sub("", text, count=1)
    assert "by_target(sm_90a = (256, 1, 1)" not in src


@pytest.mark.slow
@pytest.mark.skipif(not sass.tools_available(), reason="cuobjdump/nvdisasm wheels not installed")
def test_the_example_defaults_are_the_picks():
    rows = gp.rank()
    cost = {c: v for c, v, _, _ in rows}
    fits = {c: ok for c, _, _, ok in rows}
    assert gp.pick(rows) == gp.example_defaults("sm_90a")
    # a 128 x 256 tile (48 KiB a stage at BK = 64, 96 KiB at 128) is cheaper in the model
    # but does not fit every target
    wide = gp.Candidate(128, 256, 64, 256, 2)
    assert cost[wide] < cost[gp.Candidate(128, 128, 64, 128, 2)]
    assert "sm_86" not in fits[wide] and "sm_90a" in fits[wide]
    # the multicast halves B's traffic: clusters are cheaper at the same tile
    assert cost[gp.Candidate(128, 128, 64, 128, 2)] < cost[gp.Candidate(128, 128, 64, 128, 1)]
    for c, _, m, _ in rows:
        assert m["spills"] == 0, c
