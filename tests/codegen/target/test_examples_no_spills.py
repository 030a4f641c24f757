"""Every example, linked by nvJitLink for sm_80, sm_90a, sm_100a, sm_120 and sm_120a, uses
no local memory: no spill stores, no spill loads and no stack frame in any kernel (ptxas's
verbose report, `LinkResult.resources`; `tilec --report` shows the same figures).

A `maxnreg` written for one target must be given for that target only (`by_target`,
docs/launch.md), and the caps the compiler chooses itself (the launch contract's warp-group MMA
default, codegen/target/register_fit.py) are dropped where they spill and no cap does not."""

from __future__ import annotations

import pathlib

import pytest

from tilelang.driver import compile_source
from tilelang.options import CompileOptions

ROOT = pathlib.Path(__file__).resolve().parents[3]
EXAMPLES = sorted(str(p.relative_to(ROOT)) for p in
                  [*ROOT.glob("examples/*.tile"), *ROOT.glob("examples/torch/*.tile"),
                   *ROOT.glob("examples/distributed/*.tile")])
TARGETS = ("sm_80", "sm_90a", "sm_100a", "sm_120", "sm_120a")
# multimem (NVLink SHARP) is sm_90+: E0752 below, as tests/codegen/lower/test_ops_multimem.py
# checks
NOT_ON = {"examples/distributed/all_reduce_multimem.tile": ("sm_80",)}


@pytest.fixture(scope="module")
def nvjitlink():
    from tilelang import nvjitlink as lib
    try:
        lib.library()
    except lib.NvJitLinkUnavailable:
        pytest.skip("nvJitLink is not installed")


def test_the_examples_are_all_here():
    assert len(EXAMPLES) >= 20 and "examples/torch/mlp.tile" in EXAMPLES


@pytest.mark.parametrize("example,target", [(e, t) for e in EXAMPLES for t in TARGETS
                                            if t not in NOT_ON.get(e, ())])
def test_no_local_memory(example, target, nvjitlink):
    path = ROOT / example
    res = compile_source(path.read_text(encoding="utf-8"), str(path),
                         CompileOptions(target=target), until="cubin")
    assert res.ok, [d.render() if hasattr(d, "render") else str(d) for d in res.diagnostics]
    assert res.link.backend == "nvjitlink"
    assert res.link.resources, "ptxas reported no kernels"
    local = {name: (r.spill_stores, r.spill_loads, r.stack_frame)
             for name, r in res.link.resources.items()
             if r.spill_stores or r.spill_loads or r.stack_frame}
    assert local == {}, f"(spill stores, spill loads, stack frame) bytes on {target}: {local}"
