"""Moves whose source position is not a GF(2)-linear function of the destination's (so the
conversion planner's `Need` cannot describe them): `gather` within a tile (a run-time position
per element), `pad` and `cat` of unequal tiles (positions shifted by constants that are not
powers of two). docs/codegen.md, "Indexing".

All three stage their source tiles whole in the shared scratch buffer (`emit.sync.stage`:
padded row-major, barriers before and after) and let every thread load the elements of its
result registers, in the result's default layout (or, for `gather`, the layout of `indices`):
one shared store per source element and one shared load per result element, no local memory.
A position outside every source reads the fill value (`pad`'s `value`, `cat`'s `padding`); its
load is kept at position 0 so that no address leaves the staged tile.
"""

from __future__ import annotations

import llvmlite.ir as ir

from tilelang.codegen.emit.kernel import I32, KernelEmitter, TileVal
from tilelang.codegen.emit.sync import _padded_ir, convert, stage
from tilelang.codegen.lower.table import lowers
from tilelang.ir.ops import BuiltinOp


def _strides(shape) -> list[int]:
    out, s = [], 1
    for d in reversed(shape):
        out.append(s)
        s *= d
    return out[::-1]


def _c(v: int) -> ir.Constant:
    return ir.Constant(I32, v)


def _fill(kern: KernelEmitter, op: BuiltinOp, name: str, dtype) -> ir.Value:
    a = op.arg_map.get(name)
    return kern.scalar_value(a, dtype) if a is not None else kern.se.constant(0, dtype)


def _read(kern: KernelEmitter, ptr, dtype, lin: ir.Value) -> ir.Value:
    b = kern.builder
    return kern.from_storage(b.load(b.gep(ptr, [_padded_ir(kern, lin)])), dtype)


def _coords(kern: KernelEmitter, lay, r: int, thread) -> list[ir.Value]:
    """Coordinates (i32) of register r of this thread in a one-hot layout."""
    b = kern.builder
    rc = lay.reg_coord(r)
    return [b.add(t, _c(c)) if c else t for t, c in zip(thread, rc)]


def _linear(kern: KernelEmitter, coords, strides) -> ir.Value:
    b = kern.builder
    acc = None
    for c, s in zip(coords, strides):
        term = b.mul(c, _c(s)) if s != 1 else c
        acc = term if acc is None else b.add(acc, term)
    return acc if acc is not None else _c(0)


def _default(kern: KernelEmitter, t: TileVal) -> TileVal:
    if t.layout.is_one_hot():
        return t
    return convert(kern, t, kern.layout_for_shape(t.shape, t.dtype))


def tile_gather(kern: KernelEmitter, op: BuiltinOp) -> TileVal:
    """out[x] = t[x with `axis` replaced by indices[x] mod n]."""
    t = _default(kern, kern.tile(op.arg_map["A"]))
    idx = _default(kern, kern.tile(op.arg_map["indices"]))
    rank = len(t.shape)
    ax = kern.const_ints(op.arg_map["axis"])[0] % rank
    n = t.shape[ax]
    strides = _strides(t.shape)
    b = kern.builder
    (ptr,) = stage(kern, [t])
    lay = idx.layout
    thread = [kern.thread_coord(lay, d) for d in range(rank)]
    regs = []
    for r in range(lay.num_regs):
        i = idx.regs[r]
        w = i.type.width
        if w > 32:
            i = b.trunc(i, I32)
        elif w < 32:
            i = b.sext(i, I32) if idx.dtype.signed else b.zext(i, I32)
        coords = _coords(kern, lay, r, thread)
        coords[ax] = b.and_(i, _c(n - 1))
        regs.append(_read(kern, ptr, t.dtype, _linear(kern, coords, strides)))
    return TileVal(t.dtype, lay, tuple(regs))


@lowers("pad")
def pad(kern: KernelEmitter, op: BuiltinOp) -> TileVal:
    x = _default(kern, kern.tile(op.arg_map["x"]))
    rt = op.result.type
    out = kern.layout_for(rt)
    shape = x.shape
    raw = kern.const_of(op.arg_map["widths"])
    items = raw.items
    if len(shape) == 1 and len(items) == 2 and not hasattr(items[0], "items"):
        items = (raw,)
    before = [int(p.items[0].value) for p in items]
    fill = _fill(kern, op, "value", x.dtype)
    (ptr,) = stage(kern, [x])
    b = kern.builder
    thread = [kern.thread_coord(out, d) for d in range(len(shape))]
    strides = _strides(shape)
    regs = []
    for r in range(out.num_regs):
        src = [b.sub(c, _c(lo)) if lo else c
               for c, lo in zip(_coords(kern, out, r, thread), before)]
        inside = None
        for s, n in zip(src, shape):
            ok = b.icmp_unsigned("<", s, _c(n))     # a negative position is huge: outside
            inside = ok if inside is None else b.and_(inside, ok)
        lin = b.select(inside, _linear(kern, src, strides), _c(0))
        regs.append(b.select(inside, _read(kern, ptr, x.dtype, lin), fill))
    return TileVal(x.dtype, out, tuple(regs))


def cat_unequal(kern: KernelEmitter, op: BuiltinOp, axis: int) -> TileVal:
    """`cat` of tiles with different extents along `axis` into the next power of two."""
    a = _default(kern, kern.tile(op.arg_map["a"]))
    c = _default(kern, kern.tile(op.arg_map["b"]))
    rt = op.result.type
    out = kern.layout_for(rt)
    fill = _fill(kern, op, "padding", a.dtype)
    pa, pc = stage(kern, [a, c])
    b = kern.builder
    na, nc = a.shape[axis], c.shape[axis]
    sa, sc = _strides(a.shape), _strides(c.shape)
    thread = [kern.thread_coord(out, d) for d in range(len(a.shape))]
    regs = []
    for r in range(out.num_regs):
        coords = _coords(kern, out, r, thread)
        pos = coords[axis]
        in_a = b.icmp_unsigned("<", pos, _c(na))
        second = b.sub(pos, _c(na))
        in_c = b.icmp_unsigned("<", second, _c(nc))
        ca = list(coords)
        ca[axis] = b.select(in_a, pos, _c(0))
        cc = list(coords)
        cc[axis] = b.select(in_c, second, _c(0))
        va = _read(kern, pa, a.dtype, _linear(kern, ca, sa))
        vc = _read(kern, pc, a.dtype, _linear(kern, cc, sc))
        regs.append(b.select(in_a, va, b.select(in_c, vc, fill)))
    return TileVal(a.dtype, out, tuple(regs))
