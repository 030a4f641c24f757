"""The warp-group MMA layouts against their formulas: the accumulator fragment of
`wgmma.mma_async.m64nNk16` (PTX ISA: warp w of the group holds rows 16w + g and 16w + g + 8,
register d[4i + j] columns 8i + 2t + j % 2, g = lane / 4, t = lane % 4) tiled over
instructions, 64-row tiles and warp groups; and the swizzled operand images (address bits
4.. XOR bits 7.. inside panels of `span` bytes)."""

from __future__ import annotations

import numpy as np
import pytest

from tilelang.codegen.layouts.shared import wgmma_image
from tilelang.codegen.layouts.wgmma import instr_regs, wg_acc_layout, wg_tiling


@pytest.mark.parametrize("shape,threads", [((64, 8), 128), ((64, 128), 128),
                                           ((128, 128), 128), ((128, 256), 256),
                                           ((64, 512), 128), ((256, 64), 512),
                                           ((2, 64, 32), 128), ((4, 64, 64), 256)])
def test_accumulator_fragment(shape, threads):
    t = wg_tiling(shape, threads)
    lay = wg_acc_layout(shape, threads, t)
    table = lay.table                          # [threads, regs] -> row-major linear index
    seen = np.zeros(int(np.prod(shape)), int)
    for tid in range(threads):
        group, warp, lane = tid // 128, tid // 32 % 4, tid % 32
        g, q = lane // 4, lane % 4
        # the warp group's place: groups along M, then N, then the batch (wg_tiling)
        gm = group % t.groups_m
        gn = group // t.groups_m % t.groups_n
        gb = group // (t.groups_m * t.groups_n)
        for bi in range(t.batch_per_group):
            for mi in range(t.m_tiles):
                for ni in range(t.n_instrs):
                    for j, r in enumerate(instr_regs(t, bi, mi, ni)):
                        row = gm * t.wgm + mi * 64 + 16 * warp + g + 8 * (j % 4 // 2)
                        col = gn * t.wgn + ni * t.instr_n + 8 * (j // 4) + 2 * q + j % 2
                        batch = gb * t.batch_per_group + bi
                        lin = (batch * shape[-2] + row) * shape[-1] + col
                        assert table[tid, r] == lin, (tid, r)
                        seen[lin] += 1
    assert (seen == 1).all()                   # every element exactly once


def test_tiling_refuses_what_wgmma_cannot_do():
    assert wg_tiling((64, 64), 96) is None     # not whole warp groups
    assert wg_tiling((32, 64), 128) is None    # M not whole 64-row tiles
    assert wg_tiling((64, 16), 512) is None    # 4 groups cannot split 64 x 16
    assert wg_tiling((64, 64), 512).wgn == 16
    t = wg_tiling((64, 1024), 128)
    assert (t.instr_n, t.n_instrs) == (256, 4)


@pytest.mark.parametrize("shape,itemsize,span", [((64, 64), 2, 128), ((64, 128), 2, 128),
                                                 ((2, 64, 64), 2, 128), ((64, 32), 2, 64),
                                                 ((16, 64), 2, 64), ((64, 16), 2, 32),
                                                 ((8, 128), 1, 128)])
def test_operand_image(shape, itemsize, span):
    img = wgmma_image(shape, itemsize, span)
    rows, cols = int(np.prod(shape[:-1])), shape[-1]
    per = span // itemsize
    for r in range(rows):
        for c in range(cols):
            panel = (c // per) * rows * span
            plain = r * span + (c % per) * itemsize       # inside a panel, unswizzled
            swz = plain ^ (((plain >> 7) & (span // 16 - 1)) << 4)
            assert img.offset_of(r * cols + c) * itemsize == panel + swz, (r, c)


def test_operand_image_refuses_partial_panels():
    with pytest.raises(ValueError):
        wgmma_image((64, 48), 2, 128)
    with pytest.raises(ValueError):
        wgmma_image((4, 64), 2, 128)
