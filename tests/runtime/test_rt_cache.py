"""The disk cache across processes: a second process compiles nothing (not even the front
end), four processes building one kernel at once leave one valid entry (one of them builds),
damaged entries are detected and rebuilt, and the key follows the sources and the options."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import tilelang
from rt_support import FakeCompiler, fresh_runtime, run_script, source  # noqa: F401
from tilelang.runtime import cache as cache_mod
from tilelang.runtime.cache import DiskCache

SCRIPT = """
import json, sys, numpy as np, tilelang
from rt_support import FakeCompiler, source
from tilelang.runtime.cache import STATS
fc = FakeCompiler(delay={delay})
src = {src!r}
mod = tilelang.compile(src, backend="emulator", compiler=fc)
a = np.arange(3000, dtype=np.float32); b = np.ones(3000, np.float32); c = np.zeros_like(a)
mod.vadd[3](a, b, c)
ok = bool(np.array_equal(c, a + b))
print(json.dumps({{"ok": ok, "builds": len(fc.builds), "inspects": fc.inspects, **STATS}}))
"""


def run(tmp_path, src=None, delay=0.0):
    r = run_script(SCRIPT.format(src=src or source("vadd"), delay=delay), str(tmp_path))
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def kernel_entries(root):
    return DiskCache(str(root)).entries()


def test_second_process_compiles_nothing(tmp_path):
    first = run(tmp_path)
    assert first["ok"] and first["builds"] == 1 and first["inspects"] == 1
    assert first["disk_writes"] == 1
    second = run(tmp_path)
    assert second["ok"]
    assert second["builds"] == 0 and second["inspects"] == 0 and second["compiles"] == 0
    assert second["disk_hits"] == 1 and second["module_disk_hits"] == 1
    assert len(kernel_entries(tmp_path)) == 1


def test_four_processes_build_one_entry(tmp_path):
    env = dict(os.environ, TILELANG_CACHE_DIR=str(tmp_path),
               PYTHONPATH=os.pathsep.join([os.path.dirname(os.path.dirname(
                   os.path.dirname(os.path.abspath(__file__)))), os.path.dirname(
                       os.path.abspath(__file__))]))
    code = SCRIPT.format(src=source("vadd"), delay=1.0)
    procs = [subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(4)]
    results = []
    for p in procs:
        out, errs = p.communicate(timeout=120)
        assert p.returncode == 0, errs
        results.append(json.loads(out.strip().splitlines()[-1]))
    assert all(r["ok"] for r in results)
    assert sum(r["builds"] for r in results) == 1          # the others waited and loaded it
    entries = kernel_entries(tmp_path)
    assert len(entries) == 1
    assert DiskCache(str(tmp_path)).load(entries[0]["key"]) is not None
    assert not [n for n in os.listdir(tmp_path / "tmp") if not n.startswith("trash")]


@pytest.mark.parametrize("damage", ["ptx", "meta", "truncate_meta", "missing_ptx"])
def test_corrupted_entry_is_rebuilt(tmp_path, damage):
    run(tmp_path)
    [entry] = kernel_entries(tmp_path)
    d = entry["path"]
    if damage == "ptx":
        with open(os.path.join(d, "kernel.ptx"), "a") as f:
            f.write("garbage\n")
    elif damage == "meta":
        with open(os.path.join(d, "meta.json"), "w") as f:
            f.write("{not json")
    elif damage == "truncate_meta":
        with open(os.path.join(d, "meta.json"), "r+") as f:
            f.truncate(10)
    else:
        os.unlink(os.path.join(d, "kernel.ptx"))
    again = run(tmp_path)
    assert again["ok"] and again["corrupt"] == 1 and again["builds"] == 1
    assert again["disk_writes"] == 1
    [entry2] = kernel_entries(tmp_path)
    assert DiskCache(str(tmp_path)).load(entry2["key"]) is not None
    third = run(tmp_path)
    assert third["builds"] == 0 and third["corrupt"] == 0


def test_key_follows_source_and_imports(tmp_path):
    dep = tmp_path / "dep.tile"
    dep.write_text("// v1\n")
    src = source("vadd") + f"import {dep}\n"
    assert run(tmp_path / "c", src)["builds"] == 1
    assert run(tmp_path / "c", src)["builds"] == 0
    dep.write_text("// v2\n")                       # an imported file changed
    r = run(tmp_path / "c", src)
    assert r["inspects"] == 1 and r["builds"] == 1
    assert run(tmp_path / "c", src + "// edited\n")["builds"] == 1
    assert len(kernel_entries(tmp_path / "c")) == 3


def test_key_follows_consts_facts_and_options(tmp_path):
    fc = FakeCompiler()
    kw = dict(backend="emulator", compiler=fc, cache_dir=str(tmp_path))
    m = tilelang.compile(source("vadd"), **kw)
    m.vadd.compile()
    m.vadd.specialize(TILE=64).compile()
    m.vadd.compile({"b": "--"})
    tilelang.compile(source("vadd"), arch="sm_80", **kw).vadd.compile()
    tilelang.compile(source("vadd"), opt_level=1, **kw).vadd.compile()
    assert len(fc.builds) == 5
    assert len(kernel_entries(tmp_path)) == 5
    tilelang.runtime.module.clear_memory_cache()
    tilelang.compile(source("vadd"), arch="sm_80", **kw).vadd.compile()
    assert len(fc.builds) == 5 and cache_mod.STATS["disk_hits"] == 1


def test_memory_cache_across_modules(tmp_path):
    fc = FakeCompiler()
    for _ in range(2):
        m = tilelang.compile(source("vadd"), backend="emulator", compiler=fc,
                             cache_dir=str(tmp_path))
        m.vadd.compile()
    assert len(fc.builds) == 1 and cache_mod.STATS["memory_hits"] == 1


def test_cache_disabled(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "never"))
    fc = FakeCompiler()
    m = tilelang.compile(source("vadd"), backend="emulator", compiler=fc, cache=False)
    m.vadd.compile()
    assert len(fc.builds) == 1 and not (tmp_path / "never").exists()


def test_cache_dir_from_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "here"))
    assert cache_mod.cache_dir() == str(tmp_path / "here")
    monkeypatch.delenv("TILELANG_CACHE_DIR")
    assert cache_mod.cache_dir() == os.path.join(os.path.expanduser("~"), ".cache", "tilelang")


def test_entry_contents(tmp_path):
    fc = FakeCompiler()
    m = tilelang.compile(source("vadd"), backend="emulator", compiler=fc,
                         cache_dir=str(tmp_path))
    spec = m.vadd.specialize(TILE=256).compile({"a": "-ae"})
    [e] = kernel_entries(tmp_path)
    assert e["kernel"] == "vadd" and e["consts"] == {"TILE": 256} and e["target"] == "sm_90a"
    assert e["facts"] == {"a": "-ae", "b": "caes", "c": "caes"}
    with open(os.path.join(e["path"], "kernel.ptx")) as f:
        assert f.read() == spec.ptx
    loaded = DiskCache(str(tmp_path)).load(e["key"])
    assert loaded.artifact == spec.artifact


def test_unwritable_cache_still_launches(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")          # the cache root is a file: nothing can be made
    fc = FakeCompiler()
    with pytest.warns(RuntimeWarning, match="cannot"):
        m = tilelang.compile(source("vadd"), backend="emulator", compiler=fc,
                             cache_dir=str(blocker / "cache"))
        a = np.arange(100, dtype=np.float32)
        c = np.zeros_like(a)
        m.vadd[1](a, a, c)
    np.testing.assert_array_equal(c, 2 * a)
    assert len(fc.builds) == 1
