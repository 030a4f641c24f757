"""The block-scaled parts of a warp-specialized tcgen05 ring (sm_100a; plan/loops.py R12,
docs/codegen.md "Block-scaled products"): the scale tiles of each iteration go from global
memory to the stage's scale region in shared memory (the producer warp's 32 lanes) and from
there to tensor memory with `tcgen05.cp.cta_group::1.32x128b.warpx4` (the MMA warp's issuing
thread, in order before the block-scaled MMAs that read them, as Triton and CUTLASS do).

The scale region of a stage (plan/loops.scale_bytes): A's SCALE_UNIT bytes, then B's per 128
columns, each 32 rows of 16 bytes (the canonical K-major layout without swizzle, 8-row groups
128 bytes apart), row l, word c holding the scales of A's row 32 c + l (B's column 128 g +
32 c + l), byte j for the j-th 32 of the iteration's K. `tcgen05.cp ... 32x128b.warpx4`
copies such a block to lanes l of four TMEM columns in each lane quarter: the image
tcgen05_scaled.py describes (row r of A in lane r mod 32 of column r / 32), which the
MMAs' k-step j reads through the instruction descriptor's scale-byte fields.

Tensor memory: the accumulator's N columns, then per stage s A's four columns and B's four
per 128 columns (tensor_cores._scaled_plan reserves MAX_STAGES of them), so a stage's scales
are rewritten only after the MMAs that read them completed (the producer waits for the
stage's empty mbarrier before it refills the stage; the MMA thread copies after full's).

Stage protocol: full[s] counts the producer's elected lane's expect_tx (the operand images'
TMA bytes) and one arrival of each of its 32 lanes after their scale stores and a
`fence.proxy.async` (tcgen05.cp reads shared memory through the async proxy).
"""

from __future__ import annotations

import llvmlite.ir as ir

from tilelang.codegen.emit.kernel import I32, I64, KernelEmitter
from tilelang.codegen.lower.tensorcore import tcgen05_scaled, tcgen05_tmem as tmem, tma_load
from tilelang.codegen.lower.tensorcore.tcgen05_product import SM100_VERSION, commit
from tilelang.codegen.plan.loops import SCALE_UNIT
from tilelang.codegen.plan.operands import DeferredLoad

ROWS = 128                  # rows (A) or columns (B) one tcgen05.cp.32x128b.warpx4 covers
COLS = 4                    # the TMEM columns it writes
SCALE_ARRIVALS = 32         # full[s]'s arrivals beside the expect_tx: the producer's lanes


def _c(v: int) -> ir.Constant:
    return ir.Constant(I32, v)


def _c64(v: int) -> ir.Constant:
    return ir.Constant(I64, v)


def groups_b(n: int) -> int:
    """B's tcgen05.cp copies (128 columns each) for an accumulator of `n` columns."""
    return -(-n // ROWS)


def stage_columns(n: int) -> int:
    """TMEM columns of one stage's scales: A's four, B's four per 128 columns."""
    return COLS * (1 + groups_b(n))


def region_offset(ring) -> int:
    """The scale region's byte offset in a stage: after the two operand images."""
    return sum(ring.lp.image_bytes)


def _guarded_load(kern: KernelEmitter, addr: ir.Value, ok: ir.Value, nbytes: int = 1
                  ) -> ir.Value:
    """The `nbytes` (1, 2 or 4) at global address `addr` (i64) zero-extended to i32 where
    `ok`, else 0 (no access: the tile's part outside the array loads the padding, zero)."""
    load = "@p ld.global.u32 $0, [$1];" if nbytes == 4 else \
        f"@p ld.global.u{8 * nbytes} h, [$1]; @p cvt.u32.u16 $0, h;"
    ty = ir.FunctionType(I32, [I64, I32])
    asm = ir.InlineAsm(ty, "{ .reg .pred p; .reg .b16 h; setp.ne.b32 p, $2, 0; "
                           f"mov.u32 $0, 0; {load} }}", "=r,l,r", side_effect=True)
    b = kern.builder
    return b.call(asm, [addr, b.zext(ok, I32)])


def _store_word(kern: KernelEmitter, addr: ir.Value, word: ir.Value) -> None:
    tmem.void(kern, "st.shared.u32 [$0], $1;", [addr, word], "r,r")


def _tile_words(kern: KernelEmitter, load, env_iv, along_rows: bool, count: int):
    """This lane's scale words of the scale tile `load` (tile-indexed, zero padding): for
    A (`along_rows`: a (128, K / 32) tile) word c holds row 32 c + lane's K / 32 bytes; for B
    (a (K / 32, N) tile) word c holds column 32 c + lane's. `count` words, those past the
    tile 0."""
    b = kern.builder
    arr = kern.array(load.arg_map["A"])
    shape = tuple(load.result.type.shape)
    index = tma_load.tile_index(kern, DeferredLoad(load), env_iv)
    start = [b.mul(i, _c64(s)) for i, s in zip(index, shape)]
    lane = b.zext(kern.lane(), I64)
    ks = shape[1] if along_rows else shape[0]         # scales per row / column: K / 32
    extent = shape[0] if along_rows else shape[1]     # rows of A / columns of B
    facts = arr.facts
    inner = _c64(1) if facts.contiguous else arr.strides[1]
    # a row of A's scales in one load: its ks bytes start at a multiple of ks (a tile
    # index times ks) in a row that starts 16-byte aligned, and lie wholly inside or
    # outside an extent that is a multiple of 16 bytes (ArrayFacts)
    whole = along_rows and ks in (2, 4) and facts.contiguous and facts.aligned16 and \
        facts.extent16
    words = []
    for c in range(count):
        if 32 * c >= extent:
            words.append(_c(0))
            continue
        mn = b.add(lane, _c64(32 * c))
        word = None
        for j in range(1 if whole else ks):
            pos = (b.add(start[0], mn), b.add(start[1], _c64(j))) if along_rows else \
                (b.add(start[0], _c64(j)), b.add(start[1], mn))
            ok = b.and_(b.icmp_unsigned("<", pos[0], arr.extents[0]),
                        b.icmp_unsigned("<", pos[1], arr.extents[1]))
            off = b.add(b.mul(pos[0], arr.strides[0]), b.mul(pos[1], inner))
            got = _guarded_load(kern, b.add(arr.address, off), ok, ks if whole else 1)
            word = got if word is None else b.or_(word, b.shl(got, _c(8 * j)))
        words.append(word)
    return words


def stage_scales(ring, iv, slot: ir.Value) -> None:
    """Every lane of the producer warp: the scale tiles of iteration `iv` into the scale
    region of the stage at byte offset `slot`; then its arrival on the stage's full[s]."""
    kern, b = ring.kern, ring.kern.builder
    env_iv = (iv, ring.op.iv, ring.lp.scalars)
    a_load, b_load = ring.lp.scales
    region = b.add(ring.base, b.add(slot, _c(region_offset(ring))))
    row = b.add(region, b.shl(kern.lane(), _c(4)))    # this lane's 16 bytes of each block
    blocks = [(0, _tile_words(kern, a_load, env_iv, True, COLS))]
    wb = _tile_words(kern, b_load, env_iv, False, COLS * groups_b(ring.lp.plan.tc5.n))
    blocks += [(SCALE_UNIT * (1 + g), wb[COLS * g:COLS * (g + 1)])
               for g in range(groups_b(ring.lp.plan.tc5.n))]
    for off, words in blocks:
        for c, w in enumerate(words):
            _store_word(kern, b.add(row, _c(off + 4 * c)), w)
    tmem.void(kern, "fence.proxy.async.shared::cta;")
    tmem.void(kern, "mbarrier.arrive.shared::cta.b64 _, [$0];", [ring.full(slot)], "r")


def _cp_descriptor(kern: KernelEmitter, addr: ir.Value) -> ir.Value:
    """The shared-memory descriptor of a 32 x 16-byte block at 32-bit shared address `addr`:
    K-major without swizzle, 8-row groups 128 bytes apart (SBO), one 16-byte column (LBO
    16, unused), tcgen05's version bits."""
    b = kern.builder
    start = b.zext(b.and_(b.lshr(addr, _c(4)), _c(0x3FFF)), I64)
    return b.or_(start, _c64(1 << 16 | (128 >> 4) << 32 | SM100_VERSION))


def mmas(ring, slot: ir.Value) -> None:
    """The issuing thread: copy the stage's scales into its TMEM columns, the block-scaled
    MMAs of the stage, then tcgen05.commit to its empty mbarrier."""
    kern, b = ring.kern, ring.kern.builder
    n = ring.lp.plan.tc5.n
    stage = b.udiv(slot, _c(ring.stage_bytes))
    taddr = kern.tmem.address
    cols = b.add(taddr, b.add(_c(n), b.mul(stage, _c(stage_columns(n)))))
    region = b.add(ring.base, b.add(slot, _c(region_offset(ring))))
    for g in range(1 + groups_b(n)):
        src = b.add(region, _c(SCALE_UNIT * g)) if g else region
        dst = b.add(cols, _c(COLS * g)) if g else cols
        tmem.void(kern, "tcgen05.cp.cta_group::1.32x128b.warpx4 [$0], $1;",
                  [dst, _cp_descriptor(kern, src)], "r,l")
    image = b.add(ring.base, slot)
    tcgen05_scaled.issue(kern, ring.lp.plan, ring.da, ring.db, taddr, image,
                         b_offset=ring.offs[1], k=ring.k,
                         scale_cols=(cols, b.add(cols, _c(COLS))))
    commit(kern, ring.empty(slot))
