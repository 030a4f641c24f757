"""`tilec -o PATH` (docs/cli.md, "Where the output goes"): a new or regular file is replaced
whole with the umask's mode, a FIFO or character device is written into and stays what it
was, a symbolic link to a file, a folder or a socket is refused with nothing written."""

from __future__ import annotations

import os
import pathlib
import socket
import stat
import threading

import pytest

from tilelang.cli import main

ROOT = pathlib.Path(__file__).resolve().parents[2]
VADD = str(ROOT / "examples" / "vadd.tile")


def tilec(capsys, *argv):
    try:
        rc = main([str(a) for a in argv])
    except SystemExit as e:
        rc = e.code
    got = capsys.readouterr()
    return rc, got.out, got.err


@pytest.fixture(scope="module")
def tir(tmp_path_factory):
    """The expected output, written once to a plain new file."""
    p = tmp_path_factory.mktemp("ref") / "vadd.tir"
    assert main(["--emit", "tir", VADD, "-o", str(p)]) == 0
    text = p.read_text()
    assert text.startswith("kernel @vadd(")
    return text


def only(folder, *names):
    return sorted(os.listdir(folder)) == sorted(names)


@pytest.mark.parametrize("umask,mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_outputs_honour_the_umask(capsys, tmp_path, tir, umask, mode):
    out = tmp_path / "o.tir"
    old = os.umask(umask)
    try:
        rc, _, err = tilec(capsys, "--emit", "tir", VADD, "-o", out)
        assert rc == 0, err
        assert stat.S_IMODE(out.stat().st_mode) == mode
        out.write_text("old\n")
        os.chmod(out, 0o600)
        rc, _, err = tilec(capsys, "--emit", "tir", VADD, "-o", out)   # replaced: new mode
        assert rc == 0 and out.read_text() == tir
        assert stat.S_IMODE(out.stat().st_mode) == mode
    finally:
        os.umask(old)
    assert only(tmp_path, "o.tir")


def test_default_cubin_path_honours_the_umask(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    old = os.umask(0o027)
    try:
        rc, _, err = tilec(capsys, VADD)
    finally:
        os.umask(old)
    assert rc == 0, err
    assert stat.S_IMODE((tmp_path / "vadd.cubin").stat().st_mode) == 0o640
    assert (tmp_path / "vadd.cubin").read_bytes()[:4] == b"\x7fELF"


def test_symlink_to_a_file_is_refused(capsys, tmp_path):
    target = tmp_path / "precious.txt"
    target.write_text("keep me\n")
    link = tmp_path / "out.tir"
    link.symlink_to(target)
    rc, out, err = tilec(capsys, "--emit", "tir", VADD, "-o", link)
    assert rc == 1 and out == ""
    assert err == f"tilec: error: `{link}` is a symbolic link; refusing to replace it (name " \
        f"its target, `{target}`, to write there)\n"
    assert link.is_symlink() and target.read_text() == "keep me\n"
    assert only(tmp_path, "precious.txt", "out.tir")


def test_dangling_symlink_is_refused(capsys, tmp_path):
    link = tmp_path / "out.tir"
    link.symlink_to(tmp_path / "nowhere")
    rc, _, err = tilec(capsys, "--emit", "tir", VADD, "-o", link)
    assert rc == 1 and "is a symbolic link; refusing to replace it" in err
    assert link.is_symlink() and not (tmp_path / "nowhere").exists()


def test_fifo_is_written_into(capsys, tmp_path, tir):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(open(fifo, "rb").read()))
    reader.start()
    try:
        rc, _, err = tilec(capsys, "--emit", "tir", VADD, "-o", fifo)
    finally:
        reader.join(timeout=30)
    assert rc == 0, err
    assert got == [tir.encode()]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert only(tmp_path, "pipe")


def test_dev_null_stays_a_device(capsys):
    before = os.lstat("/dev/null")
    rc, out, err = tilec(capsys, "--emit", "tir", VADD, "-o", "/dev/null")
    assert rc == 0 and out == "" and err == ""
    after = os.lstat("/dev/null")
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev
    assert after.st_ino == before.st_ino


def test_link_to_a_device_is_written_through(capsys, tmp_path):
    link = tmp_path / "null"
    link.symlink_to("/dev/null")
    rc, _, err = tilec(capsys, "--emit", "tir", VADD, "-o", link)
    assert rc == 0, err
    assert link.is_symlink() and stat.S_ISCHR(os.lstat("/dev/null").st_mode)


def test_folder_and_socket_are_refused(capsys, tmp_path):
    rc, _, err = tilec(capsys, "--emit", "tir", VADD, "-o", tmp_path)
    assert rc == 1 and err == f"tilec: error: cannot write `{tmp_path}`: it is a folder\n"
    sock_path = tmp_path / "s"
    s = socket.socket(socket.AF_UNIX)
    try:
        s.bind(str(sock_path))
        rc, _, err = tilec(capsys, "--emit", "tir", VADD, "-o", sock_path)
    finally:
        s.close()
    assert rc == 1 and err == f"tilec: error: cannot write `{sock_path}`: it is a socket\n"
    assert stat.S_ISSOCK(os.lstat(sock_path).st_mode)
    assert only(tmp_path, "s")


def test_missing_folder_and_failed_compile_write_nothing(capsys, tmp_path):
    out = tmp_path / "no" / "such" / "o.tir"
    rc, _, err = tilec(capsys, "--emit", "tir", VADD, "-o", out)
    assert rc == 1 and err == f"tilec: error: cannot write `{out}`: No such file or directory\n"
    bad = tmp_path / "bad.tile"
    bad.write_text("kernel k( {\n")
    existing = tmp_path / "o.tir"
    existing.write_text("previous\n")
    rc, _, err = tilec(capsys, "--emit", "tir", bad, "-o", existing)
    assert rc == 1 and "error[E" in err
    assert existing.read_text() == "previous\n"
    assert only(tmp_path, "bad.tile", "o.tir")


def test_dev_stdout_is_the_descriptor_as_open(tmp_path, tir):
    """`-o /dev/stdout` with stdout redirected to a file (a link to a regular file, which
    tilec would otherwise refuse) writes into that file, not over it."""
    import subprocess
    import sys
    target = tmp_path / "redirected.tir"
    with open(target, "wb") as f:
        r = subprocess.run([sys.executable, "-m", "tilelang.cli", "--emit", "tir", VADD, "-o",
                            "/dev/stdout"], stdout=f, stderr=subprocess.PIPE, text=False,
                           cwd=tmp_path, timeout=120,
                           env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr
    assert target.read_text() == tir
    assert only(tmp_path, "redirected.tir")
