"""`tilec` under a fuzzer: seeded command lines built from bad flags and values, missing,
empty, binary and non-UTF-8 files, folders as inputs and outputs, links, devices and odd -D,
-I, -O, --arch, --block, --grid and --sms values, over every subcommand but `lsp`. Each call
runs in process (tilelang.cli.main) and must end with status 0, 1 or 2, print no traceback,
raise nothing, finish within 60 s and leave no temporary file behind.

A fixed list of ~80 calls and 10 seeded random ones run by default; `-m slow` adds 300 random
ones."""

from __future__ import annotations

import contextlib
import io
import os
import pathlib
import random
import signal

import pytest

from tilelang.cli import main

ROOT = pathlib.Path(__file__).resolve().parents[2]
VADD = str(ROOT / "examples" / "vadd.tile")
KINDS = ("ast", "typed-ast", "tir", "llvm", "ptx", "cubin")


class _Timeout(Exception):
    pass


@pytest.fixture
def sandbox(tmp_path, monkeypatch):
    """A working folder with one of each kind of input (by name), and a private cache."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.delenv("TILELANG_BACKEND", raising=False)
    (tmp_path / "empty.tile").write_text("")
    (tmp_path / "blank.tile").write_text("\n\n   \n")
    (tmp_path / "binary.tile").write_bytes(bytes(range(256)) * 4)
    (tmp_path / "latin1.tile").write_bytes("// caf\xe9\nkernel k() {}\n".encode("latin-1"))
    (tmp_path / "syntax.tile").write_text("kernel k( {\n")
    (tmp_path / "sema.tile").write_text("kernel k(a: Array[f32, 1]) { store = 1.0; }\n")
    (tmp_path / "nul.tile").write_text("kernel k() {}\0\n")
    (tmp_path / "long.tile").write_text("// " + "x" * 200_000 + "\n")
    (tmp_path / "deep.tile").write_text("fn f() -> i32 { return " + "(" * 3000 + "1"
                                        + ")" * 3000 + "; }\n")
    (tmp_path / "consts.tile").write_text(
        "kernel k(y: Array[f32, 1], const N: i32 = 4, const F: f32 = 1.0, const B: bool = "
        "true) {\n    store(y, index = (0,), tile = zeros((N,), f32) + F);\n}\n")
    (tmp_path / "folder").mkdir()
    (tmp_path / "link.tile").symlink_to(VADD)
    (tmp_path / "dangling.tile").symlink_to(tmp_path / "gone.tile")
    (tmp_path / "out_link").symlink_to(tmp_path / "empty.tile")
    (tmp_path / "ok.npy").write_bytes(b"\x93NUMPY garbage")
    return tmp_path


INPUTS = [VADD, "link.tile", "empty.tile", "blank.tile", "binary.tile", "latin1.tile",
          "syntax.tile", "sema.tile", "nul.tile", "long.tile", "deep.tile", "consts.tile",
          "folder", "missing.tile", "dangling.tile", "/dev/null", "", "-", "--", "-x"]
OUTPUTS = ["out.txt", "folder", "/dev/null", "out_link", "no/such/out", "", "-", "folder/"]

FIXED = [
    [], ["--help"], ["--version"], ["-h", VADD], ["--bogus", VADD], [VADD, VADD],
    ["check"], ["check", "--bogus"], ["check", "folder"], ["check", "missing.tile"],
    ["check", "empty.tile", "binary.tile", "latin1.tile", "syntax.tile", "sema.tile"],
    ["check", "nul.tile"], ["check", "long.tile"], ["check", "deep.tile"],
    ["check", VADD, "-D"], ["check", VADD, "-D", "=3"], ["check", VADD, "-D", "TILE"],
    ["check", VADD, "-D", "TILE="], ["check", VADD, "-D", "TILE= "], ["check", VADD, "-I"],
    ["check", VADD, "-I", "missing"], ["check", VADD, "-I", "empty.tile"],
    ["check", VADD, "-I", "folder", "-I", "folder"], ["check", VADD, "-D", "TILE=1", "-D",
                                                       "TILE=2"],
    ["check", VADD, "-D", "TILE=abc"], ["check", VADD, "-D", "TILE=1e400"],
    ["check", VADD, "-D", "TILE=" + "9" * 5000], ["check", VADD, "-D", "TILE=-(1<<63)"],
    ["check", VADD, "-D", "TILE=1/0"], ["check", VADD, "-D", "TILE=((((1"],
    ["check", VADD, "-D", "TYLE=64"], ["check", "consts.tile", "-D", "B=3"],
    ["check", "consts.tile", "-D", "F=nan"], ["check", "consts.tile", "-D", "N=true"],
    ["--emit", "bogus", VADD], ["--emit", VADD], ["--emit", "tir", "folder"],
    ["--emit", "tir", "missing.tile"], ["--emit", "ptx", "empty.tile"],
    ["--emit", "ast", "binary.tile"], ["--emit", "typed-ast", "sema.tile"],
    ["--emit", "tir", "sema.tile"], ["--emit", "tir", VADD, "-o", "folder"],
    ["--emit", "tir", VADD, "-o", "no/such/out"], ["--emit", "tir", VADD, "-o", "out_link"],
    ["--emit", "tir", VADD, "-o", ""], ["--emit", "tir", VADD, "-o", "folder/"],
    ["--emit", "tir", VADD, "-o"], ["--emit", "tir", VADD, "-o", "/dev/null"],
    ["--emit", "ast", VADD, "-o", "out.txt"], ["--emit", "tir", VADD, "--kernel", "nope"],
    ["--emit", "tir", VADD, "--kernel", ""], ["--emit", "tir", VADD, "-O", "4"],
    ["--emit", "tir", VADD, "-O", "-1"], ["--emit", "tir", VADD, "-O", "x"],
    ["--emit", "ptx", VADD, "--arch", "sm_75"], ["--emit", "ptx", VADD, "--arch", ""],
    ["--emit", "ptx", VADD, "--arch", "SM_90A"], ["--emit", "ptx", VADD, "--arch", "sm_80"],
    ["--emit", "tir", "consts.tile", "-D", "N=" + "1" * 5000],
    ["--emit", "tir", "consts.tile", "-D", "N=0"], ["--emit", "tir", "consts.tile", "-D",
                                                   "N=-4"],
    ["--emit", "tir", "consts.tile", "-D", "N=1<<40"],
    ["--report", VADD, "--block", "99999"], ["--report", VADD, "--block", "0"],
    ["--report", VADD, "--block", "1,1,1,1"], ["--report", VADD, "--block", "a"],
    ["--report", VADD, "--grid", "-1"], ["--report", VADD, "--grid", "99999999999"],
    ["--report", VADD, "--grid", "1,99999"], ["--report", VADD, "--sms", "0"],
    ["--report", VADD, "--sms", "x"], ["--report", "folder"], ["--report", "empty.tile"],
    ["--report", VADD, "--ptxas", "/nonexistent/ptxas"],
    ["--report", VADD, "--ptxas", "/bin/false"],
    [VADD, "--ptxas-knobs", "missing.txt", "--ptxas", "/bin/false"],
    ["cache"], ["cache", "purge"], ["cache", "list", "--dir", "folder"],
    ["cache", "size", "--dir", "missing"], ["cache", "clear", "--dir", "empty.tile"],
    ["cache", "list", "--dir", "out_link"], ["cache", "list", "--dir", "/dev/null"],
    ["run"], ["run", VADD], ["run", VADD, "--kernel", "vadd"],
    ["run", "folder", "--kernel", "k", "--grid", "1"],
    ["run", VADD, "--kernel", "vadd", "--grid", "1", "--backend", "emulator", "--shape", "-3"],
    ["run", VADD, "--kernel", "vadd", "--grid", "1", "--backend", "emulator", "--arg",
     "a=ok.npy", "--shape", "8"],
    ["run", VADD, "--kernel", "vadd", "--grid", "1", "--backend", "emulator", "--arg",
     "a=missing.npy", "--shape", "8"],
    ["run", VADD, "--kernel", "vadd", "--grid", "0", "--backend", "emulator", "--shape", "8"],
    ["run", VADD, "--kernel", "vadd", "--grid", "1", "--backend", "gpu9000"],
    ["run", VADD, "--kernel", "vadd", "--grid", "1", "--backend", "emulator", "--shape", "8",
     "--save", "no/such/o.npz"],
    ["run", VADD, "--kernel", "vadd", "--grid", "1", "--backend", "emulator", "--shape", "8",
     "--repeat", "0"],
    ["run", VADD, "--kernel", "vadd", "--grid", "1", "--backend", "emulator", "--shape", "8",
     "--arg", "TILE=3"],
    ["run", VADD, "--kernel", "vadd", "--grid", "1", "--backend", "emulator", "--shape", "8",
     "--block", "99999"],
]


def _random_argv(rng: random.Random) -> list[str]:
    sub = rng.choice(["compile"] * 5 + ["check", "cache", "run"])
    if sub == "cache":
        argv = ["cache", rng.choice(["list", "size", "clear", "nope", ""])]
        if rng.random() < 0.5:
            argv += ["--dir", rng.choice(OUTPUTS + INPUTS)]
        return argv
    argv = [] if sub == "compile" else [sub]
    argv.append(rng.choice(INPUTS))
    for _ in range(rng.randrange(5)):
        flag = rng.choice(["--emit", "-o", "--arch", "--kernel", "-O", "-D", "-I", "--report",
                           "--grid", "--block", "--sms", "--bogus", "--shape", "--arg"])
        value = {
            "--emit": lambda: rng.choice(KINDS[:4] + ("x", "")),
            "-o": lambda: rng.choice(OUTPUTS),
            "--arch": lambda: rng.choice(["sm_80", "sm_90a", "sm_75", "", "sm_90a "]),
            "--kernel": lambda: rng.choice(["vadd", "k", "nope", ""]),
            "-O": lambda: rng.choice(["0", "3", "9", "", "-2"]),
            "-D": lambda: rng.choice(["TILE=64", "TILE=abc", "N=8", "X=1", "TILE", "TILE=",
                                      "TILE=2**40", "=", "TILE=" + "7" * 4400]),
            "-I": lambda: rng.choice(["folder", "missing", "empty.tile", ""]),
            "--grid": lambda: rng.choice(["1", "0", "-5", "1,2,3,4", "x", "4294967296"]),
            "--block": lambda: rng.choice(["128", "0", "1025", "32,32,2", "1,1,65", "x"]),
            "--sms": lambda: rng.choice(["1", "0", "-1", "x"]),
            "--shape": lambda: rng.choice(["8", "-8", "0", "x"]),
            "--arg": lambda: rng.choice(["a=zeros:8", "a=ok.npy", "q=1", "a"]),
        }.get(flag)
        argv.append(flag)
        if value is not None:
            argv.append(value())
    if sub == "run":
        argv += ["--backend", "emulator"]
    return argv


def call(argv: list[str]) -> tuple[int, str]:
    """Run tilec in process; (status, stdout+stderr). Fails the test on anything raised."""
    out, err = io.StringIO(), io.StringIO()

    def alarm(*_):
        raise _Timeout(f"tilec {argv} ran past 60 s")
    old = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(60)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = main(list(argv))
            except SystemExit as e:
                rc = e.code
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    return rc, out.getvalue() + err.getvalue()


def check(argv: list[str], sandbox) -> None:
    rc, text = call(argv)
    assert rc in (0, 1, 2), (argv, rc, text[-2000:])
    assert "Traceback" not in text and "E9999" not in text, (argv, text[-3000:])
    leftovers = [str(p) for p in sandbox.rglob(".*tilec-*")]
    assert not leftovers, (argv, leftovers)
    assert (sandbox / "empty.tile").read_text() == "", argv       # never written through


def test_fixed_count():
    assert len(FIXED) >= 74


@pytest.mark.parametrize("argv", FIXED, ids=[f"{i:02d}" for i in range(len(FIXED))])
def test_fixed_command_line(sandbox, argv):
    check(argv, sandbox)
    assert os.path.islink(sandbox / "out_link")


@pytest.mark.parametrize("seed", range(10))
def test_random_command_lines(sandbox, seed):
    check(_random_argv(random.Random(seed)), sandbox)


@pytest.mark.slow
def test_random_command_lines_many(sandbox):
    rng = random.Random(2024)
    failures = []
    for _ in range(300):
        argv = _random_argv(rng)
        try:
            check(argv, sandbox)
        except AssertionError as e:
            failures.append(f"{argv}: {str(e)[:300]}")
    assert not failures, "\n".join(failures)
