"""`tilec check` reads plain arguments without argparse (`cli._plain_check_args`); whatever it
accepts, argparse must read the same way, and everything else is left to argparse."""

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
    """(files, include, defines) as argparse reads `argv`, or "error"."""
    a = parsed(cli._check_parser(), argv)
    return a if a == "error" else (a.files, a.include, a.defines)


WORDS = ["a.tile", "b.tile", "-I", "inc", "-D", "N=4", "-Iinc", "-DN=4", "--", "-", "-h", "",
         "-x", "--help", "-I=inc", "-1"]


def test_plain_arguments_read_as_argparse_reads_them():
    seen = 0
    for n in range(1, 5):
        for argv in itertools.product(WORDS, repeat=n):
            argv = list(argv)
            fast = cli._plain_check_args(argv)
            if fast is None:
                continue
            seen += 1
            assert fast == by_argparse(argv), argv
    assert seen > 200           # the fast path is taken for the common forms


@pytest.mark.parametrize("argv", [
    ["a.tile"], ["a.tile", "b.tile"], ["-I", "inc", "a.tile"], ["a.tile", "-D", "N=4"],
    ["-I", "inc", "-D", "N=4", "a.tile", "b.tile", "-I", "more"]])
def test_common_forms_take_the_fast_path(argv):
    assert cli._plain_check_args(argv) is not None


@pytest.mark.parametrize("argv", [
    [], ["-h"], ["--help"], ["a.tile", "-I", "inc", "b.tile"], ["-Iinc", "a.tile"],
    ["-I"], ["-I", "-D", "a.tile"], ["--", "a.tile"], ["-", "a.tile"]])
def test_everything_else_is_left_to_argparse(argv):
    assert cli._plain_check_args(argv) is None


PROBE = """
import json, sys
from tilelang.cli import main
status = main(["check", *sys.argv[1:]])
print(json.dumps([status, "argparse" in sys.modules]))
"""


def run_probe(*args: str):
    out = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True,
                         cwd=ROOT, timeout=120)
    return out.returncode, out.stdout, out.stderr


def test_a_plain_check_does_not_import_argparse():
    rc, stdout, stderr = run_probe("-I", "stdlib", "examples/softmax.tile")
    assert rc == 0, stderr
    assert json.loads(stdout.splitlines()[-1]) == [0, False]


def test_an_option_mistake_is_reported_by_argparse():
    rc, stdout, stderr = run_probe("-D", "N", "examples/softmax.tile")
    assert rc == 2 and stdout == ""
    assert stderr == ("usage: tilec check [-h] [-I DIR] [-D NAME=VALUE] FILE [FILE ...]\n"
                      "tilec: error: -D expects NAME=VALUE, got `N`\n")
    rc, stdout, stderr = run_probe("-I", "no/such/folder", "examples/softmax.tile")
    assert rc == 2 and stderr.endswith(
        "tilec: error: -I no/such/folder: the folder does not exist\n")
