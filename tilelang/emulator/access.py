"""Address resolution and checked memory access for all state spaces.

`locate` turns the addresses of the active threads into (region, byte offsets) after the bounds
and alignment checks; loads and stores then gather or scatter through typed views of the
region's byte array. Generic addresses are split by window (shared / local / global).
"""

from __future__ import annotations

import numpy as np

from .errors import MemoryFault
from .memory import (GLOBAL_BASE, LOCAL_WINDOW, LOCAL_WINDOW_SIZE, PARAM_WINDOW,
                     PARAM_WINDOW_SIZE, SHARED_WINDOW, SHARED_WINDOW_SIZE)


def _fault(st, idx, bad, addrs, msg):
    k = int(np.flatnonzero(bad)[0])
    return st.error(MemoryFault, msg, idx[k], int(addrs[k]))


def locate(st, space, addrs, idx, size, align):
    """Check and map addresses of threads `idx` in `space` to offsets in the region array.

    Returns a list of (region, thread idx, byte offsets, space addresses) groups.
    """
    addrs = np.broadcast_to(np.asarray(addrs, np.uint64), idx.shape)
    if space == "generic":
        out = []
        a = addrs
        in_sh = (a >= np.uint64(SHARED_WINDOW)) & (a < np.uint64(SHARED_WINDOW + SHARED_WINDOW_SIZE))
        in_lo = (a >= np.uint64(LOCAL_WINDOW)) & (a < np.uint64(LOCAL_WINDOW + LOCAL_WINDOW_SIZE))
        in_pa = (a >= np.uint64(PARAM_WINDOW)) & (a < np.uint64(PARAM_WINDOW + PARAM_WINDOW_SIZE))
        if not in_sh.any() and not in_lo.any() and not in_pa.any():
            return locate(st, "global", a, idx, size, align)
        for sel, sp, base in ((in_sh, "shared", SHARED_WINDOW), (in_lo, "local", LOCAL_WINDOW),
                              (in_pa, "kparam", 0), (~(in_sh | in_lo | in_pa), "global", 0)):
            if sel.any():
                out += locate(st, sp, a[sel] - np.uint64(base), idx[sel], size, align)
        return out
    if space in ("global", "const"):
        off = addrs.astype(np.int64) - GLOBAL_BASE
        bad = st.mem.bad_accesses(off, size)
        if bad.any():
            raise _fault(st, idx, bad, addrs, f"out-of-bounds global access of {size} bytes")
        if align > 1:
            mis = (off % align) != 0
            if mis.any():
                raise _fault(st, idx, mis, addrs, f"misaligned global access of {size} bytes "
                             f"(needs {align}-byte alignment)")
        return [("global", idx, off, addrs)]
    if space == "shared":
        off = addrs.astype(np.int64)
        bad = (off < 0) | (off + size > st.shared_size)
        if bad.any():
            raise _fault(st, idx, bad, addrs, f"out-of-bounds shared access of {size} bytes "
                         f"(block has {st.shared_size} bytes of shared memory)")
        if align > 1:
            mis = (off % align) != 0
            if mis.any():
                raise _fault(st, idx, mis, addrs, f"misaligned shared access of {size} bytes")
        return [("shared", idx, st.block_in_batch[idx] * st.shared_stride + off, addrs)]
    if space == "shared_cluster":
        # distributed shared memory: bits 24.. hold 1 + the target CTA's rank in the cluster
        # (0: this CTA), see ops_mem.build_mapa; the blocks of a cluster share the batch
        a = addrs.astype(np.int64)
        c = st.geom.cluster
        csize = c[0] * c[1] * c[2]
        own = st.block_in_batch[idx] % csize
        field = a >> 24
        rank = np.where(field == 0, own, field - 1)
        off = a & 0xFFFFFF
        bad = (rank >= csize) | (off + size > st.shared_size)
        if bad.any():
            raise _fault(st, idx, bad, addrs, f"out-of-bounds distributed shared access of "
                         f"{size} bytes (cluster of {csize}, {st.shared_size} bytes per block)")
        if align > 1:
            mis = (off % align) != 0
            if mis.any():
                raise _fault(st, idx, mis, addrs, f"misaligned shared access of {size} bytes")
        blk = st.block_in_batch[idx] - own + rank
        return [("shared", idx, blk * st.shared_stride + off, off)]
    if space == "kparam":
        off = addrs.astype(np.int64)
        off = np.where(off >= PARAM_WINDOW, off - PARAM_WINDOW, off)   # 32-bit: an offset
        bad = (off < 0) | (off + size > st.prog.kparam_size)
        if bad.any():
            raise _fault(st, idx, bad, addrs, f"out-of-bounds kernel parameter access of {size} "
                         f"bytes")
        if align > 1:
            mis = (off % align) != 0
            if mis.any():
                raise _fault(st, idx, mis, addrs, f"misaligned parameter access of {size} bytes")
        return [("kparam", idx, off, addrs)]
    if space == "local":
        off = addrs.astype(np.int64)
        bad = (off < 0) | (off + size > st.local_size)
        if bad.any():
            raise _fault(st, idx, bad, addrs, f"out-of-bounds local access of {size} bytes")
        if align > 1:
            mis = (off % align) != 0
            if mis.any():
                raise _fault(st, idx, mis, addrs, f"misaligned local access of {size} bytes")
        return [("local", idx, idx * st.local_size + off, addrs)]
    raise ValueError(space)


def region_view(st, region, dt):
    if region == "global":
        return st.mem.view(dt)
    if region == "shared":
        return st.shared_view(dt)
    if region == "kparam":
        return st.kparams.view(dt)
    return st.local_view(dt)


def record(st, region, idx, off, addrs, size, nelem=1):
    c = st.counters
    if not c.detailed:
        return
    if region == "global":
        c.record_global(st, idx, off, size * nelem)
    elif region == "shared":
        c.record_shared(st, idx, addrs.astype(np.int64), size * nelem)


def load(st, groups, dt, nelem, esize):
    """Gather `nelem` consecutive elements of dtype `dt` for each group; returns per-element
    lists of (idx, values)."""
    out = [[] for _ in range(nelem)]
    for region, idx, off, addrs in groups:
        record(st, region, idx, off, addrs, esize, nelem)
        if region == "shared" and st.races is not None:
            st.races.access(st, idx, off, esize * nelem, False)
        v = region_view(st, region, dt)
        base = off // esize
        for k in range(nelem):
            out[k].append((idx, v[base + k]))
    return out


def store(st, groups, dt, values_per_elem, esize):
    """Scatter; `values_per_elem[k]` is an array over the threads of the idx passed to locate."""
    for region, idx, off, addrs in groups:
        if region == "kparam":
            raise st.error(MemoryFault, "store to a kernel parameter (read-only)", idx[0],
                           int(addrs[0]))
        record(st, region, idx, off, addrs, esize, len(values_per_elem))
        if region == "shared" and st.races is not None:
            data = np.concatenate([np.ascontiguousarray(np.broadcast_to(
                np.asarray(vals(idx), dt), idx.shape)).reshape(-1, 1).view(np.uint8)
                for vals in values_per_elem], axis=1)
            st.races.access(st, idx, off, esize * len(values_per_elem), True, data)
        if region == "shared" and st.proxy is not None:
            st.proxy.wrote(st, off, esize * len(values_per_elem))
        v = region_view(st, region, dt)
        base = off // esize
        for k, vals in enumerate(values_per_elem):
            new = vals(idx)
            if st.watch and (v[base + k] != new).any():
                st.epoch += 1              # memory changed (rewriting a value does not count)
            v[base + k] = new
