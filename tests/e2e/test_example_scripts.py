"""Every example script (examples/*.py beside a .tile of the same name) runs its kernel on the
emulator with small shapes and checks it against NumPy (issue 17, item 7); with `-m gpu` the
same scripts run on the GPU. The scripts are run in this process (no interpreter start-up)."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
SCRIPTS = sorted(p.stem for p in EXAMPLES.glob("*.py")
                 if (EXAMPLES / f"{p.stem}.tile").exists() and p.stem != "attention")


def _run(name: str, backend: str) -> str:
    sys.path.insert(0, str(EXAMPLES))
    try:
        spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            rc = mod.main(["--backend", backend])
    finally:
        sys.path.remove(str(EXAMPLES))
    assert rc == 0
    return out.getvalue()


def test_the_tutorial_set_is_there():
    assert {"dropout", "rmsnorm", "cross_entropy", "transpose", "cumsum", "histogram",
            "matmul_epilogue", "batched_matmul", "persistent", "quantize_int8",
            "layernorm_backward", "vadd", "softmax", "softmax_rows", "layernorm",
            "layernorm_rows", "matmul"} <= set(SCRIPTS)


@pytest.mark.parametrize("name", SCRIPTS)
def test_script_on_the_emulator(name):
    assert _run(name, "emulator").rstrip().endswith(": ok (emulator)")


@pytest.mark.gpu
@pytest.mark.parametrize("name", SCRIPTS)
def test_script_on_the_gpu(name):
    assert _run(name, "cuda").rstrip().endswith(": ok (cuda)")


@pytest.mark.parametrize("name", SCRIPTS)
def test_tile_file_starts_with_a_header_comment(name):
    text = (EXAMPLES / f"{name}.tile").read_text()
    first = text.splitlines()[0]
    assert first.startswith(f"// {name}.tile — "), first


# As a user starts them: `python3 examples/X.py`, no --backend, no TILELANG_BACKEND. Without a
# GPU the scripts run on the emulator and say so in one line; `--backend cuda` there is the
# E0920 message alone, exit 1 — never a Python traceback.
ALL_SCRIPTS = sorted(p.name for p in EXAMPLES.glob("*.py") if p.stem != "example_support")
QUICK = ("vadd.py", "launch_kernels.py")
FALLBACK_NOTE = ("note: no NVIDIA GPU with a working driver here: running on the CPU emulator "
                 "(--backend emulator; --backend cuda insists on a GPU)\n")


def _as_a_user(script: str, *args: str):
    import os
    import subprocess
    env = {k: v for k, v in os.environ.items() if k not in ("TILELANG_BACKEND",
                                                           "TILELANG_TEST_EMULATED_GPU")}
    return subprocess.run([sys.executable, str(EXAMPLES / script), *args], capture_output=True,
                          text=True, env=env, timeout=600)


def _no_gpu():
    from gpu_probe import gpu_available
    if gpu_available():
        pytest.skip("this machine has a GPU: the scripts run on it")


def _assert_falls_back(script):
    _no_gpu()
    r = _as_a_user(script)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stderr == FALLBACK_NOTE
    assert "emulator" in r.stdout


@pytest.mark.parametrize("script", QUICK)
def test_script_without_a_gpu_falls_back_to_the_emulator(script):
    _assert_falls_back(script)


@pytest.mark.slow
@pytest.mark.parametrize("script", [s for s in ALL_SCRIPTS if s not in QUICK])
def test_every_script_without_a_gpu_falls_back_to_the_emulator(script):
    _assert_falls_back(script)


def test_asking_for_cuda_without_a_gpu_is_one_message():
    _no_gpu()
    r = _as_a_user("vadd.py", "--backend", "cuda")
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.startswith("error[E0920]: ") and "Traceback" not in r.stderr
    assert "--backend emulator" in r.stderr or "backend='emulator'" in r.stderr
