"""Register fragment layouts of the tensor-core instructions (PTX ISA, "Matrix fragments for
mma.m16n8k*"): which row and column of A, B and C each lane's element holds (groupID =
lane >> 2, threadID_in_group = lane % 4), and the unpacking of fragment registers into element
values. `mma.sync` and `ldmatrix` (ops_tensor) and `wgmma`'s register A operand and accumulator
(ops_wgmma) read them."""

from __future__ import annotations

import numpy as np

from .ptx_types import bf16_to_f32, tf32_to_f32

_LANE = np.arange(32)
_G, _T = _LANE >> 2, _LANE & 3


def _table(nelem, row_fn, col_fn):
    e = np.arange(nelem)
    return row_fn(_G[:, None], _T[:, None], e[None, :]), col_fn(_G[:, None], _T[:, None],
                                                               e[None, :])


def _c_layout():          # 16x8 accumulator, 4 elements per lane
    return _table(4, lambda g, t, e: g + 8 * (e // 2), lambda g, t, e: t * 2 + (e % 2))


# (shape, A/B element class) -> (M, N, K, A table, B table, element bits)
def _layouts():
    L = {}
    L[("m16n8k16", "16")] = (16, 8, 16,
                             _table(8, lambda g, t, e: g + 8 * ((e // 2) % 2),
                                    lambda g, t, e: t * 2 + (e % 2) + 8 * (e // 4)),
                             _table(4, lambda g, t, e: t * 2 + (e % 2) + 8 * (e // 2),
                                    lambda g, t, e: g + 0 * e), 16)
    L[("m16n8k8", "16")] = (16, 8, 8,
                            _table(4, lambda g, t, e: g + 8 * (e // 2),
                                   lambda g, t, e: t * 2 + (e % 2)),
                            _table(2, lambda g, t, e: t * 2 + e, lambda g, t, e: g + 0 * e), 16)
    L[("m16n8k8", "32")] = (16, 8, 8,
                            _table(4, lambda g, t, e: g + 8 * (e % 2),
                                   lambda g, t, e: t + 4 * (e // 2)),
                            _table(2, lambda g, t, e: t + 4 * e, lambda g, t, e: g + 0 * e), 32)
    L[("m16n8k4", "32")] = (16, 8, 4,
                            _table(2, lambda g, t, e: g + 8 * e, lambda g, t, e: t + 0 * e),
                            _table(1, lambda g, t, e: t + 0 * e, lambda g, t, e: g + 0 * e), 32)
    L[("m16n8k32", "8")] = (16, 8, 32,
                            _table(16, lambda g, t, e: g + 8 * ((e // 4) % 2),
                                   lambda g, t, e: t * 4 + (e % 4) + 16 * (e // 8)),
                            _table(8, lambda g, t, e: t * 4 + (e % 4) + 16 * (e // 4),
                                   lambda g, t, e: g + 0 * e), 8)
    L[("m16n8k16", "8")] = (16, 8, 16,
                            _table(8, lambda g, t, e: g + 8 * (e // 4),
                                   lambda g, t, e: t * 4 + (e % 4)),
                            _table(4, lambda g, t, e: t * 4 + e, lambda g, t, e: g + 0 * e), 8)
    # 4-bit e2m1 (block-scaled mma.sync of sm_120a): A as the PTX ISA's formula gives it,
    # B by the same pattern along K (the reading Triton's sm_120a MXFP4 kernel confirms)
    L[("m16n8k64", "4")] = (16, 8, 64,
                            _table(32, lambda g, t, e: g + 8 * ((e // 8) % 2),
                                   lambda g, t, e: t * 8 + (e % 8) + 32 * (e // 16)),
                            _table(16, lambda g, t, e: t * 8 + (e % 8) + 32 * (e // 8),
                                   lambda g, t, e: g + 0 * e), 4)
    return L


LAYOUTS = _layouts()
C_LAYOUT = _c_layout()


# The operand types of block-scaled `kind::mxf8f6f4` mma.sync (sm_120a), each in an 8-bit
# container: the 6-bit types in bits 0-5 and e2m1 in bits 2-5 (so that e2m1 reads as e2m3 with
# two more zero mantissa bits), the other bits padding, which the emulator ignores.
CONTAINED = ("e4m3", "e5m2", "e2m3", "e3m2", "e2m1")
_FIELD = {"e4m3": (0, 0xFF), "e5m2": (0, 0xFF), "e2m3": (0, 0x3F), "e3m2": (0, 0x3F),
          "e2m1": (2, 0xF)}


def contained_elements(words, kind):
    """(W, 32, nregs) uint32 of bytes in 8-bit containers -> (W, 32, nregs * 4) float64."""
    from .fp8 import decode
    W, _, n = words.shape
    shift, mask = _FIELD[kind]
    el = np.stack([(words >> np.uint32(8 * k + shift)) & np.uint32(mask) for k in range(4)],
                  axis=-1).reshape(W, 32, n * 4)
    return np.asarray(decode(el, kind), np.float64)


def unpack_elements(words, bits, kind):
    """(W, 32, nregs) uint32 → (W, 32, nregs * 32/bits) float64/int64 element values."""
    W, _, n = words.shape
    if bits == 32:
        if kind == "tf32":
            return tf32_to_f32(words).astype(np.float64)
        return words.view(np.float32).astype(np.float64) if kind == "f32" else \
            words.view(np.int32).astype(np.int64)
    per = 32 // bits
    parts = [(words >> np.uint32(bits * k)) & np.uint32((1 << bits) - 1) for k in range(per)]
    el = np.stack(parts, axis=-1).reshape(W, 32, n * per)
    if kind == "f16":
        return el.astype(np.uint16).view(np.float16).astype(np.float64)
    if kind == "bf16":
        return bf16_to_f32(el.astype(np.uint16)).astype(np.float64)
    if kind == "s8":
        return el.astype(np.uint8).view(np.int8).astype(np.int64)
    if kind == "u8":
        return el.astype(np.int64)
    if kind in ("e4m3", "e5m2", "e2m1"):
        from .fp8 import decode
        return decode(el, kind)
    if kind == "s4":
        v = el.astype(np.int64)
        return np.where(v >= 8, v - 16, v)
    return el.astype(np.int64)
