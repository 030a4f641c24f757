"""Shared test configuration: the `gpu` marker skips cleanly where no GPU and driver exist."""

from __future__ import annotations

import os
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
SEEDS = ROOT.parent / "shared" / "seeds"


if os.environ.get("TILELANG_TEST_EMULATED_GPU") == "1":
    # test-only: the `gpu` tests run against tests/emulated_cuda.py (the PTX emulator behind
    # a stand-in for cuda.bindings.driver), before anything imports the driver
    import emulated_cuda  # noqa: E402
    emulated_cuda.install()

from gpu_probe import gpu_available  # noqa: E402,F401  (re-exported for older imports)


def _shadowed_torch() -> bool:
    """Without PyTorch installed, `import torch` finds the folder tests/torch (this folder is
    on the import path and tests/torch has no __init__.py: a namespace package), so
    `pytest.importorskip("torch")` would pass and the tests fail on `torch.nn`."""
    import importlib.util
    spec = importlib.util.find_spec("torch")
    return spec is not None and spec.origin in (None, "namespace")


if _shadowed_torch():
    import sys
    sys.modules["torch"] = None     # `import torch` raises ImportError: importorskip skips


def pytest_collection_modifyitems(config, items):
    if gpu_available():
        return
    skip = pytest.mark.skip(reason="no NVIDIA GPU with a working driver on this machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
