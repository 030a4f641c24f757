"""Passes must not change what a kernel does around memory effects: loads are not merged or
hoisted across stores, effects are never removed, and results stay equal under the
interpreter."""

from __future__ import annotations

import numpy as np

from tilelang.interp import run_kernel
from tilelang.ir import BuiltinOp, ForOp, KernelBuilder, module, walk
from tilelang.ir.passes import PassManager, optimize
from tilelang.sema.types import F32, I32, ArrayType


def _names(k):
    return [op.name for op in walk(k.body) if isinstance(op, BuiltinOp)]


def _load_store_load():
    kb = KernelBuilder("lsl")
    a = kb.param("a", ArrayType(F32, 1))
    i = kb.op("bid", 0)
    x = kb.op("load", a, index=(i,), shape=(4,))
    kb.op("store", a, index=(i,), tile=kb.op("+", x, 1.0))
    y = kb.op("load", a, index=(i,), shape=(4,))          # sees the store: must stay
    kb.op("store", a, index=(i,), tile=kb.op("*", y, 2.0))
    return kb.finish()


def test_cse_keeps_loads_separated_by_a_store():
    k = PassManager(["cse"]).run(module(_load_store_load())).kernels[0]
    assert _names(k).count("load") == 2
    a = np.arange(8, dtype=np.float32)
    run_kernel(k, [a], grid=(2,))
    np.testing.assert_array_equal(a, (np.arange(8) + 1) * 2)


def _loop_with_store():
    kb = KernelBuilder("acc")
    a = kb.param("a", ArrayType(F32, 1))
    loop = kb.for_(0, 3, 1)
    with loop.body():
        x = kb.op("load", a, index=(0,), shape=(4,))      # invariant operands, but memory
        kb.op("store", a, index=(0,), tile=kb.op("+", x, 1.0))
    loop.end()
    return kb.finish()


def test_licm_keeps_a_load_in_a_loop_that_stores():
    k = PassManager(["licm", "cse"]).run(module(_loop_with_store())).kernels[0]
    loop = next(op for op in k.body.ops if isinstance(op, ForOp))
    assert [op.name for op in loop.body.ops if isinstance(op, BuiltinOp)][0] == "load"
    a = np.zeros(4, np.float32)
    run_kernel(k, [a], grid=(1,))
    np.testing.assert_array_equal(a, [3, 3, 3, 3])


def test_licm_hoists_a_load_from_a_loop_without_effects():
    kb = KernelBuilder("sum")
    a, out = kb.param("a", ArrayType(F32, 1)), kb.param("out", ArrayType(F32, 1))
    loop = kb.for_(0, 4, 1, init=(kb.op("zeros", (4,), F32),))
    with loop.body() as (_, acc):
        kb.yield_(kb.op("+", acc, kb.op("load", a, index=(0,), shape=(4,))))
    (r,) = loop.end()
    kb.op("store", out, index=(0,), tile=r)
    k = optimize(module(kb.finish())).kernels[0]
    assert "load" in [op.name for op in k.body.ops if isinstance(op, BuiltinOp)]
    src, dst = np.arange(4, dtype=np.float32), np.zeros(4, np.float32)
    run_kernel(k, [src, dst], grid=(1,))
    np.testing.assert_array_equal(dst, 4 * src)


def test_dce_keeps_effects_and_removes_dead_loops():
    kb = KernelBuilder("fx")
    a = kb.param("a", ArrayType(F32, 1))
    i = kb.op("bid", 0)
    kb.op("print", "{}", i)
    kb.op("assert", kb.op(">=", i, 0), "non-negative")
    loop = kb.for_(0, 10, 1, init=(kb.op("zeros", (4,), F32),))
    with loop.body() as (_, acc):
        kb.yield_(kb.op("+", acc, 1.0))
    loop.end()                                            # result unused, body pure
    kb.op("atomic_add", a, i, 1.0)                        # result unused, but an effect
    k = optimize(module(kb.finish())).kernels[0]
    assert _names(k) == ["bid", "print", ">=", "assert", "atomic_add"]
    assert not any(isinstance(op, ForOp) for op in k.body.ops)


def test_fold_leaves_division_by_zero_to_run_time():
    kb = KernelBuilder("div0")
    out = kb.param("out", ArrayType(F32, 1))
    q = kb.op("floordiv", kb.constant(7, I32), 0)
    kb.op("store", out, index=(0,), tile=kb.op("full", (1,), kb.op("astype", q, F32)))
    k = optimize(module(kb.finish())).kernels[0]
    assert "floordiv" in _names(k)                        # not folded: E0403 at compile time
    o = np.ones(1, np.float32)
    run_kernel(k, [o], grid=(1,))
    assert o[0] == 0                                       # the reference's run-time result
