"""The conversion planner. Plan level: hundreds of random pairs of linear layouts (one-hot,
invertible, replicated, XOR-swizzled, blocked, sliced, mma fragments) and every plan that
applies to a pair (the chosen one, the forced shared-memory round trip, warp shuffles where
they exist) are simulated in NumPy; the destination gets exactly the elements it needs and the
conversion back restores the source. The swizzle construction is conflict-free whenever the
two sides' phase spans fit the banks. End to end: kernels convert a loaded tile into a layout,
write it out register by register at the layout's coordinates, and convert back, on the
emulator; the bank-conflict counter reads 0 where the planner promises it."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from gen_support import run_emulated, compile_kernel, link
from layout_support import KINDS, random_layout, shuffled_lanes, simulate
from tilelang.codegen.layouts import convert as C
from tilelang.codegen.layouts import distributed as L
from tilelang.codegen.layouts.gf2 import echelon
from tilelang.codegen.layouts.shared import wavefronts

SHAPES = [(64,), (16, 32), (32, 64), (4, 8, 16), (8, 8), (128, 16)]


def random_pair(rng):
    shape = SHAPES[int(rng.integers(len(SHAPES)))]
    threads = int(rng.choice([8, 32, 64, 128, 256]))
    item = int(rng.choice([1, 2, 4, 8]))
    while threads > int(np.prod(shape)) * 4:
        threads //= 2

    def one():
        kinds = [k for k in KINDS if k != "mma" or (len(shape) == 2 and shape[0] >= 16
                                                     and threads >= 32)]
        return random_layout(shape, threads, rng, kinds[int(rng.integers(len(kinds)))], item)
    return one(), one(), item


def check_plan(src, need, p):
    # the planner's table-free renaming test agrees with the table's
    assert C.rename_map(src, need) == L.register_map(src, need.table(src.threads))
    got = simulate(src, need, p, src.table)
    assert (got == need.table(src.threads)).all(), (C.describe(p), src, need)
    return got


def full_waves(src, need, p: C.SharedTrip, item):
    """The plan's wavefront counts recomputed over every request of every warp."""
    inv = p.shared.inverse
    t = np.arange(src.threads)
    warps = max(src.threads // 32, 1)

    def requests(offsets):          # [threads, requests] -> [warps * requests, 32]
        a = np.full((warps, offsets.shape[1], 32), -1, np.int64)
        a[t // 32, :, t % 32] = offsets * item
        return a.reshape(-1, 32)
    w = wavefronts(requests(inv.apply_all(src.table[:, list(p.write_regs)])),
                   p.write_vec * item)
    r = wavefronts(requests(inv.apply_all(need.table(src.threads)[:, ::p.read_vec])),
                   p.read_vec * item)
    return w, r


@pytest.mark.parametrize("seed", range(12))
def test_random_conversions_round_trip(seed):
    rng = np.random.default_rng(1000 + seed)
    kinds_seen = set()
    for _ in range(30):
        src, dst, item = random_pair(rng)
        need = C.need_of(dst, src.shape)
        back = C.need_of(src, dst.shape)
        shuffles = bool(rng.integers(2))
        p = C.plan_conversion(src, dst, item, shuffles)
        kinds_seen.add(p.kind)
        if isinstance(p, C.Same):
            continue
        mid = check_plan(src, need, p)
        # back, with the destination holding what the plan delivered
        q = C.plan_conversion(dst, src, item, shuffles)
        if not isinstance(q, C.Same):
            assert (simulate(dst, back, q, mid) == src.table).all()
        # every other plan that applies moves the same data
        trip = C.shared_trip(src, need, item)
        check_plan(src, need, trip)
        assert full_waves(src, need, trip, item) == (trip.write_waves, trip.read_waves)
        sh = C.shuffle_plan(src, need)
        if sh is not None:
            check_plan(src, need, sh)
        if not shuffles:
            assert not isinstance(p, C.Shuffle)
    assert "shared" in kinds_seen


@pytest.mark.parametrize("seed", range(6))
def test_random_broadcasts_and_offsets(seed):
    """Needs that are not a layout: a size-1 axis stretched, a constant offset (extract)."""
    rng = np.random.default_rng(seed)
    for _ in range(25):
        m, n = int(rng.choice([8, 16, 64])), int(rng.choice([8, 32]))
        threads = int(rng.choice([32, 128]))
        kind = KINDS[int(rng.integers(4))]
        col = random_layout((m, 1), threads, rng, kind)
        dst = random_layout((m, n), threads, rng, "blocked")
        need = C.need_of(dst, (m, 1))
        check_plan(col, need, C.plan(col, need, 4))
        check_plan(col, need, C.shared_trip(col, need, 4))
        # the upper half of a (2m, n) tile read into an (m, n) layout
        big = random_layout((2 * m, n), threads, rng, kind)
        base = m * n
        ext = C.Need(tuple(big.linear(b) for b in dst.thread_bases),
                     tuple(base + big.linear(dst.reg_coord(r)) for r in range(dst.num_regs)))
        check_plan(big, ext, C.plan(big, ext, 2))


@pytest.mark.parametrize("seed", range(10))
def test_swizzle_is_conflict_free_when_the_spans_fit(seed):
    """The construction: if each side's phase span (with the bits inside one access), cut to
    the elements with no bit below the vector, has dimension at most the bank bits above the
    vector, both sides are conflict-free."""
    rng = np.random.default_rng(seed)
    covered = 0
    for _ in range(40):
        src, dst, item = random_pair(rng)
        if src.threads < 32:
            continue
        need = C.need_of(dst, src.shape)
        n, nl = src.n_bits, len(src.lane)
        kw, kr = C.write_vector_bits(src, item), C.read_vector_bits(need, item)
        src_lanes = src.matrix.cols[len(src.reg):len(src.reg) + nl]
        for v in range(max(kw, kr) + 1):
            wv, rv = 1 << min(kw, v), 1 << min(kr, v)
            sides = [C._phase_span(src_lanes, wv * item, item),
                     C._phase_span(need.thread[:nl], rv * item, item)]
            low = min(max(v, max(s[1] for s in sides)), n)
            top = C.phase_top(n, item, low)
            dims = [echelon(sp).rank for sp in C.high_spans(n, low, sides)]
            mp = C._swizzle(n, item, low, sides)
            assert mp.is_invertible()
            assert all(mp(1 << i) == 1 << i for i in range(low))      # vectors stay put
            assert all(mp(1 << i) >> low << low == mp(1 << i) for i in range(low, n))
            if max(dims) > top - low:
                continue
            covered += 1
            from tilelang.codegen.layouts.shared import SharedLayout
            inv = SharedLayout(src.shape, mp).inverse
            wregs = [r for r in src.owned_regs() if r % wv == 0]
            w = C._waves(inv.apply_all(src.table[:32, wregs[0]]), 1, wv * item, item)
            r = C._waves(inv.apply_all(need.table(src.threads)[:32, 0]), 1, rv * item, item)
            assert w[0] == w[1] and r[0] == r[1], (src, dst, item, v)
    assert covered >= 20


def test_common_conversions():
    """What today's lowerings ask for, and what the planner answers."""
    b = L.blocked((64, 64), 4, 128)
    assert C.plan_conversion(b, b, 4).kind == "same"
    sliced = L.drop_axes(b, (1,), keepdims=True)
    assert isinstance(C.plan(sliced, C.need_of(b, sliced.shape), 4), C.Rename)
    # a transposed store (lanes along rows) into the coalesced access layout: one swizzled
    # round trip, no bank conflict on either side. Reading 4-vectors would need the 32 row
    # lanes of a scalar write spread over the 8 bank groups above a vector: 2-way conflicts
    # on 32 stores cost more than 8 more loads, so the reads are pairs
    tr = L.permute(L.blocked((64, 64), 4, 128), (1, 0))
    p = C.plan_conversion(tr, b, 4)
    assert C.describe(p) == "shared(swizzled, write x1, read x2, 0 extra wavefronts)"
    assert not p.shared.is_identity()
    # the same with f16: 8-wide vectors
    p16 = C.plan_conversion(L.permute(L.blocked((64, 64), 2, 128), (1, 0)),
                            L.blocked((64, 64), 2, 128), 2)
    assert p16.kind == "shared" and p16.read_vec == 8 and p16.conflicts == 0
    # within one warp: shuffles, never through shared memory
    w1, w2 = L.blocked((16, 32), 4, 32), L.permute(L.blocked((32, 16), 4, 32), (1, 0))
    assert C.plan_conversion(w2, w1, 4).kind == "shared"     # registers along rows: no
    for seed in range(5):
        rng = np.random.default_rng(seed)
        for src in (w1, L.blocked((64, 64), 2, 128), random_layout((32, 64), 256, rng,
                                                                    "replicated")):
            dst = shuffled_lanes(src, rng)
            p = C.plan_conversion(src, dst, 4)
            assert p.kind == ("same" if dst == src else "shuffle")
            if p.kind == "shuffle":
                check_plan(src, C.need_of(dst, src.shape), p)
                assert C.plan_conversion(src, dst, 4, shuffles=False).kind == "shared"


# ---------------------------------------------------------------------------------------------
# End to end on the emulator

def roundtrip_kernel(shape, dtype, threads):
    from tilelang.ir.builder import KernelBuilder
    from tilelang.sema.types import ArrayType
    kb = KernelBuilder("conv", attributes={"reqntid": (threads, 1, 1)})
    x = kb.param("x", ArrayType(dtype, len(shape)))
    y = kb.param("y", ArrayType(dtype, len(shape)))
    z = kb.param("z", ArrayType(dtype, 1))
    t = kb.op("load", x, index=(0,) * len(shape), shape=shape, padding=0)
    kb.op("store", y, index=(0,) * len(shape), tile=kb.op("abs", t))
    return kb.finish(), z


def through(monkeypatch, mid_layout, z):
    """Make `abs` (in this test only) convert its operand to `mid_layout`, store every
    register of that at its linear index in z (element = thread part XOR register part, the
    layout's meaning), and convert back."""
    import llvmlite.ir as ir

    from tilelang.codegen.emit.kernel import I32, I64
    from tilelang.codegen.emit.sync import convert
    from tilelang.codegen.lower import table

    def lower(kern, op):
        x = kern.tile(op.arg_map["x"])
        mid = convert(kern, x, mid_layout)
        arr = kern.array(z)
        b = kern.builder
        elem = kern.storage_type(x.dtype)
        ptr = b.inttoptr(arr.address, ir.PointerType(elem, addrspace=1))
        base = kern.thread_linear(mid_layout.thread_weights())
        for r in range(mid_layout.num_regs):
            i = b.xor(base, ir.Constant(I32, mid_layout.reg_linear(r)))
            b.store(kern.to_storage(mid.regs[r], x.dtype), b.gep(ptr, [b.zext(i, I64)]))
        return convert(kern, mid, x.layout)
    monkeypatch.setitem(table.LOWERINGS, "abs", lower)


E2E = [
    # (shape, dtype name, threads, layout kind, seed)
    ((32, 64), "f32", 128, "swizzled", 1),
    ((32, 64), "f32", 128, "invertible", 2),
    ((64, 64), "f16", 128, "transposed", 0),
    ((16, 32), "f32", 32, "invertible", 3),
    ((16, 32), "f32", 64, "lanes", 5),
    ((256,), "f16", 32, "lanes", 6),
    ((8, 16, 8), "i32", 64, "replicated", 4),
    ((64, 32), "f32", 128, "mma", 0),
    ((32, 32), "f64", 128, "transposed", 0),
    ((64, 64), "i8", 128, "transposed", 0),
    ((32, 64), "i8", 64, "swizzled", 7),
    ((64,), "f64", 32, "lanes", 8),
]


def middle(shape, item, threads, kind, rng):
    if kind == "transposed":
        return L.permute(L.blocked(shape[::-1], item, threads), (1, 0))
    if kind == "lanes":
        return shuffled_lanes(L.blocked(shape, item, threads), rng)
    return random_layout(shape, threads, rng, kind, item)


@pytest.mark.parametrize("shape,dt,threads,kind,seed", E2E)
def test_conversions_on_the_emulator(monkeypatch, shape, dt, threads, kind, seed):
    from tilelang.sema.types import F16, F32, F64, I8, I32
    dtype = {"f32": F32, "f16": F16, "i32": I32, "f64": F64, "i8": I8}[dt]
    npdt = {"f32": np.float32, "f16": np.float16, "i32": np.int32, "f64": np.float64,
            "i8": np.int8}[dt]
    item = np.dtype(npdt).itemsize
    rng = np.random.default_rng(seed)
    mid = middle(shape, item, threads, kind, rng)
    k, z = roundtrip_kernel(shape, dtype, threads)
    through(monkeypatch, mid, z)
    r = compile_kernel(k, "sm_80")
    link(r)
    src = L.blocked(shape, item, threads)
    fwd, bwd = C.plan_conversion(src, mid, item), C.plan_conversion(mid, src, item)
    x = (np.arange(np.prod(shape)) % 251 - 100).astype(npdt).reshape(shape)
    y, zz = np.zeros_like(x), np.zeros(x.size, npdt)
    rep = run_emulated(r, "conv", [x, y, zz], (1, 1, 1))
    np.testing.assert_array_equal(zz, x.reshape(-1))     # the layout in between
    np.testing.assert_array_equal(y, x)                  # and back
    kinds = {fwd.kind, bwd.kind}
    assert ("shfl.sync.idx" in r.ptx) == ("shuffle" in kinds)
    assert ("bar.sync" in r.ptx or "barrier.sync" in r.ptx) == ("shared" in kinds)
    trips = [p for p in (fwd, bwd) if isinstance(p, C.SharedTrip)]
    if trips and all(p.conflicts == 0 for p in trips):
        assert rep.bank_conflicts == 0
        # LLVM may merge neighbouring scalar accesses into wider ones, never split them
        assert rep.shared_wavefronts <= sum(p.write_waves[0] + p.read_waves[0] for p in trips)
    if any(p.read_vec * item == 16 or p.write_vec * item == 16 for p in trips):
        assert "shared.v4" in r.ptx


def test_e2e_cases_cover_every_plan_kind():
    kinds = set()
    for shape, dt, threads, kind, seed in E2E:
        item = {"f32": 4, "f16": 2, "i32": 4, "f64": 8, "i8": 1}[dt]
        mid = middle(shape, item, threads, kind, np.random.default_rng(seed))
        src = L.blocked(shape, item, threads)
        for p in (C.plan_conversion(src, mid, item), C.plan_conversion(mid, src, item)):
            kinds.add(C.describe(p).split("(")[0])
            if isinstance(p, C.SharedTrip):
                kinds.add("swizzled" if not p.shared.is_identity() else "identity")
    assert {"shuffle", "shared", "swizzled"} <= kinds, kinds


def test_pairs_are_exhaustive_for_tiny_layouts():
    """Every pair of one-hot layouts of an (8,) tile over 4 threads plans and simulates."""
    cols = [1, 2, 4]
    layouts = []
    for perm in itertools.permutations(cols):
        layouts.append(L.from_columns((8,), perm[:1], perm[1:], ()))
    for a, b in itertools.product(layouts, repeat=2):
        p = C.plan_conversion(a, b, 4)
        if not isinstance(p, C.Same):
            check_plan(a, C.need_of(b, a.shape), p)


def random_e2e(seed):
    rng = np.random.default_rng(seed)
    declared = int(rng.choice([24, 32, 48, 64, 96, 128, 256]))
    threads = 1 << (declared.bit_length() - 1)
    shape = [(64,), (16, 32), (8, 4, 16), (32, 64)][int(rng.integers(4))]
    dt = ["f32", "f16", "i8", "f64"][int(rng.integers(4))]
    kind = ["lanes", "swizzled", "invertible", "replicated", "one_hot"][int(rng.integers(5))]
    return declared, threads, shape, dt, kind, rng


@pytest.mark.parametrize("seed", [0, 1, 2, 3] + [pytest.param(s, marks=pytest.mark.slow)
                                                 for s in range(4, 40)])
def test_random_conversions_on_the_emulator(monkeypatch, seed):
    """Random layouts, dtypes and block sizes, including blocks that are not a power of two
    (replica threads) and a partial last warp (no shuffles there)."""
    from tilelang.sema.types import F16, F32, F64, I8
    declared, threads, shape, dt, kind, rng = random_e2e(seed)
    dtype = {"f32": F32, "f16": F16, "i8": I8, "f64": F64}[dt]
    npdt = {"f32": np.float32, "f16": np.float16, "i8": np.int8, "f64": np.float64}[dt]
    item = np.dtype(npdt).itemsize
    mid = middle(shape, item, threads, kind, rng)
    k, z = roundtrip_kernel(shape, dtype, declared)
    through(monkeypatch, mid, z)
    r = compile_kernel(k, "sm_80")
    link(r)
    x = (np.arange(np.prod(shape)) % 251 - 100).astype(npdt).reshape(shape)
    y, zz = np.zeros_like(x), np.zeros(x.size, npdt)
    rep = run_emulated(r, "conv", [x, y, zz], (1, 1, 1))
    np.testing.assert_array_equal(zz, x.reshape(-1))
    np.testing.assert_array_equal(y, x)
    src = L.blocked(shape, item, threads)
    whole = declared % 32 == 0 or declared < 32
    plans = [C.plan_conversion(src, mid, item, whole), C.plan_conversion(mid, src, item, whole)]
    assert ("shfl.sync.idx" in r.ptx) == any(p.kind == "shuffle" for p in plans)
    if all(p.conflicts == 0 for p in plans if isinstance(p, C.SharedTrip)):
        assert rep.bank_conflicts == 0
