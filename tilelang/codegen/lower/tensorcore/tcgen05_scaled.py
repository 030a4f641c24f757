"""Block-scaled tcgen05 products on sm_100a (plan/scaled.py S4; docs/codegen.md
"Block-scaled products"): `tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale
.scale_vec::1X [d], a-desc, b-desc, idesc, [scale-a], [scale-b], enable-input-d`, one per
k-step of 32, with the ue8m0 scales in tensor memory beside the accumulator; packed FP4
takes `kind::mxf4 ... scale_vec::2X` (MXFP4) or `kind::mxf4nvf4 ... scale_vec::4X` (NVFP4,
ue4m3) on the same byte images, one per 32 bytes (64 elements) of K, the scales of a row
in the bytes of one cell in K order.

Scales in TMEM (the reading Triton 3.9's sm_100a `tl.dot_scaled` kernels confirm on the
emulator, tests/emulator/test_emu_triton_blackwell.py): row r of A (column n of B) has its
scales in lane r mod 32 of column c + r / 32 from the scale address, one byte per k32 (the
byte the instruction descriptor's scale-byte fields select: k-step j reads byte j). Triton
copies them there with `tcgen05.cp.32x128b.warpx4`, which writes the same 32 lanes into each
lane quarter; here each warp writes that image into its own quarter with `tcgen05.st
.32x32b` from registers (a warp reaches only its quarter), so every quarter holds it too.
The scale tiles come to shared memory row-major first (mma_block_scale.store_rows) and lane
l gathers its words from there: A's word c holds a_scale[32 c + l, 0 .. K / 32 - 1], B's
b_scale[0 .. K / 32 - 1, 32 c + l].
"""

from __future__ import annotations

from math import prod

import llvmlite.ir as ir

from tilelang.codegen.emit.kernel import I32, KernelEmitter, TileVal
from tilelang.codegen.lower.tensorcore import tcgen05_tmem as tmem
from tilelang.codegen.lower.tensorcore.mma_plan import TensorCorePlan

I8 = ir.IntType(8)
_TYPE = {"e4m3": 0, "e5m2": 1, "e2m1": 1}     # e2m1: of kind::mxf4 / mxf4nvf4


def _c(v: int) -> ir.Constant:
    return ir.Constant(I32, v)


def place(kern: KernelEmitter, scales: tuple[TileVal, TileVal], offset: int) -> tuple:
    """Shared-memory regions for the two scale tiles from byte `offset` of the scratch
    buffer: (their i8 pointers, the bytes used)."""
    bases, used = [], 0
    for t in scales:
        bases.append(kern.smem(prod(t.shape), I8, offset + used))
        used += -(-prod(t.shape) // 16) * 16
    return bases, used


def columns(plan: TensorCorePlan) -> tuple[int, int]:
    """The TMEM columns of A's scales and of B's, after the accumulator's."""
    n = plan.tc5.n
    return n, n + 4


def write(kern: KernelEmitter, plan: TensorCorePlan, scales, bases, quarter: ir.Value) -> None:
    """Each warp's copy of the scale image into its lane quarter at TMEM address `quarter`
    (the tiles are in shared memory at `bases`; a barrier after their stores is the
    caller's). Ends with tcgen05.wait::st."""
    b = kern.builder
    lane = kern.lane()
    ks = scales[0].shape[-1]                           # K / 32 scales a row
    n = plan.tc5.n
    col_a, col_b = columns(plan)
    for base, col, rows, row_stride, k_stride in (
            (bases[0], col_a, 128, ks, 1), (bases[1], col_b, n, 1, n)):
        words = []
        for c in range(rows // 32):
            row = b.add(lane, _c(32 * c))
            first = b.mul(row, _c(row_stride))
            w = _c(0)
            for j in range(ks):
                byte = b.load(b.gep(base, [b.add(first, _c(j * k_stride))]))
                w = b.or_(w, b.shl(b.zext(byte, I32), _c(8 * j))) if j else b.zext(byte, I32)
            words.append(w)
        names = ", ".join(f"${i + 1}" for i in range(len(words)))
        tmem.void(kern, f"tcgen05.st.sync.aligned.32x32b.x{len(words)}.b32 [$0], "
                        f"{{{names}}};", [b.add(quarter, _c(col))] + words,
                  ",".join(["r"] * (len(words) + 1)))
    tmem.void(kern, "tcgen05.wait::st.sync.aligned;")


def instr_descriptor(plan: TensorCorePlan, k_step: int, a_mn: bool = False,
                     b_mn: bool = False) -> int:
    """The kind::mxf8f6f4 instruction descriptor (PTX ISA, tcgen05 "Instruction descriptor"):
    B's scale byte (bits 4-5), A and B types (7-9, 10-12: e4m3 0, e5m2 1), A / B MN-major
    (15, 16: a ring's TMA image of a row-major B), N >> 3 (17-22), ue8m0 scales (23), M >> 4
    (24-28), A's scale byte (29-30); k-step j reads byte j of each scale word. Packed FP4
    (`kind::mxf4`, `kind::mxf4nvf4`, K-major only): e2m1 is type 1, bit 23 is clear for
    ue4m3 scales, and k-step j's first scale byte is j times the scales an instruction reads
    (2X: bytes 2j, 2j + 1; 4X: all four, j = 0)."""
    f, t = plan.scaled, plan.tc5
    sf = k_step * f.scales_per_instr
    return sf << 4 | _TYPE[f.a] << 7 | _TYPE[f.b] << 10 | int(a_mn) << 15 | \
        int(b_mn) << 16 | (t.n >> 3) << 17 | (f.scale == "ue8m0") << 23 | (t.m >> 4) << 24 | \
        sf << 29


def issue(kern: KernelEmitter, plan: TensorCorePlan, da, db, taddr: ir.Value,
          image: ir.Value, *, b_offset: int, k: int, scale_cols=None) -> None:
    """The issuing thread's block-scaled tcgen05.mma per k-step of 32 (the caller commits
    them; lower/tensorcore/tcgen05_product.issue_mmas is the unscaled twin). `scale_cols`:
    the TMEM addresses of A's and B's scales (a ring's stage: tcgen05_scaled_ring.py), else
    `columns`'."""
    bld = kern.builder
    f = plan.scaled
    if f.kind != "mxf8f6f4":                # the FP4 kinds need PTX ISA 8.7
        kern.stats.features.add("tcgen05_mxf4")
    if scale_cols is None:
        col_a, col_b = columns(plan)
        sa, sb = bld.add(taddr, _c(col_a)), bld.add(taddr, _c(col_b))
    else:
        sa, sb = scale_cols
    starts = (da.base(kern, image), db.base(kern, bld.add(image, _c(b_offset))))
    for j, k0 in enumerate(range(0, k, plan.tc5.k)):
        pa = da.at(kern, starts[0], da.offset(0, 0, k0) >> 4)
        pb = db.at(kern, starts[1], db.offset(0, 0, k0) >> 4)
        tmem.void(kern, "{ .reg .pred p; setp.ne.b32 p, 1, 0; "
                        f"tcgen05.mma.cta_group::1.kind::{f.kind}.block_scale"
                        f".scale_vec::{f.scale_vec} [$0], $1, $2, $3, [$4], [$5], p; }}",
                  [taddr, pa, pb, _c(instr_descriptor(plan, j, da.trans, db.trans)), sa, sb],
                  "r,l,l,r,r,r")
