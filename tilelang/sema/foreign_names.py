"""Help for names written as in Triton, CUDA C++, NumPy or Python: a name Tile does not define
but another GPU language does gets "did you mean" the Tile spelling (docs/language.md,
"Coming from Triton or CUDA") instead of the generic "declare it". A prefix such as `tl.`
is a module Tile does not have: `tl.exp` means the built-in `exp`."""

from __future__ import annotations

from .builtins import BUILTINS
from .types import DTYPES

# A foreign spelling -> the Tile one (a built-in, a dtype or a keyword).
RENAMED: dict[str, str] = {
    "program_id": "bid", "num_programs": "num_blocks",
    "blockIdx": "bid", "gridDim": "num_blocks",
    "dot": "matmul", "trans": "transpose", "view": "reshape", "cast": "astype",
    "device_print": "print", "div_rn": "div",
    "float32": "f32", "float16": "f16", "bfloat16": "bf16", "float64": "f64",
    "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
    "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64", "int1": "bool",
    "float8e4nv": "f8e4m3", "float8e5": "f8e5m2",
    "True": "true", "False": "false",
}

# Foreign names with no one Tile counterpart: why.
NO_COUNTERPART: dict[str, str] = {
    "threadIdx": "a Tile kernel works on whole tiles: there is no thread index; use `bid` "
                 "for the block and `arange` for positions within a tile",
    "blockDim": "a Tile kernel works on whole tiles: the compiler chooses the threads; "
                "use the tile's `shape`",
    "__syncthreads": "a Tile kernel needs no barrier: the compiler synchronizes the threads "
                     "between the operations of a tile",
    "debug_barrier": "a Tile kernel needs no barrier: the compiler synchronizes the threads "
                     "between the operations of a tile",
    "constexpr": "a compile-time parameter is written `const NAME: i32` in the kernel's "
                 "parameter list",
    "None": "Tile has no `None`",
}

# Module prefixes of other languages: `tl.exp` is Tile's `exp`.
NAMESPACES = frozenset({"tl", "triton", "torch", "np", "numpy", "math", "libdevice", "cuda"})


def _tile_name(name: str) -> str | None:
    if name in BUILTINS or name in DTYPES:
        return name
    return RENAMED.get(name)


def _foreign_help() -> dict[str, str]:
    out = {k: f"did you mean `{v}`? (`{k}` is how Triton, CUDA or Python spells it)"
           for k, v in RENAMED.items()}
    out.update(NO_COUNTERPART)
    return out


FOREIGN_NAMES: dict[str, str] = _foreign_help()


def foreign_member(prefix: str, attr: str) -> str | None:
    """The help for `prefix.attr` where `prefix` is another language's module, else None."""
    if prefix not in NAMESPACES:
        return None
    tile = _tile_name(attr)
    if tile is not None:
        return f"Tile's built-ins take no module prefix: did you mean `{tile}`?"
    why = NO_COUNTERPART.get(attr)
    if why is not None:
        return f"Tile's built-ins take no module prefix, and {why}"
    return "Tile's built-ins take no module prefix; `tl.`-style modules do not exist here " \
        "(docs/language.md lists the built-ins)"
