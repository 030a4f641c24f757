"""Optional array parameters at launch (docs/python-api.md, "Optional arrays"; docs/abi.md):
None packs as zeros in the array's ABI slots, each presence pattern is its own specialization
(facts key `None`), and every launch form agrees with NumPy on the emulator, the interpreter
and the CUDA back end (emulated driver under TILELANG_TEST_EMULATED_GPU=1)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import tilelang
from rt_support import fresh_runtime  # noqa: F401 (autouse fixture)
from tilelang.runtime.errors import KernelArgumentError
from tilelang.runtime.facts import facts_key

# y = x (+ bias) (+ residual) (* scale): two optional arrays, four presence patterns
SRC = """
kernel epilogue(x: Array[f32, 2], bias: Optional[Array[f32, 1]],
                residual: Optional[Array[f32, 2]], y: Array[f32, 2], scale: f32) {
    let m = bid(0);
    let n = bid(1);
    var t = load(x, index = (m, n), shape = (16, 32));
    if not is_none(bias) {
        t = t + load(bias, index = (n,), shape = (32,)).reshape((1, 32));
    }
    if not is_none(residual) {
        t = t + load(residual, index = (m, n), shape = (16, 32));
    }
    store(y, index = (m, n), tile = t * scale);
}
"""
RNG = np.random.default_rng(28)
M, N = 40, 70                               # ragged against the (16, 32) tiles
GRID = (3, 3)


@pytest.fixture(autouse=True)
def cache_in_tmp(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "cache"))


def inputs():
    x = RNG.standard_normal((M, N)).astype(np.float32)
    bias = RNG.standard_normal(N).astype(np.float32)
    res = RNG.standard_normal((M, N)).astype(np.float32)
    return x, bias, res


def want(x, bias, res, scale):
    t = x.astype(np.float64)
    if bias is not None:
        t = t + bias
    if res is not None:
        t = t + res
    return (t * scale).astype(np.float32)


@pytest.mark.parametrize("backend", ["emulator", "interp"])
def test_every_presence_pattern_matches_numpy(backend):
    mod = tilelang.compile(SRC, backend=backend)
    x, bias, res = inputs()
    for use_bias, use_res in itertools.product((True, False), repeat=2):
        b, r = (bias if use_bias else None), (res if use_res else None)
        y = np.full((M, N), np.nan, np.float32)
        mod.epilogue[GRID](x, b, r, y, 0.5)
        np.testing.assert_allclose(y, want(x, b, r, 0.5), rtol=1e-6, atol=1e-6)
        y2 = np.full((M, N), np.nan, np.float32)
        tilelang.launch(None, GRID, mod.epilogue, (x, b, r, y2, 0.5))
        np.testing.assert_array_equal(y2, y)


def test_each_pattern_is_its_own_specialization():
    mod = tilelang.compile(SRC, backend="emulator")
    k = mod.epilogue
    x, bias, res = inputs()
    y = np.zeros((M, N), np.float32)
    k[GRID](x, bias, None, y, 1.0)
    k[GRID](x, None, res, y, 1.0)
    k[GRID](x, None, None, y, 1.0)
    k[GRID](x, None, None, y, 2.0)          # the same pattern again: no new build
    keys = sorted(k._specs)
    assert len(keys) == 3
    assert {key[0] for key in keys} == {facts_key(x.ctypes.data, x.shape, (N, 1), 4)}
    assert sorted(key[1:3] for key in keys) == sorted([
        (facts_key(bias.ctypes.data, bias.shape, (1,), 4), "None"),
        ("None", facts_key(res.ctypes.data, res.shape, (N, 1), 4) + "=0"),
        ("None", "None")])
    assert all(key[3].endswith("=0") for key in keys)      # y: x's shape
    ptx = {tuple(f.split("=")[0] if f != "None" else f for f in key[1:3]): k._specs[key].ptx
           for key in keys}
    # an absent array's address is never read: x takes PTX parameters 0-4, bias 5 (its
    # address), 6 and 7, residual 8 (its address) to 12
    reads = {key: (f"[epilogue_param_5]" in p, f"[epilogue_param_8]" in p)
             for key, p in ptx.items()}
    assert sorted(reads.values()) == [(False, False), (False, True), (True, False)]
    for key, (b, r) in reads.items():
        assert (key[0] != "None", key[1] != "None") == (b, r)


def test_absent_array_packs_as_zeros_and_breaks_no_shape_link():
    """`residual` absent and `y` of x's shape: y links to x (=0), never to the absent slot."""
    mod = tilelang.compile(SRC, backend="emulator")
    x, bias, _ = inputs()
    y = np.zeros((M, N), np.float32)
    mod.epilogue[GRID](x, bias, None, y, 1.0)
    (key,) = mod.epilogue._specs
    assert key[2] == "None" and key[3].endswith("=0")
    # the general path (a strided view of y) agrees on the key's None
    ybig = np.zeros((M, 2 * N), np.float32)
    mod.epilogue[GRID](x, bias, None, ybig[:, ::2], 1.0)
    # the view's shape equals x's: it links to array 0, never to the absent array 2
    assert {k[2:] for k in mod.epilogue._specs} == {("None", key[3]), ("None", "-a-s=0")}
    np.testing.assert_allclose(ybig[:, ::2], want(x, bias, None, 1.0), rtol=1e-6)


def test_compile_ahead_with_none_facts():
    mod = tilelang.compile(SRC, backend="emulator")
    spec = mod.epilogue.compile(facts={"bias": None, "residual": None})
    assert spec.facts == ("caes", "None", "None", "caes")
    assert "ld.global" in spec.ptx
    with pytest.raises(tilelang.ArrayUsageError if hasattr(tilelang, "ArrayUsageError")
                       else Exception) as e:
        mod.epilogue.compile(facts={"x": None})
    assert "is not a facts key" in str(e.value)


def test_none_for_a_plain_array_is_refused_on_both_paths():
    mod = tilelang.compile(SRC, backend="emulator")
    x, bias, res = inputs()
    y = np.zeros((M, N), np.float32)
    for args in ((None, bias, res, y, 1.0), (x[:, ::1], bias, res, None, 1.0)):
        with pytest.raises(KernelArgumentError) as e:
            mod.epilogue[GRID](*args)
        d = e.value.diagnostics[0]
        assert d.code == "E0914"
        assert d.message.endswith("is None, but the parameter is not optional")


def test_optional_array_is_still_checked_when_given():
    mod = tilelang.compile(SRC, backend="emulator")
    x, _, res = inputs()
    y = np.zeros((M, N), np.float32)
    with pytest.raises(KernelArgumentError) as e:
        mod.epilogue[GRID](x, np.zeros(N, np.float64), res, y, 1.0)
    d = e.value.diagnostics[0]
    assert (d.code, d.message) == (
        "E0911", "argument `bias` of kernel `epilogue` (bias: Optional[Array[f32, 1]]) has "
        "dtype f64, expected f32")


def test_signature_shows_optional():
    mod = tilelang.compile(SRC, backend="emulator")
    assert mod.epilogue.info.show() == (
        "kernel epilogue(x: Array[f32, 2], bias: Optional[Array[f32, 1]], residual: "
        "Optional[Array[f32, 2]], y: Array[f32, 2], scale: f32)")


def test_device_arrays_and_none():
    mod = tilelang.compile(SRC, backend="emulator")
    x, bias, res = inputs()
    dx, dy = mod.to_device(x), mod.to_device(np.zeros((M, N), np.float32))
    mod.epilogue[GRID](dx, None, mod.to_device(res), dy, 2.0)
    np.testing.assert_allclose(dy.numpy(), want(x, None, res, 2.0), rtol=1e-6, atol=1e-6)


def test_tilec_run_passes_none(tmp_path, capsys):
    from tilelang.cli import main
    f = tmp_path / "e.tile"
    f.write_text(SRC)
    save = str(tmp_path / "out.npz")
    rc = main(["run", str(f), "--kernel", "epilogue", "--grid", "3,3", "--backend", "emulator",
               "--arg", "x=ones:40x70", "--arg", "bias=None", "--arg", "residual=ones:40x70",
               "--arg", "y=zeros:40x70", "--arg", "scale=3", "--save", save])
    out = capsys.readouterr().out
    assert rc == 0
    assert "  bias     = None\n" in out
    assert "bias=None" in out and "None: an optional array not given" in out
    np.testing.assert_array_equal(np.load(save)["y"], np.full((M, N), 6, np.float32))
    with pytest.raises(SystemExit) as e:
        main(["run", str(f), "--kernel", "epilogue", "--grid", "3,3", "--backend",
              "emulator", "--arg", "x=None", "--shape", "40x70", "--arg", "scale=1"])
    assert e.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "tilec run: error: --arg x=None: `x: Array[f32, 2]` is not optional (only "
        "`Optional[Array[...]]` parameters take None)")


@pytest.mark.gpu
def test_optional_on_the_cuda_back_end(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "cache"))
    mod = tilelang.compile(SRC, backend="cuda")
    x, bias, res = inputs()
    dx, db, dr = mod.to_device(x), mod.to_device(bias), mod.to_device(res)
    for b, r in ((db, None), (None, dr), (None, None), (db, dr)):
        dy = mod.to_device(np.zeros((M, N), np.float32))
        mod.epilogue[GRID](dx, b, r, dy, 1.5)
        mod.backend.synchronize()
        np.testing.assert_allclose(dy.numpy(), want(x, bias if b is not None else None,
                                                    res if r is not None else None, 1.5),
                                   rtol=1e-6, atol=1e-6)
