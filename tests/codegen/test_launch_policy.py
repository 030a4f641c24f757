"""The decision policy: seed 000_b9a08466c2c6e888.txt "Kernel Attribute Decision" and seed
002_a8aa28be357af1ac.txt "How tileiras chooses each directive": `.reqntid` when the generated code
relies on the exact thread count, `.maxntid` otherwise; warp-group MMA needs a multiple of 128
threads (refused when explicitly requested, else mma.sync with a note); `.maxnreg` for
warp-group MMA = accumulator + working registers + slack."""

from __future__ import annotations

import pytest

from test_launch_support import launch
from tilelang.codegen.contract import (WGMMA_SLACK_REGS, WGMMA_WORKING_REGS, CodegenFeatures,
                                       decide_contract, wgmma_maxnreg)
from tilelang.sema.launch_attrs import resolve_launch
from tilelang.targets import get_target
from tilelang.diagnostics import (InternalCompilerError, Severity, Span, TileLaunchError,
                                  render)

KSPAN = Span("k.tile", 2, 1, 2, 7)


def decide(line: str | None, features: CodegenFeatures | None, target: str = "sm_90a"):
    spec = resolve_launch(launch(line), get_target(target)) if line else None
    return decide_contract("k", spec, features, get_target(target), kernel_span=KSPAN)


def test_adaptive_kernel_gets_maxntid_only():
    """Elementwise code: the same cubin serves every smaller launch shape."""
    c = decide(None, CodegenFeatures(threads=(256, 1, 1)))
    assert (c.attrs.maxntid, c.attrs.reqntid) == ((256, 1, 1), None)
    assert c.spans["maxntid"] == KSPAN


def test_default_shape_without_any_input():
    c = decide(None, None)
    assert (c.attrs.maxntid, c.attrs.reqntid) == ((128, 1, 1), None)


@pytest.mark.parametrize("flag", ["warp_specialized", "named_barriers", "cross_warp_reduction"])
def test_exact_thread_count_code_gets_reqntid(flag):
    c = decide(None, CodegenFeatures(threads=(256, 1, 1), **{flag: True}))
    assert (c.attrs.maxntid, c.attrs.reqntid) == (None, (256, 1, 1))


def test_wgmma_gets_reqntid_and_maxnreg():
    c = decide(None, CodegenFeatures(wgmma=True, threads=(128, 1, 1), accumulator_regs=128))
    assert c.use_wgmma and c.attrs.reqntid == (128, 1, 1) and c.attrs.maxnreg == 168
    assert c.attrs.maxntid is None


def test_user_maxntid_kept_next_to_forced_reqntid():
    c = decide("@launch(maxntid = (512, 1, 1))",
               CodegenFeatures(threads=(256, 1, 1), named_barriers=True))
    assert c.attrs.maxntid == (512, 1, 1) and c.attrs.reqntid == (256, 1, 1)


def test_user_maxntid_alone_is_the_adaptive_bound():
    c = decide("@launch(maxntid = 256)", None)
    assert (c.attrs.maxntid, c.attrs.reqntid) == ((256,), None)


def test_user_reqntid_is_kept_even_for_adaptive_code():
    c = decide("@launch(reqntid = (64, 2))", CodegenFeatures())
    assert (c.attrs.maxntid, c.attrs.reqntid) == (None, (64, 2))


def test_explicit_wgmma_with_wrong_shape_refused():
    with pytest.raises(TileLaunchError) as e:
        decide("@launch(reqntid = (96, 1, 1))",
               CodegenFeatures(wgmma=True, explicit_wgmma_request=True, accumulator_regs=64))
    [d] = e.value.diagnostics
    assert render(d) == """\
error[E0716]: warp-group MMA needs a multiple of 128 threads per CTA, but the block shape \
(96, 1, 1) has 96
 --> k.tile:1:9
  |
1 | @launch(reqntid = (96, 1, 1))
  |         ^^^^^^^^^^^^^^^^^^^^ not a whole number of warp groups
  |
  = help: use a thread shape whose product is a multiple of 128, e.g. `reqntid = (128, 1, 1)`"""


def test_implicit_wgmma_with_wrong_shape_falls_back_with_note():
    c = decide("@launch(maxntid = (96, 1, 1))", CodegenFeatures(wgmma=True, accumulator_regs=64))
    assert not c.use_wgmma
    assert (c.attrs.maxntid, c.attrs.reqntid, c.attrs.maxnreg) == ((96, 1, 1), None, None)
    [n] = c.diagnostics
    assert n.severity is Severity.NOTE and n.code == "E0721"
    assert render(n) == """\
note[E0721]: warp-group MMA needs a multiple of 128 threads per CTA, but the block shape \
(96, 1, 1) has 96; using mma.sync instead
 --> k.tile:1:9
  |
1 | @launch(maxntid = (96, 1, 1))
  |         ^^^^^^^^^^^^^^^^^^^^"""


def test_wgmma_on_target_without_it():
    c = decide(None, CodegenFeatures(wgmma=True, threads=(128, 1, 1)), "sm_90")
    assert not c.use_wgmma and c.diagnostics[0].code == "E0721"
    assert "needs sm_90a, but the target is sm_90" in c.diagnostics[0].message
    with pytest.raises(TileLaunchError) as e:
        decide(None, CodegenFeatures(wgmma=True, explicit_wgmma_request=True,
                                     threads=(128, 1, 1)), "sm_80")
    assert e.value.code == "E0716"
    assert e.value.diagnostics[0].help == "compile with `--target sm_90a`"


def test_multiple_of_128_in_several_axes_is_fine():
    c = decide("@launch(reqntid = (64, 4, 1))",
               CodegenFeatures(wgmma=True, explicit_wgmma_request=True, accumulator_regs=32))
    assert c.use_wgmma and c.attrs.maxnreg == 72


@pytest.mark.parametrize("acc,expected", [(128, 168), (64, 104), (0, 40), (32, 72), (100, 144),
                                          (214, 255), (250, 255)])
def test_maxnreg_formula(acc, expected):
    """accumulator + WGMMA_WORKING_REGS (32) + WGMMA_SLACK_REGS (8), rounded up to 8, <= 255."""
    assert (WGMMA_WORKING_REGS, WGMMA_SLACK_REGS) == (32, 8)
    assert wgmma_maxnreg(acc) == expected


def test_user_maxnreg_wins_over_formula():
    c = decide("@launch(maxnreg = 200, reqntid = 128)",
               CodegenFeatures(wgmma=True, accumulator_regs=128))
    assert c.attrs.maxnreg == 200


def test_no_maxnreg_without_wgmma():
    assert decide(None, CodegenFeatures(threads=(128, 1, 1), accumulator_regs=64)).attrs.maxnreg \
        is None


def test_codegen_threads_must_match_reqntid():
    with pytest.raises(InternalCompilerError) as e:
        decide("@launch(reqntid = 128)", CodegenFeatures(threads=(256, 1, 1)))
    assert e.value.code == "E0799"
    with pytest.raises(InternalCompilerError):
        decide("@launch(maxntid = 128)", CodegenFeatures(threads=(256, 1, 1)))
    decide("@launch(reqntid = 128)", CodegenFeatures(threads=(128, 1, 1)))


def test_grid_constant_and_features():
    c = decide("@launch(cluster = (2, 1, 1), blocksareclusters, reqntid = 128)",
               CodegenFeatures(wgmma=True, grid_constant=(2,)))
    assert c.attrs.grid_constant == (2,)
    assert c.features(get_target("sm_90a")) == {"wgmma", "cluster", "blocksareclusters"}
    assert c.features(get_target("sm_80")) == {"wgmma"}
    assert c.threads == (128,)
