"""`tilec FILE.tile` and its options, as a user runs them (a subprocess): the stage products,
the exit statuses, and the diagnostics for mistakes on the command line."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]


def tilec(*args, cwd=None):
    env = dict(os.environ, NO_COLOR="1")
    # run from any folder even without `pip install -e .`
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return subprocess.run([sys.executable, "-m", "tilelang.cli", *map(str, args)],
                          capture_output=True, text=True, env=env, cwd=cwd, timeout=120)


def test_emit_tir_prints_the_optimized_tile_ir():
    r = tilec("--emit", "tir", ROOT / "examples/softmax.tile", "-D", "N=256")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("kernel @softmax_rows(%x: Array[f32, 2], %y: Array[f32, 2]) {\n")
    assert "load(%x, index=(%0, 0), shape=(1, 256), padding=-inf) : Tile[f32, 1, 256]" in r.stdout


def test_emit_tir_to_a_file(tmp_path):
    out = tmp_path / "vadd.tir"
    r = tilec("--emit", "tir", ROOT / "examples/vadd.tile", "-o", out)
    assert r.returncode == 0 and r.stdout == ""
    assert out.read_text().startswith("kernel @vadd(")


def test_unknown_kernel_is_a_diagnostic():
    r = tilec("--emit", "tir", ROOT / "examples/vadd.tile", "--kernel", "vsub")
    assert r.returncode == 1
    assert "error[E0270]: `" in r.stderr and "` has no kernel `vsub`" in r.stderr
    assert "help: its kernels are: vadd" in r.stderr


def test_const_without_value_names_the_fix(tmp_path):
    f = tmp_path / "k.tile"
    f.write_text("kernel k(y: Array[f32, 1], const N: i32) {\n"
                 "    store(y, index = (0,), tile = zeros((N,), f32));\n}\n")
    r = tilec("--emit", "tir", f)
    assert r.returncode == 1
    assert "error[E0260]: `const N` has no value, so kernel `k` cannot be compiled" in r.stderr
    assert tilec("--emit", "tir", f, "-D", "N=8").returncode == 0


def test_bad_report_shapes_are_usage_errors():
    r = tilec("--report", ROOT / "examples/vadd.tile", "--grid", "0,1")
    assert r.returncode == 2
    assert "--grid expects 1 to 3 positive integers such as 128,1,1; got `0,1`" in r.stderr


def test_readme_main_command_writes_a_cubin_in_the_current_folder(tmp_path):
    r = tilec(ROOT / "examples/vadd.tile", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    data = (tmp_path / "vadd.cubin").read_bytes()
    assert data[:4] == b"\x7fELF"
    assert list(tmp_path.iterdir()) == [tmp_path / "vadd.cubin"]


def test_emit_ptx_carries_the_directive_block_and_target():
    r = tilec("--emit", "ptx", ROOT / "examples/vadd.tile", "--arch", "sm_80", "-O2")
    assert r.returncode == 0, r.stderr
    assert "\n.target sm_80\n" in r.stdout
    assert ".visible .entry vadd(" in r.stdout and "\n.maxntid 128, 1, 1\n" in r.stdout


def test_unknown_target_is_a_usage_error_and_writes_nothing(tmp_path):
    r = tilec(ROOT / "examples/vadd.tile", "--arch", "sm_75", cwd=tmp_path)
    assert r.returncode == 2
    assert r.stderr.splitlines()[-1] == "tilec: error: --arch sm_75: not a supported target; " \
        "use one of sm_80, sm_86, sm_89, sm_90, sm_90a, sm_100a, sm_120, sm_120a"
    assert "@launch" not in r.stderr
    assert list(tmp_path.iterdir()) == []


def test_report_prints_resources_and_occupancy():
    r = tilec("--report", ROOT / "examples/vadd.tile", "--grid", "977", "--sms", "132")
    assert r.returncode == 0, r.stderr
    head = r.stdout.splitlines()[0]
    for col in ("kernel", "target", "threads", "regs", "spill st/ld", "smem static",
                "occupancy", "limited by"):
        assert col in head
    assert "vadd" in r.stdout and "sm_90a" in r.stdout and ".maxntid 128, 1, 1" in r.stdout
    assert "wave" in r.stdout


def test_report_with_o_writes_the_report_there(tmp_path):
    """docs/tutorial.md §7 and docs/cli.md `--report`: -o PATH takes the report."""
    printed = tilec("--report", ROOT / "examples/vadd.tile", "--grid", "977", "--sms", "132")
    r = tilec("--report", ROOT / "examples/vadd.tile", "--grid", "977", "--sms", "132",
              "-o", "vadd-report.txt", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["vadd-report.txt"]
    assert (tmp_path / "vadd-report.txt").read_text() == printed.stdout


def test_help_says_where_the_cubin_goes(tmp_path):
    """nvcc -cubin dir/x.cu and cc -c dir/x.c write into the current folder; so does tilec,
    and its help says so."""
    (tmp_path / "src").mkdir()
    (tmp_path / "here").mkdir()
    (tmp_path / "src" / "vadd.tile").write_bytes((ROOT / "examples/vadd.tile").read_bytes())
    r = tilec(tmp_path / "src" / "vadd.tile", cwd=tmp_path / "here")
    assert r.returncode == 0, r.stderr
    assert [p.name for p in (tmp_path / "here").iterdir()] == ["vadd.cubin"]
    assert sorted(p.name for p in (tmp_path / "src").iterdir()) == ["vadd.tile"]
    h = " ".join(tilec("--help").stdout.split())
    assert "compiles every kernel of FILE to FILE.cubin in the current folder" in h
    assert "default for cubin: FILE's name with .cubin, for c: FILE.c (and FILE.h), in the " \
        "current folder" in h
