"""COMPILER_ID (tilelang/compiler_id.py), the compiler's part of every runtime cache key: cheap,
and a module whose kernels are cached is opened without the front end or LLVM."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]

OPEN = ("import json, sys, tilelang\n"
        "m = tilelang.compile(sys.argv[1], backend='emulator')\n"
        "m.vadd\n"
        "print(json.dumps(sorted(n for n in ('tilelang.frontend.parser', "
        "'tilelang.sema.checker', 'llvmlite.binding', 'lark') if n in sys.modules)))\n")


def _open(tmp_path) -> list[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TILELANG_CACHE_DIR": str(tmp_path / "c")}
    r = subprocess.run([sys.executable, "-c", OPEN, str(ROOT / "examples" / "vadd.tile")],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_a_cached_module_opens_without_the_front_end(tmp_path):
    first = _open(tmp_path)
    assert "tilelang.sema.checker" in first                    # checked the first time
    assert _open(tmp_path) == []                               # from the cache after that


def test_driver_reexports_the_same_id():
    from tilelang import compiler_id, driver
    assert driver.COMPILER_ID is compiler_id.COMPILER_ID
    assert driver.code_digest is compiler_id.code_digest
    assert str(driver.COMPILER_ID).startswith("tilec ")
