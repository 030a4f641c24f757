"""Shared-memory layouts (where each element of a tile lives in a shared buffer) and the bank
model that judges an access pattern.

A `SharedLayout` is a linear map over GF(2) from the bits of an element *offset* (in elements
from the buffer's start) to the bits of the tile's row-major linear index; it is invertible, so
`offset_of` is its inverse. The identity is a plain row-major buffer. XOR swizzles move the
16-byte vectors of a row to different banks depending on the row:

- `swizzle(shape, itemsize, vec, per_phase, max_phase)`: the `ldmatrix` / `mma.sync` style
  (the parameters Triton's shared encodings use): in a row-major 2-d tile, the vector index
  `col // vec` of row `row` is XORed with `(row // per_phase) % max_phase`;
- `ldmatrix_swizzle(shape, itemsize)` picks those parameters for an operand tile read by
  `ldmatrix` and written in 16-byte chunks;
- `tma_swizzle(shape, itemsize, span)`: the 32/64/128-byte modes of Hopper's TMA and wgmma:
  within every `span` bytes, the 16-byte chunk index (address bits 4 up) is XORed with address
  bits 7 up (CUTLASS's Swizzle<B, 4, 3>);
- `wgmma_image(shape, itemsize, span)`: the operand image `wgmma` descriptors and TMA use
  with a 128-, 64- or 32-byte swizzle: the contiguous (last) axis cut into panels of `span`
  bytes, each panel all rows x span bytes, address bits 4.. XOR bits 7.. (with 128: the
  16-byte chunk c of row r at c ^ (r mod 8); lower/tensorcore/wgmma_ops.py);
- `xor_swizzle(shape, bits, base, shift)` is the common form: offset bits [base, base + bits)
  XOR linear-index bits [base + shift, base + shift + bits).

Banks: shared memory has 32 banks of 4-byte words. A warp's request is served in *phases* of
128 bytes of accesses: 32 lanes of 1..4-byte accesses, 16 lanes of 8 bytes, 8 lanes of 16 bytes
(an `ldmatrix` serves its 8 row addresses per matrix the same way). A phase takes as many
wavefronts as the most distinct words any one bank holds among its lanes' accesses (lanes that
read the same word share it). `wavefronts` counts them; the ideal is one per phase in use.

All of it is plain Python on lists (NumPy arrays are accepted where addresses are taken);
`SharedLayout.offsets` is a NumPy view for tests and imports NumPy when called.
"""

from __future__ import annotations

from functools import cached_property

from tilelang.codegen.layouts.distributed import Layout, log2
from tilelang.codegen.layouts.gf2 import LinearMap, identity
from tilelang.record import record

BANKS = 32
WORD = 4
PHASE_BYTES = BANKS * WORD


@record(frozen=True)
class SharedLayout:
    """Element offset bits -> linear-index bits of a tile of `shape` (invertible)."""
    shape: tuple[int, ...]
    map: LinearMap

    def __post_init__(self):
        n = sum(log2(s) for s in self.shape)
        if self.map.n_in != n or self.map.n_out != n or not self.map.is_invertible():
            raise ValueError(f"a shared layout of {self.shape} is an invertible map on {n} bits")

    @property
    def size(self) -> int:
        return 1 << self.map.n_in

    @cached_property
    def inverse(self) -> LinearMap:
        return self.map.inverse()

    def element(self, offset: int) -> int:
        """Linear index of the element at `offset`."""
        return self.map(offset)

    def offset_of(self, idx: int) -> int:
        return self.inverse(idx)

    def offsets(self, idx):
        """Offsets of a NumPy array of linear indices."""
        return self.inverse.apply_all(idx)

    def is_identity(self) -> bool:
        return self.map == identity(self.map.n_in)


def identity_shared(shape: tuple[int, ...]) -> SharedLayout:
    """A row-major buffer."""
    return SharedLayout(tuple(shape), identity(sum(log2(s) for s in shape)))


def xor_swizzle(shape: tuple[int, ...], bits: int, base: int, shift: int) -> SharedLayout:
    """Element at linear index y lives at offset y ^ (((y >> (base + shift)) & (2^bits - 1))
    << base): bits [base, base+bits) of the offset are XORed with the `bits` bits `shift`
    above them. The map is its own inverse."""
    n = sum(log2(s) for s in shape)
    if bits < 0 or base < 0 or shift < bits or base + shift + bits > n:
        raise ValueError(f"swizzle ({bits}, {base}, {shift}) does not fit {n} index bits")
    cols = []
    for i in range(n):
        c = 1 << i
        if base + shift <= i < base + shift + bits:
            c |= 1 << (i - shift)
        cols.append(c)
    return SharedLayout(tuple(shape), LinearMap(tuple(cols), n))


def swizzle(shape: tuple[int, ...], itemsize: int, vec: int, per_phase: int,
            max_phase: int) -> SharedLayout:
    """The mma/ldmatrix-style swizzle of a row-major tile whose last axis is the row: vector
    `col // vec` of row `row` is stored at vector `(col // vec) ^ ((row // per_phase) %
    max_phase)`. `itemsize` only checks that a vector is at most 16 bytes."""
    if vec * itemsize > 16:
        raise ValueError(f"a vector of {vec} x {itemsize} bytes is wider than 16 bytes")
    cols = shape[-1]
    if max_phase == 1:
        return identity_shared(shape)
    if cols // vec < max_phase:
        raise ValueError(f"{cols} columns hold {cols // vec} vectors, fewer than {max_phase}")
    b = log2(max_phase)
    return xor_swizzle(shape, b, log2(vec), log2(cols) + log2(per_phase) - log2(vec))


def ldmatrix_swizzle(shape: tuple[int, ...], itemsize: int) -> SharedLayout:
    """The swizzle of an operand tile whose rows (last axis) are read by `ldmatrix` and written
    in 16-byte chunks (`cp.async`): S = min(chunks per row, 8) chunks are permuted by the row
    index divided by `per` = max(8 / chunks, 1), so 8 consecutive rows at one chunk and 8
    consecutive chunks fill the 8 bank groups of a wavefront."""
    vec = max(16 // itemsize, 1)
    chunks = max(shape[-1] * itemsize // 16, 1)
    return swizzle(shape, itemsize, vec, max(8 // chunks, 1), min(chunks, 8))


def tma_swizzle(shape: tuple[int, ...], itemsize: int, span: int) -> SharedLayout:
    """Hopper's `span`-byte swizzle (32, 64 or 128; 16 is none) of a tile stored row-major
    from a 1024-byte-aligned address."""
    if span not in (16, 32, 64, 128):
        raise ValueError(f"no {span}-byte swizzle mode")
    chunk = log2(16 // itemsize) if itemsize <= 16 else 0
    return xor_swizzle(shape, log2(span // 16), chunk, 3) if span > 16 else identity_shared(shape)


def wgmma_image(shape: tuple[int, ...], itemsize: int, span: int = 128) -> SharedLayout:
    """The swizzled panel image of a tile whose last axis is contiguous (the canonical K-major
    layout of a wgmma operand, or MN-major with the roles of the axes swapped), for a
    `span`-byte swizzle (128, 64 or 32): element (r, c), r the row over all leading axes,
    lives at element offset (c / P) * rows * P + r * P + (((c mod P) / V) ^ s(r)) * V
    + c mod V, with P = span / itemsize elements a panel row, V = 16 / itemsize a chunk and
    s(r) = (r / (128 / span)) mod (span / 16): address bits 4.. XOR address bits 7.. The
    last axis must be whole panels and there must be at least 8 rows."""
    cols = shape[-1]
    rows = 1
    for s in shape[:-1]:
        rows *= s
    if span not in (32, 64, 128):
        raise ValueError(f"no {span}-byte wgmma swizzle")
    per_panel = span // itemsize
    vec = 16 // itemsize
    if cols % per_panel or rows < 8:
        raise ValueError(f"{shape} of {itemsize}-byte elements is not whole {span}-byte "
                         f"panels of at least 8 rows")
    lv, lc, lr = log2(vec), log2(cols), log2(rows)
    lp = log2(per_panel)
    bits = log2(span // 16)                     # chunk bits of a panel row
    skip = 3 - bits                             # row bits below the XOR (bit 7 of the address)
    out = []
    for i in range(lv):                         # element within a chunk
        out.append(1 << i)
    for j in range(bits):                       # chunk within a panel row
        out.append(1 << (lv + j))
    for j in range(lr):                         # row: bits skip .. 2 also XOR the chunk
        c = 1 << (lc + j)
        if skip <= j < 3:
            c |= 1 << (lv + j - skip)
        out.append(c)
    for j in range(lc - lp):                    # panel
        out.append(1 << (lp + j))
    return SharedLayout(tuple(shape), LinearMap(tuple(out), lc + lr))


# ---------------------------------------------------------------------------------------------
# Banks

def lanes_per_phase(size: int) -> int:
    return 32 if size <= WORD else PHASE_BYTES // size


def _flat_ints(x) -> list[int]:
    """The integers of a NumPy array or nested lists, in row-major order."""
    if hasattr(x, "reshape"):                          # a NumPy array
        return x.reshape(-1).tolist()
    if x and isinstance(x[0], (list, tuple)):
        return [v for row in x for v in _flat_ints(row)]
    return [int(v) for v in x]


def wavefronts(addresses, size: int) -> tuple[int, int]:
    """(wavefronts, ideal) of warp requests. `addresses` is [requests, 32] byte addresses (-1
    for a lane that does not take part; nested lists or a NumPy array), each lane accessing
    `size` bytes (1..16, aligned)."""
    flat = _flat_ints(addresses)
    if len(flat) % 32:
        raise ValueError(f"{len(flat)} addresses are not whole requests of 32 lanes")
    per = lanes_per_phase(size)            # a request's phases are runs of `per` lanes
    nwords = max(size // WORD, 1)
    total = ideal = 0
    for p in range(0, len(flat), per):
        lanes = [a for a in flat[p:p + per] if a >= 0]
        if not lanes:
            continue
        if nwords == 1:
            words = {a // WORD for a in lanes}
        else:
            words = {a // WORD + k for a in lanes for k in range(nwords)}
        banks = [0] * BANKS
        for w in words:
            banks[w % BANKS] += 1
        total += max(banks)
        ideal += 1
    return total, ideal


def ldmatrix_wavefronts(rows) -> tuple[int, int]:
    """(wavefronts, ideal) of `ldmatrix` requests: [requests, 8 * matrices] byte addresses of
    the 16-byte rows (lanes 0-7 give matrix 0's rows, 8-15 matrix 1's, ...); one request may
    be a flat list."""
    r = rows.tolist() if hasattr(rows, "tolist") else rows
    reqs = [r] if r and not isinstance(r[0], (list, tuple)) else r
    full = []
    for req in reqs:
        lanes = _flat_ints(req)
        if len(lanes) > 32:
            raise ValueError(f"an ldmatrix request has {len(lanes)} row addresses, over 32")
        full.append(lanes + [-1] * (32 - len(lanes)))
    return wavefronts(full, 16)


def access_addresses(layout: Layout, shared: SharedLayout, itemsize: int, vec: int = 1,
                     regs: list[int] | None = None) -> list[list[int]]:
    """[warps * groups][32] byte addresses of the requests that access `layout`'s registers in
    `shared`, `vec` consecutive registers per request (their first register's element is the
    vector's address). `regs`: the first registers of the requests (default every `vec`-th)."""
    starts = list(range(0, layout.num_regs, vec)) if regs is None else regs
    inv = shared.inverse
    reg_lin = layout.reg_linears
    warps = max(layout.threads // 32, 1)
    out = [[[-1] * 32 for _ in starts] for _ in range(warps)]
    for t, base in enumerate(layout.thread_linears):
        for g, r in enumerate(starts):
            out[t // 32][g][t % 32] = inv(base ^ reg_lin[r]) * itemsize
    return [req for warp in out for req in warp]


def access_wavefronts(layout: Layout, shared: SharedLayout, itemsize: int, vec: int = 1,
                      regs: list[int] | None = None) -> tuple[int, int]:
    """(wavefronts, ideal) over every warp request of an access of `layout` to `shared`."""
    return wavefronts(access_addresses(layout, shared, itemsize, vec, regs), vec * itemsize)
