"""Whether and how a matrix product runs on tensor cores: the instruction form, the warps'
tiling of the accumulator and its fragment layout (layouts/mma.py), decided from the operand
and accumulator dtypes, the target and the block's threads. None sends the product to the FMA
path of lower/tensorcore/matmul.py. On sm_90a, with whole warp groups, f16/bf16 (or f8e4m3/f8e5m2,
K-major) operands, an f32 accumulator of whole 64-row tiles and operands that fit 128-byte
panels, the plan is warp-group MMA (`wg`, layouts/wgmma.py; lower/tensorcore/wgmma_product.py emits it)."""

from __future__ import annotations

import llvmlite.ir as ir

from tilelang.codegen.layouts.distributed import Layout, drop_axes
from tilelang.codegen.layouts.mma import MmaForm, WarpTiling, acc_layout, mma_form, warp_tiling
from tilelang.codegen.layouts.wgmma import WgTiling, wg_acc_layout, wg_tiling
from tilelang.codegen.emit.kernel import KernelEmitter, TileVal
from tilelang.codegen.emit.sync import convert
from tilelang.ir.ops import BuiltinOp
from tilelang.targets import FEATURES
from tilelang.record import record


@record(frozen=True)
class TensorCorePlan:
    form: MmaForm
    b_class: str
    tiling: WarpTiling
    acc: Layout
    wg: WgTiling | None = None      # warp-group MMA (lower/tensorcore/wgmma_product.py); acc is then its
                                    # layout


def wgmma_ready(kern: KernelEmitter) -> bool:
    """The target has wgmma (sm_90a) and the block is whole warp groups (or a power of two
    of them and one more, the producer of a warp-specialized block: `specialized`)."""
    return kern.target.name in FEATURES["wgmma"].arch_targets and \
        kern.declared_threads % 128 == 0 and (kern.threads == kern.declared_threads
                                              or producer_block(kern))


def producer_block(kern: KernelEmitter) -> bool:
    """A block of 2^k warp groups and one more (384 threads: two consumer warp groups and a
    producer)."""
    return kern.exact and kern.threads >= 256 and kern.declared_threads == kern.threads + 128


def specialized(kern: KernelEmitter) -> bool:
    """Whether a pipelined TMA + wgmma loop emitted now is warp-specialized (wgmma_product,
    mma_prefetch): a producer block whose producer group has not exited yet (after its
    first specialized loop it has)."""
    return producer_block(kern) and not kern.barrier_threads


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


def _wg_plan(kern: KernelEmitter, form: MmaForm, a_shape, b_shape, out_shape
             ) -> WgTiling | None:
    if form.ab not in ("f16", "bf16", "e4m3", "e5m2") or form.acc != "f32" or \
            kern.target.name not in FEATURES["wgmma"].arch_targets:
        return None
    m, k = a_shape[-2], a_shape[-1]
    n = b_shape[-1]
    if k % wg_k(form):
        return None
    # each operand needs K or its M/N extent to be whole panels of 32 bytes or more (16-bit:
    # either axis may be contiguous, the instruction transposes; 8-bit: K only, an operand
    # stored along M/N is staged through registers into a K-major image)
    for mn in (m, n):
        if not (image_fits(k, form.itemsize) or
                (form.itemsize == 2 and image_fits(mn, form.itemsize))):
            return None
    if not wgmma_ready(kern):
        # the product fits wgmma but the block is not whole warp groups: the contract
        # says so (E0721) and mma.sync computes it
        if wg_tiling(tuple(out_shape), 128) is not None:
            kern.stats.wgmma_declined = True
        return None
    return wg_tiling(tuple(out_shape), kern.threads)


def tensor_core_plan(kern: KernelEmitter, op: BuiltinOp) -> TensorCorePlan | None:
    """How `op` (mma or matmul) runs on tensor cores, or None for the FMA path."""
    args = op.arg_map
    at, bt = (args[n].type for n in ("a", "b"))
    out = op.result.type
    sm = kern.target.sm
    if sm < 80 or kern.threads < 32 or kern.declared_threads % 32:
        # a block that is not whole warps: its replica threads past the layouts' would run
        # ldmatrix / mma.sync (.aligned, whole warps only) in a partial warp
        return None
    got = mma_form(at.dtype.name, bt.dtype.name, out.dtype.name, sm)
    if got is None:
        return None
    form, b_class = got
    if at.shape[-1] % form.k:
        return None
    tiling = warp_tiling(tuple(out.shape), kern.threads)
    if tiling is None:
        return None
    wg = _wg_plan(kern, form, at.shape, bt.shape, out.shape)
    if wg is not None:
        return TensorCorePlan(form, b_class, tiling,
                              wg_acc_layout(tuple(out.shape), kern.threads, wg), wg)
    return TensorCorePlan(form, b_class, tiling,
                          acc_layout(tuple(out.shape), kern.threads, tiling))


def to_layout(kern: KernelEmitter, t: TileVal, lay: Layout) -> TileVal:
    """`t` in `lay`: a splat of one constant is rebuilt for free, anything else converted."""
    if t.layout == lay:
        return t
    first = t.regs[0] if t.regs else None
    if isinstance(first, ir.Constant) and all(r is first or (isinstance(r, ir.Constant) and
                                                              str(r) == str(first))
                                              for r in t.regs):
        return TileVal(t.dtype, lay, (first,) * lay.num_regs)
    return convert(kern, t, lay)


def row_stat_layout(kern: KernelEmitter, ops, shape: tuple[int, ...]) -> Layout | None:
    """The layout in which a loop should carry a value of `shape` that a kept-dims reduction
    in `ops` computes from a tensor-core product's accumulator (attention's running max and
    sum): the reduction's own result layout, so neither the reduction's result nor the
    broadcast back onto the accumulator needs an exchange through shared memory."""
    plans = {}
    for o in ops:
        if isinstance(o, BuiltinOp) and o.name in ("mma", "matmul", "@"):
            p = tensor_core_plan(kern, o)
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
        return drop_axes(p.acc, (ax,), True)
    return None


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
