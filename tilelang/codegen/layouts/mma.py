"""Tensor-core (`mma.sync`) shapes and the accumulator layout of a block tile.

The PTX ISA gives every `mma.sync.aligned.m16n8kK` a fixed fragment layout per warp (groupID
g = lane / 4, t = lane % 4). The accumulator of an m16n8 tile holds, in registers c0..c3,
row g + 8 * (i / 2) and column 2t + (i % 2): register bit 0 -> column 1, bit 1 -> row 8; lane
bits -> columns 2, 4 and rows 1, 2, 4. These are one-hot bases, so the accumulator of a whole
block tile is a `Layout`: the instruction tile, then the warp tile's n8 and m16 repeats as
more register bits, then the warps tiled over the block tile (and over the batch of a 3-d
product). Operand fragments never become tiles: they go from shared memory to the instruction
through `ldmatrix` (lower/tensorcore/mma_sync.py).

Operands are moved in 16-byte chunks (one `ldmatrix` row, one `cp.async`): E = 16 / itemsize
elements, and every instruction's K is two chunks (k16 for 16-bit, k32 for 8-bit, k8 for tf32).

Nothing here emits code.
"""

from __future__ import annotations

from tilelang.codegen.layouts.distributed import WARP, Layout, log2
from tilelang.record import record

MT, NT = 16, 8          # instruction tile: rows, columns of the accumulator


@record(frozen=True)
class MmaForm:
    """One `mma.sync` instruction form."""

    k: int                  # instruction K
    ab: str                 # operand class: "f16", "bf16", "tf32", "s8", "u8", "e4m3", "e5m2"
    acc: str                # accumulator dtype name: "f32", "f16", "i32"
    min_sm: int

    @property
    def itemsize(self) -> int:
        return {"f16": 2, "bf16": 2, "tf32": 4}.get(self.ab, 1)

    @property
    def chunk(self) -> int:
        """Elements of one 16-byte ldmatrix row (E)."""
        return 16 // self.itemsize


_PTX_AB = {"f16": "f16", "bf16": "bf16", "tf32": "tf32", "i8": "s8", "u8": "u8",
           "f8e4m3": "e4m3", "f8e5m2": "e5m2"}


def mma_form(a: str, b: str, acc: str, sm: int) -> tuple[MmaForm, str] | None:
    """The instruction for operand dtypes `a`, `b` (names) into `acc` on SM `sm`, and the
    PTX name of b's class; None when no tensor-core form exists (f32/f64 products, older
    targets): the FMA path computes those."""
    pa, pb = _PTX_AB.get(a), _PTX_AB.get(b)
    if pa is None or pb is None:
        return None
    if pa in ("f16", "bf16"):
        if pa != pb or acc not in (("f32", "f16") if pa == "f16" else ("f32",)):
            return None
        return MmaForm(16, pa, acc, 80), pb
    if pa == "tf32":
        return (MmaForm(8, "tf32", "f32", 80), pb) if pb == "tf32" and acc == "f32" else None
    if pa in ("s8", "u8"):
        return (MmaForm(32, pa, "i32", 80), pb) if pb in ("s8", "u8") and acc == "i32" else None
    if pa in ("e4m3", "e5m2") and pb in ("e4m3", "e5m2") and acc == "f32" and sm >= 89:
        return MmaForm(32, pa, "f32", 89), pb
    return None


@record(frozen=True)
class WarpTiling:
    """How a block's warps cover an (batch, M, N) accumulator."""

    batch: int
    m: int
    n: int
    warps_b: int
    warps_m: int
    warps_n: int

    @property
    def wm(self) -> int:      # warp tile rows
        return self.m // self.warps_m

    @property
    def wn(self) -> int:      # warp tile columns
        return self.n // self.warps_n

    @property
    def m_tiles(self) -> int:
        return self.wm // MT

    @property
    def n_tiles(self) -> int:
        return self.wn // NT

    @property
    def batch_per_warp(self) -> int:
        return self.batch // self.warps_b


def warp_tiling(shape: tuple[int, ...], threads: int) -> WarpTiling | None:
    """Split the block's warps over the accumulator (M, N) (and the batch of a 3-d tile) so
    that each warp tile is at least 16 x 16 (one ldmatrix.x4 of B covers two n8 tiles) and as
    square as possible: a warp reads (wm + wn) x K of the operands per product, least for a
    square warp tile (128 x 128 over 4 warps: 2 x 2 warps of 64 x 64 read 32 ldmatrix.x4 per
    K-step of 64; 4 x 1 warps of 32 x 128 read 40). None when the tile is too small for the
    instruction or there are fewer than 32 threads; warps left over replicate."""
    if threads < WARP:
        return None
    batch, m, n = (1,) + tuple(shape) if len(shape) == 2 else tuple(shape)
    if m < MT or n < 2 * NT:
        return None
    warps = threads // WARP
    wb = wm = wn = 1
    while wb * wm * wn < warps:
        can_m = m // (wm * 2) >= MT
        can_n = n // (wn * 2) >= 2 * NT
        if can_m and (not can_n or m // wm >= n // wn):
            wm *= 2
        elif can_n:
            wn *= 2
        elif batch // (wb * 2) >= 1:
            wb *= 2
        else:
            break
    return WarpTiling(batch, m, n, wb, wm, wn)


def acc_layout(shape: tuple[int, ...], threads: int, tiling: WarpTiling) -> Layout:
    """The accumulator layout of `shape` ((M, N) or (B, M, N)) under `tiling`; register r of
    a thread is element i = r % 4 of instruction tile (n-tile, m-tile, batch) = r / 4 in
    that order (n fastest)."""
    rank = len(shape)

    def basis(b: int = 0, r: int = 0, c: int = 0) -> tuple[int, ...]:
        return (r, c) if rank == 2 else (b, r, c)

    t = tiling
    reg = [basis(c=1), basis(r=8)]
    reg += [basis(c=NT << i) for i in range(log2(t.n_tiles))]
    reg += [basis(r=MT << i) for i in range(log2(t.m_tiles))]
    reg += [basis(b=1 << i) for i in range(log2(t.batch_per_warp))]
    lane = [basis(c=2), basis(c=4), basis(r=1), basis(r=2), basis(r=4)]
    warp = [basis(c=t.wn << i) for i in range(log2(t.warps_n))]
    warp += [basis(r=t.wm << i) for i in range(log2(t.warps_m))]
    warp += [basis(b=t.batch_per_warp << i) for i in range(log2(t.warps_b))]
    nw = log2(threads) - 5
    warp += [basis()] * (nw - len(warp))
    return Layout(tuple(shape), tuple(reg), tuple(lane), tuple(warp))


def acc_register(tiling: WarpTiling, bi: int, mi: int, ni: int, i: int) -> int:
    """Register index of element i (c0..c3) of instruction tile (batch bi, m-tile mi, n-tile
    ni) of a warp, in `acc_layout`'s order."""
    return i + 4 * (ni + tiling.n_tiles * (mi + tiling.m_tiles * bi))
