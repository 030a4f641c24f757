"""TMA stores (sm_90): a tensor-core accumulator stored by `cp.async.bulk.tensor` from a
swizzled shared-memory image, the copy engine clipping the box at the array's edges.

Used by lower/tensorcore/mma_epilogue.py for `store(A, index, tile)` of a tile in an accumulator layout
when the target has TMA, A is contiguous, 16-byte aligned and has the `tensor_map` fact (the
facts the tensor map needs; a reversed view takes the ordinary stores),
the tile's rows are whole 32-, 64- or 128-byte panels and every box dimension is at most 256.

The image is the box layout the TMA unit reads: the tile cut along its last axis into panels
of `span` bytes (32 for 32-bit elements, else the widest of 128, 64, 32 dividing a row; see
"Banks" below), each panel its rows of `span`
bytes in order (batch-major for a 3-d tile) with the hardware's swizzle (16-byte chunk bits
4.. XORed with address bits 7..), panels 1024-byte aligned so the swizzle's phase is the
row's. One tensor map (api.TensorMapSpec: box = span / itemsize elements by the tile's other
extents) serves every panel; a panel is one copy at column offset p * span / itemsize.

Protocol (PTX ISA, "Tensor copy" and "proxies"): barrier (the scratch buffer's previous users
are done); every thread writes its register pairs into the image (8-byte `st.shared.v2` for
32-bit values, 4-byte for 16-bit); every thread fences its writes to the async proxy
(`fence.proxy.async.shared::cta`); barrier; thread 0 issues the panels' copies
(`.global.shared::cta.bulk_group`), `cp.async.bulk.commit_group` and
`cp.async.bulk.wait_group.read 0`: the image has been read when thread 0 passes it, and the
next user of the buffer starts with a barrier, so nothing overwrites it earlier; the kernel
does not exit before it either. Out-of-bounds box elements are not written (the TMA unit
clips), so a ragged edge needs no code here.

Banks: a half-warp's 8-byte stores of 32-bit pairs cover 4 rows x 2 chunks; in 128-byte
(or 64-byte) swizzled rows rows r and r ^ 1 (r and r + 2) meet on the same two chunk slots, a
2-way conflict on every store, so 32-bit tiles use 32-byte panels (4 rows = 128 bytes, one
wavefront; more copies for thread 0 to issue: 16 instead of 4 for 128 f32 columns). A warp's
4-byte stores of 16-bit pairs cover 8 rows x 1 chunk, which the 128-byte swizzle spreads over
8 chunk slots.
"""

from __future__ import annotations

from math import prod

import llvmlite.ir as ir

from tilelang.codegen.api import TensorMapSpec
from tilelang.codegen.layouts.distributed import log2
from tilelang.codegen.emit.kernel import I32, I64, KernelEmitter, TileVal
from tilelang.codegen.lower.tensorcore import wgmma_ops
from tilelang.codegen.lower.tensorcore.tma_load import issuer, map_address
from tilelang.codegen.lower.memory import gated
from tilelang.targets import FEATURES

IMAGE_ALIGN = 1024          # the 128-byte swizzle repeats every 8 rows of 128 bytes
MAX_BOX = 256
SPANS = (128, 64, 32)
_I32_MIN = -(1 << 31)


def _c(v: int) -> ir.Constant:
    return ir.Constant(I32, v)


def span_of(row_bytes: int) -> int:
    """The widest swizzle span dividing a tile row of `row_bytes`; 0 when none does."""
    return next((s for s in SPANS if row_bytes % s == 0), 0)


def spec_for(kern: KernelEmitter, arr, t: TileVal) -> TensorMapSpec | None:
    """The tensor map a TMA store of `t` into `arr` uses, or None when it cannot be one."""
    if not kern.tma or kern.target.sm < FEATURES["tma"].min_sm:
        return None
    if not (arr.facts.contiguous and arr.facts.aligned16 and arr.facts.tensor_map) or \
            not 2 <= arr.rank <= 5:
        return None
    if arr.rank != len(t.shape) or not t.layout.is_one_hot():
        return None
    itemsize = t.dtype.itemsize
    if itemsize not in (2, 4) or kern.storage_type(t.dtype) != kern.llvm_type(t.dtype) or \
            t.dtype != arr.dtype:
        return None
    row = t.shape[-1] * itemsize
    # 32-bit pairs: 32-byte panels, whose rows a half-warp's 8-byte stores (4 rows x 32
    # bytes) cover without a bank conflict; 16-bit pairs (8 rows x 16 bytes a warp): the
    # widest panel, conflict-free under its swizzle
    span = 32 if itemsize == 4 and row % 32 == 0 else span_of(row)
    if not span:
        return None
    box = (span // itemsize,) + tuple(reversed(t.shape[:-1]))
    if any(n > MAX_BOX for n in box):
        return None
    return TensorMapSpec(arr.name, arr.dtype, box, span)


def store_pair(kern: KernelEmitter, addr: ir.Value, x: ir.Value, y: ir.Value,
               itemsize: int) -> None:
    """Two adjacent 16- or 32-bit values into shared memory at 32-bit address `addr`."""
    b = kern.builder
    if itemsize == 4:
        xi, yi = (v if v.type == I32 else b.bitcast(v, I32) for v in (x, y))
        asm = ir.InlineAsm(ir.FunctionType(ir.VoidType(), [I32, I32, I32]),
                           "st.shared.v2.b32 [$0], {$1, $2};", "r,r,r,~{memory}",
                           side_effect=True)
        b.call(asm, [addr, xi, yi])
        return
    i16 = ir.IntType(16)
    xi, yi = (b.bitcast(v, i16) for v in (x, y))
    asm = ir.InlineAsm(ir.FunctionType(ir.VoidType(), [I32, i16, i16]),
                       "st.shared.v2.b16 [$0], {$1, $2};", "r,h,h,~{memory}", side_effect=True)
    b.call(asm, [addr, xi, yi])


def _asm(kern: KernelEmitter, text: str, args: list, cons: str) -> None:
    asm = ir.InlineAsm(ir.FunctionType(ir.VoidType(), [a.type for a in args]), text, cons,
                       side_effect=True)
    kern.builder.call(asm, args)


def store(kern: KernelEmitter, op) -> bool:
    """`store(A, index, tile)` by TMA when it qualifies (module docstring); False when not,
    or when the kernel has no parameter for the map (a KernelEmitter given fixed
    `tensor_maps`; generate's adds it on lookup, emit/map_params.py). The map is recorded in
    KernelStats.tensor_maps either way."""
    args = op.arg_map
    arr = kern.array(args["A"])
    t: TileVal = kern.env[args["tile"].id]
    spec = spec_for(kern, arr, t)
    if spec is None:
        return False
    kern.stats.tensor_maps.append(spec)
    tmap = kern.tensor_maps.get(spec)
    if tmap is None:
        return False
    kern.stats.features.add("tma")
    b = kern.builder
    lay = t.layout
    shape = tuple(lay.shape)
    rank = len(shape)
    isz = t.dtype.itemsize
    span = spec.swizzle
    per = span // isz                            # elements of one panel row
    e = 16 // isz                                # elements of one 16-byte chunk
    rows = prod(shape[:-1])
    panels = shape[-1] // per
    pbytes = -(-rows * span // IMAGE_ALIGN) * IMAGE_ALIGN
    ptr = kern.smem(panels * pbytes, ir.IntType(8), 0)
    if (kern._smem.align or 0) < IMAGE_ALIGN:
        kern._smem.align = IMAGE_ALIGN
    base = b.trunc(b.ptrtoint(ptr, I64), I32)
    # the swizzle key of row r: address bits 7.. of r * span, as many as the span has chunks
    kshift = log2(128 // span)
    kmask = span // 16 - 1

    def key_of(row: ir.Value) -> ir.Value:
        return b.and_(b.lshr(row, _c(kshift)) if kshift else row, _c(kmask))

    def image_addr(row: ir.Value, col: ir.Value) -> ir.Value:
        panel = b.lshr(col, _c(log2(per)))
        chunk = b.and_(b.lshr(col, _c(log2(e))), _c(kmask))
        within = b.and_(col, _c(e - 1))
        off = b.add(b.mul(panel, _c(pbytes)), b.mul(row, _c(span)))
        off = b.add(off, b.shl(b.xor(chunk, key_of(row)), _c(4)))
        return b.add(base, b.add(off, b.mul(within, _c(isz))))

    kern.barrier()                     # the scratch buffer's previous users are done
    tc = [kern.thread_coord(lay, d) for d in range(rank)]
    row_t = tc[-2] if rank == 2 else b.add(b.mul(tc[0], _c(shape[1])), tc[-2])
    col_t = tc[-1]
    # A register whose row offset is a multiple of 8 keeps the thread's swizzle key (it is
    # row bits 0-2); its column bits are not the thread's (one-hot layout), so its address is
    # the thread's plus a constant, after one XOR per distinct low chunk bits of its column.
    x_t = b.xor(b.and_(b.lshr(col_t, _c(log2(e))), _c(kmask)), key_of(row_t))
    t_base = b.add(base, b.add(b.mul(b.lshr(col_t, _c(log2(per))), _c(pbytes)),
                               b.add(b.mul(row_t, _c(span)),
                                     b.mul(b.and_(col_t, _c(e - 1)), _c(isz)))))

    def fragments():
        lows: dict[int, ir.Value] = {}
        for r in lay.owned_regs():
            rc = lay.reg_coord(r)
            if rc[-1] % 2:
                continue
            rrow = rc[-2] + (rc[0] * shape[1] if rank == 3 else 0)
            rcol = rc[-1]
            if rrow % 8 == 0:
                lo = (rcol // e) & kmask
                if lo not in lows:
                    lows[lo] = b.add(t_base, b.shl(b.xor(x_t, _c(lo)) if lo else x_t, _c(4)))
                const = rrow * span + (rcol // per) * pbytes + (rcol % e) * isz
                addr = b.add(lows[lo], _c(const)) if const else lows[lo]
            else:
                row = b.add(row_t, _c(rrow)) if rrow else row_t
                col = b.add(col_t, _c(rcol)) if rcol else col_t
                addr = image_addr(row, col)
            store_pair(kern, addr, t.regs[r], t.regs[r + 1], isz)

    gated(kern, kern.owner(lay), fragments)
    wgmma_ops.fence_proxy_async(kern)    # each thread's writes, before the TMA unit reads them
    kern.barrier()

    # the issuing thread (tma_load.issuer: thread 0): one copy per panel, then wait until the
    # image has been read
    index = [kern.index_i64(i) for i in kern.tuple_items(args["index"])]
    start = [b.mul(i, ir.Constant(I64, s)) for i, s in zip(index, shape)]
    # a coordinate is an s32: a tile that starts outside that range (so wholly outside any
    # array a map describes) is not stored rather than wrapped around
    go = issuer(kern)
    for s in start:
        inr = b.icmp_unsigned("<", b.sub(s, ir.Constant(I64, _I32_MIN)),
                              ir.Constant(I64, (1 << 32) - 2 * MAX_BOX))
        go = b.and_(go, inr)
    coords = [b.trunc(s, I32) for s in reversed(start)]
    then = kern.fn.append_basic_block("tma.store")
    after = kern.fn.append_basic_block("tma.stored")
    b.cbranch(go, then, after)
    b.position_at_end(then)
    gaddr = map_address(kern, tmap)
    cs = ", ".join(f"${i + 1}" for i in range(rank))
    text = (f"cp.async.bulk.tensor.{rank}d.global.shared::cta.bulk_group "
            f"[$0, {{{cs}}}], [${rank + 1}];")
    cons = "l," + "r," * rank + "r,~{memory}"
    for p in range(panels):
        inner = b.add(coords[0], _c(p * per)) if p else coords[0]
        src = b.add(base, _c(p * pbytes)) if p else base
        _asm(kern, text, [gaddr, inner] + coords[1:] + [src], cons)
    _asm(kern, "cp.async.bulk.commit_group;", [], "~{memory}")
    _asm(kern, "cp.async.bulk.wait_group.read 0;", [], "~{memory}")
    b.branch(after)
    b.position_at_end(after)
    return True
