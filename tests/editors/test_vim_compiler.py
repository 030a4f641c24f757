"""Vim's `:compiler tilec` (editors/vim/compiler/tilec.vim), in the real Vim: its errorformat
reads `tilec check`'s diagnostics into the quickfix list (file, line, column, error or
warning, code and message), and `:make` runs `tilec check` on the current file."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys

from editor_helpers import EDITORS, ROOT, vim_binary

BAD = "kernel k(a: Array[f32, 1]) {\n    let t = lod(a);\n    let u = 1;\n}\n"


def run_vim(tmp_path, body: str, env: dict | None = None):
    out = tmp_path / "qf.json"
    script = tmp_path / "t.vim"
    script.write_text(
        "set nocompatible\n"
        f"set runtimepath^={EDITORS / 'vim'}\n"
        "filetype plugin indent on\n"
        f"{body}\n"
        "call writefile([json_encode({'makeprg': &makeprg, 'qf': map(getqflist(), "
        "{_, v -> [bufname(v.bufnr), v.lnum, v.col, v.type, v.text, v.valid]})})], "
        f"'{out}')\n"
        "qa!\n")
    proc = subprocess.run([vim_binary(), "-Es", "-u", "NONE", "-i", "NONE", "-N", "-S",
                           str(script)], capture_output=True, text=True, timeout=60,
                          env={**os.environ, **(env or {})})
    assert out.exists(), proc.stdout + proc.stderr
    return json.loads(out.read_text())


def test_errorformat_reads_tilec_output(tmp_path, capsys):
    from tilelang.cli import main

    bad = tmp_path / "bad.tile"
    bad.write_text(BAD)
    syntax = tmp_path / "syntax.tile"
    syntax.write_text("fn f( {\n")
    assert main(["check", str(bad), str(syntax)]) == 1
    log = tmp_path / "tilec.out"
    log.write_text(capsys.readouterr().err)
    got = run_vim(tmp_path, f"compiler tilec\ncgetfile {log}")
    assert got["makeprg"] == "tilec check %:S"
    assert got["qf"] == [
        [str(bad), 2, 13, "e", "[E0201]: cannot find `lod` in this scope", 1],
        [str(bad), 3, 9, "w", "[W0201]: unused variable `u`", 1],
        [str(syntax), 1, 7, "e", got["qf"][2][4], 1],
    ]
    assert got["qf"][2][4].startswith("[E0101]: ")


def test_make_runs_tilec_check(tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    tilec = bindir / "tilec"
    tilec.write_text(f"#!/bin/sh\ncd '{ROOT}' && exec '{sys.executable}' -m tilelang.cli \"$@\"\n")
    tilec.chmod(tilec.stat().st_mode | stat.S_IXUSR)
    bad = tmp_path / "bad.tile"
    bad.write_text(BAD)
    got = run_vim(tmp_path, f"edit {bad}\ncompiler tilec\nsilent make",
                  env={"PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}"})
    assert [(q[1], q[2], q[3]) for q in got["qf"]] == [(2, 13, "e"), (3, 9, "w")]
    assert all(os.path.samefile(q[0], bad) for q in got["qf"])
