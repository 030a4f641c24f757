"""Storing a tensor-core accumulator: through shared memory into 16-byte global stores.

The mma fragment layout gives each thread pairs of adjacent columns (8 bytes of f32), which
would make 8-byte global stores. Instead every thread writes its pairs into a row-major image
of the tile in shared memory (16-byte chunks XOR-swizzled by row, so the 8 rows a warp writes
at once hit different banks), and then the block reads the image back in 16-byte chunks in
row order and stores each with one vector store: consecutive lanes, consecutive chunks. The
read-back is a run-time loop (one chunk per thread per round), which keeps the code and the
compile time small; chunks that cross the array's edge are stored element by element.

Used for `store(A, index, tile)` of a tile held in an accumulator layout when A is
contiguous with 16-byte aligned rows; anything else takes the ordinary store lowering. On
targets with TMA (sm_90) such a store goes through a tensor map instead when it qualifies
(lower/tensorcore/tma_store.py: the copy engine writes the image out and clips the edges).
"""

from __future__ import annotations

from math import prod

import llvmlite.ir as ir

from tilelang.codegen.layouts.distributed import log2
from tilelang.codegen.emit.kernel import I1, I32, I64, KernelEmitter, TileVal
from tilelang.codegen.lower.tensorcore import tma_store
from tilelang.codegen.lower.memory import gated, tile_indexed, vectorizable
from tilelang.codegen.lower.tensorcore.tma_store import store_pair
from tilelang.ir.ops import BuiltinOp
from tilelang.ir.values import Value

def _c(v: int) -> ir.Constant:
    return ir.Constant(I32, v)


def remember_acc_layout(kern: KernelEmitter, layout) -> None:
    """A product left its accumulator in `layout`: one of the plan's (plan/products.py)."""
    assert layout in kern.plan.products.acc_layouts, layout


def applies(kern: KernelEmitter, op: BuiltinOp) -> bool:
    args = op.arg_map
    t = args.get("tile")
    if not kern.exact or not isinstance(t, Value) or not tile_indexed(op):
        return False
    v = kern.env.get(t.id)
    if not isinstance(v, TileVal) or v.layout not in kern.plan.products.acc_layouts:
        return False
    arr = kern.array(args["A"])
    if not vectorizable(arr, tuple(range(arr.rank))):
        return False
    cols = v.shape[-1]
    itemsize = v.dtype.itemsize
    return itemsize in (2, 4) and cols * itemsize >= 16 and kern.storage_type(v.dtype) == \
        kern.llvm_type(v.dtype)


def store(kern: KernelEmitter, op: BuiltinOp) -> None:
    if tma_store.store(kern, op):
        return
    b = kern.builder
    args = op.arg_map
    arr = kern.array(args["A"])
    t: TileVal = kern.env[args["tile"].id]
    lay = t.layout
    shape = tuple(lay.shape)
    rank = len(shape)
    itemsize = t.dtype.itemsize
    ety = kern.llvm_type(t.dtype)
    e = 16 // itemsize                          # elements per chunk
    cols = shape[-1]
    rows = prod(shape[:-1])
    chunks_per_row = cols // e
    row_bytes = cols * itemsize
    nbytes = rows * row_bytes
    ring = kern.smem(nbytes, ir.IntType(8), 0)
    base = b.trunc(b.ptrtoint(ring, I64), I32)
    # chunk ^= (row << shift) & mask: one phase of fragment stores (16 lanes x 8 bytes for
    # 32-bit values, 32 x 4 for 16-bit) covers 4 (8) rows of two (one) chunks each, which
    # this spreads over the 8 bank groups; a row read back is a permutation of its chunks.
    shift = 1 if itemsize == 4 else 0
    sw = min(chunks_per_row, 8 << shift) - 1

    def image_addr(row: ir.Value, col: ir.Value) -> ir.Value:
        chunk = b.lshr(col, _c(log2(e)))
        within = b.and_(col, _c(e - 1))
        key = b.shl(row, _c(shift)) if shift else row
        phys = b.xor(chunk, b.and_(key, _c(sw))) if sw else chunk
        off = b.add(b.mul(row, _c(row_bytes)), b.shl(phys, _c(4)))
        return b.add(base, b.add(off, b.mul(within, _c(itemsize))))

    # 1. fragments -> image: register pairs (columns 2t, 2t+1) as one 2-element store
    kern.barrier()
    tc = [kern.thread_coord(lay, d) for d in range(rank)]
    row_t = tc[-2] if rank == 2 else b.add(b.mul(tc[0], _c(shape[1])), tc[-2])
    # A register's constant row offset that is a multiple of the swizzle's row period keeps
    # the thread's swizzle key, and a constant chunk offset whose bits the thread's own chunk
    # never has XORs (low bits) or adds (high bits): then its address is the thread's base
    # plus a constant, with one XOR per distinct low chunk offset.
    period = max((sw + 1) >> shift, 1)
    thread_chunk_bits = 0
    for basis in lay.thread_bases:
        thread_chunk_bits |= basis[-1] // e
    key = b.shl(row_t, _c(shift)) if shift else row_t
    cx = b.xor(b.lshr(tc[-1], _c(log2(e))), b.and_(key, _c(sw))) if sw else \
        b.lshr(tc[-1], _c(log2(e)))
    base_t = b.add(base, b.add(b.mul(row_t, _c(row_bytes)),
                               b.mul(b.and_(tc[-1], _c(e - 1)), _c(itemsize))))

    def fragments():
        """Every owned register pair (columns c, c+1) into the image: one store each, by the
        owning warps only (replicated warps writing the same words would race)."""
        lows: dict[int, ir.Value] = {}
        for r in lay.owned_regs():
            rc = lay.reg_coord(r)
            if rc[-1] % 2:
                continue
            rrow = rc[-2] + (rc[0] * shape[1] if rank == 3 else 0)
            cc = rc[-1] // e
            if rrow % period == 0 and rc[-1] % e == 0 and not cc & thread_chunk_bits:
                lo = cc & sw
                if lo not in lows:
                    lows[lo] = b.add(base_t, b.shl(b.xor(cx, _c(lo)) if lo else cx, _c(4)))
                addr = b.add(lows[lo], _c(rrow * row_bytes + (cc & ~sw) * 16))
            else:
                row = b.add(row_t, _c(rrow)) if rrow else row_t
                col = tc[-1] if not rc[-1] else b.add(tc[-1], _c(rc[-1]))
                addr = image_addr(row, col)
            store_pair(kern, addr, t.regs[r], t.regs[r + 1], itemsize)

    gated(kern, kern.owner(lay), fragments)
    kern.barrier()

    # 2. image -> global, one 16-byte chunk per thread per round (a run-time loop)
    index = [kern.index_i64(i) for i in kern.tuple_items(args["index"])]
    g0 = [b.mul(i, ir.Constant(I64, s)) for i, s in zip(index, shape)]
    left = [b.sub(arr.extents[d], g0[d]) for d in range(rank)]
    p1 = ir.PointerType(ety, addrspace=1)
    gptr = b.inttoptr(arr.address, p1)
    total = rows * chunks_per_row
    rounds = -(-total // kern.threads)
    fn = kern.fn
    pre = b.block
    head = fn.append_basic_block("epi.round")
    done = fn.append_basic_block("epi.done")
    b.branch(head)
    b.position_at_end(head)
    i = b.phi(I32, "round")
    i.add_incoming(_c(0), pre)
    q = b.add(b.mul(i, _c(kern.threads)), kern.vtid)
    row = b.lshr(q, _c(log2(chunks_per_row)))
    col = b.shl(b.and_(q, _c(chunks_per_row - 1)), _c(log2(e)))
    # the tile coordinate of (row, col): batch, m, n
    coord = [col]
    rem = row
    for s in reversed(shape[:-1]):
        coord.insert(0, b.and_(rem, _c(s - 1)))
        rem = b.lshr(rem, _c(log2(s)))
    in_tile = b.icmp_unsigned("<", q, _c(total)) if total % kern.threads else ir.Constant(I1, 1)
    ok = in_tile if kern.primary is None else b.and_(in_tile, kern.primary)
    off = ir.Constant(I64, 0)
    for d in range(rank):
        cd = b.zext(coord[d], I64)
        if d < rank - 1:
            ok = b.and_(ok, b.icmp_signed("<", cd, left[d]))
            ok = b.and_(ok, b.icmp_signed(">=", g0[d], ir.Constant(I64, 0)))
        off = b.add(off, b.mul(b.add(g0[d], cd), arr.strides[d]))
    colg = b.add(g0[-1], b.zext(col, I64))
    full = b.and_(ok, b.icmp_signed("<=", b.add(colg, ir.Constant(I64, e)), arr.extents[-1]))
    full = b.and_(full, b.icmp_signed(">=", g0[-1], ir.Constant(I64, 0)))
    vecty = ir.VectorType(ety, e)
    vbb = fn.append_basic_block("epi.vec")
    pbb = fn.append_basic_block("epi.part")
    nxt = fn.append_basic_block("epi.next")
    b.cbranch(full, vbb, pbb)
    b.position_at_end(vbb)
    vec = _load_chunk(kern, image_addr(row, col), vecty)
    dst = b.bitcast(b.gep(gptr, [off]), ir.PointerType(vecty, addrspace=1))
    b.store(vec, dst, align=16)
    b.branch(nxt)
    b.position_at_end(pbb)
    # a chunk across the right edge (or outside): the elements that are inside, one by one
    vec = _load_chunk(kern, image_addr(row, col), vecty)
    for k in range(e):
        inside = b.and_(ok, b.icmp_signed("<", b.add(colg, ir.Constant(I64, k)),
                                          arr.extents[-1]))
        inside = b.and_(inside, b.icmp_signed(">=", colg, ir.Constant(I64, 0)))
        sbb = fn.append_basic_block("epi.elem")
        after = fn.append_basic_block("epi.elem.end")
        b.cbranch(inside, sbb, after)
        b.position_at_end(sbb)
        b.store(b.extract_element(vec, _c(k)), b.gep(gptr, [b.add(off, ir.Constant(I64, k))]),
                align=itemsize)
        b.branch(after)
        b.position_at_end(after)
    b.branch(nxt)
    b.position_at_end(nxt)
    i1 = b.add(i, _c(1))
    i.add_incoming(i1, nxt)
    b.cbranch(b.icmp_unsigned("<", i1, _c(rounds)), head, done)
    b.position_at_end(done)


def _load_chunk(kern: KernelEmitter, addr: ir.Value, vecty: ir.VectorType) -> ir.Value:
    """16 bytes of shared memory at 32-bit address `addr` as `vecty`."""
    b = kern.builder
    ret = ir.LiteralStructType([I32] * 4)
    asm = ir.InlineAsm(ir.FunctionType(ret, [I32]),
                       "ld.shared.v4.b32 {$0, $1, $2, $3}, [$4];", "=r,=r,=r,=r,r,~{memory}",
                       side_effect=True)
    r = b.call(asm, [addr])
    words = ir.VectorType(I32, 4)
    v = ir.Constant(words, ir.Undefined)
    for k in range(4):
        v = b.insert_element(v, b.extract_value(r, k), _c(k))
    return b.bitcast(v, vecty)
