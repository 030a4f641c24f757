"""Element types as the array libraries spell them, mapped to Tile dtype names, and the exact
packing of scalar arguments (docs/abi.md: every scalar at its own width).

Only names are compared (`str(torch.float32)`, NumPy dtype names, DLPack codes), so nothing
here imports torch or CuPy.
"""

from __future__ import annotations

import struct

import numpy as np

# NumPy dtype name -> Tile dtype (ml_dtypes gives NumPy the bf16 and f8 names).
NUMPY_TO_TILE = {
    "bool": "bool", "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
    "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64",
    "float16": "f16", "float32": "f32", "float64": "f64",
    "bfloat16": "bf16", "float8_e4m3fn": "f8e4m3", "float8_e5m2": "f8e5m2",
    # the block-scaled formats, one value per byte (docs/language.md "Block-scaled formats")
    "float4_e2m1fn": "f4e2m1", "float6_e2m3fn": "f6e2m3", "float6_e3m2fn": "f6e3m2",
    "float8_e8m0fnu": "ue8m0",
}
# Dtypes whose elements are one code byte (f8, f6, f4 one per byte, ue8m0): host arrays of
# uint8 are taken as the codes themselves, and NumPy needs ml_dtypes to name them.
CODE_BYTES = ("f8e4m3", "f8e5m2", "f4e2m1", "f6e2m3", "f6e3m2", "ue8m0")
# Packed FP4 (two f4e2m1 codes a byte, the even element in bits 0-3: docs/language.md "Packed
# FP4"): its host arrays are the bytes, uint8 (NumPy, torch) or torch's float4_e2m1fn_x2.
PACKED_F4 = "f4e2m1x2"

TORCH_TO_TILE = {f"torch.{k}": v for k, v in NUMPY_TO_TILE.items()}
TORCH_TO_TILE["torch.float4_e2m1fn_x2"] = PACKED_F4

# DLPack (type code, bits) -> Tile dtype. Codes: 0 int, 1 uint, 2 float, 4 bfloat, 6 bool,
# 10 float8_e4m3fn, 12 float8_e5m2 (dlpack.h, DLDataTypeCode).
DLPACK_TO_TILE = {
    (0, 8): "i8", (0, 16): "i16", (0, 32): "i32", (0, 64): "i64",
    (1, 8): "u8", (1, 16): "u16", (1, 32): "u32", (1, 64): "u64",
    (2, 16): "f16", (2, 32): "f32", (2, 64): "f64", (4, 16): "bf16", (6, 8): "bool",
    (10, 8): "f8e4m3", (12, 8): "f8e5m2",
}

ITEMSIZE = {"bool": 1, "i8": 1, "u8": 1, "i16": 2, "u16": 2, "f16": 2, "bf16": 2,
            "i32": 4, "u32": 4, "f32": 4, "tf32": 4, "i64": 8, "u64": 8, "f64": 8,
            "f8e4m3": 1, "f8e5m2": 1, "f4e2m1": 1, "f6e2m3": 1, "f6e3m2": 1, "ue8m0": 1,
            PACKED_F4: 1}

# The NumPy dtype a Tile dtype's host arrays have (bf16 and f8 only with ml_dtypes installed).
TILE_TO_NUMPY = {v: k for k, v in NUMPY_TO_TILE.items()}
TILE_TO_NUMPY["tf32"] = "float32"
TILE_TO_NUMPY[PACKED_F4] = "uint8"


def numpy_dtype(tile: str) -> np.dtype:
    """The NumPy dtype for host arrays of a Tile dtype (raises ValueError if NumPy has none)."""
    name = TILE_TO_NUMPY[tile]
    try:
        return np.dtype(name)
    except TypeError:
        try:
            import ml_dtypes  # noqa: F401  (registers bfloat16 / float8 with NumPy)
            return np.dtype(getattr(ml_dtypes, name))
        except (ImportError, AttributeError):
            raise ValueError(f"NumPy has no `{tile}` dtype here (install ml_dtypes)") from None


def tile_of_numpy(dt: np.dtype) -> str | None:
    return NUMPY_TO_TILE.get(dt.name)


def accepts(param_dtype: str, arg_dtype: str | None) -> bool:
    """An array of `arg_dtype` may be passed as `Array[param_dtype, N]`. tf32 arrays are
    stored as 32-bit floats, so f32 arrays are what they are made of; packed FP4 arrays are
    bytes, so u8 arrays are."""
    return arg_dtype == param_dtype or (param_dtype == "tf32" and arg_dtype == "f32") or \
        (param_dtype == PACKED_F4 and arg_dtype == "u8")


# ---------------------------------------------------------------------------------------------
# Scalars

STRUCT_CHAR = {"bool": "B", "i8": "b", "u8": "B", "i16": "h", "u16": "H", "i32": "i",
               "u32": "I", "i64": "q", "u64": "Q", "f16": "e", "f32": "f", "tf32": "f",
               "f64": "d", "bf16": "H", "f8e4m3": "B", "f8e5m2": "B", "f4e2m1": "B",
               "f6e2m3": "B", "f6e3m2": "B", "ue8m0": "B", PACKED_F4: "B"}

INT_RANGE = {"i8": (-2**7, 2**7), "u8": (0, 2**8), "i16": (-2**15, 2**15), "u16": (0, 2**16),
             "i32": (-2**31, 2**31), "u32": (0, 2**32), "i64": (-2**63, 2**63),
             "u64": (0, 2**64)}

FLOATS = ("f16", "bf16", "f32", "tf32", "f64", "f8e4m3", "f8e5m2", "f4e2m1", "f6e2m3", "f6e3m2",
          "ue8m0")


def _bf16_bits(v: float) -> int:
    from tilelang.sema.types import round_to_bf16
    r = round_to_bf16(np.float64(v))
    return int(np.asarray(r, np.float32).view(np.uint32)) >> 16


def _f8_bits(fmt: str):
    def conv(v: float) -> int:
        from tilelang.emulator.fp8 import encode
        return int(encode(np.float64(v), fmt))
    return conv


# Scalars whose bits differ from what struct packs directly: value -> integer bits.
def _code_bits(tile: str):
    def conv(v: float) -> int:
        from tilelang.sema.builtins_dtype import to_bits
        from tilelang.sema.types import DTYPES
        return int(to_bits(np.float64(v), DTYPES[tile]))
    return conv


SCALAR_CONVERT = {"bf16": _bf16_bits, "f8e4m3": _f8_bits("e4m3"), "f8e5m2": _f8_bits("e5m2"),
                  **{t: _code_bits(t) for t in ("f4e2m1", "f6e2m3", "f6e3m2", "ue8m0")}}


def scalar_problem(dtype: str, value) -> str | None:
    """Why `value` cannot be passed as a `dtype` scalar, or None when it can (docs/python-api.md,
    "Scalars"). Python and NumPy numbers are accepted when the value is representable: ints
    (and NumPy integers of any width) for integer parameters, range checked; ints and floats
    for float parameters, refused where they round to infinity; bools and 0/1 for bool. A bool
    is refused for integer and float parameters, as for grids: `True` where a count belongs is
    a mistake more often than a 1."""
    if isinstance(value, np.generic) and value.shape == ():
        value = value.item()
    if dtype == "bool":
        if isinstance(value, bool) or (isinstance(value, int) and value in (0, 1)):
            return None
        return f"expected a bool (or 0/1), got {_describe(value)}"
    if isinstance(value, bool):
        return (f"expected {'an integer' if dtype in INT_RANGE else 'a number'}, got "
                f"{_describe(value)} (a bool is refused for {dtype}: pass "
                f"`{'int' if dtype in INT_RANGE else 'float'}(x)`)")
    if dtype in INT_RANGE:
        if not isinstance(value, int):
            return f"expected an integer, got {_describe(value)}"
        lo, hi = INT_RANGE[dtype]
        if not lo <= value < hi:
            return f"{value} does not fit {dtype} (range {lo}..{hi - 1})"
        return None
    if not isinstance(value, (int, float)):
        return f"expected a number, got {_describe(value)}"
    try:
        f = float(value)
    except OverflowError:                       # an int beyond every float format
        return f"{value} overflows {dtype}"
    if dtype in ("f16", "f32", "tf32") and np.isfinite(f):
        try:                                    # overflow = rounds to infinity, as packing
            struct.pack("<" + STRUCT_CHAR[dtype], f)
        except OverflowError:
            largest = "65504" if dtype == "f16" else "3.4028235e+38"
            return f"{value} overflows {dtype} (largest finite {largest})"
    return None


def pack_scalar(dtype: str, value) -> bytes:
    """The exact bytes of a scalar argument (little endian)."""
    if isinstance(value, np.generic):
        value = value.item()
    conv = SCALAR_CONVERT.get(dtype)
    if conv is not None:
        value = conv(float(value))
    elif dtype == "bool":
        value = int(bool(value))
    return struct.pack("<" + STRUCT_CHAR[dtype], value)


def _describe(value) -> str:
    if isinstance(value, np.generic):
        return f"a NumPy {value.dtype} scalar"
    if isinstance(value, (bool, int, float)):
        return f"{type(value).__name__} {value!r}"
    return f"a {type(value).__module__}.{type(value).__qualname__}" \
        if type(value).__module__ != "builtins" else f"a {type(value).__name__}"


def numpy_problem(dt: np.dtype, ptr: int = 0) -> tuple | None:
    """(code, message, help) for a NumPy dtype or address no kernel can read as it is: a
    non-native byte order (its name is still `float32`: the bytes would be read swapped),
    structured and object dtypes, an address that is not a multiple of the element size."""
    if dt.fields is not None or dt.subdtype is not None:
        return ("E0911", f"has the structured dtype {dt}, which is not a Tile dtype",
                "pass each field as its own array, e.g. `np.ascontiguousarray(x['name'])`")
    if dt.hasobject:
        return ("E0911", "holds Python objects (dtype object), not numbers",
                "convert it to a numeric dtype first, e.g. `x.astype(np.float32)`")
    if not dt.isnative:
        order = "big" if dt.byteorder == ">" else "little"
        return ("E0911", f"has {order}-endian elements ({dt.str}); kernels read the device's "
                "native (little-endian) byte order",
                f"convert it first: `x.astype('{dt.newbyteorder('=').str}')` or "
                "`np.ascontiguousarray(x, dtype=x.dtype.newbyteorder('='))`")
    if dt.itemsize and ptr % dt.itemsize:
        return ("E0914", f"starts at an address that is not a multiple of its element size "
                f"({dt.itemsize} bytes)", "pass an aligned copy, e.g. `x.copy()`")
    return None
