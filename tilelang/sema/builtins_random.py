"""Random-number built-ins: `randint(seed, offset)`, `rand(seed, offset)`, `randn(seed, offset)`.

Counter-based Philox-4x32-10 (Salmon, Moraes, Dror & Shaw, "Parallel random numbers: as easy as
1, 2, 3", SC 2011), with Triton's conventions so that the same seed and offsets give the same
numbers as `tl.randint`/`tl.rand`/`tl.randn`:

- `seed` is an integer scalar, widened to 64 bits (a signed seed is sign-extended, as Triton's
  `seed.to(uint64)` does); its low and high words are the key (k0, k1).
- `offset` is an integer tile; the counter is (c0, c1, c2, c3) = (low 32 bits of the offset,
  its high 32 bits for a 64-bit dtype and 0 otherwise, 0, 0).
- `randint` is the first output word c0 after 10 rounds, as `u32`.
- `rand` reads that word as i32, maps a negative x to ~x and multiplies by 4.6566127342e-10 in
  f32, giving a float in [0, 1).
- `randn` takes the first two words u1, u2 to uniforms as `rand` does and returns the
  Box-Muller cosine branch sqrt(-2 log(max(u1, 1e-7))) * cos(2 pi u2), in f32.

The results have the offset's shape. The reference below runs the same 32-bit arithmetic on
NumPy arrays; `randn` uses NumPy's f32 log, sqrt and cos (correctly rounded or within an ulp),
so the GPU's value may differ from it in the last bits.
"""

from __future__ import annotations

from tilelang.lazy import lazy_module

from tilelang.sema.builtins_core import Builtin, BoundArgs, Param, fail, register, tile_of
from tilelang.sema.constants import ConstValue
from tilelang.sema.types import F32, U32, DType, TileType

np = lazy_module("numpy")

PHILOX_KEY_A = 0x9E3779B9
PHILOX_KEY_B = 0xBB67AE85
PHILOX_ROUND_A = 0xD2511F53
PHILOX_ROUND_B = 0xCD9E8D57
PHILOX_ROUNDS = 10
UNIFORM_SCALE = 4.6566127342e-10  # largest s with (2**31 - 1) * s < 1 in f32 (Triton's)
NORMAL_FLOOR = 1.0e-7


def philox(seed: int, c0, c1, c2, c3, rounds: int = PHILOX_ROUNDS):
    """Philox-4x32 on uint32 arrays with the key (low, high) words of the 64-bit `seed`."""
    m = np.uint64(0xFFFFFFFF)
    k0 = np.uint64(seed & 0xFFFFFFFF)
    k1 = np.uint64((seed >> 32) & 0xFFFFFFFF)
    c = [np.asarray(v).astype(np.uint64) for v in (c0, c1, c2, c3)]
    a, b = np.uint64(PHILOX_ROUND_A), np.uint64(PHILOX_ROUND_B)
    for _ in range(rounds):
        p0, p2 = a * c[0], b * c[2]  # 32 x 32 -> 64 bits: never overflows uint64
        c = [((p2 >> np.uint64(32)) ^ c[1] ^ k0) & m, p2 & m,
             ((p0 >> np.uint64(32)) ^ c[3] ^ k1) & m, p0 & m]
        k0 = (k0 + np.uint64(PHILOX_KEY_A)) & m
        k1 = (k1 + np.uint64(PHILOX_KEY_B)) & m
    return [v.astype(np.uint32) for v in c]


def _counters(offset, dtype: DType | None):
    off = np.asarray(offset)
    wide = off.astype(np.int64).view(np.uint64) if off.dtype.kind in "ib" \
        else off.astype(np.uint64)  # two's complement bits, as Triton's casts keep them
    lo = (wide & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    bits = dtype.bits if dtype is not None else off.dtype.itemsize * 8
    hi = (wide >> np.uint64(32)).astype(np.uint32) if bits > 32 else np.zeros_like(lo)
    zero = np.zeros_like(lo)
    return lo, hi, zero, zero


def _seed64(seed) -> int:
    s = int(np.asarray(seed).item())
    return s & 0xFFFFFFFFFFFFFFFF  # sign extension then the low 64 bits, like seed.to(uint64)


def randint4x(seed, offset, offset_dtype: DType | None = None):
    """The four Philox output words for each offset (uint32 arrays of the offset's shape)."""
    return philox(_seed64(seed), *_counters(offset, offset_dtype))


def uniform(x):
    """Triton's uint_to_uniform_float for 32-bit words: f32 in [0, 1)."""
    i = np.asarray(x).astype(np.uint32).view(np.int32)
    i = np.where(i < 0, ~i, i)
    return (i.astype(np.float32) * np.float32(UNIFORM_SCALE)).astype(np.float32)


def normal(u1, u2):
    """Box-Muller, cosine branch, in f32."""
    u1 = np.maximum(np.float32(NORMAL_FLOOR), u1).astype(np.float32)
    th = (np.float32(6.283185307179586) * u2).astype(np.float32)
    with np.errstate(all="ignore"):
        r = np.sqrt((np.float32(-2.0) * np.log(u1)).astype(np.float32)).astype(np.float32)
        return (r * np.cos(th).astype(np.float32)).astype(np.float32)


def _randint_ref(seed, offset, offset_dtype=None):
    return randint4x(seed, offset, offset_dtype)[0]


def _rand_ref(seed, offset, offset_dtype=None):
    return uniform(randint4x(seed, offset, offset_dtype)[0])


def _randn_ref(seed, offset, offset_dtype=None):
    w = randint4x(seed, offset, offset_dtype)
    return normal(uniform(w[0]), uniform(w[1]))


def _typing(result: DType):
    def typing(bound: BoundArgs, span) -> TileType:
        s = tile_of(bound, "seed", span)
        if isinstance(s, TileType):
            if s.shape != ():
                raise fail("E0509", bound, "seed", f"must be a scalar, found {s}", span,
                           help="one seed per call; vary the offsets for different numbers")
            if not s.dtype.is_int or s.dtype.is_bool:
                raise fail("E0508", bound, "seed", f"must be an integer, found {s}", span,
                           help="convert first: `astype(seed, i64)`")
        elif not isinstance(s, ConstValue) or not isinstance(s.value, int) \
                or isinstance(s.value, bool):
            raise fail("E0508", bound, "seed", f"must be an integer, found `{s}`", span)
        o = tile_of(bound, "offset", span)
        if isinstance(o, ConstValue):
            if not isinstance(o.value, int) or isinstance(o.value, bool):
                raise fail("E0508", bound, "offset", f"must be an integer, found `{o}`", span)
            return TileType(result, ())
        if not o.dtype.is_int or o.dtype.is_bool:
            raise fail("E0508", bound, "offset", f"must be an integer tile, found {o}", span,
                       help="offsets count elements: build them with `arange` and integer "
                            "arithmetic")
        return TileType(result, o.shape)
    return typing


def _hints(bound: BoundArgs, span) -> dict:
    o = tile_of(bound, "offset", span)
    return {"offset_dtype": o.dtype if isinstance(o, TileType) else None}


_PARAMS = (Param("seed"), Param("offset"))
_SIGNATURE = ("`seed` is an integer scalar, `offset` an integer tile of counters; the "
              "same seed and offsets give the same numbers as Triton's `tl.{0}`")
register(Builtin("randint", "random", _PARAMS, _typing(U32), _randint_ref, ref_hints=_hints,
                 doc="`randint(seed, offset)`: a random `u32` per offset (Philox-4x32-10); "
                     + _SIGNATURE.format("randint")))
register(Builtin("rand", "random", _PARAMS, _typing(F32), _rand_ref, ref_hints=_hints,
                 doc="`rand(seed, offset)`: a uniform f32 in [0, 1) per offset; "
                     + _SIGNATURE.format("rand")))
register(Builtin("randn", "random", _PARAMS, _typing(F32), _randn_ref, ref_hints=_hints,
                 doc="`randn(seed, offset)`: a standard normal f32 per offset (Box-Muller); "
                     + _SIGNATURE.format("randn")))
