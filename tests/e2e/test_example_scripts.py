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
