"""`tilec` as a user meets it: exit codes, messages for bad files, colour rules, --emit ast."""

import os
import pathlib
import pty
import subprocess
import sys

import pytest

from tilelang import __version__

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = sorted(ROOT.glob("examples/*.tile"))


def tilec(*args, env=None, cwd=None):
    e = dict(os.environ)
    e.pop("NO_COLOR", None)
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "tilelang.cli", *map(str, args)],
                          capture_output=True, text=True, env=e, cwd=cwd, timeout=60)


def test_check_examples_succeeds():
    r = tilec("check", *EXAMPLES)
    assert r.returncode == 0, r.stderr
    assert "error" not in r.stderr


def test_version_and_help():
    r = tilec("--version")
    assert r.returncode == 0 and r.stdout.strip() == f"tilec {__version__}"
    r = tilec("--help")
    assert r.returncode == 0 and "tilec check FILE" in r.stdout
    r = tilec("check", "--help")
    assert r.returncode == 0 and "-I DIR" in r.stdout


def test_usage_errors_exit_2():
    assert tilec().returncode == 2
    assert tilec("check").returncode == 2
    r = tilec("--emit", "nonsense", EXAMPLES[0])
    assert r.returncode == 2 and "invalid choice" in r.stderr
    r = tilec("check", "-D", "oops", EXAMPLES[0])
    assert r.returncode == 2 and "-D expects NAME=VALUE, got `oops`" in r.stderr


def test_syntax_error_exit_1_with_rendered_diagnostic(tmp_path):
    f = tmp_path / "bad.tile"
    f.write_text("fn f() {\n    let x = (1 + 2;\n}\n")
    r = tilec("check", f)
    assert r.returncode == 1
    assert r.stderr == (
        "error[E0101]: expected `)` to close the `(` at 2:13, found `;`\n"
        f" --> {f}:2:19\n"
        "  |\n"
        "2 |     let x = (1 + 2;\n"
        "  |                   ^\n"
        f" ::: {f}:2:13\n"
        "  |\n"
        "2 |     let x = (1 + 2;\n"
        "  |             ^ opened here\n"
        "\n"
        "error: aborting due to 1 previous error\n")
    assert r.stdout == ""


def test_missing_file(tmp_path):
    r = tilec("check", tmp_path / "nope.tile")
    assert r.returncode == 1
    assert f"error[E0001]: cannot read `{tmp_path / 'nope.tile'}`: no such file" in r.stderr
    assert "Traceback" not in r.stderr


def test_folder(tmp_path):
    r = tilec("check", tmp_path)
    assert r.returncode == 1
    assert f"error[E0001]: `{tmp_path}` is a directory, not a .tile file" in r.stderr
    assert f"= help: to check every file in it, run `tilec check {tmp_path}/*.tile`" in r.stderr


def test_not_utf8(tmp_path):
    f = tmp_path / "latin1.tile"
    f.write_bytes(b"const A = 1;\nconst B = \xff;\n")
    r = tilec("check", f)
    assert r.returncode == 1
    assert f"error[E0002]: `{f}` is not valid UTF-8: byte 0xff at line 2, column 11" in r.stderr
    assert "help: save the file as UTF-8" in r.stderr


def test_empty_file_is_a_warning(tmp_path):
    f = tmp_path / "empty.tile"
    f.write_text("")
    r = tilec("check", f)
    assert r.returncode == 0
    assert r.stderr == f"warning[W0001]: `{f}` is empty: nothing to check\n"


def test_ten_megabyte_file(tmp_path):
    f = tmp_path / "huge.tile"
    line = "const A = 1;  // padding padding padding padding padding padding padding\n"
    f.write_text(line * (10_000_000 // len(line) + 1))
    r = tilec("check", f)
    assert r.returncode == 1
    assert f"error[E0003]: `{f}` is 10.0 MB; a Tile source file may be at most 8 MiB" in r.stderr


def test_several_files_report_all(tmp_path):
    a, b = tmp_path / "a.tile", tmp_path / "b.tile"
    a.write_text("const A = ;\n")
    b.write_text("const B = ;\n")
    r = tilec("check", a, EXAMPLES[0], b)
    assert r.returncode == 1
    assert "a.tile:1:11" in r.stderr and "b.tile:1:11" in r.stderr
    assert "aborting due to 2 previous errors" in r.stderr


def test_emit_ast_round_trips(tmp_path):
    for ex in EXAMPLES:
        r = tilec("--emit", "ast", ex)
        assert r.returncode == 0, r.stderr
        out = tmp_path / ex.name
        out.write_text(r.stdout)
        again = tilec("--emit", "ast", out)
        assert again.stdout == r.stdout


def test_emit_ast_to_file_written_atomically(tmp_path):
    out = tmp_path / "out.tile"
    r = tilec("--emit", "ast", "-o", out, ROOT / "examples" / "layernorm.tile")
    assert r.returncode == 0 and out.read_text().startswith("kernel layernorm(")
    bad = tmp_path / "bad.tile"
    bad.write_text("const = ;")
    out2 = tmp_path / "out2.tile"
    assert tilec("--emit", "ast", "-o", out2, bad).returncode == 1
    assert not out2.exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".tilec-")] == []


def _run_on_tty(args, env):
    """Run tilec with stderr connected to a pseudo-terminal; return what it wrote there."""
    master, slave = pty.openpty()
    e = dict(os.environ)
    e.pop("NO_COLOR", None)
    e.update(env)
    p = subprocess.Popen([sys.executable, "-m", "tilelang.cli", *map(str, args)],
                         stderr=slave, stdout=subprocess.DEVNULL, env=e)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 4096)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    p.wait(timeout=60)
    os.close(master)
    return b"".join(chunks).decode()


def test_colour_only_on_a_terminal_and_never_with_no_color(tmp_path):
    f = tmp_path / "bad.tile"
    f.write_text("const A = ;\n")
    assert "\x1b[" in _run_on_tty(["check", f], {})
    assert "\x1b[" not in _run_on_tty(["check", f], {"NO_COLOR": "1"})
    assert "\x1b[" not in tilec("check", f).stderr  # a pipe is not a terminal
