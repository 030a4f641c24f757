"""The 8-bit float formats of sm_89+ (e4m3 and e5m2): decoding tables and rounding encoders."""

from __future__ import annotations

import numpy as np


def _decode_table(exp_bits: int, man_bits: int, ieee_specials: bool) -> np.ndarray:
    bias = (1 << (exp_bits - 1)) - 1
    out = np.empty(256, np.float64)
    for code in range(256):
        s = -1.0 if code & 0x80 else 1.0
        e = (code >> man_bits) & ((1 << exp_bits) - 1)
        m = code & ((1 << man_bits) - 1)
        if ieee_specials and e == (1 << exp_bits) - 1:
            out[code] = s * np.inf if m == 0 else np.nan
        elif not ieee_specials and e == (1 << exp_bits) - 1 and m == (1 << man_bits) - 1:
            out[code] = np.nan                      # e4m3 has no infinities: S.1111.111 is NaN
        elif e == 0:
            out[code] = s * m * 2.0 ** (1 - bias - man_bits)
        else:
            out[code] = s * (1 + m / (1 << man_bits)) * 2.0 ** (e - bias)
    return out


E4M3 = _decode_table(4, 3, False)       # max finite 448
E5M2 = _decode_table(5, 2, True)        # max finite 57344
TABLES = {"e4m3": E4M3, "e5m2": E5M2}
NAN_CODE = {"e4m3": 0x7F, "e5m2": 0x7F}


def decode(codes, fmt: str) -> np.ndarray:
    return TABLES[fmt][np.asarray(codes).astype(np.intp) & 0xFF]


def encode(x, fmt: str, relu: bool = False) -> np.ndarray:
    """Round to nearest even with .satfinite (what cvt.rn.satfinite does): values beyond the
    largest finite number, infinities included, clamp to it; NaN stays NaN."""
    table = TABLES[fmt]
    pos = table[:128]                       # codes 0..127: 0 and the positive values
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
    code = np.where(np.signbit(x), code | 0x80, code)       # -0 for negative underflow
    code = np.where(np.isnan(x), NAN_CODE[fmt], code)
    return code.astype(np.uint8)
