"""The `tensor_map` fact (docs/abi.md): an array with a zero or negative stride over an extent
above 1 (a reversed view, a broadcast) is 16-byte aligned but no tensor map describes it, so
its kernel reaches it without TMA (cp.async for a product's operand, ordinary stores for the
accumulator) instead of failing at launch with TensorMapError."""

from __future__ import annotations

import os

import numpy as np
import pytest

import tilelang
from rt_support import ROOT, fresh_runtime  # noqa: F401 (autouse fixture)

RNG = np.random.default_rng(14)


@pytest.fixture(autouse=True)
def cache_in_tmp(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture
def matmul(cache_in_tmp):
    mod = tilelang.compile(os.path.join(ROOT, "examples", "matmul.tile"), backend="emulator")
    assert mod.target == "sm_90a"
    return mod.matmul.specialize(BM=64, BN=64, BK=32)


def mapped(kernel) -> dict:
    """facts keys -> the arrays the specialization reads or writes through tensor maps."""
    return {key: sorted({t.array for t in s.artifact.tensor_maps})
            for key, s in kernel._specs.items()}


def test_reversed_output_and_broadcast_operand(matmul):
    a = RNG.standard_normal((64, 64)).astype(np.float16)
    b = RNG.standard_normal((64, 128)).astype(np.float16)
    ref = a.astype(np.float32) @ b.astype(np.float32)
    c = np.zeros((64, 128), np.float32)
    matmul[(2, 2)](a, b, c)
    np.testing.assert_allclose(c, ref, rtol=1e-3, atol=1e-3)
    assert mapped(matmul)[("caes", "caes", "caes=1")] == ["a", "b", "c"]   # c has b's shape

    buf = np.zeros((64, 128), np.float32)
    matmul[(2, 2)](a, b, buf[::-1])                  # rows reversed: stride -128
    np.testing.assert_allclose(buf[::-1], ref, rtol=1e-3, atol=1e-3)
    assert mapped(matmul)[("caes", "caes", "caesn=1")] == ["a", "b"]

    row = RNG.standard_normal(128).astype(np.float16)
    wide = np.broadcast_to(row, (64, 128))           # every row of b the same: stride 0
    c = np.zeros((64, 128), np.float32)
    matmul[(2, 2)](a[::-1], wide, c)
    ref = a[::-1].astype(np.float32) @ wide.astype(np.float32)
    np.testing.assert_allclose(c, ref, rtol=1e-3, atol=1e-3)
    assert mapped(matmul)[("caesn", "caesn", "caes=1")] == ["c"]
