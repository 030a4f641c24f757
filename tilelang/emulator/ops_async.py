"""cp.async (non-bulk): asynchronous global → shared copies, their groups and waits.

A copy reads global memory when it is issued and lands in shared memory only when the issuing
thread waits for its group (`cp.async.wait_group N`, `cp.async.wait_all`) or arrives on an
mbarrier for it (`cp.async.mbarrier.arrive`). On a GPU the data may land at any moment in
between; landing as late as the PTX memory model allows means a kernel that reads its buffer
before waiting, or that never waits, reads stale shared memory here instead of passing by luck.
"""

from __future__ import annotations

import numpy as np

from .access import locate, region_view
from .addressing import Address
from .completion import Pending, complete
from .ptx_ast import Reg
from .ptx_types import type_info


def _is_pred(ctx, o):
    if not isinstance(o, Reg):
        return False
    i = ctx.prog.reg_index.get((ctx.fn.name, o.name))
    return i is not None and ctx.prog.reg_dtypes[i] == np.bool_


def build_cp_async(ctx, ins, parts):
    """cp.async.{ca,cg}.shared{::cta}.global{.L2::cache_hint}{.L2::64B/128B/256B}
    [dst], [src], cp-size{, src-size | ignore-src}{, cache-policy}"""
    rest = parts[2:]
    if rest[0] not in ("ca", "cg"):
        ctx.error(f"{ins.opcode}: expected .ca or .cg")
    ops = list(ins.operands)
    if len(ops) < 3:
        ctx.error(f"{ins.opcode} needs [dst], [src], cp-size")
    if "L2::cache_hint" in rest:
        if len(ops) < 4:
            ctx.error(f"{ins.opcode}: .L2::cache_hint needs a cache-policy operand")
        ops = ops[:-1]                         # the policy is only a hint
    if len(ops) > 4:
        ctx.error(f"{ins.opcode}: too many operands")
    u32 = type_info("u32")
    cp_size = int(ctx.src(ops[2], u32)(None))
    if cp_size not in (4, 8, 16):
        ctx.error("cp.async size must be 4, 8 or 16")
    if rest[0] == "cg" and cp_size != 16:
        ctx.error("cp.async.cg copies 16 bytes")
    src_size = ignore = None
    if len(ops) == 4:
        if _is_pred(ctx, ops[3]):
            ignore = ctx.src(ops[3], type_info("pred"))
        else:
            src_size = ctx.src(ops[3], u32)
    dstA, srcA = Address(ctx, ops[0], "shared"), Address(ctx, ops[1], "global")
    if dstA.space != "shared" or srcA.space not in ("global", "generic"):
        ctx.error(f"{ins.opcode}: copies from .global to .shared")

    def run(st, m):
        idx = st.active_index(m)
        if src_size is not None:
            n = np.broadcast_to(np.asarray(src_size(st), np.int64), (st.T,))[idx]
            if (n > cp_size).any():
                bad = idx[n > cp_size][0]
                from .errors import ExecutionError
                raise st.error(ExecutionError, f"cp.async src-size {int(n[n > cp_size][0])} "
                               f"exceeds cp-size {cp_size}", bad)
        elif ignore is not None:
            n = np.where(np.broadcast_to(np.asarray(ignore(st)), (st.T,))[idx], 0, cp_size)
        else:
            n = np.full(idx.size, cp_size, np.int64)
        data = np.zeros((idx.size, cp_size), np.uint8)
        # only the src-size bytes are read (a zero src-size reads nothing: masked-off lanes
        # may point anywhere); a full copy must be aligned to its size
        full = n == cp_size
        if full.any():
            for region, gi, off, ad in srcA.groups(st, idx[full], cp_size, cp_size):
                rows = np.searchsorted(idx, gi)
                data[rows] = region_view(st, region, np.uint8)[off[:, None] +
                                                               np.arange(cp_size)[None, :]]
                if st.counters.detailed:
                    st.counters.record_global(st, gi, off, cp_size)
        part = (n > 0) & ~full
        if part.any():
            pi, pn = idx[part], n[part]
            a = srcA.get(st)
            a = np.broadcast_to(np.asarray(a, np.uint64), (st.T,))[pi]
            for b in range(int(pn.max())):
                has = pn > b
                for region, gi, off, ad in locate(st, srcA.space, a[has] + np.uint64(b),
                                                  pi[has], 1, 1):
                    data[np.searchsorted(idx, gi), b] = region_view(st, region, np.uint8)[off]
            if st.counters.detailed:
                g = locate(st, srcA.space, a, pi, 1, 1)
                for region, gi, off, ad in g:
                    st.counters.record_global(st, gi, off, pn[np.searchsorted(pi, gi)])
        groups = dstA.groups(st, idx, cp_size, cp_size)
        for region, gi, off, ad in groups:
            if st.counters.detailed:
                st.counters.record_shared(st, gi, ad.astype(np.int64), cp_size)
            rows = np.searchsorted(idx, gi)
            if st.races is not None:           # the copy may land at once: a write now
                st.races.access(st, gi, off, cp_size, True, data[rows])
            st.cp_pending.append(Pending(gi, st.cp_commits[gi].copy(), off, data[rows]))
    return run


def build_cp_async_group(ctx, ins, parts):
    kind = parts[2]
    if kind == "commit_group":
        def commit(st, m):
            st.cp_commits[st.active_index(m)] += 1
        return commit
    if kind == "wait_all":                     # commit_group + wait_group 0
        def wait_all(st, m):
            idx = st.active_index(m)
            st.cp_commits[idx] += 1
            complete(st, idx)
        return wait_all
    if len(ins.operands) != 1:
        ctx.error("cp.async.wait_group needs the number of groups that may stay pending")
    n = int(ctx.src(ins.operands[0], type_info("u32"))(None))

    def wait_group(st, m):
        idx = st.active_index(m)
        complete(st, idx, st.cp_commits[idx] - n)
    return wait_group
