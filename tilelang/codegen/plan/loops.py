"""Loops pass: how each run-time `for` loop around a tensor-core product is pipelined
(docs/codegen.md, Plans; the protocols are lower/tensorcore/mma_pipeline.py's, lower/tensorcore/wgmma_product.py's
and lower/tensorcore/mma_prefetch.py's).

Rules:
  R1 a loop is *pipelined* when (in exact thread mode) its body is pure scalar ops, two
     deferred operand loads and one tensor-core `mma` that updates the only carried value,
     both operands can be copied into their images (16-byte chunks along their contiguous
     axis; for wgmma whole 32-byte panels), and a ring of at least 2 stages fits: the user's
     `@launch(num_stages = n)` as far as one block's shared memory allows, else the largest
     S <= MAX_STAGES whose ring fits the SM's shared memory divided by the blocks per SM the
     registers allow (at most 2), and one block's limit;
  R2 otherwise a loop whose body has warp-group products with deferred operands whose index
     depends only on the loop variable, values from before the loop and pure scalar ops, and
     no break/continue/return, is *prefetched*: those operands are copied one iteration (or
     S - 1) ahead into a ring of their own, S = num_stages or DEFAULT_STAGES. A ring of at
     most STATIC_RING_LIMIT (half the 48 KB a block may declare statically, the other half
     left to the kernel's other buffers) is static shared memory (the static room left when
     the loop is emitted may refuse it: lower/tensorcore/mma_prefetch.py); a larger one is
     *dynamic* shared memory, S as far as one block's shared memory allows, and the rings of
     loops that run one after another share its bytes;
  R3 a wgmma ring's copies are TMA when every operand's array has the TMA facts (contiguous,
     16-byte aligned, `tensor_map`), its tile keeps the array's order of the other axes and
     every box extent is at most MAX_BOX; else cp.async. A prefetch ring's stage that takes
     more than one TMA copy (one per swizzle panel of each operand) is *spread*, one copy
     per warp, when the block (exact, whole warps) has that many warps and is not
     warp-specialized (`spreads`);
  R4 a TMA ring in a cluster is *multicast* when every CTA of the cluster runs the same
     iterations and an operand's index does not depend on some clustered axis of `bid`;
     a tcgen05 ring only when warp-specialized (R5) and not on a CTA pair (R9), whose
     halves of B are its sharing (lower/tensorcore/tcgen05_ws.py);
  R5 the first TMA ring outside any run-time loop, in a block of 2^k warp groups and one
     more (plan/tensor_cores.producer_block), without multicast, is *warp-specialized*: the
     last warp group produces and then exits, so no later loop is; so is a tcgen05 ring's
     in a block of four warps and a producer and an MMA warp (tensor_cores.tc5_ws_block:
     lower/tensorcore/tcgen05_ws.py), whose two warps exit after it;
  R6 a loop that is not pipelined carries (in exact mode) a value its body yields from a
     tensor-core `mma` — directly or through element-wise ops, as attention's rescaled
     output — in that product's accumulator layout, and a row statistic a kept-dims
     reduction computes from such an accumulator (a running max or sum) in the reduction's
     result layout: made once before the loop, never converted per iteration.
  R10 a TMA-prefetched loop also copies ahead the small loads of its body that feed no
     product (attention backward's per-query log-sum-exp and delta rows): a load at the
     body's top level, indexed as R2 asks, with zero padding and no `order`, of a tile of
     rank 2 or 3 whose rows are whole 16-byte units of a contiguous, 16-byte aligned
     `tensor_map` array, at most SIDE_BYTES, each box extent at most MAX_BOX: one TMA box
     without swizzle per stage, after the operand images (stages stay whole IMAGE_ALIGN
     units); the load then reads its tile from the stage (lower/tensorcore/mma_prefetch.py);
  R7 a tcgen05 product's loop (sm_100a) is pipelined only as a TMA ring
     (lower/tensorcore/tcgen05_pipeline.py); else its products stage their own operands one
     at a time.
  R8 an mma.sync ring's copies are TMA on a target of TMA_SYNC_TARGETS (sm_120a: TMA and
     mma.sync, neither wgmma nor tcgen05) when both operands qualify as in R3; their images
     are then TMA's swizzled panels (1024-byte units, as wgmma's), which `ldmatrix` reads
     as it reads the cp.async images, and the ring depth is chosen again for them (R1).
     sm_120, the portable target, keeps cp.async, so its PTX runs on later GPUs unchanged.
  R9 a tcgen05 ring that is not nested, the kernel's only tcgen05 product, in a cluster of
     two CTAs along x (M) whose B tile is the same for both (R4's sharing along x) and lies
     in an even number of panels along N (or is K-major, N a multiple of 16), runs on the CTA
     pair (cta_group::2, M = 256, each CTA copying its A rows and half of B's panels, or of a
     K-major B's rows; a stage holds that half, so its depth is chosen again, R1):
     lower/tensorcore/tcgen05_pair.py, or tcgen05_ws.py's producer and MMA warps when R5
     specializes it.
  R11 a loop that is not pipelined keeps its carried tcgen05 accumulator in tensor memory
     (attention's output O, FlashAttention-4's way; plan/tmem_resident.py has the
     conditions, lower/tensorcore/tcgen05_attention.py the lowering).
  R12 a block-scaled tcgen05 product's loop (`mma_scaled`: two deferred operand loads and
     the two scale loads, plan/scaled.py S4) is pipelined as R7's ring only when it is
     warp-specialized (R5): the producer warp copies the operands by TMA and the scale tiles
     with its 32 lanes into a fourth region of each stage, SCALE_UNIT bytes per 128 rows of A
     and per 128 columns of B (lower/tensorcore/tcgen05_scaled_ring.py); else each product
     stages its own operands and scales.
  R13 a top-level loop without carried values whose body is pure scalar ops, a tcgen05 TMA
     ring (no multicast, no pair) whose accumulator starts from a value made outside the
     loop, then ops without loops, branches or products, and no break/continue/return, in a
     block of four warps and a producer and an MMA warp (R5's, when no ring took them)
     runs as the *accumulator pipeline* (lower/tensorcore/tcgen05_persistent.py): the
     producer and MMA warps run the loop over output tiles with the ring's copies and MMAs,
     the MMAs of tile i into TMEM accumulator i mod 2, while the epilogue warps drain the
     other one (examples/matmul_persistent.tile on sm_100a).
"""

from __future__ import annotations

from math import prod
from typing import Mapping

from tilelang.codegen.api import TensorMapSpec
from tilelang.codegen.layouts.distributed import Layout, drop_axes
from tilelang.codegen.occupancy import ARCH_LIMITS
from tilelang.codegen.plan.inputs import PlanInputs
from tilelang.codegen.plan.access import tile_indexed
from tilelang.codegen.plan.operands import DeferredLoad, async_axis, is_pure_scalar
from tilelang.codegen.plan.products import ProductsPlan
from tilelang.codegen.plan.tmem_resident import TmemResident, link, resident
from tilelang.ir.args import arg_values
from tilelang.ir.ops import (Block, BreakOp, BuiltinOp, ConstantOp, ContinueOp, ForOp,
                             ReturnOp, WhileOp, YieldOp, walk)
from tilelang.ir.values import Value
from tilelang.record import field, record
from tilelang.sema.constants import ConstValue

MAX_STAGES = 4              # pipelined rings (R1)
DEFAULT_STAGES = 2          # prefetch rings (R2)
STATIC_RING_LIMIT = 24 * 1024   # a larger prefetch ring is dynamic shared memory (R2)
IMAGE_ALIGN = 1024          # a wgmma image's alignment: the 128-byte swizzle repeats every 8 rows
MAX_BOX = 256               # a TMA box's largest extent (R3)
TMA_SYNC_TARGETS = ("sm_120a",)   # R8
SIDE_BYTES = 4096           # the largest load a prefetch ring copies beside its operands (R10)
SIDE_ALIGN = 128            # a TMA destination's alignment
KB = 1024
SCALE_UNIT = 512            # a block-scaled stage's scale bytes per 128 rows (R12)


def image_bytes(shape: tuple[int, ...], itemsize: int) -> int:
    """A wgmma operand image's bytes: whole IMAGE_ALIGN units."""
    return -(-prod(shape) * itemsize // IMAGE_ALIGN) * IMAGE_ALIGN


def image_span(extent: int, itemsize: int) -> int:
    """The swizzle span (128, 64 or 32 bytes: the widest that divides it) of a wgmma image
    whose contiguous axis is a tile axis of `extent` elements; 0 when none does."""
    for span in (128, 64, 32):
        if extent * itemsize % span == 0:
            return span
    return 0


def deferred_cax(kern, d: DeferredLoad, k_axis: int, itemsize: int,
                 transposes: bool | None = None) -> int | None:
    """The contiguous axis a deferred load can be copied along into a wgmma (or tcgen05)
    image, if any (`transposes`: as async_axis)."""
    cax = async_axis(kern, d, k_axis, itemsize, transposes)
    if cax is None:
        return None
    return cax if image_span(d.shape[cax], itemsize) > 0 else None


def tma_spec(kern, d: DeferredLoad, cax: int, span: int, itemsize: int
             ) -> tuple[TensorMapSpec, tuple] | None:
    """(the tensor map, tile axis -> array axis) of deferred load `d` copied by TMA into a
    wgmma image whose rows run along the load's tile axis `cax` in panels of `span` bytes,
    or None when it does not qualify (R3)."""
    if not kern.tma or span <= 0:
        return None
    args = d.op.arg_map
    arr = kern.array(args["A"])
    if not (arr.facts.contiguous and arr.facts.aligned16 and arr.facts.tensor_map) or \
            not 2 <= arr.rank <= 5:
        return None
    order = kern.const_ints(args["order"]) if "order" in args else None
    axes = tuple(order) if order is not None else tuple(range(arr.rank))
    shape = tuple(d.op.result.type.shape)
    if axes[cax] != arr.rank - 1:
        return None
    rest = [axes[t] for t in range(len(shape)) if t != cax]
    if rest != sorted(rest):                 # the image's rows are the box's rows in order
        return None
    box = [span // itemsize]
    for a in reversed(range(arr.rank - 1)):
        box.append(shape[axes.index(a)])
    if any(b > MAX_BOX for b in box):
        return None
    return TensorMapSpec(arr.name, arr.dtype, tuple(box), span), axes


# ---------------------------------------------------------------------------------------------
# Multicast (R4)

MAX_SETS = 2                # distinct sharing patterns: one per operand of a product
_UNIFORM_GRID = ("num_blocks", "cluster_size", "cdiv")
_EMPTY: frozenset = frozenset()


@record(frozen=True)
class Multicast:
    """The ring's multicast plan: the cluster's shape and, per TMA operand, the cluster axes
    along which its CTAs share its tile (None: each CTA loads its own)."""

    cluster: tuple[int, int, int]
    groups: tuple[frozenset | None, ...]

    @property
    def size(self) -> int:
        return self.cluster[0] * self.cluster[1] * self.cluster[2]

    @property
    def sets(self) -> list[frozenset]:
        """The distinct sharing patterns, in operand order: each has its own empty mbarriers
        and its own issuing CTA per sub-group."""
        out: list[frozenset] = []
        for g in self.groups:
            if g is not None and g not in out:
                out.append(g)
        return out

    def group_size(self, g: frozenset) -> int:
        n = 1
        for a in g:
            n *= self.cluster[a]
        return n

    def pattern(self, g: frozenset) -> int:
        """The mask of the sub-group of CTA 0: the ranks whose coordinates off `g` are 0."""
        cx, cy, cz = self.cluster
        m = 0
        for z in (range(cz) if 2 in g else (0,)):
            for y in (range(cy) if 1 in g else (0,)):
                for x in (range(cx) if 0 in g else (0,)):
                    m |= 1 << (x + cx * (y + cy * z))
        return m


def cluster_shape(kern) -> tuple[int, int, int] | None:
    """The kernel's declared cluster shape on a target with clusters, or None."""
    if not kern.target.clusters:
        return None
    k = kern.kernel
    spec = getattr(k, "launch", None)
    dims = spec.cluster if spec is not None else \
        (k.attributes.get("cluster_dim") or k.attributes.get("cluster"))
    if not dims:
        return None
    return tuple(dims) + (1,) * (3 - len(dims))


class _Deps:
    """The clustered axes (a frozenset) whose `bid` a value depends on, or None when it may
    differ between the CTAs of a cluster for another reason (memory, cluster_rank, a
    carried value)."""

    def __init__(self, kernel, cluster):
        self.cluster = cluster
        self.defs: dict[int, object] = {}
        self.ivs: dict[int, ForOp] = {}
        for op in walk(kernel.body):
            for r in op.results:
                self.defs[r.id] = op
            if isinstance(op, ForOp) and op.body.args:
                self.ivs[op.body.args[0].id] = op
        self.params = {p.id for p in kernel.params}
        self.memo: dict[int, frozenset | None] = {}

    def value(self, v) -> frozenset | None:
        if v.id in self.memo:
            return self.memo[v.id]
        self.memo[v.id] = None                  # a cycle (a carried value) is not uniform
        self.memo[v.id] = got = self._compute(v)
        return got

    def union(self, values) -> frozenset | None:
        out = _EMPTY
        for a in values:
            d = self.value(a)
            if d is None:
                return None
            out = out | d
        return out

    def _compute(self, v) -> frozenset | None:
        if v.id in self.params:
            return _EMPTY
        loop = self.ivs.get(v.id)
        if loop is not None:
            return self.loop(loop)
        op = self.defs.get(v.id)
        if isinstance(op, ConstantOp):
            return _EMPTY
        if not isinstance(op, BuiltinOp) or op.result is None:
            return None
        if op.name == "bid":
            axis = op.arg_map["axis"]
            axis = getattr(axis, "value", axis)
            if not isinstance(axis, int) or not 0 <= axis < 3:
                return None
            return frozenset((axis,)) if self.cluster[axis] > 1 else _EMPTY
        if op.builtin.group == "grid" and op.name not in _UNIFORM_GRID:
            return None
        if not is_pure_scalar(op):
            return None
        return self.union(op.operands)

    def loop(self, op: ForOp) -> frozenset | None:
        return self.union((op.start, op.stop, op.step))


def multicast_plan(kern, op: ForOp, loads) -> Multicast | None:
    """Which of the ring's TMA operands (`loads`: their DeferredLoads) the CTAs of a cluster
    share, and along which axes (R4); None when none or the kernel has no clusters."""
    cluster = cluster_shape(kern)
    if cluster is None or cluster[0] * cluster[1] * cluster[2] <= 1:
        return None
    if cluster[0] * cluster[1] * cluster[2] > 16:       # the mask is 16 bits
        return None
    deps = _Deps(kern.kernel, cluster)
    if deps.loop(op) != _EMPTY:                 # every CTA runs the same iterations
        return None
    clustered = frozenset(a for a in range(3) if cluster[a] > 1)
    groups = []
    for d in loads:
        dep = deps.union(arg_values(d.op.arg_map["index"]))
        groups.append(None if dep is None or not clustered - dep else clustered - dep)
    if all(g is None for g in groups):
        return None
    return Multicast(cluster, tuple(groups))


# ---------------------------------------------------------------------------------------------
# Pipelined loops (R1)

@record(frozen=True)
class LoopPlan:
    """A pipelined product loop (R1, R3-R5)."""

    mma: BuiltinOp
    operands: tuple[DeferredLoad, DeferredLoad]
    axes: tuple[int, int]          # each operand's contiguous tile axis (its image rows)
    scalars: tuple                 # the body's pure scalar ops (re-evaluated per copy)
    plan: object                   # tensor_cores.TensorCorePlan
    stages: int
    image_bytes: tuple[int, int]
    stages_why: str = ""           # how the ring depth was chosen
    tma: bool = False              # the copies are TMA (R3, R8), else cp.async
    multicast: Multicast | None = None
    warp_specialized: bool = False
    nested: bool = False           # inside another run-time loop (a persistent kernel's)
    pair: bool = False             # tcgen05 on the cluster's CTA pair (R9)
    no_pair: str = ""              # why a tcgen05 ring in a cluster of two is not (R9)
    scales: tuple = ()             # a block-scaled ring's (a_scale, b_scale) loads (R12)
    acc_buffers: int = 1           # TMEM accumulators the ring alternates between (R13)

    @property
    def scale_bytes(self) -> int:
        """A stage's bytes for the scale tiles after the operand images (R12)."""
        return scale_bytes(self.plan.tc5.n) if self.scales else 0


def scale_bytes(n: int) -> int:
    """R12: A's SCALE_UNIT and B's SCALE_UNIT per 128 columns, in whole IMAGE_ALIGN units."""
    return -(-SCALE_UNIT * (1 + -(-n // 128)) // IMAGE_ALIGN) * IMAGE_ALIGN


def _round(n: int, unit: int = 128) -> int:
    return -(-n // unit) * unit


def choose_stages(kern, stage_bytes: int, acc_regs: int) -> tuple[int, str]:
    """(the ring depth for one stage of `stage_bytes`, why): R1."""
    lim = ARCH_LIMITS.get(kern.target.name)
    if lim is None:
        return 1, f"no occupancy limits for {kern.target.name}"
    spec = kern.kernel.launch
    user = getattr(spec, "num_stages", None) if spec is not None else \
        kern.kernel.attributes.get("num_stages")
    if user is not None:
        s = max(1, min(int(user), lim.smem_per_block // stage_bytes))
        return s, f"num_stages = {user}, {s * stage_bytes / KB:g} KB of " \
                  f"{lim.smem_per_block / KB:g} KB per block"
    regs = min(lim.max_regs_per_thread, acc_regs + 40)
    by_regs = lim.regs_per_sm // max(regs * kern.threads, 1)
    for blocks in sorted({max(1, min(2, by_regs)), 1}, reverse=True):
        budget = min(lim.smem_per_block,
                     lim.smem_per_sm // blocks - lim.smem_reserved_per_block)
        s = min(MAX_STAGES, budget // stage_bytes)
        if s >= 2:
            return s, f"{s * stage_bytes / KB:g} KB of {budget / KB:g} KB " \
                      f"({blocks} block(s) per SM by {regs} registers a thread)"
    return 1, f"a {stage_bytes / KB:g} KB stage leaves no room for 2"


def _elems(d: DeferredLoad) -> int:
    n = 1
    for s in d.op.result.type.shape:
        n *= s
    return n


def _pipelined(kern, products: ProductsPlan, op: ForOp) -> tuple[LoopPlan | None, str]:
    if not kern.exact:
        return None, "virtual threads"
    if len(op.carried) != 1:
        return None, "carries more than the accumulator"
    body = op.body
    term = body.terminator
    if not isinstance(term, YieldOp) or len(term.values) != 1:
        return None, "carries more than the accumulator"
    deferred = products.deferred
    mma = None
    loads, scalars, others = {}, [], {}
    for o in body.ops[:-1]:
        if isinstance(o, BuiltinOp) and o.name in ("mma", "mma_scaled") and mma is None:
            mma = o
        elif isinstance(o, BuiltinOp) and o.name == "load" and o.result.id in deferred:
            loads[o.result.id] = o
        elif isinstance(o, BuiltinOp) and o.name == "load":
            others[o.result.id] = o
        elif is_pure_scalar(o):
            scalars.append(o)
        else:
            return None, "the body does more than load -> mma"
    if mma is None or mma.result.id != term.values[0].id:
        return None, "the body does more than load -> mma"
    args = mma.arg_map
    acc, a, b = args.get("acc"), args.get("a"), args.get("b")
    if not (isinstance(acc, Value) and acc.id == op.carried[0].id and isinstance(a, Value)
            and isinstance(b, Value) and a.id in loads and b.id in loads and a.id != b.id
            and len(loads) == 2):
        return None, "the mma's operands are not its two deferred loads"
    plan = products.of(mma)
    if plan is None:
        return None, "the product runs on FMA"
    scales = _scale_loads(mma, plan, others)
    if scales is None:
        return None, "the body does more than load -> mma"
    rank = plan.acc.rank
    ops = (DeferredLoad(loads[a.id]), DeferredLoad(loads[b.id]))
    images = plan.wg is not None or plan.tc5 is not None     # swizzled, 1024-byte aligned
    if images:
        # tcgen05 reads MN-major 16- and 8-bit images (a block-scaled ring's too, R12)
        from tilelang.codegen.plan.tensor_cores import tc5_mn
        mn = tc5_mn(plan.form.itemsize) if plan.tc5 is not None else None
        axes = tuple(deferred_cax(kern, d, k_axis, plan.form.itemsize, mn)
                     for d, k_axis in zip(ops, (rank - 1, rank - 2)))
    else:
        axes = tuple(async_axis(kern, d, k_axis, plan.form.itemsize)
                     for d, k_axis in zip(ops, (rank - 1, rank - 2)))
    if None in axes:
        return None, "an operand cannot be copied into its image"
    unit = IMAGE_ALIGN if images else 128
    sizes = tuple(_round(_elems(d) * plan.form.itemsize, unit) for d in ops)
    extra = scale_bytes(plan.tc5.n) if scales else 0
    stages, why = choose_stages(kern, sum(sizes) + extra, plan.acc.num_regs)
    if scales:                      # the TMEM the plan reserved for the stages' scales
        from tilelang.codegen.plan.tensor_cores import SCALED_RING_STAGES
        stages = min(stages, SCALED_RING_STAGES)
    if stages < 2:
        return None, why
    return LoopPlan(mma, ops, axes, tuple(scalars), plan, stages, sizes, why,
                    scales=scales), ""


def _scale_loads(mma: BuiltinOp, plan, others: dict) -> tuple | None:
    """R12: () for an `mma` whose body has no other loads; the (a_scale, b_scale) loads of a
    block-scaled tcgen05 product (tile-indexed, zero padding); None otherwise."""
    if mma.name == "mma":
        return () if not others else None
    if plan.tc5 is None or len(others) != 2:
        return None
    got = []
    for key in ("a_scale", "b_scale"):
        v = mma.arg_map.get(key)
        o = others.get(getattr(v, "id", None))
        if o is None or not tile_indexed(o) or "order" in o.arg_map or "mask" in o.arg_map:
            return None
        p = o.arg_map.get("padding")
        if not (isinstance(p, ConstValue) and p.value == 0):
            return None
        got.append(o)
    return tuple(got)


# ---------------------------------------------------------------------------------------------
# Prefetched loops (R2)

@record(frozen=True)
class Fetch:
    d: DeferredLoad
    cax: int                      # the operand's contiguous axis (its image rows)
    span: int                     # the image's swizzle span
    itemsize: int
    offset: int                   # byte offset of its image in a stage


@record(frozen=True)
class SideFetch:
    """A load that feeds no product, copied ahead by the ring's TMA (R10)."""

    d: DeferredLoad               # the load (no views)
    spec: TensorMapSpec           # its box, without swizzle
    offset: int                   # byte offset of its tile (row-major) in a stage


@record(frozen=True)
class PrefetchPlan:
    fetches: tuple[Fetch, ...]
    scalars: tuple                # the body's pure scalar ops the indices need, in order
    stages: int                   # wanted: lower/tensorcore/mma_prefetch.py checks the room left
    stage_bytes: int
    tma: bool = False             # R3
    warp_specialized: bool = False
    dynamic: bool = False         # R2: the ring is in dynamic shared memory
    spread: bool = False          # R3: a stage's TMA copies are spread over the warps
    sides: tuple[SideFetch, ...] = ()   # R10


def stage_copies(fetches) -> int:
    """TMA copies of one stage of a prefetch ring: one per swizzle panel of each operand."""
    return sum(f.d.op.result.type.shape[f.d.load_axis(f.cax)] * f.itemsize // f.span
               for f in fetches)


def spreads(kern, fetches) -> bool:
    """R3: whether one stage's TMA copies can be issued one per warp: more than one copy, no
    more than the block's warps (an exact block of whole warps: elect.sync needs every lane
    of a warp) and operand tiles of one rank (one coordinate list per copy)."""
    n = stage_copies(fetches)
    return (kern.exact and not kern.declared_threads % 32
            and 1 < n <= kern.declared_threads // 32
            and len({len(f.d.op.result.type.shape) for f in fetches}) == 1)


def _index_scalars(op: ForOp, d: DeferredLoad, defs: dict, carried: set) -> list | None:
    """The body's ops the load's index needs (pure scalar ops, in body order), or None when
    the index depends on anything else computed in the body or carried by the loop."""
    need, todo = set(), []
    for a in PlanInputs.tuple_items(d.op.arg_map["index"]):
        if isinstance(a, Value):
            todo.append(a)
    while todo:
        v = todo.pop()
        if v.id == op.iv.id:
            continue
        if v.id in carried:
            return None
        o = defs.get(v.id)
        if o is None:                       # defined before the loop
            continue
        if not is_pure_scalar(o):
            return None
        if id(o) not in need:
            need.add(id(o))
            todo.extend(v2 for v2 in o.operands)
    return [o for o in op.body.ops if id(o) in need]


def _prefetch(kern, products: ProductsPlan, op: ForOp) -> tuple[PrefetchPlan | None, str]:
    if not kern.exact:
        return None, "virtual threads"
    body = op.body
    if any(isinstance(o, (BreakOp, ContinueOp, ReturnOp)) for o in walk(body)):
        return None, "break, continue or return in the body"
    deferred = products.deferred
    defs = {o.result.id: o for o in body.ops if getattr(o, "result", None) is not None}
    for o in body.ops:
        for r in getattr(o, "results", ()) or ():
            defs.setdefault(r.id, o)
    carried = {c.id for c in op.carried}
    fetches: list[Fetch] = []
    keys: set[int] = set()
    scalars: dict[int, object] = {}
    offset = 0
    itemsize = None
    for p in body.ops:
        if not (isinstance(p, BuiltinOp) and p.result is not None and
                p.result.id in products.by_result):
            continue
        tp = products.of(p)
        if tp is None or tp.wg is None:
            continue
        rank = tp.acc.rank
        for key, k_axis in (("a", rank - 1), ("b", rank - 2)):
            v = p.arg_map.get(key)
            d = deferred.get(v.id) if isinstance(v, Value) else None
            if d is None or d.op.result.id in keys:
                continue
            size = tp.form.itemsize
            cax = deferred_cax(kern, d, k_axis, size)
            if cax is None or (itemsize is not None and size != itemsize):
                continue
            need = _index_scalars(op, d, defs, carried)
            if need is None:
                continue
            for o in need:
                scalars[id(o)] = o
            shape = d.shape
            fetches.append(Fetch(d, cax, image_span(shape[cax], size), size, offset))
            offset += image_bytes(shape, size)
            keys.add(d.op.result.id)
            itemsize = size
    if not fetches:
        return None, "no warp-group product operand to copy ahead"
    spec = kern.kernel.launch
    user = getattr(spec, "num_stages", None) if spec is not None else \
        kern.kernel.attributes.get("num_stages")
    stages = int(user) if user is not None else DEFAULT_STAGES
    if stages < 2:
        return None, f"num_stages = {stages}"
    tma = all(tma_spec(kern, f.d, f.d.load_axis(f.cax), f.span, f.itemsize) is not None
              for f in fetches)
    sides: list[SideFetch] = []
    images = offset
    if tma:
        for o in body.ops:
            spec = _side_spec(kern, o, products, keys)
            need = _index_scalars(op, DeferredLoad(o), defs, carried) if spec else None
            if need is None:
                continue
            for x in need:
                scalars[id(x)] = x
            sides.append(SideFetch(DeferredLoad(o), spec, offset))
            offset += -(-_tile_bytes(o) // SIDE_ALIGN) * SIDE_ALIGN
        # a ring of power-of-two stages finds a stage's offset and mbarrier with a mask
        # and a shift, others with a division (attention backward dK/dV: 171 -> 160 SASS
        # per step for 8 instead of 5 KiB stages)
        offset = 1 << (offset - 1).bit_length() if images & (images - 1) == 0 else \
            -(-offset // IMAGE_ALIGN) * IMAGE_ALIGN
    dynamic = stages * offset > STATIC_RING_LIMIT
    lim = ARCH_LIMITS.get(kern.target.name)
    if dynamic and lim is not None:
        stages = min(stages, lim.smem_per_block // offset)
        if stages < 2:
            return None, f"a {offset / KB:g} KB stage leaves no room for 2"
    ordered = tuple(o for o in body.ops if id(o) in scalars)
    return PrefetchPlan(tuple(fetches), ordered, stages, offset, tma, dynamic=dynamic,
                        sides=tuple(sides)), ""


def _tile_bytes(o: BuiltinOp) -> int:
    return prod(o.result.type.shape) * o.result.type.dtype.itemsize


def _side_spec(kern, o, products: ProductsPlan, fetched: set) -> TensorMapSpec | None:
    """The box of a load the ring can copy beside its operands (R10), or None."""
    if not (isinstance(o, BuiltinOp) and o.name == "load" and o.result is not None) or \
            o.result.id in fetched or o.result.id in products.deferred:
        return None
    args = o.arg_map
    p = args.get("padding")
    if "order" in args or "mask" in args or not tile_indexed(o) or not (
            p is None or isinstance(p, ConstValue) and p.value == 0):
        return None
    arr = kern.array(args["A"])
    shape = tuple(o.result.type.shape)
    size = o.result.type.dtype.itemsize
    if not (arr.facts.contiguous and arr.facts.aligned16 and arr.facts.tensor_map) or \
            len(shape) != arr.rank or not 2 <= arr.rank <= 3 or \
            shape[-1] * size % 16 or _tile_bytes(o) > SIDE_BYTES or max(shape) > MAX_BOX:
        return None
    return TensorMapSpec(arr.name, arr.dtype, tuple(reversed(shape)), 0)


# ---------------------------------------------------------------------------------------------
# Carried layouts (R6)

ELEMENTWISE_GROUPS = ("operator", "math", "dtype")


def product_behind(ops, value) -> BuiltinOp | None:
    """The `mma` among `ops` whose result `value` is, directly or through element-wise ops
    that keep the layout of their first operand of the result's shape (`mma(...) * s`): a
    loop carrying `value` should carry it in that product's accumulator layout."""
    defs = {o.result.id: o for o in ops if isinstance(o, BuiltinOp) and o.result is not None}
    seen = 0
    while seen < len(ops):
        o = defs.get(getattr(value, "id", None))
        if o is None:
            return None
        if o.name == "mma":
            return o
        if o.builtin.group not in ELEMENTWISE_GROUPS:
            return None
        shape = tuple(o.result.type.shape)
        value = next((v for _, v in o.args if hasattr(v, "id") and
                      tuple(getattr(v.type, "shape", ())) == shape), None)
        seen += 1
    return None


def _row_stat(kern, products: ProductsPlan, ops, shape: tuple[int, ...]) -> tuple | None:
    """(layout, the reduction) for a loop-carried value of `shape` that a kept-dims reduction
    in `ops` computes from a tensor-core product's accumulator (attention's running max and
    sum): the reduction's own result layout, so neither the reduction's result nor the
    broadcast back onto the accumulator needs an exchange through shared memory."""
    plans = {}
    for o in ops:
        if isinstance(o, BuiltinOp) and o.name in ("mma", "matmul", "@"):
            p = products.of(o)
            if p is not None:
                plans.setdefault(tuple(p.acc.shape), p)
    for o in ops:
        if not (isinstance(o, BuiltinOp) and o.builtin.group == "reduce" and o.result is not None
                and tuple(o.result.type.shape) == tuple(shape)):
            continue
        x = o.arg_map.get("x")
        p = plans.get(tuple(getattr(x, "type", None) and x.type.shape or ()))
        if p is None or len(shape) != p.acc.rank or "axis" not in o.arg_map:
            continue
        ax = kern.const_ints(o.arg_map["axis"])[0] % len(shape)
        return drop_axes(p.acc, (ax,), True), o
    return None


def row_stat_layout(kern, ops, shape: tuple[int, ...]) -> Layout | None:
    """_row_stat's layout, for a caller holding the emitter (its plan's products)."""
    got = _row_stat(kern, kern.plan.products, ops, shape)
    return got[0] if got is not None else None


@record(frozen=True)
class Carried:
    """The layout a loop carries one of its values in, from before the loop (R6): a product's
    accumulator layout (`product`: its result id) or a row statistic's reduction layout
    (`reduction`: its result id)."""

    layout: Layout
    product: int | None = None
    reduction: int | None = None


def _carried(kern, products: ProductsPlan, op: ForOp) -> tuple:
    """R6: per carried value, its Carried layout or None (the initial value's)."""
    term = op.body.terminator
    if not isinstance(term, YieldOp) or not kern.exact:
        return ()
    out = []
    for arg, yv in zip(op.carried, term.values):
        shape = tuple(getattr(arg.type, "shape", ()) or ())
        o = product_behind(op.body.ops, yv)
        if o is None:
            stat = _row_stat(kern, products, op.body.ops, shape)
            out.append(None if stat is None else Carried(stat[0], reduction=stat[1].result.id))
            continue
        plan = products.of(o)
        ok = plan is not None and shape == tuple(plan.acc.shape)
        out.append(Carried(plan.acc, product=o.result.id) if ok else None)
    return tuple(out)


# ---------------------------------------------------------------------------------------------
# The pass

@record(frozen=True)
class LoopDecision:
    """One run-time `for` loop with a matrix product in its body, as planned."""

    iv: int                               # the loop variable's value id
    pipelined: LoopPlan | None
    prefetch: PrefetchPlan | None
    why: str                              # why neither, or why not pipelined
    carried: tuple = ()                   # not pipelined: Carried or None per carried value
    carried_ids: tuple[int, ...] = ()     # the carried values' ids (the body's arguments)
    resident: TmemResident | None = None  # R11: the carried output stays in tensor memory
    acc_pipeline: bool = False            # R13: the tcgen05 accumulator pipeline runs it


@record(frozen=True)
class LoopsPlan:
    loops: tuple[LoopDecision, ...] = ()          # in program order
    by_iv: Mapping[int, LoopDecision] = field(default_factory=dict)

    def pipelined(self, op: ForOp) -> LoopPlan | None:
        d = self.by_iv.get(op.iv.id)
        return d.pipelined if d is not None else None

    def prefetch(self, op: ForOp) -> PrefetchPlan | None:
        d = self.by_iv.get(op.iv.id)
        return d.prefetch if d is not None else None

    def acc_pipeline(self, op: ForOp) -> bool:
        """R13: the loop over output tiles that the producer, MMA and epilogue warps each
        run (lower/tensorcore/tcgen05_persistent.py)."""
        d = self.by_iv.get(op.iv.id)
        return d is not None and d.acc_pipeline

    @property
    def tc5_acc_buffers(self) -> int:
        """How many accumulators a tcgen05 product keeps in tensor memory (R13: two)."""
        return max((d.pipelined.acc_buffers for d in self.loops if d.pipelined is not None),
                   default=1)

    @property
    def tc5_pair(self) -> bool:
        """A tcgen05 ring runs on the CTA pair (R9): the kernel's tensor memory is the
        pair's (cta_group::2)."""
        return any(d.pipelined is not None and d.pipelined.pair for d in self.loops)

    @property
    def tmem_columns(self) -> int:
        """The TMEM columns R11's loops need (0: none)."""
        return max((d.resident.columns for d in self.loops if d.resident is not None),
                   default=0)

    @property
    def tmem_values(self) -> frozenset:
        """The ids of values R11 keeps in tensor memory, not registers."""
        return frozenset().union(*(d.resident.values for d in self.loops
                                   if d.resident is not None))

    def resident_product(self, result_id: int) -> TmemResident | None:
        """R11's record of the loop whose product `result_id` accumulates into O."""
        return next((d.resident for d in self.loops if d.resident is not None
                     and d.resident.product == result_id), None)

    def resident_scores(self, result_id: int) -> TmemResident | None:
        """R11's record of the loop whose S product (zero accumulator) is `result_id`."""
        return next((d.resident for d in self.loops if d.resident is not None
                     and result_id in d.resident.scores), None)

    def resident_rescale(self, result_id: int) -> TmemResident | None:
        """R11's record of the loop whose `O * f` is `result_id` (done on TMEM)."""
        return next((d.resident for d in self.loops if d.resident is not None
                     and d.resident.rescale == result_id), None)


def plan_loops(inputs: PlanInputs, products: ProductsPlan) -> LoopsPlan:
    if not products.has_products:
        return LoopsPlan((), {})
    from tilelang.codegen.plan.tensor_cores import producer_block, tc5_ws_block
    # R5: until the first specialized ring
    state = _Producer(producer_block(inputs), tc5_ws_block(inputs))
    pairs: list[tuple[ForOp, LoopDecision]] = []

    def visit(block: Block, nested: bool) -> None:
        for op in block.ops:
            first = len(pairs)
            if isinstance(op, ForOp) and any(
                    isinstance(o, BuiltinOp) and o.result is not None and
                    o.result.id in products.by_result for o in walk(op.body)):
                pairs.append((op, _decide(inputs, products, op, nested, state)))
            inner = nested or isinstance(op, (ForOp, WhileOp))
            for r in op.regions:
                visit(r, inner)
            if isinstance(op, ForOp) and not nested and len(pairs) == first + 2 and state.tc5:
                got = _acc_pipeline(products, op, pairs[first + 1][1])
                if got is not None:             # R13
                    state.producer = state.tc5 = False
                    d = pairs[first][1]
                    pairs[first] = (op, LoopDecision(d.iv, None, None, d.why, d.carried,
                                                     d.carried_ids, acc_pipeline=True))
                    pairs[first + 1] = (pairs[first + 1][0], got)

    visit(inputs.kernel.body, False)
    out = link(inputs.kernel.body, pairs)       # R11: O handed from loop to loop in TMEM
    return LoopsPlan(tuple(out), {d.iv: d for d in out})


@record
class _Producer:
    """Whether the block still has a producer warp group to specialize a ring with, or a
    producer and an MMA warp for a tcgen05 ring (R5)."""

    producer: bool
    tc5: bool = False


def _tc5_ring(inputs: PlanInputs, lp: LoopPlan) -> tuple:
    """R7: a tcgen05 product's loop is pipelined only as a TMA ring (its copies signal the
    issuing thread's mbarriers); otherwise each product stages its own operands."""
    specs = [tma_spec(inputs, d, cax, image_span(d.shape[cax], lp.plan.form.itemsize),
                      lp.plan.form.itemsize) for d, cax in zip(lp.operands, lp.axes)]
    if None in specs:
        return None, "a tcgen05 ring needs TMA copies of both operands"
    return lp, ""


def _sync_tma_ring(inputs: PlanInputs, lp: LoopPlan) -> LoopPlan:
    """R8: the mma.sync ring `lp` with TMA copies into panel images, or `lp` as it is."""
    if inputs.target.name not in TMA_SYNC_TARGETS:
        return lp
    size = lp.plan.form.itemsize
    specs = [tma_spec(inputs, d, cax, image_span(d.shape[cax], size), size)
             for d, cax in zip(lp.operands, lp.axes)]
    if None in specs:
        return lp
    sizes = tuple(image_bytes(d.shape, size) for d in lp.operands)
    stages, why = choose_stages(inputs, sum(sizes), lp.plan.acc.num_regs)
    if stages < 2:
        return lp
    return LoopPlan(lp.mma, lp.operands, lp.axes, lp.scalars, lp.plan, stages, sizes, why,
                    tma=True)


def _tc5_pair(inputs: PlanInputs, products: ProductsPlan, op: ForOp, lp: LoopPlan,
              nested: bool) -> tuple[bool, str]:
    """R9: whether a tcgen05 ring runs on the cluster's CTA pair, and why not (said only for
    a tcgen05 ring in a cluster of two along x)."""
    if lp.plan.tc5 is None or cluster_shape(inputs) != (2, 1, 1):
        return False, ""
    if nested:
        return False, "inside another run-time loop"
    if lp.plan.tc5.m != 128:
        return False, f"M = {lp.plan.tc5.m} (the pair's products take 128 rows a CTA)"
    if sum(d.plan is not None and d.plan.tc5 is not None for d in products.decisions) != 1:
        return False, "the kernel has another tcgen05 product"  # a pair kernel's are all pairs'
    mc = multicast_plan(inputs, op, lp.operands)
    if mc is None or mc.groups[1] != frozenset({0}):
        return False, "B's tile differs between the cluster's CTAs"
    itemsize = lp.plan.form.itemsize
    n = lp.operands[1].op.result.type.shape[-1]
    span = image_span(n, itemsize)
    if lp.axes[1] == 0:                 # K-major (tf32, 8-bit): half the rows of each panel
        return (True, "") if n % 16 == 0 else \
            (False, "B's tile is not a multiple of 16 rows along N")
    if span <= 0 or (n * itemsize // span) % 2:
        return False, "B's tile is not an even number of panels along N"
    return True, ""


def _acc_pipeline(products: ProductsPlan, outer: ForOp, d: LoopDecision
                  ) -> LoopDecision | None:
    """R13: the decision for the ring `d` inside the top-level loop `outer` when `outer` runs
    as the tcgen05 accumulator pipeline, else None."""
    lp = d.pipelined
    if lp is None or lp.plan.tc5 is None or not lp.tma or not lp.nested or \
            lp.multicast is not None or lp.pair or lp.scales or outer.init:
        return None                 # (a block-scaled ring's scale columns are per stage)
    if 2 * lp.plan.tc5.columns > 512:                   # two accumulators in 512 columns
        return None
    ops = outer.body.ops
    at = [i for i, o in enumerate(ops) if isinstance(o, ForOp)]
    if len(at) != 1 or ops[at[0]].iv.id != d.iv:
        return None
    ring = ops[at[0]]
    if not all(is_pure_scalar(o) for o in ops[:at[0]]):
        return None                 # the producer and MMA warps evaluate these per tile
    inside = {r.id for o in ops[:at[0]] for r in o.results}
    if any(v.id in inside for v in ring.init):
        return None                 # the accumulators are reset to a value from outside
    for o in ops[at[0] + 1:]:
        if isinstance(o, YieldOp):
            continue
        if not isinstance(o, (BuiltinOp, ConstantOp)) or (
                o.result is not None and o.result.id in products.by_result):
            return None             # the epilogue warps' part: no loops, branches, products
    if any(isinstance(o, (BreakOp, ContinueOp, ReturnOp)) for o in walk(outer.body)):
        return None
    lp = LoopPlan(lp.mma, lp.operands, lp.axes, lp.scalars, lp.plan, lp.stages,
                  lp.image_bytes, lp.stages_why, lp.tma, None, True, True, False, "",
                  acc_buffers=2)
    return LoopDecision(d.iv, lp, None, "")


def _decide(inputs: PlanInputs, products: ProductsPlan, op: ForOp, nested: bool,
            state: _Producer) -> LoopDecision:
    lp, why = _pipelined(inputs, products, op)
    if lp is not None and lp.plan.tc5 is not None:
        lp, why = _tc5_ring(inputs, lp)
    if lp is not None:
        tma = mc = None
        if lp.plan.wg is not None or lp.plan.tc5 is not None:
            specs = [tma_spec(inputs, d, cax, image_span(d.shape[cax], lp.plan.form.itemsize),
                              lp.plan.form.itemsize) for d, cax in zip(lp.operands, lp.axes)]
            tma = None not in specs
            mc = multicast_plan(inputs, op, lp.operands) if tma and lp.plan.wg else None
        else:
            lp = _sync_tma_ring(inputs, lp)
            tma = lp.tma
        ws = bool(tma) and not nested and mc is None and (
            state.tc5 if lp.plan.tc5 is not None else
            state.producer and lp.plan.wg is not None)
        if lp.scales and not ws:
            lp = None
            why = "a block-scaled tcgen05 ring runs warp-specialized only (R12: a block of " \
                  "four warps, a producer and an MMA warp, TMA copies)"
    if lp is not None:
        if ws:
            state.producer = state.tc5 = False
        pair, no_pair = _tc5_pair(inputs, products, op, lp, nested) if tma else \
            (False, "")
        if lp.plan.tc5 is not None and ws and not pair:
            mc = multicast_plan(inputs, op, lp.operands)    # R4 on sm_100a
        sizes, stages, why = lp.image_bytes, lp.stages, lp.stages_why
        if pair:                    # R9: a stage holds this CTA's half of B; R1 again
            sizes = (sizes[0], sizes[1] // 2)
            stages, why = choose_stages(inputs, sum(sizes), lp.plan.acc.num_regs)
        lp = LoopPlan(lp.mma, lp.operands, lp.axes, lp.scalars, lp.plan, stages, sizes, why,
                      bool(tma), mc, ws, nested, pair, no_pair, lp.scales)
        return LoopDecision(op.iv.id, lp, None, "")
    carried = _carried(inputs, products, op)
    ids = tuple(c.id for c in op.carried)
    pf, why_pf = _prefetch(inputs, products, op)
    if pf is not None:
        ws = pf.tma and state.producer and not nested
        if ws:
            state.producer = False
        pf = PrefetchPlan(pf.fetches, pf.scalars, pf.stages, pf.stage_bytes, pf.tma, ws,
                          pf.dynamic,
                          pf.tma and not ws and not pf.sides and spreads(inputs, pf.fetches),
                          pf.sides)
        return LoopDecision(op.iv.id, None, pf, f"not pipelined: {why}", carried, ids)
    res, why_res = resident(inputs, products, op, carried)
    return LoopDecision(op.iv.id, None, None, f"not pipelined: {why}; not prefetched: {why_pf}"
                        + (f"; {why_res}" if why_res else ""), carried, ids, res)
