"""Distributed layouts: which thread holds which element of a tile, in which register.

Every tile dimension is a power of two, so an element coordinate is a bit vector, and so is
its row-major linear index (the coordinates' bits side by side). A layout is a *linear map
over GF(2)* (Triton's linear layouts, arXiv 2505.23819) from the bits of (register index,
lane, warp) to coordinate bits: each input bit has a *basis*, the coordinate it contributes
(`(0, 4)`: bit 2 of axis 1; `(1, 4)`: bits of two axes; zero: the bit replicates, threads that
differ only there hold the same elements), and the coordinate of (register r, lane l, warp w)
is the XOR of the bases of the set bits of r, l, w. The linear index of an XOR of coordinates
is the XOR of their linear indices, so `matrix` views the layout as a `gf2.LinearMap` onto
linear-index bits, which is what composition, inversion and the conversion planner
(convert.py) work on.

Most layouts are *one-hot*: every basis is one coordinate bit or zero and no two nonzero bases
are equal, so XOR is the same as addition and an address is a sum (tensor-core fragments are
one-hot too). XOR layouts (swizzles) need XOR in emitted index arithmetic: the kernel's
`thread_linear` XORs overlapping parts, and paths that add register offsets to a thread's base
coordinate (global loads/stores) assert `is_one_hot`.

- A *blocked* layout (`blocked`) gives each thread a vector of 16 bytes along the last axis
  (4 x f32, 8 x f16), then spreads lanes and warps over the axes from the last one outwards so
  that a warp's accesses are consecutive (coalesced); what is left of the tile repeats in more
  registers, and threads left over replicate.
- A *sliced* layout (`slice_axes`) is what a reduction leaves: the reduced axes' register bits
  are gone (combined) and their lane/warp bits replicate.
- reshape, permute/transpose and expand_dims are relabellings of coordinate bits: free.
- `register_map` finds, for a wanted per-thread coordinate table, the source register holding
  each wanted element in the same thread, if there is one for every thread (no data movement:
  broadcasting a reduced value, a free conversion). Otherwise the conversion planner
  (convert.py) picks shuffles or a shared-memory round trip (emit/sync.py emits them).

The tables here are plain Python (`rows`, `reg_linears`); `table`, `reg_table` and
`broadcast_table` are NumPy views of them for tests and analyses, which import NumPy when
called: the compiler never does. Nothing in this module emits code.
"""

from __future__ import annotations

from functools import cached_property

from tilelang.codegen.layouts.gf2 import LinearMap, popcount
from tilelang.record import record

Basis = tuple[int, ...]
WARP = 32


def log2(n: int) -> int:
    if n < 1 or n & (n - 1):
        raise ValueError(f"{n} is not a power of two")
    return n.bit_length() - 1


def floor_pow2(n: int) -> int:
    return 1 << (max(n, 1).bit_length() - 1)


@record(frozen=True)
class Layout:
    shape: tuple[int, ...]
    reg: tuple[Basis, ...]      # one basis per register-index bit
    lane: tuple[Basis, ...]     # one per lane bit (log2 of the lanes used, at most 5)
    warp: tuple[Basis, ...]     # one per warp bit

    # ------------------------------------------------------------------ sizes
    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def num_regs(self) -> int:
        return 1 << len(self.reg)

    @property
    def threads(self) -> int:
        return 1 << (len(self.lane) + len(self.warp))

    @property
    def thread_bases(self) -> tuple[Basis, ...]:
        """Bases of the thread-index bits: lanes first, then warps (tid = warp * 32 + lane)."""
        return self.lane + self.warp

    # ------------------------------------------------------------------ coordinates
    def linear(self, coord: Basis) -> int:
        """Row-major linear index of a coordinate in this layout's shape."""
        return linear_index(self.shape, coord)

    def reg_coord(self, r: int) -> Basis:
        return _combine(self.reg, r, self.rank)

    def thread_coord(self, t: int) -> Basis:
        return _combine(self.thread_bases, t, self.rank)

    def reg_linear(self, r: int) -> int:
        return self.reg_linears[r]

    @cached_property
    def reg_linears(self) -> tuple[int, ...]:
        """The linear index each register holds in thread 0."""
        return tuple(LinearMap(tuple(self.linear(b) for b in self.reg), self.n_bits).table())

    @property
    def reg_table(self):
        """`reg_linears` as a NumPy int64 array."""
        import numpy as np
        return np.array(self.reg_linears, dtype=np.int64)

    def thread_weights(self) -> tuple[int, ...]:
        """Linear-index weight of each thread-index bit (0 for replicating bits); a thread's
        part of the linear index is the XOR of the weights of its set bits."""
        return tuple(self.linear(b) for b in self.thread_bases)

    @cached_property
    def thread_linears(self) -> tuple[int, ...]:
        """Each thread's part of the linear indices it holds (what register 0 holds)."""
        return tuple(LinearMap(self.thread_weights(), self.n_bits).table())

    def rows(self) -> list[list[int]]:
        """[threads][regs]: the row-major linear index each register of each thread holds."""
        regs = self.reg_linears
        return [[t ^ r for r in regs] for t in self.thread_linears]

    @property
    def table(self):
        """`rows` as a NumPy [threads, regs] int64 array."""
        import numpy as np
        return np.array(self.rows(), dtype=np.int64).reshape(self.threads, self.num_regs)

    # ------------------------------------------------------------------ the GF(2) view
    @property
    def n_bits(self) -> int:
        """Bits of the linear index (log2 of the element count)."""
        return sum(log2(s) for s in self.shape)

    @property
    def bases(self) -> tuple[Basis, ...]:
        """All input bases in matrix order: registers, lanes, warps."""
        return self.reg + self.lane + self.warp

    @cached_property
    def matrix(self) -> LinearMap:
        """The layout as a map from input bits (register bits, then lane bits, then warp bits)
        to linear-index bits."""
        return LinearMap(tuple(self.linear(b) for b in self.bases), self.n_bits)

    def split_input(self, x: int) -> tuple[int, int]:
        """(register index, thread index) of a matrix input."""
        nr = len(self.reg)
        return x & ((1 << nr) - 1), x >> nr

    def holder(self, idx: int) -> tuple[int, int] | None:
        """One (register, thread) that holds linear index idx, or None."""
        x = self.matrix.solve(idx)
        return None if x is None else self.split_input(x)

    def is_one_hot(self) -> bool:
        """Every basis is one coordinate bit or zero, and no two nonzero bases are equal: the
        case where XOR of bases is their sum."""
        cols = [c for c in self.matrix.cols if c]
        return all(popcount(c) == 1 for c in cols) and len(set(cols)) == len(cols)

    def is_injective(self) -> bool:
        """No two (register, thread) inputs hold the same element (no replication)."""
        return self.matrix.is_injective()

    def is_surjective(self) -> bool:
        return self.matrix.is_surjective()

    def is_invertible(self) -> bool:
        return self.matrix.is_invertible()

    def compose(self, inner: LinearMap) -> LinearMap:
        """This layout after a map into its input bits (e.g. a permutation of registers)."""
        return self.matrix.compose(inner)

    def inverse(self) -> LinearMap:
        """Linear index bits -> input bits, for an invertible layout."""
        return self.matrix.inverse()

    # ------------------------------------------------------------------ ownership
    def replicated_thread_mask(self) -> int:
        """Thread-index bits whose basis is zero: a thread owns its elements (stores them)
        only when these bits are 0."""
        m = 0
        for b, basis in enumerate(self.thread_bases):
            if not any(basis):
                m |= 1 << b
        return m

    def owned_regs(self) -> list[int]:
        """Registers that are not copies of a lower register of the same thread (in a
        one-hot layout: the registers with no zero-basis bit set)."""
        seen, out = set(), []
        for r in range(self.num_regs):
            v = self.reg_linear(r)
            if v not in seen:
                seen.add(v)
                out.append(r)
        return out

    def is_valid(self) -> bool:
        """Every element is held somewhere, and the nonzero bases are linearly independent (so
        the zero bases are exactly the replicating bits: what `owned_regs` and
        `replicated_thread_mask` assume)."""
        if not self.matrix.is_surjective():
            return False
        nonzero = [c for c in self.matrix.cols if c]
        return LinearMap(tuple(nonzero), self.n_bits).is_injective()


def _combine(bases: tuple[Basis, ...], bits: int, rank: int) -> Basis:
    """XOR of the bases of the set bits (for one-hot bases, their sum)."""
    out = [0] * rank
    for i, b in enumerate(bases):
        if bits >> i & 1:
            for d in range(rank):
                out[d] ^= b[d]
    return tuple(out)


def linear_index(shape: tuple[int, ...], coord: Basis) -> int:
    idx = 0
    for s, c in zip(shape, coord):
        idx = idx * s + c
    return idx


def from_columns(shape: tuple[int, ...], reg, lane, warp) -> Layout:
    """A layout from linear-index bit vectors per input bit (the inverse of `matrix`)."""
    def c(cols):
        return tuple(unlinear(shape, int(v)) for v in cols)
    return Layout(tuple(shape), c(reg), c(lane), c(warp))


def _unit(rank: int, axis: int, value: int) -> Basis:
    return tuple(value if d == axis else 0 for d in range(rank))


def thread_bits(threads: int) -> tuple[int, int]:
    """(lane bits, warp bits) of a power-of-two thread count."""
    t = log2(threads)
    return min(t, 5), max(t - 5, 0)


# ---------------------------------------------------------------------------------------------
# Layout constructors

def scalar_layout(threads: int) -> Layout:
    """A 0-d tile: one register, every thread holds it."""
    nl, nw = thread_bits(threads)
    return Layout((), (), ((),) * nl, ((),) * nw)


def blocked(shape: tuple[int, ...], itemsize: int, threads: int,
            vector_bytes: int = 16, fast_axis: int | None = None) -> Layout:
    """The default layout of a tile (see the module docstring). `fast_axis` (default: the
    last) is the axis that holds the per-thread vectors and gets the lanes first: the axis that
    is contiguous in memory."""
    rank = len(shape)
    if rank == 0:
        return scalar_layout(threads)
    fast = rank - 1 if fast_axis is None else fast_axis
    nl, nw = thread_bits(threads)
    # Bits still to place, per axis, from the lowest coordinate bit up.
    next_bit = [0] * rank
    sizes = [log2(s) for s in shape]

    def take(axis_order, count):
        out = []
        for d in axis_order:
            while count and next_bit[d] < sizes[d]:
                out.append(_unit(rank, d, 1 << next_bit[d]))
                next_bit[d] += 1
                count -= 1
        return out, count

    inner = [fast] + [d for d in range(rank - 1, -1, -1) if d != fast]
    vec = min(max(vector_bytes // max(itemsize, 1), 1), shape[fast])
    reg, _ = take([fast], log2(vec))
    lane, left = take(inner, nl)
    lane += [(0,) * rank] * left
    warp, left = take(inner, nw)
    warp += [(0,) * rank] * left
    rest, _ = take(inner, sum(sizes))
    return Layout(tuple(shape), tuple(reg + rest), tuple(lane), tuple(warp))


def vector_width(layout: Layout, axis: int | None = None) -> int:
    """How many consecutive registers, from register 0, hold consecutive elements of `axis`
    (default: the last) — the width of one vector access."""
    if not layout.rank:
        return 1
    axis = layout.rank - 1 if axis is None else axis
    n = 0
    for b in layout.reg:
        if b == _unit(layout.rank, axis, 1 << n):
            n += 1
        else:
            break
    return 1 << n


# ---------------------------------------------------------------------------------------------
# Relabellings (no data movement)

def permute(layout: Layout, dims: tuple[int, ...]) -> Layout:
    """Result axis i is the source axis dims[i]."""
    def p(b: Basis) -> Basis:
        return tuple(b[d] for d in dims)
    return Layout(tuple(layout.shape[d] for d in dims), tuple(map(p, layout.reg)),
                  tuple(map(p, layout.lane)), tuple(map(p, layout.warp)))


def expand_dims(layout: Layout, axis: int) -> Layout:
    def e(b: Basis) -> Basis:
        return b[:axis] + (0,) + b[axis:]
    return Layout(layout.shape[:axis] + (1,) + layout.shape[axis:], tuple(map(e, layout.reg)),
                  tuple(map(e, layout.lane)), tuple(map(e, layout.warp)))


def reshape(layout: Layout, shape: tuple[int, ...]) -> Layout:
    """The same elements in row-major order: each one-hot basis is a bit of the linear index,
    which is a bit of some coordinate of the new shape."""
    def r(b: Basis) -> Basis:
        return unlinear(shape, layout.linear(b))
    return Layout(tuple(shape), tuple(map(r, layout.reg)), tuple(map(r, layout.lane)),
                  tuple(map(r, layout.warp)))


def unlinear(shape: tuple[int, ...], idx: int) -> Basis:
    out = []
    for s in reversed(shape):
        out.append(idx % s)
        idx //= s
    return tuple(reversed(out))


def drop_axes(layout: Layout, axes: tuple[int, ...], keepdims: bool) -> Layout:
    """The layout after reducing `axes`: register bits along them are removed (their registers
    are combined); lane/warp bits along them replicate (every thread ends with the total)."""
    keep = [d for d in range(layout.rank) if d not in axes]

    def along(b: Basis) -> bool:
        return any(b[d] for d in axes)

    # A basis mixing reduced and kept axes (an XOR layout) has no sliced counterpart.
    assert all(not along(b) or not any(b[d] for d in keep) for b in layout.bases), \
        f"drop_axes{axes}: a basis mixes reduced and kept axes in {layout}"

    def cut(b: Basis) -> Basis:
        if keepdims:
            return tuple(0 if d in axes else b[d] for d in range(layout.rank))
        return tuple(b[d] for d in keep)

    shape = tuple(1 if d in axes else s for d, s in enumerate(layout.shape)) if keepdims \
        else tuple(layout.shape[d] for d in keep)
    reg = tuple(cut(b) for b in layout.reg if not along(b))
    zero = (0,) * len(shape)
    lane = tuple(zero if along(b) else cut(b) for b in layout.lane)
    warp = tuple(zero if along(b) else cut(b) for b in layout.warp)
    return Layout(shape, reg, lane, warp)


# ---------------------------------------------------------------------------------------------
# What a consumer needs from a producer

def broadcast_table(dst: Layout, src_shape: tuple[int, ...]):
    """[threads, regs of dst] NumPy array of the linear indices into a tile of `src_shape`
    that broadcasts (NumPy rules: right-aligned, size-1 axes stretch) to dst.shape: the source
    element each register of each thread of `dst` needs."""
    import numpy as np
    t = np.arange(dst.threads, dtype=np.int64)
    thr = np.zeros(dst.threads, dtype=np.int64)
    for b, w in enumerate(thread_part(dst, src_shape)):
        thr += ((t >> b) & 1) * w
    return thr[:, None] + np.array(reg_part(dst, src_shape), dtype=np.int64)[None, :]


def register_map(src: Layout, need) -> list[int] | None:
    """For each column (register) of `need` ([threads][k] linear indices into src.shape, lists
    or a NumPy array), the lowest source register that holds that element in the same thread
    for every thread, or None when some element must come from another thread. (A need that
    is itself linear is answered faster by `convert.rename_map`.)"""
    rows = need.tolist() if hasattr(need, "tolist") else need
    if len(rows) != src.threads:
        return None
    first: dict[tuple[int, ...], int] = {}
    for r, col in enumerate(zip(*src.rows())):
        first.setdefault(col, r)
    out = [first.get(col) for col in zip(*rows)]
    return None if None in out else out


def thread_part(dst: Layout, src_shape: tuple[int, ...]) -> tuple[int, ...]:
    """Weight of each thread bit of `dst` in the linear index of the broadcast source (the
    run-time part of a `broadcast_table` row; 0 for stretched axes)."""
    off = dst.rank - len(src_shape)
    out = []
    for b in dst.thread_bases:
        c = tuple(0 if s == 1 else b[i + off] for i, s in enumerate(src_shape))
        out.append(linear_index(src_shape, c))
    return tuple(out)


def reg_part(dst: Layout, src_shape: tuple[int, ...]) -> list[int]:
    """The compile-time part of a `broadcast_table` row, per register of dst (linear in the
    register index: the XOR of its bits' parts)."""
    off = dst.rank - len(src_shape)
    cols = []
    for rc in dst.reg:
        c = tuple(0 if s == 1 else rc[i + off] for i, s in enumerate(src_shape))
        cols.append(linear_index(src_shape, c))
    n = sum(log2(s) for s in src_shape)
    return LinearMap(tuple(cols), n).table()
