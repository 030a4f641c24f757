"""`tilec FILE` reads plain arguments without argparse (`cli._plain_compile_args`); whatever it
accepts, argparse must read the same way, and everything else is left to argparse (as for
`tilec check`, test_check_args.py)."""

from __future__ import annotations

import itertools
import json
import pathlib
import subprocess
import sys

import pytest

from argparse_ref import parsed
from tilelang import cli

ROOT = pathlib.Path(__file__).resolve().parents[2]


def by_argparse(argv: list[str]):
    """The attributes argparse gives `argv`, or "error"."""
    a = parsed(cli._main_parser(), argv)
    return a if a == "error" else vars(a)


WORDS = ["a.tile", "b.tile", "--arch", "sm_80", "-o", "-", "--emit", "ptx", "-O", "7",
         "--kernel", "--lineinfo", "--precision", "-D", "N=4", "", "--arch=sm_80", "--"]


def test_plain_arguments_read_as_argparse_reads_them():
    seen = 0
    for n in range(1, 5):
        for argv in itertools.product(WORDS, repeat=n):
            argv = list(argv)
            fast = cli._plain_compile_args(argv)
            if fast is None:
                continue
            seen += 1
            assert vars(fast) == by_argparse(argv), argv
    assert seen > 1000          # the fast path is taken for the common forms


@pytest.mark.parametrize("argv", [
    ["a.tile"], ["a.tile", "--arch", "sm_90a", "-o", "a.cubin"], ["--emit", "ptx", "a.tile"],
    ["-O", "0", "--kernel", "k", "--kernel", "j", "a.tile", "--lineinfo"],
    ["--report", "a.tile", "--precision", "approx", "-I", "inc", "-D", "N=4"],
    ["--distributed", "nvshmem", "--emit", "plan", "a.tile"]])
def test_common_forms_take_the_fast_path(argv):
    fast = cli._plain_compile_args(argv)
    assert fast is not None and vars(fast) == by_argparse(argv)


@pytest.mark.parametrize("argv", [
    [], ["-h"], ["--version"], ["a.tile", "b.tile"], ["--arch=sm_80", "a.tile"],
    ["-O3", "a.tile"], ["--arc", "sm_80", "a.tile"], ["a.tile", "-o", "-"],
    ["a.tile", "--emit", "sass"], ["a.tile", "-O", "4"], ["a.tile", "--arch"],
    ["--", "a.tile"], ["a.tile", "--grid", "4", "--report"], ["a.tile", "--ptxas", "p"],
    ["a.tile", "--distributed", "mpi"]])
def test_everything_else_is_left_to_argparse(argv):
    assert cli._plain_compile_args(argv) is None


PROBE = """
import json, sys
from tilelang.cli import main
status = main(sys.argv[1:])
print(json.dumps([status, "argparse" in sys.modules]))
"""


def run_probe(*args: str):
    out = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True,
                         cwd=ROOT, timeout=300)
    return out.returncode, out.stdout, out.stderr


def test_a_plain_compile_does_not_import_argparse(tmp_path):
    rc, stdout, stderr = run_probe("examples/vadd.tile", "--emit", "tir", "-o",
                                   str(tmp_path / "vadd.tir"))
    assert rc == 0, stderr
    assert json.loads(stdout.splitlines()[-1]) == [0, False]
    assert (tmp_path / "vadd.tir").read_text().startswith("kernel @vadd(")


def test_a_mistake_after_a_plain_read_is_reported_by_argparse():
    rc, stdout, stderr = run_probe("examples/vadd.tile", "--arch", "sm_70", "--emit", "tir")
    assert rc == 2 and stdout == ""
    assert stderr.startswith("usage: tilec [-h] [--version]")
    assert "\ntilec: error: " in stderr and "sm_70" in stderr
    rc, stdout, stderr = run_probe("examples/vadd.tile", "-D", "N", "--emit", "tir")
    assert rc == 2 and stderr.endswith("tilec: error: -D expects NAME=VALUE, got `N`\n")
