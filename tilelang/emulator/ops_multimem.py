"""multimem.st and multimem.ld_reduce (NVLink SHARP, sm_90+; docs/distributed.md "Multimem"):
an access through a multicast address reaches every buffer the address maps to.

A world (world.py, `EmulatedWorld.multicast`) registers each multicast window in
`GlobalMemory.multicast`: its address, its size and the address of each rank's buffer. Here
an address inside a window is translated to every rank's address at the same offset:
`multimem.st` stores the value in each (rank order), `multimem.ld_reduce` loads each and
reduces them in rank order (a float add is rounded per step, as the reduction of the switch is
not specified to be otherwise). An address in no window faults, as it is undefined behaviour
on a GPU.

The global race check (globalrace.py) sees them as the per-rank loads and stores they are made
of, and as *plain* ones although `.relaxed` makes them strong: the check exempts strong accesses
because they serve flags and counters, while a multimem access carries the data itself, so a
reduction of buffers other ranks wrote with no release/acquire chain in between (a missing
barrier) must be reported. A `.release`/`.acquire` on them still synchronizes.
"""

from __future__ import annotations

import numpy as np

from .access import locate, load, store
from .addressing import Address, space_of
from .decode import op
from .errors import MemoryFault
from .globalrace import sem_of
from .ops_mem import _gather_full, _mem_type
from .ptx_types import type_info

_REDUCE = {"add": np.add, "min": np.minimum, "max": np.maximum, "and": np.bitwise_and,
           "or": np.bitwise_or, "xor": np.bitwise_xor}


def _targets(st, addrs, idx, size):
    """The address of each rank's buffer for each thread's multicast address (a list, one
    array per rank); a fault where an address is in no window."""
    a = np.broadcast_to(np.asarray(addrs, np.uint64), idx.shape).astype(np.int64)
    windows = st.mem.multicast
    out = None
    found = np.zeros(a.shape, bool)
    for base, (nbytes, ranks) in windows.items():
        inside = (a >= base) & (a + size <= base + nbytes)
        if not inside.any():
            continue
        if out is None:
            out = [np.zeros(a.shape, np.int64) for _ in ranks]
        elif len(out) != len(ranks):
            raise st.error(MemoryFault, "one multimem instruction reaches multicast windows of "
                           "different worlds", idx[0], int(a[0]))
        for k, r in enumerate(ranks):
            out[k][inside] = a[inside] - base + r
        found |= inside
    if not found.all():
        bad = int(np.flatnonzero(~found)[0])
        raise st.error(MemoryFault, f"multimem access of {size} bytes at an address that is no "
                       f"multicast address", idx[bad], int(a[bad]))
    return [x.astype(np.uint64) for x in out]


@op("multimem")
def build_multimem(ctx, ins, parts):
    kind = parts[1] if len(parts) > 1 else ""
    if kind not in ("st", "ld_reduce"):
        ctx.error(f"{ins.opcode}: unsupported multimem operation")
    ti, dt = _mem_type(ctx, parts)
    esize = ti.size
    sem = sem_of(parts)
    strong = False                      # data, not a flag: see the module docstring
    if kind == "st":
        a, v = ins.operands[:2]
        # as st: the value's bits (a signed type keeps its dtype)
        get = ctx.src(v, type_info(f"b{esize * 8}") if ti.kind != "s" else ti)
        addr = Address(ctx, a, space_of(parts))

        def run_st(st, m):
            idx = st.active_index(m)
            x = np.asarray(get(st)).astype(dt, copy=False)
            vals = (lambda sel: x if x.ndim == 0 else x[sel])
            a = addr.get(st)
            a = a if np.ndim(a) == 0 else a[idx]
            for ra in _targets(st, a, idx, esize):
                groups = locate(st, "global", ra, idx, esize, esize)
                if st.grace is not None:
                    for region, gi, off, _ in groups:
                        st.grace.sync(st, gi, off, sem)
                        st.grace.access(st, gi, off, esize, True, strong)
                store(st, groups, dt, [vals], esize)
        return run_st
    ops = [p for p in parts[2:] if p in _REDUCE]
    if len(ops) != 1:
        ctx.error(f"{ins.opcode}: multimem.ld_reduce needs one of {', '.join(_REDUCE)}")
    fn = _REDUCE[ops[0]]
    d, a = ins.operands[:2]
    put = ctx.dst(d, ti)
    addr = Address(ctx, a, space_of(parts))
    value_dt = ti.dtype

    def run_ld(st, m):
        idx = st.active_index(m)
        a = addr.get(st)
        a = a if np.ndim(a) == 0 else a[idx]
        acc = None
        for ra in _targets(st, a, idx, esize):
            groups = locate(st, "global", ra, idx, esize, esize)
            res = load(st, groups, dt, 1, esize)
            if st.grace is not None:
                for region, gi, off, _ in groups:
                    st.grace.access(st, gi, off, esize, False, strong)
                    st.grace.sync(st, gi, off, sem)
            v = np.asarray(_gather_full(st, m, res[0], dt)).view(value_dt)
            acc = v.copy() if acc is None else fn(acc, v)
        # as ld: the destination takes the bits (a signed type its values)
        put(st, np.ascontiguousarray(acc).view(dt) if ti.kind == "f" else
            acc.astype(dt, copy=False), m)
    return run_ld
