"""benchmarks/gemm_pick.py: examples/matmul.tile's defaults are the tuner's cost-model pick for
a 4096^3 product on sm_90a among the configurations that compile for every target, and the
figures the pick rests on hold (the model prefers larger tiles and the cluster's multicast;
a 128 x 256 tile does not fit the shared memory of every target)."""

from __future__ import annotations

import pathlib
import sys

import pytest

from tilelang.tools import sass

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks import gemm_pick as gp                          # noqa: E402


def test_example_defaults_are_read_from_the_example():
    d = gp.example_defaults()
    text = (ROOT / "examples" / "matmul.tile").read_text()
    assert f"const BN: i32 = {d.bn}," in text and f"reqntid = ({d.threads}, 1, 1)" in text
    # the candidate's source is the example with only its launch line replaced
    c = gp.Candidate(128, 256, 64, 256, 1)
    src = gp.source(c)
    assert src.count("@launch(") == 1 and "@launch(reqntid = (256, 1, 1)" in src
    assert src.replace(c.launch, "") == gp._LAUNCH.sub("", text, count=1)


@pytest.mark.slow
@pytest.mark.skipif(not sass.tools_available(), reason="cuobjdump/nvdisasm wheels not installed")
def test_the_example_default_is_the_pick():
    rows = gp.rank()
    cost = {c: v for c, v, _, _ in rows}
    fits = {c: f for c, _, _, f in rows}
    assert gp.pick(rows) == gp.example_defaults()
    # a 128 x 256 tile (48 KiB a stage) is cheaper in the model but does not fit every target
    wide = gp.Candidate(128, 256, 64, 256, 2)
    assert cost[wide] < cost[gp.example_defaults()] and not fits[wide]
    # the multicast halves B's traffic: clusters are cheaper at the same tile
    assert cost[gp.Candidate(128, 128, 64, 128, 2)] < cost[gp.Candidate(128, 128, 64, 128, 1)]
    for c, _, m, _ in rows:
        assert m["spills"] == 0, c
