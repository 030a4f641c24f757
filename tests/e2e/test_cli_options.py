"""Mistakes in `tilec`'s options (in process, through tilelang.cli.main): unknown or repeated
-D names, -I folders that do not exist, bad --arch/--block/--grid, and -D values that are not
constants all get a clear message and exit 2 (or 1 for a mistake in the source), never a
traceback; `tilelang.compile(defines=..., include_dirs=...)` gets the same checks."""

from __future__ import annotations

import pathlib

import pytest

import tilelang
from tilelang.cli import main
from tilelang.diagnostics import TileError

ROOT = pathlib.Path(__file__).resolve().parents[2]
VADD = str(ROOT / "examples" / "vadd.tile")
SRC = ("kernel k(y: Array[f32, 1], const N: i32 = 4) {\n"
       "    store(y, index = (0,), tile = zeros((N,), f32));\n}\n")


def tilec(capsys, *argv):
    try:
        rc = main([str(a) for a in argv])
    except SystemExit as e:
        rc = e.code
    got = capsys.readouterr()
    return rc, got.out, got.err


@pytest.fixture
def k(tmp_path):
    f = tmp_path / "k.tile"
    f.write_text(SRC)
    return f


@pytest.mark.parametrize("cmd", [["check"], ["--emit", "tir"], ["--emit", "ptx"]])
def test_unknown_define_is_named(capsys, k, cmd):
    rc, out, err = tilec(capsys, *cmd, k, "-D", "n=8")
    assert rc == 2 and out == ""
    assert err.startswith(f"error[E0272]: -D n: no kernel of `{k}` has a `const` parameter "
                          "`n`\n  = help: did you mean `N`? its `const` parameters are `N`\n")


def test_repeated_define_and_missing_include(capsys, k, tmp_path):
    rc, _, err = tilec(capsys, "--emit", "tir", k, "-D", "N=8", "-D", "N=16")
    assert rc == 2 and err.splitlines()[-1] == \
        "tilec: error: -D N is given twice (`N=8` and `N=16`)"
    rc, _, err = tilec(capsys, "check", k, "-I", tmp_path / "nope")
    assert rc == 2 and err.splitlines()[-1] == \
        f"tilec: error: -I {tmp_path / 'nope'}: the folder does not exist"
    rc, _, err = tilec(capsys, "--emit", "tir", k, "-I", k)
    assert rc == 2 and err.splitlines()[-1] == f"tilec: error: -I {k}: the folder is not a folder"


def test_define_taken_by_one_of_several_files(capsys, k, tmp_path):
    j = tmp_path / "j.tile"
    j.write_text(SRC.replace("N", "M").replace("kernel k", "kernel j"))
    assert tilec(capsys, "check", k, j, "-D", "M=8")[0] == 0
    rc, _, err = tilec(capsys, "check", k, j, "-D", "Q=8")
    assert rc == 2 and err.count("error[E0272]") == 1


def test_define_value_is_shown_as_given(capsys, k):
    rc, _, err = tilec(capsys, "--emit", "tir", k, "-D", "N=abc")
    assert rc == 1
    assert "__expr__" not in err
    assert err.startswith("error[E0201]: -D N=abc: cannot find `abc` in this scope\n"
                          f" --> {k}:1:28\n")
    assert "^^^^^^^^^^^^^^^^ the value of `N` comes from the command line" in err
    rc, _, err = tilec(capsys, "check", k, "-D", "N=1+")
    assert rc == 1 and "-D N=1+: `1+` is not a constant expression" in err


def test_bad_block_grid_and_arch_for_the_report(capsys):
    rc, out, err = tilec(capsys, "--report", VADD, "--block", "99999")
    assert rc == 2 and out == "" and "Traceback" not in err
    assert err.splitlines()[-1] == "tilec: error: --block 99999: a block has at most 1024 " \
        "threads and at most 64 along z; got 99999 threads"
    rc, _, err = tilec(capsys, "--report", VADD, "--block", "1,1,128")
    assert rc == 2 and "at most 64 along z" in err
    rc, _, err = tilec(capsys, "--report", VADD, "--grid", "1,70000")
    assert rc == 2 and "65535 along y and z" in err
    rc, _, err = tilec(capsys, "--emit", "ptx", VADD, "--arch", "sm_75")
    assert rc == 2 and err.splitlines()[-1].startswith(
        "tilec: error: --arch sm_75: not a supported target; use one of sm_80, ")


def test_python_api_shares_the_checks(k, tmp_path):
    with pytest.raises(TileError) as e:
        tilelang.compile(str(k), defines={"n": 8}, backend="emulator", cache=False)
    assert e.value.diagnostics[0].code == "E0272"
    assert "did you mean `N`?" in e.value.diagnostics[0].help
    with pytest.raises(TileError) as e:
        tilelang.compile(str(k), include_dirs=[str(tmp_path / "nope")], backend="emulator",
                         cache=False)
    assert e.value.diagnostics[0].message == \
        f"include folder `{tmp_path / 'nope'}` does not exist"
    m = tilelang.compile(str(k), defines={"N": 8}, backend="emulator", cache=False)
    assert m.k is not None
