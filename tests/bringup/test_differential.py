"""The emulator's answers against the GPU's (marked `gpu`), over the examples and the test
kernels: bit for bit for integers and IEEE-rounded float instructions, within the documented
bounds where the PTX uses .approx instructions or tensor cores (docs/numerics.md). Without a
GPU, the emulator half runs alone, so every case is known to run and give the answers it can be
checked against."""

from __future__ import annotations

import numpy as np
import pytest

from diff_cases import CASES, run, tolerance

IDS = [c.id for c in CASES]


@pytest.fixture(scope="module")
def _cache(tmp_path_factory):
    return str(tmp_path_factory.mktemp("cache"))


@pytest.fixture(autouse=True)
def cache_in_tmp(_cache, monkeypatch):
    monkeypatch.setenv("TILELANG_CACHE_DIR", _cache)    # one cache for the file: each kernel
    #                                                     compiles once per back end


def _bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).view(np.uint8)


def _compare(name, got, want, tol):
    assert got.shape == want.shape and got.dtype == want.dtype, name
    if tol is None:
        if got.dtype.kind == "f" or got.dtype.kind == "V" or got.dtype.itemsize <= 2 and \
                got.dtype.kind not in "iub":
            nan_g = np.isnan(got.astype(np.float64))
            nan_w = np.isnan(want.astype(np.float64))
            assert np.array_equal(nan_g, nan_w), f"{name}: NaNs differ"
            zero = got.dtype.type(0)    # a 0 of the dtype: NumPy 1.x cannot mix int and bf16
            got, want = np.where(nan_g, zero, got), np.where(nan_w, zero, want)
        bad = np.flatnonzero((_bits(got) != _bits(want)))
        assert bad.size == 0, (f"{name}: {bad.size} bytes differ, first at byte {bad[0]}: "
                               f"emulator {want.ravel()[bad[0] // want.itemsize]!r}, GPU "
                               f"{got.ravel()[bad[0] // got.itemsize]!r}")
        return
    g, w = got.astype(np.float64), want.astype(np.float64)
    assert np.array_equal(np.isnan(g), np.isnan(w)), f"{name}: NaNs differ"
    finite = np.isfinite(w)
    assert np.array_equal(g[~finite & ~np.isnan(w)], w[~finite & ~np.isnan(w)]), \
        f"{name}: infinities differ"
    scale = np.abs(w[finite]).max() if finite.any() else 1.0
    err = np.abs(g[finite] - w[finite]).max() / max(scale, 1e-30) if finite.any() else 0.0
    assert err <= tol, f"{name}: relative error {err:.3g} > {tol:.3g}"


@pytest.mark.gpu
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_emulator_equals_gpu(case):
    args, emu, ptx = run(case, "emulator")
    _, gpu, _ = run(case, "cuda")
    arrays = [a for a in args if hasattr(a, "base")]
    for i, (a, e, g) in enumerate(zip(arrays, emu, gpu)):
        _compare(f"{case.id} argument {i}", g, e, tolerance(ptx, e.dtype))


@pytest.mark.parametrize("case", [c for c in CASES if c.expect], ids=[c.id for c in CASES
                                                                      if c.expect])
def test_emulator_half_gives_the_known_answers(case):
    args, emu, _ = run(case, "emulator")
    arrays = [a for a in args if hasattr(a, "base")]
    for i, want in case.expect(arrays).items():
        _compare(f"{case.id} argument {i}", emu[i], np.asarray(want, emu[i].dtype), None)


@pytest.mark.parametrize("case", [c for c in CASES if not c.expect and "attention" not in c.id],
                         ids=[c.id for c in CASES if not c.expect and "attention" not in c.id])
def test_emulator_half_runs(case):
    args, emu, ptx = run(case, "emulator")
    assert ptx.lstrip().startswith("//") or ".entry" in ptx
    out = emu[-1]
    assert out.size and np.isfinite(out.astype(np.float64)).all() or out.dtype.kind in "iub"
