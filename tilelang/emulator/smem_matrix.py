"""Matrices in shared memory read through a matrix descriptor: wgmma (sm_90a) and tcgen05
(sm_100a) share the canonical layouts, the swizzles and the element decoding; only the
descriptor's encoding differs (docs/emulator.md, "warp-group MMA" and "tcgen05").
"""

from __future__ import annotations

import numpy as np

from .ptx_types import bf16_to_f32, tf32_to_f32

SWIZZLE_BYTES = {0: 0, 1: 128, 2: 64, 3: 32}     # descriptor bits 62-63


def decode_descriptor(desc: int) -> dict:
    """The fields of a wgmma shared-memory matrix descriptor (PTX ISA layout)."""
    d = int(desc)
    return {"start": (d & 0x3FFF) << 4, "lbo": ((d >> 16) & 0x3FFF) << 4,
            "sbo": ((d >> 32) & 0x3FFF) << 4, "base_offset": (d >> 49) & 7,
            "swizzle": SWIZZLE_BYTES[(d >> 62) & 3]}


def encode_descriptor(start, lbo, sbo, swizzle=0, base_offset=0) -> int:
    """Inverse of decode_descriptor (byte values; start/lbo/sbo multiples of 16)."""
    mode = {0: 0, 128: 1, 64: 2, 32: 3}[swizzle]
    return ((start >> 4) & 0x3FFF) | (((lbo >> 4) & 0x3FFF) << 16) | \
        (((sbo >> 4) & 0x3FFF) << 32) | ((base_offset & 7) << 49) | (mode << 62)


def swizzle_address(addr, swizzle):
    """Byte address after the swizzle: the 16-byte chunk bits 4.. are XORed with bits 7.."""
    if not swizzle:
        return addr
    bits = {32: 1, 64: 2, 128: 3}[swizzle]
    mask = ((1 << bits) - 1) << 7
    return addr ^ ((addr & mask) >> 3)


def descriptor_offsets(fields, rows, cols, esize, k_major):
    """Byte addresses (rows, cols) of an operand tile read through a descriptor.

    `rows` is the M (A) or N (B) extent, `cols` the K extent. Canonical layouts (PTX ISA,
    in elements, T = 16 bytes / element size):
      K-major  none: ((8,m),(T,2k)) : ((T,SBO),(1,LBO)); 32/64/128B: ((8,m),(T,2k)) :
               ((S/16*T,SBO),(1,T)) — rows of S bytes, 8-row groups SBO apart.
      MN-major none: ((T,1,m),(8,k)) : ((1,T,SBO),(T,LBO)); 32/64/128B: ((T,S/16,m),(8,k)) :
               ((1,T,LBO),(S/16*T,SBO)) — S-byte rows of MN, atoms LBO apart, 8-K groups SBO.
    """
    T = 16 // esize
    r = np.arange(rows)[:, None]
    c = np.arange(cols)[None, :]
    lbo, sbo, sw = fields["lbo"], fields["sbo"], fields["swizzle"]
    if k_major:
        if sw == 0:
            off = (r % 8) * 16 + (r // 8) * sbo + (c % T) * esize + (c // T) * lbo
        else:
            off = (r % 8) * sw + (r // 8) * sbo + c * esize
    else:
        if sw == 0:
            off = (r % T) * esize + (r // T) * sbo + (c % 8) * 16 + (c // 8) * lbo
        else:
            per = sw // esize                       # MN elements in one swizzle row
            off = (r % per) * esize + (r // per) * lbo + (c % 8) * sw + (c // 8) * sbo
    return swizzle_address(fields["start"] + off, sw)


def element_values(raw, kind):
    """Raw element bits (uint8/16/32) of an operand type as float64 (int64 for integers)."""
    if kind == "f16":
        return raw.astype(np.uint16).view(np.float16).astype(np.float64)
    if kind == "bf16":
        return bf16_to_f32(raw.astype(np.uint16)).astype(np.float64)
    if kind == "tf32":
        return tf32_to_f32(raw.astype(np.uint32)).astype(np.float64)
    if kind in ("e4m3", "e5m2"):
        from .fp8 import decode
        return np.asarray(decode(raw.astype(np.uint8), kind), np.float64)
    if kind == "s8":
        return raw.astype(np.uint8).view(np.int8).astype(np.float64)
    return raw.astype(np.float64)


# tcgen05 (sm_100a) descriptor bits 61-63 -> swizzle bytes; 1 (128 B with 32-byte atoms) is
# not supported by the emulator, 3, 5 and 7 are reserved
SM100_LAYOUTS = {0: 0, 2: 128, 4: 64, 6: 32}


def decode_descriptor_sm100(desc: int) -> dict:
    """The fields of a tcgen05 shared-memory matrix descriptor (PTX ISA, "Shared memory
    descriptor" of tcgen05): start address (bits 0-13, >>4), leading-dimension byte offset
    (16-29), stride-dimension byte offset (32-45), a fixed 0b001 (46-48), base offset
    (49-51), leading-dimension mode (52), layout type (61-63). `swizzle` is None for a layout
    type the emulator does not read; the caller reports it."""
    d = int(desc)
    layout = (d >> 61) & 7
    return {"start": (d & 0x3FFF) << 4, "lbo": ((d >> 16) & 0x3FFF) << 4,
            "sbo": ((d >> 32) & 0x3FFF) << 4, "version": (d >> 46) & 7,
            "base_offset": (d >> 49) & 7, "lbo_mode": (d >> 52) & 1, "layout": layout,
            "swizzle": SM100_LAYOUTS.get(layout)}


def encode_descriptor_sm100(start, lbo, sbo, swizzle=0, base_offset=0) -> int:
    """Inverse of decode_descriptor_sm100 for the supported layouts (byte values)."""
    layout = {v: k for k, v in SM100_LAYOUTS.items()}[swizzle]
    return ((start >> 4) & 0x3FFF) | (((lbo >> 4) & 0x3FFF) << 16) | \
        (((sbo >> 4) & 0x3FFF) << 32) | (1 << 46) | ((base_offset & 7) << 49) | \
        (layout << 61)
