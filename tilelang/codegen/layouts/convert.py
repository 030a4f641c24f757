"""The conversion planner: how registers of one distributed layout become the registers another
one needs. One routine (`plan`) serves every conversion; emit/sync.py emits its answer.

What the destination needs is a `Need`: register r of thread t wants the source element with
linear index `thread(t) ^ regs[r]`, where `thread(t)` is the XOR of `thread[b]` over the set
bits b of t (a layout of the same shape gives it through `need_of`; a broadcast zeroes the
stretched axes; `extract` adds a constant). The planner tries, in order:

1. **same** — the source layout is the destination (the caller checks);
2. **rename** — every thread already holds what it needs, in one register for all threads
   (`rename_map`): SSA values are renamed, nothing is emitted;
3. **shuffle** — each destination register comes from one source register of another lane of
   the same warp: solve `S_lane(z) = need` over GF(2) for every thread bit (warp bits must keep
   the warp: their need minus the source's warp basis must be reachable by lane bits alone),
   and `S_reg|lane(x) = regs[r]` for every register. The source lane of thread t is then the
   XOR of `lane[b]` over t's set bits, XOR a per-register constant: one `shfl.sync.idx` per
   destination register (two for 64-bit values);
4. **shared** — a round trip through shared memory in a `SharedLayout` chosen for this pair:
   the lowest offset bits are the element bits both sides hold in consecutive registers (so
   writes and reads are vectors of up to 16 bytes), and the bits above one 128-byte phase are
   chosen (`_swizzle`) so that the lanes of one phase hit distinct banks on both sides: if P
   and Q are the spans of the phase lanes' elements on the two sides (plus the bits inside
   one access), the offset bits above the banks must map to a subspace K with K ∩ P = K ∩ Q =
   0. K is grown one vector at a time, preferring plain high index bits (no swizzle when none
   is needed); over GF(2) a vector outside two proper subspaces always exists (a ∉ P, b ∉ Q,
   else a ^ b), which is the optimal-swizzling construction of the linear-layouts paper. Every
   vector width from scalar up is tried, with and without the swizzle, and the bank model
   (shared.py) picks the cheapest.

Shuffles are chosen over shared memory when both work and they cost no more (issue slots plus
wavefronts; a barrier counts `BARRIER`).
"""

from __future__ import annotations

from functools import cached_property, lru_cache

from tilelang.codegen.layouts.distributed import (Layout, linear_index, log2, reg_part,
                                                  thread_part)
from tilelang.codegen.layouts.gf2 import LinearMap, avoiding_vector, bits_of, echelon
from tilelang.codegen.layouts.shared import (PHASE_BYTES, SharedLayout, lanes_per_phase,
                                             wavefronts)
from tilelang.record import record

BARRIER = 4         # cost of one bar.sync in issue slots (it also stalls the warp)
MAX_VECTOR = 16     # bytes per shared-memory access


@record(frozen=True)
class Need:
    """Register r of thread t needs source element `XOR(thread[b] for set bits b of t) ^
    regs[r]` (a row-major linear index of the source shape)."""
    thread: tuple[int, ...]
    regs: tuple[int, ...]

    def thread_part(self, threads: int) -> list[int]:
        """Each thread's part of what it needs (what its register 0 needs, XOR regs[0])."""
        return LinearMap(self.thread, 64).images(range(threads))

    def table(self, threads: int):
        """[threads, registers] NumPy int64 array of the linear indices (for tests)."""
        import numpy as np
        part = np.array(self.thread_part(threads), np.int64)
        return part[:, None] ^ np.array(self.regs, np.int64)[None, :]


def need_of(dst: Layout, src_shape: tuple[int, ...]) -> Need:
    """What `dst` needs from a tile of `src_shape` that broadcasts to dst.shape (equal shapes:
    a plain conversion)."""
    return Need(tuple(thread_part(dst, src_shape)), tuple(reg_part(dst, src_shape)))


@record(frozen=True)
class Same:
    kind = "same"


@record(frozen=True)
class Rename:
    """Destination register i is source register regs[i] of the same thread."""
    regs: tuple[int, ...]
    kind = "rename"


@record(frozen=True)
class Shuffle:
    """Destination register i of thread t is source register steps[i][0] of lane
    `XOR(lane[b] for set bits b of t) ^ steps[i][1]` of the same warp."""
    lane: tuple[int, ...]
    steps: tuple[tuple[int, int], ...]
    kind = "shuffle"

    def cost(self, itemsize: int) -> int:
        words = 2 if itemsize > 4 else 1
        consts = len({c for _, c in self.steps if c})
        return 2 * words * len(self.steps) + consts + 1


@record(frozen=True)
class SharedTrip:
    """Write every owned source register at `shared.offset_of(its element)`, `write_vec`
    registers per access starting at each of `write_regs`; barrier; read destination
    registers `read_vec` at a time. Wavefront counts are per block (all warps)."""
    shared: SharedLayout
    write_vec: int
    write_regs: tuple[int, ...]
    read_vec: int
    read_regs: int
    write_waves: tuple[int, int]
    read_waves: tuple[int, int]
    xors: int
    warps: int
    kind = "shared"

    @cached_property
    def cost(self) -> float:
        issue = len(self.write_regs) + self.read_regs // self.read_vec + self.xors
        waves = (self.write_waves[0] + self.read_waves[0]) / self.warps
        return issue + waves + 2 * BARRIER

    @property
    def conflicts(self) -> int:
        """Wavefronts above the ideal, per block."""
        return (self.write_waves[0] - self.write_waves[1]) + \
            (self.read_waves[0] - self.read_waves[1])


Plan = Same | Rename | Shuffle | SharedTrip


def rename_map(src: Layout, need: Need) -> list[int] | None:
    """`distributed.register_map` of `need.table(src.threads)` without the table: both sides
    are XORs of a thread part and a register part, so register r of every thread holds what
    register k needs iff the thread bits weigh the same on both sides and r's part is k's."""
    weights = src.thread_weights()
    if any(w != (need.thread[b] if b < len(need.thread) else 0)
           for b, w in enumerate(weights)):
        return None
    first: dict[int, int] = {}
    for r, v in enumerate(src.reg_linears):
        first.setdefault(v, r)
    out = [first.get(v) for v in need.regs]
    return None if None in out else out


def plan_conversion(src: Layout, dst: Layout, itemsize: int, shuffles: bool = True) -> Plan:
    if src == dst:
        return Same()
    assert src.shape == dst.shape, (src.shape, dst.shape)
    return plan(src, need_of(dst, src.shape), itemsize, shuffles)


@lru_cache(maxsize=4096)
def plan(src: Layout, need: Need, itemsize: int, shuffles: bool = True) -> Plan:
    """The cheapest way to give every destination register what `need` says (see the module
    docstring). `shuffles=False` where lanes of a warp may be missing."""
    assert len(need.thread) == len(src.thread_bases), (need, src)
    m = rename_map(src, need)
    if m is not None:
        return Rename(tuple(m))
    trip = shared_trip(src, need, itemsize)
    sh = shuffle_plan(src, need) if shuffles else None
    if sh is not None and sh.cost(itemsize) <= trip.cost:
        return sh
    return trip


# ---------------------------------------------------------------------------------------------
# Shuffles

def shuffle_plan(src: Layout, need: Need) -> Shuffle | None:
    nr, nl = len(src.reg), len(src.lane)
    cols = src.matrix.cols
    lanes = LinearMap(cols[nr:nr + nl], src.n_bits)
    out = []
    for j, y in enumerate(need.thread):
        if j >= nl:
            y ^= cols[nr + j]          # the warp bit stays: the rest must come from lanes
        z = lanes.solve(y)
        if z is None:
            return None
        out.append(z)
    within = LinearMap(cols[:nr + nl], src.n_bits)
    steps = []
    for c in need.regs:
        x = within.solve(c)
        if x is None:
            return None
        steps.append((x & ((1 << nr) - 1), x >> nr))
    return Shuffle(tuple(out), tuple(steps))


# ---------------------------------------------------------------------------------------------
# Shared-memory round trips

def write_vector_bits(src: Layout, itemsize: int) -> int:
    """How many low register bits of `src` are the low linear-index bits, in order, with no
    other input bit touching them (a vector of 2^k consecutive elements per access, aligned),
    within 16 bytes."""
    k = 0
    cols = src.matrix.cols
    while k < len(src.reg) and cols[k] == 1 << k and (2 << k) * itemsize <= MAX_VECTOR \
            and not any(c >> k & 1 for i, c in enumerate(cols) if i != k):
        k += 1
    return k


def read_vector_bits(need: Need, itemsize: int) -> int:
    """The largest k such that every aligned group of 2^k destination registers needs 2^k
    consecutive elements starting at a multiple of 2^k (and no thread bit touches them)."""
    regs = need.regs
    k = 0
    while (2 << k) <= len(regs) and (2 << k) * itemsize <= MAX_VECTOR:
        v = 2 << k
        if any(w & (v - 1) for w in need.thread):
            break
        if any(regs[r] & (v - 1) or any(regs[r + i] != regs[r] ^ i for i in range(v))
               for r in range(0, len(regs), v)):
            break
        k += 1
    return k


def _phase_span(lane_cols, size: int, itemsize: int) -> tuple[list[int], int]:
    """The elements the lanes of one phase reach (nonzero lane images) and the offset bits
    inside one access unit (lanes that differ only there share a word or a vector)."""
    per = lanes_per_phase(size)
    imgs = [c for c in lane_cols[:log2(per)] if c]
    unit = max(size, 4)
    inside = log2(unit // itemsize) if unit >= itemsize else 0
    return imgs, inside


def phase_top(n: int, itemsize: int, low: int) -> int:
    """The first offset bit above one 128-byte phase (at least `low`, at most n)."""
    return min(max(log2(PHASE_BYTES // itemsize) if itemsize <= PHASE_BYTES else 0, low), n)


def high_spans(n: int, low: int, sides) -> list[list[int]]:
    """Per side, a basis of the elements its phase lanes (and the bits inside one access)
    reach that have no bit below `low`: the offset columns above the banks, which never have
    such bits (vectors stay aligned), must avoid exactly these."""
    mask = (1 << low) - 1
    out = []
    for imgs, inside in sides:
        vecs = list(imgs) + [1 << i for i in range(inside)]
        combos = LinearMap(tuple(v & mask for v in vecs), max(low, 1)).kernel()
        out.append([_xor_of(vecs, c) for c in combos])
    return out


def _xor_of(vecs, combo: int) -> int:
    x = 0
    for i in bits_of(combo):
        x ^= vecs[i]
    return x


def _swizzle(n: int, itemsize: int, low: int, sides) -> LinearMap:
    """Offset bits -> element bits: bits [0, low) fixed, bits above one phase (`top` up) chosen
    to avoid both sides' phase spans (module docstring), the bank bits in between completing
    the basis. `sides`: [(phase lane images, bits inside an access)]. Every column above `low`
    has no bit below it (the map is block-diagonal), so aligned vectors stay aligned and
    contiguous; the spans to avoid are therefore the parts of the sides' spans above `low`."""
    top = phase_top(n, itemsize, low)
    fixed = [1 << i for i in range(low)]
    spans = high_spans(n, low, sides)
    high: list[int] = []
    prefer = [1 << h for h in range(n - 1, low - 1, -1)]
    for _ in range(n - top):
        base = fixed + high
        # Each span holds `base`, so a vector outside them keeps the columns independent,
        # and clearing its bits below `low` keeps it outside.
        proper = [echelon(base + sp) for sp in spans]
        proper = [e for e in proper if e.rank < n]
        x = avoiding_vector(n, proper, prefer) if proper else None
        for e in proper if x is None else []:   # not both: keep one side conflict-free
            x = avoiding_vector(n, [e], prefer)
            if x is not None:
                break
        if x is None:
            x = avoiding_vector(n, [echelon(base)], prefer)
        high.append(x & ~((1 << low) - 1))
    mid: list[int] = []
    for i in list(range(low, top)) + list(range(n)):
        if len(mid) == top - low:
            break
        e = echelon(fixed + mid + high)
        if e.reduce(1 << i)[0]:
            mid.append(1 << i)
    return LinearMap(tuple(fixed + mid + sorted(high)), n)


def shared_trip(src: Layout, need: Need, itemsize: int) -> SharedTrip:
    n = src.n_bits
    kw, kr = write_vector_bits(src, itemsize), read_vector_bits(need, itemsize)
    owned = src.owned_regs()
    # The first warp's threads (every warp's requests cost the same: `_waves`).
    src_thr = src.thread_linears[:32]
    need_thr = need.thread_part(min(src.threads, 32))
    nl = len(src.lane)
    src_lanes = src.matrix.cols[len(src.reg):len(src.reg) + nl]
    warps = max(src.threads // 32, 1)
    best = None
    for v in range(max(kw, kr) + 1):
        wv, rv = 1 << min(kw, v), 1 << min(kr, v)
        wregs = tuple(r for r in owned if r % wv == 0)
        sides = [_phase_span(src_lanes, wv * itemsize, itemsize),
                 _phase_span(need.thread[:nl], rv * itemsize, itemsize)]
        low = min(max(v, max(s[1] for s in sides)), n)
        maps = [LinearMap(tuple(1 << i for i in range(n)), n), _swizzle(n, itemsize, low, sides)]
        for mp in maps:
            if best is not None and mp == best.shared.map and wv == best.write_vec \
                    and rv == best.read_vec:
                continue
            sh = SharedLayout(src.shape, mp)
            inv = sh.inverse
            w0, r0 = src.reg_linears[wregs[0]], need.regs[0]
            w = _waves(inv.images(t ^ w0 for t in src_thr), len(wregs) * warps,
                       wv * itemsize, itemsize)
            r = _waves(inv.images(t ^ r0 for t in need_thr), len(need.regs) // rv * warps,
                       rv * itemsize, itemsize)
            xors = _xor_count(inv, src.thread_weights(), [src.reg_linears[i] for i in wregs]) + \
                _xor_count(inv, need.thread, list(need.regs[::rv]))
            trip = SharedTrip(sh, wv, wregs, rv, len(need.regs), w, r, xors, warps)
            if best is None or trip.cost < best.cost:
                best = trip
    assert best is not None
    return best


def _waves(offsets, count: int, size: int, itemsize: int) -> tuple[int, int]:
    """Wavefronts of `count` requests like the one whose lanes access these element offsets
    (at most 32 lanes). Every request of a linear access pattern is the first one's addresses
    XOR a constant, which permutes banks and keeps distinct words distinct: they all cost the
    same."""
    addr = [int(o) * itemsize for o in offsets]
    w, ideal = wavefronts([addr + [-1] * (32 - len(addr))], size)
    return w * count, ideal * count


def _xor_count(inv: LinearMap, thread_w, consts) -> int:
    """XOR instructions an access pattern needs: one per distinct register constant whose
    offset shares bits with the thread part (the rest is an immediate address offset)."""
    tmask = 0
    for w in thread_w:
        tmask |= inv(int(w))
    return len({y & tmask for y in inv.images(int(c) for c in consts)} - {0})


def describe(p: Plan) -> str:
    """One line for reports and tests."""
    if isinstance(p, SharedTrip):
        sw = "identity" if p.shared.is_identity() else "swizzled"
        return (f"shared({sw}, write x{p.write_vec}, read x{p.read_vec}, "
                f"{p.conflicts} extra wavefronts)")
    if isinstance(p, Shuffle):
        return f"shuffle({len(p.steps)} shfl)"
    return p.kind


__all__ = ["Need", "need_of", "plan", "plan_conversion", "rename_map", "Same", "Rename",
           "Shuffle", "SharedTrip", "shared_trip", "shuffle_plan", "describe", "linear_index",
           "bits_of"]
