"""Generic kernels at run time (docs/python-api.md, "Generic kernels"): a launch fixes a
`const T: dtype` from its arrays, each dtype is its own specialization (and cache key), and
arrays that disagree are refused naming both. Results are compared with NumPy on the reference
interpreter and the emulator for f16, bf16, f32 and integer dtypes, over a ragged length."""

from __future__ import annotations

import numpy as np
import pytest

import tilelang
from tilelang.runtime.errors import KernelArgumentError

from correctly_rounded import fused_multiply_add

ml_dtypes = pytest.importorskip("ml_dtypes")

SRC = """
fn affine(t: Tile[T, 128], const T: dtype) -> Tile[T, 128] {
    if is_floating(T) {
        return astype(astype(t, f32) * 3.0 + 1.0, T);
    }
    return t * astype(3, T) + astype(1, T);
}

kernel affine_k(x: Array[T, 1], y: Array[T, 1], info: Array[i32, 1], const T: dtype) {
    let t = load(x, index = (bid(0),), shape = (128,), padding = 0);
    store(y, index = (bid(0),), tile = affine(t));
    if bid(0) == 0 {
        let v = arange(4);
        let facts = where(v == 0, bits(T), where(v == 1, astype(is_floating(T), i32),
                    where(v == 2, astype(is_integer(T), i32), astype(T == f32, i32))));
        store(info, index = (0,), tile = facts);
    }
}

kernel fill(out: Array[f32, 1], const T: dtype) {
    store(out, index = (0,), tile = astype(full((4,), 1.5, T), f32));
}
"""

NP = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32, "i32": np.int32,
      "i8": np.int8}
BITS = {"f16": 16, "bf16": 16, "f32": 32, "i32": 32, "i8": 8}


def reference(x: np.ndarray, t: str, contracted: bool) -> np.ndarray:
    """`contracted`: the compiled kernel's default precision mode computes `x * 3.0 + 1.0` as
    one fma (docs/numerics.md, "Contraction"); the interpreter rounds the product first."""
    if t in ("i32", "i8"):
        return (x * NP[t](3) + NP[t](1)).astype(NP[t])     # wraps in the dtype, as PTX does
    x32 = x.astype(np.float32)
    if contracted:
        return fused_multiply_add(x32, np.float32(3.0), np.float32(1.0), np.float32).astype(NP[t])
    return (x32 * np.float32(3.0) + np.float32(1.0)).astype(NP[t])


@pytest.fixture(scope="module", params=["interp", "emulator"])
def mod(request):
    return tilelang.compile(SRC, backend=request.param, cache=False)


@pytest.mark.parametrize("t", ["f16", "bf16", "f32", "i32", "i8"])
def test_one_kernel_matches_numpy_for_each_dtype(mod, t, request):
    n = 300                                    # three blocks, the last one ragged
    rng = np.random.default_rng(BITS[t])
    if t in ("i32", "i8"):
        x = rng.integers(-100, 100, n).astype(NP[t])
    else:
        x = rng.standard_normal(n).astype(NP[t])
    y = np.zeros(n, NP[t])
    info = np.zeros(4, np.int32)
    mod.affine_k[3](x, y, info)
    contracted = request.node.callspec.params["mod"] == "emulator"
    assert y.dtype == x.dtype and np.array_equal(y, reference(x, t, contracted))
    assert info.tolist() == [BITS[t], t[0] in "fb", t[0] == "i", t == "f32"]


def test_each_dtype_is_its_own_specialization():
    mod = tilelang.compile(SRC, backend="emulator", cache=False)
    info = np.zeros(4, np.int32)
    for t in ("f16", "bf16", "f16"):
        mod.affine_k[1](np.ones(128, NP[t]), np.zeros(128, NP[t]), info)
    f16, bf16 = (mod.affine_k.specialize(T=t) for t in ("f16", "bf16"))
    assert f16 is not bf16 and f16.consts == {"T": "f16"} and bf16.consts == {"T": "bf16"}
    (s16,), (sb16,) = f16._specs.values(), bf16._specs.values()
    assert s16.key != sb16.key                 # T is in the cache key
    assert ".b16" in s16.ptx and "bf16" in sb16.ptx and "bf16" not in s16.ptx
    assert [p.dtype for p in f16.params] == ["f16", "f16", "i32"]
    # dtype spellings of NumPy and torch name the same bound kernel
    assert mod.affine_k.specialize(T=np.float16) is f16
    # cuTile's launch form infers T as well; compile() of a generic kernel needs its default
    y = np.zeros(128, np.float16)
    tilelang.launch(None, (1,), mod.affine_k, (np.full(128, 2, np.float16), y, info))
    assert (y == 7).all() and len(f16._specs) == 1
    with pytest.raises(KernelArgumentError, match="needs a dtype for `const T: dtype`"):
        mod.affine_k.compile()
    assert str(mod.affine_k) == ("<tilelang.Kernel kernel affine_k(x: Array[T, 1], "
                                 "y: Array[T, 1], info: Array[i32, 1], const T: dtype)>")


def test_arrays_that_disagree_name_both(mod):
    with pytest.raises(KernelArgumentError) as e:
        mod.affine_k[1](np.ones(128, np.float16), np.zeros(128, np.float32),
                        np.zeros(4, np.int32))
    d = e.value.diagnostics[0]
    assert d.code == "E0911" and d.message == (
        "arguments `x` and `y` of kernel `affine_k` are both `Array[T, ...]`, but `x` is f16 "
        "and `y` is f32")
    assert d.help.startswith("`T` is one dtype per launch")


def test_a_bound_t_checks_the_arrays_as_usual(mod):
    with pytest.raises(KernelArgumentError) as e:
        mod.affine_k.specialize(T="bf16")[1](np.ones(128, np.float16),
                                              np.zeros(128, np.float16), np.zeros(4, np.int32))
    assert e.value.diagnostics[0].code == "E0911"
    assert "has dtype f16, expected bf16" in e.value.diagnostics[0].message


def test_t_that_no_array_names_needs_a_value(mod):
    out = np.zeros(4, np.float32)
    with pytest.raises(KernelArgumentError) as e:
        mod.fill[1](out)
    d = e.value.diagnostics[0]
    assert d.code == "E0916" and d.message == (
        "kernel `fill` cannot tell `T` from its arguments (no array of its type was passed) "
        "and `const T: dtype` has no default")
    mod.fill.specialize(T="bf16")[1](out)
    assert out.tolist() == [1.5] * 4
    with pytest.raises(KernelArgumentError) as e:
        mod.fill.specialize(T="float16")
    assert e.value.diagnostics[0].message == (
        "const parameter `T` of kernel `fill` is a dtype; 'float16' is not one")
