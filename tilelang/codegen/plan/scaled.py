"""Which block-scaled products (`mma_scaled`) run on a block-scaled tensor-core instruction
and which take the software path (ir/passes/scaled.py: dequantise to bf16, then the target's
ordinary product). docs/codegen.md "Block-scaled products".

Rules, in the order they are tried:
  S1 the target has a block-scaled tensor-core instruction in Tile: sm_120a's
     `mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X`, sm_100a's
     `tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale.scale_vec::1X`;
  S2 the elements are MX floats with ue8m0 scales, one per 32 along K: 8-bit (f8e4m3 /
     f8e5m2) on both instructions; on mma.sync also f6e2m3, f6e3m2 and f4e2m1, mixed or not,
     which Tile holds one per byte as the instruction's 8-bit containers do (e2m1 moved to
     bits 2-5 on the way: lower/tensorcore/mma_block_scale.py). tcgen05 reads 6- and 4-bit
     operands from shared memory packed 16 to a 16-byte unit with padding (PTX ISA, "Packing
     formats ... in Shared Memory"), not one per byte, so they take the software path there,
     as do NVFP4's f8e4m3 scales per 16;
  S3 mma.sync: an unbatched product, K a multiple of 32, a block of whole warps with an
     mma.sync warp tiling of the accumulator (what plan/tensor_cores.py's R1-R2 would accept);
  S4 tcgen05: an unbatched 128 x N accumulator, N a multiple of 32 up to 256 (the scales of
     32 rows fill one TMEM column), K a multiple of 32 up to 128 a product (the four bytes of
     a scale column: one per k32; a loop's products each take their K; a larger K would
     need a 128 x K operand tile of more than 128 elements a thread over the four warps'
     layouts, which sema refuses, E0783), and four warps for
     the accumulator's lane quarters (and a producer and an MMA warp after them: a
     warp-specialized ring, plan/loops.py R12).
"""

from __future__ import annotations

from tilelang.record import record
from tilelang.targets import FEATURES, Target


@record(frozen=True)
class ScaledForm:
    """A block-scaled tensor-core instruction for one product (PTX's names)."""

    instr: str          # mma.sync (sm_120a) or tcgen05 (sm_100a)
    kind: str           # mxf8f6f4
    shape: str          # m16n8k32
    scale_vec: str      # 1X: one scale per row of A / column of B per instruction
    a: str              # e4m3 / e5m2
    b: str
    scale: str          # ue8m0
    block: int          # elements per scale along K

    def describe(self) -> str:
        return (f"block-scaled {self.instr} kind::{self.kind} {self.shape} "
                f"scale_vec::{self.scale_vec} .{self.scale}")


@record(frozen=True)
class ScaledPath:
    """S1-S3's decision for one `mma_scaled`: the instruction, or None and why the software
    path (dequantisation to bf16) computes it."""

    form: ScaledForm | None
    why: str


_F8 = {"f8e4m3": "e4m3", "f8e5m2": "e5m2"}
_CONTAINED = {**_F8, "f6e2m3": "e2m3", "f6e3m2": "e3m2", "f4e2m1": "e2m1"}   # mma.sync (S2)


def scaled_path(target: Target, a, a_scale, b, out, threads: int) -> ScaledPath:
    """S1-S3 for a product of tile types `a` (M, K) x `b` (K, N) with scales `a_scale`,
    accumulated into `out`, in a block of `threads` threads."""
    from tilelang.codegen.layouts.mma import warp_tiling
    tc5 = target.name in FEATURES["tcgen05"].arch_targets
    if target.name not in FEATURES["mma_block_scale"].arch_targets and not tc5:
        return ScaledPath(None, f"software dequantisation: no block-scaled tensor-core "
                                f"instruction for {target.name} in Tile (S1)")
    names = _F8 if tc5 else _CONTAINED
    pa, pb = names.get(a.dtype.name), names.get(b.dtype.name)
    if pa is None or pb is None or a_scale.dtype.name != "ue8m0":
        return ScaledPath(None, f"software dequantisation: {a.dtype.name} x {b.dtype.name} "
                                f"with {a_scale.dtype.name} scales (S2)")
    if len(out.shape) != 2 or out.dtype.name != "f32" or a.shape[-1] % 32:
        return ScaledPath(None, "software dequantisation: a batched product or K not a "
                                "multiple of 32 (S3)")
    if tc5:
        m, n = out.shape
        # 128 threads: the four warps; 192: and the producer and MMA warps (the code
        # generator's layouts then span the first 128: plan/tensor_cores.tc5_ws_block)
        if m != 128 or n % 32 or n > 256 or a.shape[-1] > 128 or threads not in (128, 192):
            return ScaledPath(None, f"software dequantisation: tcgen05's block-scaled form "
                                    f"takes a 128 x 32..256 accumulator, K up to 128 and "
                                    f"four (or six) warps, not {m} x {n}, K = {a.shape[-1]}, "
                                    f"{threads} threads (S4)")
        return ScaledPath(ScaledForm("tcgen05", "mxf8f6f4", f"m128n{n}k32", "1X", pa, pb,
                                     "ue8m0", 32), "")
    if threads < 32 or threads % 32 or warp_tiling(tuple(out.shape), threads) is None:
        return ScaledPath(None, f"software dequantisation: no warp tiling of the "
                                f"accumulator for {threads} threads (S3)")
    return ScaledPath(ScaledForm("mma.sync", "mxf8f6f4", "m16n8k32", "1X", pa, pb, "ue8m0",
                                 32), "")
