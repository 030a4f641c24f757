"""Cache faults, fuzzed: a populated cache is damaged in one of ~60 ways (truncated, flipped,
swapped, JSON that is not an object, files where folders belong and back, links, FIFOs,
permissions, another owner, missing pieces); then every kernel still launches with the right
result on the emulator, and `tilec cache list|size|clear` neither crash nor follow links.

A seeded sample of the faults runs by default; `-m slow` runs every one, twice over (the
damage at other seeded positions), and some with the real compiler."""

from __future__ import annotations

import json
import os
import random
import shutil
import stat
import warnings

import numpy as np
import pytest

import tilelang
from rt_support import FakeCompiler, fresh_runtime, source  # noqa: F401 (autouse fixture)
from tilelang.cli import main
from tilelang.runtime import module as rt_module
from tilelang.runtime.cache import DiskCache

TILES = (1024, 256, 64)
OTHER_UID = 54321
IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


def launch_all(root, compiler=None, src=None):
    """Every kernel of the populated cache, launched; True when all results are right."""
    fc = compiler or FakeCompiler()
    rt_module.clear_memory_cache()
    m = tilelang.compile(src or source("vadd"), backend="emulator", compiler=fc,
                         cache_dir=str(root))
    ok = True
    for tile in TILES:
        a = np.arange(700, dtype=np.float32)
        b = np.full(700, 0.25, np.float32)
        c = np.zeros_like(a)
        m.vadd.specialize(TILE=tile)[(700 + tile - 1) // tile](a, b, c)
        ok &= bool(np.array_equal(c, a + b))
    return ok, fc


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    root = tmp_path_factory.mktemp("template") / "cache"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert launch_all(root)[0]
    assert len(DiskCache(str(root)).entries()) == 3
    return root


# ---------------------------------------------------------------------------------------------
# The faults. Each takes (root, rng) and damages the copy at root.

def _entries(root):
    base = root / "kernels"
    return sorted(p for shard in base.iterdir() for p in shard.iterdir())


def _entry(root, rng):
    return rng.choice(_entries(root))


def _two(root, rng):
    return rng.sample(_entries(root), 2)


def _modfile(root, rng):
    return rng.choice(sorted(p for shard in (root / "modules").iterdir()
                             for p in shard.iterdir()))


def _truncate(path, rng, half):
    data = path.read_bytes()
    path.write_bytes(data[:rng.randrange(1, max(2, len(data)))] if half else b"")


def _flip(path, rng):
    data = bytearray(path.read_bytes())
    i = rng.randrange(len(data))
    data[i] ^= 1 << rng.randrange(8)
    path.write_bytes(bytes(data))


def _replace_with_dir(path):
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()
    path.mkdir()
    (path / "inner").write_text("x")


def _replace_with_file(path, text="not a folder"):
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()
    path.write_text(text)


def _link(path, target):
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()
    path.symlink_to(target)


def _fifo(path):
    path.unlink()
    os.mkfifo(path)


def _meta_json(text):
    return lambda root, rng: (_entry(root, rng) / "meta.json").write_text(text)


def _resealed(edit):
    """An entry rewritten with a valid seal (as a buggy writer with the key would) whose body
    is malformed: it must still be a miss, never a crash."""
    def fault(root, rng):
        import hashlib
        import hmac
        d = _entry(root, rng)
        meta = json.loads((d / "meta.json").read_text())
        edit(meta["body"])
        canon = json.dumps(meta["body"], sort_keys=True, separators=(",", ":")).encode()
        meta["body_sha256"] = hashlib.sha256(canon).hexdigest()
        secret = (root / "seal.key").read_bytes()
        meta["seal"] = hmac.new(secret, f"tilelang-cache-2\n{d.name}\n{meta['body_sha256']}"
                                .encode(), hashlib.sha256).hexdigest()
        (d / "meta.json").write_text(json.dumps(meta))
    return fault


def _swap(name):
    def fault(root, rng):
        a, b = _two(root, rng)
        ta, tb = (a / name).read_bytes(), (b / name).read_bytes()
        (a / name).write_bytes(tb)
        (b / name).write_bytes(ta)
    return fault


def _swap_folders(root, rng):
    a, b = _two(root, rng)
    tmp = a.parent / "swap.tmp"
    a.rename(tmp)
    b.rename(a)
    tmp.rename(b)


def _chown(path):
    os.lchown(path, OTHER_UID, -1)


def _set(mapping, key, value):
    mapping[key] = value


FAULTS = {
    "meta_empty": lambda r, g: _truncate(_entry(r, g) / "meta.json", g, False),
    "meta_truncated": lambda r, g: _truncate(_entry(r, g) / "meta.json", g, True),
    "ptx_empty": lambda r, g: _truncate(_entry(r, g) / "kernel.ptx", g, False),
    "ptx_truncated": lambda r, g: _truncate(_entry(r, g) / "kernel.ptx", g, True),
    "meta_flipped": lambda r, g: _flip(_entry(r, g) / "meta.json", g),
    "ptx_flipped": lambda r, g: _flip(_entry(r, g) / "kernel.ptx", g),
    "ptx_appended": lambda r, g: open(_entry(r, g) / "kernel.ptx", "a").write("// more\n"),
    "meta_appended": lambda r, g: open(_entry(r, g) / "meta.json", "a").write("}{"),
    "meta_list": _meta_json("[]"),
    "meta_null": _meta_json("null"),
    "meta_number": _meta_json("3"),
    "meta_string": _meta_json('"meta"'),
    "meta_empty_object": _meta_json("{}"),
    "meta_deep": _meta_json("[" * 100000 + "]" * 100000),
    "meta_not_utf8": lambda r, g: (_entry(r, g) / "meta.json").write_bytes(b"\xff\xfe{\x00"),
    "sealed_body_list": _resealed(lambda b: b.clear() or b.update({"files": []})),
    "sealed_no_artifact": _resealed(lambda b: b.pop("artifact")),
    "sealed_artifact_null": _resealed(lambda b: _set(b, "artifact", None)),
    "sealed_params_string": _resealed(lambda b: _set(b["artifact"], "params", "abc")),
    "sealed_block_strings": _resealed(lambda b: _set(b["artifact"], "block", ["x"])),
    "sealed_target_number": _resealed(lambda b: _set(b, "target", 7)),
    "sealed_files_string": _resealed(lambda b: _set(b, "files", "kernel.ptx")),
    "sealed_size_wrong": _resealed(lambda b: _set(b["files"]["kernel.ptx"], "bytes", 3)),
    "sealed_extra_file": _resealed(lambda b: _set(b["files"], "../../seal.key",
                                                  {"bytes": 32, "sha256": "0"})),
    "swap_ptx": _swap("kernel.ptx"),
    "swap_meta": _swap("meta.json"),
    "swap_folders": _swap_folders,
    "ptx_missing": lambda r, g: (_entry(r, g) / "kernel.ptx").unlink(),
    "meta_missing": lambda r, g: (_entry(r, g) / "meta.json").unlink(),
    "ptx_is_folder": lambda r, g: _replace_with_dir(_entry(r, g) / "kernel.ptx"),
    "meta_is_folder": lambda r, g: _replace_with_dir(_entry(r, g) / "meta.json"),
    "ptx_links_to_other": lambda r, g: (lambda a, b: _link(a / "kernel.ptx",
                                                           b / "kernel.ptx"))(*_two(r, g)),
    "meta_links_to_other": lambda r, g: (lambda a, b: _link(a / "meta.json",
                                                            b / "meta.json"))(*_two(r, g)),
    "ptx_links_to_dev_zero": lambda r, g: _link(_entry(r, g) / "kernel.ptx", "/dev/zero"),
    "meta_is_fifo": lambda r, g: _fifo(_entry(r, g) / "meta.json"),
    "ptx_is_fifo": lambda r, g: _fifo(_entry(r, g) / "kernel.ptx"),
    "entry_is_file": lambda r, g: _replace_with_file(_entry(r, g)),
    "entry_links_to_other": lambda r, g: (lambda a, b: _link(a, b))(*_two(r, g)),
    "entry_dangling_link": lambda r, g: _link(_entry(r, g), "/nonexistent/entry"),
    "entry_empty": lambda r, g: (lambda d: (shutil.rmtree(d), d.mkdir(mode=0o700)))(
        _entry(r, g)),
    "entry_extra_file": lambda r, g: (_entry(r, g) / "extra.bin").write_bytes(b"\0" * 10),
    "entry_world_writable": lambda r, g: os.chmod(_entry(r, g), 0o777),
    "entry_unreadable": lambda r, g: os.chmod(_entry(r, g), 0),
    "files_unreadable": lambda r, g: [os.chmod(p, 0) for p in _entry(r, g).iterdir()],
    "shard_is_file": lambda r, g: _replace_with_file(_entry(r, g).parent),
    "shard_links_elsewhere": lambda r, g: _link(_entry(r, g).parent, r / "tmp"),
    "kernels_is_file": lambda r, g: _replace_with_file(r / "kernels"),
    "kernels_dangling_link": lambda r, g: _link(r / "kernels", r / "gone"),
    "stray_files": lambda r, g: ((_entry(r, g).parent / "zz").write_text("y"),
                                 (r / "kernels" / "stray").write_text("x")),
    "modules_is_file": lambda r, g: _replace_with_file(r / "modules"),
    "module_list": lambda r, g: _modfile(r, g).write_text("[]"),
    "module_truncated": lambda r, g: _truncate(_modfile(r, g), g, True),
    "module_flipped": lambda r, g: _flip(_modfile(r, g), g),
    "module_is_folder": lambda r, g: _replace_with_dir(_modfile(r, g)),
    "module_links_to_dev_zero": lambda r, g: _link(_modfile(r, g), "/dev/zero"),
    "module_shard_is_file": lambda r, g: _replace_with_file(_modfile(r, g).parent),
    "seal_missing": lambda r, g: (r / "seal.key").unlink(),
    "seal_truncated": lambda r, g: _truncate(r / "seal.key", g, True),
    "seal_is_folder": lambda r, g: _replace_with_dir(r / "seal.key"),
    "seal_links_elsewhere": lambda r, g: _link(r / "seal.key", _entry(r, g) / "kernel.ptx"),
    "seal_readable": lambda r, g: os.chmod(r / "seal.key", 0o644),
    "locks_is_file": lambda r, g: _replace_with_file(r / "locks"),
    "lock_files_are_folders": lambda r, g: [_replace_with_dir(p)
                                            for p in (r / "locks").iterdir()],
    "lock_files_link_to_dev_null": lambda r, g: [_link(p, "/dev/null")
                                                 for p in (r / "locks").iterdir()],
    "tmp_is_file": lambda r, g: _replace_with_file(r / "tmp"),
    "tmp_links_elsewhere": lambda r, g: _link(r / "tmp", r.parent),
    "old_format_entry": lambda r, g: (lambda d: (d / "meta.json").write_text(json.dumps(
        {"format": 1, "key": d.name, "ptx_sha256": "0"})))(_entry(r, g)),
    "entry_other_owner": lambda r, g: _chown(_entry(r, g)),
    "meta_other_owner": lambda r, g: _chown(_entry(r, g) / "meta.json"),
    "shard_other_owner": lambda r, g: _chown(_entry(r, g).parent),
    "root_world_writable": lambda r, g: os.chmod(r, 0o777),
    "root_other_owner": lambda r, g: _chown(r),
}
NEEDS_ROOT = {"entry_other_owner", "meta_other_owner", "shard_other_owner", "root_other_owner"}
ROOT_REFUSED = {"root_world_writable", "root_other_owner"}


def cache_cli(capsys, monkeypatch, root, *argv):
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(root))
    try:
        rc = main(["cache", *argv])
    except SystemExit as e:
        rc = e.code
    got = capsys.readouterr()
    assert "Traceback" not in got.err
    return rc, got.out, got.err


def _outside_untouched(tmp_path, outside_before):
    return sorted(p.name for p in (tmp_path / "outside").iterdir()) == outside_before


def check_fault(name, seed, template, tmp_path, capsys, monkeypatch, compiler=None, src=None):
    """Damage a copy of `template` with fault `name`; `compiler` makes a compiler per launch
    (default: the fake one)."""
    if name in NEEDS_ROOT and not IS_ROOT:
        pytest.skip("another owner needs root to simulate")
    root = tmp_path / "cache"
    shutil.copytree(template, root, symlinks=True)
    outside = tmp_path / "outside"               # where some links point: never written
    outside.mkdir()
    (outside / "keep.txt").write_text("keep")
    rng = random.Random(f"{name}-{seed}")
    FAULTS[name](root, rng)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ok, fc = launch_all(root, compiler and compiler(), src)
        assert ok, name
        ok2, fc2 = launch_all(root, compiler and compiler(), src)    # once repaired, it stays right
        assert ok2, name
    if name not in ROOT_REFUSED and name not in NEEDS_ROOT:
        assert len(fc2.builds if hasattr(fc2, "builds") else []) == 0, name   # repaired
    rc, out, err = cache_cli(capsys, monkeypatch, root, "list")
    assert rc == (1 if name in ROOT_REFUSED else 0), (name, err)
    rc, out, err = cache_cli(capsys, monkeypatch, root, "size")
    assert rc == (1 if name in ROOT_REFUSED else 0), (name, err)
    rc, out, err = cache_cli(capsys, monkeypatch, root, "clear")
    assert (outside / "keep.txt").read_text() == "keep"
    assert os.path.exists("/dev/null") and stat.S_ISCHR(os.lstat("/dev/null").st_mode)
    if name in ROOT_REFUSED:
        assert rc == 1 and "not using the cache folder" in err
        return
    assert rc == 0 and out.startswith("removed ")
    for d, dirs, files in os.walk(root):        # nothing of ours is left in the cache
        for n in dirs + files:
            p = os.path.join(d, n)
            if n not in ("seal.key", "CACHEDIR.TAG") and not _near_others(p, str(root)):
                pytest.fail(f"{name}: `tilec cache clear` left {p}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert launch_all(root, compiler and compiler(), src)[0], name


def _near_others(p, root):
    """Something of another owner is at, inside or above `p` (within root): clear keeps it."""
    up = p
    while up != root:
        if os.lstat(up).st_uid != os.geteuid():
            return True
        up = os.path.dirname(up)
    return any(os.lstat(q).st_uid != os.geteuid() for q in _below(p))


def _below(p):
    out = [p]
    if os.path.isdir(p) and not os.path.islink(p):
        for d, dirs, files in os.walk(p):
            out += [os.path.join(d, n) for n in dirs + files]
    return out


# The faults of the report always run; a seeded sample of the others joins them.
ALWAYS = ["meta_list", "meta_null", "meta_number", "shard_is_file", "entry_is_file",
          "entry_links_to_other", "files_unreadable", "sealed_params_string", "swap_folders"]
SAMPLE = ALWAYS + sorted(random.Random(12).sample(sorted(set(FAULTS) - set(ALWAYS)), 9))


def test_fault_count():
    assert len(FAULTS) >= 57


@pytest.mark.parametrize("name", SAMPLE)
def test_cache_fault_sample(name, template, tmp_path, capsys, monkeypatch):
    check_fault(name, 0, template, tmp_path, capsys, monkeypatch)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("name", sorted(FAULTS))
def test_cache_fault_all(name, seed, template, tmp_path, capsys, monkeypatch):
    check_fault(name, seed, template, tmp_path, capsys, monkeypatch)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["ptx_flipped", "meta_list", "swap_folders", "shard_is_file",
                                  "seal_missing", "sealed_artifact_null"])
def test_cache_fault_real_compiler(name, tmp_path_factory, tmp_path, capsys, monkeypatch):
    """The same with tilec itself compiling vadd (one template per test: the real compiler
    is slower)."""
    from tilelang.runtime.compiler import DriverCompiler
    real = DriverCompiler()

    class Counting:
        compiler_id = real.compiler_id

        def __init__(self):
            self.builds = []

        def inspect(self, *a):
            return real.inspect(*a)

        def build(self, *a):
            self.builds.append(a[2])
            return real.build(*a)

    with open(os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
            os.path.abspath(__file__)))), "examples", "vadd.tile")) as f:
        src = f.read()
    template = tmp_path_factory.mktemp("real") / "cache"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert launch_all(template, Counting(), src)[0]
    check_fault(name, 0, template, tmp_path, capsys, monkeypatch, Counting, src)
