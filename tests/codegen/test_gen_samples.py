"""The sample kernels (tilelang.ir.samples) through `generate`: every target compiles and links
with nvJitLink; on the emulator the PTX gives the reference interpreter's result, which equals
an independent NumPy computation; PTX properties (vector accesses, no local memory,
shuffles) and the emulator's coalescing counter."""

from __future__ import annotations

import numpy as np
import pytest

from gen_support import (TARGETS, Strided, compile_kernel, has_local, interpret, link,
                         observed_facts, run_emulated, vector_accesses)
from tilelang.codegen.api import ArrayFacts
from tilelang.ir import samples
from tilelang.ir.ops import IRModule
from tilelang.ir.passes import PassManager

SAMPLES = ("vadd", "softmax_rows", "collatz_steps", "odd_sum", "signed_scale", "optimizable",
           "matmul")
UNALIGNED = ArrayFacts(contiguous=True, aligned16=False)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", SAMPLES)
def test_sample_compiles_and_links(name, target):
    r = compile_kernel(getattr(samples, name)(), target)
    link(r)
    assert r.target == target and r.kernels[0].name == getattr(samples, name)().name
    assert f".entry {r.kernels[0].name}(" in r.ptx


@pytest.mark.parametrize("name", SAMPLES)
def test_no_local_memory_at_O3(name):
    assert not has_local(compile_kernel(getattr(samples, name)(), "sm_90a", 3).ptx)


@pytest.mark.parametrize("opt", [0, 1, 2, 3])
def test_opt_levels_compile_and_run(opt):
    k = samples.softmax_rows(256)
    r = compile_kernel(k, "sm_80", opt, facts={"x": UNALIGNED, "y": UNALIGNED})
    link(r)
    assert r.opt_level == opt and not has_local(r.ptx)
    x = np.random.default_rng(opt).standard_normal((3, 200)).astype(np.float32)
    y = np.zeros_like(x)
    run_emulated(r, "softmax_rows", [x, y], (3, 1, 1))
    np.testing.assert_allclose(y, softmax_ref(x), rtol=1e-5, atol=1e-7)


def vadd_ref(n, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(n).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    return a, b, a + b


@pytest.mark.parametrize("n", [1024, 5000, 3, 4097])
def test_vadd_emulated(n):
    k = samples.vadd()
    a, b, want = vadd_ref(n)
    c, ci = np.zeros(n, np.float32), np.zeros(n, np.float32)
    r = compile_kernel(k, facts=observed_facts(k, [a, b, c]))
    grid = (-(-n // 1024), 1, 1)
    run_emulated(r, "vadd", [a, b, c], grid)
    interpret(k, [a, b, ci], grid)
    assert np.array_equal(ci, want)
    assert np.array_equal(c, want)


def test_vadd_million_coalesced_and_vectorized():
    n = 1_000_003
    k = samples.vadd()
    a, b, want = vadd_ref(n, 1)
    c = np.zeros(n, np.float32)
    r = compile_kernel(k, facts=observed_facts(k, [a, b, c]))
    rep = run_emulated(r, "vadd", [a, b, c], (-(-n // 1024), 1, 1))
    assert np.array_equal(c, want)
    assert rep.coalescing_efficiency >= 0.95
    assert len(vector_accesses(r.ptx, "ld")) >= 2 and len(vector_accesses(r.ptx, "st")) >= 1
    assert ".maxntid 256, 1, 1" in r.ptx and ".reqntid" not in r.ptx


def softmax_ref(x):
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)).astype(np.float32)


@pytest.mark.parametrize("rows,cols", [(7, 777), (3, 1024), (5, 1)])
def test_softmax_emulated_unaligned(rows, cols):
    k = samples.softmax_rows(1024)
    r = compile_kernel(k, facts={"x": UNALIGNED, "y": UNALIGNED})
    x = np.random.default_rng(2).standard_normal((rows, cols)).astype(np.float32)
    y, yi = np.zeros_like(x), np.zeros_like(x)
    run_emulated(r, "softmax_rows", [x, y], (rows, 1, 1))
    interpret(k, [x, yi], (rows, 1, 1))
    np.testing.assert_allclose(yi, softmax_ref(x), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(y, yi, rtol=2e-6, atol=1e-8)


def test_softmax_1000x777_padded_pitch():
    """A 16-byte multiple row pitch keeps contiguous and aligned16 (777 columns break
    extent16): vector accesses, shuffles."""
    k = samples.softmax_rows(1024)
    ragged = ArrayFacts(extent16=False)
    r = compile_kernel(k, facts={"x": ragged, "y": ragged})
    assert r.ptx.count("shfl.sync.bfly") >= 5 and ".reqntid 128, 1, 1" in r.ptx
    assert vector_accesses(r.ptx, "ld")
    x = np.random.default_rng(3).standard_normal((1000, 777)).astype(np.float32)
    xb = np.zeros((1000, 780), np.float32)
    xb[:, :777] = x
    yb = np.full((1000, 780), 7.0, np.float32)
    run_emulated(r, "softmax_rows", [Strided(xb, xb[:, :777]), Strided(yb, yb[:, :777])],
                 (1000, 1, 1))
    np.testing.assert_allclose(yb[:, :777], softmax_ref(x), rtol=1e-5, atol=1e-7)
    assert (yb[:, 777:] == 7.0).all()


@pytest.mark.parametrize("name", ["collatz_steps", "odd_sum"])
def test_scalar_control_flow_samples(name):
    k = getattr(samples, name)()
    r = compile_kernel(k)
    out, ref = np.full(40, -1, np.int32), np.full(40, -1, np.int32)
    run_emulated(r, name, [out], (40, 1, 1))
    interpret(k, [ref], (40, 1, 1))
    if name == "odd_sum":
        want = [sum(i for i in range(b * 10) if i % 2 and i < 50) for b in range(40)]
    else:
        def steps(x):
            s = 0
            while x != 1 and s < 100:
                x, s = (x // 2 if x % 2 == 0 else 3 * x + 1), s + 1
            return s
        want = [steps(b + 1) for b in range(40)]
    assert ref.tolist() == want
    assert out.tolist() == want


def test_signed_scale():
    k = samples.signed_scale()
    r = compile_kernel(k)
    x = np.random.default_rng(4).standard_normal(1000).astype(np.float32)
    y = np.zeros_like(x)
    run_emulated(r, "signed_scale", [x, y], (4, 1, 1))
    want = np.concatenate([2 * t if t.sum(dtype=np.float64) > 0 else -t
                           for t in np.split(np.pad(x, (0, 24)), 4)])[:1000]
    np.testing.assert_array_equal(y, want)


@pytest.mark.parametrize("optimized", [False, True])
def test_optimizable(optimized):
    k = samples.optimizable()
    if optimized:
        k = PassManager().run(IRModule((k,))).kernels[0]
    r = compile_kernel(k)
    x = np.random.default_rng(5).standard_normal(200).astype(np.float32)
    y, yi = np.zeros_like(x), np.zeros_like(x)
    run_emulated(r, "optimizable", [x, y, 3], (4, 1, 1))
    interpret(k, [x, yi, 3], (4, 1, 1))
    xp = np.pad(x, (0, 56))
    want = (xp * 4 * sum(range(7)) + xp)[:200]
    np.testing.assert_allclose(yi, want, rtol=1e-6)
    np.testing.assert_allclose(y, yi, rtol=1e-6)
