"""The tuner's compile workers (tune/parallel.py): they import this installation's tilelang,
never a package planted in the working folder, and a worker that dies is an error (E0941)
that shows the end of its stderr."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import tilelang
from tilelang.tune import autotune, parallel

HERE = os.path.dirname(os.path.abspath(__file__))
KERNELS = os.path.join(HERE, "kernels.tile")
ROOT = os.path.dirname(os.path.dirname(HERE))


def _plant(folder, name: str, marker) -> None:
    pkg = folder / name
    pkg.mkdir()
    (pkg / "__init__.py").write_text(
        f"open({str(marker)!r}, 'a').write('{name} ran\\n')\nraise SystemExit(7)\n")


def test_planted_packages_in_the_working_folder_never_run(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    marker = tmp_path / "ran.txt"
    _plant(work, "tilelang", marker)
    _plant(work, "numpy", marker)
    env = dict(os.environ, TILELANG_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=ROOT)
    env.pop("PYTHONSAFEPATH", None)
    r = subprocess.run(
        [sys.executable, "-c", "import sys; sys.path.remove(''); from tilelang.cli import main; "
         "sys.exit(main(sys.argv[1:]))",
         "tune", KERNELS, "--kernel", "vadd", "--backend", "emulator",
         "--arg", "a=rand:3000", "--arg", "b=rand:3000", "--arg", "c=zeros:3000",
         "--grid", "cdiv(3000, TILE)", "--space", "TILE=256,512,1024", "--workers", "2"],
        cwd=work, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert "compiling 3 configurations in 2 processes" in r.stderr
    assert not marker.exists(), marker.read_text()


def test_the_worker_command_keeps_the_working_folder_off_the_path(tmp_path):
    cmd = parallel.worker_command()
    assert "-m" not in cmd
    probe = cmd[:2] + [parallel._BOOT.split("; from")[0] + "; print(repr(sys.path))", cmd[3]]
    out = subprocess.run(probe, cwd=tmp_path, capture_output=True, text=True,
                         env=dict(os.environ, PYTHONSAFEPATH="1"), timeout=60).stdout
    path = eval(out)                                   # a list of strings we printed
    assert path[0] == ROOT
    assert "" not in path and "." not in path and str(tmp_path) not in path


@pytest.fixture
def mod(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "cache"))
    return tilelang.compile(KERNELS, backend="emulator")


def test_a_worker_that_dies_is_E0941_with_its_stderr(mod, monkeypatch):
    monkeypatch.setattr(parallel, "worker_command", lambda: [
        sys.executable, "-c", "import sys; sys.stdin.read(); "
        "sys.stderr.write('Traceback (most recent call last):\\nImportError: no llvmlite\\n');"
        " sys.exit(3)"])
    a = np.ones(2000, np.float32)
    with pytest.raises(parallel.WorkerError) as e:
        autotune(mod.vadd, space={"TILE": [128, 256]}, grid=lambda m: (16,), progress=False,
                 workers=2)(a, a, np.zeros_like(a))
    d = e.value.diagnostics[0]
    assert d.code == "E0941"
    assert d.message == ("autotuning kernel `vadd`: 2 of 2 compile worker processes died "
                         "(the first: exit status 3)")
    assert d.notes == ("stderr: Traceback (most recent call last):",
                       "stderr: ImportError: no llvmlite")


def test_a_worker_killed_by_a_signal_is_E0941(mod, monkeypatch):
    monkeypatch.setattr(parallel, "worker_command", lambda: [
        sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"])
    a = np.ones(2000, np.float32)
    with pytest.raises(parallel.WorkerError) as e:
        autotune(mod.vadd, space={"TILE": [128, 256]}, grid=lambda m: (16,), progress=False,
                 workers=2)(a, a, np.zeros_like(a))
    d = e.value.diagnostics[0]
    assert "(the first: signal 9)" in d.message
    assert d.notes == ("it wrote nothing to stderr",)
