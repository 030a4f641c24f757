"""The tensor-core decision of the products pass (plan/products.py): whether and how a
matrix product (`mma`, `matmul`, `@`) runs on tensor cores — the instruction form, the warps'
tiling of the accumulator and its fragment layout (layouts/mma.py), or warp-group MMA on
sm_90a (layouts/wgmma.py). None sends a product to the FMA path (lower/tensorcore/matmul.py).
docs/codegen.md, Plans. `kern`: a plan.inputs.PlanInputs (or the emitter: same names).

Rules, in the order they are tried:
  R1 tensor cores need sm_80 or later, whole warps and at least one (the replica threads of
     a partial warp would run the .aligned instructions);
  R2 the operand and accumulator dtypes must have an mma.sync form (layouts/mma.mma_form) and
     K a multiple of its k, and the accumulator a warp tiling (layouts/mma.warp_tiling);
  R3 warp-group MMA when the target has wgmma, the operands are f16/bf16 (or the 8-bit
     floats, K-major), the accumulator f32 and every operand fits 32-byte panels along K (or
     along M/N for 16-bit types), and the block is whole warp groups (or 2^k of them and a
     producer group); a product that fits but for the block is *declined* (the launch
     contract reports E0721) and runs on mma.sync.
  R4 tcgen05 on sm_100a (lower/tensorcore/tcgen05_product.py): the operand and accumulator
     types of a kind of TC5_KINDS (f16/bf16 -> f32: kind::f16; tf32 -> f32: kind::tf32;
     f8e4m3/f8e5m2, mixed or not, -> f32: kind::f8f6f4; i8/u8, mixed or not, -> i32:
     kind::i8), an accumulator of 128 or 64 rows and a power-of-two N of 16 to 256 (one
     instruction of M = 128 or 64 per k-step of 32 bytes of each row: K 16, 8 or 32, its
     accumulator in tensor memory), K a multiple of that step, each operand whole 32-byte
     panels along K or (16- and 8-bit types: tc5_mn; tf32 images are K-major) along M/N, and
     a block of exactly four warps (warp w reads TMEM lanes 32w .. 32w + 31 in the
     epilogue) or of those four and two more, a producer and an MMA warp (tc5_ws_block:
     plan/loops.py R5 specializes the ring); anything else runs on mma.sync.
  R5 a block-scaled product (`mma_scaled`) reaches planning only where plan/scaled.py's
     S1-S3 give it a block-scaled instruction (the software path rewrote the others into a
     bf16 `mma` first): the f8 mma.sync form and tiling of R2 with that instruction.
"""

from __future__ import annotations

from tilelang.codegen.layouts.distributed import Layout
from tilelang.codegen.layouts.mma import MmaForm, WarpTiling, acc_layout, mma_form, warp_tiling
from tilelang.codegen.layouts.wgmma import WgTiling, wg_acc_layout, wg_tiling
from tilelang.codegen.plan.scaled import ScaledForm, scaled_path
from tilelang.ir.ops import BuiltinOp
from tilelang.record import record
from tilelang.targets import FEATURES


@record(frozen=True)
class TensorCorePlan:
    form: MmaForm
    b_class: str
    tiling: WarpTiling
    acc: Layout
    wg: WgTiling | None = None      # warp-group MMA (lower/tensorcore/wgmma_product.py); acc is then its
                                    # layout
    tc5: "Tc5Shape | None" = None   # tcgen05 (R4); acc is then tc5_acc_layout
    scaled: ScaledForm | None = None    # a block-scaled instruction (R5; mma_scaled only)


@record(frozen=True)
class Tc5Shape:
    """One tcgen05.mma.cta_group::1.kind::<kind> of M x N x K per k-step of K over the
    whole accumulator; `columns`: the TMEM columns allocated for it (f32 or s32: one per
    column of N, at least 32, a power of two)."""
    m: int
    n: int
    k: int
    columns: int
    kind: str = "f16"


# R4: the dense tcgen05 kind of each operand class (layouts/mma.MmaForm.ab, A's; B's class
# is of the same kind) and its accumulator; K per instruction is 32 bytes of each row
# (PTX ISA, tcgen05.mma, "Matrix shape"): 16 16-bit, 8 tf32 or 32 8-bit elements
TC5_KINDS = {"f16": ("f16", "f32"), "bf16": ("f16", "f32"), "tf32": ("tf32", "f32"),
             "e4m3": ("f8f6f4", "f32"), "e5m2": ("f8f6f4", "f32"),
             "s8": ("i8", "i32"), "u8": ("i8", "i32")}


TC5_THREADS = 128           # the four warps whose TMEM lane quarters cover M = 128
TC5_WS_THREADS = TC5_THREADS + 64   # and a producer warp and an MMA warp after them
SCALED_RING_STAGES = 4      # a block-scaled ring's deepest (plan/loops.MAX_STAGES): its TMEM


def tc5_mn(itemsize: int) -> bool:
    """tcgen05 reads MN-major images (the instruction descriptor's transpose bits) of 16- and
    8-bit operands (Triton 3.9's sm_100a matmuls read an MN-major f8 or i8 B so); tf32
    operands are K-major, as on mma.sync and wgmma."""
    return itemsize in (1, 2)


def tc5_ws_block(kern) -> bool:
    """A block of the four epilogue warps of a tcgen05 accumulator and a producer and an
    MMA warp (192 threads) on a target with tcgen05 (R4, plan/loops.py R5)."""
    return kern.target.name in FEATURES["tcgen05"].arch_targets and kern.exact and \
        kern.threads == TC5_THREADS and kern.declared_threads == TC5_WS_THREADS


def tc5_acc_layout(shape: tuple[int, ...]) -> Layout:
    """The layout of tcgen05.ld's 32x32b shape with M = 128: thread 32w + l holds row
    32w + l (its TMEM lane), register j holds column j. M = 64 keeps row 16w + i in lane
    32w + i (i < 16) and is read with the 16x32bx2 shape split at N / 2: thread 32w + l
    holds row 16w + l mod 16, register j column j, or N / 2 + j for l >= 16."""
    m, n = shape
    if m == 64:
        reg = tuple((0, 1 << i) for i in range((n // 2 - 1).bit_length()))
        lane = tuple((1 << i, 0) for i in range(4)) + ((0, n // 2),)
        return Layout((m, n), reg, lane, ((16, 0), (32, 0)))
    reg = tuple((0, 1 << i) for i in range((n - 1).bit_length()))
    lane = tuple((1 << i, 0) for i in range(5))
    warp = ((32, 0), (64, 0))
    return Layout((m, n), reg, lane, warp)


def _tc5_plan(kern, form: MmaForm, a_shape, b_shape, out_shape) -> tuple:
    """(Tc5Shape or None, why not, declined: the product fits but for the block) for R4."""
    if kern.target.name not in FEATURES["tcgen05"].arch_targets:
        return None, "", False
    kind, acc = TC5_KINDS.get(form.ab, (None, None))
    if kind is None or form.acc != acc:
        return None, f"tcgen05 not used: {form.ab} operands / {form.acc} accumulator", False
    if len(out_shape) != 2:
        return None, "tcgen05 not used: a batched product", False
    m, n = out_shape
    k = a_shape[-1]
    if m not in (64, 128) or n < 16 or n > 256 or n & (n - 1):
        return None, f"tcgen05 not used: a {m} x {n} accumulator (128 or 64 x 2^k, " \
                     f"N 16..256)", False
    step = 32 // form.itemsize
    if k % step:
        return None, f"tcgen05 not used: K = {k} is not a multiple of {step}", False
    for mn in (m, n):
        if not (image_fits(k, form.itemsize) or
                tc5_mn(form.itemsize) and image_fits(mn, form.itemsize)):
            return None, "tcgen05 not used: an operand fits no 32-byte panel", False
    if not (kern.exact and kern.threads == kern.declared_threads == TC5_THREADS
            or tc5_ws_block(kern)):
        return None, f"tcgen05 not used: {kern.declared_threads} threads (it takes " \
                     f"{TC5_THREADS}, or {TC5_WS_THREADS} with a producer and an MMA warp)", \
            kern.exact
    return Tc5Shape(m, n, step, max(32, n), kind), "", False


def tc5_declined(kern, op: BuiltinOp) -> bool:
    """Whether `op` fits R4's tcgen05 product but for the block's thread count (an exact
    block of neither 128 nor 192 threads): the launch contract says so (E0729)."""
    if kern.target.name not in FEATURES["tcgen05"].arch_targets or op.name == "mma_scaled":
        return False
    args = op.arg_map
    at, bt = (args[n].type for n in ("a", "b"))
    got = mma_form(at.dtype.name, bt.dtype.name, op.result.type.dtype.name, kern.target.sm)
    return got is not None and _tc5_plan(kern, got[0], at.shape, bt.shape,
                                         op.result.type.shape)[2]


def wgmma_ready(kern) -> bool:
    """The target has wgmma (sm_90a) and the block is whole warp groups (or a power of two
    of them and one more, the producer of a warp-specialized block)."""
    return kern.target.name in FEATURES["wgmma"].arch_targets and \
        kern.declared_threads % 128 == 0 and (kern.threads == kern.declared_threads
                                              or producer_block(kern))


def producer_block(kern) -> bool:
    """A block of 2^k warp groups and one more (384 threads: two consumer warp groups and a
    producer)."""
    return kern.exact and kern.threads >= 256 and kern.declared_threads == kern.threads + 128


def wg_k(form: MmaForm) -> int:
    """K of one wgmma instruction: 32 bytes of each operand row (k16 for 16-bit types, k32
    for the 8-bit floats)."""
    return 32 // form.itemsize


def image_span(extent: int, itemsize: int) -> int:
    """The swizzle span (128, 64 or 32 bytes: the widest that divides it) of a wgmma image
    whose contiguous axis is a tile axis of `extent` elements; 0 when none does."""
    for span in (128, 64, 32):
        if extent * itemsize % span == 0:
            return span
    return 0


def image_fits(extent: int, itemsize: int) -> bool:
    return image_span(extent, itemsize) > 0


def _wg_plan(kern, form: MmaForm, a_shape, b_shape, out_shape) -> tuple:
    """(WgTiling or None, why not, declined)."""
    if form.ab not in ("f16", "bf16", "e4m3", "e5m2") or form.acc != "f32":
        return None, f"{form.ab} operands / {form.acc} accumulator have no wgmma form", False
    if kern.target.name not in FEATURES["wgmma"].arch_targets:
        return None, f"{kern.target.name} has no wgmma", False
    m, k = a_shape[-2], a_shape[-1]
    n = b_shape[-1]
    if k % wg_k(form):
        return None, f"K = {k} is not a multiple of wgmma's k{wg_k(form)}", False
    # each operand needs K or its M/N extent to be whole panels of 32 bytes or more (16-bit:
    # either axis may be contiguous, the instruction transposes; 8-bit: K only, an operand
    # stored along M/N is staged through registers into a K-major image)
    for mn in (m, n):
        if not (image_fits(k, form.itemsize) or
                (form.itemsize == 2 and image_fits(mn, form.itemsize))):
            return None, "an operand fits no 32-byte panel", False
    if not wgmma_ready(kern):
        # the product fits wgmma but the block is not whole warp groups: the contract
        # says so (E0721) and mma.sync computes it
        declined = wg_tiling(tuple(out_shape), 128) is not None
        return None, f"wgmma declined: {kern.declared_threads} threads are not whole " \
                     f"warp groups", declined
    t = wg_tiling(tuple(out_shape), kern.threads)
    return t, "" if t is not None else "no warp-group tiling of the accumulator", False


def k_steps(at, tc5: Tc5Shape) -> int:
    return at.shape[-1] // tc5.k


def tensor_core_plan(kern, op: BuiltinOp) -> tuple:
    """(TensorCorePlan or None for the FMA path, why, wgmma declined) for `op`."""
    args = op.arg_map
    at, bt = (args[n].type for n in ("a", "b"))
    out = op.result.type
    sm = kern.target.sm
    if sm < 80:
        return None, f"FMA: {kern.target.name} has no mma.sync (R1)", False
    if kern.threads < 32 or kern.declared_threads % 32:
        # a block that is not whole warps: its replica threads past the layouts' would run
        # ldmatrix / mma.sync (.aligned, whole warps only) in a partial warp
        return None, f"FMA: {kern.declared_threads} threads are not whole warps (R1)", False
    got = mma_form(*(_carrier(op, t.dtype.name) for t in (at, bt)), out.dtype.name, sm)
    if got is None:
        return None, f"FMA: no mma.sync form for {at.dtype.name} x {bt.dtype.name} -> " \
                     f"{out.dtype.name} (R2)", False
    form, b_class = got
    if at.shape[-1] % form.k:
        return None, f"FMA: K = {at.shape[-1]} is not a multiple of k{form.k} (R2)", False
    tiling = warp_tiling(tuple(out.shape), kern.threads)
    if tiling is None:
        return None, "FMA: no warp tiling of the accumulator (R2)", False
    if op.name == "mma_scaled":
        return _scaled_plan(kern, op, form, b_class, tiling)
    tc5, why_not5, _ = _tc5_plan(kern, form, at.shape, bt.shape, out.shape)
    if tc5 is not None:
        return (TensorCorePlan(form, b_class, tiling, tc5_acc_layout(tuple(out.shape)),
                               tc5=tc5),
                f"tcgen05 kind::{tc5.kind} m{tc5.m}n{tc5.n}k{tc5.k}: {k_steps(at, tc5)} "
                f"instruction(s) per product, {tc5.columns} TMEM columns (R4)", False)
    wg, why_not, declined = _wg_plan(kern, form, at.shape, bt.shape, out.shape)
    why_not = why_not5 or why_not
    if wg is not None:
        return (TensorCorePlan(form, b_class, tiling,
                               wg_acc_layout(tuple(out.shape), kern.threads, wg), wg),
                f"wgmma m64n{wg.instr_n}k{wg_k(form)}: {wg.groups_b * wg.groups_m * wg.groups_n}"
                f" warp group(s), {wg.m_tiles} x {wg.n_instrs} instructions per k-step (R3)",
                False)
    return (TensorCorePlan(form, b_class, tiling, acc_layout(tuple(out.shape), kern.threads,
                                                             tiling)),
            f"mma.sync k{form.k}: {tiling.warps_m} x {tiling.warps_n} warps"
            + (f" ({why_not})" if why_not else "") + " (R2)", declined)


# block-scaled operands whose fragments are those of their bytes (plan/scaled.py S2-S3)
_BYTE_IMAGES = ("f4e2m1x2", "f6e2m3", "f6e3m2", "f4e2m1")


def _carrier(op: BuiltinOp, dtype: str) -> str:
    """The dtype whose mma.sync fragments an operand's bytes take: a block-scaled product's
    6- and 4-bit MX floats, held one per byte, and packed FP4 move as e4m3 bytes do
    (plan/scaled.py S2-S3: m16n8k64's e2m1 fragments are m16n8k32's 8-bit ones of the byte
    image)."""
    return "f8e4m3" if op.name == "mma_scaled" and dtype in _BYTE_IMAGES else dtype


def _scaled_plan(kern, op: BuiltinOp, form: MmaForm, b_class: str, tiling: WarpTiling) -> tuple:
    """R5: the block-scaled mma.sync that plan/scaled.py chose for `op`."""
    m = op.arg_map
    path = scaled_path(kern.target, m["a"].type, m["a_scale"].type, m["b"].type,
                       op.result.type, kern.threads)
    assert path.form is not None, "the software path expands every other mma_scaled"
    out = tuple(op.result.type.shape)
    if path.form.instr == "tcgen05":
        m, n = out
        # the accumulator's n columns, then A's scales (four columns: 32 lanes x 4 rows
        # each) and B's (n / 32): lower/tensorcore/tcgen05_scaled.py; in a ring, four and
        # four per 128 of n for each of up to SCALED_RING_STAGES stages (tcgen05_scaled_ring.py)
        cols = max(32, 1 << (n + SCALED_RING_STAGES * 4 * (1 + -(-n // 128)) - 1).bit_length())
        tc5 = Tc5Shape(m, n, 32, cols)
        return (TensorCorePlan(form, b_class, tiling, tc5_acc_layout(out), tc5=tc5,
                               scaled=path.form),
                f"{path.form.describe()}: {k_steps(m_type(op), tc5)} instruction(s) per "
                f"product, {cols} TMEM columns (R5)", False)
    return (TensorCorePlan(form, b_class, tiling, acc_layout(out, kern.threads, tiling),
                           scaled=path.form),
            f"{path.form.describe()}: {tiling.warps_m} x {tiling.warps_n} warps (R5)", False)


def m_type(op: BuiltinOp):
    return op.arg_map["a"].type
