"""benchmarks/attention_static.py measures each forward configuration at its own warps, never
at examples/attention.tile's default: `with_threads` sets the example's launch width whatever
form it is written in (a `by_target` per target, or one tuple), and the compiled kernel has it."""

from __future__ import annotations

import pathlib
import re
import sys

import pytest

from tilelang.driver import compile_source
from tilelang.options import CompileOptions

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _bench():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import attention_static
    return attention_static


@pytest.mark.parametrize("src", [
    "@launch(reqntid = by_target(sm_90a = (256, 1, 1), default = (128, 1, 1)))\nkernel k() {}",
    "@launch(reqntid = (128, 1, 1))\nkernel k() {}",
    "@launch(reqntid = ( 256 , 1, 1), maxnreg = by_target(sm_90a = 168))\nkernel k() {}"])
def test_with_threads_replaces_either_form(src):
    out = _bench().with_threads(src, 384)
    assert re.findall(r"reqntid = \([^)]*\)", out) == ["reqntid = (384, 1, 1)"]
    assert out.endswith(")\nkernel k() {}")                      # the rest as it was
    assert ("maxnreg = by_target(sm_90a = 168)" in out) == ("maxnreg" in src)


def test_with_threads_refuses_a_source_without_a_launch_width():
    with pytest.raises(SystemExit, match="no `reqntid = ...` to set"):
        _bench().with_threads("kernel k() {}", 128)


def test_the_five_configurations_compile_at_their_own_warps():
    # the example's sm_90a default is 8 warps; the 4-warp rows must still get 128 threads
    bench = _bench()
    src = (ROOT / "examples" / "attention.tile").read_text()
    assert len(bench.FORWARD) == 5
    for f in bench.FORWARD:
        res = compile_source(bench.with_threads(src, 32 * f.warps), "attention.tile",
                             CompileOptions(target="sm_90a", defines={
                                 "BM": str(f.BM), "BN": str(f.BN), "D": str(f.D),
                                 "CAUSAL": "true" if f.causal else "false"}),
                             kernels=["attention"], until="ptx")
        assert res.ok, f.name
        assert f".reqntid {32 * f.warps}, 1, 1" in res.ptx, f.name


def test_sm100a_rows_count_the_unmasked_tcgen05_loop(monkeypatch):
    # --arch sm_100a: the loop with the most UTCHMMA, the shorter of the two (the unmasked
    # one), a key tile being D / 16 + BN / 16 of them; no spills and S, P, O in tensor memory
    from tilelang import nvjitlink as lib
    from tilelang.tools import sass
    try:
        lib.library()
    except lib.NvJitLinkUnavailable:
        pytest.skip("nvJitLink is not installed")
    if not sass.tools_available():
        pytest.skip("cuobjdump/nvdisasm not installed")
    bench = _bench()
    monkeypatch.setattr(bench, "ARCH", "sm_100a")
    assert bench.forward_configs() == bench.FORWARD_SM100
    f = bench.FORWARD_SM100[1]                      # D = 64, causal: two key loops
    shared: dict = {}
    ptx = bench.tile_forward(f, shared)
    # Q's image and one K or V image, and the 16 bytes of mbarrier and TMEM address
    assert "tcgen05.mma" in ptx and shared["tile"] == 32 * 1024 + 16
    m = bench.forward_stats(ptx, f)
    assert m["spills"] == 0 and m["local"] == 0
    assert m["utchmma"] == (f.D + f.BN) // 16                  # one key tile per iteration
    assert 0 < m["per_step"] < 2000
