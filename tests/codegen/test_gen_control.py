"""Control flow with carried tiles: for loops accumulating tiles, while loops with a tile and
a scalar carried and a break, continue, if/else yielding tiles in different layouts, an early
`return` before a block-wide reduction (convergent barriers), nested loops."""

from __future__ import annotations

import numpy as np

from gen_support import run_both, same
from tilelang.ir.builder import KernelBuilder
from tilelang.sema.types import F32, I32, ArrayType, scalar


def test_for_accumulates_tiles_and_counts():
    """y[b, :] = sum over column tiles k of x[b, k*64:(k+1)*64], skipping odd k (continue);
    n[b] = number of tiles added."""
    kb = KernelBuilder("rowacc")
    x, y = kb.param("x", ArrayType(F32, 2)), kb.param("y", ArrayType(F32, 2))
    cnt = kb.param("cnt", ArrayType(I32, 1))
    b = kb.op("bid", 0)
    nt = kb.op("num_tiles", x, axis=1, shape=(1, 64))
    loop = kb.for_(0, nt, 1, init=(kb.op("zeros", (1, 64), F32), kb.constant(0, I32)))
    with loop.body() as (k, acc, n):
        odd = kb.if_(kb.op("==", kb.op("%", k, 2), 1))
        with odd.then_():
            kb.continue_(acc, n)
        odd.end()
        t = kb.op("load", x, index=(b, k), shape=(1, 64), padding=0.0)
        kb.yield_(kb.op("+", acc, t), kb.op("+", n, 1))
    acc, n = loop.end()
    kb.op("store", y, index=(b, 0), tile=acc)
    kb.op("scatter", cnt, b, n)
    k = kb.finish()
    X = np.random.default_rng(0).standard_normal((5, 300)).astype(np.float32)
    Y, C = np.zeros((5, 64), np.float32), np.zeros(5, np.int32)
    (_, ye, ce), (_, yr, cr), _, _ = run_both(k, [X, Y, C], (5, 1, 1))
    Xp = np.pad(X, ((0, 0), (0, 320 - 300))).reshape(5, 5, 64)
    want = Xp[:, 0::2].sum(1, dtype=np.float32)
    np.testing.assert_allclose(yr, want, rtol=1e-6)
    np.testing.assert_allclose(ye, yr, rtol=1e-6)
    assert cr.tolist() == [3] * 5 and ce.tolist() == [3] * 5


def test_while_halves_a_tile_until_small_with_break():
    kb = KernelBuilder("halve")
    x, y = kb.param("x", ArrayType(F32, 1)), kb.param("y", ArrayType(F32, 1))
    it = kb.param("it", ArrayType(I32, 1))
    b = kb.op("bid", 0)
    t0 = kb.op("load", x, index=(b,), shape=(256,), padding=0.0)
    w = kb.while_(init=(t0, kb.constant(0, I32)))
    with w.cond() as (t, n):
        kb.condition(kb.op(">", kb.op("sum", kb.op("abs", t)), 1.0))
    with w.body() as (t, n):
        cap = kb.if_(kb.op(">=", n, 6))
        with cap.then_():
            kb.break_(t, n)
        cap.end()
        kb.yield_(kb.op("*", t, 0.5), kb.op("+", n, 1))
    t, n = w.end()
    kb.op("store", y, index=(b,), tile=t)
    kb.op("scatter", it, b, n)
    k = kb.finish()
    X = np.zeros(768, np.float32)
    X[:256] = 0.001          # block 0: no iteration
    X[256:512] = 0.05        # block 1: sum 12.8 -> 4 halvings
    X[512:] = 10.0           # block 2: capped at 6
    Y, I = np.zeros(768, np.float32), np.zeros(3, np.int32)
    (_, ye, ie), (_, yr, ir_), r, _ = run_both(k, [X, Y, I], (3, 1, 1))
    assert ir_.tolist() == [0, 4, 6] and ie.tolist() == [0, 4, 6]
    want = X * np.repeat(0.5 ** np.array([0, 4, 6]), 256).astype(np.float32)
    same(yr, want)
    same(ye, want)
    assert ".reqntid" in r.ptx     # the sum needs the whole block


def test_if_else_yields_tiles_in_different_layouts():
    """then: the loaded tile; else: its transpose (another layout, converted at the merge)."""
    kb = KernelBuilder("pick")
    x, y = kb.param("x", ArrayType(F32, 2)), kb.param("y", ArrayType(F32, 2))
    b = kb.op("bid", 0)
    t = kb.op("load", x, index=(b, 0), shape=(32, 32), padding=0.0)
    ifb = kb.if_(kb.op("==", kb.op("%", b, 2), 0))
    with ifb.then_():
        kb.yield_(t)
    with ifb.else_():
        kb.yield_(kb.op("transpose", kb.op("+", t, 100.0), -2, -1))
    (r,) = ifb.end()
    kb.op("store", y, index=(b, 0), tile=r)
    k = kb.finish()
    X = np.random.default_rng(1).standard_normal((96, 32)).astype(np.float32)
    Y = np.zeros_like(X)
    (_, ye), (_, yr), _, _ = run_both(k, [X, Y], (3, 1, 1))
    want = X.copy()
    want[32:64] = (X[32:64] + 100).T
    same(yr, want)
    same(ye, want)


def test_early_return_before_block_reduction():
    """Odd blocks return before a reduction: no barrier waits for them, even blocks finish."""
    kb = KernelBuilder("early", attributes={"reqntid": (64, 1, 1)})
    x, y = kb.param("x", ArrayType(F32, 1)), kb.param("y", ArrayType(F32, 1))
    b = kb.op("bid", 0)
    odd = kb.if_(kb.op("==", kb.op("%", b, 2), 1))
    with odd.then_():
        kb.return_()
    odd.end()
    t = kb.op("load", x, index=(b,), shape=(512,), padding=0.0)
    kb.op("scatter", y, b, kb.op("max", t))
    k = kb.finish()
    X = np.random.default_rng(2).standard_normal(512 * 4).astype(np.float32)
    Y = np.full(4, -9.0, np.float32)
    (_, ye), (_, yr), _, _ = run_both(k, [X, Y], (4, 1, 1))
    want = np.array([X[:512].max(), -9, X[1024:1536].max(), -9], np.float32)
    same(yr, want)
    same(ye, want)


def test_nested_loops_with_inner_break():
    """out[b] = sum over i < 5 of (number of j < 8 with i * j < b) — inner loop breaks."""
    kb = KernelBuilder("nest")
    out = kb.param("out", ArrayType(I32, 1))
    b = kb.op("bid", 0)
    outer = kb.for_(0, 5, 1, init=(kb.constant(0, I32),))
    with outer.body() as (i, tot):
        inner = kb.for_(0, 8, 1, init=(tot,))
        with inner.body() as (j, t):
            stop = kb.if_(kb.op(">=", kb.op("*", i, j), b))
            with stop.then_():
                kb.break_(t)
            stop.end()
            kb.yield_(kb.op("+", t, 1))
        (t2,) = inner.end()
        kb.yield_(t2)
    (tot,) = outer.end()
    kb.op("scatter", out, b, tot)
    k = kb.finish()
    O = np.zeros(12, np.int32)
    (oe,), (orf,), _, _ = run_both(k, [O], (12, 1, 1))
    want = []
    for bb in range(12):
        s = 0
        for i in range(5):
            for j in range(8):
                if i * j >= bb:
                    break
                s += 1
        want.append(s)
    assert orf.tolist() == want and oe.tolist() == want


def test_loop_with_reduction_and_scalar_param_bound():
    """A loop whose trip count is a kernel parameter, with a block reduction in the body."""
    kb = KernelBuilder("loopred")
    x, y = kb.param("x", ArrayType(F32, 1)), kb.param("y", ArrayType(F32, 1))
    n = kb.param("n", scalar(I32))
    b = kb.op("bid", 0)
    t = kb.op("load", x, index=(b,), shape=(128,), padding=0.0)
    loop = kb.for_(0, n, 1, init=(t,))
    with loop.body() as (i, cur):
        kb.yield_(kb.op("-", cur, kb.op("/", kb.op("sum", cur), 128.0)))
    (res,) = loop.end()
    kb.op("store", y, index=(b,), tile=res)
    k = kb.finish()
    X = np.random.default_rng(3).standard_normal(256).astype(np.float32) + 3
    Y = np.zeros(256, np.float32)
    (_, ye, _), (_, yr, _), _, _ = run_both(k, [X, Y, np.int32(3)], (2, 1, 1))
    want = X.reshape(2, 128).astype(np.float64)
    for _ in range(3):
        want = want - want.mean(1, keepdims=True)
    np.testing.assert_allclose(yr, want.reshape(-1), atol=1e-5)
    np.testing.assert_allclose(ye, yr, atol=1e-5)
