"""Warp-level instructions: shfl.sync, vote.sync, activemask, redux.sync, elect.sync, and the
convergence checks the emulator adds (a GPU would hang or give undefined results)."""

from __future__ import annotations

import numpy as np

from .decode import op
from .errors import WarpDivergence
from .ptx_ast import PredPair
from .ptx_types import TYPE_NAMES, type_info

FULL = 0xFFFFFFFF


def warp_bits(st, sel):
    """Per-warp OR of (1 << lane) over the threads in boolean array `sel` (indexed by warp)."""
    nw = int(st.warp_global[-1]) + 1
    w = np.bincount(st.warp_global[sel], weights=(1 << st.lane[sel]).astype(np.float64),
                    minlength=nw)
    return w.astype(np.uint64)


def _exist_bits(st):
    eb = st._special.get("#exist")
    if eb is None:
        eb = st._special["#exist"] = warp_bits(st, np.ones(st.T, bool))
    return eb


def check_members(st, m, membermask, what, require_full=False):
    """Every lane named in the member mask (that exists) must execute this instruction."""
    act = np.ones(st.T, bool) if m is None else m
    idx = np.flatnonzero(act)
    if idx.size == 0:
        return act
    mm = np.broadcast_to(np.asarray(membermask, np.uint64), (st.T,))[idx]
    if require_full:
        mm = np.full(idx.size, FULL, np.uint64)
    if m is None and (mm == FULL).all() and st.tpb % 32 == 0 and st.live.all():
        return act
    abits = warp_bits(st, act)
    w = st.warp_global[idx]
    need = mm & _exist_bits(st)[w]
    missing = need & ~abits[w]
    if require_full and st.tpb % 32:
        short = _exist_bits(st)[w] != FULL
        if short.any():
            k = int(np.flatnonzero(short)[0])
            raise st.error(WarpDivergence, f"{what} needs a full warp of 32 threads; the block "
                           f"size {st.tpb} leaves a partial warp", idx[k])
    if missing.any():
        k = int(np.flatnonzero(missing)[0])
        lanes = [i for i in range(32) if int(missing[k]) >> i & 1]
        raise st.error(WarpDivergence, f"{what} executed by a diverged warp: lane(s) "
                       f"{lanes[:8]} named in the member mask did not arrive (diverged or "
                       f"exited)", idx[k])
    own = (mm >> st.lane[idx].astype(np.uint64)) & np.uint64(1)
    if (own == 0).any():
        k = int(np.flatnonzero(own == 0)[0])
        raise st.error(WarpDivergence, f"{what}: executing thread is not in its own member "
                       f"mask", idx[k])
    return act


@op("shfl")
def build_shfl(ctx, ins, parts):
    if "sync" not in parts:
        ctx.error("shfl without .sync is not supported (removed in sm_70+)")
    mode = next((p for p in parts if p in ("idx", "up", "down", "bfly")), None)
    if mode is None:
        ctx.error(f"{ins.opcode}: missing mode")
    ti = ctx.type([p for p in parts if p in TYPE_NAMES][-1])
    d, a, b, c, mm = ins.operands[:5]
    u32 = type_info("u32")
    if isinstance(d, PredPair):
        put, putp = ctx.dst(d.p, ti), ctx.dst(d.q)
    else:
        put, putp = ctx.dst(d, ti), None
    ga, gb, gc, gm = ctx.src(a, ti), ctx.src(b, u32), ctx.src(c, u32), ctx.src(mm, u32)

    def run(st, m):
        check_members(st, m, gm(st), ins.opcode)
        lane = st.lane
        bval = np.asarray(gb(st)).astype(np.int64) & 31
        cv = np.asarray(gc(st)).astype(np.int64)
        cval, segmask = cv & 31, (cv >> 8) & 31
        max_lane = (lane & segmask) | (cval & ~segmask)
        min_lane = lane & segmask
        if mode == "up":
            j = lane - bval
            pval = j >= max_lane
        elif mode == "down":
            j = lane + bval
            pval = j <= max_lane
        elif mode == "bfly":
            j = lane ^ bval
            pval = j <= max_lane
        else:
            j = min_lane | (bval & ~segmask)
            pval = j <= max_lane
        j = np.where(pval, j, lane)
        src = np.arange(st.T) - lane + j
        # a source lane beyond a partial last warp: undefined on the GPU; read own value
        src = np.where(st.thread_linear - lane + j < st.tpb, src, np.arange(st.T))
        av = np.broadcast_to(np.asarray(ga(st)), (st.T,))
        put(st, av[src], m)
        if putp is not None:
            putp(st, np.broadcast_to(pval, (st.T,)), m)
    return {"run": run, "sync": "warp", "members": gm}


@op("vote")
def build_vote(ctx, ins, parts):
    mode = next((p for p in parts if p in ("all", "any", "uni", "ballot")), None)
    d, a = ins.operands[:2]
    mm = ins.operands[2] if len(ins.operands) > 2 else None
    if "sync" not in parts or mm is None:
        ctx.error("vote without .sync is not supported")
    pred = type_info("pred")
    ga, gm = ctx.src(a, pred), ctx.src(mm, type_info("u32"))
    put = ctx.dst(d, type_info("b32") if mode == "ballot" else pred)

    def run(st, m):
        act = check_members(st, m, gm(st), ins.opcode)
        p = np.broadcast_to(np.asarray(ga(st)), (st.T,))
        mmask = np.broadcast_to(np.asarray(gm(st), np.uint64), (st.T,))
        ballot = warp_bits(st, act & p)[st.warp_global] & mmask
        members = warp_bits(st, act)[st.warp_global] & mmask
        if mode == "ballot":
            r = ballot.astype(np.uint32)
        elif mode == "all":
            r = ballot == members
        elif mode == "any":
            r = ballot != 0
        else:
            r = (ballot == members) | (ballot == 0)
        put(st, r, m)
    return {"run": run, "sync": "warp", "members": gm}


@op("activemask")
def build_activemask(ctx, ins, parts):
    put = ctx.dst(ins.operands[0], type_info("b32"))

    def run(st, m):
        act = np.ones(st.T, bool) if m is None else m
        put(st, warp_bits(st, act)[st.warp_global].astype(np.uint32), m)
    return run


@op("elect")
def build_elect(ctx, ins, parts):
    d, mm = ins.operands[:2]
    u32 = type_info("u32")
    if isinstance(d, PredPair):
        put, putp = ctx.dst(d.p, u32), ctx.dst(d.q)
    else:
        put, putp = ctx.dst(d, u32), None
    gm = ctx.src(mm, u32)

    def run(st, m):
        act = check_members(st, m, gm(st), ins.opcode)
        bits = warp_bits(st, act)[st.warp_global] & np.broadcast_to(
            np.asarray(gm(st), np.uint64), (st.T,))
        low = bits & (~bits + np.uint64(1))
        leader = np.where(bits == 0, 0, np.log2(np.maximum(low, 1).astype(np.float64))) \
            .astype(np.uint32)
        put(st, leader, m)
        if putp is not None:
            putp(st, st.lane == leader, m)
    return {"run": run, "sync": "warp", "members": gm}


@op("redux")
def build_redux(ctx, ins, parts):
    kind = parts[2]
    ti = ctx.type([p for p in parts if p in TYPE_NAMES][-1])
    d, a, mm = ins.operands[:3]
    ga, gm, put = ctx.src(a, ti), ctx.src(mm, type_info("u32")), ctx.dst(d, ti)

    def run(st, m):
        act = check_members(st, m, gm(st), ins.opcode)
        nw = int(st.warp_global[-1]) + 1
        v = np.broadcast_to(np.asarray(ga(st)), (st.T,))[act]
        w = st.warp_global[act]
        if kind == "add":
            acc = np.zeros(nw, np.int64)
            np.add.at(acc, w, v.astype(np.int64))
            acc = acc.astype(ti.dtype)
        else:
            init = {"min": np.iinfo(ti.dtype).max, "max": np.iinfo(ti.dtype).min,
                    "and": ~ti.dtype.type(0), "or": 0, "xor": 0}[kind]
            acc = np.full(nw, init, ti.dtype)
            f = {"min": np.minimum, "max": np.maximum, "and": np.bitwise_and,
                 "or": np.bitwise_or, "xor": np.bitwise_xor}[kind]
            f.at(acc, w, v)
        put(st, acc[st.warp_global], m)
    return {"run": run, "sync": "warp", "members": gm}


@op("match")
def build_match(ctx, ins, parts):
    ti = ctx.type([p for p in parts if p in TYPE_NAMES][-1])
    if "any" not in parts:
        ctx.error("only match.any.sync is supported")
    d, a, mm = ins.operands[:3]
    ga, gm, put = ctx.src(a, ti), ctx.src(mm, type_info("u32")), ctx.dst(d, type_info("b32"))

    def run(st, m):
        act = check_members(st, m, gm(st), ins.opcode)
        v = np.broadcast_to(np.asarray(ga(st)), (st.T,))
        out = np.zeros(st.T, np.uint32)
        for t in np.flatnonzero(act):     # rare instruction: a simple loop is fine
            base = t - st.lane[t]
            same = [int(u) for u in range(base, min(base + 32, st.T))
                    if act[u] and st.warp_global[u] == st.warp_global[t] and v[u] == v[t]]
            out[t] = sum(1 << int(st.lane[u]) for u in same)
        put(st, out, m)
    return {"run": run, "sync": "warp", "members": gm}
