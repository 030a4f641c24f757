"""The `same_shape` fact (docs/abi.md, key suffix `=k`): an array whose shape equals that of an
earlier array parameter k is specialized on it, and its kernel tests bounds against k's
extents. The runtime derives it at every launch (the generated binder and the general path
alike), it is part of the key, and arrays of different shapes get no link and stay correct."""

from __future__ import annotations

import os

import numpy as np
import pytest

import tilelang
from rt_support import ROOT, fresh_runtime  # noqa: F401 (autouse fixture)
from tilelang.codegen.api import ArrayFacts
from tilelang.diagnostics import TileError
from tilelang.runtime.args import shape_links

RNG = np.random.default_rng(33)


@pytest.fixture(autouse=True)
def cache_in_tmp(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture
def vadd():
    mod = tilelang.compile(os.path.join(ROOT, "examples", "vadd.tile"), backend="emulator")
    return mod, mod.vadd.specialize(TILE=256)


@pytest.fixture
def rmsnorm():
    mod = tilelang.compile(os.path.join(ROOT, "examples", "rmsnorm.tile"), backend="emulator")
    return mod, mod.rmsnorm.specialize(N=256)


def test_key_text():
    assert ArrayFacts(same_shape=0).key() == "cae=0"
    assert ArrayFacts(small=True, tensor_map=False, same_shape=12).key() == "caesn=12"
    assert ArrayFacts().key() == "cae"
    f = ArrayFacts.from_key("c-esn=2")
    assert (f.contiguous, f.aligned16, f.extent16, f.small, f.tensor_map, f.same_shape) == \
        (True, False, True, True, False, 2)
    assert ArrayFacts.from_key("caes").same_shape == -1
    assert ArrayFacts.from_key("ca").same_shape == -1
    for key in ("caes=0", "--e=3", "caesn=1", "cae"):
        assert ArrayFacts.from_key(key).key() == key


def test_shape_links():
    assert shape_links(["caes"] * 3, [(9,), (9,), (9,)]) == ["caes", "caes=0", "caes=0"]
    assert shape_links(["caes"] * 3, [(9,), (8,), (8,)]) == ["caes", "caes", "caes=1"]
    # x (4, 8), w (8,), y (4, 8): y links to x, w to nothing (rank 1 against rank 2)
    assert shape_links(["caes", "caes", "c-es"], [(4, 8), (8,), (4, 8)]) == \
        ["caes", "caes", "c-es=0"]
    assert shape_links(["caes"] * 3, [(4, 8), (8, 4), (4, 9)]) == ["caes"] * 3
    assert shape_links(["caes"] * 2, [(), ()]) == ["caes"] * 2      # 0-d: nothing to share
    assert shape_links([], []) == []


def test_vadd_equal_lengths(vadd):
    mod, k = vadd
    a, b = (RNG.standard_normal(1000).astype(np.float32) for _ in range(2))
    c = np.zeros(1000, np.float32)
    k[(4,)](a, b, c)                                   # host arrays: the general path
    np.testing.assert_array_equal(c, a + b)
    assert list(k._specs) == [("caes", "caes=0", "caes=0")]
    da, db, dc = (mod.to_device(x) for x in (a, b, np.zeros(1000, np.float32)))
    k[(4,)](da, db, dc)                                # device arrays: the generated binder
    np.testing.assert_array_equal(dc.numpy(), a + b)
    assert list(k._specs) == [("caes", "caes=0", "caes=0")]


def test_vadd_different_lengths(vadd):
    mod, k = vadd
    a = RNG.standard_normal(1000).astype(np.float32)
    b = RNG.standard_normal(700).astype(np.float32)
    c = np.full(1000, 7.0, np.float32)
    k[(4,)](a, b, c)                      # b shorter: its loads pad with 0 past 700
    np.testing.assert_array_equal(c, a + np.pad(b, (0, 300)))
    short = np.full(600, 7.0, np.float32)
    da, db, dc = (mod.to_device(x) for x in (a, b, short))
    k[(4,)](da, db, dc)                   # c shorter still: the store stops at 600
    np.testing.assert_array_equal(dc.numpy(), (a + np.pad(b, (0, 300)))[:600])
    assert sorted(k._specs) == [("caes", "caes", "caes"), ("caes", "caes", "caes=0")]
    # b and c of one length, a of another: c links to b
    db2 = mod.to_device(b)
    dc2 = mod.to_device(np.zeros(700, np.float32))
    k[(3,)](da, db2, dc2)
    np.testing.assert_array_equal(dc2.numpy(), a[:700] + b)
    assert ("caes", "caes", "caes=1") in k._specs


def rms_ref(x, w, eps, n):
    """y[r, c] for c < n: x padded with zeros to n columns (w likewise), the mean over
    x.shape[1] columns."""
    rows, cols = x.shape
    xp = np.zeros((rows, n)), np.zeros(n)
    xp[0][:, :cols] = x
    xp[1][:len(w)] = w
    ms = (x.astype(np.float64) ** 2).sum(axis=1, keepdims=True) / cols
    return xp[0] / np.sqrt(ms + eps) * xp[1]


@pytest.mark.parametrize("via", ["host", "device"])
def test_rmsnorm_rows(rmsnorm, via):
    mod, k = rmsnorm
    x = RNG.standard_normal((5, 200)).astype(np.float32)
    w = RNG.standard_normal(200).astype(np.float32)
    ref = rms_ref(x, w, 1e-5, 256)

    def run(y):
        args = (x, w, y) if via == "host" else tuple(mod.to_device(a) for a in (x, w, y))
        k[(5,)](*args, 1e-5)
        return y if via == "host" else args[2].numpy()

    y = run(np.zeros((5, 200), np.float32))           # y's shape is x's
    np.testing.assert_allclose(y, ref[:, :200], rtol=2e-6, atol=1e-6)
    # y wider and taller (ragged against x): no link; its columns 200..209 get the padding's
    # 0, its last row is not written
    y = run(np.full((6, 210), 9.0, np.float32))
    np.testing.assert_allclose(y[:5], ref[:, :210], rtol=2e-6, atol=1e-6)
    np.testing.assert_array_equal(y[5], 9.0)
    assert sorted(k._specs) == [("caes", "caes", "c--s"), ("caes", "caes", "caes=0")]


def test_compile_takes_and_checks_the_link(vadd):
    _, k = vadd
    linked = k.compile({"b": "caes=0", "c": ArrayFacts(small=True, same_shape=0)})
    plain = k.compile()
    assert linked.facts == ("caes", "caes=0", "caes=0")
    assert plain.facts == ("caes", "caes", "caes")
    assert linked.key != plain.key                     # a separate cache entry
    assert k.compile({"c": "caes=1"}).facts == ("caes", "caes", "caes=1")
    for bad in ("caes=2", "caes=x", "caes=", "caes=-1"):
        with pytest.raises(TileError) as e:
            k.compile({"c": bad})
        d = e.value.diagnostics[0]
        assert d.message == f"facts of `c` for kernel `vadd`: {bad!r} claims the shape of " \
            f"array parameter {bad[5:]}, which is not an earlier array of the same rank"
        assert d.help == "`=k` names an earlier array parameter by its number among the " \
            "arrays (here: 0 `a`, 1 `b`), whose shape this array's equals"
    with pytest.raises(TileError) as e:
        k.compile({"a": "caes=0"})
    assert e.value.diagnostics[0].help == "`=k` names an earlier array parameter by its " \
        "number among the arrays (here: none), whose shape this array's equals"


def test_compile_refuses_a_link_across_ranks(rmsnorm):
    _, k = rmsnorm
    assert k.compile({"y": "caes=0"}).facts == ("caes", "caes", "caes=0")
    with pytest.raises(TileError) as e:
        k.compile({"w": "caes=0"})
    assert e.value.diagnostics[0].message == "facts of `w` for kernel `rmsnorm`: 'caes=0' " \
        "claims the shape of array parameter 0, which is not an earlier array of the same rank"


def test_binder_and_general_path_agree():
    """The generated binder (device arrays) derives the keys `shape_links` (the general path's
    derivation) gives, for every combination of shapes of a kernel with arrays of ranks 2, 1,
    2, 2 and a scalar between them."""
    from tilelang.runtime.args import make_binder
    from tilelang.runtime.device_array import DeviceArray
    from tilelang.runtime.emulator_backend import EmulatorBackend
    from tilelang.runtime.signature import ParamInfo
    params = (ParamInfo("p", "array", "f32", 2), ParamInfo("q", "array", "f32", 1),
              ParamInfo("s", "scalar", "f32"), ParamInfo("r", "array", "f32", 2),
              ParamInfo("t", "array", "f32", 2))
    backend = EmulatorBackend()
    bind = make_binder(params, (None,) * 5, backend)
    shapes2 = [(4, 8), (4, 12), (8, 4)]
    for sp in shapes2:
        for sr in shapes2:
            for st in shapes2:
                shapes = [sp, (8,), sr, st]
                host = [np.zeros(s, np.float32) for s in shapes]
                dev = [DeviceArray.from_host(backend, a) for a in host]
                values, facts, _ = bind((dev[0], dev[1], 1.0, dev[2], dev[3]))
                keys = [ArrayFacts.from_key(f) for f in facts]
                assert list(facts) == shape_links([f.split("=")[0] for f in facts], shapes)
                assert keys[1].same_shape == -1                 # rank 1: nothing to share
                assert (keys[2].same_shape == 0) == (sr == sp)
                want_t = 0 if st == sp else 2 if st == sr else -1
                assert keys[3].same_shape == want_t
                assert values[1:3] == sp and values[10:12] == sr and values[15:17] == st


def test_disk_cache_round_trip(vadd, tmp_path):
    from tilelang.runtime import cache as cache_mod, module as module_mod
    mod, k = vadd
    a = RNG.standard_normal(512).astype(np.float32)
    c = np.zeros(512, np.float32)
    k[(2,)](a, a, c)
    module_mod.clear_memory_cache()
    cache_mod.STATS["disk_hits"] = cache_mod.STATS["compiles"] = 0
    again = tilelang.compile(os.path.join(ROOT, "examples", "vadd.tile"),
                             backend="emulator").vadd.specialize(TILE=256)
    c2 = np.zeros(512, np.float32)
    again[(2,)](a, a, c2)
    np.testing.assert_array_equal(c2, a + a)
    assert (cache_mod.STATS["disk_hits"], cache_mod.STATS["compiles"]) == (1, 0)
    spec = again._specs[("caes", "caes=0", "caes=0")]
    assert spec.artifact.facts["c"] == ArrayFacts(small=True, same_shape=0)


@pytest.mark.gpu
def test_torch_fast_reader_on_cuda():
    """On a GPU the torch reader feeds the generated binder: equal lengths link, a shorter
    output does not, and both are right."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():       # a CPU-only torch (the emulated driver's runs)
        pytest.skip("torch has no GPU")
    mod = tilelang.compile(os.path.join(ROOT, "examples", "vadd.tile"), backend="cuda")
    k = mod.vadd
    n = 100_003
    a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    c = torch.empty(n, device="cuda")
    k[((n + 1023) // 1024,)](a, b, c)
    short = torch.full((n - 5000,), 7.0, device="cuda")
    k[((n + 1023) // 1024,)](a, b, short)
    torch.cuda.synchronize()
    assert torch.equal(c, a + b)
    assert torch.equal(short, (a + b)[:n - 5000])
    # torch's allocations are 256-byte aligned; 100,003 and 95,003 f32 are not 16-byte lengths
    assert sorted(k._specs) == [("ca-s", "ca-s=0", "ca-s"), ("ca-s", "ca-s=0", "ca-s=0")]
