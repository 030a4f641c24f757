"""The kernel cache on a shared machine: its folders stay private whatever the umask, a folder
that is not ours, is writable by others or is a link is refused with one warning (kernels
still compile), and an entry planted or edited by anyone without the cache's key, or moved
under another key, is never loaded: it is rebuilt and the launch gives the right result."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import shutil
import stat
import warnings

import numpy as np
import pytest

import tilelang
from rt_support import FakeCompiler, fresh_runtime, source  # noqa: F401 (autouse fixture)
from tilelang.runtime import cache as cache_mod
from tilelang.runtime import module as rt_module
from tilelang.runtime.cache import DiskCache

OTHER_UID = 54321


def launch(root, fc=None, tile=None):
    """vadd through the cache at `root`; returns (result is right, compiler)."""
    fc = fc or FakeCompiler()
    rt_module.clear_memory_cache()
    m = tilelang.compile(source("vadd"), backend="emulator", compiler=fc, cache_dir=str(root))
    k = m.vadd.specialize(TILE=tile) if tile else m.vadd
    a = np.arange(1000, dtype=np.float32)
    b = np.full(1000, 0.5, np.float32)
    c = np.zeros_like(a)
    k[(1000 + (tile or 1024) - 1) // (tile or 1024)](a, b, c)
    return bool(np.array_equal(c, a + b)), fc


def entry_dir(root, tile=None):
    [e] = [e for e in DiskCache(str(root)).entries()
           if tile is None or e["consts"].get("TILE") == tile]
    return e["path"]


def reseal(d, key, secret=b"x" * 32, *, edit=None, ptx=None):
    """Rewrite an entry as an attacker would: consistent checksums, a seal from `secret`."""
    with open(os.path.join(d, "meta.json")) as f:
        meta = json.load(f)
    body = meta["body"]
    if ptx is not None:
        with open(os.path.join(d, "kernel.ptx"), "wb") as f:
            f.write(ptx)
        body["files"]["kernel.ptx"] = {"bytes": len(ptx),
                                       "sha256": hashlib.sha256(ptx).hexdigest()}
    if edit:
        edit(body)
    canon = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
    meta["key"] = key
    meta["body_sha256"] = hashlib.sha256(canon).hexdigest()
    meta["seal"] = hmac.new(secret, f"tilelang-cache-2\n{key}\n{meta['body_sha256']}".encode(),
                            hashlib.sha256).hexdigest()
    with open(os.path.join(d, "meta.json"), "w") as f:
        json.dump(meta, f)


def evil_ptx(d) -> bytes:
    with open(os.path.join(d, "kernel.ptx"), "rb") as f:
        ptx = f.read()
    assert b"add.f32" in ptx
    return ptx.replace(b"add.f32", b"sub.f32")


def test_planted_kernel_with_matching_hashes_never_runs(tmp_path):
    assert launch(tmp_path)[0]
    d = entry_dir(tmp_path)
    key = os.path.basename(d)
    reseal(d, key, ptx=evil_ptx(d))
    cache_mod.reset_stats()
    with pytest.warns(RuntimeWarning, match="not sealed by this cache"):
        ok, fc = launch(tmp_path)
    assert ok and len(fc.builds) == 1 and cache_mod.STATS["corrupt"] == 1
    with open(os.path.join(entry_dir(tmp_path), "kernel.ptx"), "rb") as f:
        assert b"sub.f32" not in f.read()              # the entry was replaced


def test_entry_of_another_key_is_not_loaded(tmp_path):
    assert launch(tmp_path, tile=64)[0] and launch(tmp_path, tile=256)[0]
    d64, d256 = entry_dir(tmp_path, 64), entry_dir(tmp_path, 256)
    # Swapped whole: meta.json names the other key.
    shutil.rmtree(d256)
    shutil.copytree(d64, d256)
    cache_mod.reset_stats()
    with pytest.warns(RuntimeWarning, match="belongs to another key"):
        ok, fc = launch(tmp_path, tile=256)
    assert ok and len(fc.builds) == 1
    # Swapped with the key rewritten (the seal cannot be).
    shutil.rmtree(d256)
    shutil.copytree(d64, d256)
    reseal(d256, os.path.basename(d256))
    with pytest.warns(RuntimeWarning, match="not sealed"):
        ok, fc = launch(tmp_path, tile=256)
    assert ok and len(fc.builds) == 1
    ok, fc = launch(tmp_path, tile=256)                # the rebuilt entry loads
    assert ok and fc.builds == []


@pytest.mark.parametrize("edit", ["block", "params", "checksum_only", "seal", "format"])
def test_edited_meta_is_recovered(tmp_path, edit):
    assert launch(tmp_path)[0]
    d = entry_dir(tmp_path)
    path = os.path.join(d, "meta.json")
    with open(path) as f:
        meta = json.load(f)
    if edit == "block":
        meta["body"]["artifact"]["block"] = [64, 1, 1]
    elif edit == "params":
        meta["body"]["artifact"]["params"] = meta["body"]["artifact"]["params"][::-1]
    elif edit == "checksum_only":
        meta["body_sha256"] = "0" * 64
    elif edit == "seal":
        meta["seal"] = meta["seal"][::-1]
    else:
        meta["format"] = 1
    with open(path, "w") as f:
        json.dump(meta, f)
    cache_mod.reset_stats()
    with pytest.warns(RuntimeWarning, match="damaged cache entry"):
        ok, fc = launch(tmp_path)
    assert ok and len(fc.builds) == 1 and cache_mod.STATS["corrupt"] == 1
    assert launch(tmp_path)[1].builds == []


def test_folders_are_private_whatever_the_umask(tmp_path):
    old = os.umask(0)
    try:
        assert launch(tmp_path / "c")[0]
    finally:
        os.umask(old)
    root = tmp_path / "c"
    for d, dirs, files in os.walk(root):
        assert stat.S_IMODE(os.lstat(d).st_mode) == 0o700, d
        for n in files:
            assert stat.S_IMODE(os.lstat(os.path.join(d, n)).st_mode) == 0o600, n


def test_a_readable_root_of_ours_is_made_private(tmp_path):
    root = tmp_path / "c"
    root.mkdir()
    os.chmod(root, 0o755)
    assert launch(root)[0]
    assert stat.S_IMODE(os.lstat(root).st_mode) == 0o700


def _refused(root, match, made=None):
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        ok, fc = launch(root)
        ok2, fc2 = launch(root)
    msgs = [str(w.message) for w in got if issubclass(w.category, RuntimeWarning)]
    assert ok and ok2 and len(fc.builds) == 1 and len(fc2.builds) == 1   # no cache used
    assert len(msgs) == 1, msgs                                        # warned once
    assert "not using the kernel cache" in msgs[0] and match in msgs[0]
    assert f"`{made or root}`" in msgs[0]


needs_root = pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                                reason="chown to another uid needs root")


@needs_root
def test_root_owned_by_someone_else_is_refused(tmp_path):
    root = tmp_path / "c"
    root.mkdir(mode=0o700)
    os.chown(root, OTHER_UID, -1)
    _refused(root, f"owned by uid {OTHER_UID}")
    assert os.listdir(root) == []


def test_world_writable_root_is_refused(tmp_path):
    root = tmp_path / "c"
    root.mkdir()
    os.chmod(root, 0o777)
    _refused(root, "is writable by other users (mode 0777)")
    assert os.listdir(root) == []


def test_symlinked_root_is_refused(tmp_path):
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    (tmp_path / "c").symlink_to(real)
    _refused(tmp_path / "c", "is a symbolic link")
    assert os.listdir(real) == []


@needs_root
def test_shard_owned_by_someone_else_is_refused(tmp_path):
    root = tmp_path / "c"
    assert launch(root)[0]
    shard = os.path.dirname(entry_dir(root))
    os.chown(shard, OTHER_UID, -1)
    cache_mod.reset_stats()
    _refused(root, f"owned by uid {OTHER_UID}", made=shard)


def test_group_writable_shard_is_refused(tmp_path):
    root = tmp_path / "c"
    assert launch(root)[0]
    shard = os.path.dirname(entry_dir(root))
    os.chmod(shard, 0o770)
    cache_mod.reset_stats()
    _refused(root, "mode 0770", made=shard)


def test_seal_key_of_someone_else_is_not_used(tmp_path):
    root = tmp_path / "c"
    assert launch(root)[0]
    key = root / "seal.key"
    os.chmod(key, 0o644)            # readable by others: it can no longer vouch for anything
    with pytest.warns(RuntimeWarning, match="not sealed"):
        ok, fc = launch(root)
    assert ok and len(fc.builds) == 1
    assert stat.S_IMODE(os.lstat(key).st_mode) == 0o600
    assert launch(root)[1].builds == []


def test_compiler_id_follows_the_compilers_code(tmp_path):
    from tilelang import driver
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "a.py").write_text("x = 1\n")
    (pkg / "sub" / "b.py").write_text("y = 2\n")
    files = [("tilelang/a.py", str(pkg / "a.py")), ("tilelang/sub/b.py", str(pkg / "sub/b.py"))]
    before = driver.code_digest(files)
    assert driver.code_digest(files) == before
    (pkg / "sub" / "b.py").write_text("y = 3\n")
    assert driver.code_digest(files) != before
    # The real inputs: the package's code, the grammar and the standard library.
    labels = [label for label, _ in driver.code_files()]
    assert "tilelang/driver.py" in labels and "tilelang/runtime/cache.py" in labels
    assert any(lb.endswith("tile.lark") for lb in labels)
    assert any(lb.endswith("std/math.tile") for lb in labels)
    assert re.search(r"^tilec \S+ \(code [0-9a-f]{16}\); llvmlite ", str(driver.COMPILER_ID))
    # (other edits to the tree may land in between: either digest will do)
    d1, text, d2 = driver.code_digest(), driver._version_id(), driver.code_digest()
    assert f"(code {d1[:16]})" in text or f"(code {d2[:16]})" in text
