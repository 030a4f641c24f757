"""@launch attribute resolution: keys, aliases, value kinds, ranges and by_target (language.md §8;
seed 002_a8aa28be357af1ac.txt: dimensional attributes hold 1-3 ints, cluster exactly 3).
Every rejection points at the attribute's span."""

from __future__ import annotations

import pytest

from test_launch_support import launch
from tilelang.sema.launch_attrs import AttrValue, ByTarget, LaunchSpec, resolve_launch
from tilelang.diagnostics import Span, TileLaunchError, TileUsageError, render
from tilelang.options import CompileOptions
from tilelang.targets import get_target


def errors(line: str, target: str = "sm_90a") -> list:
    with pytest.raises(TileLaunchError) as e:
        resolve_launch(launch(line), get_target(target))
    return e.value.diagnostics


def codes(line: str, target: str = "sm_90a") -> list[str]:
    return [d.code for d in errors(line, target)]


def test_accepts_every_key():
    spec = resolve_launch(launch(
        "@launch(maxntid = (256, 2), reqntid = (128, 2, 1), minctasm = 2, maxnreg = 128, "
        "cluster = (2, 1, 1), maxclusterrank = 4, blocksareclusters, nonportable_cluster, "
        "opt_level = 3)"), get_target("sm_90a"))
    assert spec == LaunchSpec(maxntid=(256, 2), reqntid=(128, 2, 1), minctasm=2, maxnreg=128,
                              cluster=(2, 1, 1), maxclusterrank=4, blocksareclusters=True,
                              nonportable_cluster=True, opt_level=3)
    assert spec.span("maxnreg") == Span("k.tile", 1, 66, 1, 79)


def test_single_int_thread_shape_and_occupancy_alias():
    spec = resolve_launch(launch("@launch(maxntid = 256, occupancy = 3)"), get_target("sm_80"))
    assert spec.maxntid == (256,) and spec.minctasm == 3
    assert spec.span("minctasm") is not None


def test_num_ctas_means_n_1_1():
    spec = resolve_launch(launch("@launch(num_ctas = 8)"), get_target("sm_90"))
    assert spec.cluster == (8, 1, 1) and spec.span("cluster") == spec.span("num_ctas")


@pytest.mark.parametrize("n", [1, 2, 4, 8, 16])
def test_num_ctas_powers_of_two_accepted(n):
    assert resolve_launch(launch(f"@launch(num_ctas = {n})"), get_target("sm_90")).cluster == \
        (n, 1, 1)


@pytest.mark.parametrize("n", [0, 3, 6, 32, -2])
def test_num_ctas_rejected(n):
    assert codes(f"@launch(num_ctas = {n})") == ["E0712"]


def test_unknown_key_rendered():
    [d] = errors("@launch(maxthreads = 128)")
    assert render(d) == """\
error[E0701]: unknown @launch attribute `maxthreads`
 --> k.tile:1:9
  |
1 | @launch(maxthreads = 128)
  |         ^^^^^^^^^^^^^^^^ unknown key
  |
  = help: known keys: maxntid, reqntid, minctasm, maxnreg, cluster, num_ctas, maxclusterrank, \
blocksareclusters, nonportable_cluster, opt_level, num_stages, precision, occupancy"""


@pytest.mark.parametrize("line,code", [
    ("@launch(maxnreg = (1, 2))", "E0702"),
    ("@launch(maxnreg = true)", "E0702"),
    ("@launch(blocksareclusters = 1)", "E0702"),
    ("@launch(nonportable_cluster = 0)", "E0702"),
    ("@launch(cluster = 2)", "E0702"),
    ("@launch(maxntid = 'x')", "E0702"),
    ("@launch(reqntid = (1.5, 1))", "E0702"),
    ("@launch(opt_level = 2.0)", "E0702"),
    ("@launch(reqntid = (True, 1))", "E0702"),
])
def test_wrong_kinds(line, code):
    assert codes(line) == [code]


def test_wrong_kind_rendered():
    [d] = errors("@launch(maxnreg = (1, 2))")
    assert render(d) == """\
error[E0702]: `maxnreg` expects an integer, found a tuple of 2
 --> k.tile:1:9
  |
1 | @launch(maxnreg = (1, 2))
  |         ^^^^^^^^^^^^^^^^ wrong kind of value"""


@pytest.mark.parametrize("line", ["@launch(maxntid = ())", "@launch(maxntid = (1, 2, 3, 4))",
                                  "@launch(reqntid = (0, 1))", "@launch(reqntid = -32)"])
def test_dims_need_1_to_3_positive(line):
    assert codes(line) == ["E0703"]


@pytest.mark.parametrize("line", ["@launch(cluster = (2, 1))", "@launch(cluster = (2,))",
                                  "@launch(cluster = (1, 1, 1, 1))", "@launch(cluster = (0, 1, 1))"])
def test_cluster_needs_exactly_3(line):
    assert codes(line) == ["E0704"]


def test_cluster_rendered():
    [d] = errors("@launch(cluster = (2, 1))")
    assert render(d) == """\
error[E0704]: `cluster` needs exactly 3 positive integers, found (2, 1)
 --> k.tile:1:9
  |
1 | @launch(cluster = (2, 1))
  |         ^^^^^^^^^^^^^^^^ not a 3-D cluster shape
  |
  = help: write it as `(x, y, z)`, e.g. `cluster = (2, 1, 1)`, or use `num_ctas = n`"""


@pytest.mark.parametrize("key,lo,hi,code", [("minctasm", 1, 32, "E0710"),
                                            ("occupancy", 1, 32, "E0710"),
                                            ("maxnreg", 24, 255, "E0711"),
                                            ("opt_level", 0, 3, "E0715"),
                                            ("maxclusterrank", 1, 16, "E0709")])
def test_scalar_ranges(key, lo, hi, code):
    for ok in (lo, hi):
        resolve_launch(launch(f"@launch({key} = {ok})"), get_target("sm_90a"))
    assert codes(f"@launch({key} = {lo - 1})") == [code]
    assert codes(f"@launch({key} = {hi + 1})") == [code]


def test_duplicate_via_alias_and_cluster_forms():
    ds = errors("@launch(minctasm = 2, occupancy = 3, cluster = (2, 1, 1), num_ctas = 2)")
    assert [d.code for d in ds] == ["E0713", "E0713"]
    assert render(ds[0]) == """\
error[E0713]: `occupancy` repeats `minctasm`
 --> k.tile:1:23
  |
1 | @launch(minctasm = 2, occupancy = 3, cluster = (2, 1, 1), num_ctas = 2)
  |                       ^^^^^^^^^^^^^ given twice
 ::: k.tile:1:9
  |
1 | @launch(minctasm = 2, occupancy = 3, cluster = (2, 1, 1), num_ctas = 2)
  |         ^^^^^^^^^^^^ `minctasm` given here
  |
  = help: keep only one of them"""


def test_all_errors_reported_together():
    assert codes("@launch(foo = 1, maxnreg = 7, cluster = (1, 2))") == ["E0701", "E0711", "E0704"]


# by_target ---------------------------------------------------------------------------------

LINE = "@launch(maxnreg = by_target(sm_90a = 168, default = 128))"


def test_by_target_picks_target_then_default():
    assert resolve_launch(launch(LINE), get_target("sm_90a")).maxnreg == 168
    assert resolve_launch(launch(LINE), get_target("sm_80")).maxnreg == 128


def test_by_target_value_checked_for_the_chosen_target_only():
    line = "@launch(maxnreg = by_target(sm_90a = 300, default = 128))"
    assert resolve_launch(launch(line), get_target("sm_80")).maxnreg == 128
    [d] = errors(line, "sm_90a")
    assert d.code == "E0711"
    assert render(d) == """\
error[E0711]: `maxnreg` must be between 24 and 255, found 300
 --> k.tile:1:29
  |
1 | @launch(maxnreg = by_target(sm_90a = 300, default = 128))
  |                             ^^^^^^^^^^^^ out of range
  |
  = help: ptxas accepts 24 to 255 registers per thread"""


def test_by_target_without_entry_or_default_leaves_the_attribute_unset():
    # as cuTile's ByTarget without a default: the value only for the targets named
    line = "@launch(cluster = by_target(sm_90a = (2, 1, 1)), maxnreg = by_target(sm_90a = 168))"
    on = resolve_launch(launch(line), get_target("sm_90a"))
    assert (on.cluster, on.maxnreg) == ((2, 1, 1), 168)
    off = resolve_launch(launch(line), get_target("sm_80"))
    assert (off.cluster, off.maxnreg) == (None, None)
    assert "maxnreg" not in off.spans and "cluster" not in off.spans


def test_by_target_empty():
    line = "@launch(maxnreg = by_target())"
    [d] = errors(line, "sm_90")
    assert render(d) == """\
error[E0714]: `by_target` gives `maxnreg` no value
 --> k.tile:1:19
  |
1 | @launch(maxnreg = by_target())
  |                   ^^^^^^^^^^^ no entries
  |
  = help: write `maxnreg = by_target(sm_90 = ..., default = ...)`, or leave `maxnreg` out"""


def test_by_target_unknown_target_name():
    assert codes("@launch(maxnreg = by_target(sm_91 = 64, default = 32))") == ["E0725"]


def test_by_target_with_raw_values_and_flags():
    attrs = {"blocksareclusters": AttrValue(ByTarget({"sm_90a": True}, None), None),
             "reqntid": AttrValue(ByTarget({"default": (128,)}), None)}
    spec = resolve_launch(attrs, get_target("sm_90a"))
    assert spec.blocksareclusters and spec.reqntid == (128,)


def test_unknown_target_is_usage_error():
    # a target is resolved once, where the compile's options are made (tilelang/options.py)
    with pytest.raises(TileUsageError) as e:
        CompileOptions(target="sm_75")
    assert e.value.code == "E0750"


def test_empty_launch():
    assert resolve_launch({}, get_target("sm_80")) == LaunchSpec()
