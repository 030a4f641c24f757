"""`astype` between every pair of dtypes and `bitcast` between equal widths, through the
emulator, bit for bit against the registry (`convert_values`, `to_bits`/`from_bits`); f8
conversions both as PTX cvt (sm_90a) and as integer code (sm_80), the block-scaled formats
(f4e2m1, f6e2m3, f6e3m2, ue8m0) as integer code (sm_80, sm_90a) and as PTX cvt (sm_100a). Independent checks: f8 codes
against a brute-force nearest-value search over the format's 256 codes, tf32 against ties-to-even
on the bit pattern. Packed FP4 (f4e2m1x2) has no `astype` (tests/sema) but bitcasts to and from
every 8-bit dtype."""

from __future__ import annotations

import numpy as np
import pytest

from scalar_support import KernelBatch, assert_same, dtype, link_all, reference
from tilelang.sema.builtins_dtype import F8_DECODE
from tilelang.sema.types import ALL_DTYPES, round_to_dtype

N = 512


def source_values(d, rng) -> np.ndarray:
    if d.is_bool:
        return np.array([True, False] * (N // 2))
    if d.is_int:
        edge = [0, 1, d.max, d.min, d.max - 1, 2 ** 24 + 1 if d.bits >= 32 else 3,
                (2 ** 53 + 1) if d.bits == 64 else 5, 65520 if d.bits >= 32 else 6]
        if d.signed:
            edge += [-1, -(2 ** 24 + 3) if d.bits >= 32 else -3]
        r = rng.integers(d.min, d.max, N - len(edge), dtype=d.storage_np_dtype, endpoint=True)
        return np.concatenate([np.array(edge, dtype=d.storage_np_dtype), r])
    edge = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, 448.0, 464.0, 465.0, 480.0,
            57344.0, 61440.0, 1e-3, 2.0 ** -6, 2.0 ** -9, 2.0 ** -10, 1.5 * 2.0 ** -9,
            2.0 ** -16, 2.5, -2.5, 3.5, 65504.0, 65520.0, 1e5, -1e5, 2.0 ** 31, -2.0 ** 31,
            2.0 ** 31 - 128, 2.0 ** 63, 2.0 ** 64, -1.5, 1 + 2.0 ** -11, 1 + 3 * 2.0 ** -11,
            1 + 2.0 ** -8 + 2.0 ** -30, 1e-40, 3.4e38, 1e300, -1e300]
    r = np.concatenate([rng.standard_normal(N // 2) * 4,
                        np.exp(rng.uniform(-30, 30, N - N // 2 - len(edge))) *
                        rng.choice([-1.0, 1.0], N - N // 2 - len(edge))])
    return round_to_dtype(np.concatenate([np.array(edge), r]), d)


def _batch(target: str):
    rng = np.random.default_rng(7)
    kb = KernelBatch(target)
    values = [d for d in ALL_DTYPES if d.name != "f4e2m1x2"]   # packed FP4: no astype
    for src in values:
        x = source_values(src, rng)
        for dst in values:
            if dst != src:
                kb.add("astype", [x], [src], {"dtype": dst})
    for src in ALL_DTYPES:
        for dst in ALL_DTYPES:
            if src != dst and not src.is_bool and not dst.is_bool and src.bits == dst.bits:
                kb.add("bitcast", [source_values(src, rng)], [src], {"dtype": dst})
    return kb


@pytest.fixture(scope="module", params=["sm_80", "sm_90a", "sm_100a"])
def ran(request):
    kb = _batch(request.param)
    kb.compile()
    link_all(kb.ptx, (request.param,))
    return kb.run()


def test_astype_and_bitcast_match_the_registry(ran):
    assert len(ran) > 240
    for c in ran:
        if c.op == "bitcast":
            _, ref = reference("bitcast", c.operands, c.dts, c.params)
            ref = np.asarray(entry_bitcast(c))
        else:
            _, ref = reference(c.op, c.operands, c.dts, c.params)
        assert_same(c.out, ref, c.operands, f"{c.op} {c.dts[0]} -> {c.params['dtype']}")


def entry_bitcast(c):
    from tilelang.sema.builtins import REGISTRY
    return REGISTRY["bitcast"].ref(c.operands[0], c.params["dtype"], src=c.dts[0])


def _nearest_f8(x: np.ndarray, name: str) -> np.ndarray:
    """Brute force: the representable value nearest to x (ties to the even code), saturating."""
    table = F8_DECODE[name][:128].astype(np.float64)
    finite = table[np.isfinite(table)]
    top = finite.max()
    out = []
    for v in x.astype(np.float64):
        if np.isnan(v):
            out.append(np.nan)
            continue
        a = min(abs(v), top)
        d = np.abs(finite - a)
        best = np.flatnonzero(d == d.min())
        code = best[0] if len(best) == 1 else best[best % 2 == 0][0]
        out.append(np.copysign(finite[code], v))
    return np.array(out)


@pytest.mark.parametrize("name", ["f8e4m3", "f8e5m2"])
@pytest.mark.parametrize("src", ["f32", "f64", "f16", "bf16"])
def test_f8_rounding_is_nearest_even_with_saturation(ran, name, src):
    (c,) = [c for c in ran if c.op == "astype" and c.dts == [dtype(src)]
            and c.params["dtype"] == dtype(name)]
    assert_same(c.out.astype(np.float64), _nearest_f8(c.operands[0], name), c.operands, name)


def test_tf32_rounds_ties_to_even(ran):
    (c,) = [c for c in ran if c.op == "astype" and c.dts == [dtype("f32")]
            and c.params["dtype"] == dtype("tf32")]
    x = c.operands[0].astype(np.float32)
    bits = x.view(np.uint32).astype(np.uint64)
    r = ((bits + 0xFFF + ((bits >> 13) & 1)) & ~np.uint64(0x1FFF)).astype(np.uint32)
    want = np.where(np.isnan(x), x, r.view(np.float32))
    assert_same(c.out, want, [x], "tf32")


def test_float_to_int_truncates_and_saturates(ran):
    for dst in ("i8", "u8", "i32", "u32", "i64", "u64"):
        d = dtype(dst)
        (c,) = [c for c in ran if c.op == "astype" and c.dts == [dtype("f64")]
                and c.params["dtype"] == d]
        x = c.operands[0]
        want = [0 if np.isnan(v) else int(max(d.min, min(d.max, np.trunc(v)))) if np.isfinite(v)
                else (d.max if v > 0 else d.min) for v in x.tolist()]
        assert c.out.tolist() == want, dst
