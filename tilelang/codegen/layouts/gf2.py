"""Linear maps over GF(2) on bit vectors: the algebra behind linear layouts.

A map from `n_in` input bits to `n_out` output bits is stored by its columns: column i is the
output (an integer bit vector) of input bit i alone, and the image of an input x is the XOR of
the columns of x's set bits. Layouts (distributed.py) map register/lane/warp bits to the bits of
a tile's row-major linear index; shared layouts (shared.py) map offset bits to it; the planner
(convert.py) composes, inverts and solves them.

Everything here is plain Python on integers (any width): elimination, `table` and `images`.
`apply_all` and `matrix` are NumPy views for tests and analyses; they import NumPy when
called, and the compiler never calls them (NumPy's import would be a third of a cold compile).
"""

from __future__ import annotations

from functools import cached_property

from tilelang.record import record


def popcount(x: int) -> int:
    return bin(x).count("1")


def bits_of(x: int) -> list[int]:
    """Positions of the set bits of x, lowest first."""
    out, i = [], 0
    while x:
        if x & 1:
            out.append(i)
        x >>= 1
        i += 1
    return out


@record(frozen=True)
class Echelon:
    """A reduced basis of the span of some vectors: `basis[i]` has its highest set bit at
    `pivots[i]`, a bit no other basis vector has; `combo[i]` says which input vectors XOR to
    it. `kernel` holds the combinations of input vectors that give 0."""
    basis: tuple[int, ...]
    pivots: tuple[int, ...]
    combo: tuple[int, ...]
    kernel: tuple[int, ...]

    @property
    def rank(self) -> int:
        return len(self.basis)

    def reduce(self, y: int) -> tuple[int, int]:
        """(remainder, combination): y XOR the combination's vectors = remainder, which has
        no pivot bit; y is in the span iff the remainder is 0."""
        x = 0
        for v, p, c in zip(self.basis, self.pivots, self.combo):
            if y >> p & 1:
                y ^= v
                x ^= c
        return y, x


def echelon(vectors) -> Echelon:
    """Gauss-Jordan elimination of the given bit vectors (Python integers: the matrices of
    layouts are a few dozen bits, where NumPy's per-call cost would dominate)."""
    basis: list[int] = []
    pivots: list[int] = []
    combo: list[int] = []
    kernel: list[int] = []
    for i, v in enumerate(vectors):
        v, c = int(v), 1 << i
        for b, p, k in zip(basis, pivots, combo):
            if v >> p & 1:
                v ^= b
                c ^= k
        if not v:
            kernel.append(c)
            continue
        p = v.bit_length() - 1
        for j, b in enumerate(basis):       # keep the basis fully reduced
            if b >> p & 1:
                basis[j] ^= v
                combo[j] ^= c
        basis.append(v)
        pivots.append(p)
        combo.append(c)
    return Echelon(tuple(basis), tuple(pivots), tuple(combo), tuple(kernel))


def rank(vectors) -> int:
    return echelon(vectors).rank


def in_span(vectors, y: int) -> bool:
    return echelon(vectors).reduce(y)[0] == 0


@record(frozen=True)
class LinearMap:
    """x (n_in bits) -> XOR of cols[i] over the set bits i of x (n_out bits)."""
    cols: tuple[int, ...]
    n_out: int

    def __post_init__(self):
        if any(c < 0 or c >> self.n_out for c in self.cols):
            raise ValueError(f"columns {self.cols} do not fit in {self.n_out} bits")

    @property
    def n_in(self) -> int:
        return len(self.cols)

    def __call__(self, x: int) -> int:
        y = 0
        for i, c in enumerate(self.cols):
            if x >> i & 1:
                y ^= c
        return y

    @cached_property
    def _bytes(self) -> tuple[tuple[list[int], int], ...]:
        """Per 8 input bits, the image of each of their values (and the mask selecting them):
        an image is the XOR of one entry per byte of the input."""
        out = []
        for k in range(0, len(self.cols), 8):
            tab = [0]
            for c in self.cols[k:k + 8]:
                tab += [y ^ c for y in tab]
            out.append((tab, len(tab) - 1))
        return tuple(out)

    def images(self, xs) -> list[int]:
        """The image of each of the integers `xs`; many go through per-byte tables (built
        once, at the cost of about 60 single images, then a third of one's cost each)."""
        xs = list(xs)
        if len(xs) < 64 and "_bytes" not in self.__dict__:
            return [self(x) for x in xs]
        parts = self._bytes
        if len(parts) == 1:
            tab, mask = parts[0]
            return [tab[x & mask] for x in xs]
        out = []
        for x in xs:
            y = 0
            for tab, mask in parts:
                y ^= tab[x & mask]
                x >>= 8
            out.append(y)
        return out

    def apply_all(self, xs):
        """The image of every entry of an integer NumPy array (vectorized, int64)."""
        import numpy as np
        xs = np.asarray(xs, dtype=np.int64)
        out = np.zeros(xs.shape, dtype=np.int64)
        for i, c in enumerate(self.cols):
            if c:
                out ^= ((xs >> i) & 1) * c
        return out

    def table(self) -> list[int]:
        """The image of every input 0 .. 2^n_in - 1 (each input bit doubles the table: the
        new half is the old one XOR that bit's column)."""
        out = [0]
        for c in self.cols:
            out += [y ^ c for y in out]
        return out

    @cached_property
    def _ech(self) -> Echelon:
        return echelon(self.cols)

    @property
    def rank(self) -> int:
        return self._ech.rank

    def is_injective(self) -> bool:
        return self.rank == self.n_in

    def is_surjective(self) -> bool:
        return self.rank == self.n_out

    def is_invertible(self) -> bool:
        return self.n_in == self.n_out and self.is_injective()

    def solve(self, y: int) -> int | None:
        """Some x with self(x) == y, or None when y is not in the image."""
        rem, x = self._ech.reduce(y)
        return x if rem == 0 else None

    def kernel(self) -> tuple[int, ...]:
        """A basis of the inputs that map to 0."""
        return self._ech.kernel

    def compose(self, inner: "LinearMap") -> "LinearMap":
        """self after inner: x -> self(inner(x))."""
        if inner.n_out != self.n_in:
            raise ValueError(f"cannot compose: {inner.n_out} output bits into {self.n_in} inputs")
        return LinearMap(tuple(self(c) for c in inner.cols), self.n_out)

    def inverse(self) -> "LinearMap":
        if not self.is_invertible():
            raise ValueError("the map is not invertible")
        return LinearMap(tuple(self.solve(1 << j) for j in range(self.n_out)), self.n_in)

    def right_inverse(self) -> "LinearMap":
        """A map g with self(g(y)) == y for every y (needs a surjective map): for a layout,
        one (register, thread) that holds each element."""
        if not self.is_surjective():
            raise ValueError("the map is not surjective")
        return LinearMap(tuple(self.solve(1 << j) for j in range(self.n_out)), self.n_in)

    def restrict(self, mask: int) -> "LinearMap":
        """The map on the input bits of `mask` only (in order)."""
        return LinearMap(tuple(c for i, c in enumerate(self.cols) if mask >> i & 1), self.n_out)

    def sources(self, out_mask: int) -> int:
        """The input bits whose column touches some bit of out_mask."""
        m = 0
        for i, c in enumerate(self.cols):
            if c & out_mask:
                m |= 1 << i
        return m

    def matrix(self):
        """[n_out, n_in] 0/1 NumPy matrix (row j = output bit j)."""
        import numpy as np
        m = np.zeros((self.n_out, self.n_in), dtype=np.uint8)
        for i, c in enumerate(self.cols):
            for j in bits_of(c):
                m[j, i] = 1
        return m


def identity(n: int) -> LinearMap:
    return LinearMap(tuple(1 << i for i in range(n)), n)


def random_invertible(n: int, rng) -> LinearMap:
    """A uniformly random invertible n x n matrix drawn with a NumPy Generator (rejection:
    about 29% of random matrices are invertible for any n, so this takes a few tries)."""
    while True:
        cols = tuple(int(rng.integers(0, 1 << n)) if n else 0 for _ in range(n))
        m = LinearMap(cols, n)
        if m.is_invertible():
            return m


def avoiding_vector(n: int, spans: list[Echelon], prefer: list[int]) -> int | None:
    """A vector of n bits outside every given span (each a proper subspace, at most two of
    them guaranteed to work: GF(2)^n is never the union of two proper subspaces). Tries the
    preferred vectors first, then combines one outside the first span with one outside the
    second."""
    def outside(v, e):
        return e.reduce(v)[0] != 0

    for v in prefer:
        if all(outside(v, e) for e in spans):
            return v
    units = [1 << i for i in range(n)]
    if len(spans) == 1:
        return next((v for v in units if outside(v, spans[0])), None)
    if len(spans) == 2:
        a = next((v for v in units if outside(v, spans[0])), None)
        b = next((v for v in units if outside(v, spans[1])), None)
        if a is None or b is None:
            return None
        for v in (a, b, a ^ b):
            if all(outside(v, e) for e in spans):
                return v
    return None
