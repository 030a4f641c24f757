"""Helpers for the layout tests (no tests here): random linear layouts of every family, and a
NumPy simulation of a conversion plan that moves values the way the emitted code does
(registers per thread -> shuffles / shared-memory writes and reads -> registers per thread),
written from the plan's documented meaning, not from the emitter."""

from __future__ import annotations

import numpy as np

from tilelang.codegen.layouts import convert as C
from tilelang.codegen.layouts import distributed as L
from tilelang.codegen.layouts.gf2 import LinearMap, random_invertible

KINDS = ("invertible", "replicated", "one_hot", "swizzled", "blocked", "mma")


def split(cols, nr, nl):
    return cols[:nr], cols[nr:nr + nl], cols[nr + nl:]


def random_layout(shape, threads: int, rng: np.random.Generator, kind: str,
                  itemsize: int = 4) -> L.Layout:
    """A random layout of `shape` over `threads` threads that covers every element."""
    n = sum(L.log2(s) for s in shape)
    nl, nw = L.thread_bits(threads)
    if kind == "blocked":
        fast = int(rng.integers(0, len(shape))) if shape else None
        return L.blocked(tuple(shape), itemsize, threads, fast_axis=fast)
    if kind == "mma":
        return mma_accumulator(tuple(shape), threads)
    zero = 0
    if kind in ("replicated", "swizzled") and nl + nw:
        # some thread bits replicate; registers make up for them
        k = int(rng.integers(0, min(nl + nw, n) + 1)) if n else nl + nw
        zero = sum(1 << int(b) for b in rng.choice(nl + nw, size=k, replace=False))
    nthr = nl + nw - bin(zero).count("1")
    if nthr > n:
        # more threads than elements: the extra thread bits replicate
        extra = [b for b in range(nl + nw) if not zero >> b & 1][:nthr - n]
        for b in extra:
            zero |= 1 << b
        nthr = n
    nr = n - nthr
    if kind in ("one_hot", "swizzled"):
        perm = rng.permutation(n)
        m = LinearMap(tuple(1 << int(p) for p in perm), n)
    else:
        m = random_invertible(n, rng)
    cols = list(m.cols)
    thread_cols, k = [], nr
    for b in range(nl + nw):
        if zero >> b & 1:
            thread_cols.append(0)
        else:
            thread_cols.append(cols[k])
            k += 1
    reg = cols[:nr]
    if kind == "swizzled" and n >= 4:
        # an XOR swizzle of the linear index on top of a one-hot layout
        bits = int(rng.integers(1, n // 2 + 1))
        base = int(rng.integers(0, n - 2 * bits + 1))
        shift = int(rng.integers(bits, n - base - bits + 1))
        from tilelang.codegen.layouts.shared import xor_swizzle
        sw = xor_swizzle(tuple(shape), bits, base, shift).map
        reg = [sw(c) for c in reg]
        thread_cols = [sw(c) for c in thread_cols]
    return L.from_columns(tuple(shape), reg, thread_cols[:nl], thread_cols[nl:])


def shuffled_lanes(lay: L.Layout, rng: np.random.Generator) -> L.Layout:
    """A layout holding what `lay` holds, moved between the lanes of each warp: lane bases
    are an invertible mix of lay's lane bases, and register and warp bases pick up lane
    bases (a shuffle conversion exists, a renaming does not)."""
    nr, nl = len(lay.reg), len(lay.lane)
    cols = lay.matrix.cols
    lanes = cols[nr:nr + nl]
    mix = random_invertible(nl, rng)

    def combo(x):
        v = 0
        for i, c in enumerate(lanes):
            if x >> i & 1:
                v ^= c
        return v
    new_lanes = [combo(mix(1 << j)) for j in range(nl)]
    reg = [c ^ combo(int(rng.integers(0, 1 << nl))) for c in cols[:nr]]
    warp = [c ^ combo(int(rng.integers(0, 1 << nl))) for c in cols[nr + nl:]]
    return L.from_columns(lay.shape, reg, new_lanes, warp)


def mma_accumulator(shape, threads: int) -> L.Layout:
    """The m16n8 accumulator fragment (c0..c3: column 2t + i%2, row g + 8 (i/2)), repeated
    over the tile by registers, warps along rows first: the one-hot layout helper F's
    tensor-core path gives a block tile."""
    M, N = shape
    rank = 2
    reg = [(0, 1), (8, 0)]
    lane = [(0, 2), (0, 4), (1, 0), (2, 0), (4, 0)]
    nl, nw = L.thread_bits(threads)
    assert nl == 5 and M >= 16 * 1 and N >= 8
    warp = []
    m = 16
    for _ in range(nw):
        if m < M:
            warp.append((m, 0))
            m *= 2
        else:
            warp.append((0, 0))
    n_ = 8
    while n_ < N:
        reg.append((0, n_))
        n_ *= 2
    while m < M:
        reg.append((m, 0))
        m *= 2
    del rank
    return L.Layout(tuple(shape), tuple(reg), tuple(lane), tuple(warp))


def simulate(src: L.Layout, need: C.Need, p, values: np.ndarray) -> np.ndarray:
    """The destination registers [threads, len(need.regs)] after plan p moves `values`
    ([threads, src registers]). Raises AssertionError where the plan would clobber shared
    memory, read something never written, or access a misaligned vector."""
    threads = src.threads
    t = np.arange(threads)
    if isinstance(p, C.Same):
        return values.copy()
    if isinstance(p, C.Rename):
        return values[:, list(p.regs)]
    if isinstance(p, C.Shuffle):
        lane_of = LinearMap(p.lane, 64).apply_all(t)
        out = np.empty((threads, len(p.steps)), values.dtype)
        for i, (r, c) in enumerate(p.steps):
            lanes = lane_of ^ c
            assert (lanes < min(threads, 32)).all()
            out[:, i] = values[(t & ~31) | lanes, r]
        return out
    assert isinstance(p, C.SharedTrip)
    inv = p.shared.inverse
    smem = np.full(p.shared.size, -1, np.int64)
    wbase = LinearMap(tuple(inv(w) for w in src.thread_weights()), 64).apply_all(t)
    starts = np.array(p.write_regs, np.int64)
    off = wbase[:, None] ^ inv.apply_all(src.reg_table[starts])[None, :]
    assert (off % p.write_vec == 0).all(), "misaligned vector store"
    pos = np.concatenate([(off + i).reshape(-1) for i in range(p.write_vec)])
    val = np.concatenate([values[:, starts + i].reshape(-1) for i in range(p.write_vec)])
    order = np.argsort(pos, kind="stable")
    pos, val = pos[order], val[order]
    dup = pos[1:] == pos[:-1]
    assert (val[1:][dup] == val[:-1][dup]).all(), "a store clobbers another element"
    smem[pos] = val
    rbase = LinearMap(tuple(inv(w) for w in need.thread), 64).apply_all(t)
    firsts = np.arange(0, len(need.regs), p.read_vec)
    off = rbase[:, None] ^ inv.apply_all(np.array(need.regs, np.int64)[firsts])[None, :]
    assert (off % p.read_vec == 0).all(), "misaligned vector load"
    out = np.empty((threads, len(need.regs)), np.int64)
    for i in range(p.read_vec):
        got = smem[off + i]
        assert (got >= 0).all(), "a load reads an element nobody wrote"
        out[:, firsts + i] = got
    return out
