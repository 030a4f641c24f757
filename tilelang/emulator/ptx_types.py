"""PTX type suffixes decoded to NumPy dtypes, plus the float formats NumPy lacks (bf16, tf32)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

_UINT = {1: np.dtype(np.uint8), 2: np.dtype(np.uint16), 4: np.dtype(np.uint32),
         8: np.dtype(np.uint64)}
_SINT = {1: np.dtype(np.int8), 2: np.dtype(np.int16), 4: np.dtype(np.int32),
         8: np.dtype(np.int64)}


def uint_dtype(size: int) -> np.dtype:
    return _UINT[size]


@dataclass(frozen=True)
class TypeInfo:
    """A decoded type suffix.

    kind: "u", "s", "b" (bits, unsigned arithmetic), "f" (IEEE types NumPy has), "bf16",
    "f16x2", "bf16x2", "pred".
    dtype: the NumPy dtype values of this type are computed in (bf16 → its uint16 bits).
    """
    name: str
    kind: str
    size: int
    dtype: np.dtype

    @property
    def is_float(self) -> bool:
        return self.kind in ("f", "bf16", "f16x2", "bf16x2", "f32x2")

    @property
    def bits(self) -> np.dtype:
        return _UINT[self.size] if self.kind != "pred" else np.dtype(bool)


def type_info(name: str) -> TypeInfo:
    if name == "pred":
        return TypeInfo(name, "pred", 1, np.dtype(bool))
    if name in ("f16", "f32", "f64"):
        return TypeInfo(name, "f", int(name[1:]) // 8,
                        np.dtype({"f16": np.float16, "f32": np.float32, "f64": np.float64}[name]))
    if name == "bf16":
        return TypeInfo(name, "bf16", 2, np.dtype(np.uint16))
    if name == "tf32":
        return TypeInfo(name, "b", 4, np.dtype(np.uint32))
    if name in ("f16x2", "bf16x2"):
        return TypeInfo(name, name, 4, np.dtype(np.uint32))
    if name == "f32x2":                               # two f32 in a .b64 register (sm_100+)
        return TypeInfo(name, name, 8, np.dtype(np.uint64))
    if name in ("e4m3x2", "e5m2x2"):                 # two 8-bit floats in 16 bits
        return TypeInfo(name, name, 2, np.dtype(np.uint16))
    if name == "e2m1x2":                               # two 4-bit floats in 8 bits
        return TypeInfo(name, name, 1, np.dtype(np.uint8))
    if name in ("e2m3x2", "e3m2x2", "ue8m0x2"):      # two 6-bit (padded) or 8-bit values
        return TypeInfo(name, name, 2, np.dtype(np.uint16))
    if name in ("e4m3", "e5m2"):
        return TypeInfo(name, name, 1, np.dtype(np.uint8))
    if name[0] in "usb" and name[1:] in ("8", "16", "32", "64", "128"):
        size = int(name[1:]) // 8
        if size == 16:
            raise KeyError(name)
        dt = _SINT[size] if name[0] == "s" else _UINT[size]
        return TypeInfo(name, name[0], size, dt)
    raise KeyError(name)


TYPE_NAMES = {"pred", "f16", "f32", "f64", "bf16", "tf32", "f16x2", "bf16x2", "e4m3x2", "e5m2x2",
              "e2m1x2", "e2m3x2", "e3m2x2", "ue8m0x2", "f32x2",
              "e4m3", "e5m2", "u8", "u16",
              "u32", "u64", "s8", "s16", "s32", "s64", "b8", "b16", "b32", "b64", "b128"}


def bf16_to_f32(bits: np.ndarray) -> np.ndarray:
    return (np.asarray(bits).astype(np.uint32) << np.uint32(16)).view(np.float32)


def f32_to_bf16(x: np.ndarray, mode: str = "rn") -> np.ndarray:
    """Round float32 to bf16 bits (round to nearest even unless `mode` says otherwise)."""
    u = np.asarray(x, np.float32).view(np.uint32)
    if mode == "rz":
        r = u >> np.uint32(16)
    else:
        r = (u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
    nan = np.isnan(np.asarray(x, np.float32))
    r = np.where(nan, np.uint32(0x7FC0), r)
    return r.astype(np.uint16)


def f32_to_tf32(x: np.ndarray, mode: str = "rna") -> np.ndarray:
    """cvt.{rna,rn,rz}.tf32.f32: keep 10 mantissa bits, rounding to nearest with ties away
    from zero (rna), to nearest even (rn, sm_90) or toward zero (rz)."""
    u = np.asarray(x, np.float32).view(np.uint32)
    if mode == "rz":
        bump = np.uint32(0)
    elif mode == "rn":
        bump = np.uint32(0xFFF) + ((u >> np.uint32(13)) & np.uint32(1))
    else:
        bump = np.uint32(0x1000)
    r = (u + bump) & np.uint32(0xFFFFE000)
    return np.where(np.isnan(np.asarray(x, np.float32)), u, r).astype(np.uint32)


def tf32_to_f32(bits: np.ndarray) -> np.ndarray:
    """A tf32 operand as the tensor core reads it: the low 13 mantissa bits are ignored."""
    return (np.asarray(bits, np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)


def to_float(v: np.ndarray, ti: TypeInfo) -> np.ndarray:
    """Values of a scalar float type as float32/float64 arrays for computing."""
    if ti.kind == "bf16":
        return bf16_to_f32(v)
    return v


def from_float(x: np.ndarray, ti: TypeInfo, mode: str = "rn") -> np.ndarray:
    if ti.kind == "bf16":
        return f32_to_bf16(x, mode)
    return np.asarray(x).astype(ti.dtype)


def parse_imm(text: str, ti: TypeInfo):
    """An immediate operand as a NumPy scalar of the instruction's type."""
    t = text
    neg = t.startswith("-")
    body = t[1:] if neg else t
    if body[:2] in ("0f", "0F", "0d", "0D") and not ti.is_float and ti.kind != "pred":
        # a float literal in a bit-typed instruction (mov.b32 %r, 0f3F800000) is its bits
        v = int(body[2:], 16)
        return np.array(v & ((1 << (8 * ti.size)) - 1), dtype=_UINT[ti.size]).view(ti.dtype)[()]
    if body[:2] in ("0f", "0F"):
        v = float(np.uint32(int(body[2:], 16)).view(np.float32))
    elif body[:2] in ("0d", "0D"):
        v = float(np.uint64(int(body[2:], 16)).view(np.float64))
    elif body[:2] in ("0x", "0X"):
        v = int(body[2:].rstrip("U"), 16)
    elif any(c in body for c in ".eE") and not body[:2].lower() == "0x":
        v = float(body)
    else:
        v = int(body.rstrip("U"))
    if neg:
        v = -v
    if ti.kind == "pred":
        return np.bool_(v != 0)
    if ti.is_float:
        if isinstance(v, int) and body[:2] in ("0x", "0X"):
            return ti.dtype.type(v)  # raw bits for packed/bf16 types
        if ti.kind == "bf16":
            return np.uint16(f32_to_bf16(np.float32(v)))
        if ti.kind in ("f16x2", "bf16x2"):
            return np.uint32(int(v))
        return ti.dtype.type(v)
    if isinstance(v, float):
        v = int(v)
    return np.array(v & ((1 << (8 * ti.size)) - 1), dtype=_UINT[ti.size]).view(ti.dtype)[()]
