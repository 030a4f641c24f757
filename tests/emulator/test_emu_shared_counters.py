"""The shared-memory bank-conflict counter with known answers (docs/emulator.md, Counters).

Model: a warp's request is split into phases that ask for at most 128 bytes (32 lanes for
4-byte accesses, 16 for 8 bytes, 8 for 16 bytes; ldmatrix/stmatrix: one 8x8 matrix, 8 rows of
16 bytes, per phase). A phase takes as many wavefronts as the most distinct 4-byte words it
touches in one bank; every wavefront beyond one per phase is a conflict.
"""

import numpy as np
import pytest

from emu_support import kernel_ptx

# Each lane takes a byte offset (from the host) into a 16 KiB shared array and runs `{op}`
# with the shared address in %r10; the array is filled with its own byte offsets / 2 first.
BODY = """
  mov.u32 %r1, %tid.x;
  ld.param.u64 %rd1, [k_p0];
  ld.param.u64 %rd3, [k_p1];
  mov.u32 %r2, smem;
  mul.wide.u32 %rd6, %r1, 4;
  add.s64 %rd7, %rd3, %rd6;
  ld.global.u32 %r9, [%rd7];
  add.s32 %r10, %r2, %r9;
  {op}
  mul.wide.u32 %rd8, %r1, 16;
  add.s64 %rd9, %rd1, %rd8;
  st.global.v4.u32 [%rd9], {{%r20, %r21, %r22, %r23}};
  ret;
"""


def run(hw, op, offsets):
    ptx = kernel_ptx(BODY.format(op=op), nparams=2,
                     prelude=".shared .align 128 .b8 smem[16384];\n")
    d = hw.dev
    po, pofs = d.malloc(32 * 16), d.to_device(np.asarray(offsets, np.uint32))
    rep = hw.run(ptx, (1,), (32,), [po, pofs])
    return rep


def tile_offsets(row_bytes, swizzle):
    """Row addresses an ldmatrix.x4 gives for the 16x16 half tile at the top left of a
    row-major tile with `row_bytes` per row: matrices (rows 0-7, 8-15) x (halves 0-7, 8-15).
    With `swizzle`, 16-byte chunk c of row r is stored at chunk c ^ (r % 8)."""
    lane = np.arange(32)
    row = lane % 16
    chunk = lane // 16
    if swizzle:
        chunk = chunk ^ (row % 8)
    return row * row_bytes + chunk * 16


@pytest.mark.parametrize("trans", ["", ".trans"])
def test_ldmatrix_x4_row_major_128_byte_rows_is_8_way(hw, trans):
    # 64 halves per row: every row of a matrix starts in bank 0 -> 8 wavefronts per matrix
    rep = run(hw, f"ldmatrix.sync.aligned.m8n8.x4{trans}.shared.b16 {{%r20, %r21, %r22, %r23}},"
              " [%r10];", tile_offsets(128, False))
    assert (rep.shared_requests, rep.shared_wavefronts, rep.bank_conflicts) == (1, 32, 28)


@pytest.mark.parametrize("trans", ["", ".trans"])
def test_ldmatrix_x4_xor_swizzled_is_conflict_free(hw, trans):
    rep = run(hw, f"ldmatrix.sync.aligned.m8n8.x4{trans}.shared.b16 {{%r20, %r21, %r22, %r23}},"
              " [%r10];", tile_offsets(128, True))
    assert (rep.shared_requests, rep.shared_wavefronts, rep.bank_conflicts) == (1, 4, 0)


def test_ldmatrix_padded_rows_are_conflict_free(hw):
    # 72 halves per row (144 bytes): rows step by 4 banks, 8 rows cover all 32
    rep = run(hw, "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%r20, %r21, %r22, %r23}, [%r10];",
              tile_offsets(144, False))
    assert (rep.shared_wavefronts, rep.bank_conflicts) == (4, 0)


@pytest.mark.parametrize("num,expect", [(1, 7), (2, 14), (4, 28)])
def test_ldmatrix_counts_only_the_lanes_that_give_rows(hw, num, expect):
    # lanes 8*num.. give addresses that would conflict too; the instruction ignores them
    regs = ", ".join(f"%r{20 + i}" for i in range(num))
    rep = run(hw, f"ldmatrix.sync.aligned.m8n8.x{num}.shared.b16 {{{regs}}}, [%r10];",
              np.arange(32) % 16 * 128)
    assert (rep.shared_wavefronts, rep.bank_conflicts) == (8 * num, expect)


def test_stmatrix_counts_like_ldmatrix(hw):
    op = ("mov.u32 %r20, 1;\n  mov.u32 %r21, 2;\n  mov.u32 %r22, 3;\n  mov.u32 %r23, 4;\n"
          "  stmatrix.sync.aligned.m8n8.x4.shared.b16 [%r10], {%r20, %r21, %r22, %r23};")
    assert run(hw, op, tile_offsets(128, False)).bank_conflicts == 28
    assert run(hw, op, tile_offsets(128, True)).bank_conflicts == 0


def test_v4_loads_are_counted_per_quarter_warp(hw):
    # quarter-warp q reads column chunk q of rows 0..7 (128-byte rows): 8-way inside every
    # phase (a whole-warp count would see only 8 words per bank and report 4)
    lane = np.arange(32)
    rep = run(hw, "ld.shared.v4.u32 {%r20, %r21, %r22, %r23}, [%r10];",
              (lane % 8) * 128 + (lane // 8) * 16)
    assert (rep.shared_wavefronts, rep.bank_conflicts) == (32, 28)
    rep = run(hw, "ld.shared.v4.u32 {%r20, %r21, %r22, %r23}, [%r10];", lane * 16)
    assert (rep.shared_wavefronts, rep.bank_conflicts) == (4, 0)


def test_v2_loads_are_counted_per_half_warp(hw):
    lane = np.arange(32)
    rep = run(hw, "ld.shared.v2.u32 {%r20, %r21}, [%r10];", lane * 8)
    assert (rep.shared_wavefronts, rep.bank_conflicts) == (2, 0)
    # half-warp h: 16 lanes, 2 per 128-byte row, same 8 bytes of each row -> 8 rows, 8-way
    rep = run(hw, "ld.shared.v2.u32 {%r20, %r21}, [%r10];", (lane % 16) // 2 * 128)
    assert (rep.shared_wavefronts, rep.bank_conflicts) == (16, 14)


def test_broadcast_is_free(hw):
    rep = run(hw, "ld.shared.u32 %r20, [%r10];", np.zeros(32))
    assert (rep.shared_wavefronts, rep.bank_conflicts) == (1, 0)


def test_conflicts_are_reported_per_ptx_line(hw):
    ptx_op = ("ld.shared.u32 %r20, [%r10];\n"
              "  ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%r20, %r21, %r22, %r23}, [%r10];")
    rep = run(hw, ptx_op, tile_offsets(128, False))
    by_line = {line: c for line, (_, _, c) in rep.shared_lines.items()}
    # ld.shared: 16 rows of 128 bytes, words in banks 0 and 4 only: 16-way
    assert sorted(by_line.values()) == [15, 28]
    ldm_line = next(n for n, c in by_line.items() if c == 28)
    assert rep.bank_conflicts_in([ldm_line]) == 28 and rep.bank_conflicts == 43
