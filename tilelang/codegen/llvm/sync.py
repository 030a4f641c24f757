"""Moving tile elements between threads: layout conversions (free register renaming, or an
exchange through shared memory), warp shuffles and barriers.

A conversion first asks `layouts.register_map` whether every thread already holds what it
needs (broadcasting a reduced value, a relabelled layout): then it is a renaming of SSA values
and emits nothing. Otherwise the source is written to the kernel's shared scratch buffer and
read back in the destination layout:

    barrier; every thread stores its registers at pad(linear index); barrier; loads

`pad(i) = i + i / 32` puts one spare element after every 32, so a column walk of a row-major
tile (a transpose, a reduction along axis 0) hits 32 different banks instead of one. The
leading barrier protects the previous user of the buffer; the compiler inserts both, the
language has none.
"""

from __future__ import annotations

from math import prod

import llvmlite.ir as ir
import numpy as np

from tilelang.codegen.layouts.distributed import Layout, reg_part, register_map, thread_part
from tilelang.codegen.llvm.kernel import I32, KernelEmitter, TileVal

PAD_EVERY = 32


def padded(i: int) -> int:
    return i + i // PAD_EVERY


def _padded_ir(kern: KernelEmitter, i: ir.Value) -> ir.Value:
    b = kern.builder
    return b.add(i, b.lshr(i, ir.Constant(I32, PAD_EVERY.bit_length() - 1)))


def storage_bytes(kern: KernelEmitter, dtype) -> int:
    t = kern.storage_type(dtype)
    if isinstance(t, ir.IntType):
        return max(t.width // 8, 1)
    return {"half": 2, "bfloat": 2, "float": 4, "double": 8}[str(t)]


def broadcast(kern: KernelEmitter, src: TileVal, dst: Layout) -> tuple[ir.Value, ...]:
    """Registers of `dst` holding the elements of `src` that broadcast to dst.shape."""
    if src.layout == dst:
        return src.regs
    return gather_elements(kern, src, thread_part(dst, src.shape), reg_part(dst, src.shape))


def gather_elements(kern: KernelEmitter, src: TileVal, thread_w: tuple[int, ...],
                    reg_lin: list[int]) -> tuple[ir.Value, ...]:
    """Register r of every thread gets the element `sum(bit_b(tid) * thread_w[b]) +
    reg_lin[r]` (row-major in src.shape): renamed registers when each thread already holds
    what it needs, else an exchange through shared memory."""
    t = np.arange(src.layout.threads, dtype=np.int64)
    need = np.zeros(src.layout.threads, dtype=np.int64)
    for bit, w in enumerate(thread_w):
        need += ((t >> bit) & 1) * w
    need = need[:, None] + np.array(reg_lin, dtype=np.int64)[None, :]
    m = register_map(src.layout, need)
    if m is not None:
        return tuple(src.regs[i] for i in m)
    return exchange(kern, src, thread_w, reg_lin)


def convert(kern: KernelEmitter, src: TileVal, dst: Layout) -> TileVal:
    if src.layout == dst:
        return src
    assert src.shape == dst.shape, (src.shape, dst.shape)
    return TileVal(src.dtype, dst, broadcast(kern, src, dst))


def exchange(kern: KernelEmitter, src: TileVal, thread_w: tuple[int, ...],
             reg_lin: list[int]) -> tuple[ir.Value, ...]:
    """Through shared memory: read element `thread_linear(thread_w) + reg_lin[r]` (row-major
    in src.shape) into register r."""
    kern.stats.exchanges += 1
    (ptr,) = stage(kern, [src])
    return read_staged(kern, ptr, src.dtype, thread_w, reg_lin)


def stage(kern: KernelEmitter, tiles: list[TileVal]) -> list[ir.Value]:
    """Write whole tiles to the shared scratch buffer, one 16-byte aligned region each, at
    padded row-major positions; returns each region's typed pointer. Barriers before (the
    previous user is done) and after (everything is written)."""
    b = kern.builder
    ptrs, offset = [], 0
    for t in tiles:
        nbytes = (padded(prod(t.shape) - 1) + 1) * storage_bytes(kern, t.dtype)
        ptrs.append(kern.smem(nbytes, kern.storage_type(t.dtype), offset))
        offset += -(-nbytes // 16) * 16
    kern.barrier()
    for t, base in zip(tiles, ptrs):
        lay = t.layout
        wbase = kern.thread_linear(lay.thread_weights())
        for r in lay.owned_regs():
            i = _padded_ir(kern, b.add(wbase, ir.Constant(I32, lay.reg_linear(r))))
            b.store(kern.to_storage(t.regs[r], t.dtype), b.gep(base, [i]))
    kern.barrier()
    return ptrs


def read_staged(kern: KernelEmitter, ptr: ir.Value, dtype, thread_w: tuple[int, ...],
                reg_lin: list[int]) -> tuple[ir.Value, ...]:
    b = kern.builder
    rbase = kern.thread_linear(thread_w)
    out = []
    for off in reg_lin:
        i = _padded_ir(kern, b.add(rbase, ir.Constant(I32, off)))
        out.append(kern.from_storage(b.load(b.gep(ptr, [i])), dtype))
    return tuple(out)


def _int_of(kern: KernelEmitter, v: ir.Value) -> tuple[ir.Value, int]:
    """v as an integer of its width (floats bitcast)."""
    t = v.type
    if isinstance(t, ir.IntType):
        return v, t.width
    width = {"half": 16, "bfloat": 16, "float": 32, "double": 64}[str(t)]
    return kern.builder.bitcast(v, ir.IntType(width)), width


def _member_mask(kern: KernelEmitter) -> ir.Value:
    """Every existing lane of this thread's warp: the last warp of a block whose thread count
    is not a multiple of 32 is partial (threads past the layout's power of two replicate
    others and own nothing, but they still take part in the warp's shuffles)."""
    t = kern.declared_threads
    full = ir.Constant(I32, -1)
    if t % 32 == 0:
        return full
    partial = ir.Constant(I32, (1 << (t % 32)) - 1)
    if t < 32:
        return partial
    b = kern.builder
    last = b.icmp_unsigned(">=", kern.tid, ir.Constant(I32, t & ~31))
    return b.select(last, partial, full)


def shuffle_xor(kern: KernelEmitter, v: ir.Value, lane_mask: int) -> ir.Value:
    """The value of the lane `lane ^ lane_mask` (shfl.sync.bfly) for any scalar type."""
    kern.require_exact()
    kern.stats.shuffles += 1
    b = kern.builder
    fn = kern.se.declare("llvm.nvvm.shfl.sync.bfly.i32", I32, [I32, I32, I32, I32])
    member = _member_mask(kern)
    iv, width = _int_of(kern, v)

    def shfl32(x):
        return b.call(fn, [member, x, ir.Constant(I32, lane_mask), ir.Constant(I32, 31)])

    if width == 64:
        lo = shfl32(b.trunc(iv, I32))
        hi = shfl32(b.trunc(b.lshr(iv, ir.Constant(ir.IntType(64), 32)), I32))
        w = ir.IntType(64)
        r = b.or_(b.zext(lo, w), b.shl(b.zext(hi, w), ir.Constant(w, 32)))
    elif width == 32:
        r = shfl32(iv)
    else:
        r = b.trunc(shfl32(b.zext(iv, I32)), ir.IntType(width))
    if r.type != v.type:
        r = b.bitcast(r, v.type)
    return r

