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
