"""Warp-group MMA (`wgmma.mma_async`, sm_90a): how a block's warp groups cover an accumulator,
and the accumulator's layout.

A warp group is 4 consecutive warps (128 threads, the first warp's index a multiple of 4).
One `wgmma.mma_async.m64nNk16` computes a 64 x N tile (N a multiple of 8 up to 256) for the
whole group: warp w of the group holds rows 16w .. 16w + 15, and inside a warp the D
fragment repeats the `mma.sync` m16n8 accumulator fragment once per 8 columns (registers
d[4i + 0..3] hold rows g and g + 8, columns 8i + 2t and 8i + 2t + 1, g = lane / 4,
t = lane % 4). So the accumulator of a block tile is a one-hot `Layout`: register bits
column 1, row 8, then columns 8, 16, ... up to the instruction's N, then more instructions
along N, then more 64-row tiles along M (and the batch); lane bits columns 2, 4 and rows 1, 2,
4; warp bits rows 16 and 32, then the warp groups tiled over the block tile. The registers of
one instruction are consecutive, in its d order.

Nothing here emits code.
"""

from __future__ import annotations

from tilelang.codegen.layouts.distributed import Layout, log2
from tilelang.record import record

WG_THREADS = 128
WG_M = 64               # rows of one instruction
MAX_N = 256             # the widest instruction
PANEL_BYTES = 128       # the 128-byte swizzle's row: one panel of an operand image


@record(frozen=True)
class WgTiling:
    """How a block's warp groups cover a (batch, M, N) accumulator."""

    batch: int
    m: int
    n: int
    groups_b: int
    groups_m: int
    groups_n: int

    @property
    def wgm(self) -> int:       # rows of one warp group's tile
        return self.m // self.groups_m

    @property
    def wgn(self) -> int:       # columns of one warp group's tile
        return self.n // self.groups_n

    @property
    def batch_per_group(self) -> int:
        return self.batch // self.groups_b

    @property
    def m_tiles(self) -> int:   # 64-row instruction tiles per warp group
        return self.wgm // WG_M

    @property
    def instr_n(self) -> int:   # N of one instruction
        return min(self.wgn, MAX_N)

    @property
    def n_instrs(self) -> int:  # instructions along N per warp group and k-step
        return self.wgn // self.instr_n

    @property
    def instr_regs(self) -> int:
        """f32 accumulator registers of one instruction per thread."""
        return self.instr_n // 2


def wg_tiling(shape: tuple[int, ...], threads: int) -> WgTiling | None:
    """Split the block's warp groups over the accumulator (M first while each keeps a
    64-row multiple, then N while each keeps 8 columns or more, then the batch). None when
    the block is not whole warp groups or the tile is not whole instruction tiles; warp
    groups left over would replicate, which wgmma cannot use, so that is None too."""
    if threads < WG_THREADS or threads % WG_THREADS:
        return None
    batch, m, n = (1,) + tuple(shape) if len(shape) == 2 else tuple(shape)
    if m % WG_M or n % 8 or n < 8:
        return None
    groups = threads // WG_THREADS
    gb = gm = gn = 1
    while gb * gm * gn < groups:
        if (m // gm) % (2 * WG_M) == 0:
            gm *= 2
        elif (n // gn) % 16 == 0:
            gn *= 2
        elif batch % (gb * 2) == 0:
            gb *= 2
        else:
            return None
    return WgTiling(batch, m, n, gb, gm, gn)


def wg_acc_layout(shape: tuple[int, ...], threads: int, t: WgTiling) -> Layout:
    """The accumulator layout of `shape` ((M, N) or (B, M, N)) under `t` (module docstring);
    register r of a thread is d register r % instr_regs of instruction r / instr_regs, the
    instructions numbered (batch, m-tile, n-instruction) with n fastest."""
    rank = len(shape)

    def basis(b: int = 0, r: int = 0, c: int = 0) -> tuple[int, ...]:
        return (r, c) if rank == 2 else (b, r, c)

    reg = [basis(c=1), basis(r=8)]
    reg += [basis(c=8 << i) for i in range(log2(t.instr_n // 8))]
    reg += [basis(c=t.instr_n << i) for i in range(log2(t.n_instrs))]
    reg += [basis(r=WG_M << i) for i in range(log2(t.m_tiles))]
    reg += [basis(b=1 << i) for i in range(log2(t.batch_per_group))]
    lane = [basis(c=2), basis(c=4), basis(r=1), basis(r=2), basis(r=4)]
    warp = [basis(r=16), basis(r=32)]
    warp += [basis(c=t.wgn << i) for i in range(log2(t.groups_n))]
    warp += [basis(r=t.wgm << i) for i in range(log2(t.groups_m))]
    warp += [basis(b=t.batch_per_group << i) for i in range(log2(t.groups_b))]
    return Layout(tuple(shape), tuple(reg), tuple(lane), tuple(warp))


def instr_regs(t: WgTiling, bi: int, mi: int, ni: int) -> range:
    """The accumulator registers of instruction (batch bi, m-tile mi, n-instruction ni) of a
    warp group, in its d order."""
    first = ((bi * t.m_tiles + mi) * t.n_instrs + ni) * t.instr_regs
    return range(first, first + t.instr_regs)
