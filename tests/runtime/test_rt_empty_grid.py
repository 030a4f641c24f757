"""Empty grids (docs/python-api.md "Launching"): a grid with a zero extent checks the launch as
any launch does (arguments, block, stream), then runs no block and calls no driver, from every
launch form and back end; a negative extent stays E0903. The CUDA back end runs on the emulated
driver (tests/emulated_cuda.py), whose call log shows that no cuLaunchKernel was made."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

import tilelang
from rt_support import (ROOT, FakeCompiler, fresh_runtime, source,  # noqa: F401 (autouse)
                        use_emulated_driver)
from tilelang.runtime.errors import KernelArgumentError, LaunchConfigError
from tilelang.cli import main

sys.path.insert(0, os.path.join(ROOT, "tests"))

EMPTY = (0, (0,), (4, 0), (1, 1, 0), [0, 3], (np.int64(0),))
N = 64


def forms(kernel, args):
    """Every launch form, as (name, call of grid)."""
    return [("kernel[grid]", lambda g: kernel[g](*args)),
            ("Kernel.launch", lambda g: kernel.launch(g, args)),
            ("tilelang.launch", lambda g: tilelang.launch(None, g, kernel, args)),
            ("grid function", lambda g: kernel[lambda meta: g](*args))]


def refused(fn, kind=LaunchConfigError):
    with pytest.raises(kind) as e:
        fn()
    d = e.value.diagnostics[0]
    return d.code, d.message


@pytest.fixture
def emu_mod(tmp_path):
    return tilelang.compile(source("vadd", "clus"), backend="emulator",
                            compiler=FakeCompiler(), cache_dir=str(tmp_path))


def test_emulator_runs_no_block(emu_mod):
    a = np.arange(N, dtype=np.float32)
    c = np.full(N, -7, np.float32)
    for name, launch in forms(emu_mod.vadd, (a, a, c)):
        for g in EMPTY:
            rep = launch(g)
            assert rep.threads == 0 and rep.total_instructions == 0, (name, g)
            assert 0 in rep.grid and rep.block == (128, 1, 1), (name, g)
    np.testing.assert_array_equal(c, np.full(N, -7, np.float32))
    emu_mod.vadd[1](a, a, c)                          # the same kernel still runs
    np.testing.assert_array_equal(c, 2 * a)


def test_empty_launch_still_checks_the_launch(emu_mod):
    a = np.zeros(N, np.float32)
    assert refused(lambda: emu_mod.vadd[0](a, a.astype(np.int32), a),
                   KernelArgumentError)[0] == "E0911"
    assert refused(lambda: emu_mod.vadd[0](a, a), KernelArgumentError)[0] == "E0910"
    assert refused(lambda: emu_mod.vadd.launch(0, (a, a, a), block=(256,)))[0] == "E0901"
    out = np.zeros(8, np.int32)
    assert refused(lambda: emu_mod.clus[0](out, block=(4096,)))[0] == "E0901"
    emu_mod.clus[0](out)                              # 0 is whole clusters


def test_negative_extents_stay_errors(emu_mod):
    a = np.zeros(N, np.float32)
    for g, shown in ((-1, "(-1, 1, 1)"), ((0, -2), "(0, -2, 1)")):
        assert refused(lambda: emu_mod.vadd[g](a, a, a)) == (
            "E0903", f"launch of `vadd`: grid {shown} has a negative dimension")


def test_cuda_back_end_calls_no_driver(monkeypatch, tmp_path):
    pytest.importorskip("cuda.bindings.driver")
    d = use_emulated_driver(monkeypatch)
    mod = tilelang.compile(source("vadd"), backend="cuda", compiler=FakeCompiler(),
                           cache_dir=str(tmp_path))
    a = np.arange(N, dtype=np.float32)
    da, dc = mod.to_device(a), mod.to_device(np.full(N, -7, np.float32))
    mod.vadd[1](da, da, dc)                           # compiled and loaded once
    dc.copy_from(np.full(N, -7, np.float32))
    for name, launch in forms(mod.vadd, (da, da, dc)):
        for g in EMPTY:
            start = len(d.calls)
            assert launch(g) is None, (name, g)
            made = d.calls[start:]
            assert not any(c.startswith("cuLaunch") for c in made), (name, g, made)
    np.testing.assert_array_equal(dc.numpy(), np.full(N, -7, np.float32))
    assert refused(lambda: mod.vadd[0](da, a.astype(np.int32), dc),
                   KernelArgumentError)[0] == "E0911"
    mod.vadd[1](da, da, dc)
    np.testing.assert_array_equal(dc.numpy(), 2 * a)


def test_interpreter_runs_no_block():
    mod = tilelang.compile(os.path.join(ROOT, "examples", "vadd.tile"), backend="interp")
    a = np.arange(N, dtype=np.float32)
    c = np.full(N, -7, np.float32)
    for name, launch in forms(mod.vadd, (a, a, c)):
        for g in EMPTY:
            assert launch(g) is None, (name, g)
    np.testing.assert_array_equal(c, np.full(N, -7, np.float32))
    assert refused(lambda: mod.vadd[0](a, a.astype(np.int32), c),
                   KernelArgumentError)[0] == "E0911"
    assert refused(lambda: mod.vadd[(2, -1)](a, a, c))[0] == "E0903"
    mod.vadd[1](a, a, c)
    np.testing.assert_array_equal(c, 2 * a)


def test_tilec_run_with_an_empty_grid(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "cache"))
    save = str(tmp_path / "out.npz")
    rc = main(["run", os.path.join(ROOT, "examples", "vadd.tile"), "--kernel", "vadd",
               "--grid", "0", "--backend", "emulator", "--arg", "a=ones:100",
               "--arg", "b=ones:100", "--arg", "c=zeros:100", "--save", save])
    out = capsys.readouterr().out
    assert rc == 0
    assert "launch    grid (0, 1, 1), block (128, 1, 1) (empty: no block ran)" in out
    assert "emulator  0 thread-instructions executed, 0 warp-instructions issued" in out
    np.testing.assert_array_equal(np.load(save)["c"], np.zeros(100, np.float32))
    with pytest.raises(SystemExit) as e:
        main(["run", os.path.join(ROOT, "examples", "vadd.tile"), "--kernel", "vadd",
              "--grid", "-1", "--backend", "emulator", "--shape", "8"])
    assert e.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == \
        "tilec run: error: --grid expects non-negative sizes, got `-1`"


@pytest.mark.gpu
def test_empty_grid_on_the_gpu(tmp_path, monkeypatch):
    """The real driver (or the emulated one under TILELANG_TEST_EMULATED_GPU=1): an empty
    launch of examples/vadd.tile leaves the output as it was, and the next launch computes."""
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "cache"))
    mod = tilelang.compile(os.path.join(ROOT, "examples", "vadd.tile"), backend="cuda")
    a = np.arange(3000, dtype=np.float32)
    da, dc = mod.to_device(a), mod.to_device(np.full(3000, -7, np.float32))
    for g in EMPTY:
        assert mod.vadd[g](da, da, dc) is None
        assert tilelang.launch(None, g, mod.vadd, (da, da, dc)) is None
    mod.backend.synchronize()
    np.testing.assert_array_equal(dc.numpy(), np.full(3000, -7, np.float32))
    mod.vadd[tilelang.cdiv(3000, 1024)](da, da, dc)
    mod.backend.synchronize()
    np.testing.assert_array_equal(dc.numpy(), 2 * a)
