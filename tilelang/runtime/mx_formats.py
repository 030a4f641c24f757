"""Host conversions of the block-scaled (OCP MX, NVFP4) element and scale formats, through
ml_dtypes, in the bytes the GPU reads (docs/language.md, "Block-scaled formats").

* f4e2m1: two values per byte, element 2i in bits 0-3 and element 2i+1 in bits 4-7 (the
  lower-addressed element in the lower bits, as a PTX `.e2m1x2` register holds `cvt`'s
  second source in bits 0-3);
* f6e2m3, f6e3m2: one value per byte in bits 0-5, bits 6-7 zero (the PTX `.e2m3x2`/`.e3m2x2`
  register form and the 8-bit containers `tcgen05.mma .kind::f8f6f4` reads);
* ue8m0: one scale per byte, 2^(c - 127), 0xFF is NaN (the MX scale);
* f8e4m3 as a scale (NVFP4): a non-negative e4m3 value per byte.

Every conversion rounds to nearest even as ml_dtypes does; values beyond the largest finite
one are refused (ValueError) rather than clamped or made NaN silently, since ml_dtypes and the
GPU's `.satfinite` disagree there.
"""

from __future__ import annotations

import numpy as np

_FORMATS = {"f4e2m1": "float4_e2m1fn", "f6e2m3": "float6_e2m3fn",
            "f6e3m2": "float6_e3m2fn", "ue8m0": "float8_e8m0fnu", "f8e4m3": "float8_e4m3fn"}


def _ml(fmt: str):
    import ml_dtypes
    try:
        return getattr(ml_dtypes, _FORMATS[fmt])
    except KeyError:
        raise ValueError(f"unknown block-scaled format {fmt!r}; expected one of "
                         f"{', '.join(sorted(_FORMATS))}") from None


def _check_range(x: np.ndarray, fmt: str):
    t = _ml(fmt)
    import ml_dtypes
    top = float(ml_dtypes.finfo(t).max)
    bad = ~np.isfinite(x) | (np.abs(x) > top)
    if fmt == "ue8m0":
        bad |= ~(x > 0)
    if bad.any():
        v = float(x[bad][0])
        what = "positive and at most" if fmt == "ue8m0" else "finite and at most"
        raise ValueError(f"{v!r} cannot be stored as {fmt}: values must be {what} {top:g} "
                         f"in magnitude")


def codes(x, fmt: str) -> np.ndarray:
    """The format's code of each value (uint8, one per element, rounded to nearest even)."""
    a = np.asarray(x, np.float64)
    _check_range(a, fmt)
    if fmt == "f8e4m3" and (np.signbit(a) & (a != 0)).any():
        raise ValueError("f8e4m3 scales are non-negative")
    return np.ascontiguousarray(a.astype(_ml(fmt))).view(np.uint8)


def values(c, fmt: str) -> np.ndarray:
    """The float64 value of each code."""
    return np.asarray(c, np.uint8).view(_ml(fmt)).astype(np.float64)


def pack_f4e2m1(x) -> np.ndarray:
    """Values (last axis even) to packed bytes: element 2i in the low nibble of byte i."""
    c = codes(x, "f4e2m1")
    if c.shape[-1] % 2:
        raise ValueError(f"f4e2m1 packs two values per byte: the last axis ({c.shape[-1]}) "
                         f"must be even")
    pairs = c.reshape(c.shape[:-1] + (c.shape[-1] // 2, 2))
    return (pairs[..., 0] | (pairs[..., 1] << 4)).astype(np.uint8)


def unpack_f4e2m1(packed) -> np.ndarray:
    """Packed bytes to float64 values (twice as many along the last axis)."""
    p = np.asarray(packed, np.uint8)
    c = np.stack([p & 0xF, p >> 4], -1).reshape(p.shape[:-1] + (2 * p.shape[-1],))
    return values(c, "f4e2m1")


def pack_f4(x, axis: int = -1) -> np.ndarray:
    """Packed FP4 (`f4e2m1x2`) bytes of f4e2m1 values along `axis` (docs/language.md "Packed
    FP4"): element 2j in bits 0-3 of byte j, 2j + 1 in bits 4-7, as PTX's `.e2m1x2` and torch's
    `float4_e2m1fn_x2` hold them. `x`: an ml_dtypes float4_e2m1fn array, or any numbers, rounded
    to nearest even (ValueError beyond ±6 or for NaN); `axis` must have an even length. A
    (M, K) operand of `mma_scaled` packs along K with axis -1, a (K, N) one with axis 0."""
    a = np.asarray(x)
    if a.ndim == 0:
        raise ValueError("pack_f4 packs an array, not a scalar")
    ax = _axis(axis, a.ndim)
    return np.ascontiguousarray(np.moveaxis(pack_f4e2m1(np.moveaxis(a, ax, -1)), -1, ax))


def unpack_f4(packed, axis: int = -1) -> np.ndarray:
    """The f4e2m1 values of packed FP4 bytes (uint8, or torch's float4_e2m1fn_x2 viewed as
    uint8), `axis` doubled, as an ml_dtypes float4_e2m1fn array (exact; `.astype(np.float32)`
    gives the numbers): `pack_f4`'s inverse."""
    import ml_dtypes
    p = np.asarray(packed)
    if p.dtype != np.uint8:
        raise ValueError(f"unpack_f4 takes packed bytes (uint8), not {p.dtype}")
    if p.ndim == 0:
        raise ValueError("unpack_f4 unpacks an array, not a scalar")
    ax = _axis(axis, p.ndim)
    v = np.moveaxis(unpack_f4e2m1(np.moveaxis(p, ax, -1)), -1, ax)
    return np.ascontiguousarray(v.astype(ml_dtypes.float4_e2m1fn))


def _axis(axis: int, ndim: int) -> int:
    import operator
    axis = operator.index(axis)
    if not -ndim <= axis < ndim:
        raise ValueError(f"axis {axis} is out of range for an array of {ndim} dimensions")
    return axis % ndim
