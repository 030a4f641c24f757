"""`tilec tune`: its output, the stored result, and its errors (exit 1 and 2)."""

from __future__ import annotations

import json
import os

import pytest

from tilelang.cli import main
from tilelang.tune.cli import _Usage, grid_function

HERE = os.path.dirname(os.path.abspath(__file__))
KERNELS = os.path.join(HERE, "kernels.tile")
BASE = ["tune", KERNELS, "--kernel", "vadd", "--backend", "emulator", "--arg", "a=rand:3000",
        "--arg", "b=rand:3000", "--arg", "c=zeros:3000", "--grid", "cdiv(3000, TILE)",
        "--workers", "0"]


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_table_progress_and_the_stored_result(capsys, cache_dir):
    code, out, err = run(capsys, *BASE, "--space", "TILE=256,512,1024")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == ("kernel    kernel vadd(a: Array[f32, 1], b: Array[f32, 1], "
                        "c: Array[f32, 1], const TILE: i32)")
    assert lines[1] == "device    emulator sm_90, target sm_90a"
    assert lines[2] == "key       a: f32[3000], b: f32[3000], c: f32[3000]"
    assert lines[3].split() == ["config", "status", "cost", "occupancy", "note"]
    assert [ln.split()[0] for ln in lines[5:8]] == ["TILE=256", "TILE=512", "TILE=1024"]
    assert lines[8].startswith("best      TILE=") and "by emulator cost, tuned in" in lines[8]
    assert err.splitlines()[0] == ("tune vadd: 3 configurations, 0 pruned before running, "
                                   "running 3 on emulator sm_90")
    assert err.splitlines()[1].startswith("  [1/3] TILE=256: ok cost ")
    # the same command again reads the stored result
    code, out2, err2 = run(capsys, *BASE, "--space", "TILE=256,512,1024")
    assert code == 0
    assert out2.splitlines()[-1].split("(")[0] == lines[8].split("(")[0]
    assert out2.splitlines()[-1].endswith("stored before)")
    assert "tuned before, from the cache" in err2


def test_json_and_explicit_configs(capsys, cache_dir):
    code, out, err = run(capsys, *BASE, "--config", "TILE=512", "--config", "TILE=3",
                         "--json", "--quiet")
    assert code == 0 and err == ""
    d = json.loads(out)
    assert d["config"] == {"TILE": 512} and d["metric"] == "cost" and d["cached"] is False
    assert d["key"]["arrays"]["a"] == ["f32", [3000]]
    assert [t["status"] for t in d["trials"]] == ["ok", "pruned"]
    assert d["trials"][1]["reason"].startswith("does not compile: E0301")


def test_no_configuration_runs_exits_1(capsys, cache_dir):
    code, out, err = run(capsys, *BASE, "--config", "TILE=3", "--config", "TILE=5",
                         "--quiet")
    assert code == 1 and out == ""
    assert "error[E0940]: autotuning kernel `vadd`: none of its 2 configurations" in err
    assert "= note: TILE=3: pruned, does not compile: E0301" in err


def test_a_file_with_errors_exits_1(capsys, tmp_path, cache_dir):
    bad = tmp_path / "bad.tile"
    bad.write_text("kernel k(a: Array[f32, 1]) { let x = ; }\n")
    code, out, err = run(capsys, "tune", str(bad), "--kernel", "k", "--backend", "emulator",
                         "--grid", "1", "--space", "T=1")
    assert code == 1 and "error[E01" in err


@pytest.mark.parametrize("extra, text", [
    ([], "give the configurations: --space NAME=V1,V2 or --config NAME=V,..."),
    (["--space", "TILE"], "--space expects NAME=V1,V2,..., got `TILE`"),
    (["--space", "TILE=1,x"], "--space TILE: `x` is not a number or true/false"),
    (["--space", "TILE=1", "--space", "TILE=2"], "--space TILE is given twice"),
    (["--config", "TILE=1,TILE=2"], "--config `TILE=1,TILE=2` gives TILE twice"),
    (["--space", "TILES=64"], "kernel `vadd` has no const parameter `TILES` (its const "
                              "parameters: TILE)"),
    (["--space", "TILE=64", "-D", "TILE=32"], "-D TILE fixes a const that --space/--config "
                                              "tunes"),
    (["--space", "TILE=64", "--rep", "-1"], "--rep is a time in ms, at least 0"),
], ids=["no-configs", "space-syntax", "space-value", "space-twice", "config-twice",
        "unknown-const", "define-and-tune", "rep"])
def test_command_line_errors_exit_2(capsys, cache_dir, extra, text):
    with pytest.raises(SystemExit) as e:
        main([*BASE, *extra])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.splitlines()[-1] == f"tilec tune: error: {text}"


def test_grid_expression_errors_exit_2(capsys, cache_dir):
    argv = [a if a != "cdiv(3000, TILE)" else "cdiv(3000, TILE) + __import__('os')"
            for a in BASE]
    with pytest.raises(SystemExit) as e:
        main([*argv, "--space", "TILE=512"])
    assert e.value.code == 2
    assert "--grid: `cdiv(3000, TILE) + __import__('os')` may use integers" in \
        capsys.readouterr().err
    argv = [a if a != "cdiv(3000, TILE)" else "cdiv(3000, WIDTH)" for a in BASE]
    with pytest.raises(SystemExit) as e:
        main([*argv, "--space", "TILE=512", "--quiet"])
    assert e.value.code == 2
    assert "`WIDTH` is no const or scalar of the kernel" in capsys.readouterr().err


def test_grid_function():
    g = grid_function("cdiv(1000,T), max(2, T // 64) * 3, 4 % 3")
    assert g({"T": 128}) == (8, 6, 1)
    assert grid_function("8x4")({}) == (8, 4)
    assert grid_function("8,4,2")({}) == (8, 4, 2)
    for bad in ("", "1,2,3,4", "T.x", "1 / 2", "f(1)", "'a'", "1.5"):
        with pytest.raises(_Usage):
            grid_function(bad)
    with pytest.raises(_Usage, match="divides by zero"):
        grid_function("cdiv(4, T)")({"T": 0})
    with pytest.raises(_Usage, match="`F` is not an integer"):
        grid_function("F")({"F": 1.5})


def test_precision_in_the_space(capsys, cache_dir):
    softmax = os.path.join(HERE, "..", "..", "examples", "softmax.tile")
    code, out, err = run(capsys, "tune", softmax, "--kernel", "softmax_rows", "--backend",
                         "emulator", "--arg", "x=randn:4x100", "--arg", "y=zeros:4x100",
                         "--space", "N=128", "--space", "precision=ieee,approx", "--grid", "4",
                         "--json", "--quiet", "--workers", "0")
    assert code == 0, err
    d = json.loads(out)
    assert [t["config"] for t in d["trials"]] == [{"N": 128, "precision": "ieee"},
                                                  {"N": 128, "precision": "approx"}]
    assert all(t["status"] == "ok" for t in d["trials"])
    with pytest.raises(SystemExit):
        main([*BASE, "--space", "precision=exact"])
    assert "--space precision: `exact` is not a number or true/false" in capsys.readouterr().err


def test_unknown_kernel_and_missing_driver_exit_1(capsys, cache_dir):
    argv = [a if a != "vadd" else "nope" for a in BASE]
    code, out, err = run(capsys, *argv, "--space", "TILE=512")
    assert code == 1 and "error[E0922]: module" in err and "has no kernel `nope`" in err
    from gpu_probe import gpu_available
    if not gpu_available():
        argv = [a if a != "emulator" else "cuda" for a in BASE]
        code, out, err = run(capsys, *argv, "--space", "TILE=512")
        assert code == 1 and err.startswith("error[E0920]: ") and out == ""


def test_grid_from_array_extents(capsys, cache_dir):
    argv = [a if a != "cdiv(3000, TILE)" else "cdiv(dim(a, 0), TILE)" for a in BASE]
    code, out, err = run(capsys, *argv, "--space", "TILE=512,1024", "--json", "--quiet")
    assert code == 0, err
    assert all(t["status"] == "ok" for t in json.loads(out)["trials"])
    g = grid_function("cdiv(dim(x, 1), T), dim(x, 0)")
    assert g({"T": 64, "__shapes__": {"x": (7, 1000)}}) == (16, 7)
    with pytest.raises(_Usage, match="`x` has 2 dimensions, not an axis 2"):
        g2 = grid_function("dim(x, 2)")
        g2({"__shapes__": {"x": (7, 1000)}})
    with pytest.raises(_Usage, match="`y` is no array argument of the kernel"):
        grid_function("dim(y, 0)")({"__shapes__": {"x": (7,)}})
    with pytest.raises(_Usage):
        grid_function("dim(1, 0)")
