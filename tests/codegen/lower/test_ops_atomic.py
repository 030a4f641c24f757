"""Atomics through generate: every op and dtype, contention (many elements on one address),
masks and out-of-bounds indices (no effect, old value 0), scalar atomics (once per block, the
old value broadcast), tiles smaller than the block, 2-D arrays, float cas with float equality.
Final memory is compared exactly with the interpreter and NumPy where it is deterministic; the
returned old values are checked to be one valid serialization."""

from __future__ import annotations

import re

import numpy as np
import pytest

import tilelang.codegen.lower.atomic  # noqa: F401  (registers the lowering)
from ops_support import run_ops, rng_for
from tilelang.driver import compile_source
from tilelang.options import CompileOptions
from tilelang.ir.builder import KernelBuilder
from tilelang.sema.types import BF16, F16, F32, F64, I32, I64, U32, U64, ArrayType

DT = {"i32": I32, "u32": U32, "i64": I64, "u64": U64, "f16": F16, "bf16": BF16, "f32": F32,
      "f64": F64}
NP = {"i32": np.int32, "u32": np.uint32, "i64": np.int64, "u64": np.uint64, "f16": np.float16,
      "bf16": np.float32, "f32": np.float32, "f64": np.float64}


def atomic_kernel(kind, dt, n, threads, *, masked=True, exact=True):
    """old = atomic_<kind>(A, I[0:n], V[0:n], mask = I != 5); O[0:n] = old."""
    kb = KernelBuilder("atom", attributes={"reqntid" if exact else "maxntid": (threads, 1, 1)})
    A = kb.param("A", ArrayType(DT[dt], 1))
    I_ = kb.param("I", ArrayType(I32, 1))
    V = kb.param("V", ArrayType(DT[dt], 1))
    O = kb.param("O", ArrayType(DT[dt], 1))
    idx = kb.op("load", I_, index=(0,), shape=(n,), padding=0)
    v = kb.op("load", V, index=(0,), shape=(n,), padding=0)
    kw = {"mask": kb.op("!=", idx, 5)} if masked else {}
    old = kb.op("atomic_" + kind, A, idx, v, **kw)
    kb.op("store", O, index=(0,), tile=old)
    return kb.finish()


def values(kind, dt, n, rng):
    if kind in ("and", "or", "xor"):
        return rng.integers(0, 1 << 16, n).astype(NP[dt])
    if kind in ("max", "min") and dt in ("i32", "i64"):
        return rng.integers(-1000, 1000, n).astype(NP[dt])
    return rng.integers(1, 9, n).astype(NP[dt])     # small integers: float sums are exact


def np_final(kind, A, I, V, ok):
    out = A.copy()
    f = {"add": np.add, "max": np.maximum, "min": np.minimum, "and": np.bitwise_and,
         "or": np.bitwise_or, "xor": np.bitwise_xor}[kind]
    f.at(out, I[ok], V[ok])
    return out


def check_serialization(kind, A0, I, V, ok, old, final):
    """Per address: the old values are the running results of some order of its elements."""
    for a in np.unique(I[ok]):
        sel = np.flatnonzero(ok & (I == a))
        if kind == "add":
            seq = sorted(sel, key=lambda k: float(old[k]))   # positive increments: increasing
            cur = A0[a]
            for k in seq:
                assert old[k] == cur
                cur = cur + V[k]
            assert final[a] == cur
        elif kind == "xchg":
            got = sorted([float(old[k]) for k in sel] + [float(final[a])])
            assert got == sorted([float(A0[a])] + [float(V[k]) for k in sel])
        elif kind in ("max", "min"):
            for k in sel:
                assert old[k] == A0[a] or old[k] in V[sel]


CASES = [
    ("add", "i32", 256, 128), ("add", "u32", 512, 128), ("add", "i64", 256, 64),
    ("add", "u64", 128, 32), ("add", "f32", 256, 128), ("add", "f64", 128, 64),
    ("add", "f16", 256, 128), ("add", "bf16", 64, 32),
    ("max", "i32", 256, 128), ("max", "u32", 256, 256), ("max", "i64", 128, 64),
    ("min", "i32", 256, 128), ("min", "u64", 256, 128),
    ("and", "u32", 256, 128), ("or", "i64", 128, 64), ("xor", "i32", 512, 1024),
    ("xchg", "i32", 256, 128), ("xchg", "f32", 128, 64), ("xchg", "u64", 64, 32),
    ("add", "i32", 8, 128),       # a tile smaller than the block: each element once
    ("add", "i32", 1024, 48),     # a block that is not a power of two
    ("max", "i32", 64, 24),
]


@pytest.mark.parametrize("kind,dt,n,threads", CASES)
def test_atomic(kind, dt, n, threads):
    rng = rng_for(kind, dt, n, threads)
    size = 16
    A0 = values(kind, dt, size, rng)
    I = rng.integers(-3, size + 3, n).astype(np.int32)   # out of bounds on both sides
    I[: n // 4] = 7                                        # contention on one address
    V = values(kind, dt, n, rng)
    ok = (I >= 0) & (I < size) & (I != 5)
    k = atomic_kernel(kind, dt, n, threads)
    run = run_ops(k, [A0, I, V, np.zeros(n, NP[dt])], bf16=(0, 2, 3) if dt == "bf16" else ())
    (Ae, _, _, Oe), (Ar, _, _, Or) = run.emu, run.ref
    assert np.all(Oe[~ok] == 0) and np.all(Or[~ok] == 0)
    if dt in ("f16", "bf16"):       # a 16-bit compare-and-swap: never touches the neighbour
        assert re.search(r"atom\.acq_rel\.gpu\.global\.cas\.b16", run.result.ptx)
    if kind != "xchg":
        want = np_final(kind, A0, I, V, ok)
        np.testing.assert_array_equal(Ar, want)
        np.testing.assert_array_equal(Ae, want)
    untouched = np.setdiff1d(np.arange(size), I[ok])
    np.testing.assert_array_equal(Ae[untouched], A0[untouched])
    check_serialization(kind, A0, I, V, ok, Oe, Ae)
    check_serialization(kind, A0, I, V, ok, Or, Ar)


def test_integer_cas_one_winner_per_address():
    rng = rng_for("cas")
    n, size = 256, 8
    kb = KernelBuilder("cas", attributes={"reqntid": (128, 1, 1)})
    A = kb.param("A", ArrayType(I32, 1))
    I_ = kb.param("I", ArrayType(I32, 1))
    O = kb.param("O", ArrayType(I32, 1))
    idx = kb.op("load", I_, index=(0,), shape=(n,), padding=0)
    ticket = kb.op("+", kb.op("arange", n, I32), 1)
    kb.op("store", O, index=(0,), tile=kb.op("atomic_cas", A, idx, 0, ticket))
    k = kb.finish()
    I = rng.integers(0, size, n).astype(np.int32)
    run = run_ops(k, [np.zeros(size, np.int32), I, np.zeros(n, np.int32)])
    for A_, O_ in ((run.emu[0], run.emu[2]), (run.ref[0], run.ref[2])):
        for a in range(size):
            sel = np.flatnonzero(I == a)
            winner = A_[a]
            assert winner - 1 in sel                         # one of its own tickets
            assert np.sum(O_[sel] == 0) == 1 and O_[winner - 1] == 0
            assert np.all(O_[sel][O_[sel] != 0] == winner)   # the losers saw the winner


def test_float_cas_compares_as_floats():
    """expected -0.0 matches a stored 0.0; NaN never matches (the reference's ==)."""
    kb = KernelBuilder("fcas", attributes={"reqntid": (32, 1, 1)})
    A = kb.param("A", ArrayType(F32, 1))
    E = kb.param("E", ArrayType(F32, 1))
    O = kb.param("O", ArrayType(F32, 1))
    e = kb.op("load", E, index=(0,), shape=(4,), padding=0)
    kb.op("store", O, index=(0,), tile=kb.op("atomic_cas", A, kb.op("arange", 4, I32), e, 7.0))
    k = kb.finish()
    A0 = np.array([0.0, np.nan, 2.0, 3.0], np.float32)
    E0 = np.array([-0.0, np.nan, 2.0, 4.0], np.float32)
    run = run_ops(k, [A0, E0, np.zeros(4, np.float32)])
    for A_, O_ in ((run.emu[0], run.emu[2]), (run.ref[0], run.ref[2])):
        np.testing.assert_array_equal(A_, [7.0, np.nan, 7.0, 3.0])
        np.testing.assert_array_equal(O_, A0)


def test_scalar_atomic_once_per_block_and_broadcast():
    """`old = atomic_add(C, 0, 1)` in each of 6 blocks: C[0] = 6, and the old values (used by
    a tile op, so every thread needs them) are 0..5 in some order."""
    kb = KernelBuilder("ticket", attributes={"maxntid": (128, 1, 1)})
    C = kb.param("C", ArrayType(I32, 1))
    T = kb.param("T", ArrayType(I32, 1))
    old = kb.op("atomic_add", C, 0, 1)
    tile = kb.op("+", kb.op("zeros", (256,), I32), old)
    kb.op("store", T, index=(kb.op("bid", 0),), tile=tile)
    k = kb.finish()
    run = run_ops(k, [np.zeros(1, np.int32), np.zeros(6 * 256, np.int32)], (6, 1, 1))
    assert ".reqntid 128, 1, 1" in run.result.ptx       # the broadcast needs the threads
    for C_, T_ in ((run.emu[0], run.emu[1]), (run.ref[0], run.ref[1])):
        assert C_[0] == 6
        rows = T_.reshape(6, 256)
        assert np.all(rows == rows[:, :1])
        assert sorted(rows[:, 0].tolist()) == list(range(6))


def test_unused_results_stay_virtual():
    """A histogram whose old values are unused: no exchange, .maxntid kept, correct with a
    smaller launch block too (the scalar atomic is relaxed: a block-level acquire or release
    would need barriers)."""
    kb = KernelBuilder("hist", attributes={"maxntid": (256, 1, 1)})
    X = kb.param("X", ArrayType(I32, 1))
    H = kb.param("H", ArrayType(U32, 1))
    x = kb.op("load", X, index=(kb.op("bid", 0),), shape=(512,), padding=-1)
    kb.op("atomic_add", H, x, kb.op("ones", (512,), U32))
    kb.op("atomic_max", H, 16, kb.op("astype", kb.op("bid", 0), U32), sem="relaxed")
    k = kb.finish()
    rng = rng_for("hist")
    X = rng.integers(0, 16, 3 * 512 - 100).astype(np.int32)
    for block in (None, (64, 1, 1)):
        run = run_ops(k, [X, np.zeros(17, np.uint32)], (3, 1, 1), block=block)
        assert ".maxntid 256, 1, 1" in run.result.ptx and "bar.sync" not in run.result.ptx
        want = np.bincount(X, minlength=16).astype(np.uint32)
        for H_ in (run.emu[1], run.ref[1]):
            np.testing.assert_array_equal(H_[:16], want)
            assert H_[16] == 2


def test_two_dimensional_array_and_broadcast_indices():
    """atomic_add(A, (rows[:, None], cols[None, :]), 1) on a 2-D array with a row outside."""
    kb = KernelBuilder("grid2", attributes={"reqntid": (64, 1, 1)})
    A = kb.param("A", ArrayType(I64, 2))
    O = kb.param("O", ArrayType(I64, 2))
    r = kb.op("expand_dims", kb.op("-", kb.op("arange", 8, I32), 1), 1)     # -1..6, (8, 1)
    c = kb.op("expand_dims", kb.op("%", kb.op("arange", 16, I32), 4), 0)    # 0..3 x4, (1, 16)
    old = kb.op("atomic_add", A, (r, c), 1)
    kb.op("store", O, index=(0, 0), tile=old)
    k = kb.finish()
    run = run_ops(k, [np.zeros((6, 4), np.int64), np.zeros((8, 16), np.int64)])
    for A_, O_ in ((run.emu[0], run.emu[1]), (run.ref[0], run.ref[1])):
        np.testing.assert_array_equal(A_, np.full((6, 4), 4))
        assert np.all(O_[0] == 0) and np.all(O_[7] == 0)           # rows -1 and 6: outside
        for i in range(1, 7):
            for j in range(4):
                assert sorted(O_[i, j::4].tolist()) == [0, 1, 2, 3]


SOURCE = """
@launch(maxntid = (128, 1, 1))
kernel histogram(x: Array[i32, 1], h: Array[i32, 1], const BINS: i32 = 32) {
    let v = load(x, index = (bid(0),), shape = (1024,), padding = -1);
    atomic_add(h, v % BINS, ones((1024,), i32), mask = v >= 0);
}
"""


@pytest.mark.parametrize("target", ["sm_80", "sm_90a"])
def test_histogram_from_source(target):
    from gen_support import link, run_emulated
    res = compile_source(SOURCE, "<hist>.tile", CompileOptions(target=target), until="ptx")
    assert res.ok, res.diagnostics
    link(res.codegen)
    x = rng_for("src").integers(0, 1000, 3000).astype(np.int32)
    h = np.zeros(32, np.int32)
    run_emulated(res.codegen, "histogram", [x, h], (3, 1, 1))
    np.testing.assert_array_equal(h, np.bincount(x % 32, minlength=32))
