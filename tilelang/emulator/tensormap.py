"""The emulator's tensor maps: TMA descriptors in 128 bytes, in an encoding of our own.

The CUDA driver's `CUtensorMap` is opaque (its bit layout is not documented), so the emulator
back end builds its own in the same 128 bytes, from the same arguments as
`cuTensorMapEncodeTiled`, and `cp.async.bulk.tensor` reads it back with `decode`. The layout
(little-endian, documented in docs/emulator.md):

| bytes | field |
|---|---|
| 0-3 | magic `b"TLTM"` |
| 4 | format version (1) |
| 5 | data type (`CUtensorMapDataType` numbering, 0..12: 0 u8, 6 f16, 7 f32, 9 bf16, ...) |
| 6 | rank (1-5) |
| 7 | interleave (0 none, 1 16 B, 2 32 B) |
| 8 | swizzle (0 none, 1 32 B, 2 64 B, 3 128 B) |
| 9 | L2 promotion (0 none, 1 64 B, 2 128 B, 3 256 B) |
| 10 | out-of-bounds fill (0 zeros, 1 NaN request zero FMA) |
| 11-15 | zero |
| 16-23 | global address |
| 24-43 | global dimensions, 5 x u32 (unused ranks 1) |
| 44-47 | zero |
| 48-79 | global strides in bytes of dimensions 1-4, 4 x u64 (dimension 0 is dense) |
| 80-89 | box dimensions, 5 x u16 |
| 90-94 | element strides, 5 x u8 |
| 95-127 | zero |

`encode` checks the arguments as the driver does and raises `ValueError` naming the rule.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

MAGIC = b"TLTM"
VERSION = 1
SIZE = 128

# CUtensorMapDataType numbering -> (name, bytes per element)
DTYPES = {0: ("u8", 1), 1: ("u16", 2), 2: ("u32", 4), 3: ("s32", 4), 4: ("u64", 8),
          5: ("s64", 8), 6: ("f16", 2), 7: ("f32", 4), 8: ("f64", 8), 9: ("bf16", 2),
          10: ("f32_ftz", 4), 11: ("tf32", 4), 12: ("tf32_ftz", 4)}
_DTYPE_CODES = {name: code for code, (name, _) in DTYPES.items()}
_DTYPE_CODES.update({"uint8": 0, "int8": 0, "s8": 0, "e4m3": 0, "e5m2": 0, "uint16": 1,
                     "uint32": 2, "int32": 3, "i32": 3, "uint64": 4, "int64": 5,
                     "float16": 6, "fp16": 6, "float32": 7, "fp32": 7, "float64": 8,
                     "bfloat16": 9})
SWIZZLE_BYTES = {0: 0, 1: 32, 2: 64, 3: 128}
_SWIZZLE_CODES = {0: 0, 32: 1, 64: 2, 128: 3}


@dataclass(frozen=True)
class TensorMap:
    dtype: int
    rank: int
    global_address: int
    global_dims: tuple
    global_strides: tuple          # bytes, dimensions 1..rank-1
    box_dims: tuple
    element_strides: tuple
    interleave: int
    swizzle: int                   # code 0..3
    l2_promotion: int
    oob_fill: int

    @property
    def element_size(self) -> int:
        return DTYPES[self.dtype][1]

    @property
    def swizzle_bytes(self) -> int:
        return SWIZZLE_BYTES[self.swizzle]

    @property
    def box_counts(self) -> tuple:
        """Elements the box holds along each dimension (box / element stride, rounded up)."""
        return tuple(-(-b // e) for b, e in zip(self.box_dims, self.element_strides))

    @property
    def box_bytes(self) -> int:
        return int(np.prod(self.box_counts)) * self.element_size


def _code(value, table, what):
    if isinstance(value, str):
        key = value.lower().removeprefix("cu_tensor_map_data_type_")
        if key not in table:
            raise ValueError(f"tensor map: unknown {what} {value!r}")
        return table[key]
    return int(value)


def encode(dtype, rank, global_address, global_dims, global_strides, box_dims,
           element_strides, interleave=0, swizzle=0, l2_promotion=0, oob_fill=0) -> bytes:
    """The 128-byte tensor map; arguments as cuTensorMapEncodeTiled (`swizzle` as the enum
    code 0..3; `dtype` as the enum code or a name such as "f16")."""
    dt = _code(dtype, _DTYPE_CODES, "data type")
    if dt not in DTYPES:
        raise ValueError(f"tensor map: data type code {dt} is not 0..12")
    rank = int(rank)
    if not 1 <= rank <= 5:
        raise ValueError(f"tensor map: rank {rank} is not 1..5")
    dims = [int(d) for d in global_dims]
    strides = [int(s) for s in global_strides]
    box = [int(b) for b in box_dims]
    est = [int(e) for e in element_strides]
    if len(dims) != rank or len(box) != rank or len(est) != rank:
        raise ValueError(f"tensor map: global_dims, box_dims and element_strides need {rank} "
                         f"entries each")
    if len(strides) != rank - 1:
        raise ValueError(f"tensor map: global_strides needs {rank - 1} entries (dimensions "
                         f"1..{rank - 1}; dimension 0 is dense)")
    esize = DTYPES[dt][1]
    interleave, swizzle = int(interleave), int(swizzle)
    if interleave not in (0, 1, 2) or swizzle not in (0, 1, 2, 3) or \
            int(l2_promotion) not in (0, 1, 2, 3) or int(oob_fill) not in (0, 1):
        raise ValueError("tensor map: interleave 0..2, swizzle 0..3, L2 promotion 0..3 and "
                         "OOB fill 0..1 are the valid codes")
    addr = int(global_address)
    if addr % (32 if interleave == 2 else 16):
        raise ValueError(f"tensor map: global address {addr:#x} is not "
                         f"{32 if interleave == 2 else 16}-byte aligned")
    if any(not 1 <= d <= 1 << 32 for d in dims):
        raise ValueError(f"tensor map: global dimensions {dims} must be 1..2^32")
    if any(s % (32 if interleave == 2 else 16) or s <= 0 or s >= 1 << 40 for s in strides):
        raise ValueError(f"tensor map: global strides {strides} must be positive multiples of "
                         f"16 bytes below 2^40")
    if any(not 1 <= b <= 256 for b in box):
        raise ValueError(f"tensor map: box dimensions {box} must be 1..256")
    if any(not 1 <= e <= 8 for e in est):
        raise ValueError(f"tensor map: element strides {est} must be 1..8")
    inner = box[0] * esize
    if interleave == 0 and inner % 16:
        raise ValueError(f"tensor map: the box's inner dimension is {inner} bytes, not a "
                         f"multiple of 16")
    if interleave == 0 and swizzle and inner > SWIZZLE_BYTES[swizzle]:
        raise ValueError(f"tensor map: the box's inner dimension ({inner} bytes) exceeds the "
                         f"{SWIZZLE_BYTES[swizzle]}-byte swizzle span")
    out = bytearray(SIZE)
    out[0:4] = MAGIC
    out[4:11] = bytes([VERSION, dt, rank, interleave, swizzle, int(l2_promotion),
                       int(oob_fill)])
    struct.pack_into("<Q", out, 16, addr)
    struct.pack_into("<5I", out, 24, *(dims + [1] * (5 - rank)))
    struct.pack_into("<4Q", out, 48, *(strides + [0] * (4 - len(strides))))
    struct.pack_into("<5H", out, 80, *(box + [1] * (5 - rank)))
    struct.pack_into("<5B", out, 90, *(est + [1] * (5 - rank)))
    return bytes(out)


# tensormap.replace's .elemtype numbering (PTX ISA) differs from CUtensorMapDataType's from
# f32.ftz on: PTX code -> the data type code this encoding stores
PTX_ELEMTYPES = {0: 0, 1: 1, 2: 2, 3: 3, 4: 4, 5: 5, 6: 6, 7: 7, 8: 10, 9: 8, 10: 9, 11: 11,
                 12: 12}
REPLACE_FIELDS = ("global_address", "rank", "box_dim", "global_dim", "global_stride",
                  "element_stride", "elemtype", "interleave_layout", "swizzle_mode",
                  "swizzle_atomicity", "fill_mode")


def blank() -> bytearray:
    """A tensor map with no field set yet (rank 1, every size zero): what `tensormap.replace`
    starts from when the 128 bytes it edits are not a tensor map of this encoding (the zeros a
    kernel writes before filling one in, as Triton's device-side descriptors do)."""
    out = bytearray(SIZE)
    out[0:4] = MAGIC
    out[4:7] = bytes([VERSION, 0, 1])
    return out


def replace(raw, field: str, ordinal, value: int) -> bytes:
    """The map `raw` with one field replaced, as `tensormap.replace.tile.<field>` does (PTX
    ISA): values are the logical ones (rank - 1 for .rank; sizes, strides in bytes and
    element strides as given; the PTX .elemtype code). ValueError names a value out of range;
    the map as a whole is checked when a copy uses it (`decode`)."""
    out = bytearray(raw) if bytes(raw[0:4]) == MAGIC and raw[4] == VERSION else blank()
    v = int(value)
    if field in ("box_dim", "global_dim", "global_stride", "element_stride"):
        top = 4 if field == "global_stride" else 5
        if not 0 <= int(ordinal) < top:
            raise ValueError(f"tensormap.replace .{field}: ordinal {ordinal} is not 0..{top - 1}")
    if field == "global_address":
        if v % 16:
            raise ValueError(f"tensormap.replace .global_address {v:#x} is not 16-byte aligned")
        struct.pack_into("<Q", out, 16, v)
    elif field == "rank":
        if not 0 <= v <= 4:
            raise ValueError(f"tensormap.replace .rank {v} is not 0..4 (rank - 1)")
        out[6] = v + 1
    elif field == "box_dim":
        if not 1 <= v <= 256:
            raise ValueError(f"tensormap.replace .box_dim {v} is not 1..256")
        struct.pack_into("<H", out, 80 + 2 * int(ordinal), v)
    elif field == "global_dim":
        if not 1 <= v <= 1 << 32:
            raise ValueError(f"tensormap.replace .global_dim {v} is not 1..2^32")
        struct.pack_into("<I", out, 24 + 4 * int(ordinal), v & 0xFFFFFFFF)
    elif field == "global_stride":
        if v <= 0 or v % 16 or v >= 1 << 40:
            raise ValueError(f"tensormap.replace .global_stride {v} is not a positive multiple "
                             f"of 16 bytes below 2^40")
        struct.pack_into("<Q", out, 48 + 8 * int(ordinal), v)
    elif field == "element_stride":
        if not 1 <= v <= 8:
            raise ValueError(f"tensormap.replace .element_stride {v} is not 1..8")
        out[90 + int(ordinal)] = v
    elif field == "elemtype":
        if v not in PTX_ELEMTYPES:
            raise ValueError(f"tensormap.replace .elemtype {v} is not supported (0..12; the "
                             f"sub-byte types of sm_100 are not emulated)")
        out[5] = PTX_ELEMTYPES[v]
    elif field == "interleave_layout":
        if v not in (0, 1, 2):
            raise ValueError(f"tensormap.replace .interleave_layout {v} is not 0..2")
        out[7] = v
    elif field == "swizzle_mode":
        if v not in (0, 1, 2, 3):
            raise ValueError(f"tensormap.replace .swizzle_mode {v} is not 0..3 (the sm_100 "
                             f"modes are not emulated)")
        out[8] = v
    elif field == "swizzle_atomicity":
        if v != 0:
            raise ValueError(f"tensormap.replace .swizzle_atomicity {v}: only 0 (16 bytes, "
                             f"sm_90) is emulated")
    elif field == "fill_mode":
        if v not in (0, 1):
            raise ValueError(f"tensormap.replace .fill_mode {v} is not 0 or 1")
        out[10] = v
    else:
        raise ValueError(f"tensormap.replace has no field .{field}")
    return bytes(out)


def decode(raw) -> TensorMap:
    """The fields of a 128-byte tensor map made by `encode`; ValueError if it is not one."""
    raw = bytes(raw)
    if len(raw) != SIZE or raw[0:4] != MAGIC or raw[4] != VERSION:
        raise ValueError("not a tensor map of the emulator's encoding (bad magic or version: "
                         "tensor maps for the emulator come from "
                         "tilelang.emulator.tensormap.encode)")
    dt, rank, inter, sw, l2, oob = raw[5:11]
    if dt not in DTYPES or not 1 <= rank <= 5 or sw > 3 or inter > 2:
        raise ValueError("tensor map: corrupt header")
    dims = struct.unpack_from("<5I", raw, 24)[:rank]
    strides = struct.unpack_from("<4Q", raw, 48)[:rank - 1]
    box = struct.unpack_from("<5H", raw, 80)[:rank]
    est = struct.unpack_from("<5B", raw, 90)[:rank]
    for what, vals in (("global dimension", dims), ("global stride", strides),
                       ("box dimension", box), ("element stride", est)):
        if 0 in vals:                # a map filled in by tensormap.replace, a field left out
            raise ValueError(f"tensor map: {what} {list(vals).index(0)} is not set (zero)")
    return TensorMap(dt, rank, struct.unpack_from("<Q", raw, 16)[0], tuple(dims),
                     tuple(strides), tuple(box), tuple(est), inter, sw, l2, oob)


def swizzle_offsets(addr, swizzle_bytes):
    """Shared-memory byte addresses after the TMA/wgmma swizzle (16-byte chunk bits 4.. XOR
    address bits 7..), applied to absolute shared addresses."""
    if not swizzle_bytes:
        return addr
    bits = {32: 1, 64: 2, 128: 3}[swizzle_bytes]
    return addr ^ (((addr >> 7) & ((1 << bits) - 1)) << 4)


def box_layout(tm: TensorMap, coords):
    """For a box at `coords`: (global byte offsets from the global address, in-bounds mask,
    shared byte offsets from the box's shared start before swizzling), all flat in the box's
    shared order (dimension 0 fastest)."""
    counts = tm.box_counts
    esize = tm.element_size
    grids = np.meshgrid(*[np.arange(c, dtype=np.int64) for c in counts], indexing="ij")
    # shared order: dimension 0 fastest -> transpose so the flat order matches
    idx = [g.transpose(tuple(range(tm.rank))[::-1]).reshape(-1) for g in grids]
    inb = np.ones(idx[0].size, bool)
    goff = np.zeros(idx[0].size, np.int64)
    for d in range(tm.rank):
        g = int(coords[d]) + idx[d] * tm.element_strides[d]
        inb &= (g >= 0) & (g < tm.global_dims[d])
        goff += g * (esize if d == 0 else tm.global_strides[d - 1])
    soff = np.arange(idx[0].size, dtype=np.int64) * esize
    return goff, inb, soff
