"""Linear layouts over GF(2): the elimination (rank, solve, kernel, inverse) against brute
force, XOR layouts computing the coordinates worked out by hand, and one-hot layouts keeping
the additive meaning they had (tables equal to sums of bases)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from layout_support import KINDS, random_layout
from tilelang.codegen.layouts import distributed as L
from tilelang.codegen.layouts.gf2 import (LinearMap, avoiding_vector, echelon, identity,
                                          random_invertible)


def brute_image(m: LinearMap) -> dict[int, list[int]]:
    img: dict[int, list[int]] = {}
    for x in range(1 << m.n_in):
        img.setdefault(m(x), []).append(x)
    return img


@pytest.mark.parametrize("seed", range(40))
def test_elimination_matches_brute_force(seed):
    rng = np.random.default_rng(seed)
    n_in, n_out = int(rng.integers(0, 8)), int(rng.integers(1, 8))
    m = LinearMap(tuple(int(rng.integers(0, 1 << n_out)) for _ in range(n_in)), n_out)
    img = brute_image(m)
    assert m.rank == len(img).bit_length() - 1            # |image| = 2^rank
    assert m.is_injective() == (len(img) == 1 << n_in)
    assert m.is_surjective() == (len(img) == 1 << n_out)
    for y in range(1 << n_out):
        x = m.solve(y)
        assert (x is None) == (y not in img)
        if x is not None:
            assert m(x) == y
    kern = m.kernel()
    assert len(kern) == n_in - m.rank
    assert all(m(k) == 0 for k in kern)
    assert LinearMap(kern, max(n_in, 1)).is_injective()    # a basis, not just members
    # the table and the 0/1 matrix agree with the map
    assert m.table() == [m(x) for x in range(1 << n_in)]
    mat = m.matrix()
    for x in range(1 << n_in):
        bits = np.array([x >> i & 1 for i in range(n_in)], np.uint8)
        y = (mat.astype(int) @ bits) % 2
        assert sum(int(b) << j for j, b in enumerate(y)) == m(x)


@pytest.mark.parametrize("n", [1, 3, 6, 9])
def test_inverse_and_composition(n):
    rng = np.random.default_rng(n)
    a, b = random_invertible(n, rng), random_invertible(n, rng)
    assert a.compose(a.inverse()) == identity(n) == a.inverse().compose(a)
    ab = a.compose(b)
    assert all(ab(x) == a(b(x)) for x in range(1 << n))
    assert ab.inverse() == b.inverse().compose(a.inverse())
    with pytest.raises(ValueError, match="not invertible"):
        LinearMap((1, 2, 3), 2).inverse()
    with pytest.raises(ValueError, match="cannot compose"):
        a.compose(LinearMap((1,), n + 1))


def test_right_inverse_and_sources():
    m = LinearMap((1, 2, 3, 4), 3)           # bits 0, 1 and their XOR, bit 2
    g = m.right_inverse()
    assert all(m(g(y)) == y for y in range(8))
    assert m.sources(0b001) == 0b0101 and m.sources(0b100) == 0b1000
    assert m.restrict(0b1010).cols == (2, 4)


@pytest.mark.parametrize("seed", range(30))
def test_avoiding_vector_outside_two_subspaces(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 9))
    spans = []
    for _ in range(2):
        d = int(rng.integers(0, n))
        spans.append(echelon([int(rng.integers(0, 1 << n)) for _ in range(d)]))
    v = avoiding_vector(n, spans, [])
    # GF(2)^n is never the union of two proper subspaces
    assert v is not None and all(e.reduce(v)[0] for e in spans)


def test_xor_layout_coordinates_by_hand():
    # (4, 8) tile over 8 threads: register bit 1 holds row 1 XOR column 1
    lay = L.Layout((4, 8), ((0, 1), (1, 1)), ((0, 2), (0, 4), (2, 0)), ())
    assert not lay.is_one_hot() and lay.is_valid() and lay.is_invertible()
    assert lay.reg_coord(3) == (1, 0)                      # (0,1) ^ (1,1)
    assert lay.thread_coord(5) == (2, 2)                   # (0,2) ^ (2,0)
    assert lay.table[1, 3] == 1 * 8 + 2                    # (1,0) ^ (0,2)
    assert lay.table[7, 2] == (1 * 8 + 1) ^ (2 * 8 + 6)    # (1,1) ^ (2,6) = (3,7)
    assert lay.table[7, 2] == 3 * 8 + 7
    assert sorted(lay.table.reshape(-1).tolist()) == list(range(32))
    assert lay.holder(3 * 8 + 7) == (2, 7)
    inv = lay.inverse()
    assert all(lay.matrix(inv(y)) == y for y in range(32))
    # a reduction cannot slice a basis that mixes the reduced axis with a kept one
    with pytest.raises(AssertionError, match="mixes reduced and kept axes"):
        L.drop_axes(lay, (0,), keepdims=True)


@pytest.mark.parametrize("shape,item,threads", [((64, 64), 4, 128), ((8, 256), 2, 256),
                                                ((4, 8, 16), 4, 64), ((1024,), 8, 32)])
def test_one_hot_tables_are_sums(shape, item, threads):
    """The XOR table of a one-hot layout equals the additive one it replaced."""
    for lay in (L.blocked(shape, item, threads),
                L.drop_axes(L.blocked(shape, item, threads), (0,), keepdims=True)):
        assert lay.is_one_hot() and lay.is_valid()
        regs = np.array([L.linear_index(lay.shape, lay.reg_coord(r))
                         for r in range(lay.num_regs)])
        thr = np.zeros(lay.threads, np.int64)
        for b, w in enumerate(lay.thread_weights()):
            thr += ((np.arange(lay.threads) >> b) & 1) * w
        assert (lay.table == thr[:, None] + regs[None, :]).all()


def test_owned_registers_and_replication():
    lay = L.Layout((8,), ((1,), (0,), (2,)), ((4,), (0,)), ())
    assert lay.owned_regs() == [0, 1, 4, 5]                 # register bit 1 copies
    assert lay.replicated_thread_mask() == 0b10
    assert lay.is_valid() and not lay.is_injective() and lay.is_surjective()
    # XOR-dependent register bases: register 3 holds what register 0 holds
    dup = L.Layout((4,), ((1,), (2,), (3,)), (), ())
    assert dup.owned_regs() == [0, 1, 2, 3] and not dup.is_valid()
    same = L.Layout((4,), ((1,), (1,)), ((2,),), ())
    assert same.owned_regs() == [0, 1] and not same.is_one_hot()


@pytest.mark.parametrize("kind", KINDS)
def test_random_layouts_cover_the_tile(kind):
    rng = np.random.default_rng(7)
    for shape, threads in itertools.product([(16, 32), (8, 4, 16), (64,)], [32, 128]):
        if kind == "mma" and len(shape) != 2:
            continue
        lay = random_layout(shape, threads, rng, kind)
        assert lay.is_valid(), (kind, lay)
        assert lay.matrix == LinearMap(tuple(lay.linear(b) for b in lay.bases), lay.n_bits)
        # relabellings keep the elements where they were
        assert (L.reshape(lay, (int(np.prod(shape)),)).table == lay.table).all()
        assert (L.expand_dims(lay, 0).table == lay.table).all()
