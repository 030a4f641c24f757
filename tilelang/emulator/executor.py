"""Lockstep execution of one batch of blocks with min-PC scheduling.

While every live thread of the batch sits at the same PC (the usual case) instructions run on
all of them with no mask at all. A branch that splits the threads switches to per-thread PCs:
each step runs the instruction at the smallest PC for the threads there, so paths that split
meet again at their join point (the reconvergence a GPU gives), and as soon as all live threads
share one PC again the fast path resumes.

Two refinements keep min-PC honest about code layout: threads inside a call are ordered by
their call site (`_select_in_call_order`), and synchronizing instructions (bar.sync, named
barriers, .sync warp ops) park the threads that arrive early until their block/warp/count is
complete, so a barrier does not depend on which side of it the compiler placed a block. When
only parked threads remain and no group can complete, the kernel would hang on a GPU: that is
reported as a divergence error.
"""

from __future__ import annotations

import numpy as np

from .errors import (BarrierDivergence, DeviceAssertion, EmulatorError, ExecutionError,
                     NoProgress, WarpDivergence)
from .ops_wgmma import check_pending_reads
from .tmem import uncommitted
from .tmemrace import check_ld_reads
from .warpgroup import warpgroup_index

# Per-thread PCs are int32 (half the memory traffic of the per-step passes over them).
EXITED = np.iinfo(np.int32).max
PARKED = EXITED - (1 << 28)     # pcs[t] = PARKED + pc: thread t waits at the sync op at pc
MAX_STEPS = 50_000_000


def run_batch(st, max_steps: int = MAX_STEPS) -> None:
    code = st.prog.code
    counts = st.counters.per_pc
    issued = st.counters.issued_threads
    warps = st.counters.issued_warps
    # steps run with every thread of the batch active (mask None), per pc: folded into
    # `issued` / `warps` as T and W each when the batch ends (one list increment a step)
    full = [0] * len(code)
    T = st.T
    W = st.nwarps
    upc = 0
    pcs = None                     # None: uniform mode at `upc`
    mask = None                    # uniform-mode active set (None: all T threads)
    nact = T
    nwarp = W                      # warps with a thread in the active set
    nlive = int(np.count_nonzero(st.live))
    has_calls = any(d.ctrl == "call" for d in code)
    steps = 0
    seen = 0                       # the memory epoch the spinners were parked at
    regs = st.regs
    link = st.world_link           # a rank of a world of processes (shared_world.py)
    st.watch = st.watch or link is not None
    while True:
        steps += 1
        if steps > max_steps:
            _step_limit(st, pcs, upc, max_steps)
        if pcs is not None:
            pc = int(pcs.min())
            if pc == EXITED:
                st.counters.fold_full(full, T, W)
                return
            if pc >= PARKED:               # everyone left is waiting: release or deadlock
                _release_or_fail(st, pcs)
                continue
            if has_calls and st.sp.any():
                pc, mask = _select_in_call_order(st, pcs)
            else:
                mask = pcs == pc
            nact = int(np.count_nonzero(mask))
            nwarp = W if nact == T else _warps_in(st, mask)
            if nact == nlive:
                # every live thread is here: back to the fast path
                pcs = None
                upc = pc
                if nact == T:
                    mask = None
        else:
            pc = upc
        ins = code[pc]
        st.ins = ins
        # the set of threads this instruction really executes for
        if ins.guard is not None:
            p = regs[ins.guard]
            if ins.guard_neg:
                p = ~p
            em = p if mask is None else (mask & p)
            n = int(np.count_nonzero(em))
            if n == T:
                em = None
        else:
            em, n = mask, nact
        counts[pc] += n
        if mask is None:
            full[pc] += 1
        else:
            issued[pc] += nact
            warps[pc] += nwarp
        if st.watch:                          # memory changed: spinners look again
            if n and ins.writes:
                st.epoch += 1
            if st.nspin and st.epoch != seen:
                _wake_spinners(st, pcs)
            seen = st.epoch
            if link is not None:              # other processes of the world see it
                link.publish(st.epoch)
        if st.wg_regs and ins.reads and ins.root != "wgmma":
            check_pending_reads(st, ins, em)
        if st.tc_ld_regs and ins.reads:
            check_ld_reads(st, ins, em)
        ctrl = ins.ctrl
        if ins.sync == "mbar_wait":
            act = mask if mask is not None else np.ones(T, bool)
            sel = em if em is not None else act
            ok = sel & ins.extra[0](st, sel)
            if pcs is None and int(np.count_nonzero(ok)) == n:
                ins.run(st, em)
                upc += 1
                continue
            if pcs is None:
                pcs = _split(st, mask, upc)
            if ok.any():
                ins.run(st, ok)
                pcs[ok] = pc + 1
            wait = sel & ~ok                   # re-run after the next phase completes
            pcs[wait] = PARKED + pc
            st.wait_bar[wait] = -2
            pcs[act & ~sel] += 1
            continue
        if ins.sync == "mbar_arrive":
            if n:
                ins.run(st, em)
            if pcs is None:
                upc += 1
            else:
                pcs += mask
                if st.mbar_flipped:            # wake every mbarrier waiter to re-check
                    woken = st.wait_bar == -2
                    pcs[woken] -= PARKED
                    st.wait_bar[woken] = -1
            st.mbar_flipped = False
            continue
        if ins.sync == "named":
            act = mask if mask is not None else np.ones(T, bool)
            sel = em if em is not None else act
            if pcs is None and _named_all_complete(st, ins, sel):
                for b, a, _, members, _ in _named_groups(st, ins, sel):
                    st.named_arrived[b, a] = 0     # completed (earlier bar.arrive included)
                    if st.races is not None:       # a release and acquire of the arrivals
                        st.races.named_arrive(st, b, a, members)
                        st.races.named_done(st, b, a, members[:0] if ins.extra[2] else
                                            members)
                upc += 1                   # everyone arrived together: nothing waits
                continue
            if pcs is None:
                pcs = _split(st, mask, upc)
            _named_barrier(st, ins, pc, sel, pcs)
            pcs[act & ~sel] += 1
            continue
        if ins.sync is not None and (pcs is not None or n != nact):
            # A sync op reached by part of the block/warp: the arrivals wait (as bar.sync and
            # .sync warp ops wait on the GPU) until the rest arrive; see _sync_complete.
            if pcs is None:
                pcs = _split(st, mask, upc)
            act = mask if mask is not None else np.ones(T, bool)
            sel = em if em is not None else act
            group = sel | ((pcs == PARKED + pc) & (st.wait_bar != -3))   # not spinners
            done = group & _sync_complete(st, ins, group)
            if done.any():
                ins.run(st, done)
                pcs[done] = pc + 1
            pcs[sel & ~done] = PARKED + pc
            pcs[act & ~sel] += 1
            continue
        if ctrl is None:
            if n:
                ins.run(st, em)
            if pcs is None:
                upc += 1
            else:
                pcs += mask                # bool → +1 where active, no fancy indexing
            continue
        if ctrl == "bra":
            spin = None
            if ins.target <= pc and n:          # a loop's back edge: is it spinning?
                spin = _spin_check(st, em if em is not None else mask, pc, ins.target)
            if pcs is None and spin is None:
                if n == nact:
                    upc = ins.target
                    continue
                if n == 0:
                    upc += 1
                    continue
            if pcs is None:
                pcs = _split(st, mask, upc)
            act = mask if mask is not None else np.ones(T, bool)
            taken = em if em is not None else act
            pcs[act & ~taken] += 1
            pcs[taken] = ins.target
            if spin is not None:                # park them until memory changes
                pcs[spin] = PARKED + ins.target
                st.wait_bar[spin] = -3
                st.nspin += int(np.count_nonzero(spin))
                st.watch = True
                seen = st.epoch
            continue
        if ctrl == "brx":
            act = mask if mask is not None else np.ones(T, bool)
            sel = em if em is not None else act
            k = np.broadcast_to(np.asarray(ins.index(st), np.int64), (T,))
            table = np.asarray(ins.targets, np.int64)
            bad = sel & ((k < 0) | (k >= table.size))
            if bad.any():
                raise st.error(ExecutionError, f"brx.idx index out of range of its "
                               f"{table.size}-entry table", np.flatnonzero(bad)[0])
            dest = table[np.where(sel, k, 0)].astype(np.int32)
            if pcs is None:
                tk = np.unique(dest[sel])
                if n == nact and tk.size == 1:
                    upc = int(tk[0])
                    continue
                if n == 0:
                    upc += 1
                    continue
                pcs = _split(st, mask, upc)
            pcs[act & ~sel] += 1
            pcs[sel] = dest[sel]
            continue
        if ctrl in ("exit", "ret") or ctrl == "trap":
            if ctrl == "trap" and n:
                first = np.flatnonzero(em)[0] if em is not None else 0
                raise st.error(DeviceAssertion, "trap executed", first)
            is_exit = ctrl == "exit" or (ctrl == "ret" and ins.func == st.prog.kernel.name)
            if n == 0:
                if pcs is None:
                    upc += 1
                else:
                    pcs[mask] += 1
                continue
            act = mask if mask is not None else np.ones(T, bool)
            sel = em if em is not None else act
            if pcs is None:
                pcs = _split(st, mask, upc)
            if is_exit:
                if st.narmed:
                    gone = sel & (st.spin_pc != -1)
                    st.spin_pc[gone] = -1
                    st.narmed -= int(np.count_nonzero(gone))
                    st.watch = bool(st.narmed or st.nspin) or st.world_link is not None
                st.live &= ~sel
                nlive = int(np.count_nonzero(st.live))
                pcs[sel] = EXITED
            else:
                idx = np.flatnonzero(sel)
                st.sp[idx] -= 1
                if (st.sp[idx] < 0).any():
                    raise st.error(EmulatorError, "ret with an empty call stack", idx[0])
                pcs[idx] = st.stack[st.sp[idx], idx]
            pcs[act & ~sel] += 1
            continue
        if ctrl == "call":
            if n:
                ins.run(st, em)
            act = mask if mask is not None else np.ones(T, bool)
            sel = em if em is not None else act
            if pcs is None:
                pcs = _split(st, mask, upc)
            idx = np.flatnonzero(sel)
            if n:
                if (st.sp[idx] >= st.stack.shape[0]).any():
                    raise st.error(ExecutionError, "call stack overflow (recursion deeper "
                                   f"than {st.stack.shape[0]})", idx[0])
                st.stack[st.sp[idx], idx] = pc + 1
                st.sp[idx] += 1
            pcs[act & ~sel] += 1
            pcs[idx] = ins.target
            continue
        raise st.error(EmulatorError, f"internal: unknown control kind {ctrl}")


def _warps_in(st, mask) -> int:
    """Warps with at least one thread in `mask` (what a GPU issues an instruction for)."""
    if st.tpb % 32 == 0:             # warps are aligned runs of 32 threads: 32 bits each
        return int(np.count_nonzero(np.packbits(mask).view(np.uint32)))
    w = st.warp_global[mask]         # non-decreasing: distinct values by their steps
    return int(w.size and 1 + np.count_nonzero(w[1:] != w[:-1]))


def _sync_complete(st, ins, group):
    """Per thread: has everyone this sync op waits for arrived (exited threads excepted)?"""
    if ins.sync in ("block", "cluster"):
        blk = st.block_in_batch
        if ins.sync == "cluster":
            c = st.geom.cluster
            blk = blk // (c[0] * c[1] * c[2])      # batches hold whole clusters, in order
        arrived = np.bincount(blk[group], minlength=st.nblk)
        live = np.bincount(blk[st.live], minlength=st.nblk)
        return (arrived == live)[blk]
    if ins.sync == "cluster_wait":       # every live thread of the cluster arrived enough
        c = st.geom.cluster
        cl = st.block_in_batch // (c[0] * c[1] * c[2])
        big = np.iinfo(np.int64).max
        low = np.full(int(cl[-1]) + 1, big, np.int64)
        np.minimum.at(low, cl[st.live], st.cl_arrived[st.live])
        return low[cl] > st.cl_waited
    if ins.sync == "warpgroup":          # all 128 threads of the warp group, none exited
        wg = warpgroup_index(st)
        return (np.bincount(wg[group], minlength=int(wg[-1]) + 1) == 128)[wg]
    from .ops_warp import FULL, _exist_bits, warp_bits
    mm = FULL if ins.members is None else ins.members(st)
    w = st.warp_global
    need = np.asarray(mm, np.uint64) & _exist_bits(st)[w] & warp_bits(st, st.live)[w]
    return (need & ~warp_bits(st, group)[w]) == 0


def _named_groups(st, ins, sel):
    """(block, barrier id, expected count, arriving threads) for the threads in `sel`."""
    get_id, get_count, _ = ins.extra
    T = st.T
    bid = np.broadcast_to(np.asarray(get_id(st), np.int64), (T,))
    cnt = np.broadcast_to(np.asarray(get_count(st), np.int64), (T,))
    idx = np.flatnonzero(sel)
    if (bid[idx] < 0).any() or (bid[idx] > 15).any():
        raise st.error(ExecutionError, "barrier id must be 0..15", idx[0])
    key = st.block_in_batch[idx] * 16 + bid[idx]
    for k in np.unique(key):
        members = idx[key == k]
        # the hardware counts arriving warps, 32 threads each
        arrived = 32 * np.unique(st.warp_global[members]).size
        yield int(k // 16), int(k % 16), int(cnt[members[0]]), members, arrived


def _named_all_complete(st, ins, sel):
    return all(st.named_arrived[b, a] + arrived >= expected
               for b, a, expected, _, arrived in _named_groups(st, ins, sel))


def _named_barrier(st, ins, pc, sel, pcs):
    """Count arrivals at a named barrier; release its waiters when the count is reached."""
    is_arrive = ins.extra[2]
    for b, a, expected, members, arrived in _named_groups(st, ins, sel):
        if st.races is not None:
            st.races.named_arrive(st, b, a, members)
        st.named_arrived[b, a] += arrived
        if st.named_arrived[b, a] >= expected:
            st.named_arrived[b, a] = 0
            waiting = (st.wait_bar == a) & (st.block_in_batch == b) & (pcs >= PARKED) & \
                (pcs != EXITED)
            if st.races is not None:       # the waiters and the last arrivals acquire
                st.races.named_done(st, b, a, np.concatenate(
                    [np.flatnonzero(waiting), members[:0] if is_arrive else members]))
            pcs[waiting] = pcs[waiting] - PARKED + 1
            st.wait_bar[waiting] = -1
            pcs[members] = pc + 1
        elif is_arrive:
            pcs[members] = pc + 1
        else:
            pcs[members] = PARKED + pc
            st.wait_bar[members] = a


def _release_or_fail(st, pcs):
    """All live threads wait at sync ops: release a complete group, else report deadlock."""
    code = st.prog.code
    parked = (pcs >= PARKED) & (pcs != EXITED)
    spinning = parked & (st.wait_bar == -3)
    waits = np.unique(pcs[parked & ~spinning])
    for p in waits:
        ins = code[int(p - PARKED)]
        if ins.sync in ("named", "mbar_wait"):
            continue
        group = (pcs == p) & ~spinning
        done = group & _sync_complete(st, ins, group)
        if done.any():                    # completed by threads that exited meanwhile
            st.ins = ins
            ins.run(st, done)
            pcs[done] = p - PARKED + 1
            return
    mb = parked & (st.wait_bar == -2)
    if mb.any():
        # Nothing else can run: waits that are still incomplete return false (as a try_wait
        # that times out does); a loop that retries forever then hits the step limit.
        for p in np.unique(pcs[mb]):
            ins = code[int(p - PARKED)]
            sel = mb & (pcs == p)
            st.ins = ins
            ins.extra[1](st, sel)
            pcs[sel] = p - PARKED + 1
        st.wait_bar[mb] = -1
        return
    if spinning.any():
        # a rank of a world of processes: another process may still change memory
        if st.world_link is not None and st.world_link.stall(
                st.epoch, lambda: _ranks_waiting(st, pcs)):
            _wake_spinners(st, pcs)
            return
        _no_progress(st, pcs, spinning, parked & ~spinning)
    ins = code[int(waits[0] - PARKED)]
    st.ins = ins
    group = (pcs == waits[0]) & ~spinning
    first = int(np.flatnonzero(group)[0])
    if ins.sync == "named":
        b, a = int(st.block_in_batch[first]), int(st.wait_bar[first])
        raise st.error(BarrierDivergence, f"{ins.opcode}: deadlock — named barrier {a} has "
                       f"{int(st.named_arrived[b, a])} arrivals and nothing else can arrive",
                       first)
    if ins.sync == "warpgroup":
        same = warpgroup_index(st) == warpgroup_index(st)[first]
        n = int(np.count_nonzero(same & group))
        raise st.error(WarpDivergence, f"{ins.opcode}: warp group not converged: {n} of its 128 "
                       f"threads arrived (the rest diverged or exited)", first)
    if ins.sync == "cluster_wait":
        c = st.geom.cluster
        cl = st.block_in_batch // (c[0] * c[1] * c[2])
        late = np.flatnonzero(st.live & (cl == cl[first]) & (st.cl_arrived <= st.cl_waited[first]))
        where = sorted({code[int(q - PARKED) if q >= PARKED else int(q)].line
                        for q in pcs[late]})
        raise st.error(BarrierDivergence, f"{ins.opcode}: deadlock — {late.size} live thread(s) "
                       f"of the cluster never arrive (they wait at PTX line(s) "
                       f"{', '.join(map(str, where[:6]))}); one is shown",
                       late[0] if late.size else first)
    if ins.sync in ("block", "cluster"):
        same = st.block_in_batch == st.block_in_batch[first]
        cls, unit = BarrierDivergence, "block"
    else:
        same = st.warp_global == st.warp_global[first]
        cls, unit = WarpDivergence, "warp"
    other = np.flatnonzero(same & st.live & ~group)
    lines = sorted({code[int(q - PARKED)].line for q in pcs[same & st.live]})
    raise st.error(cls, f"{ins.opcode}: deadlock — threads of the {unit} wait at different "
                   f"sync points (PTX lines {', '.join(map(str, lines))}); a thread waiting "
                   f"elsewhere is shown", other[0] if other.size else first)


def _select_in_call_order(st, pcs):
    """Min-PC over call chains: a thread inside a call is ordered by its call site first.

    Callee code sits after the kernel in the flat program, so plain min-PC would run a thread
    that skipped a call ahead of one still inside it (and, say, report a barrier the other
    thread is about to reach as divergent). Compare (call site, ..., pc) chains instead.
    """
    cand = pcs < PARKED
    level = 0
    depth = st.stack.shape[0]
    while True:
        deeper = st.sp > level
        key = np.where(deeper, st.stack[min(level, depth - 1)] - 1, pcs)
        kmin = key[cand].min()
        cand &= key == kmin
        here = cand & ~deeper
        if here.any():
            return int(kmin), here
        level += 1


def _split(st, mask, upc):
    """Leave the fast path: per-thread PCs, exited threads parked at EXITED."""
    pcs = np.full(st.T, EXITED, np.int32)
    pcs[st.live] = upc
    return pcs


# -- no progress --------------------------------------------------------------------------
# A thread that takes a loop's back edge twice in a row with exactly the same registers will
# repeat that iteration for as long as the memory it reads stays the same: it spins. Such
# threads are parked (wait_bar -3) so that the others run (min-PC scheduling would otherwise
# run the spinning loop forever, starving the thread that is to release it), and woken
# whenever memory changes. While any thread is being looked at or parked (`st.watch`),
# stores and atomics count a change (`st.epoch`) only where the value really changed (a
# failed cas, or a lock's broadcast rewriting the same word, is no change), and a thread
# whose loop changed memory is not spinning. When nothing but
# spinners and waiters for things that can no longer happen are left, the kernel would hang
# on a GPU: a NoProgress error. Looks are spaced out exponentially (the 64th, 128th, ...
# back edge of a thread), so loops that do make progress pay almost nothing.
_HASH_MUL = np.uint64(0x100000001B3)


def _reg_hash(st, idx, target):
    h = np.full(idx.size, np.uint64((target * 0x9E3779B97F4A7C15) % (1 << 64)), np.uint64)
    for k, r in enumerate(st.regs):
        v = r[idx]
        if v.dtype.kind == "f":
            v = v.view(f"u{v.dtype.itemsize}")
        h = (h ^ v.astype(np.uint64)) * _HASH_MUL + np.uint64(k)
    return (h ^ st.sp[idx].astype(np.uint64)) * _HASH_MUL


def _spin_check(st, taken, pc, target):
    """The threads (bool mask) found spinning at this back edge, or None."""
    if taken is None:
        st.back_count += 1
        due = st.back_count >= st.spin_next
    else:
        st.back_count[taken] += 1
        due = taken & (st.back_count >= st.spin_next)
    if not due.any():
        return None
    idx = np.flatnonzero(due)
    h = _reg_hash(st, idx, target)
    cnt = st.back_count[idx]
    fresh = st.spin_pc[idx] == -1
    armed = st.spin_pc[idx] == target
    # the same registers and no memory changed since the last look (by anyone)
    same = armed & (st.spin_hash[idx] == h) & (st.spin_epoch[idx] == st.epoch)
    arm = idx[fresh]                        # look now, compare at the next traversal
    st.spin_hash[arm] = h[fresh]
    st.spin_pc[arm] = target
    st.spin_epoch[arm] = st.epoch
    st.spin_next[arm] = cnt[fresh] + 1
    moved = ~fresh & ~same                   # progressed (or another loop): look later
    st.spin_pc[idx[moved]] = -1
    st.spin_next[idx[moved]] = cnt[moved] * 2
    spin = idx[same]
    st.narmed += arm.size - int(np.count_nonzero(moved)) - spin.size
    st.watch = bool(st.narmed or st.nspin) or st.world_link is not None
    if spin.size == 0:
        return None
    st.spin_pc[spin] = -1
    st.spin_next[spin] = st.back_count[spin] + 1
    st.spin_from[spin] = pc
    out = np.zeros(st.T, bool)
    out[spin] = True
    return out


def _wake_spinners(st, pcs):
    woken = st.wait_bar == -3
    if pcs is None:                      # cannot happen: spinners keep per-thread PCs
        raise st.error(ExecutionError, "internal: spinning threads in uniform mode")
    pcs[woken] -= PARKED
    st.wait_bar[woken] = -1
    st.spin_pc[woken] = -1
    st.spin_next[woken] = st.back_count[woken] + 1
    st.nspin = 0
    st.watch = bool(st.narmed) or st.world_link is not None


def _where(st, pc):
    line = st.prog.code[pc].line
    src = st.prog.source_line(pc)
    return f"PTX line {line}" + (f", source {src}" if src else "")


def _no_progress(st, pcs, spinning, waiting):
    code = st.prog.code
    t = int(np.flatnonzero(spinning)[0])
    frm, head = int(st.spin_from[t]), int(pcs[t] - PARKED)
    st.ins = code[frm]
    n = int(np.count_nonzero(spinning))
    lines = f"lines {code[head].line}-{code[frm].line}" if code[head].line != code[frm].line \
        else f"line {code[frm].line}"
    src = st.prog.source_line(frm) or st.prog.source_line(head)
    msg = (f"no progress: {n} thread(s) spin in the loop at PTX {lines}"
           + (f" (source {src})" if src else "")
           + ", re-reading memory that no running thread changes")
    k = int(np.count_nonzero(waiting))
    if k:
        wl = sorted({code[int(q - PARKED)].line for q in pcs[waiting]})
        msg += f"; the other {k} live thread(s) wait at PTX line(s) " \
               f"{', '.join(map(str, wl[:6]))}"
    if st.rank_of_block is not None:         # a world launch (world.py): who waits where
        msg += "; " + _ranks_waiting(st, pcs)
    if st.world_link is not None:            # and the other processes of the world
        msg += "; " + st.world_link.others_waiting()
    msg += ". On a GPU this launch hangs (a lock never released, a flag never set?)"
    msg += uncommitted(st)
    raise st.error(NoProgress, msg, t)


def _ranks_waiting(st, pcs) -> str:
    """Per rank of a world launch, the PTX (and source) lines its live threads wait at."""
    code = st.prog.code
    rank = st.rank_of_block[st.block_in_batch]
    parts = []
    for r in np.unique(rank[st.live]):
        sel = st.live & (rank == r)
        where = set()
        for t in np.flatnonzero(sel):
            spin = st.wait_bar[t] == -3
            pc = int(st.spin_from[t]) if spin else int(pcs[t] - PARKED if pcs[t] >= PARKED
                                                         else pcs[t])
            src = st.prog.source_line(pc)
            where.add(f"PTX line {code[pc].line}" + (f" (source {src})" if src else ""))
        parts.append(f"rank {int(r)} waits at {', '.join(sorted(where)[:4])}")
    return "; ".join(parts)


def _step_limit(st, pcs, upc, max_steps):
    if pcs is None:
        pc = upc
    else:
        run = pcs[(pcs < PARKED)]
        pc = int(np.bincount(run).argmax()) if run.size else int(pcs.min() % PARKED)
    st.ins = st.prog.code[pc]
    raise st.error(ExecutionError, f"kernel did not finish in {max_steps} steps ({_where(st, pc)}"
                   f" is where threads were; set max_steps= or TILELANG_EMULATOR_MAX_STEPS "
                   f"for longer kernels)")
