"""`tilec run` and `tilec cache` (through tilelang.cli.main, as the shell calls them)."""

from __future__ import annotations

import os

import numpy as np
import pytest

from rt_support import ROOT, fresh_runtime  # noqa: F401 (autouse fixture)
from tilelang.cli import main

VADD = os.path.join(ROOT, "examples", "vadd.tile")


@pytest.fixture(autouse=True)
def cache_in_tmp(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TILELANG_BACKEND", raising=False)


def run(capsys, *argv):
    try:
        rc = main(list(argv))
    except SystemExit as e:
        rc = e.code
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_run_vadd_on_the_emulator(capsys, tmp_path):
    save = str(tmp_path / "out.npz")
    rc, out, err = run(capsys, "run", VADD, "--kernel", "vadd", "--grid", "4", "--backend",
                       "emulator", "--arg", "a=rand:4000", "--arg", "b=arange:4000",
                       "--arg", "c=zeros:4000", "--save", save, "--repeat", "2")
    assert rc == 0, err
    lines = out.splitlines()
    assert lines[0] == "kernel    kernel vadd(a: Array[f32, 1], b: Array[f32, 1], " \
        "c: Array[f32, 1], const TILE: i32)"
    assert lines[1] == "consts    TILE=1024"
    assert lines[2] == "backend   emulator, target sm_90a"
    assert lines[3] == "launch    grid (4, 1, 1), block (128, 1, 1)"
    assert lines[4] == "facts     a=caes, b=caes=0, c=caes=0  (c: contiguous, a: 16-byte " \
        "aligned, e: last extent a multiple of 16 B, s: offsets below 2^31 elements, =k: the " \
        "shape of array k)"
    assert "us per launch" in lines[5]
    ex, issued = lines[6].split(" thread-instructions executed, ")
    assert ex.startswith("emulator  ") and issued.endswith(" warp-instructions issued")
    # every executed thread-instruction is in an issued warp-instruction
    assert 0 < int(ex.split()[1]) <= 32 * int(issued.split()[0])
    assert lines[-1] == f"saved     {save}"
    data = np.load(save)
    np.testing.assert_array_equal(data["c"], data["a"] + data["b"])
    np.testing.assert_array_equal(data["b"], np.arange(4000, dtype=np.float32))
    assert data["a"].min() >= -1 and data["a"].max() < 1
    b_line = [ln for ln in lines if ln.startswith("  b ")][0]
    assert b_line == "  b        f32[4000]  min 0  max 3999  mean 1999.5  sum 7.998e+06"


def test_run_with_define_shape_and_files(capsys, tmp_path):
    a = np.arange(10, dtype=np.float32)
    np.save(tmp_path / "a.npy", a)
    save = str(tmp_path / "o.npz")
    rc, out, err = run(capsys, "run", VADD, "--kernel", "vadd", "--grid", "1", "--backend",
                       "emulator", "-D", "TILE=16", "--arg", f"a={tmp_path / 'a.npy'}",
                       "--arg", "b=ones:10", "--shape", "10", "--save", save)
    assert rc == 0, err
    assert "consts    TILE=16" in out
    data = np.load(save)
    np.testing.assert_array_equal(data["c"], a + 1)


def test_run_scalar_arguments(capsys, tmp_path):
    src = tmp_path / "s.tile"
    src.write_text("kernel scale(x: Array[f32, 1], y: Array[f32, 1], alpha: f32) {\n"
                   "    let t = load(x, index = (bid(0),), shape = (128,), padding = 0.0);\n"
                   "    store(y, index = (bid(0),), tile = t * alpha);\n}\n")
    save = str(tmp_path / "o.npz")
    rc, out, err = run(capsys, "run", str(src), "--kernel", "scale", "--grid", "2",
                       "--backend", "emulator", "--shape", "200", "--arg", "alpha=-2",
                       "--save", save)
    assert rc == 0, err
    assert "  alpha    = -2.0" in out
    data = np.load(save)
    np.testing.assert_array_equal(data["y"], data["x"] * -2)


def test_run_errors(capsys):
    rc, out, err = run(capsys, "run", VADD, "--kernel", "vadd", "--grid", "4", "--backend",
                       "emulator")
    assert rc == 2
    assert err.splitlines()[-1] == "tilec run: error: kernel `vadd` needs array " \
        "`a: Array[f32, 1]`: add --arg a=rand:SHAPE or --shape SHAPE"
    rc, out, err = run(capsys, "run", VADD, "--kernel", "vsub", "--grid", "4", "--backend",
                       "emulator")
    assert rc == 1
    assert err.startswith("error[E0922]: module `" + VADD + "` has no kernel `vsub`")
    rc, _, err = run(capsys, "run", VADD, "--kernel", "vadd", "--grid", "a,b", "--backend",
                     "emulator")
    assert rc == 2 and err.splitlines()[-1] == \
        "tilec run: error: --grid expects integers like `8` or `8,4`, got `a,b`"
    rc, _, err = run(capsys, "run", VADD, "--kernel", "vadd", "--grid", "1", "--backend",
                     "emulator", "--shape", "8", "--arg", "z=ones:8")
    assert rc == 2 and err.splitlines()[-1] == \
        "tilec run: error: kernel `vadd` has no parameter `z`"
    rc, _, err = run(capsys, "run", VADD, "--kernel", "vadd", "--grid", "1", "--backend",
                     "emulator", "--arg", "a=spiral:8", "--shape", "8")
    assert rc == 2 and "unknown kind `spiral`" in err


def test_a_negative_seed_is_a_usage_error(capsys):
    rc, out, err = run(capsys, "run", VADD, "--kernel", "vadd", "--grid", "1", "--backend",
                       "emulator", "--shape", "8", "--seed", "-1")
    assert rc == 2 and out == ""
    assert err.splitlines()[-1] == "tilec run: error: --seed must be a non-negative integer, " \
        "got -1"
    rc, out, err = run(capsys, "tune", VADD, "--kernel", "vadd", "--grid", "1", "--backend",
                       "emulator", "--shape", "8", "--seed", "-1", "--space", "TILE=64,128")
    assert rc == 2 and out == ""
    assert err.splitlines()[-1] == "tilec tune: error: --seed must be a non-negative " \
        "integer, got -1"


def test_help_lines_use_the_command_line_spelling():
    from tilelang.diagnostics import Diagnostic, Severity
    from tilelang.runtime.cli_run import for_the_shell
    from tilelang.runtime.cuda import EMULATOR_HINT
    d = for_the_shell(Diagnostic(Severity.ERROR, "E0920", "x", help=EMULATOR_HINT))
    assert d.help == ("run on the CPU emulator instead: pass --backend emulator or set "
                      "TILELANG_BACKEND=emulator")
    d = for_the_shell(Diagnostic(Severity.ERROR, "E0920", "x", help="pass arch=... to choose "
                                 "one, or " + EMULATOR_HINT))
    assert d.help.startswith("pass --arch TARGET to choose one, or run on the CPU emulator "
                             "instead: pass --backend emulator")


def test_run_launch_error_is_a_diagnostic(capsys):
    rc, out, err = run(capsys, "run", VADD, "--kernel", "vadd", "--grid", "1,70000",
                       "--backend", "emulator", "--shape", "8")
    assert rc == 1
    assert err.startswith("error[E0903]: launch of `vadd`: grid (1, 70000, 1) exceeds")


def test_run_without_driver_names_the_emulator(capsys):
    from gpu_probe import gpu_available
    if gpu_available():
        pytest.skip("a GPU and driver are present")
    rc, out, err = run(capsys, "run", VADD, "--kernel", "vadd", "--grid", "1", "--shape", "8")
    assert rc == 1
    assert err.startswith("error[E0920]: no NVIDIA driver was found")
    assert "= help: run on the CPU emulator instead: pass --backend emulator or set " \
        "TILELANG_BACKEND=emulator" in err


def test_cache_list_size_clear(capsys, tmp_path):
    rc, out, _ = run(capsys, "cache", "list")
    assert rc == 0 and out == f"no cached kernels in {tmp_path / 'cache'}\n"
    for tile in ("256", "512"):
        assert run(capsys, "run", VADD, "--kernel", "vadd", "--grid", "1", "--backend",
                   "emulator", "--shape", "8", "-D", f"TILE={tile}")[0] == 0
    rc, out, _ = run(capsys, "cache", "list")
    lines = out.splitlines()
    assert rc == 0 and lines[0].split() == ["key", "kernel", "target", "size", "consts", "/",
                                            "facts", "/", "source"]
    assert len(lines) == 4 and lines[-1] == f"2 kernels in {tmp_path / 'cache'}"
    assert sorted(ln.split()[-5] for ln in lines[1:3]) == ["TILE=256", "TILE=512"]
    rc, out, _ = run(capsys, "cache", "size")
    assert rc == 0 and out.endswith(f"in 2 kernels ({tmp_path / 'cache'})\n")
    rc, out, _ = run(capsys, "cache", "clear")
    assert rc == 0 and out == f"removed 2 kernels from {tmp_path / 'cache'}\n"
    rc, out, _ = run(capsys, "cache", "list", "--dir", str(tmp_path / "cache"))
    assert out.startswith("no cached kernels")
    rc, _, err = run(capsys, "cache", "purge")
    assert rc == 2


def test_run_rejects_bad_shapes_files_and_options(capsys, tmp_path):
    base = ("run", VADD, "--kernel", "vadd", "--grid", "1", "--backend", "emulator")

    def last(*extra):
        rc, out, err = run(capsys, *base, *map(str, extra))
        assert "Traceback" not in err
        return rc, err.splitlines()[-1] if err else ""

    assert last("--shape", "-5") == (2, "tilec run: error: --shape expects non-negative sizes, "
                                        "got `-5`")
    assert last("--shape", "8", "--arg", "a=rand:4x-2") == (
        2, "tilec run: error: --arg a expects non-negative sizes, got `4x-2`")
    missing = tmp_path / "none.npy"
    assert last("--shape", "8", "--arg", f"a={missing}") == (
        2, f"tilec run: error: --arg a: no file `{missing}`")
    pickled = tmp_path / "p.npy"
    np.save(pickled, np.array([{"x": 1}], dtype=object), allow_pickle=True)
    assert last("--shape", "8", "--arg", f"a={pickled}") == (
        2, f"tilec run: error: --arg a: cannot load `{pickled}`: it holds Python objects "
           "(pickled data), which are never loaded")
    junk = tmp_path / "junk.npy"
    junk.write_bytes(b"\x00garbage")
    rc, line = last("--shape", "8", "--arg", f"a={junk}")
    assert rc == 2 and line.startswith(f"tilec run: error: --arg a: cannot load `{junk}`: it "
                                       "is not a .npy array file (no NUMPY header)")
    save = tmp_path / "no" / "o.npz"
    assert last("--shape", "8", "--save", save) == (
        2, f"tilec run: error: --save {save}: the folder `{save.parent}` does not exist")
    assert last("--shape", "8", "-D", "TILE=8", "-D", "TILE=16") == (
        2, "tilec run: error: -D TILE is given twice (`TILE=8` and `TILE=16`)")
    assert last("--shape", "8", "-I", tmp_path / "nope") == (
        2, f"tilec run: error: -I {tmp_path / 'nope'}: the folder does not exist")
    assert last("--shape", "8", "--arch", "sm_75")[1].startswith(
        "tilec run: error: --arch sm_75: not a supported target; use one of sm_80")
    rc, out, err = run(capsys, *base, "--shape", "8", "-D", "TYLE=8")
    assert rc == 2 and err.startswith("error[E0272]: -D TYLE: no kernel of ")
    rc, line = last("--shape", "8", "--save", tmp_path)
    assert rc == 1 and line == f"tilec run: error: cannot write `{tmp_path}`: it is a folder"
    assert last("--shape", "100000000000000000")[0] == 2
