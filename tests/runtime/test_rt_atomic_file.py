"""tilelang/atomic_file.py: the one way a file is replaced (tilec -o, tilec fmt, the kernel
cache's records and key, tuning results)."""

from __future__ import annotations

import os
import pathlib
import stat

import pytest

from tilelang import atomic_file
from tilelang.atomic_file import NotAFile, replace_file

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _only(folder) -> list[str]:
    return sorted(os.listdir(folder))


def test_writes_a_new_file_and_replaces_a_regular_one(tmp_path):
    p = tmp_path / "out"
    assert replace_file(str(p), b"one") is True
    assert p.read_bytes() == b"one"
    inode = p.stat().st_ino
    assert replace_file(str(p), b"two") is True
    assert p.read_bytes() == b"two" and p.stat().st_ino != inode   # a new file, renamed over
    assert _only(tmp_path) == ["out"]


@pytest.mark.parametrize("kind,what", [("link", "is a symbolic link"),
                                       ("dangling", "is a symbolic link"),
                                       ("fifo", "is a FIFO"), ("folder", "is a folder")])
def test_never_writes_through_or_over_what_is_not_a_regular_file(tmp_path, kind, what):
    target = tmp_path / "target"
    target.write_bytes(b"keep")
    p = tmp_path / "p"
    if kind == "link":
        p.symlink_to(target)
    elif kind == "dangling":
        p.symlink_to(tmp_path / "nowhere")
    elif kind == "fifo":
        os.mkfifo(p)
    else:
        p.mkdir()
    before = os.lstat(p)
    with pytest.raises(NotAFile) as e:
        replace_file(str(p), b"new", fsync=True)
    assert e.value.what == what and e.value.strerror == f"`{p}` {what}"
    after = os.lstat(p)
    assert (after.st_ino, after.st_mode) == (before.st_ino, before.st_mode)
    assert target.read_bytes() == b"keep"
    assert not (tmp_path / "nowhere").exists()
    assert _only(tmp_path) == ["p", "target"]                      # no temporary file left


def test_a_character_device_is_refused():
    with pytest.raises(NotAFile, match="is a character device"):
        replace_file("/dev/null", b"x")
    assert stat.S_ISCHR(os.lstat("/dev/null").st_mode)


def test_mode_less_the_umask_or_exact(tmp_path):
    old = os.umask(0o027)
    try:
        replace_file(str(tmp_path / "a"), b"x", mode=0o666)
        replace_file(str(tmp_path / "b"), b"x", mode=0o600, exact_mode=True)
        replace_file(str(tmp_path / "c"), b"x", mode=0o775, exact_mode=True)
    finally:
        os.umask(old)
    modes = {n: stat.S_IMODE((tmp_path / n).stat().st_mode) for n in "abc"}
    assert modes == {"a": 0o640, "b": 0o600, "c": 0o775}


def test_first_writer_wins_without_replace(tmp_path):
    p = tmp_path / "key"
    assert replace_file(str(p), b"first", replace=False) is True
    assert replace_file(str(p), b"second", replace=False) is False
    assert p.read_bytes() == b"first"
    assert _only(tmp_path) == ["key"]


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                    reason="making a file of another user needs root")
def test_owner_only_refuses_another_users_file(tmp_path):
    p = tmp_path / "theirs"
    p.write_bytes(b"theirs")
    os.chown(p, 12345, -1)
    with pytest.raises(NotAFile, match="is owned by uid 12345, not by you"):
        replace_file(str(p), b"ours", owner_only=True)
    assert p.read_bytes() == b"theirs"
    assert replace_file(str(p), b"ours") is True                  # tilec -o: replaced


def test_a_failed_write_leaves_the_file_and_no_temporary(tmp_path, monkeypatch):
    p = tmp_path / "f"
    p.write_bytes(b"old")
    calls = []

    def no_space(fd):
        calls.append(fd)
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(atomic_file.os, "fsync", no_space)
    with pytest.raises(OSError, match="No space left"):
        replace_file(str(p), b"new", fsync=True)
    assert len(calls) == 1
    assert p.read_bytes() == b"old" and _only(tmp_path) == ["f"]
    replace_file(str(p), b"new")                                   # no fsync asked: none made
    assert len(calls) == 1 and p.read_bytes() == b"new"


@pytest.mark.parametrize("module,call", [
    ("tilelang/outfile.py", "replace_file("), ("tilelang/fmt/cli.py", "replace_file("),
    ("tilelang/runtime/cache.py", "replace_file("),
    ("tilelang/tune/store.py", "write_record(")])      # the cache's, through replace_file
def test_the_writers_use_it_and_no_copy_of_their_own(module, call):
    text = (ROOT / module).read_text()
    assert call in text
    for idiom in ("mkstemp", "os.replace(", "os.link("):
        assert idiom not in text, (module, idiom)


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                    reason="making a file of another user needs root")
def test_tilec_o_and_fmt_refuse_another_users_file(tmp_path, capsys):
    from tilelang.cli import main
    from tilelang.fmt.cli import rewrite
    out = tmp_path / "out.ptx"
    out.write_bytes(b"theirs")
    os.chown(out, 12345, -1)
    rc = main(["--emit", "tir", str(ROOT / "examples" / "vadd.tile"), "-o", str(out)])
    assert rc == 1
    assert capsys.readouterr().err == \
        f"tilec: error: cannot write `{out}`: it is owned by uid 12345, not by you\n"
    assert out.read_bytes() == b"theirs" and os.lstat(out).st_uid == 12345
    src = tmp_path / "k.tile"
    src.write_text("kernel k() {}\n")
    os.chown(src, 12345, -1)
    with pytest.raises(OSError, match="is owned by uid 12345, not by you"):
        rewrite(str(src), "kernel k() { }\n")
    assert src.read_text() == "kernel k() {}\n"
