"""rand, randn, randint: Philox-4x32-10 against an independent implementation of the published
algorithm (Salmon et al. 2011, with Random123's known-answer vectors), against Triton 3.9's own
values (data/triton_random.json, from Triton's interpreter), and on the reference interpreter and
the emulator's run of the generated PTX."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import numpy as np
import pytest

from tilelang.driver import compile_source
from tilelang.options import CompileOptions
from tilelang.sema.builtins_random import randint4x, uniform

from stdlib_support import HERE, compile_text, run_emulator, run_interp

FIXTURE = json.loads((HERE / "data" / "triton_random.json").read_text())
M32 = 0xFFFFFFFF


def philox_published(key: tuple[int, int], ctr: tuple[int, int, int, int], rounds=10):
    """Philox-4x32 straight from the paper, on Python integers."""
    c0, c1, c2, c3 = ctr
    k0, k1 = key
    for _ in range(rounds):
        p0, p1 = 0xD2511F53 * c0, 0xCD9E8D57 * c2
        c0, c1, c2, c3 = (p1 >> 32) ^ c1 ^ k0, p1 & M32, (p0 >> 32) ^ c3 ^ k1, p0 & M32
        k0, k1 = (k0 + 0x9E3779B9) & M32, (k1 + 0xBB67AE85) & M32
    return c0, c1, c2, c3


def test_published_algorithm_known_answers():
    # Random123's kat_vectors for philox4x32_10
    assert philox_published((0, 0), (0, 0, 0, 0)) == \
        (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)
    assert philox_published((0xA4093822, 0x299F31D0),
                            (0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344)) == \
        (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)


@pytest.mark.parametrize("seed", [0, 1, -1, 2**40 + 17])
def test_reference_equals_published_algorithm(seed):
    offs = np.array([0, 1, 2, 77, 2**31 - 1, -5, -2**31], np.int64)
    got = randint4x(seed, offs.astype(np.int32))
    s = seed & 0xFFFFFFFFFFFFFFFF
    for j, o in enumerate(offs):
        want = philox_published((s & M32, s >> 32), (int(o) & M32, 0, 0, 0))
        assert tuple(int(w[j]) for w in got) == want


@pytest.mark.parametrize("case", FIXTURE["cases"], ids=lambda c: f"{c['seed']}-{c['offset_dtype']}")
def test_reference_equals_triton(case):
    offs = np.array(case["offsets"], np.int64).astype(np.int32 if case["offset_dtype"] == "i32"
                                                      else np.int64)
    w = randint4x(case["seed"], offs)
    np.testing.assert_array_equal(w[0], np.array(case["randint"], np.uint32))
    np.testing.assert_array_equal(uniform(w[0]).view(np.uint32),
                                  np.array(case["rand_bits"], np.uint32))


KERNEL = """
kernel rng(seed: {sdt}, offs: Array[{odt}, 1], oi: Array[u32, 1], ou: Array[f32, 1],
           on: Array[f32, 1]) {{
    let o = load(offs, index = (bid(0),), shape = (64,));
    store(oi, index = (bid(0),), tile = randint(seed, o));
    store(ou, index = (bid(0),), tile = rand(seed, o));
    store(on, index = (bid(0),), tile = randn(seed, o));
}}
"""


def _run(case, runner, sdt="i64"):
    odt = case["offset_dtype"]
    offs = np.array(case["offsets"], np.int64).astype(np.int32 if odt == "i32" else np.int64)
    res = compile_text(KERNEL.format(sdt=sdt, odt=odt), "rng.tile")
    n = len(offs)
    out = {"oi": np.zeros(n, np.uint32), "ou": np.zeros(n, np.float32),
           "on": np.zeros(n, np.float32)}
    seed = np.array(case["seed"]).astype({"i64": np.int64, "u64": np.uint64}[sdt])
    runner(res, "rng", {"seed": seed, "offs": offs, **out}, (n // 64,))
    return out


@pytest.mark.parametrize("runner", [run_interp, run_emulator], ids=["interp", "emulator"])
@pytest.mark.parametrize("case", FIXTURE["cases"], ids=lambda c: f"{c['seed']}-{c['offset_dtype']}")
def test_kernel_matches_triton(case, runner):
    out = _run(case, runner)
    np.testing.assert_array_equal(out["oi"], np.array(case["randint"], np.uint32))
    np.testing.assert_array_equal(out["ou"].view(np.uint32), np.array(case["rand_bits"], np.uint32))
    want_n = np.array(case["randn_bits"], np.uint32).view(np.float32)
    if runner is run_interp:
        np.testing.assert_array_equal(out["on"], want_n)
    else:  # the GPU's log/sqrt/cos: each within an ulp or two of the correctly rounded value
        np.testing.assert_allclose(out["on"], want_n, rtol=2e-6, atol=2e-6)


def test_unsigned_seed_is_zero_extended():
    case = dict(FIXTURE["cases"][0], seed=2**64 - 7)  # the bits of i64 -7
    a = _run(case, run_emulator, sdt="u64")
    b = _run(dict(case, seed=-7), run_interp, sdt="i64")
    np.testing.assert_array_equal(a["oi"], b["oi"])


def test_statistics_of_a_large_sample():
    offs = np.arange(1 << 16, dtype=np.int32)
    u = uniform(randint4x(1234, offs)[0])
    assert u.min() >= 0.0 and u.max() < 1.0
    assert abs(u.mean() - 0.5) < 0.005 and abs(u.var() - 1 / 12) < 0.002


SCALAR = """
kernel one(out: Array[f32, 1]) {
    store(out, index = (0,), tile = expand_dims(rand(7, 3) + randn(7, 3), 0));
}
"""


def test_constant_seed_and_offset():
    res = compile_text(SCALAR, "one.tile")
    a, b = np.zeros(1, np.float32), np.zeros(1, np.float32)
    run_interp(res, "one", {"out": a}, (1,))
    run_emulator(res, "one", {"out": b}, (1,))
    w = randint4x(7, np.array([3], np.int64))
    assert a[0] == pytest.approx(float(uniform(w[0])[0]) + float(
        np.sqrt(-2 * np.log(np.float64(uniform(w[0])[0]))) *
        np.cos(2 * np.pi * np.float64(uniform(w[1])[0]))), rel=1e-6)
    assert b[0] == pytest.approx(float(a[0]), rel=1e-6)


def test_ptx_uses_32_bit_multiplies_and_no_local_memory():
    ptx = compile_text(KERNEL.format(sdt="i64", odt="i32"), "rng.tile").ptx
    assert re.search(r"mul\.(hi|wide)\.u32", ptx), ptx
    assert ".local" not in ptx
    ptxas = shutil.which("ptxas")
    if ptxas:  # optional cross-check with NVIDIA's assembler
        p = HERE / "data"
        r = subprocess.run([ptxas, "-arch=sm_90a", "-o", "/dev/null", "-"], input=ptx.encode(),
                           capture_output=True, cwd=p)
        assert r.returncode == 0, r.stderr.decode()


@pytest.mark.parametrize("call,code,text", [
    ("rand(arange(4), arange(4))", "E0509", "parameter `seed` must be a scalar"),
    ("rand(1.5, arange(4))", "E0508", "parameter `seed` must be an integer"),
    ("randn(3, astype(arange(4), f32))", "E0508", "parameter `offset` must be an integer tile"),
])
def test_diagnostics(call, code, text):
    src = f"kernel k(out: Array[f32, 1]) {{ store(out, index = (0,), tile = {call}); }}"
    res = compile_source(src, "bad.tile", CompileOptions(), until="ir")
    assert not res.ok
    d = res.diagnostics[0]
    assert d.code == code and text in d.message, d
