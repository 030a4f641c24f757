"""Moving tile elements between threads: layout conversions (planned by layouts/convert.py:
renaming, warp shuffles or a shared-memory round trip), warp shuffles and barriers.

`broadcast`, `convert` and `gather_elements` describe what the destination needs (a
`convert.Need`) and emit the planner's answer:

- rename: the destination's registers are source registers of the same thread (no code);
- shuffle: one `shfl.sync.idx` per destination register; the source lane is the XOR of masked
  thread-index bits (`thread_linear`) XOR a per-register constant;
- shared: `barrier; every thread stores its registers; barrier; loads` through the kernel's
  shared scratch buffer in the planner's (usually swizzled) `SharedLayout`, vector accesses
  where both sides hold consecutive elements. A register's offset is the thread's base XOR a
  constant: the constant's bits that the base can have cost one `xor` (shared by registers
  with the same such bits), the others are an immediate address offset.

The leading barrier protects the previous user of the buffer; the compiler inserts both, the
language has none.

`stage` (tiles written whole for the FMA product and `print`) keeps the older padded layout,
`pad(i) = i + i / 32`: one spare element after every 32, so a column walk of a row-major tile
hits 32 different banks.
"""

from __future__ import annotations

from math import prod

import llvmlite.ir as ir

from tilelang.codegen.layouts import convert as C
from tilelang.codegen.layouts.distributed import Layout
from tilelang.codegen.emit.kernel import I32, KernelEmitter, TileVal
from tilelang.codegen.emit.warp import shuffle_bfly, shuffle_idx
from tilelang.codegen.emit import preheader, remat

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
    need = C.need_of(dst, src.shape)
    if src.staged is not None and C.rename_map(src.layout, need) is None:
        # a row-major copy in shared memory (a prefetched load): read what dst needs
        return read_rowmajor(kern, src.staged, src.dtype, need)
    hoisted = _before_loop(kern, src, need)
    if hoisted is not None:
        return hoisted
    if src.origin is not None and remat.renames(src.layout, need) is None:
        # computed from aranges and scalars: computed again where it is wanted (emit/remat.py)
        lay = remat.broadcast_source(dst, src.shape)
        again = remat.rematerialize(kern, src, lay) if lay is not None else None
        if again is not None:
            return apply_need(kern, again, need)
    return apply_need(kern, src, need)


HOIST_ELEMENTS = 8      # the most distinct elements per thread a hoisted conversion keeps live


def _before_loop(kern: KernelEmitter, src: TileVal, need: C.Need) -> tuple | None:
    """The movement of a loop-invariant tile emitted once before the innermost loop
    (emit/preheader.py) instead of in every iteration, when it is more than a renaming and
    each thread keeps at most HOIST_ELEMENTS distinct elements of it live across the loop
    (a row statistic broadcast into an accumulator layout, as attention backward's
    log-sum-exp: a shared-memory round trip with two barriers per key tile otherwise)."""
    if not kern.loops or len(set(need.regs)) > HOIST_ELEMENTS or \
            C.rename_map(src.layout, need) is not None:
        return None
    found = preheader.entry(kern)
    if found is None or not preheader.invariant(kern, src.regs, found[2]):
        return None
    key = (id(found[1]), tuple(id(r) for r in src.regs), src.layout, need)
    if key not in kern.hoisted:
        got = preheader.before_loop(kern, lambda: apply_need(kern, src, need), "convert.pre")
        if got is None:
            return None
        kern.hoisted[key] = got[0]
    return kern.hoisted[key]


def shared_ptr(kern: KernelEmitter, addr: ir.Value, dtype) -> ir.Value:
    """The 32-bit shared address `addr` as a pointer to `dtype`'s storage."""
    b = kern.builder
    return b.inttoptr(b.zext(addr, ir.IntType(64)),
                      ir.PointerType(kern.storage_type(dtype), addrspace=3))


def read_shared(kern: KernelEmitter, ptr: ir.Value, i: ir.Value, dtype) -> ir.Value:
    """Element `i` (i32) of the shared array at `ptr`, in `dtype`'s compute type."""
    b = kern.builder
    return kern.from_storage(b.load(b.gep(ptr, [i]), align=storage_bytes(kern, dtype)), dtype)


def read_rowmajor(kern: KernelEmitter, addr: ir.Value, dtype, need: C.Need
                  ) -> tuple[ir.Value, ...]:
    """What `need` asks of a tile stored row-major at 32-bit shared address `addr`."""
    ptr = shared_ptr(kern, addr, dtype)
    at = _Addresses(kern, lambda e: e, need.thread)
    cache: dict[int, ir.Value] = {}
    out = []
    for e in need.regs:
        if e not in cache:
            cache[e] = read_shared(kern, ptr, at(e), dtype)
        out.append(cache[e])
    return tuple(out)


def gather_elements(kern: KernelEmitter, src: TileVal, thread_w: tuple[int, ...],
                    reg_lin: list[int]) -> tuple[ir.Value, ...]:
    """Register r of every thread gets the element `XOR(thread_w[b] for set bits b of tid) ^
    reg_lin[r]` (row-major in src.shape; for one-hot weights and offsets, their sum)."""
    return apply_need(kern, src, C.Need(tuple(thread_w), tuple(reg_lin)))


def convert(kern: KernelEmitter, src: TileVal, dst: Layout) -> TileVal:
    if src.layout == dst:
        return src
    assert src.shape == dst.shape, (src.shape, dst.shape)
    return TileVal(src.dtype, dst, broadcast(kern, src, dst))


def shuffles_allowed(kern: KernelEmitter) -> bool:
    """Every source lane a shuffle names exists: whole warps, or a single warp (a partial last
    warp of a larger block would miss lanes its replica threads name)."""
    n = kern.declared_threads
    return n % 32 == 0 or n < 32


def plan_for(kern: KernelEmitter, src: TileVal, need: C.Need) -> C.Plan:
    kern.require_exact()
    return C.plan(src.layout, need, storage_bytes(kern, src.dtype), shuffles_allowed(kern))


def apply_need(kern: KernelEmitter, src: TileVal, need: C.Need) -> tuple[ir.Value, ...]:
    """Emit the planned movement (module docstring)."""
    m = C.rename_map(src.layout, need)
    if m is not None:               # before plan_for: renaming needs no exact thread count
        return tuple(src.regs[i] for i in m)
    p = plan_for(kern, src, need)
    if isinstance(p, C.Shuffle):
        return emit_shuffle(kern, src, p)
    assert isinstance(p, C.SharedTrip), p
    return emit_round_trip(kern, src, need, p)


def exchange(kern: KernelEmitter, src: TileVal, thread_w: tuple[int, ...],
             reg_lin: list[int]) -> tuple[ir.Value, ...]:
    """Through shared memory, whatever else would work: `gather_elements`' contract."""
    kern.require_exact()
    need = C.Need(tuple(thread_w), tuple(reg_lin))
    trip = C.shared_trip(src.layout, need, storage_bytes(kern, src.dtype))
    return emit_round_trip(kern, src, need, trip)


def emit_shuffle(kern: KernelEmitter, src: TileVal, p: C.Shuffle) -> tuple[ir.Value, ...]:
    lay = src.layout
    nl = len(lay.lane)
    own = all(w == 1 << j for j, w in enumerate(p.lane[:nl])) and not any(p.lane[nl:])
    base = None if own else kern.thread_linear(p.lane)
    lanes: dict[int, ir.Value] = {}
    out = []
    for r, c in p.steps:
        if own and c == 0:          # this lane's own value
            out.append(src.regs[r])
            continue
        if c not in lanes:
            x = base if base is not None else kern.lane()
            lanes[c] = kern.builder.xor(x, ir.Constant(I32, c)) if c else x
        out.append(shuffle_idx(kern, src.regs[r], lanes[c]))
    return tuple(out)


class _Addresses:
    """Element offsets `base ^ const` of one access pattern (module docstring)."""

    def __init__(self, kern: KernelEmitter, inv, thread_w):
        weights = tuple(inv(int(w)) for w in thread_w)
        self.kern, self.inv = kern, inv
        self.base = kern.thread_linear(weights)
        self.mask = 0
        for w in weights:
            self.mask |= w
        self.bases: dict[int, ir.Value] = {0: self.base}

    def __call__(self, elem: int) -> ir.Value:
        off = self.inv(int(elem))
        hi, lo = off & self.mask, off & ~self.mask
        b = self.kern.builder
        if hi not in self.bases:
            self.bases[hi] = b.xor(self.base, ir.Constant(I32, hi))
        v = self.bases[hi]
        return b.add(v, ir.Constant(I32, lo)) if lo else v


def emit_round_trip(kern: KernelEmitter, src: TileVal, need: C.Need,
                    p: C.SharedTrip) -> tuple[ir.Value, ...]:
    kern.stats.exchanges += 1
    b = kern.builder
    lay, dt = src.layout, src.dtype
    st = kern.storage_type(dt)
    size = storage_bytes(kern, dt)
    ptr = kern.smem(p.shared.size * size, st)
    inv = p.shared.inverse
    kern.barrier()
    # a replicated source (a row vector broadcast over warps) is written by one replica
    # only: the others would write the same words, a write-write race between warps
    owner = kern.owner(lay) if lay.replicated_thread_mask() else None
    if owner is not None:
        write_bb = kern.fn.append_basic_block("trip.write")
        join_bb = kern.fn.append_basic_block("trip.join")
        b.cbranch(owner, write_bb, join_bb)
        b.position_at_end(write_bb)
    wa = _Addresses(kern, inv, lay.thread_weights())
    for r0 in p.write_regs:
        vals = [kern.to_storage(src.regs[r0 + i], dt) for i in range(p.write_vec)]
        _store(kern, ptr, wa(lay.reg_linear(r0)), vals, st, size)
    if owner is not None:
        b.branch(join_bb)
        b.position_at_end(join_bb)
    kern.barrier()
    ra = _Addresses(kern, inv, need.thread)
    out = []
    for g in range(0, len(need.regs), p.read_vec):
        for v in _load(kern, ptr, ra(need.regs[g]), p.read_vec, st, size):
            out.append(kern.from_storage(v, dt))
    return tuple(out)


def _store(kern: KernelEmitter, ptr, idx, vals, st, size) -> None:
    b = kern.builder
    p = b.gep(ptr, [idx])
    if len(vals) == 1:
        b.store(vals[0], p, align=size)
        return
    vt = ir.VectorType(st, len(vals))
    v = ir.Constant(vt, ir.Undefined)
    for i, x in enumerate(vals):
        v = b.insert_element(v, x, ir.Constant(I32, i))
    b.store(v, b.bitcast(p, ir.PointerType(vt, addrspace=3)), align=size * len(vals))


def _load(kern: KernelEmitter, ptr, idx, n, st, size) -> list[ir.Value]:
    b = kern.builder
    p = b.gep(ptr, [idx])
    if n == 1:
        return [b.load(p, align=size)]
    vt = ir.VectorType(st, n)
    v = b.load(b.bitcast(p, ir.PointerType(vt, addrspace=3)), align=size * n)
    return [b.extract_element(v, ir.Constant(I32, i)) for i in range(n)]


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
        assert lay.is_one_hot(), "stage adds register offsets to the thread's base"
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


def shuffle_xor(kern: KernelEmitter, v: ir.Value, lane_mask: int) -> ir.Value:
    """The value of the lane `lane ^ lane_mask` (shfl.sync.bfly) for any scalar type."""
    return shuffle_bfly(kern, v, lane_mask)
