"""Operands of the tcgen05 instructions: TMEM addresses, shared-memory matrices read through
sm_100 descriptors (the canonical layouts of smem_matrix.py), A and the block-scaled operands
as bytes, and the lanes of D (docs/emulator.md, "tcgen05 and tensor memory").
"""

from __future__ import annotations

import numpy as np

from .access import locate
from .errors import ExecutionError, MemoryFault
from .ptx_ast import Addr, Reg
from .ptx_types import type_info
from .smem_matrix import (decode_descriptor_sm100, descriptor_offsets,  # noqa: F401
                          element_values)
from .tmem import tmem

_U32 = type_info("u32")


def each(g, st, idx, dtype=np.uint64):
    return np.broadcast_to(np.asarray(g(st), dtype), (st.T,))[idx]


def tmem_address(ctx, o):
    """A getter of the TMEM address operand `[reg + imm]`, `[reg]` or a register."""
    if isinstance(o, Addr) and isinstance(o.base, Reg):
        g, k = ctx.src(o.base, _U32), int(o.offset)
        return lambda st: np.asarray(g(st), np.uint64) + np.uint64(k)
    if isinstance(o, Reg):
        g = ctx.src(o, _U32)
        return lambda st: np.asarray(g(st), np.uint64)
    ctx.error(f"{ctx.ins.opcode}: expected a tensor memory address, found {o}")


def d_lanes(M: int) -> np.ndarray:
    """The TMEM lane of each row of D with cta_group::1: row i for M = 128; for M = 64 the
    first 16 lanes of each warp's 32 (rows 16w .. 16w + 15 in lanes 32w .. 32w + 15)."""
    r = np.arange(M)
    return r if M == 128 else 32 * (r // 16) + r % 16


def descriptor(st, desc, t, what, opcode):
    f = decode_descriptor_sm100(desc)
    if f["version"] != 1:
        raise st.error(ExecutionError, f"{opcode}: {what} descriptor {desc:#018x}: bits 46-48 "
                       f"must be 0b001 (found {f['version']:#05b})", t)
    if f["lbo_mode"]:
        raise st.error(ExecutionError, f"{opcode}: {what} descriptor: the emulator does not "
                       f"support leading-dimension mode 1 (bit 52)", t)
    if f["swizzle"] is None:
        raise st.error(ExecutionError, f"{opcode}: {what} descriptor layout type "
                       f"{f['layout']} (bits 61-63) is reserved or not supported", t)
    if f["base_offset"] and f["swizzle"] and f["base_offset"] != (f["start"] >> 7) & 7:
        raise st.error(ExecutionError, f"{opcode}: {what} descriptor base offset "
                       f"{f['base_offset']} does not match its start address "
                       f"{f['start']:#x}", t)
    return f


def operand_offsets(st, f, rows, K, esize, k_major, t):
    addr = descriptor_offsets(f, rows, K, esize, k_major).astype(np.int64).reshape(-1)
    if (addr % esize).any():
        raise st.error(MemoryFault, "tcgen05.mma: misaligned operand element", t)
    (_, _, off, _), = locate(st, "shared", addr.astype(np.uint64),
                             np.full(addr.size, t, np.int64), esize, 1)
    return off


def read_operand(st, off, esize, kind, rows, K):
    raw = np.ascontiguousarray(st.shared[off[:, None] + np.arange(esize)[None, :]])
    word = raw.view({1: np.uint8, 2: np.uint16, 4: np.uint32}[esize]).reshape(-1)
    return element_values(word, kind).reshape(rows, K)


def mx_elements(raw, kind):
    """(rows, 32) bytes of operand rows to their float64 elements: one per byte, or two e2m1
    per byte with element 2j in the low nibble of byte j."""
    raw = np.asarray(raw, np.uint8)
    if kind == "e2m1":
        from .fp8 import decode
        nib = np.stack([raw & 0xF, raw >> 4], -1).reshape(raw.shape[0], -1)
        return decode(nib, "e2m1")
    return element_values(raw.reshape(-1), kind).reshape(raw.shape)


def tmem_bytes(st, b, lanes, col, nbytes):
    """(rows, nbytes) bytes of TMEM rows `lanes` from column `col` (4 bytes a cell, lowest
    byte first)."""
    cells = np.ascontiguousarray(tmem(st).cells[b][np.ix_(lanes, col + np.arange(nbytes // 4))])
    return cells.view(np.uint8).reshape(len(lanes), nbytes)
