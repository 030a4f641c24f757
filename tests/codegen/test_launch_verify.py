"""Cross-attribute verifier rules (seed 002_a8aa28be357af1ac.txt "The verifier enforces the shape
rules that matter"; seed 000_b9a08466c2c6e888.txt tier caps: 1024 threads per CTA, 8 CTAs per
portable cluster). Each rule has an accepting and a rejecting case; diagnostics point at the
attribute's span."""

from __future__ import annotations

import pytest

from test_launch_support import launch
from tilelang.codegen.contract import NvvmAttrs, decide_contract, verify_attrs
from tilelang.sema.launch_attrs import resolve_launch
from tilelang.diagnostics import TileLaunchError, render
from tilelang.targets import get_target


def contract(line: str, target: str = "sm_90a", features=None):
    tgt = get_target(target)
    return decide_contract("k", resolve_launch(launch(line), tgt), features, tgt)


def rejected(line: str, target: str = "sm_90a", features=None):
    with pytest.raises(TileLaunchError) as e:
        contract(line, target, features)
    return e.value.diagnostics


@pytest.mark.parametrize("ok", ["(1024, 1, 1)", "(1, 1024, 1)", "(16, 1, 64)", "(32, 32)",
                                "1024", "(8, 8, 16)"])
def test_cta_limits_accept(ok):
    contract(f"@launch(reqntid = {ok})")
    contract(f"@launch(maxntid = {ok})")


@pytest.mark.parametrize("bad", ["(1025, 1, 1)", "(1, 2048)", "(1, 1, 65)", "(64, 32)",
                                 "(2048,)", "(16, 16, 8)"])
def test_cta_limits_reject(bad):
    for key in ("reqntid", "maxntid"):
        assert [d.code for d in rejected(f"@launch({key} = {bad})")] == ["E0705"]


def test_cta_limit_rendered():
    [d] = rejected("@launch(reqntid = (64, 32))")
    assert render(d) == """\
error[E0705]: `reqntid = (64, 32)` exceeds the CTA limits (2048 threads > 1024)
 --> k.tile:1:9
  |
1 | @launch(reqntid = (64, 32))
  |         ^^^^^^^^^^^^^^^^^^ too many threads for one CTA
  |
  = help: a CTA holds at most 1024 threads, with x, y <= 1024 and z <= 64"""
    [d] = rejected("@launch(maxntid = (1, 1, 65))")
    assert d.message == "`maxntid = (1, 1, 65)` exceeds the CTA limits (z = 65 > 64)"


def test_reqntid_within_maxntid_both_kept():
    c = contract("@launch(maxntid = (256, 4), reqntid = (256, 2, 1))")
    assert c.attrs.maxntid == (256, 4) and c.attrs.reqntid == (256, 2, 1)
    assert c.attrs.format() == "nvvm.kernel\nnvvm.maxntid = [256, 4]\nnvvm.reqntid = [256, 2, 1]"


def test_reqntid_above_maxntid_rejected():
    [d] = rejected("@launch(maxntid = (128, 1), reqntid = (64, 2, 2))")
    assert render(d) == """\
error[E0706]: `reqntid` y = 2 exceeds `maxntid` y = 1
 --> k.tile:1:29
  |
1 | @launch(maxntid = (128, 1), reqntid = (64, 2, 2))
  |                             ^^^^^^^^^^^^^^^^^^^^ larger than maxntid
 ::: k.tile:1:9
  |
1 | @launch(maxntid = (128, 1), reqntid = (64, 2, 2))
  |         ^^^^^^^^^^^^^^^^^^ upper bound given here
  |
  = help: the exact shape must fit inside the upper bound"""


def test_blocksareclusters_accepts_with_reqntid_and_cluster():
    c = contract("@launch(blocksareclusters, reqntid = 128, cluster = (2, 1, 1))")
    assert c.attrs.blocksareclusters


@pytest.mark.parametrize("line,missing", [
    ("@launch(blocksareclusters, reqntid = 128)", "`cluster`"),
    ("@launch(blocksareclusters, cluster = (1, 1, 1))", "`reqntid`"),
    ("@launch(blocksareclusters)", "`reqntid` and `cluster`"),
    ("@launch(blocksareclusters, maxntid = 128, cluster = (1, 1, 1))", "`reqntid`"),
])
def test_blocksareclusters_requires_reqntid_and_cluster(line, missing):
    [d] = rejected(line)
    assert d.code == "E0707" and d.message == f"`blocksareclusters` needs {missing}"


def test_blocksareclusters_rendered():
    [d] = rejected("@launch(reqntid = 128, blocksareclusters)")
    assert render(d) == """\
error[E0707]: `blocksareclusters` needs `cluster`
 --> k.tile:1:24
  |
1 | @launch(reqntid = 128, blocksareclusters)
  |                        ^^^^^^^^^^^^^^^^^ missing cluster
  |
  = help: give the exact block shape (`reqntid`) and the cluster shape (`cluster`) with it"""


@pytest.mark.parametrize("cluster", ["(8, 1, 1)", "(2, 2, 2)", "(1, 1, 1)", "(4, 2, 1)"])
def test_portable_cluster_accepted(cluster):
    contract(f"@launch(cluster = {cluster})")


@pytest.mark.parametrize("cluster", ["(16, 1, 1)", "(3, 3, 1)", "(2, 2, 4)"])
def test_nonportable_cluster_needs_flag(cluster):
    [d] = rejected(f"@launch(cluster = {cluster})")
    assert d.code == "E0708"
    assert d.help == ("at most 8 CTAs per cluster are portable; add `nonportable_cluster` for "
                      "up to 16")
    contract(f"@launch(cluster = {cluster}, nonportable_cluster)")


def test_cluster_over_16_rejected_even_nonportable():
    [d] = rejected("@launch(cluster = (4, 4, 2), nonportable_cluster)")
    assert render(d) == """\
error[E0708]: `cluster = (4, 4, 2)` has 32 CTAs, more than 16
 --> k.tile:1:9
  |
1 | @launch(cluster = (4, 4, 2), nonportable_cluster)
  |         ^^^^^^^^^^^^^^^^^^^ cluster too large
  |
  = help: at most 16 CTAs per cluster"""


def test_num_ctas_16_needs_nonportable():
    assert [d.code for d in rejected("@launch(num_ctas = 16)")] == ["E0708"]
    assert contract("@launch(num_ctas = 16, nonportable_cluster)").attrs.cluster_dim == (16, 1, 1)


def test_maxclusterrank_at_least_cluster_size():
    contract("@launch(cluster = (2, 2, 1), maxclusterrank = 4)")
    contract("@launch(cluster = (2, 2, 1), maxclusterrank = 8)")
    [d] = rejected("@launch(cluster = (2, 2, 1), maxclusterrank = 2)")
    assert render(d) == """\
error[E0709]: `maxclusterrank = 2` is smaller than the cluster size 4
 --> k.tile:1:30
  |
1 | @launch(cluster = (2, 2, 1), maxclusterrank = 2)
  |                              ^^^^^^^^^^^^^^^^^^ below the cluster size
 ::: k.tile:1:9
  |
1 | @launch(cluster = (2, 2, 1), maxclusterrank = 2)
  |         ^^^^^^^^^^^^^^^^^^^ a cluster of 4 CTAs
  |
  = help: use `maxclusterrank = 4` or more, or drop it"""


def test_maxclusterrank_above_8_needs_nonportable():
    assert [d.code for d in rejected("@launch(maxclusterrank = 12)")] == ["E0708"]
    assert contract("@launch(maxclusterrank = 12, nonportable_cluster)").attrs.maxclusterrank == 12


def test_verify_attrs_directly_collects_every_violation():
    """The verifier also guards nvvm.* sets built by the compiler, not only @launch input."""
    bad = NvvmAttrs(maxntid=(2048,), reqntid=(0,), maxclusterrank=20, minctasm=0, maxnreg=8,
                    blocksareclusters=True)
    with pytest.raises(TileLaunchError) as e:
        verify_attrs(bad)
    assert [d.code for d in e.value.diagnostics] == \
        ["E0705", "E0703", "E0708", "E0707", "E0710", "E0711"]
    verify_attrs(NvvmAttrs(reqntid=(128, 1, 1), maxnreg=168, cluster_dim=(2, 1, 1)))


def test_printer_shows_every_attribute():
    a = NvvmAttrs(maxntid=(256,), reqntid=(128, 1, 1), minctasm=2, maxnreg=168,
                  cluster_dim=(2, 1, 1), maxclusterrank=4, blocksareclusters=True,
                  grid_constant=(1, 3))
    assert a.format() == """\
nvvm.kernel
nvvm.maxntid = [256]
nvvm.reqntid = [128, 1, 1]
nvvm.minctasm = 2
nvvm.maxnreg = 168
nvvm.cluster_dim = [2, 1, 1]
nvvm.maxclusterrank = 4
nvvm.blocksareclusters
nvvm.grid_constant = [1, 3]"""
    assert str(NvvmAttrs(reqntid=(128, 1, 1))) == "{nvvm.kernel, nvvm.reqntid = [128, 1, 1]}"
