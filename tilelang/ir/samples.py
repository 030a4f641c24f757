"""Hand-built sample kernels: the language's canonical examples as Tile IR, written with the
builder the way the AST lowering will emit them. Tests of the IR, the interpreter and (until
the lowering exists) code generation use them; they also document the builder by example."""

from __future__ import annotations

from tilelang.sema.types import F16, F32, I32, ArrayType, scalar

from tilelang.ir.builder import KernelBuilder
from tilelang.ir.ops import Kernel


def vadd(tile: int = 1024) -> Kernel:
    """c[i] = a[i] + b[i], one TILE-element tile per block."""
    kb = KernelBuilder("vadd", attributes={"maxntid": (256, 1, 1)})
    a, b, c = (kb.param(n, ArrayType(F32, 1)) for n in "abc")
    i = kb.op("bid", 0)
    x = kb.op("load", a, index=(i,), shape=(tile,), padding=0.0)
    y = kb.op("load", b, index=(i,), shape=(tile,), padding=0.0)
    kb.op("store", c, index=(i,), tile=kb.op("+", x, y))
    return kb.finish()


def softmax_rows(n: int = 1024) -> Kernel:
    """y[r, :] = softmax(x[r, :]), one row per block; N >= the row length, padded with -inf."""
    kb = KernelBuilder("softmax_rows")
    x, y = kb.param("x", ArrayType(F32, 2)), kb.param("y", ArrayType(F32, 2))
    r = kb.op("bid", 0)
    t = kb.op("load", x, index=(r, 0), shape=(1, n), padding=float("-inf"))
    e = kb.op("exp", kb.op("-", t, kb.op("max", t, axis=1, keepdims=True)))
    kb.op("store", y, index=(r, 0), tile=kb.op("/", e, kb.op("sum", e, axis=1, keepdims=True)))
    return kb.finish()


def matmul(bm: int = 32, bn: int = 32, bk: int = 16) -> Kernel:
    """c = a @ b (f16 inputs, f32 accumulator carried through a loop over K tiles)."""
    kb = KernelBuilder("matmul", attributes={"reqntid": (128, 1, 1), "maxnreg": 168})
    a, b = kb.param("a", ArrayType(F16, 2)), kb.param("b", ArrayType(F16, 2))
    c = kb.param("c", ArrayType(F32, 2))
    m, n = kb.op("bid", 0), kb.op("bid", 1)
    acc0 = kb.op("zeros", (bm, bn), F32)
    ktiles = kb.op("num_tiles", a, axis=1, shape=(bm, bk))
    loop = kb.for_(0, ktiles, 1, init=(acc0,), hints=("acc",))
    with loop.body() as (k, acc):
        ta = kb.op("load", a, index=(m, k), shape=(bm, bk), padding=0)
        tb = kb.op("load", b, index=(k, n), shape=(bk, bn), padding=0)
        kb.yield_(kb.op("mma", ta, tb, acc))
    (acc_out,) = loop.end()
    kb.op("store", c, index=(m, n), tile=acc_out)
    return kb.finish()


def collatz_steps(cap: int = 100) -> Kernel:
    """out[b] = Collatz steps from b + 1 down to 1, at most CAP: a while loop with carried
    (x, steps), an if producing a value, and a break when the cap is reached."""
    kb = KernelBuilder("collatz_steps")
    out = kb.param("out", ArrayType(I32, 1))
    b = kb.op("bid", 0)
    x0 = kb.op("+", b, 1)
    s0 = kb.constant(0, I32)
    w = kb.while_(init=(x0, s0))
    with w.cond() as (x, s):
        kb.condition(kb.op("!=", x, 1))
    with w.body() as (x, s):
        capped = kb.if_(kb.op(">=", s, cap))
        with capped.then_():
            kb.break_(x, s)
        capped.end()
        even = kb.if_(kb.op("==", kb.op("%", x, 2), 0))
        with even.then_():
            kb.yield_(kb.op("floordiv", x, 2))
        with even.else_():
            kb.yield_(kb.op("+", kb.op("*", x, 3), 1))
        (nx,) = even.end()
        kb.yield_(nx, kb.op("+", s, 1))
    _, steps = w.end()
    kb.op("scatter", out, b, steps)
    return kb.finish()


def odd_sum() -> Kernel:
    """out[b] = sum of the odd i in range(b * 10) below LIMIT = 50: `continue` skips the even
    ones, `break` stops at the limit."""
    kb = KernelBuilder("odd_sum")
    out = kb.param("out", ArrayType(I32, 1))
    b = kb.op("bid", 0)
    hi = kb.op("*", b, 10)
    loop = kb.for_(0, hi, 1, init=(kb.constant(0, I32),))
    with loop.body() as (i, acc):
        stop = kb.if_(kb.op(">=", i, 50))
        with stop.then_():
            kb.break_(acc)
        stop.end()
        even = kb.if_(kb.op("==", kb.op("%", i, 2), 0))
        with even.then_():
            kb.continue_(acc)
        even.end()
        kb.yield_(kb.op("+", acc, i))
    (total,) = loop.end()
    kb.op("scatter", out, b, total)
    return kb.finish()


def signed_scale(tile: int = 256) -> Kernel:
    """y = 2x where the tile's sum is positive, else -x: an if/else producing a tile."""
    kb = KernelBuilder("signed_scale")
    x, y = kb.param("x", ArrayType(F32, 1)), kb.param("y", ArrayType(F32, 1))
    i = kb.op("bid", 0)
    t = kb.op("load", x, index=(i,), shape=(tile,), padding=0.0)
    ifb = kb.if_(kb.op(">", kb.op("sum", t), 0.0))
    with ifb.then_():
        kb.yield_(kb.op("*", t, 2.0))
    with ifb.else_():
        kb.yield_(kb.op("u-", t))
    (r,) = ifb.end()
    kb.op("store", y, index=(i,), tile=r)
    return kb.finish()


def optimizable() -> Kernel:
    """A kernel with something for every pass: foldable constants and a constant `if` (fold),
    duplicated expressions (cse), loop invariants (licm) and unused values (dce)."""
    kb = KernelBuilder("optimizable")
    x, y = kb.param("x", ArrayType(F32, 1)), kb.param("y", ArrayType(F32, 1))
    n = kb.param("n", scalar(I32))
    two = kb.constant(2, I32)
    four = kb.op("*", two, two)                       # folds to 4
    flag = kb.op("<", four, 8)                        # folds to true
    pick = kb.if_(flag)
    with pick.then_():
        kb.yield_(kb.op("+", n, four))
    with pick.else_():
        kb.yield_(n)
    (limit,) = pick.end()                             # the if folds away: n + 4
    i = kb.op("bid", 0)
    t1 = kb.op("load", x, index=(i,), shape=(64,), padding=0.0)
    t2 = kb.op("load", x, index=(i,), shape=(64,), padding=0.0)  # same load: merged
    kb.op("exp", t1)                                  # unused: removed
    loop = kb.for_(0, limit, 1, init=(kb.op("zeros", (64,), F32),))
    with loop.body() as (k, acc):
        scale = kb.op("astype", kb.op("+", n, 1), F32)   # invariant: hoisted
        kf = kb.op("astype", k, F32)
        kb.yield_(kb.op("+", acc, kb.op("*", kb.op("*", t2, scale), kf)))
    (acc_out,) = loop.end()
    kb.op("store", y, index=(i,), tile=kb.op("+", acc_out, t1))
    return kb.finish()
