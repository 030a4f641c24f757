"""Indexing: `take` (one position of a tile along an axis; `t[i]`, `t[:, j]`, `t[i, j]`) and
the `[]` entry (`A[i, j]`, one element of an array). docs/codegen.md, "Indexing".

`take(x, i, axis)` leaves x's layout without the axis (layouts/distributed.drop_axes): the
axis' register bits go, its lane and warp bits replicate. The axis coordinate an element has
is the XOR of its register, lane and warp parts (one-hot layouts), so:

- a constant `i` is a static need (`gather_elements`): renaming registers when the axis lives
  in registers, shuffles or a shared-memory trip otherwise, as `extract` does;
- a run-time `i` (taken modulo the extent: its low bits) picks registers with a tree of
  `select`s on the bits of `i` that the register bits stand for, then
  - the axis has no thread bits: done (every thread picked its own element);
  - lane bits only: one `shfl.sync.idx` per result register from the lane whose axis bits are
    i's (the other lane bits are the thread's own);
  - warp bits (or shuffles not allowed): the threads whose axis bits are i's write their picks
    to shared memory at the result's row-major positions, and every thread reads its own.
No path uses local memory: registers are never indexed by a run-time value.

`A[i, j]` loads one element at `sum(index * stride)` after an unsigned bounds test of every
index (a negative one is huge); a failed test is a device assertion naming the subscript.
"""

from __future__ import annotations

from math import prod

import llvmlite.ir as ir

from tilelang.codegen.layouts import distributed as L
from tilelang.codegen.emit.kernel import I32, KernelEmitter, TileVal
from tilelang.codegen.emit.sync import convert, gather_elements, shuffles_allowed, storage_bytes
from tilelang.codegen.emit.warp import shuffle_idx
from tilelang.codegen.lower.debug import fail_unless
from tilelang.codegen.lower.memory import _element_ptr
from tilelang.codegen.lower.table import lowers
from tilelang.ir.ops import BuiltinOp
from tilelang.sema.constants import ConstValue


def _with_axis(coord: L.Basis, axis: int, c: int) -> L.Basis:
    return coord[:axis] + (c,) + coord[axis:]


@lowers("take")
def take(kern: KernelEmitter, op: BuiltinOp) -> TileVal:
    x = kern.tile(op.arg_map["x"])
    rank = x.layout.rank
    axis = kern.const_ints(op.arg_map["axis"])[0] % rank if "axis" in op.arg_map else 0
    if not x.layout.is_one_hot():
        x = convert(kern, x, kern.layout_for_shape(x.shape, x.dtype))
    lay = x.layout
    out = L.drop_axes(lay, (axis,), keepdims=False)
    if not out.rank:
        out = kern.scalar_layout
    c = kern.const_of(op.arg_map["index"])
    if isinstance(c, ConstValue):
        return TileVal(x.dtype, out, _static(kern, x, out, axis, int(c.value) % lay.shape[axis]))
    return TileVal(x.dtype, out, _dynamic(kern, x, out, axis, op))


def _static(kern: KernelEmitter, x: TileVal, out: L.Layout, axis: int, c: int):
    lay = x.layout
    thread_w = tuple(lay.linear(_with_axis(b, axis, 0)) for b in out.thread_bases)
    reg_lin = [lay.linear(_with_axis(out.reg_coord(r), axis, c)) for r in range(out.num_regs)]
    return gather_elements(kern, x, thread_w, reg_lin)


def _dynamic(kern: KernelEmitter, x: TileVal, out: L.Layout, axis: int, op: BuiltinOp):
    lay = x.layout
    b = kern.builder
    n = lay.shape[axis]
    i = b.trunc(kern.index_i64(op.arg_map["index"]), I32)
    i = b.and_(i, ir.Constant(I32, n - 1))          # the low bits: index mod n
    picked = _select_registers(kern, x, axis, i)
    lane_bits = [(q, bs[axis]) for q, bs in enumerate(lay.lane) if bs[axis]]
    warp_bits = [(q, bs[axis]) for q, bs in enumerate(lay.warp) if bs[axis]]
    if not lane_bits and not warp_bits:
        return picked
    if not warp_bits and shuffles_allowed(kern):
        kern.require_exact()
        mask = sum(1 << q for q, _ in lane_bits)
        src = b.or_(b.and_(kern.lane(), ir.Constant(I32, 31 & ~mask)),
                    _gather_bits(kern, i, lane_bits, 0))
        return tuple(shuffle_idx(kern, v, src) for v in picked)
    return _through_shared(kern, x, out, axis, i, picked, lane_bits, warp_bits)


def _select_registers(kern: KernelEmitter, x: TileVal, axis: int, i: ir.Value):
    """Per result register, the source register whose axis part is i's register part."""
    lay = x.layout
    b = kern.builder
    along = [p for p, bs in enumerate(lay.reg) if bs[axis]]
    kept = [p for p, bs in enumerate(lay.reg) if not bs[axis]]
    conds = [b.icmp_unsigned("!=", b.and_(i, ir.Constant(I32, lay.reg[p][axis])),
                             ir.Constant(I32, 0)) for p in along]
    outs = []
    for r in range(1 << len(kept)):
        base = sum(1 << kept[k] for k in range(len(kept)) if r >> k & 1)
        cands = [x.regs[base | sum(1 << along[k] for k in range(len(along)) if s >> k & 1)]
                 for s in range(1 << len(along))]
        for k in range(len(along)):             # fold bit k: pairs differing only there
            cands = [b.select(conds[k], cands[j + 1], cands[j])
                     for j in range(0, len(cands), 2)]
        outs.append(cands[0])
    return tuple(outs)


def _gather_bits(kern: KernelEmitter, i: ir.Value, bits, first: int) -> ir.Value:
    """The thread-index bits (numbered from `first`) that i's axis bits select: bit q of the
    result is set when i has the coordinate bit that thread bit q stands for."""
    b = kern.builder
    acc = ir.Constant(I32, 0)
    for q, v in bits:
        pos = v.bit_length() - 1
        part = b.and_(i, ir.Constant(I32, v))
        shift = q + first - pos
        if shift > 0:
            part = b.shl(part, ir.Constant(I32, shift))
        elif shift < 0:
            part = b.lshr(part, ir.Constant(I32, -shift))
        acc = b.or_(acc, part)
    return acc


def _through_shared(kern: KernelEmitter, x: TileVal, out: L.Layout, axis: int, i: ir.Value,
                    picked, lane_bits, warp_bits):
    """The holders of position i write their picks; every thread reads its result."""
    b = kern.builder
    lay = x.layout
    st = kern.storage_type(x.dtype)
    ptr = kern.smem(max(prod(out.shape), 1) * storage_bytes(kern, x.dtype), st)
    nl = len(lay.lane)
    mask = sum(1 << q for q, _ in lane_bits) | sum(1 << (q + nl) for q, _ in warp_bits)
    want = b.or_(_gather_bits(kern, i, lane_bits, 0), _gather_bits(kern, i, warp_bits, nl))
    holder = b.icmp_unsigned("==", b.and_(kern.vtid, ir.Constant(I32, mask)), want)
    owner = kern.owner(lay)
    if owner is not None:
        holder = b.and_(holder, owner)
    base = kern.thread_linear(out.thread_weights())
    kern.barrier()
    write_bb = kern.fn.append_basic_block("take.write")
    join_bb = kern.fn.append_basic_block("take.join")
    b.cbranch(holder, write_bb, join_bb)
    b.position_at_end(write_bb)
    for r in out.owned_regs():
        at = b.add(base, ir.Constant(I32, out.reg_linear(r)))
        b.store(kern.to_storage(picked[r], x.dtype), b.gep(ptr, [at]))
    b.branch(join_bb)
    b.position_at_end(join_bb)
    kern.barrier()
    regs = []
    for r in range(out.num_regs):
        at = b.add(base, ir.Constant(I32, out.reg_linear(r)))
        regs.append(kern.from_storage(b.load(b.gep(ptr, [at])), x.dtype))
    return tuple(regs)


@lowers("[]")
def element(kern: KernelEmitter, op: BuiltinOp) -> TileVal:
    arr = kern.array(op.arg_map["A"])
    idx = [(kern.index_i64(a),) for a in kern.tuple_items(op.arg_map["index"])]
    ptr, ok = _element_ptr(kern, arr, idx, 0, None)
    text = op.arg_map["text"].value if "text" in op.arg_map else "an array subscript"
    fail_unless(kern, ok, f"index out of bounds: {text}", op.span)
    v = kern.builder.load(ptr, align=arr.dtype.itemsize)
    return TileVal(arr.dtype, kern.scalar_layout, (kern.from_storage(v, arr.dtype),))
