"""The instructions the emulator knows: every opcode root and, per root, every modifier it
accepts, as one inspectable table (docs/emulator.md, "Instruction coverage").

Decoding refuses an opcode whose root is not here, or that carries a modifier its root does not
list, with a `PTXParseError` "unsupported instruction 'OPCODE': ..." naming it, instead of
running it with the modifier silently ignored (a `.rz` read as round-to-nearest). Type suffixes
(`.f32`, `.b16`, `.e4m3x2`, ...) and matrix shapes (`.m16n8k16`, `.m64n128k16`, `.m8n8`) are
checked by the builders themselves. The census test (tests/emulator/test_emu_census.py) checks
every opcode the Tile code generator and the kept PTX corpora contain against this table.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .ptx_types import TYPE_NAMES

# memory qualifiers the emulator's sequentially consistent memory reads or ignores
_SPACES = {"global", "shared", "shared::cta", "shared::cluster", "local", "param",
           "param::entry", "param::func", "const"}
_ORDER = {"relaxed", "acquire", "release", "acq_rel", "sc", "weak", "volatile", "mmio",
          "cta", "cluster", "gpu", "sys"}
_CACHE = {"ca", "cg", "cs", "lu", "cv", "wb", "wt", "nc", "unified", "L1::evict_normal",
          "L1::evict_unchanged", "L1::evict_first", "L1::evict_last", "L1::no_allocate",
          "L2::evict_normal", "L2::evict_first", "L2::evict_last", "L2::cache_hint",
          "L2::64B", "L2::128B", "L2::256B"}
_VEC = {"v2", "v4", "v8"}
_ROUND = {"rn", "rz", "rm", "rp"}
_FLOAT = _ROUND | {"ftz", "sat"}
_CMP = {"eq", "ne", "lt", "le", "gt", "ge", "lo", "ls", "hi", "hs", "equ", "neu", "ltu", "leu",
        "gtu", "geu", "num", "nan"}
_ATOM_OPS = {"add", "min", "max", "and", "or", "xor", "exch", "cas", "inc", "dec", "noftz"}

KNOWN: dict[str, frozenset] = {name: frozenset(mods) for name, mods in {
    # integer and bit arithmetic
    "add": _FLOAT | {"cc"}, "sub": _FLOAT | {"cc"}, "addc": {"cc"}, "subc": {"cc"},
    "mul": _FLOAT | {"lo", "hi", "wide"}, "mad": _FLOAT | {"lo", "hi", "wide", "cc"},
    "madc": {"lo", "hi", "cc"}, "mul24": {"lo", "hi"}, "mad24": {"lo", "hi"},
    "div": _FLOAT | {"approx", "full"}, "rem": set(), "min": {"ftz", "NaN", "relu"},
    "max": {"ftz", "NaN", "relu"}, "neg": {"ftz"}, "abs": {"ftz"}, "and": set(), "or": set(),
    "xor": set(), "not": set(), "cnot": set(), "lop3": set(), "shl": set(), "shr": set(),
    "shf": {"l", "r", "wrap", "clamp"}, "popc": set(), "clz": set(), "brev": set(),
    "bfind": {"shiftamt"}, "bfe": set(), "bfi": set(), "prmt": {"f4e", "b4e", "rc8", "ecl",
                                                                 "ecr", "rc16"},
    # float
    "fma": _FLOAT, "copysign": set(), "testp": {"finite", "infinite", "number", "notanumber",
                                                "normal", "subnormal"},
    "rcp": _FLOAT | {"approx"}, "sqrt": _FLOAT | {"approx"}, "rsqrt": {"approx", "ftz"},
    "ex2": {"approx", "ftz"}, "lg2": {"approx", "ftz"}, "sin": {"approx", "ftz"},
    "cos": {"approx", "ftz"}, "tanh": {"approx"},
    # compare, select, move, convert
    "setp": _CMP | {"and", "or", "xor", "ftz"}, "set": _CMP | {"and", "or", "xor", "ftz"},
    "selp": set(), "slct": {"ftz"}, "mov": set(),
    "cvt": _FLOAT | {"rni", "rzi", "rmi", "rpi", "rna", "relu", "satfinite"},
    "cvta": {"to"} | _SPACES,
    # memory
    "ld": _SPACES | _ORDER | _CACHE | _VEC, "ldu": _SPACES | _VEC,
    "st": _SPACES | _ORDER | _CACHE | _VEC,
    "atom": _SPACES | _ORDER | _ATOM_OPS, "red": _SPACES | _ORDER | _ATOM_OPS,
    # NVLink SHARP: a store to / a reduction over every buffer a multicast address maps to
    "multimem": _SPACES | _ORDER | {"st", "ld_reduce", "add", "min", "max", "and", "or",
                                    "xor"},
    "mapa": _SPACES, "getctarank": _SPACES,
    "prefetch": _SPACES | {"L1", "L2", "tensormap", "L2::evict_normal", "L2::evict_last"},
    "prefetchu": {"L1"}, "discard": _SPACES | {"L2"}, "applypriority": _SPACES | {
        "L2::evict_normal"}, "createpolicy": {"fractional", "range", "L2::evict_last",
                                              "L2::evict_normal", "L2::evict_first",
                                              "L2::evict_unchanged"},
    "fence": {"proxy", "async", "async::generic", "async::global", "async::shared::cta",
              "async::shared::cluster", "tensormap::generic", "mbarrier_init"} | _ORDER |
    _SPACES,
    "membar": {"cta", "gl", "sys"}, "nanosleep": set(), "pmevent": {"mask"},
    "griddepcontrol": {"launch_dependents", "wait"},
    # control
    "bra": {"uni"}, "brx": {"idx", "uni"}, "ret": {"uni"}, "exit": set(), "trap": set(),
    "call": {"uni"},
    # warp, block, cluster
    "shfl": {"sync", "idx", "up", "down", "bfly"}, "vote": {"sync", "all", "any", "uni",
                                                             "ballot"},
    "activemask": set(), "redux": {"sync", "add", "min", "max", "and", "or", "xor"},
    "elect": {"sync"}, "match": {"sync", "any"},
    "bar": {"sync", "arrive", "red", "popc", "and", "or", "warp", "cta", "aligned"},
    "barrier": {"sync", "arrive", "red", "popc", "and", "or", "cta", "aligned", "cluster",
                "wait", "release", "acquire", "relaxed"},
    "setmaxnreg": {"inc", "dec", "sync", "aligned"},
    "mbarrier": {"init", "inval", "arrive", "arrive_drop", "expect_tx", "test_wait",
                 "try_wait", "parity", "noComplete"} | _ORDER | _SPACES,
    # tensor cores, asynchronous copies
    "mma": {"sync", "aligned", "row", "col", "satfinite", "kind::mxf8f6f4", "kind::mxf4nvf4",
            "kind::mxf4", "block_scale", "scale_vec::1X", "scale_vec::2X", "scale_vec::4X",
            "ue8m0", "ue4m3", "e2m1", "e2m3", "e3m2"},
    "ldmatrix": {"sync", "aligned", "x1", "x2", "x4", "trans"} | _SPACES,
    "stmatrix": {"sync", "aligned", "x1", "x2", "x4", "trans"} | _SPACES,
    "wgmma": {"fence", "mma_async", "commit_group", "wait_group", "sync", "aligned",
              "satfinite"},
    "cp": {"async", "ca", "cg", "commit_group", "wait_group", "wait_all", "mbarrier", "arrive",
           "noinc", "bulk", "tensor", "1d", "2d", "3d", "4d", "5d", "tile", "bulk_group",
           "read", "mbarrier::complete_tx::bytes", "multicast::cluster", "prefetch",
           "cta_group::2"} |
    _SPACES | _CACHE,
    "tcgen05": {"alloc", "dealloc", "relinquish_alloc_permit", "mma", "commit", "ld", "st",
                "wait::ld", "wait::st", "cp", "shift", "down", "fence::before_thread_sync",
                "fence::after_thread_sync", "cta_group::1", "cta_group::2", "multicast::cluster",
                "kind::f16", "kind::tf32",
                "kind::f8f6f4", "kind::i8", "kind::mxf8f6f4", "kind::mxf4", "kind::mxf4nvf4",
                "block_scale", "block16", "block32", "scale_vec::1X", "scale_vec::2X",
                "scale_vec::4X", "pack::16b", "unpack::16b", "mbarrier::arrive::one", "32x32b", "16x32bx2", "x1", "x2",
                "x4", "x8", "x16", "x32", "x64", "x128", "128x256b", "128x128b", "32x128b",
                "warpx4", "sync", "aligned"} | _SPACES,
    "tensormap": {"replace", "tile", "global_address", "rank", "box_dim", "global_dim",
                  "global_stride", "element_stride", "elemtype", "interleave_layout",
                  "swizzle_mode", "swizzle_atomicity", "fill_mode", "b1024", "cp_fenceproxy",
                  "tensormap::generic", "release", "sync", "aligned"} | _SPACES | _ORDER,
}.items()}

_SHAPE = re.compile(r"m\d+n\d+(k\d+)?$")


@dataclass(frozen=True)
class Verdict:
    """Whether the emulator knows an opcode; `why` says what it does not know."""
    known: bool
    why: str = ""


def classify(opcode: str) -> Verdict:
    """The emulator's verdict on a full dotted opcode such as `cvt.rz.f16x2.f32`."""
    root, *mods = opcode.split(".")
    allowed = KNOWN.get(root)
    if allowed is None:
        return Verdict(False, f"the emulator has no instruction {root!r}")
    for m in mods:
        if m in allowed or m in TYPE_NAMES or _SHAPE.match(m):
            continue
        return Verdict(False, f"the emulator does not know the modifier .{m} of {root}")
    return Verdict(True)
