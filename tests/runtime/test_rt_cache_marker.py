"""A Tile cache is recognisable (CACHEDIR.TAG with Tile's line, docs/cli.md "The kernel
cache"), and only such a folder, an empty one or a cache made before the tag is used,
chmodded or cleared: an ordinary folder named as the cache is left exactly as it was."""

from __future__ import annotations

import os
import stat
import warnings

import numpy as np
import pytest

import tilelang
from rt_support import FakeCompiler, fresh_runtime, source  # noqa: F401 (autouse fixture)
from tilelang.cli import main
from tilelang.runtime import module as rt_module
from tilelang.runtime.cache import MARKER, DiskCache

SIGNATURE = "Signature: 8a477f597d28d172789f06886806bc55"


def launch(root):
    """vadd through the cache at `root`: (right answer, compiler, RuntimeWarning texts)."""
    fc = FakeCompiler()
    rt_module.clear_memory_cache()
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        m = tilelang.compile(source("vadd"), backend="emulator", compiler=fc,
                             cache_dir=str(root))
        a = np.arange(1000, dtype=np.float32)
        c = np.zeros_like(a)
        m.vadd[1](a, a, c)
    return bool(np.array_equal(c, a + a)), fc, [str(w.message) for w in got
                                                 if issubclass(w.category, RuntimeWarning)]


def snapshot(root) -> dict:
    """Every path under `root` with its mode and contents."""
    out = {}
    for dirpath, dirs, files in os.walk(root):
        for n in dirs + files:
            p = os.path.join(dirpath, n)
            st = os.lstat(p)
            data = open(p, "rb").read() if stat.S_ISREG(st.st_mode) else None
            out[os.path.relpath(p, root)] = (stat.S_IMODE(st.st_mode), data)
    out["."] = (stat.S_IMODE(os.lstat(root).st_mode), None)
    return out


def project(tmp_path):
    """An ordinary folder with the names the cache uses for its own subfolders."""
    root = tmp_path / "project"
    for sub in ("tmp", "modules", "locks", "tune", "kernels"):
        (root / sub).mkdir(parents=True)
        (root / sub / "notes.txt").write_text(f"my {sub}\n")
    (root / "README").write_text("mine\n")
    os.chmod(root, 0o755)
    return root


def run(capsys, *argv):
    try:
        rc = main(list(argv))
    except SystemExit as e:
        rc = e.code
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_a_new_cache_is_tagged(tmp_path):
    root = tmp_path / "new" / "cache"
    ok, fc, msgs = launch(root)
    assert ok and msgs == []
    tag = root / MARKER
    st = os.lstat(tag)
    assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600
    lines = tag.read_text().splitlines()
    assert lines[0] == SIGNATURE and lines[-1] == "tilelang-cache-format: 2"
    assert stat.S_IMODE(os.lstat(root).st_mode) == 0o700
    assert launch(root)[1].builds == []                       # the second launch: a disk hit


def test_an_ordinary_folder_is_never_used_nor_chmodded(tmp_path):
    root = project(tmp_path)
    before = snapshot(root)
    ok, fc, msgs = launch(root)
    assert ok and len(fc.builds) == 1
    assert msgs == [f"tilelang: not using {root} as the kernel cache: it is not a Tile kernel "
                    f"cache (it has no {MARKER} written by Tile, and it holds other files); "
                    "compiling without a cache (point TILELANG_CACHE_DIR at a new or empty "
                    "folder)"]
    assert snapshot(root) == before


def test_cache_clear_refuses_an_ordinary_folder(tmp_path, capsys):
    root = project(tmp_path)
    before = snapshot(root)
    for action in ("clear", "list", "size"):
        rc, out, err = run(capsys, "cache", action, "--dir", str(root))
        assert rc == 1 and out == ""
        assert err == (f"tilec cache: error: not using the cache folder {root}: it is not a "
                       f"Tile kernel cache (it has no {MARKER} written by Tile, and it holds "
                       "other files)\n")
    assert snapshot(root) == before


def test_another_tools_cachedir_tag_is_not_tiles(tmp_path, capsys):
    root = tmp_path / "target"
    (root / "kernels").mkdir(parents=True)
    (root / "kernels" / "x").write_text("theirs")
    (root / MARKER).write_text(SIGNATURE + "\n# This file is a cache directory tag created "
                               "by cargo.\n")
    before = snapshot(root)
    rc, out, err = run(capsys, "cache", "clear", "--dir", str(root))
    assert rc == 1 and "is not a Tile kernel cache" in err
    assert launch(root)[2] != []
    assert snapshot(root) == before


def test_an_empty_folder_becomes_a_cache(tmp_path, capsys):
    root = tmp_path / "c"
    root.mkdir()
    os.chmod(root, 0o755)
    ok, fc, msgs = launch(root)
    assert ok and msgs == [] and (root / MARKER).is_file()
    assert stat.S_IMODE(os.lstat(root).st_mode) == 0o700
    rc, out, err = run(capsys, "cache", "clear", "--dir", str(root))
    assert rc == 0 and out == f"removed 1 kernel from {root}\n"
    assert sorted(os.listdir(root)) == [MARKER, "seal.key"]


def test_a_cache_from_before_the_tag_is_still_used(tmp_path):
    root = tmp_path / "c"
    assert launch(root)[0]
    os.unlink(root / MARKER)                      # as a tilec of before the tag left it
    assert DiskCache(str(root)).problem() is None
    ok, fc, msgs = launch(root)
    assert ok and fc.builds == [] and msgs == []  # its kernel loads from disk
    assert (root / MARKER).is_file() is False     # a load does not write
    launch_tile = FakeCompiler()
    rt_module.clear_memory_cache()
    m = tilelang.compile(source("vadd"), backend="emulator", compiler=launch_tile,
                         cache_dir=str(root))
    a = np.arange(100, dtype=np.float32)
    m.vadd.specialize(TILE=64)[2](a, a, np.zeros_like(a))
    assert (root / MARKER).is_file()              # a store tags it


@pytest.mark.parametrize("extra", ["notes.txt", ".git"])
def test_a_cache_with_other_files_is_not_a_cache_from_before(tmp_path, extra):
    root = tmp_path / "c"
    assert launch(root)[0]
    os.unlink(root / MARKER)
    (root / extra).write_text("x")
    assert "is not a Tile kernel cache" in DiskCache(str(root)).problem()
