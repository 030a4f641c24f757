"""Float helpers: packed half lanes, directed rounding, PTX min/max and conversions."""

from __future__ import annotations

import numpy as np

from .ptx_types import TypeInfo, bf16_to_f32, f32_to_bf16, type_info

ROUNDINGS = ("rn", "rz", "rm", "rp", "rna")
HALF_OF = {"f16x2": type_info("f16"), "bf16x2": type_info("bf16")}


def lanes(v, ti: TypeInfo) -> list:
    """A float operand as a list of float64 arrays (two for packed f16x2/bf16x2)."""
    if ti.kind == "f":
        return [np.asarray(v).astype(np.float64)]
    if ti.kind == "bf16":
        return [bf16_to_f32(v).astype(np.float64)]
    if ti.kind == "f32x2":
        return [x.astype(np.float64) for x in f32_halves(v)]
    u = np.asarray(v, np.uint32)
    lo, hi = (u & np.uint32(0xFFFF)).astype(np.uint16), (u >> np.uint32(16)).astype(np.uint16)
    if ti.kind == "f16x2":
        return [lo.view(np.float16).astype(np.float64), hi.view(np.float16).astype(np.float64)]
    return [bf16_to_f32(lo).astype(np.float64), bf16_to_f32(hi).astype(np.float64)]


def round_to(x64, ti: TypeInfo, mode: str = "rn", sat: bool = False):
    """Round float64 values to the type `ti`, honouring the PTX rounding mode."""
    if sat:
        x64 = np.where(np.isnan(x64), 0.0, np.clip(x64, 0.0, 1.0))
    if ti.kind == "f":
        if ti.size == 8:
            return np.asarray(x64, np.float64)
        r = np.asarray(x64).astype(ti.dtype)
        if mode in ("rz", "rm", "rp"):
            r = directed(r, x64, mode)
        return r
    if ti.kind == "bf16":
        return _to_bf16(np.asarray(x64, np.float64), mode)
    raise TypeError(ti.name)


def _to_bf16(x64, mode):
    """float64 -> bf16 bits rounded once in `mode`. Directed roundings compose across the
    nested f32 and bf16 grids; round-to-nearest goes through f32 rounded toward zero with a
    sticky low bit (round to odd), so no double rounding."""
    with np.errstate(over="ignore", invalid="ignore"):
        r32 = np.asarray(x64.astype(np.float32))
    directed_mode = mode if mode in ("rz", "rm", "rp") else "rz"
    r32 = np.asarray(directed(r32, x64, directed_mode), np.float32)
    u = r32.view(np.uint32)
    if directed_mode != mode:                       # rn: sticky bit for the inexact ones
        inexact = np.isfinite(x64) & (r32.astype(np.float64) != x64)
        u = u | inexact.astype(np.uint32)
        return f32_to_bf16(u.view(np.float32), "rn")
    low = (u & np.uint32(0xFFFF)) != 0
    neg = (u >> np.uint32(31)) != 0
    away = low & ((mode == "rm") & neg | (mode == "rp") & ~neg)   # bump the magnitude
    hi = (u >> np.uint32(16)) + away.astype(np.uint32)
    nan = np.isnan(x64)
    return np.where(nan, np.uint32(0x7FC0), hi).astype(np.uint16)


def directed(r, exact, mode):
    """Nudge correctly rounded `r` by one ulp where the mode asks to round the other way."""
    exact = np.asarray(exact, np.float64)
    rf = r.astype(np.float64)
    if mode == "rz":
        fix = np.abs(rf) > np.abs(exact)
        toward = np.zeros_like(r)
    elif mode == "rm":
        fix = rf > exact
        toward = np.full_like(r, -np.inf)
    else:
        fix = rf < exact
        toward = np.full_like(r, np.inf)
    return np.where(fix, np.nextafter(r, toward), r)


def pack(results: list, ti: TypeInfo, mode="rn", sat=False):
    """Inverse of `lanes`: float64 lane arrays to the type's bits/values."""
    if ti.kind in ("f", "bf16"):
        return round_to(results[0], ti, mode, sat)
    if ti.kind == "f32x2":
        f32 = type_info("f32")
        return f32_join(*(np.asarray(round_to(x, f32, mode, sat), np.float32) for x in results))
    # each half rounds on its own, in the instruction's mode (cvt.rz.f16x2.f32 truncates)
    half = HALF_OF[ti.kind]
    lo, hi = (np.asarray(round_to(x, half, mode, sat)).view(np.uint16) for x in results)
    return lo.astype(np.uint32) | (hi.astype(np.uint32) << np.uint32(16))


def f32_halves(v):
    """A .f32x2 value (uint64 bits) as its (low, high) float32 halves."""
    u = np.asarray(v, np.uint64)
    return ((u & np.uint64(0xFFFFFFFF)).astype(np.uint32).view(np.float32),
            (u >> np.uint64(32)).astype(np.uint32).view(np.float32))


def f32_join(lo, hi):
    return np.asarray(lo, np.float32).view(np.uint32).astype(np.uint64) | \
        (np.asarray(hi, np.float32).view(np.uint32).astype(np.uint64) << np.uint64(32))


def float_to_int(x, dt: np.dtype, mode: str, sat: bool = True):
    """cvt from float to an integer type: round by mode, saturate, NaN → 0 (as PTX does)."""
    x = np.asarray(x, np.float64)
    r = {"rni": np.rint, "rzi": np.trunc, "rmi": np.floor, "rpi": np.ceil,
         "rn": np.rint, "rz": np.trunc, "rm": np.floor, "rp": np.ceil}.get(mode, np.trunc)(x)
    info = np.iinfo(dt)
    r = np.where(np.isnan(r), 0.0, r)
    lo, hi = float(info.min), float(info.max)
    big = r >= hi
    r = np.clip(r, lo, hi)
    out = r.astype(dt) if dt.itemsize < 8 else np.where(big, 0, r).astype(dt)
    if dt.itemsize == 8:
        out = np.where(big, dt.type(info.max), out)
    return out
