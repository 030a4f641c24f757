"""Bulk asynchronous copies (sm_90, TMA): cp.async.bulk{.tensor} and their completion.

Loads (global → shared, completing on an mbarrier with `complete_tx::bytes`) read global
memory when issued and land in shared memory only when a thread polls their mbarrier
(`mbarrier.try_wait`/`test_wait`): the latest moment the PTX memory model allows, so a
kernel that reads the buffer without waiting on the barrier reads stale shared memory. Landing
writes the data and then performs the complete-tx on the barrier of every destination CTA
(`.multicast::cluster` writes the same offset in each CTA the mask names).

Stores (shared → global, `.bulk_group`) are done when the issuing thread waits for their
group (`cp.async.bulk.wait_group[.read] N`), or when the batch ends; they read shared memory
then, and a source byte that changed since the store was issued is an error (a GPU reads it
at some moment in between). Tensor copies address a box of the tensor map (`tensormap.py`,
the emulator's own 128-byte encoding); box elements outside the tensor read as zeros (or NaN
with the NaN-request OOB fill) and are not stored.
"""

from __future__ import annotations

import numpy as np

from . import tensormap
from .access import locate, region_view
from .addressing import Address
from .completion import BulkStore, TmaLoad, finish_stores
from .errors import ExecutionError, MemoryFault, UnsupportedInstruction
from .ptx_ast import TensorAddr
from .ptx_types import type_info

_NAN = {2: (0x7FFF, np.uint16), 4: (0x7FFFFFFF, np.uint32), 8: (0x7FF8000000000000, np.uint64)}
_FLOAT_TYPES = {6, 7, 8, 9, 10, 11, 12}


def _read_map(st, mapaddr, t):
    """The 128 bytes of the tensor map thread t names (a generic, global or param address)."""
    if mapaddr.param is not None:
        sp, off, size, name = mapaddr.param
        if sp != "kparam" or size < 128:
            raise st.error(ExecutionError, f"tensor map parameter {name} is not a 128-byte "
                           f"kernel parameter", t)
        raw = st.kparams[off:off + 128]
    else:
        a = np.broadcast_to(np.asarray(mapaddr.get(st), np.uint64), (st.T,))[t:t + 1]
        groups = locate(st, mapaddr.space, a, np.array([t]), 128, 64)
        (region, _, off, _), = groups
        raw = region_view(st, region, np.uint8)[int(off[0]):int(off[0]) + 128]
    try:
        return tensormap.decode(raw)
    except ValueError as e:
        raise st.error(ExecutionError, str(e), t) from None


def _shared_target(st, addr_get, space, t, size, align, what):
    """(block in batch, offset) of a shared / shared::cluster address of thread t."""
    a = np.broadcast_to(np.asarray(addr_get(st), np.uint64), (st.T,))[t:t + 1]
    sp = "shared_cluster" if space == "shared_cluster" else "shared"
    (region, _, off, _), = locate(st, sp, a, np.array([t]), size, 1)
    absoff = int(off[0])
    blk, o = divmod(absoff, st.shared_stride)
    if o % align:
        raise st.error(MemoryFault, f"{what} shared address {o:#x} is not {align}-byte aligned",
                       t, o)
    return blk, o


def _cluster_blocks(st, blk, mask):
    c = st.geom.cluster
    csize = c[0] * c[1] * c[2]
    first = blk - blk % csize
    return [first + r for r in range(csize) if int(mask) >> r & 1]


def _box_read(st, tm, coords, t):
    """Bytes of the box at `coords` in shared order, OOB elements filled."""
    if tm.interleave:
        raise st.error(UnsupportedInstruction, "interleaved tensor maps are not supported", t)
    goff, inb, soff = tensormap.box_layout(tm, coords)
    es = tm.element_size
    data = np.zeros((goff.size, es), np.uint8)
    if tm.oob_fill == 1 and tm.dtype in _FLOAT_TYPES and es in _NAN:
        v, dt = _NAN[es]
        data[:] = np.array([v], dt).view(np.uint8)
    if inb.any():
        ga = (tm.global_address + goff[inb]).astype(np.uint64)
        (region, _, off, _), = locate(st, "global", ga, np.full(ga.size, t), es, es)
        data[inb] = region_view(st, region, np.uint8)[off[:, None] + np.arange(es)[None, :]]
        if st.counters.detailed:
            st.counters.record_global(st, np.full(off.size, t), off, es)
    return data.reshape(-1), soff, goff, inb


def _byte_offsets(start, soff, es, swizzle_bytes):
    """Absolute shared byte offsets of each element's bytes (swizzled)."""
    el = tensormap.swizzle_offsets(start + soff, swizzle_bytes)
    return (el[:, None] + np.arange(es)[None, :]).reshape(-1)


def build_bulk(ctx, ins, parts):
    """cp.async.bulk{.tensor.Nd}... loads and stores, commit_group, wait_group{.read}."""
    rest = parts[2:]
    u32 = type_info("u32")
    if rest[1] == "commit_group":
        def commit(st, m):
            st.bulk_commits[st.active_index(m)] += 1
        return commit
    if rest[1] == "wait_group":
        n = int(ctx.src(ins.operands[0], u32)(None))

        def wait(st, m):
            idx = st.active_index(m)
            lim = np.full(st.T, -1, np.int64)
            lim[idx] = st.bulk_commits[idx] - n
            finish_stores(st, set(int(i) for i in idx), lim)
        return wait
    if "prefetch" in rest:
        return lambda st, m: None
    tensor = "tensor" in rest
    if tensor:
        dims = next((p for p in rest if p.endswith("d") and p[:-1].isdigit()), None)
        if dims is None or not 1 <= int(dims[:-1]) <= 5:
            ctx.error(f"{ins.opcode}: expected .1d .. .5d")
        if "im2col" in rest or "im2col_no_offs" in rest:
            ctx.error(f"{ins.opcode}: im2col mode is not supported")
        rank = int(dims[:-1])
    ops = list(ins.operands)
    if "L2::cache_hint" in rest:
        ops = ops[:-1]                      # the cache policy is only a hint
    to_global = rest[rest.index("tensor") + 2 if tensor else 1] == "global"
    if to_global:
        if "bulk_group" not in rest:
            ctx.error(f"{ins.opcode}: stores to global complete on a .bulk_group")
        if tensor:
            if len(ops) != 2 or not isinstance(ops[0], TensorAddr):
                ctx.error(f"{ins.opcode} takes [tensorMap, {{coords}}], [srcMem]")
            return _build_tensor_store(ctx, ins, ops, rank)
        return _build_plain_store(ctx, ins, ops)
    if "mbarrier::complete_tx::bytes" not in rest:
        ctx.error(f"{ins.opcode}: loads complete on an mbarrier (.mbarrier::complete_tx::bytes)")
    multicast = "multicast::cluster" in rest
    dst_space = "shared_cluster" if "shared::cluster" in rest else "shared"
    if tensor:
        if len(ops) != 3 + multicast or not isinstance(ops[1], TensorAddr):
            ctx.error(f"{ins.opcode} takes [dstMem], [tensorMap, {{coords}}], [mbar]"
                      + (", ctaMask" if multicast else ""))
    elif len(ops) != 4 + multicast:
        ctx.error(f"{ins.opcode} takes [dstMem], [srcMem], size, [mbar]"
                  + (", ctaMask" if multicast else ""))
    dst = Address(ctx, ops[0], dst_space)
    mbar = Address(ctx, ops[2 if tensor else 3], dst_space)
    gmask = ctx.src(ops[-1], type_info("u16")) if multicast else None
    if tensor:
        mapaddr = Address(ctx, ops[1].map, "generic")
        if len(ops[1].coords.items) != rank:
            ctx.error(f"{ins.opcode}: a .{rank}d copy takes {rank} coordinates")
        coords = [ctx.src(o, type_info("s32")) for o in ops[1].coords.items]
    else:
        src = Address(ctx, ops[1], "global")
        gsize = ctx.src(ops[2], u32)

    def run(st, m):
        idx = st.active_index(m)
        mask = None if gmask is None else \
            np.broadcast_to(np.asarray(gmask(st), np.int64), (st.T,))
        for t in idx:
            t = int(t)
            if tensor:
                tm = _read_map(st, mapaddr, t)
                cs = [int(np.broadcast_to(np.asarray(g(st)), (st.T,))[t]) for g in coords]
                if tm.rank != rank:
                    raise st.error(ExecutionError, f"{ins.opcode}: the tensor map has rank "
                                   f"{tm.rank}", t)
                data, soff, _, _ = _box_read(st, tm, cs, t)
                es, sw, nbytes = tm.element_size, tm.swizzle_bytes, tm.box_bytes
                align = 128
            else:
                nbytes = int(np.broadcast_to(np.asarray(gsize(st), np.int64), (st.T,))[t])
                if nbytes <= 0 or nbytes % 16:
                    raise st.error(ExecutionError, f"{ins.opcode}: size {nbytes} is not a "
                                   f"positive multiple of 16", t)
                a = np.broadcast_to(np.asarray(src.get(st), np.uint64), (st.T,))[t]
                ga = a + np.arange(nbytes, dtype=np.uint64)
                (region, _, off, _), = locate(st, src.space, ga[:1], np.array([t]), 16, 16)
                (region, _, off, _), = locate(st, src.space, ga, np.full(nbytes, t), 1, 1)
                data = region_view(st, region, np.uint8)[off].copy()
                soff, es, sw, align = np.arange(nbytes, dtype=np.int64), 1, 0, 16
            blk, o = _shared_target(st, dst.get, dst.space, t, nbytes, align, "bulk copy "
                                    "destination")
            if o + nbytes > st.shared_size:
                raise st.error(MemoryFault, f"bulk copy of {nbytes} bytes to shared offset "
                               f"{o:#x} passes the block's {st.shared_size} bytes", t, o)
            mblk, mo = _shared_target(st, mbar.get, mbar.space, t, 8, 8, "mbarrier")
            targets = [blk] if mask is None else _cluster_blocks(st, blk, mask[t])
            seen = None if st.races is None else st.races.tma_snapshot(st, t)
            for b in targets:
                base = b * st.shared_stride
                offs = _byte_offsets(o, soff, es, sw)
                if offs.max() >= st.shared_size:
                    raise st.error(MemoryFault, "swizzled bulk copy passes the block's shared "
                                   "memory", t, o)
                mb = mblk if mask is None else b
                elem = (mb * st.shared_stride + mo) // 8
                if seen is not None:        # the copy may write at once: a write now
                    st.races.tma_write(st, seen, base + offs, elem, t, ins.line)
                st.tma_pending.append(TmaLoad(elem, base + offs, data, nbytes, ins.line, t,
                                              seen))
        st.mbar_flipped = True             # wake mbarrier waiters: they land the copies
    return {"run": run, "sync": "mbar_arrive"}


def _build_tensor_store(ctx, ins, ops, rank):
    mapaddr = Address(ctx, ops[0].map, "generic")
    if len(ops[0].coords.items) != rank:
        ctx.error(f"{ins.opcode}: a .{rank}d copy takes {rank} coordinates")
    coords = [ctx.src(o, type_info("s32")) for o in ops[0].coords.items]
    src = Address(ctx, ops[1], "shared")

    def run(st, m):
        for t in st.active_index(m):
            t = int(t)
            tm = _read_map(st, mapaddr, t)
            if tm.interleave:
                raise st.error(UnsupportedInstruction, "interleaved tensor maps are not "
                               "supported", t)
            cs = [int(np.broadcast_to(np.asarray(g(st)), (st.T,))[t]) for g in coords]
            goff, inb, soff = tensormap.box_layout(tm, cs)
            blk, o = _shared_target(st, src.get, src.space, t, tm.box_bytes, 128,
                                    "bulk store source")
            es = tm.element_size
            offs = _byte_offsets(o, soff, es, tm.swizzle_bytes)
            if offs.max() >= st.shared_size:
                raise st.error(MemoryFault, "bulk store source passes the block's shared "
                               "memory", t, o)
            offs = offs.reshape(-1, es)[inb].reshape(-1) + blk * st.shared_stride
            if st.proxy is not None:
                st.proxy.check(st, offs, 1, t, ins.opcode)
            if st.races is not None:
                st.races.access(st, np.full(offs.size, t), offs, 1, False)
            gaddr = (tm.global_address + goff[inb])[:, None] + np.arange(es)[None, :]
            st.bulk_pending.append(BulkStore(t, int(st.bulk_commits[t]), offs,
                                             gaddr.reshape(-1), ins.line,
                                             st.shared[offs].copy()))
    return run


def _build_plain_store(ctx, ins, ops):
    if len(ops) != 3:
        ctx.error(f"{ins.opcode} takes [dstMem], [srcMem], size")
    dst = Address(ctx, ops[0], "global")
    src = Address(ctx, ops[1], "shared")
    gsize = ctx.src(ops[2], type_info("u32"))

    def run(st, m):
        for t in st.active_index(m):
            t = int(t)
            n = int(np.broadcast_to(np.asarray(gsize(st), np.int64), (st.T,))[t])
            if n <= 0 or n % 16:
                raise st.error(ExecutionError, f"{ins.opcode}: size {n} is not a positive "
                               f"multiple of 16", t)
            blk, o = _shared_target(st, src.get, src.space, t, n, 16, "bulk store source")
            if st.proxy is not None:
                st.proxy.check(st, blk * st.shared_stride + o + np.arange(0, n, 4), 4, t,
                               ins.opcode)
            ga = np.broadcast_to(np.asarray(dst.get(st), np.uint64), (st.T,))[t]
            locate(st, "global", np.array([ga]), np.array([t]), 16, 16)
            sbytes = blk * st.shared_stride + o + np.arange(n)
            if st.races is not None:
                st.races.access(st, np.full(n, t), sbytes, 1, False)
            st.bulk_pending.append(BulkStore(t, int(st.bulk_commits[t]), sbytes,
                                             ga + np.arange(n, dtype=np.uint64), ins.line,
                                             st.shared[sbytes].copy()))
    return run
