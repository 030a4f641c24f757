"""TMA (sm_90): operand tiles of a pipelined warp-group MMA loop (and of tcgen05 rings on
sm_100a, mma.sync rings on sm_120a) copied by `cp.async.bulk.tensor` straight into their
swizzled images, completing on `mbarrier`s with transaction counts.

A deferred load (lower/tensorcore/mma_operands.py) qualifies when its array is contiguous, 16-byte
aligned and has the `tensor_map` fact (the ABI facts; TMA needs a 16-byte aligned address and
positive strides: a reversed view or a broadcast axis takes cp.async), its tile keeps the
array's order of the non-contiguous axes, and every box dimension is at most 256. Its
tensor map (api.TensorMapSpec) describes one *panel* of the operand image: the box is
span / itemsize elements of the contiguous axis (the swizzle span, 128 bytes for a 64-wide
f16 panel) by the tile's extents along the other axes, so the TMA's own swizzle lays the
box out exactly as layouts/shared.wgmma_image's panel (address bits 4.. XOR bits 7..), and
an image of P panels takes P copies. Out-of-bounds elements of a box are zero-filled by the
TMA unit and still count towards the transaction bytes.

A kernel gets its tensor maps as 128-byte `__grid_constant__` parameters after the source
parameters (docs/abi.md), when TMA is enabled (`generate(tma=True)`): looking a map up in
`KernelEmitter.tensor_maps` adds its parameter (emit/map_params.py), and the loads record the
maps they use in `KernelStats.tensor_maps`.
"""

from __future__ import annotations

import llvmlite.ir as ir

from tilelang.codegen.api import TensorMapSpec
from tilelang.codegen.emit.kernel import I32, I64, KernelEmitter, TileVal
from tilelang.codegen.lower.tensorcore.mma_sync import SmemOperand
from tilelang.ir.ops import ConstantOp
from tilelang.codegen.plan.loops import MAX_BOX, tma_spec  # noqa: F401
from tilelang.record import record


def _c(v: int) -> ir.Constant:
    return ir.Constant(I32, v)


@record
class TmaOperand:
    """One deferred operand copied by TMA into its image (`sop`: a wgmma SmemOperand)."""

    d: object                   # DeferredLoad
    spec: TensorMapSpec
    tmap: ir.Value              # the map parameter (a byval pointer)
    axes: tuple[int, ...]       # tile axis t reads array axis axes[t]
    shape: tuple[int, ...]
    sop: object
    image_offset: int
    address: ir.Value | None = None   # the map's generic address, once computed (`hoist`)
    # a CTA pair's share (tcgen05_pair.py): this CTA's rank (i32) copies the rank-th half of
    # the tile's last axis (N of B) into the image's first half: half of the panels when
    # that axis is the contiguous one, else (a K-major B) half of the rows of every panel
    pair_rank: ir.Value | None = None

    @property
    def pair_rows(self) -> bool:
        return self.pair_rank is not None and self.sop.cax != len(self.shape) - 1

    @property
    def panels(self) -> int:
        n = self.shape[self.sop.cax] * self.sop.itemsize // self.sop.span
        return n // 2 if self.pair_rank is not None and not self.pair_rows else n

    @property
    def nbytes(self) -> int:
        n = self.sop.itemsize
        for s in self.shape:
            n *= s
        return n // 2 if self.pair_rank is not None else n


def plan_operands(kern: KernelEmitter, loads, sops, offsets,
                  pair_rows: bool = False) -> list[TmaOperand] | None:
    """TMA copies of every deferred load of a stage into its image, or None (cp.async for
    all). The maps are recorded (KernelStats.tensor_maps); a kernel emitted without map
    parameters (a KernelEmitter whose `tensor_maps` lack them) gets None. `pair_rows`: the
    last operand is a CTA pair's K-major B, whose box takes half its rows along N."""
    got = [tma_spec(kern, d, sop.cax, sop.span if sop.wg else 0, sop.itemsize)
           for d, sop in zip(loads, sops)]
    if None in got:
        return None
    if pair_rows:
        spec, axes = got[-1]
        box = list(spec.box)
        box[len(axes) - 1 - axes[-1]] //= 2     # the box lists the innermost axis first
        got[-1] = TensorMapSpec(spec.array, spec.dtype, tuple(box), spec.swizzle), axes
    kern.stats.tensor_maps.extend(spec for spec, _ in got)
    if any(spec not in kern.tensor_maps for spec, _ in got):
        return None
    return [TmaOperand(d, spec, kern.tensor_maps[spec], axes,
                       tuple(d.op.result.type.shape), sop, off)
            for d, sop, off, (spec, axes) in zip(loads, sops, offsets, got)]


def side_operands(kern: KernelEmitter, sides) -> list[TmaOperand]:
    """TMA copies of a prefetch ring's loads beside its operands (plan/loops.py R10: one box
    without swizzle, the tile row-major), or none when a map is not available."""
    kern.stats.tensor_maps.extend(sf.spec for sf in sides)
    if any(sf.spec not in kern.tensor_maps for sf in sides):
        return []
    out = []
    for sf in sides:
        shape = tuple(sf.d.op.result.type.shape)
        size = sf.d.op.result.type.dtype.itemsize
        # one "panel" as wide as a row: the whole tile in one copy
        sop = SmemOperand(None, shape, len(shape) - 1, size, shape[-1] * size)
        out.append(TmaOperand(sf.d, sf.spec, kern.tensor_maps[sf.spec],
                              tuple(range(len(shape))), shape, sop, sf.offset))
    return out


# ---------------------------------------------------------------------------------------------
# mbarriers

def _asm(kern: KernelEmitter, text: str, args: list, cons: str, ret=ir.VoidType()):
    tys = [a.type for a in args]
    asm = ir.InlineAsm(ir.FunctionType(ret, tys), text, cons, side_effect=True)
    return kern.builder.call(asm, args)


def mbarrier_init(kern: KernelEmitter, addr: ir.Value, count: int) -> None:
    _asm(kern, f"mbarrier.init.shared::cta.b64 [$0], {count};", [addr], "r,~{memory}")


def mbarrier_inval(kern: KernelEmitter, addr: ir.Value) -> None:
    _asm(kern, "mbarrier.inval.shared::cta.b64 [$0];", [addr], "r,~{memory}")


def arrive_expect_tx(kern: KernelEmitter, addr: ir.Value, nbytes: int | ir.Value) -> None:
    if isinstance(nbytes, int):
        _asm(kern, f"mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], {nbytes};", [addr],
             "r,~{memory}")
    else:
        _asm(kern, "mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], $1;", [addr, nbytes],
             "r,r,~{memory}")


def wait_parity(kern: KernelEmitter, addr: ir.Value, parity: ir.Value) -> None:
    """Spin until the phase of parity `parity` (i32 0/1) of the mbarrier completed."""
    b = kern.builder
    head = kern.fn.append_basic_block("mbar.wait")
    done = kern.fn.append_basic_block("mbar.done")
    b.branch(head)
    b.position_at_end(head)
    ok = _asm(kern, "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [$1], $2; "
                    "selp.u32 $0, 1, 0, p; }", [addr, parity], "=r,r,r,~{memory}", I32)
    b.cbranch(b.icmp_unsigned("!=", ok, _c(0)), done, head)
    b.position_at_end(done)


def _bulk_tensor(kern: KernelEmitter, dst: ir.Value, tmap: ir.Value, coords: list,
                 bar: ir.Value, pair: bool = False) -> None:
    """A bulk tensor copy into this CTA completing on `bar`; `pair`: `bar` may be the pair's
    even CTA's (a shared::cluster address, .cta_group::2)."""
    n = len(coords)
    cs = ", ".join(f"${i + 2}" for i in range(n))
    # sm_120's ptxas wraps a `.shared::cluster` destination in a test of the destination's
    # CTA and a call with a stack frame (a local store per copy); `.shared::cta` (PTX 8.6)
    # says it is this CTA's own, as the copy's shared address always is here (a CTA pair's
    # copies complete on the even CTA's mbarrier: `.shared::cluster`, sm_100a only)
    space = "shared::cta" if kern.target.sm >= 120 and not pair else "shared::cluster"
    group = ".cta_group::2" if pair else ""
    text = (f"cp.async.bulk.tensor.{n}d{group}.{space}.global.mbarrier::complete_tx::bytes "
            f"[$0], [$1, {{{cs}}}], [${n + 2}];")
    _asm(kern, text, [dst, tmap] + coords + [bar], "r,l," + "r," * n + "r,~{memory}")


# ---------------------------------------------------------------------------------------------
# Issuing one stage

def tile_index(kern: KernelEmitter, d, env_iv) -> list[ir.Value]:
    """The load's `index` (i64 per tile axis) with the loop variable bound as `env_iv` =
    (iv value, its Value, the scalar ops to re-evaluate): lower/tensorcore/mma_pipeline.Stream.issue's
    rule."""
    saved = {}
    iv_val, iv_var, ops = env_iv
    for o in [None] + list(ops):
        rid = iv_var.id if o is None else o.results[0].id
        saved[rid] = kern.env.get(rid)
    kern.env[iv_var.id] = TileVal(kern.env[iv_var.id].dtype, kern.scalar_layout, (iv_val,))
    for o in ops:
        if isinstance(o, ConstantOp):
            kern.emit_constant(o)
        else:
            kern.emit_builtin(o)
    index = [kern.index_i64(i) for i in kern.tuple_items(d.op.arg_map["index"])]
    for rid, v in saved.items():
        if v is None:
            kern.env.pop(rid, None)
        else:
            kern.env[rid] = v
    return index


def issuer(kern: KernelEmitter, first: int = 0) -> ir.Value:
    """The one issuing thread (i1) of the warp whose first thread is `first` (kern.tid, the
    linear index, in first .. first + 31): the thread `elect.sync` picks there (the emulator
    and a GPU elect lane 0, i.e. thread `first`). ptxas proves a branch on this predicate
    single-threaded and issues its bulk copies once; on `tid == first` it sometimes cannot
    (the persistent matmul's ring, the warp-specialized producer), and wraps each copy in an
    ELECT loop over the active threads (~6 SASS instructions per copy). The election runs
    once, at the kernel's entry, where every warp is converged (inside a loop it costs an
    ELECT and a compare per iteration). A block whose size is not exact (.maxntid: the
    virtual-thread loop) or not whole warps (elect.sync's member mask would name threads
    that do not exist) keeps `tid == first`."""
    b = kern.builder
    if not kern.exact or kern.declared_threads % 32:
        return b.icmp_unsigned("==", kern.tid, _c(first))
    lane = kern.tid if first == 0 else b.sub(kern.tid, _c(first))
    return b.and_(_elected(kern), b.icmp_unsigned("<", lane, _c(32)))


def _elected(kern: KernelEmitter) -> ir.Value:
    """Whether this thread is its warp's elect.sync pick (i1), elected once at the entry."""
    b = kern.builder
    elected = kern.elected_issuer
    if elected is None:
        # kern.builder itself (as _entry_alloca): a second builder inserting into the block
        # kern.builder is in would leave its insertion point one instruction short
        here = b.block
        b.position_at_start(kern.entry)
        elected = kern.elected_issuer = _asm(
            kern, "{ .reg .pred p; .reg .b32 l; elect.sync l|p, -1; selp.u32 $0, 1, 0, p; }",
            [], "=r", I32)
        b.position_at_end(here)
    return b.icmp_unsigned("!=", elected, _c(0))


def copies(ops: list[TmaOperand]) -> int:
    """How many bulk copies one stage of `ops` takes (one per panel of each operand)."""
    return sum(op.panels for op in ops)


def _pick(kern: KernelEmitter, warp: ir.Value, values: list[ir.Value]) -> ir.Value:
    """values[warp] by a chain of selects (equal neighbours fold away)."""
    b = kern.builder
    out = values[0]
    for c, v in enumerate(values[1:], 1):
        if v is not out:
            out = b.select(b.icmp_unsigned("==", warp, _c(c)), v, out)
    return out


def issue_stage(kern: KernelEmitter, ops: list[TmaOperand], env_iv, image: ir.Value,
                bar: ir.Value, valid: ir.Value, leader: ir.Value | None = None, *,
                pair: bool = False, spread: bool = False) -> None:
    """The block's issuing thread (`issuer`: a thread past the layouts' threads replicates
    one of them, and must not copy again), or where `leader` holds, when `valid`: announce
    the stage's bytes on `bar` and copy every panel of every operand into the stage at
    32-bit shared address `image`. Called where warp 0 is converged. `pair`: `bar` is the
    CTA pair's even CTA's mbarrier (a shared::cluster address), which both CTAs' copies
    complete on.

    With `spread` (plan/loops.spreads holds; `bar` initialized with one arrival per copy),
    copy c (the operands' panels in order) is issued by the elected thread of warp c, which
    announces that copy's bytes on `bar` itself: every warp runs one copy's code with its
    own map, offset and coordinates (selected by warp index), instead of thread 0 running
    all of them (docs/codegen.md, "Hopper")."""
    b = kern.builder
    coords = []
    for op in ops:
        index = tile_index(kern, op.d, env_iv)
        # 32-bit products (TMA coordinates are 32-bit): a 64-bit one shared with the
        # epilogue's bounds test made ptxas carry it through vector registers (R2UR)
        start = [b.mul(b.trunc(i, I32), _c(s)) for i, s in zip(index, op.shape)]
        rank = len(op.axes)
        coords.append([start[op.axes.index(a)] for a in reversed(range(rank))])
    if spread:
        _issue_spread(kern, ops, coords, image, bar, valid)
        return
    if leader is None:
        leader = issuer(kern)
    go = b.and_(valid, leader)
    then = kern.fn.append_basic_block("tma.issue")
    after = kern.fn.append_basic_block("tma.issued")
    b.cbranch(go, then, after)
    b.position_at_end(then)
    nbytes = sum(op.nbytes for op in ops)
    if pair:
        _asm(kern, f"mbarrier.arrive.expect_tx.shared::cluster.b64 _, [$0], {nbytes};",
             [bar], "r,~{memory}")
    else:
        arrive_expect_tx(kern, bar, nbytes)
    for op, cs in zip(ops, coords):
        per = op.sop.span // op.sop.itemsize
        first = cs[0]
        if op.pair_rows:                     # this CTA's half of the rows along N
            j = len(op.axes) - 1 - op.axes[-1]
            cs = cs[:j] + [b.add(cs[j], b.mul(op.pair_rank, _c(op.shape[-1] // 2)))] + \
                cs[j + 1:]
        elif op.pair_rank is not None:       # this CTA's half of the panels
            first = b.add(first, b.mul(op.pair_rank, _c(op.panels * per)))
        for p in range(op.panels):
            inner = b.add(first, _c(p * per)) if p else first
            dst = b.add(image, _c(op.image_offset + p * op.sop.panel_bytes))
            addr = op.address if op.address is not None else map_address(kern, op.tmap)
            _bulk_tensor(kern, dst, addr, [inner] + cs[1:], bar, pair)
    b.branch(after)
    b.position_at_end(after)


def _issue_spread(kern: KernelEmitter, ops: list[TmaOperand], coords, image: ir.Value,
                  bar: ir.Value, valid: ir.Value) -> None:
    b = kern.builder
    warp = b.lshr(kern.tid, _c(5))
    issuing = b.and_(_elected(kern), b.icmp_unsigned("<", warp, _c(copies(ops))))
    table = []                          # (image offset, map address, coordinates, bytes)
    for op, cs in zip(ops, coords):
        per = op.sop.span // op.sop.itemsize
        addr = op.address if op.address is not None else map_address(kern, op.tmap)
        for p in range(op.panels):
            inner = b.add(cs[0], _c(p * per)) if p else cs[0]
            table.append((_c(op.image_offset + p * op.sop.panel_bytes), addr,
                          [inner] + cs[1:], _c(op.nbytes // op.panels)))
    go = b.and_(valid, issuing)
    then = kern.fn.append_basic_block("tma.issue")
    after = kern.fn.append_basic_block("tma.issued")
    b.cbranch(go, then, after)
    b.position_at_end(then)
    nbytes = {t[3].constant for t in table}
    arrive_expect_tx(kern, bar, nbytes.pop() if len(nbytes) == 1 else
                     _pick(kern, warp, [t[3] for t in table]))
    dst = b.add(image, _pick(kern, warp, [t[0] for t in table]))
    addr = _pick(kern, warp, [t[1] for t in table])
    cs = [_pick(kern, warp, [t[2][k] for t in table]) for k in range(len(table[0][2]))]
    _bulk_tensor(kern, dst, addr, cs, bar)
    b.branch(after)
    b.position_at_end(after)


def hoist(kern: KernelEmitter, ops: list[TmaOperand]) -> None:
    """Compute the maps' generic addresses here (before a loop) instead of in every issue:
    an issue is a branch taken by thread 0, out of which LLVM does not hoist them."""
    for op in ops:
        op.address = map_address(kern, op.tmap)


def map_address(kern: KernelEmitter, tmap: ir.Value) -> ir.Value:
    """The generic address of a grid-constant map parameter (LLVM emits cvta.param)."""
    return kern.builder.ptrtoint(tmap, I64)

