"""Loads, stores, atomics, barriers, fences and the other memory-side instructions."""

from __future__ import annotations

import numpy as np

from .access import load, record, region_view, store
from .addressing import Address, space_of
from .decode import op
from .errors import BarrierDivergence
from .globalrace import sem_of
from .ptx_ast import Vec
from .ptx_types import TYPE_NAMES, type_info
from .warpgroup import check_warpgroup

def _vec(parts):
    for p in parts:
        if p in ("v2", "v4", "v8"):
            return int(p[1:])
    return 1


def _mem_type(ctx, parts):
    ts = [p for p in parts if p in TYPE_NAMES]
    if not ts:
        ctx.error(f"{ctx.ins.opcode}: missing type")
    ti = ctx.type(ts[-1])
    # Loads compute in integer bits; signed types keep their dtype so sign extension happens.
    dt = ti.dtype if ti.kind == "s" else ti.bits
    return ti, dt


def _gather_full(st, m, parts_k, dt):
    """Assemble per-thread values from located groups into an array over the batch."""
    if len(parts_k) == 1 and m is None:
        return parts_k[0][1]
    full = np.zeros(st.T, dt)
    for idx, vals in parts_k:
        full[idx] = vals
    return full


def _param_reader(ctx, addr, dt, n, esize):
    sp, off, size, name = addr.param
    if n * esize > size:
        ctx.error(f"access beyond the end of parameter {name}")
    nbytes = np.dtype(dt).itemsize

    if sp == "kparam":
        def read(st, k):
            o = off + k * esize
            if st.kparam_rows is not None:     # a world launch: each rank's own parameters
                rows = st.kparam_rows[st.rank_of_block[st.block_in_batch], o:o + nbytes]
                return np.ascontiguousarray(rows).view(dt)[:, 0]
            return np.frombuffer(st.kparams[o:o + nbytes].tobytes(), dt)[0]
    else:
        def read(st, k):
            o = off + k * esize
            return np.ascontiguousarray(st.pslots[:, o:o + nbytes]).view(dt)[:, 0]
    return read


@op("ld", "ldu")
def build_ld(ctx, ins, parts):
    space = space_of(parts)
    n = _vec(parts)
    ti, dt = _mem_type(ctx, parts)
    d, a = ins.operands[:2]
    items = d.items if isinstance(d, Vec) else (d,)
    if len(items) != n:
        ctx.error(f"{ins.opcode} needs {n} destination registers")
    puts = [ctx.dst(o, ti) for o in items]
    addr = Address(ctx, a, space)
    esize = ti.size
    if addr.param is not None:
        read = _param_reader(ctx, addr, dt, n, esize)

        def run_param(st, m):
            for k, put in enumerate(puts):
                put(st, read(st, k), m)
        return run_param
    total = esize * n
    sem = sem_of(parts)
    strong = sem is not None

    def run(st, m):
        idx = st.active_index(m)
        groups = addr.groups(st, idx, total, total)
        res = load(st, groups, dt, n, esize)
        if st.grace is not None:
            for region, gi, off, _ in groups:
                if region == "global":
                    st.grace.access(st, gi, off, total, False, strong)
                    st.grace.sync(st, gi, off, sem)
        for k, put in enumerate(puts):
            put(st, _gather_full(st, m, res[k], dt), m)
    return run


@op("st")
def build_st(ctx, ins, parts):
    space = space_of(parts)
    n = _vec(parts)
    ti, dt = _mem_type(ctx, parts)
    a, v = ins.operands[:2]
    items = v.items if isinstance(v, Vec) else (v,)
    if len(items) != n:
        ctx.error(f"{ins.opcode} needs {n} source operands")
    bits_t = type_info(f"b{ti.size * 8}") if ti.kind != "s" else ti
    gets = [ctx.src(o, bits_t) for o in items]
    addr = Address(ctx, a, space)
    esize = ti.size
    if addr.param is not None:
        sp, off, size, name = addr.param
        if sp == "kparam":
            ctx.error("stores to kernel parameters are not allowed")
        if n * esize > size:
            ctx.error(f"store beyond the end of parameter {name}")

        def run_param(st, m):
            rows = slice(None) if m is None else np.flatnonzero(m)
            for k, g in enumerate(gets):
                o = off + k * esize
                vals = np.broadcast_to(np.asarray(g(st)).astype(dt), (st.T,))
                b = np.ascontiguousarray(vals[rows]).view(np.uint8).reshape(-1, esize)
                st.pslots[rows, o:o + esize] = b
        return run_param
    total = esize * n
    sem = sem_of(parts)
    strong = sem is not None

    def run(st, m):
        idx = st.active_index(m)
        vals = []
        for g in gets:
            x = np.asarray(g(st)).astype(dt, copy=False)
            vals.append((lambda x: (lambda sel: x if x.ndim == 0 else x[sel]))(x))
        groups = addr.groups(st, idx, total, total)
        if st.grace is not None:
            for region, gi, off, _ in groups:
                if region == "global":
                    st.grace.sync(st, gi, off, sem)           # a release comes first
                    st.grace.access(st, gi, off, total, True, strong)
        store(st, groups, dt, vals, esize)
    return run


# -- atomics -------------------------------------------------------------------------------
def _atomic_fn(opname, ti):
    if opname == "add":
        return lambda old, b, c: old + b
    if opname in ("min", "max"):
        f = np.minimum if opname == "min" else np.maximum
        if ti.is_float:
            f = np.fmin if opname == "min" else np.fmax
        return lambda old, b, c: f(old, b)
    if opname in ("and", "or", "xor"):
        f = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[opname]
        return lambda old, b, c: f(old, b)
    if opname == "exch":
        return lambda old, b, c: np.broadcast_to(b, old.shape)
    if opname == "cas":
        return lambda old, b, c: np.where(old == b, c, old)
    if opname == "inc":
        return lambda old, b, c: np.where(old >= b, 0, old + 1).astype(old.dtype)
    if opname == "dec":
        return lambda old, b, c: np.where((old == 0) | (old > b), b, old - 1).astype(old.dtype)
    return None


def _half_fn(opname, ti):
    """add/min/max on f16, bf16, f16x2 or bf16x2 bits (PTX ISA `atom.add.noftz.f16` and
    friends): each half computed exactly in float64 and rounded to nearest even once;
    `.noftz` is the only behaviour (subnormals are kept). min/max return the number when one
    side is NaN and order -0 below +0."""
    from .fpmath import lanes, pack

    def values(bits):
        bits = np.asarray(bits)
        return lanes(bits.view(np.float16) if ti.kind == "f" else bits, ti)

    def f(old, b, c):
        res = []
        for x, y in zip(values(old), values(b)):
            if opname == "add":
                res.append(x + y)
                continue
            pick_x = (x < y) if opname == "min" else (x > y)
            tie = (x == y) & (np.signbit(x) != np.signbit(y))       # -0 against +0
            pick_x = pick_x | (tie & (np.signbit(x) if opname == "min" else ~np.signbit(x)))
            r = np.where(pick_x, x, y)
            res.append(np.where(np.isnan(x), y, np.where(np.isnan(y), x, r)))
        return np.asarray(pack(res, ti)).view(ti.bits)
    return f


def _apply_atomic(view, elem, b, c, f, ufunc):
    """Serialize atomics in thread order; returns the old value each thread saw."""
    old = np.empty(elem.shape, view.dtype)
    if elem.size == 0:
        return old
    uniq, first, counts = np.unique(elem, return_index=True, return_counts=True)
    if counts.max() == 1:
        o = view[elem]
        view[elem] = f(o, b, c)
        return o
    if ufunc is np.add and old.dtype.kind in "iu":
        # integer add: old values are exclusive prefix sums inside each address group
        order = np.argsort(elem, kind="stable")
        bs = np.broadcast_to(b, elem.shape)[order]
        cs = np.cumsum(bs, dtype=view.dtype)
        seg = np.repeat(np.arange(uniq.size), counts)
        starts = np.r_[0, np.cumsum(counts)[:-1]]
        excl = cs - bs - (cs[starts] - bs[starts])[seg]
        base = view[uniq]
        old[order] = base[seg] + excl
        view[uniq] = base + (cs[starts + counts - 1] - cs[starts] + bs[starts])
        return old
    b = np.broadcast_to(b, elem.shape)
    c = np.broadcast_to(c, elem.shape) if c is not None else None
    if counts.max() > 64 and uniq.size <= 64 and ufunc is not None:
        # few hot addresses, associative op: a running accumulate per address in thread
        # order gives each thread the value it saw (float adds rounded step by step)
        for u in uniq:
            sel = np.flatnonzero(elem == u)
            run = ufunc.accumulate(np.concatenate([view[u:u + 1], b[sel].astype(view.dtype)]))
            old[sel] = run[:-1]
            view[u] = run[-1]
        return old
    if counts.max() > 64 and uniq.size <= 64:
        # few hot addresses: walk each address's threads in order
        for u in uniq:
            sel = np.flatnonzero(elem == u)
            cur = view[u]
            for k in sel:
                old[k] = cur
                cur = f(np.asarray(cur), b[k], None if c is None else c[k])[()]
            view[u] = cur
        return old
    remaining = np.arange(elem.size)
    while remaining.size:
        e = elem[remaining]
        _, fi = np.unique(e, return_index=True)
        sel = remaining[fi]
        o = view[elem[sel]]
        view[elem[sel]] = f(o, b[sel], None if c is None else c[sel])
        old[sel] = o
        remaining = np.delete(remaining, fi)
    return old


_ATOM_OPS = ("add", "min", "max", "and", "or", "xor", "exch", "cas", "inc", "dec")


@op("atom", "red")
def build_atom(ctx, ins, parts):
    space = space_of(parts)
    opname = next((p for p in parts[1:] if p in _ATOM_OPS), None)
    if opname is None:
        ctx.error(f"{ins.opcode}: unknown atomic operation")
    if _vec(parts) != 1:
        ctx.error("vector atomics are not supported")
    ti = ctx.type([p for p in parts if p in TYPE_NAMES][-1])
    half = ti.kind in ("bf16", "f16x2", "bf16x2") or (ti.kind == "f" and ti.size == 2)
    if half and opname not in ("add", "min", "max", "exch", "cas"):
        ctx.error(f"{ins.opcode}: .{opname} does not take half-precision values")
    dt = ti.dtype
    if ti.kind == "b" or half:
        dt = ti.bits
    is_red = parts[0] == "red"
    ops = ins.operands
    if is_red:
        a, rest = ops[0], ops[1:]
        put = None
    else:
        put = ctx.dst(ops[0], ti)
        a, rest = ops[1], ops[2:]
    vti = ti if ti.kind != "b" and not half else type_info(f"u{ti.size * 8}")
    gb = ctx.src(rest[0], vti)
    gc = ctx.src(rest[1], vti) if opname == "cas" else None
    addr = Address(ctx, a, space)
    if addr.param is not None:
        ctx.error("atomics on parameters are not allowed")
    f = _atomic_fn(opname, ti)
    sem = sem_of(parts)
    ufunc = {"add": np.add, "and": np.bitwise_and, "or": np.bitwise_or,
             "xor": np.bitwise_xor}.get(opname)
    if opname in ("min", "max"):
        ufunc = ({"min": np.fmin, "max": np.fmax} if ti.is_float else
                 {"min": np.minimum, "max": np.maximum})[opname]
    if half and opname in ("add", "min", "max"):
        # f16/bf16 (and packed x2) values live as bits; each step rounds once (see _half_fn)
        f, ufunc = _half_fn(opname, ti), None
    size = ti.size

    def run(st, m):
        idx = st.active_index(m)
        b = np.asarray(gb(st)).astype(dt, copy=False)
        c = None if gc is None else np.asarray(gc(st)).astype(dt, copy=False)
        olds = []
        with st.mem.atomically():
            _atomic_groups(st, idx, b, c, olds)
        if put is not None:
            put(st, _gather_full(st, m, olds, dt), m)

    def _atomic_groups(st, idx, b, c, olds):
        for region, gidx, off, addrs in addr.groups(st, idx, size, size):
            record(st, region, gidx, off, addrs, size)
            if st.grace is not None and region == "global":
                st.grace.sync(st, gidx, off, sem)
                st.grace.access(st, gidx, off, size, True, True)
            view = region_view(st, region, dt)
            sel = np.searchsorted(idx, gidx)
            bb = b if b.ndim == 0 else b[gidx]
            cc = None if c is None else (c if c.ndim == 0 else c[gidx])
            elem = off // size
            before = view[np.unique(elem)].copy() if st.watch else None
            with np.errstate(all="ignore"):
                o = _apply_atomic(view, elem, bb, cc, f, ufunc)
            if before is not None and (view[np.unique(elem)] != before).any():
                st.epoch += 1                  # memory changed (a failed cas does not)
            olds.append((gidx, o))
    return run


@op("mapa", "getctarank")
def build_mapa(ctx, ins, parts):
    """Distributed shared memory addresses: mapa points a shared address at the same offset in
    another CTA of the cluster (encoded as offset + (rank + 1) << 24); getctarank inverts it."""
    if not any(p.startswith("shared") for p in parts[1:]):
        ctx.error(f"{ins.opcode}: only the .shared::cluster form is supported")
    ti = ctx.type(parts[-1])
    u32 = type_info("u32")
    put = ctx.dst(ins.operands[0], ti if parts[0] == "mapa" else u32)
    ga = ctx.src(ins.operands[1], ti)

    if parts[0] == "mapa":
        gr = ctx.src(ins.operands[2], u32)

        def run(st, m):
            a = np.asarray(ga(st)).astype(np.int64) & 0xFFFFFF
            r = np.asarray(gr(st)).astype(np.int64)
            put(st, (a + ((r + 1) << 24)).astype(ti.dtype), m)
        return run

    def run_rank(st, m):
        c = st.geom.cluster
        a = np.asarray(ga(st)).astype(np.int64)
        own = st.block_in_batch % (c[0] * c[1] * c[2])
        field = a >> 24
        put(st, np.where(field == 0, own, field - 1).astype(np.uint32), m)
    return run_rank


# -- no-ops for the emulator's sequentially consistent memory ------------------------------
@op("prefetch", "prefetchu", "discard", "applypriority", "nanosleep",
    "griddepcontrol", "pmevent")
def build_nop(ctx, ins, parts):
    return lambda st, m: None


@op("fence", "membar")
def build_fence(ctx, ins, parts):
    """Memory is sequentially consistent here, so fences order nothing more, except that
    fence.proxy.async publishes generic-proxy shared writes to the async proxy (proxy.py)."""
    if "proxy" in parts and any(p.startswith("async") for p in parts) and \
            not any(p == "global" for p in parts):
        def run(st, m):
            if st.proxy is not None:
                st.proxy.fence(st, m)
        return run
    if parts[0] == "membar" or any(p in ("sc", "acq_rel") for p in parts):
        def ordering(st, m):                 # only the global race check cares
            if st.grace is not None:
                st.grace.fence(st, m)
        return ordering
    return lambda st, m: None


@op("setmaxnreg")
def build_setmaxnreg(ctx, ins, parts):
    """setmaxnreg.{inc,dec}.sync.aligned.u32 N: the register budget of the warp group changes
    (nothing to do for the emulator, which has no register file limit); the PTX ISA's rules are
    checked: N a multiple of 8 in 24..256, executed by the whole warp group together."""
    if len(parts) < 2 or parts[1] not in ("inc", "dec") or "sync" not in parts or \
            "aligned" not in parts:
        ctx.error(f"{ins.opcode}: expected setmaxnreg.inc/.dec.sync.aligned.u32")
    from .ptx_ast import Imm
    if len(ins.operands) != 1 or not isinstance(ins.operands[0], Imm):
        ctx.error("setmaxnreg takes an immediate register count")
    n = int(ctx.src(ins.operands[0], type_info("u32"))(None))
    if n % 8 or not 24 <= n <= 256:
        ctx.error(f"setmaxnreg: the register count {n} must be a multiple of 8 in 24..256")

    def run(st, m):
        check_warpgroup(st, m, ins.opcode)
    return {"run": run, "sync": "warpgroup"}


@op("createpolicy")
def build_createpolicy(ctx, ins, parts):
    put = ctx.dst(ins.operands[0], type_info("b64"))
    return lambda st, m: put(st, np.uint64(0), m)


# -- barriers ------------------------------------------------------------------------------
def check_barrier(st, m, what):
    """Every live thread of a block that reaches the barrier must reach it here."""
    if m is None:
        return
    nb = st.nblk
    arrived = np.bincount(st.block_in_batch[m], minlength=nb)
    live = np.bincount(st.block_in_batch[st.live], minlength=nb)
    bad = (arrived > 0) & (arrived < live)
    if bad.any():
        b = int(np.flatnonzero(bad)[0])
        missing = np.flatnonzero(st.live & ~m & (st.block_in_batch == b))
        raise st.error(BarrierDivergence, f"{what}: {int(arrived[b])} of {int(live[b])} live "
                       f"threads of the block arrived; a missing thread is shown",
                       missing[0])


@op("bar", "barrier")
def build_bar(ctx, ins, parts):
    sub = parts[1] if len(parts) > 1 else "sync"
    if sub == "warp":                       # bar.warp.sync membermask
        from .ops_warp import check_members
        gmask = ctx.src(ins.operands[0], type_info("u32"))
        return {"run": lambda st, m: check_members(st, m, gmask(st), ins.opcode),
                "sync": "warp", "members": gmask}
    if sub == "cluster":
        # barrier.cluster.arrive counts the thread's arrivals; .wait waits until every live
        # thread of the cluster has arrived as often as this thread waits (the blocks of a
        # cluster always run in the same batch; threads that exited count as arrived)
        if "wait" in parts:
            def wait(st, m):
                idx = st.active_index(m)
                if (st.cl_arrived[idx] <= st.cl_waited[idx]).any():
                    k = idx[np.flatnonzero(st.cl_arrived[idx] <= st.cl_waited[idx])[0]]
                    raise st.error(BarrierDivergence, "barrier.cluster.wait without a "
                                   "preceding barrier.cluster.arrive of this thread", k)
                st.cl_waited[idx] += 1
                if st.races is not None:      # joins the clocks of the cluster's CTAs
                    st.races.cluster_barrier(st, m)
                if st.grace is not None:
                    st.grace.cluster_sync(st, m)
            return {"run": wait, "sync": "cluster_wait"}
        if "arrive" not in parts:
            ctx.error(f"{ins.opcode}: expected barrier.cluster.arrive or .wait")

        def arrive(st, m):
            idx = st.active_index(m)
            if (st.cl_arrived[idx] > st.cl_waited[idx]).any():
                k = idx[np.flatnonzero(st.cl_arrived[idx] > st.cl_waited[idx])[0]]
                raise st.error(BarrierDivergence, "barrier.cluster.arrive twice without a "
                               "barrier.cluster.wait between", k)
            st.cl_arrived[idx] += 1
        return arrive
    ops = ins.operands
    if sub == "red":
        return _build_bar_red(ctx, ins, parts)
    if len(ops) >= 2 or sub == "arrive":
        # named barrier with a thread count: waits until `count` threads (whole warps) of the
        # block arrived at barrier `id` through bar.sync or bar.arrive (see executor)
        if len(ops) < 2:
            ctx.error(f"{ins.opcode} needs a barrier id and a thread count")
        u32 = type_info("u32")
        return {"run": None, "sync": "named",
                "extra": (ctx.src(ops[0], u32), ctx.src(ops[1], u32), sub == "arrive")}
    def run(st, m):
        check_barrier(st, m, ins.opcode)
        _barrier_done(st, m)
    return {"run": run, "sync": "block"}


def _barrier_done(st, m):
    """A barrier of the whole block completed for the threads `m`: the race check's epoch."""
    if st.races is not None:
        st.races.barrier(st, m)


def _build_bar_red(ctx, ins, parts):
    kind = parts[2]                          # popc, and, or
    ops = ins.operands
    put = ctx.dst(ops[0], type_info("u32") if kind == "popc" else type_info("pred"))
    gp = ctx.src(ops[-1], type_info("pred"))

    def run(st, m):
        check_barrier(st, m, ins.opcode)
        _barrier_done(st, m)
        p = np.broadcast_to(np.asarray(gp(st)), (st.T,))
        act = np.ones(st.T, bool) if m is None else m
        blk = st.block_in_batch
        cnt = np.bincount(blk[act & p], minlength=st.nblk)
        tot = np.bincount(blk[act], minlength=st.nblk)
        if kind == "popc":
            r = cnt[blk].astype(np.uint32)
        elif kind == "and":
            r = (cnt == tot)[blk]
        else:
            r = (cnt > 0)[blk]
        put(st, r, m)
    return {"run": run, "sync": "block"}
