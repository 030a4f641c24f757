"""Shared test configuration: the `gpu` marker skips cleanly where no GPU and driver exist."""

from __future__ import annotations

import functools
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
SEEDS = ROOT.parent / "shared" / "seeds"


@functools.lru_cache(maxsize=1)
def gpu_available() -> bool:
    try:
        from cuda.bindings import driver
    except Exception:
        return False
    try:
        (err,) = driver.cuInit(0)
        if err != driver.CUresult.CUDA_SUCCESS:
            return False
        err, count = driver.cuDeviceGetCount()
        return err == driver.CUresult.CUDA_SUCCESS and count > 0
    except Exception:
        return False


def pytest_collection_modifyitems(config, items):
    if gpu_available():
        return
    skip = pytest.mark.skip(reason="no NVIDIA GPU with a working driver on this machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
