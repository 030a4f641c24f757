"""`tilec fmt FILE...`, `--check`, `--diff` and `-`: exit statuses, what is written and what is
never touched (a file that does not parse, a symbolic link, something that is not a regular
file, any file when the layout would change the program)."""

from __future__ import annotations

import io
import os
import pathlib
import subprocess
import sys

import pytest

from tilelang.cli import main

ROOT = pathlib.Path(__file__).resolve().parents[2]
UGLY = "fn f(a,b){return a+b;}\n"
PRETTY = "fn f(a, b) {\n    return a + b;\n}\n"


def _stdin(monkeypatch, text: str) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text.encode("utf-8"))))


def test_rewrites_in_place_keeping_the_mode(tmp_path):
    f = tmp_path / "a.tile"
    f.write_text(UGLY)
    f.chmod(0o640)
    assert main(["fmt", str(f)]) == 0
    assert f.read_text() == PRETTY
    assert (f.stat().st_mode & 0o777) == 0o640
    assert sorted(os.listdir(tmp_path)) == ["a.tile"]  # no temporary file left


def test_a_formatted_file_is_not_written(tmp_path):
    f = tmp_path / "a.tile"
    f.write_text(PRETTY)
    before = f.stat().st_mtime_ns
    os.utime(f, ns=(before - 10**9, before - 10**9))
    assert main(["fmt", str(f)]) == 0
    assert f.stat().st_mtime_ns == before - 10**9


def test_check(tmp_path, capsys):
    good, bad = tmp_path / "good.tile", tmp_path / "bad.tile"
    good.write_text(PRETTY)
    bad.write_text(UGLY)
    assert main(["fmt", "--check", str(good)]) == 0
    assert main(["fmt", "--check", str(good), str(bad)]) == 1
    err = capsys.readouterr().err
    assert err == f"tilec fmt: {bad} is not formatted\n"
    assert bad.read_text() == UGLY


def test_diff(tmp_path, capsys):
    f = tmp_path / "a.tile"
    f.write_text(UGLY)
    assert main(["fmt", "--diff", str(f)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines() == [
        f"--- {f} (original)", f"+++ {f} (formatted)", "@@ -1 +1,3 @@",
        "-fn f(a,b){return a+b;}", "+fn f(a, b) {", "+    return a + b;", "+}"]
    assert f.read_text() == UGLY
    assert main(["fmt", "--diff", "--check", str(f)]) == 1


def test_stdin(monkeypatch, capsys):
    _stdin(monkeypatch, UGLY)
    assert main(["fmt", "-"]) == 0
    assert capsys.readouterr().out == PRETTY
    _stdin(monkeypatch, UGLY)
    assert main(["fmt", "--check", "-"]) == 1
    assert capsys.readouterr().err == "tilec fmt: <stdin> is not formatted\n"


def test_a_folder_formats_its_tile_files(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "x.tile").write_text(UGLY)
    (tmp_path / "notes.txt").write_text("fn f(a,b){}")
    outside = tmp_path.parent / f"{tmp_path.name}-outside.tile"
    outside.write_text(UGLY)
    (tmp_path / "link.tile").symlink_to(outside)  # found in a folder: left alone
    assert main(["fmt", str(tmp_path)]) == 0
    assert (tmp_path / "sub" / "x.tile").read_text() == PRETTY
    assert (tmp_path / "notes.txt").read_text() == "fn f(a,b){}"
    assert outside.read_text() == UGLY and (tmp_path / "link.tile").is_symlink()


def test_a_syntax_error_leaves_the_file_alone(tmp_path, capsys):
    f = tmp_path / "a.tile"
    f.write_text("fn f( {\n")
    assert main(["fmt", str(f)]) == 1
    err = capsys.readouterr().err
    assert "error[E0101]" in err and f"{f}:1:7" in err and "Traceback" not in err
    assert f.read_text() == "fn f( {\n"


def test_other_files_are_still_formatted_after_an_error(tmp_path):
    bad, good = tmp_path / "bad.tile", tmp_path / "good.tile"
    bad.write_text("fn (")
    good.write_text(UGLY)
    assert main(["fmt", str(bad), str(good)]) == 1
    assert good.read_text() == PRETTY


def test_never_writes_through_a_symbolic_link(tmp_path, capsys):
    target = tmp_path / "real.tile"
    target.write_text(UGLY)
    link = tmp_path / "link.tile"
    link.symlink_to(target)
    assert main(["fmt", str(link)]) == 1
    assert capsys.readouterr().err == (
        f"tilec fmt: {link}: a symbolic link is not rewritten (format its target)\n")
    assert link.is_symlink() and target.read_text() == UGLY
    assert main(["fmt", "--check", str(link)]) == 1  # reading through it is fine


def test_not_a_regular_file(tmp_path, capsys):
    fifo = tmp_path / "pipe.tile"
    os.mkfifo(fifo)
    assert main(["fmt", str(fifo)]) == 1
    assert capsys.readouterr().err == (f"tilec fmt: {fifo}: it is a FIFO (named pipe), not a "
                                       "regular file\n")
    assert main(["fmt", str(tmp_path / "missing.tile")]) == 1
    assert "No such file or directory" in capsys.readouterr().err


def test_not_utf8(tmp_path, capsys):
    f = tmp_path / "a.tile"
    f.write_bytes(b"const A = 1; // \xff\n")
    assert main(["fmt", str(f)]) == 1
    assert capsys.readouterr().err == f"tilec fmt: {f}: not UTF-8 text (byte 16)\n"


def test_a_layout_that_changes_the_program_writes_nothing(tmp_path, capsys, monkeypatch):
    import tilelang.fmt as fmt

    monkeypatch.setattr(fmt, "layout", lambda toks, width: "fn f(a, b) {\n    return a - b;\n}\n")
    f = tmp_path / "a.tile"
    f.write_text(UGLY)
    assert main(["fmt", str(f)]) == 1
    assert capsys.readouterr().err == (
        f"tilec fmt: internal error: {f}: formatting would change the program; the file is "
        f"left as it was\n")
    assert f.read_text() == UGLY


def test_usage_errors_exit_2(capsys):
    with pytest.raises(SystemExit) as e:
        main(["fmt"])
    assert e.value.code == 2
    with pytest.raises(SystemExit) as e:
        main(["fmt", "-", "-"])
    assert e.value.code == 2


def test_whole_process(tmp_path):
    f = tmp_path / "a.tile"
    f.write_text(UGLY)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    cmd = [sys.executable, "-c", "import sys; from tilelang.cli import main; sys.exit(main())"]
    r = subprocess.run(cmd + ["fmt", "--check", str(f)], capture_output=True, text=True,
                       env=env, timeout=60)
    assert (r.returncode, r.stdout) == (1, "")
    r = subprocess.run(cmd + ["fmt", "-"], input=UGLY, capture_output=True, text=True, env=env,
                       timeout=60)
    assert (r.returncode, r.stdout, r.stderr) == (0, PRETTY, "")


def test_markdown_formats_the_tile_blocks_that_parse(tmp_path):
    md = tmp_path / "notes.md"
    md.write_text("# Notes\n\n```tile\nfn f(a,b){return a+b;}\n```\n\nA fragment:\n\n"
                  "```tile\nlet x=1;\n```\n\n```python\nx=1\n```\n")
    assert main(["fmt", "--check", str(md)]) == 1
    assert main(["fmt", str(md)]) == 0
    assert md.read_text() == (
        "# Notes\n\n```tile\n" + PRETTY + "```\n\nA fragment:\n\n```tile\nlet x=1;\n```\n\n"
        "```python\nx=1\n```\n")
    assert main(["fmt", "--check", str(md)]) == 0
