"""Host conversions of the block-scaled formats (tilelang.runtime.mx_formats) against the
emulator's decode tables, which are built from the formats' definitions (fp8.py): every code
of every format, rounding on every f16 value, the f4 nibble order, and the refusals."""

import numpy as np
import pytest

from tilelang.emulator import fp8
from tilelang.runtime import mx_formats as mx

FORMATS = {"f4e2m1": ("e2m1", 16), "f6e2m3": ("e2m3", 64), "f6e3m2": ("e3m2", 64)}


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_every_code_round_trips_and_matches_the_definition(fmt):
    emu, n = FORMATS[fmt]
    c = np.arange(n, dtype=np.uint8)
    v = mx.values(c, fmt)
    assert np.array_equal(v, fp8.decode(c, emu)) and np.array_equal(np.signbit(v),
                                                                   np.signbit(fp8.decode(c, emu)))
    assert np.array_equal(mx.codes(v, fmt), c)


def test_every_scale_code():
    c = np.arange(255, dtype=np.uint8)                  # 0xFF is NaN: not a scale
    v = mx.values(c, "ue8m0")
    assert np.array_equal(v, 2.0 ** (c.astype(np.float64) - 127))
    assert np.array_equal(mx.codes(v, "ue8m0"), c)
    e = np.arange(128, dtype=np.uint8)                  # e4m3 scales: the non-negative codes
    ve = mx.values(e[:-1], "f8e4m3")                    # 0x7F is NaN
    assert np.array_equal(ve, fp8.decode(e[:-1], "e4m3"))
    assert np.array_equal(mx.codes(ve, "f8e4m3"), e[:-1])


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_rounding_on_every_f16_value(fmt):
    emu, _ = FORMATS[fmt]
    x = np.arange(1 << 16, dtype=np.uint16).view(np.float16).astype(np.float64)
    top = float(fp8.decode(np.arange(FORMATS[fmt][1]), emu).max())
    x = x[np.isfinite(x) & (np.abs(x) <= top)]
    assert np.array_equal(mx.codes(x, fmt), fp8.encode(x, emu))


def test_f4_packs_the_lower_element_in_the_low_nibble():
    assert mx.pack_f4e2m1([0.5, 6.0, -1.0, 0.0]).tolist() == [0x71, 0x0A]
    b = np.arange(256, dtype=np.uint8)
    assert np.array_equal(mx.pack_f4e2m1(mx.unpack_f4e2m1(b)), b)
    assert mx.unpack_f4e2m1(np.array([[0x71]], np.uint8)).tolist() == [[0.5, 6.0]]


@pytest.mark.parametrize("call,message", [
    (lambda: mx.codes([7.0], "f4e2m1"), r"7.0 cannot be stored as f4e2m1: values must be "
                                        r"finite and at most 6 in magnitude"),
    (lambda: mx.codes([np.nan], "f6e3m2"), r"cannot be stored as f6e3m2"),
    (lambda: mx.codes([0.0], "ue8m0"), r"0.0 cannot be stored as ue8m0: values must be "
                                       r"positive"),
    (lambda: mx.codes([-2.0], "f8e4m3"), r"f8e4m3 scales are non-negative"),
    (lambda: mx.pack_f4e2m1([1.0, 2.0, 3.0]), r"the last axis \(3\) must be even"),
    (lambda: mx.codes([1.0], "f5"), r"unknown block-scaled format 'f5'"),
])
def test_refusals(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_pack_f4_and_unpack_f4_along_either_axis():
    """`tilelang.pack_f4`: every pair of the 16 codes along the last axis or axis 0 (a (K, N)
    operand), element 2j in the low nibble of byte j; `unpack_f4` returns ml_dtypes
    float4_e2m1fn values, the exact inverse."""
    import ml_dtypes
    import tilelang
    codes = np.arange(16, dtype=np.uint8)
    pairs = np.stack(np.meshgrid(codes, codes, indexing="ij"), -1).reshape(256, 2)   # (lo, hi)
    x = pairs.view(ml_dtypes.float4_e2m1fn)
    p = tilelang.pack_f4(x)
    assert p.dtype == np.uint8 and p.shape == (256, 1)
    assert np.array_equal(p[:, 0], pairs[:, 0] | (pairs[:, 1] << 4))
    assert np.array_equal(p[:, 0], np.arange(256) % 16 * 16 + np.arange(256) // 16)
    u = tilelang.unpack_f4(p)
    assert u.dtype == ml_dtypes.float4_e2m1fn
    assert np.array_equal(u.view(np.uint8), pairs)
    q = tilelang.pack_f4(x.T, axis=0)                                   # (2, 256) -> (1, 256)
    assert np.array_equal(q, p.T) and np.array_equal(tilelang.unpack_f4(q, axis=0), x.T)
    assert np.array_equal(tilelang.pack_f4([[0.5, -6.0]]), [[0xF1]])   # numbers round exactly


@pytest.mark.parametrize("fn,args,message", [
    ("pack_f4", (np.zeros((2, 3)),), r"the last axis \(3\) must be even"),
    ("pack_f4", (np.array([[7.0, 0.0]]),), r"7\.0 cannot be stored as f4e2m1"),
    ("pack_f4", (np.zeros(4), 1), r"axis 1 is out of range"),
    ("unpack_f4", (np.zeros(4, np.int8),), r"packed bytes \(uint8\), not int8"),
])
def test_pack_f4_refusals(fn, args, message):
    import tilelang
    with pytest.raises(ValueError, match=message):
        getattr(tilelang, fn)(*args)


PACKED_KERNEL = """
kernel up(p: Array[f4e2m1x2, 2], out: Array[f32, 2]) {
    let t = load(p, index = (0, 0), shape = (4, 8));
    store(out, index = (0, 0), tile = astype(unpack_f4(t), f32));
}
"""


@pytest.mark.parametrize("backend", ["interp", "emulator"])
def test_packed_arrays_from_numpy_and_torch(backend):
    """A packed FP4 parameter takes uint8 bytes (NumPy) and torch's float4_e2m1fn_x2 tensors;
    an int8 array is refused naming both dtypes."""
    import tilelang
    from tilelang.runtime.errors import KernelArgumentError
    mod = tilelang.compile(PACKED_KERNEL, backend=backend, cache=False)
    rng = np.random.default_rng(2)
    p = rng.integers(0, 256, (4, 8)).astype(np.uint8)
    want = tilelang.unpack_f4(p).astype(np.float32)
    out = np.zeros((4, 16), np.float32)
    mod.up[(1,)](p, out)
    assert np.array_equal(out, want)
    torch = pytest.importorskip("torch")
    if not hasattr(torch, "float4_e2m1fn_x2"):
        pytest.skip("this torch has no float4_e2m1fn_x2")
    t = torch.from_numpy(p).view(torch.float4_e2m1fn_x2)
    out2 = torch.zeros((4, 16))
    mod.up[(1,)](t, out2)
    assert np.array_equal(out2.numpy(), want)
    with pytest.raises(KernelArgumentError, match=r"has dtype i8, expected f4e2m1x2"):
        mod.up[(1,)](p.view(np.int8), out)
