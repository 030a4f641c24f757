"""The tests of tilelang.tune and tilelang.testing run on the emulator with a private cache."""

from __future__ import annotations

import os

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
KERNELS = os.path.join(HERE, "kernels.tile")


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(d))
    return str(d)


@pytest.fixture
def mod(cache_dir):
    import tilelang
    return tilelang.compile(KERNELS, backend="emulator")
