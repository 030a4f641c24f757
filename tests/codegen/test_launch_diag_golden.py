"""One golden rendered diagnostic per launch-contract rule (seed 002_a8aa28be357af1ac.txt
verifier rules, seed 000_b9a08466c2c6e888.txt tier caps and WGMMA shape rule). Each golden is
`tests/codegen/golden/launch/diag_<name>.txt`; TILE_UPDATE_GOLDEN=1 rewrites them."""

from __future__ import annotations

import os
import pathlib

import pytest

from test_launch_support import launch
from tilelang.codegen.contract import CodegenFeatures, decide_contract
from tilelang.sema.launch_attrs import resolve_launch
from tilelang.codegen.target.ptx_header import directive_lines
from tilelang.targets import get_target, validate_target
from tilelang.diagnostics import DiagnosticSink, Span, TileError, remember_source, render

GOLDEN = pathlib.Path(__file__).parent / "golden" / "launch"

WG = CodegenFeatures(wgmma=True, explicit_wgmma_request=True, accumulator_regs=128)

# name: (source line, target, features) -> every diagnostic it produces, rendered
RULES = {
    "E0701_unknown_key": ("@launch(reqntid = 128, warps = 4)", "sm_90a", None),
    "E0702_wrong_kind": ("@launch(blocksareclusters = 1, reqntid = 128)", "sm_90a", None),
    "E0703_dims": ("@launch(maxntid = (128, 1, 1, 1))", "sm_90a", None),
    "E0704_cluster_3": ("@launch(cluster = (2, 1), reqntid = 128)", "sm_90a", None),
    "E0705_cta_limit": ("@launch(maxntid = (32, 32, 2))", "sm_90a", None),
    "E0706_reqntid_gt_maxntid": ("@launch(maxntid = 128, reqntid = 256)", "sm_90a", None),
    "E0707_blocksareclusters": ("@launch(blocksareclusters, cluster = (1, 1, 1))", "sm_90a",
                                None),
    "E0708_cluster_size": ("@launch(cluster = (2, 2, 4), reqntid = 128)", "sm_90a", None),
    "E0709_maxclusterrank": ("@launch(num_ctas = 8, maxclusterrank = 4)", "sm_90a", None),
    "E0710_minctasm": ("@launch(occupancy = 0)", "sm_90a", None),
    "E0711_maxnreg": ("@launch(maxnreg = 16)", "sm_90a", None),
    "E0712_num_ctas": ("@launch(num_ctas = 6)", "sm_90a", None),
    "E0713_twice": ("@launch(cluster = (2, 1, 1), num_ctas = 2)", "sm_90a", None),
    "E0714_by_target_empty": ("@launch(maxnreg = by_target())", "sm_80", None),
    "E0715_opt_level": ("@launch(opt_level = 4)", "sm_90a", None),
    "E0716_wgmma_shape": ("@launch(reqntid = (64, 1, 1))", "sm_90a", WG),
    "E0716_wgmma_sm120a": ("@launch(reqntid = (128, 1, 1))", "sm_120a", WG),
    "E0720_cluster_dropped": ("@launch(num_ctas = 2, reqntid = 128)", "sm_86", None),
    "E0721_wgmma_fallback": ("@launch(maxntid = (192, 1, 1))", "sm_90a",
                             CodegenFeatures(wgmma=True, accumulator_regs=64)),
    "E0722_maxntid_implied": ("@launch(maxntid = 256, reqntid = 128)", "sm_90a", None),
    "E0723_maxclusterrank_implied": ("@launch(num_ctas = 2, maxclusterrank = 8)", "sm_90", None),
    "E0725_by_target_unknown": ("@launch(maxnreg = by_target(sm_99 = 64, default = 32))",
                                "sm_90a", None),
}


def diagnose(line: str, target: str, features) -> str:
    try:
        spec = resolve_launch(launch(line), get_target(target))
        c = decide_contract("k", spec, features, get_target(target))
        sink = DiagnosticSink()
        directive_lines(c, get_target(target), sink)
        diags = list(c.diagnostics) + sink.diagnostics
    except TileError as e:
        diags = e.diagnostics
    return "\n\n".join(render(d) for d in diags) + "\n"


@pytest.mark.parametrize("name", sorted(RULES))
def test_rule_golden(name):
    text = diagnose(*RULES[name])
    assert f"[{name[:5]}]" in text.split("\n", 1)[0]
    path = GOLDEN / f"diag_{name}.txt"
    if os.environ.get("TILE_UPDATE_GOLDEN"):
        path.write_text(text)
    assert text == path.read_text()


@pytest.mark.parametrize("name,target,features", [
    ("E0751_arch_specific", "sm_90", ["setmaxnreg"]),
    ("E0751_wgmma_sm120a", "sm_120a", ["wgmma"]),
    ("E0751_tcgen05_sm120a", "sm_120a", ["tcgen05"]),
    ("E0752_newer_sm", "sm_89", ["tma"]),
    ("E0753_toolchain", "sm_90", ["blocksareclusters"]),
])
def test_target_rule_golden(name, target, features):
    remember_source("cli", f"tilec --target {target} k.tile\n")
    span = Span("cli", 1, 16, 1, 16 + len(target))
    try:
        validate_target(target, features, span=span, max_ptx=(8, 8))
        text = "accepted\n"
    except TileError as e:
        text = "\n\n".join(render(d) for d in e.diagnostics) + "\n"
    path = GOLDEN / f"diag_{name}.txt"
    if os.environ.get("TILE_UPDATE_GOLDEN"):
        path.write_text(text)
    assert text == path.read_text()
    assert f"[{name[:5]}]" in text
