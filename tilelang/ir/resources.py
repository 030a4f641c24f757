"""Resource estimates of a kernel before code generation (docs/language.md §12, E0783/E0787): the 32-bit
registers its live tiles need per thread, and the shared memory code generation laid out.

Tiles are fully unrolled: every element a thread holds is its own register. A tile of `n`
elements over the block's `P` threads (the largest power of two in it, as the layouts use)
gives each thread ceil(n / P) elements of ceil(bits / 32) registers (16-bit elements pair up).
The estimate is the largest sum over the values live at one point of the program, a value
being live from its definition to its last use; a value defined before a loop and used in it
stays live for the whole loop. A value code generation computes piecewise inside its consumer
(docs/codegen.md, Plans: fusion) is never live whole and counts nothing; its operands stay
live until that consumer.

The cap is what the hardware gives a thread: 255 registers, fewer when the block is large (an
SM has 65,536 for all the threads of a block, so 1,024 threads get 64 each) or when
`@launch(maxnreg = ...)` says so. Past the cap ptxas spills to local memory: W0787 says where
and how much. Past SPILL_LIMIT_BYTES of spilling per thread, or with more than SPILL_FACTOR
times the registers it has, the kernel is refused (E0787): it would be slower than a smaller
tile, and LLVM takes minutes on such code. Shared memory past the
target's per-block limit is E0788.
"""

from __future__ import annotations

from math import prod
from typing import Mapping

from tilelang.diagnostics import DiagnosticSink, Span, TileUsageError, register_codes
from tilelang.sema.types import TileType
from tilelang.record import record

register_codes({
    "E0787": "a kernel's live tiles need far more registers per thread than exist",
    "W0787": "a kernel's live tiles need more registers per thread than exist: it will spill",
    "E0788": "a kernel needs more shared memory than a block can have",
})

MAX_REGS = 255
SM_REGS = 65536
# The estimate counts every live tile whole, which measured a little above ptxas's counts
# (softmax over 32,768 columns and 256 threads: 258 estimated, 232 allocated, no spill), so it
# warns only past the cap by this margin.
MARGIN_REGS = 16
SPILL_LIMIT_BYTES = 4096
SPILL_FACTOR = 4        # or more than 4x the registers it has: most of its tiles in memory
MMA_OPS = ("mma", "matmul", "@", "mma_scaled")


@record(frozen=True)
class RegisterEstimate:
    words: int                  # 32-bit registers of the tiles live at the peak
    cap: int                    # registers a thread may have
    peak_span: Span | None      # the op where the peak is reached
    peak_type: TileType | None  # the largest tile live there
    threads: int

    @property
    def spill_bytes(self) -> int:
        return max(0, self.words - self.cap) * 4


def _floor_pow2(n: int) -> int:
    return 1 << (max(1, n).bit_length() - 1)


def words_per_thread(t, threads: int) -> int:
    if not isinstance(t, TileType):
        return 0
    per_thread = -(-prod(t.shape) // threads) if t.shape else 1
    return -(-per_thread * max(t.dtype.bits, 16) // 32) if t.dtype.bits >= 16 else \
        -(-per_thread // 4) if not t.dtype.is_bool else 0


def register_cap(block, maxnreg: int | None = None) -> int:
    threads = max(1, prod(block))
    cap = min(MAX_REGS, (SM_REGS // threads) // 8 * 8)
    return min(cap, maxnreg) if maxnreg else cap


def estimate_registers(kernel, block, maxnreg: int | None = None,
                       piecewise: Mapping[int, object] | None = None,
                       elsewhere: frozenset = frozenset()) -> RegisterEstimate:
    """Peak live tile registers per thread of `kernel` (a Tile IR Kernel) for `block`.
    `piecewise` maps the values code generation never holds whole (docs/codegen.md, Plans:
    fusion) to the op that computes them one register at a time: they count nothing, and
    what they read is live until that op. `elsewhere`: the ids of values code generation
    keeps outside registers (attention's output in tensor memory, docs/codegen.md): they
    count nothing."""
    threads = _floor_pow2(prod(block))
    piecewise = piecewise or {}
    at_op: dict[int, int] = {}            # id(op) -> its index
    moved: list[tuple[int, object]] = []  # (value id, the op its use moves to)
    defs: dict[int, int] = {}
    uses: dict[int, list[int]] = {}
    values: dict[int, object] = {}
    loops: list[tuple[int, int]] = []   # (index of the loop op, index of its last body op)
    spans: list = []

    def define(v, at: int) -> None:
        defs.setdefault(v.id, at)
        values[v.id] = v

    staged: set[int] = set()   # mma operands: staged through shared memory, not registers
    other_use: set[int] = set()
    splats: set[int] = set()   # constant splats: rebuilt where they are used, held nowhere

    def visit(blk, owner: int) -> None:
        for v in blk.args:
            define(v, 2 * owner + 1)
        for op in blk.ops:
            here = len(spans)
            spans.append(getattr(op, "span", None))
            # Results are written at 2i + 1 while the operands are still live (a tile's last
            # elements are read after its first results exist), except what is updated in
            # place: the values a loop carries in and out and an mma's accumulator.
            in_place = {a.id for n, a in getattr(op, "args", ()) if n == "acc"
                        and hasattr(a, "id")} if getattr(op, "name", None) in MMA_OPS else set()
            at_op[id(op)] = here
            for v in op.operands:
                at = 2 * here if op.is_terminator or op.regions or v.id in in_place \
                    else 2 * here + 1
                uses.setdefault(v.id, []).append(at)
                if op.results and op.results[0].id in piecewise:
                    moved.append((v.id, piecewise[op.results[0].id]))
            if getattr(op, "name", None) in ("zeros", "ones") or (
                    getattr(op, "name", None) == "full"
                    and not hasattr(op.arg_map.get("value"), "id")):
                splats.update(v.id for v in op.results)
            if getattr(op, "name", None) in MMA_OPS:
                staged.update(a.id for n, a in op.args if n in ("a", "b") and hasattr(a, "id"))
                other_use.update(a.id for n, a in op.args if n not in ("a", "b")
                                 and hasattr(a, "id"))
            else:
                other_use.update(v.id for v in op.operands)
            for r in op.regions:
                visit(r, here)
            end = len(spans) - 1
            if type(op).__name__ in ("ForOp", "WhileOp"):
                loops.append((2 * here, 2 * end + 1))
            for v in op.results:
                define(v, 2 * end + 1)

    visit(kernel.body, -1)
    for vid, consumer in moved:     # read where the consumer computes the fused value
        uses[vid].append(2 * at_op[id(consumer)] + 1)
    last: dict[int, int] = {}
    for k, us in uses.items():
        d = defs.get(k, 0)
        end = max(us)
        for start, stop in loops:  # used in a loop it was defined before: live through it
            if d <= start and any(start < u <= stop for u in us):
                end = max(end, stop)
        last[k] = end
    defs = {k: max(d, 0) for k, d in defs.items()
            if k not in staged - other_use and k not in splats and k not in piecewise
            and k not in elsewhere}
    n = 2 * len(spans) + 2
    delta = [0] * (n + 1)
    for k, d in defs.items():
        w = words_per_thread(values[k].type, threads)
        if not w:
            continue
        end = max(last.get(k, d), d)
        delta[d] += w
        delta[end + 1] -= w
    peak, peak_at, live = 0, 0, 0
    for i in range(n):
        live += delta[i]
        if live > peak:
            peak, peak_at = live, i
    big = None
    for k, d in defs.items():
        t = values[k].type
        if isinstance(t, TileType) and d <= peak_at <= max(last.get(k, d), d):
            if big is None or words_per_thread(t, threads) > words_per_thread(big, threads):
                big = t
    span = spans[peak_at // 2] if peak_at // 2 < len(spans) else None
    return RegisterEstimate(peak, register_cap(block, maxnreg), span, big, threads)


def check_registers(kernel, block, maxnreg: int | None, sink: DiagnosticSink,
                    piecewise: Mapping[int, object] | None = None,
                    elsewhere: frozenset = frozenset()) -> RegisterEstimate:
    """W0787 when the estimate passes the cap, E0787 when the spill would pass the limit
    (`piecewise`, `elsewhere`: estimate_registers')."""
    est = estimate_registers(kernel, block, maxnreg, piecewise, elsewhere)
    if est.words <= est.cap + MARGIN_REGS:
        return est
    where = est.peak_span or kernel.span
    tile = f" (the largest is {est.peak_type}: " \
           f"{words_per_thread(est.peak_type, est.threads)} per thread)" if est.peak_type else ""
    what = (f"kernel `{kernel.name}` keeps about {est.words} registers per thread of tiles live "
            f"here{tile}, over {est.threads} threads; a thread has {est.cap}")
    fix = ("use smaller tiles (and more blocks, or a loop over chunks of the row), or more "
           "threads (`@launch(maxntid = ...)`) so each holds fewer elements")
    if est.spill_bytes > SPILL_LIMIT_BYTES or est.words > SPILL_FACTOR * est.cap:
        raise TileUsageError.at("E0787", f"{what}: it would spill about {est.spill_bytes} bytes "
                                         f"per thread to local memory", where, help=fix)
    sink.warn("W0787", f"{what}: expect about {est.spill_bytes} bytes per thread of spills to "
                       f"local memory", where, help=fix)
    return est


def check_shared_memory(kernel, smem_bytes: int, limit: int) -> None:
    """E0788 when the shared memory code generation laid out passes the target's limit."""
    if smem_bytes > limit:
        raise TileUsageError.at(
            "E0788", f"kernel `{kernel.name}` needs {smem_bytes} bytes of shared memory per "
                     f"block (pipeline stages, reduction and exchange scratch); a block can "
                     f"have {limit}", kernel.span,
            help="use smaller tiles or fewer pipeline stages (`@launch(num_stages = ...)`)")
