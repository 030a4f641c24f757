"""`tilelang.options.CompileOptions`: the one frozen options record of a compile, with the target
resolved once, built the same way by `tilec`, the driver and the runtime, and a cache key
computed from its fields."""

from __future__ import annotations

import pytest

from tilelang.diagnostics import TileUsageError, render
from tilelang.options import DEFAULT_TARGET, CompileOptions
from tilelang.record import FrozenInstanceError, fields_of, replace
from tilelang.targets import TARGETS

FIELDS = ("target", "defines", "include_dirs", "opt_level", "ptxas", "knobs_file", "precision",
          "lineinfo", "distributed")


def test_the_fields_and_their_defaults():
    o = CompileOptions()
    assert fields_of(CompileOptions) == FIELDS
    assert DEFAULT_TARGET == "sm_90a"
    assert o.target is TARGETS["sm_90a"]
    assert (o.defines, o.include_dirs, o.opt_level, o.ptxas, o.knobs_file, o.precision,
            o.lineinfo, o.distributed) == ((), (), 3, None, None, None, False, "peers")


def test_the_target_is_resolved_once_into_the_table_record():
    o = CompileOptions(target="sm_80")
    assert o.target is TARGETS["sm_80"] and o.target_name == "sm_80"
    assert CompileOptions(target=TARGETS["sm_120"]).target is TARGETS["sm_120"]
    assert replace(o, opt_level=1).target is TARGETS["sm_80"]


def test_an_unknown_target_is_E0750_as_before():
    with pytest.raises(TileUsageError) as e:
        CompileOptions(target="sm_75")
    assert render(e.value.diagnostics[0], color=False) == (
        "error[E0750]: unknown target `sm_75`\n"
        "  = help: supported targets: sm_80, sm_86, sm_89, sm_90, sm_90a, sm_100a, sm_120, sm_120a")


def test_frozen_and_hashable_whatever_form_the_collections_come_in():
    a = CompileOptions(defines={"N": "4", "M": "2"}, include_dirs=["lib"])
    b = CompileOptions(defines=(("N", "4"), ("M", "2")), include_dirs=("lib",))
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert a.defines == (("N", "4"), ("M", "2"))          # in the order given (-D order)
    assert a.define_map() == {"N": "4", "M": "2"}
    with pytest.raises(FrozenInstanceError):
        a.opt_level = 0                                    # type: ignore[misc]
    assert replace(a, defines={"K": "1"}).defines == (("K", "1"),)


def test_the_key_lists_every_field_by_name():
    o = CompileOptions(target="sm_89", defines={"N": "4"}, include_dirs=["/x"], opt_level=2,
                       ptxas="/bin/ptxas", knobs_file="/k", precision="ieee", lineinfo=True,
                       distributed="nvshmem")
    assert o.key() == {"target": "sm_89", "defines": [["N", "4"]], "include_dirs": ["/x"],
                       "opt_level": 2, "ptxas": "/bin/ptxas", "knobs_file": "/k",
                       "precision": "ieee", "lineinfo": True, "distributed": "nvshmem"}
    assert list(CompileOptions().key()) == list(FIELDS)


@pytest.mark.parametrize("change", [
    {"target": "sm_80"}, {"defines": {"N": "1"}}, {"include_dirs": ["i"]}, {"opt_level": 0},
    {"ptxas": "p"}, {"knobs_file": "k"}, {"precision": "approx"}, {"lineinfo": True},
    {"distributed": "nvshmem"}])
def test_each_field_changes_the_key(change):
    assert CompileOptions(**change).key() != CompileOptions().key()


def test_an_unknown_distributed_lowering_is_refused():
    with pytest.raises(ValueError, match="^distributed='mpi': one of 'peers', 'nvshmem'$"):
        CompileOptions(distributed="mpi")


def test_driver_runtime_and_cli_share_the_record():
    import tilelang.driver as driver
    from tilelang.cli import _plain_compile_args
    from tilelang.runtime import compiler
    assert compiler.CompileOptions is CompileOptions
    assert not hasattr(driver, "Options")
    assert _plain_compile_args(["k.tile"]).arch == DEFAULT_TARGET


def test_the_runtime_builds_the_record(tmp_path):
    import tilelang
    src = tmp_path / "k.tile"
    src.write_text("kernel k(x: Array[f32, 1], const N: i32 = 4) {\n"
                   "    store(x, index = (0,), tile = full((N,), 1.0, f32));\n}\n")
    mod = tilelang.compile(str(src), arch="sm_80", defines={"N": 8}, backend="interp",
                           cache=False)
    assert mod.options == CompileOptions(target="sm_80", defines={"N": "8"}, lineinfo=False)
    assert mod.target == "sm_80"
