"""Rematerialization: a tile computed from `arange`, splats and scalars alone (a key mask
`cols < seq`, causal positions) is computed again in the layout a consumer wants instead of
being moved there through shared memory or shuffles, as Triton's layout-conversion removal does.

The dispatch (walk.py's `emit_builtin`) marks such a result with its op (`TileVal.origin`,
when `pure` says every tile operand is a scalar or itself marked and the chain costs at most
`MAX_COST` ops per element); `emit.sync.broadcast` calls `rematerialize` when a marked tile would need
data movement. Each op is re-emitted in a layout derived backwards from the wanted one:
relabellings invert (`reshape` / `expand_dims` by the row-major index, `permute` by the inverse
permutation), a broadcast operand takes the wanted layout with its stretched axes dropped
(its registers are then a renaming of the wanted layout's), `arange` adds each register's
index to the thread's. Nothing here reads or writes memory, so a value may be emitted again
anywhere its scalars dominate (the use point of the original, which they dominate).
"""

from __future__ import annotations

import llvmlite.ir as ir

from tilelang.codegen.layouts import convert as C
from tilelang.codegen.layouts import distributed as L
from tilelang.codegen.emit.values import TileVal
from tilelang.codegen.scalar.emitter import ELEMENTWISE
from tilelang.ir.values import Value
from tilelang.record import replace
from tilelang.sema.constants import ConstStr, ConstValue
from tilelang.sema.types import I32 as T_I32, DType

I32 = ir.IntType(32)

MAX_COST = 12                       # element ops per register a re-emitted chain may cost
RELABEL = ("reshape", "expand_dims", "permute", "transpose")
SPLAT = ("zeros", "ones", "full")
# `/` has a shared-reciprocal path in lower/elementwise.py: re-emitting it element-wise could
# round differently from the original; integer-only helpers are cheap and exact
ELEMENT_OPS = (ELEMENTWISE - {"/", "div"}) | {"where", "cdiv", "floordiv"}


def _tile_args(op) -> list[Value]:
    return [a for _, a in op.args if isinstance(a, Value)]


def pure(kern, op) -> bool:
    """Whether `op`'s result can be re-emitted in any layout (every tile operand a scalar or
    itself re-emittable), recording its cost per element in `kern.remat_cost`."""
    name = op.name
    if not (name == "arange" or name in SPLAT or name in RELABEL or name == "broadcast_to"
            or name in ELEMENT_OPS):
        return False
    if op.result is None or not getattr(op.result.type, "shape", None):
        return False                 # scalars rename into any layout already
    cost = 1
    for a in _tile_args(op):
        t = kern.env.get(a.id)
        if t is None or not hasattr(t, "layout"):
            return False
        if t.shape == ():
            continue
        if t.origin is None:
            return False
        cost += kern.remat_cost.get(a.id, MAX_COST + 1)
    if cost > MAX_COST:
        return False
    kern.remat_cost[op.result.id] = cost
    return True


def broadcast_source(dst: L.Layout, shape: tuple[int, ...]) -> L.Layout | None:
    """The layout of a tile of `shape` (NumPy-broadcastable to dst.shape) whose registers are
    a renaming of dst's: dst with the stretched and the missing leading axes dropped. None for
    a basis mixing dropped and kept axes (an XOR layout)."""
    off = dst.rank - len(shape)
    drop = tuple(d for d in range(dst.rank)
                 if d < off or (shape[d - off] == 1 and dst.shape[d] != 1))
    keep = [d for d in range(dst.rank) if d not in drop]
    for b in dst.bases:
        if any(b[d] for d in drop) and any(b[d] for d in keep):
            return None
    lay = L.drop_axes(dst, drop, True) if drop else dst
    return L.reshape(lay, tuple(shape))


def rematerialize(kern, src, dst: L.Layout):
    """`src` (a TileVal with an origin) computed again in `dst` (same shape), or None."""
    if src.origin is None or src.shape != dst.shape:
        return None
    try:
        return _emit(kern, src.origin, dst)
    except _Declined:
        return None


def full_value(kern, op) -> ir.Value:
    """`full`'s value, in the result's element type (also lower/creation.py's `full`)."""
    rt = op.result.type
    v = op.arg_map["value"]
    if isinstance(v, Value):
        t = kern.tile(v)
        return t.value if t.dtype == rt.dtype else kern.se.cast(t.value, t.dtype, rt.dtype)
    return kern.se.constant(v.value, rt.dtype)


def arange_in(kern, lay, dtype) -> TileVal:
    """`arange` in `lay` (also lower/creation.py's `arange`): each register's linear index,
    the thread's part computed once."""
    base = kern.thread_linear(lay.thread_weights())
    b = kern.builder
    regs = []
    for r in range(lay.num_regs):
        i = b.add(base, ir.Constant(I32, lay.reg_linear(r)))
        regs.append(i if dtype == T_I32 else kern.se.cast(i, T_I32, dtype))
    return TileVal(dtype, lay, tuple(regs))


class _Declined(Exception):
    pass


def _operand(kern, a: Value, lay: L.Layout):
    """Operand `a` in `lay` (its own shape): a scalar as it is, else re-emitted."""
    t = kern.env[a.id]
    if t.shape == ():
        return t
    if t.layout == lay:
        return t
    if t.origin is None:
        raise _Declined()
    return _emit(kern, t.origin, lay)


def _emit(kern, op, lay: L.Layout):
    rt = op.result.type
    name = op.name
    if name == "arange":
        return replace(arange_in(kern, lay, rt.dtype), origin=op)
    if name in SPLAT:
        if name == "full":
            val = full_value(kern, op)
        else:
            val = kern.se.constant(0 if name == "zeros" else 1, rt.dtype)
        return replace(kern.splat(val, rt.dtype, lay), origin=op)
    if name in RELABEL:
        x = op.arg_map["x"]
        xshape = tuple(kern.env[x.id].shape)
        if name in ("reshape", "expand_dims"):
            if not lay.is_one_hot:
                raise _Declined()
            src_lay = L.reshape(lay, xshape)
        else:
            dims = _perm(kern, op, len(xshape))
            inv = [0] * len(dims)
            for i, d in enumerate(dims):
                inv[d] = i
            src_lay = L.permute(lay, tuple(inv))
        t = _operand(kern, x, src_lay)
        return TileVal(t.dtype, lay, t.regs, origin=op)
    if name == "broadcast_to":
        x = op.arg_map["x"]
        return _broadcast_into(kern, x, lay, op)
    # element-wise: operands broadcast into `lay` by renaming
    cols, dtypes, params = [], [], {}
    for pname, a in op.args:
        if isinstance(a, (DType, ConstStr)):
            params[pname] = a
        elif isinstance(a, Value):
            t = kern.env[a.id]
            cols.append(_broadcast_into(kern, a, lay, None).regs)
            dtypes.append(t.dtype)
        elif isinstance(a, ConstValue):
            if a.dtype is None:
                cols.append((a.value,) * lay.num_regs)
            else:
                cols.append((kern.se.constant(a.value, a.dtype),) * lay.num_regs)
            dtypes.append(a.dtype)
        else:
            raise _Declined()
    regs = tuple(kern.se.emit(name, [c[r] for c in cols], dtypes, rt.dtype, params)
                 for r in range(lay.num_regs))
    return TileVal(rt.dtype, lay, regs, origin=op)


def _broadcast_into(kern, a: Value, lay: L.Layout, origin):
    """Operand `a` (broadcastable to lay.shape) as registers of `lay`, by re-emitting it in
    `lay` less its stretched axes and renaming."""
    t = kern.env[a.id]
    if t.shape == ():
        return TileVal(t.dtype, lay, t.regs * lay.num_regs, origin=origin)
    src_lay = broadcast_source(lay, t.shape)
    if src_lay is None:
        raise _Declined()
    s = _operand(kern, a, src_lay)
    m = renames(s.layout, C.need_of(lay, t.shape))
    if m is None:
        raise _Declined()
    return TileVal(t.dtype, lay, tuple(s.regs[i] for i in m), origin=origin)


def renames(src: L.Layout, need) -> list[int] | None:
    """For each register `need` wants, the register of `src` that holds it in every thread,
    or None when some element lives in another thread."""
    fast = getattr(C, "rename_map", None)
    return fast(src, need) if fast is not None else L.register_map(src, need.table(src.threads))


def _perm(kern, op, rank: int) -> tuple[int, ...]:
    if op.name == "permute":
        return tuple(d % rank for d in kern.const_ints(op.arg_map["dims"]))
    a0 = kern.const_ints(op.arg_map["axis0"])[0] % rank if "axis0" in op.arg_map else rank - 2
    a1 = kern.const_ints(op.arg_map["axis1"])[0] % rank if "axis1" in op.arg_map else rank - 1
    dims = list(range(rank))
    dims[a0], dims[a1] = dims[a1], dims[a0]
    return tuple(dims)
