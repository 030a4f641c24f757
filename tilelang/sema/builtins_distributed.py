"""Kernels across devices (docs/distributed.md): symmetric arrays, their peers, the rank, and
signals with system-scope order.

A `Symmetric[Array[T, N]]` kernel parameter is one allocation made on every rank of a world at
the same offset of each rank's symmetric heap. `peer(x, r)` is rank r's buffer, an ordinary
`Array[T, N]` (load, store, gather, scatter, atomics); `rank()` and `world_size()` are the
launching rank and the number of ranks, read from the kernel's symmetric parameters (so a
kernel that calls them must have one: E0248).

Signals live on signal pads, integer arrays of one axis (usually `peer(pad, r)` of a symmetric
pad). `signal(pad, i, v, op = "set" | "add")` stores (or adds) `v` at `pad[i]` once for the
block, after every thread's earlier accesses, with release semantics at system scope;
`wait_until(pad, i, cmp, v)` returns once `pad[i] cmp v` holds, with acquire semantics at
system scope, so what the signalling block wrote before the signal is visible after the wait.
`barrier(pad, channel)` makes the blocks that call it with the same channel on every rank meet:
rank i adds 1 to slot `channel * world_size() + i` of every rank's pad, then waits until each
of its own slots `channel * world_size() + j` is at least 1 and takes 1 back; a pad that starts
at zero is at zero again after every complete barrier, so pads are reused across launches.

The reference interpreter runs one device: these built-ins run on the emulated world
(tilelang.distributed) and on GPUs, not in the interpreter (their references say so).
"""

from __future__ import annotations

from tilelang.diagnostics import TileError
from tilelang.sema.builtins_core import (ABSENT, STRING_KIND, Builtin, BoundArgs, Param, arg,
                                         common_shape, fail, found_typed, int_scalar, register)
from tilelang.sema.builtins_memory import (_check_element_value, _index_tiles, _mask_shape,
                                          check_choice)
from tilelang.sema.constants import ConstStr
from tilelang.sema.promotion import broadcast_all
from tilelang.sema.types import I32, VOID, ArrayType, SymmetricArrayType, TileType, Type, scalar

SIGNAL_DTYPES = ("i32", "u32", "i64", "u64")
# multimem (NVLink SHARP): the element types of multimem.st / multimem.ld_reduce and the
# reductions ld_reduce has for them (measured with ptxas 13: no float min/max; an i64 add is
# done as .u64, the same bits)
MULTIMEM_DTYPES = ("i32", "u32", "i64", "u64", "f32", "f64")
MULTIMEM_OPS = {"add": MULTIMEM_DTYPES, "min": ("i32", "u32", "i64", "u64"),
                "max": ("i32", "u32", "i64", "u64")}
SIGNAL_OPS = ("set", "add")
WAIT_CMPS = ("eq", "ne", "lt", "le", "gt", "ge")


def _symmetric(bound: BoundArgs, name: str, span) -> SymmetricArrayType:
    a = arg(bound, name)
    if not isinstance(a.type, SymmetricArrayType):
        raise fail("E0506", bound, name, f"must be a symmetric array (a kernel parameter of "
                                         f"type `Symmetric[Array[...]]`), found "
                                         f"{found_typed(a)}", span,
                   help="declare the parameter `Symmetric[Array[...]]` and allocate it on "
                        "every rank with `world.symmetric(...)` (docs/distributed.md)")
    return a.type


def _pad(bound: BoundArgs, name: str, span) -> ArrayType:
    a = arg(bound, name)
    t = a.type
    if isinstance(t, SymmetricArrayType):
        t = t.array
    elif not isinstance(t, ArrayType):
        raise fail("E0506", bound, name, f"must be a signal pad (an array, e.g. `peer(pad, r)`),"
                                         f" found {found_typed(a)}", span)
    if t.rank != 1 or t.dtype.name not in SIGNAL_DTYPES:
        raise fail("E0508", bound, name, f"is {t}, but a signal pad is an `Array` of one axis "
                                         f"of {', '.join(SIGNAL_DTYPES)}", span)
    return t


def _no_reference(name: str):
    def ref(*args, **kwargs):
        raise TileError(f"`{name}` needs a world of devices: the reference interpreter runs one "
                        f"device; run the kernel on tilelang.distributed.world(n) "
                        f"(docs/distributed.md)")
    return ref


def _peer_typing(bound: BoundArgs, span) -> Type:
    t = _symmetric(bound, "x", span)
    int_scalar(bound, "rank", arg(bound, "rank"), span)
    return t.array


def _world_typing(bound: BoundArgs, span) -> Type:
    return scalar(I32)


def _signal_typing(bound: BoundArgs, span) -> Type:
    pad = _pad(bound, "A", span)
    if isinstance(arg(bound, "A").type, SymmetricArrayType):
        raise fail("E0506", bound, "A", "is a symmetric array: say whose pad is signalled with "
                                        "`peer(A, r)`", span)
    int_scalar(bound, "index", arg(bound, "index"), span)
    _check_element_value(bound, "value", pad.dtype, span, scalar_only=True)
    check_choice(bound, "op", SIGNAL_OPS, span,
                 help='"set" stores the value, "add" adds it atomically')
    return VOID


def _wait_typing(bound: BoundArgs, span) -> Type:
    pad = _pad(bound, "A", span)
    if isinstance(arg(bound, "A").type, SymmetricArrayType):
        raise fail("E0506", bound, "A", "is a symmetric array: a block waits on its own pad, "
                                        "`peer(A, rank())`", span)
    int_scalar(bound, "index", arg(bound, "index"), span)
    c = arg(bound, "cmp")
    if not isinstance(c.const, ConstStr):
        raise fail("E0507", bound, "cmp", f"must be a string constant, found {found_typed(c)}",
                   span)
    check_choice(bound, "cmp", WAIT_CMPS, span)
    _check_element_value(bound, "value", pad.dtype, span, scalar_only=True)
    return VOID


def _barrier_typing(bound: BoundArgs, span) -> Type:
    _symmetric(bound, "A", span)
    _pad(bound, "A", span)
    if bound.given("channel"):
        int_scalar(bound, "channel", arg(bound, "channel"), span)
    return VOID


def _multimem_array(bound: BoundArgs, span) -> ArrayType:
    t = _symmetric(bound, "x", span).array
    if t.dtype.name not in MULTIMEM_DTYPES:
        raise fail("E0508", bound, "x", f"is a symmetric {t}, but multimem takes arrays of "
                                        f"{', '.join(MULTIMEM_DTYPES)}", span)
    return t


def _multimem_store_typing(bound: BoundArgs, span) -> Type:
    t = _multimem_array(bound, span)
    shapes = _index_tiles(bound, t, span) + _mask_shape(bound, span)
    _check_element_value(bound, "value", t.dtype, span)
    broadcast_all(shapes + [common_shape(bound, ["value"], span)], span)
    return VOID


def _multimem_reduce_typing(bound: BoundArgs, span) -> Type:
    t = _multimem_array(bound, span)
    check_choice(bound, "op", tuple(MULTIMEM_OPS), span)
    a = bound.args.get("op")
    op = a.const.value if a is not None and isinstance(a.const, ConstStr) else "add"
    if t.dtype.name not in MULTIMEM_OPS[op]:
        raise fail("E0508", bound, "x", f"is a symmetric {t}, but multimem_reduce's "
                                        f'"{op}" takes {", ".join(MULTIMEM_OPS[op])}', span,
                   help='multimem.ld_reduce has only "add" for floats')
    shape = broadcast_all(_index_tiles(bound, t, span) + _mask_shape(bound, span), span)
    return TileType(t.dtype, shape)


register(Builtin("peer", "memory", (Param("x"), Param("rank")), _peer_typing,
                 _no_reference("peer"),
                 doc="rank `rank`'s buffer of the symmetric array x, an array usable by load, "
                     "store and atomics; a rank outside [0, world_size()) gives an empty array"))
register(Builtin("rank", "memory", (), _world_typing, _no_reference("rank"),
                 doc="the rank of the device running the kernel, an `i32` in "
                     "[0, world_size())"))
register(Builtin("world_size", "memory", (), _world_typing, _no_reference("world_size"),
                 doc="the number of ranks of the world, an `i32`"))
register(Builtin("signal", "memory",
                 (Param("A"), Param("index"), Param("value"),
                  Param("op", STRING_KIND, ConstStr("set"), keyword_only=True)),
                 _signal_typing, _no_reference("signal"), side_effects=True,
                 doc='once for the block, after its earlier accesses: store (op = "set") or '
                     'add (op = "add") value at A[index], release at system scope'))
register(Builtin("wait_until", "memory",
                 (Param("A"), Param("index"), Param("cmp", STRING_KIND), Param("value")),
                 _wait_typing, _no_reference("wait_until"), side_effects=True,
                 doc='wait until `A[index] cmp value` ("eq", "ne", "lt", "le", "gt", "ge"), '
                     'acquire at system scope'))
register(Builtin("barrier", "memory", (Param("A"), Param("channel", default=ABSENT)),
                 _barrier_typing, _no_reference("barrier"), side_effects=True,
                 doc="meet the blocks calling barrier with the same channel (default 0) on "
                     "every rank, through slots [channel * world_size(), + world_size()) of the "
                     "symmetric signal pad A"))

register(Builtin("multimem_store", "memory",
                 (Param("x"), Param("indices"), Param("value"), Param("mask", default=ABSENT)),
                 _multimem_store_typing, _no_reference("multimem_store"), side_effects=True,
                 doc="store value[e] at x[indices[e]] of every rank at once through x's "
                     "multicast address (NVLink SHARP `multimem.st`, sm_90+); outside or "
                     "masked elements dropped"))
register(Builtin("multimem_reduce", "memory",
                 (Param("x"), Param("indices"),
                  Param("op", STRING_KIND, ConstStr("add"), keyword_only=True),
                  Param("mask", default=ABSENT)),
                 _multimem_reduce_typing, _no_reference("multimem_reduce"), side_effects=True,
                 doc='the reduction ("add", "min", "max") over every rank of x[indices[e]], read '
                     "at once through x's multicast address (NVLink SHARP "
                     "`multimem.ld_reduce`, sm_90+); 0 where outside or masked"))

# Built-ins that read the kernel's symmetric parameters (check_expr: E0248 without one)
NEEDS_SYMMETRIC = ("rank", "world_size")
