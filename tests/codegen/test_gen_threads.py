"""The thread policy: a kernel whose threads never talk to each other keeps `.maxntid` and is
correct under any smaller launch (the virtual-thread loop); one that does (reductions, shared
memory) gets `.reqntid`. Side effects of replicated values happen once per block."""

from __future__ import annotations

import numpy as np
import pytest

from gen_support import compile_kernel, interpret, link, run_emulated, same
from tilelang.codegen.generate import generate
from tilelang.options import CompileOptions
from tilelang.ir import samples
from tilelang.ir.builder import KernelBuilder
from tilelang.ir.ops import IRModule
from tilelang.sema.types import F32, I32, ArrayType


def stores(report) -> int:
    return sum(n for op, n in report.instructions.items() if op.startswith("st.global"))


@pytest.mark.parametrize("block", [(256, 1, 1), (128, 1, 1), (32, 1, 1), (1, 1, 1),
                                   (64, 2, 1), (96, 1, 1)])
def test_vadd_under_smaller_blocks(block):
    k = samples.vadd()
    r = compile_kernel(k)
    assert ".maxntid 256, 1, 1" in r.ptx and r.kernels[0].block == (256, 1, 1)
    n = 3000
    a = np.arange(n, dtype=np.float32)
    b = np.float32(0.5) * a
    c = np.zeros(n, np.float32)
    run_emulated(r, "vadd", [a, b, c], (3, 1, 1), block=block)
    same(c, a + b)


def scalar_and_tile_kernel(threads):
    """y[tile b] = x * 2, out[b] = b * 10 and out[b + 3] = b * 10 + 1 (a scalar and a 1-element
    tile: each stored once per block)."""
    kb = KernelBuilder("mixed", attributes={"maxntid": (threads, 1, 1)})
    x, y = kb.param("x", ArrayType(F32, 2)), kb.param("y", ArrayType(F32, 2))
    out = kb.param("out", ArrayType(I32, 1))
    b = kb.op("bid", 0)
    t = kb.op("load", x, index=(b, 0), shape=(8, 32), padding=0.0)
    kb.op("store", y, index=(b, 0), tile=kb.op("*", t, 2.0))
    kb.op("scatter", out, b, kb.op("*", b, 10))
    kb.op("store", out, index=(kb.op("+", b, 3),),
          tile=kb.op("full", (1,), kb.op("+", kb.op("*", b, 10), 1)))
    return kb.finish()


@pytest.mark.parametrize("threads,blocks", [(128, [128, 64, 32, 1]), (96, [96, 48, 32, 1]),
                                            (32, [32, 16, 1])])
def test_maxntid_kernel_with_scalar_side_effects(threads, blocks):
    k = scalar_and_tile_kernel(threads)
    r = compile_kernel(k)
    link(r)
    assert f".maxntid {threads}, 1, 1" in r.ptx and ".reqntid" not in r.ptx
    X = np.random.default_rng(0).standard_normal((20, 32)).astype(np.float32)
    Yr, Or = np.zeros_like(X), np.full(6, -1, np.int32)
    interpret(k, [X, Yr, Or], (3, 1, 1))
    same(Yr[:20], 2 * X)
    same(Or, np.array([0, 10, 20, 1, 11, 21], np.int32))
    for blk in blocks:
        Y, O = np.zeros_like(X), np.full(6, -1, np.int32)
        rep = run_emulated(r, "mixed", [X, Y, O], (3, 1, 1), block=(blk, 1, 1))
        same(Y, Yr)
        same(O, Or)
        # 256 elements in vectors (two per thread over 128 threads, four over fewer) per block
        # are the tile stores; the two scalar stores happen exactly once per block.
        scalar_stores = stores(rep) - sum(
            n for op, n in rep.instructions.items() if op.startswith("st.global.v"))
        assert scalar_stores == 2 * 3, rep.instructions


def test_reduction_kernel_gets_reqntid_and_refuses_other_blocks():
    r = compile_kernel(samples.softmax_rows(256))
    assert ".reqntid 128, 1, 1" in r.ptx and ".maxntid" not in r.ptx
    from tilelang.emulator.errors import LaunchRefused
    x = np.zeros((2, 256), np.float32)
    with pytest.raises(LaunchRefused):
        run_emulated(r, "softmax_rows", [x, x.copy()], (2, 1, 1), block=(64, 1, 1))


def test_user_maxntid_with_communication_becomes_reqntid_with_a_note():
    k = samples.softmax_rows(256)
    k = type(k)(k.name, k.params, k.body, {"maxntid": (256, 1, 1)})
    r = generate(IRModule((k,)), CompileOptions(target="sm_90a"))
    assert ".reqntid 256, 1, 1" in r.ptx and ".maxntid" not in r.ptx
    assert [d.code for d in r.diagnostics] == ["E0722"]
    assert r.kernels[0].block == (256, 1, 1)
    x = np.random.default_rng(1).standard_normal((3, 200)).astype(np.float32)
    y = np.zeros_like(x)
    run_emulated(r, "softmax_rows", [x, y], (3, 1, 1))
    e = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(y, e / e.sum(1, keepdims=True), rtol=1e-5)


def test_default_shape_is_128_threads():
    r = compile_kernel(samples.collatz_steps())
    assert ".maxntid 128, 1, 1" in r.ptx and r.kernels[0].block == (128, 1, 1)
