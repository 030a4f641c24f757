"""The small float formats: e4m3 and e5m2 (sm_89+), the OCP MX formats e2m1 (4 bits), e2m3
and e3m2 (6 bits) and the scale format ue8m0 (sm_100a/sm_120a): decoding tables and rounding
encoders, bit-exact with ml_dtypes' float8_e4m3fn, float8_e5m2, float4_e2m1fn, float6_e2m3fn,
float6_e3m2fn and float8_e8m0fnu (tests/emulator/test_emu_fp8.py checks every code).

e2m1, e2m3 and e3m2 have no infinity and no NaN: `.satfinite` clamps overflow and infinities to
the largest finite value, and the emulator converts NaN to the positive largest value (the PTX
ISA leaves it unstated). ue8m0 is an unsigned power of two 2^(c - 127), c = 0..254; 0xFF is NaN.
"""

from __future__ import annotations

import numpy as np


def _decode_table(exp_bits: int, man_bits: int, ieee_specials: bool, width: int = 8,
                  finite_only: bool = False) -> np.ndarray:
    bias = (1 << (exp_bits - 1)) - 1
    out = np.empty(1 << width, np.float64)
    for code in range(1 << width):
        s = -1.0 if code & (1 << (width - 1)) else 1.0
        e = (code >> man_bits) & ((1 << exp_bits) - 1)
        m = code & ((1 << man_bits) - 1)
        top = e == (1 << exp_bits) - 1
        if not finite_only and ieee_specials and top:
            out[code] = s * np.inf if m == 0 else np.nan
            continue
        if not finite_only and not ieee_specials and top and m == (1 << man_bits) - 1:
            out[code] = np.nan                      # e4m3 has no infinities: S.1111.111 is NaN
            continue
        if e == 0:
            out[code] = s * m * 2.0 ** (1 - bias - man_bits)
        else:
            out[code] = s * (1 + m / (1 << man_bits)) * 2.0 ** (e - bias)
    return out


E4M3 = _decode_table(4, 3, False)       # max finite 448
E5M2 = _decode_table(5, 2, True)        # max finite 57344
E2M1 = _decode_table(2, 1, False, 4, True)      # max 6
E2M3 = _decode_table(2, 3, False, 6, True)      # max 7.5
E3M2 = _decode_table(3, 2, False, 6, True)      # max 28
TABLES = {"e4m3": E4M3, "e5m2": E5M2, "e2m1": E2M1, "e2m3": E2M3, "e3m2": E3M2}
WIDTH = {"e4m3": 8, "e5m2": 8, "e2m1": 4, "e2m3": 6, "e3m2": 6}
# NaN's code: e4m3/e5m2 have one; the MX formats take their largest positive value instead
NAN_CODE = {"e4m3": 0x7F, "e5m2": 0x7F, "e2m1": 0x7, "e2m3": 0x1F, "e3m2": 0x1F}
UE8M0 = np.array([2.0 ** (c - 127) for c in range(255)] + [np.nan])


def decode(codes, fmt: str) -> np.ndarray:
    return TABLES[fmt][np.asarray(codes).astype(np.intp) & ((1 << WIDTH[fmt]) - 1)]


def encode(x, fmt: str, relu: bool = False) -> np.ndarray:
    """Round to nearest even with .satfinite (what cvt.rn.satfinite does): values beyond the
    largest finite number, infinities included, clamp to it; NaN stays NaN."""
    table = TABLES[fmt]
    sign = 1 << (WIDTH[fmt] - 1)
    pos = table[:sign]                      # the codes of 0 and the positive values
    finite = np.isfinite(pos)
    mags = pos[finite]                      # increasing with the code
    codes = np.flatnonzero(finite)
    x = np.asarray(x, np.float64)
    if relu:
        x = np.where(x < 0, 0.0, x)
    a = np.minimum(np.abs(x), mags[-1])
    hi = np.clip(np.searchsorted(mags, a), 0, mags.size - 1)
    lo = np.maximum(hi - 1, 0)
    dlo, dhi = a - mags[lo], mags[hi] - a
    pick_hi = (dhi < dlo) | ((dhi == dlo) & (codes[hi] % 2 == 0))
    code = np.where(pick_hi, codes[hi], codes[lo])
    code = np.where(np.signbit(x), code | sign, code)       # -0 for negative underflow
    code = np.where(np.isnan(x), NAN_CODE[fmt], code)
    return code.astype(np.uint8)


def decode_ue8m0(codes) -> np.ndarray:
    return UE8M0[np.asarray(codes).astype(np.intp) & 0xFF]


def decode_scale(codes, fmt: str) -> np.ndarray:
    """Block-scale bytes of the block-scaled products as float64: `ue8m0` 2^(c - 127) (0xFF
    NaN) or `ue4m3`, NVFP4's unsigned e4m3 (bits 0-6 read as an e4m3 code; 0x7F is NaN).
    The PTX ISA calls ue4m3 unsigned and does not say what a set bit 7 does: the emulator
    ignores it."""
    if fmt == "ue8m0":
        return decode_ue8m0(codes)
    return E4M3[np.asarray(codes).astype(np.intp) & 0x7F]


def encode_ue8m0(x, mode: str, satfinite: bool) -> np.ndarray:
    """`cvt.{rz,rp}{.satfinite}.ue8m0x2`: |x| rounded to a power of two 2^(c - 127) toward zero
    (rz) or up (rp); below 2^-127 gives code 0. A value past 2^127 (rp), an infinity or NaN
    gives 0xFF, except that .satfinite turns the non-NaN ones into 0xFE (2^127). The sign is
    not looked at (the emulator's reading: the PTX ISA does not say)."""
    a = np.abs(np.asarray(x, np.float64))
    with np.errstate(divide="ignore", invalid="ignore"):
        m, e = np.frexp(a)                      # a = m * 2^e, m in [0.5, 1)
    floor_log2 = e.astype(np.int64) - 1
    exact = m == 0.5
    log2 = floor_log2 if mode == "rz" else np.where(exact, floor_log2, floor_log2 + 1)
    code = np.clip(log2 + 127, 0, 255)
    code = np.where(a == 0, 0, code)
    code = np.where(np.isinf(a), 255, code)
    if satfinite:
        code = np.where(code == 255, 254, code)
    code = np.where(np.isnan(a), 255, code)
    return code.astype(np.uint8)
