"""The reference interpreter on the sample kernels, against independent NumPy computations,
for shapes that are and are not multiples of the tile. Every kernel also runs after the
default pass pipeline and must give the same result (the passes preserve semantics)."""

from __future__ import annotations

import io

import numpy as np
import pytest

from tilelang.interp import InterpreterAssertionError, InterpreterError, run_kernel
from tilelang.ir import KernelBuilder, module, samples
from tilelang.ir.passes import optimize
from tilelang.sema.types import I32, ArrayType, scalar


def _cdiv(a, b):
    return -(-a // b)


def _both(kernel):
    """The kernel as built and after the default pipeline."""
    return [kernel, optimize(module(kernel)).kernels[0]]


@pytest.mark.parametrize("n", [1024 * 3, 1_000_003])
def test_vadd(n):
    rng = np.random.default_rng(0)
    a = rng.standard_normal(n).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    for k in _both(samples.vadd(1024)):
        c = np.full(n, np.nan, np.float32)
        run_kernel(k, [a, b, c], grid=(_cdiv(n, 1024),))
        np.testing.assert_array_equal(c, a + b)


def test_softmax_rows_not_a_multiple_of_the_tile():
    rows, cols = 1000, 777
    x = np.random.default_rng(1).standard_normal((rows, cols)).astype(np.float32)
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    want = e / e.sum(axis=1, keepdims=True)
    for k in _both(samples.softmax_rows(1024)):
        y = np.zeros_like(x)
        run_kernel(k, {"x": x, "y": y}, grid=(rows,))
        np.testing.assert_allclose(y, want, rtol=2e-6, atol=1e-9)


@pytest.mark.parametrize("m,kk,n", [(64, 32, 64), (100, 70, 90)])
def test_matmul_loop_carried_accumulator(m, kk, n):
    rng = np.random.default_rng(2)
    a = rng.standard_normal((m, kk)).astype(np.float16)
    b = rng.standard_normal((kk, n)).astype(np.float16)
    want = a.astype(np.float64) @ b.astype(np.float64)
    for k in _both(samples.matmul(32, 32, 16)):
        c = np.zeros((m, n), np.float32)
        run_kernel(k, [a, b, c], grid=(_cdiv(m, 32), _cdiv(n, 32)))
        np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-5)


def _collatz(x, cap):
    steps = 0
    while x != 1:
        if steps >= cap:
            break
        x = x // 2 if x % 2 == 0 else 3 * x + 1
        steps += 1
    return steps


def test_while_with_break():
    blocks, cap = 40, 20
    want = np.array([_collatz(b + 1, cap) for b in range(blocks)], np.int32)
    assert want.max() == cap and want.min() == 0          # the break is taken, and not
    for k in _both(samples.collatz_steps(cap)):
        out = np.full(blocks, -1, np.int32)
        run_kernel(k, [out], grid=(blocks,))
        np.testing.assert_array_equal(out, want)


def test_for_with_continue_and_break():
    blocks = 8
    want = np.array([sum(i for i in range(min(b * 10, 50)) if i % 2) for b in range(blocks)],
                    np.int32)
    for k in _both(samples.odd_sum()):
        out = np.full(blocks, -1, np.int32)
        run_kernel(k, [out], grid=(blocks,))
        np.testing.assert_array_equal(out, want)


def test_if_else_producing_a_tile():
    n = 256 * 7 + 13
    x = np.random.default_rng(3).standard_normal(n).astype(np.float32)
    tiles = np.zeros(256 * 8, np.float32)
    tiles[:n] = x
    sums = tiles.reshape(8, 256).astype(np.float64).sum(axis=1)
    want = np.where(np.repeat(sums > 0, 256)[:n], 2 * x, -x)
    assert (sums > 0).any() and (sums <= 0).any()
    for k in _both(samples.signed_scale(256)):
        y = np.zeros_like(x)
        run_kernel(k, [x, y], grid=(8,))
        np.testing.assert_array_equal(y, want)


def test_optimizable_same_result_before_and_after_passes():
    n = 64 * 5 + 3
    x = np.random.default_rng(4).standard_normal(n).astype(np.float32)
    results = []
    for k in _both(samples.optimizable()):
        y = np.zeros_like(x)
        run_kernel(k, [x, y, 3], grid=(6,))
        results.append(y)
    # limit = n + 4 = 7 iterations: acc = sum_k x * (n + 1) * k = x * 4 * 21, then + x
    np.testing.assert_allclose(results[0], x * 4 * 21 + x, rtol=1e-6)
    np.testing.assert_array_equal(results[0], results[1])


def _debug_kernel():
    kb = KernelBuilder("debug")
    out = kb.param("out", ArrayType(I32, 1))
    limit = kb.param("limit", scalar(I32))
    b = kb.op("bid", 0)
    kb.op("print", "block {} of {}", b, kb.op("num_blocks", 0))
    early = kb.if_(kb.op(">=", b, limit))
    with early.then_():
        kb.return_()
    early.end()
    kb.op("assert", kb.op("<", b, 3), "bid must stay below 3")
    kb.op("scatter", out, b, kb.op("*", b, 10))
    return kb.finish()


def test_print_return_and_assert():
    out = np.full(4, -1, np.int32)
    buf = io.StringIO()
    run_kernel(_debug_kernel(), [out, 3], grid=(4,), out=buf)
    assert buf.getvalue().splitlines() == [f"[block ({i}, 0, 0)] block {i} of 4"
                                           for i in range(4)]
    np.testing.assert_array_equal(out, [0, 10, 20, -1])   # block 3 returned early
    with pytest.raises(InterpreterAssertionError,
                       match=r"kernel `debug`, block \(3, 0, 0\): assertion failed: bid must "
                             r"stay below 3") as e:
        run_kernel(_debug_kernel(), [out, 10], grid=(4,), out=io.StringIO())
    assert e.value.block == (3, 0, 0) and e.value.message == "bid must stay below 3"


def test_grid_2d_and_atomics_see_every_block():
    kb = KernelBuilder("count")
    cnt = kb.param("cnt", ArrayType(I32, 1))
    x, y = kb.op("bid", 0), kb.op("bid", 1)
    kb.op("atomic_add", cnt, kb.op("*", y, 0), kb.op("+", kb.op("*", y, 100), x))
    k = kb.finish()
    c = np.zeros(1, np.int32)
    run_kernel(k, [c], grid=(3, 2))
    assert c[0] == sum(y * 100 + x for x in range(3) for y in range(2))


def test_argument_errors():
    k = samples.vadd()
    a = np.zeros(8, np.float32)
    with pytest.raises(InterpreterError, match="takes 3 arguments, got 2"):
        run_kernel(k, [a, a], grid=(1,))
    with pytest.raises(InterpreterError, match=r"parameter `b` is Array\[f32, 1\].*float64"):
        run_kernel(k, [a, a.astype(np.float64), a], grid=(1,))
    with pytest.raises(InterpreterError, match="missing argument `c`"):
        run_kernel(k, {"a": a, "b": a}, grid=(1,))


def test_optional_arguments_left_out_take_the_registry_default():
    """Hand-built IR may leave out optional arguments (`arange(32)` has no dtype, `transpose`
    no axes): the interpreter uses the registry's defaults, as the checker does."""
    kb = KernelBuilder("defaults")
    o, a = kb.param("o", ArrayType(I32, 2)), kb.param("a", ArrayType(I32, 2))
    r = kb.op("arange", 32)
    x = kb.op("load", a, index=(0, 0), shape=(4, 8))
    t = kb.op("+", kb.op("transpose", x), kb.op("reshape", r, (8, 4)))
    kb.op("store", o, index=(0, 0), tile=t)
    out = np.zeros((8, 4), np.int32)
    src = np.arange(32, dtype=np.int32).reshape(4, 8) * 3
    run_kernel(kb.finish(), {"o": out, "a": src}, (1, 1, 1))
    np.testing.assert_array_equal(out, src.T + np.arange(32).reshape(8, 4))
