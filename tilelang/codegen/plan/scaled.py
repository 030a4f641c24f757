"""Which block-scaled products (`mma_scaled`) run on a block-scaled tensor-core instruction
and which take the software path (ir/passes/scaled.py: dequantise to bf16, then the target's
ordinary product). docs/codegen.md "Block-scaled products".

Rules, in the order they are tried:
  S1 the target has a block-scaled tensor-core instruction in Tile: sm_120a's
     `mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X`, sm_100a's
     `tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale.scale_vec::1X`;
  S2 the elements are MX floats with ue8m0 scales, one per 32 along K: 8-bit (f8e4m3 /
     f8e5m2) on both instructions (`kind::mxf8f6f4`); on mma.sync also f6e2m3, f6e3m2 and
     f4e2m1, mixed or not, which Tile holds one per byte as the instruction's 8-bit
     containers do (e2m1 moved to bits 2-5 on the way: lower/tensorcore/mma_block_scale.py).
     tcgen05 reads 6- and 4-bit operands of kind::mxf8f6f4 from shared memory packed 16 to a
     16-byte unit with padding (PTX ISA, "Packing formats ... in Shared Memory"), not one per
     byte, so those take the software path there. Or packed FP4 (f4e2m1x2, two a byte along
     K) with ue8m0 scales per 32 (MXFP4) or f8e4m3 scales per 16 (NVFP4): sm_120a's
     `m16n8k64.kind::mxf4nvf4` `scale_vec::2X` (.ue8m0) / `scale_vec::4X` (.ue4m3);
  S3 mma.sync: an unbatched product, K a multiple of 32 bytes (32 f8, 64 FP4 elements), a
     block of whole warps with an mma.sync warp tiling of the accumulator (what
     plan/tensor_cores.py's R1-R2 would accept). A packed FP4 operand's fragments are the
     8-bit ones of its bytes: register r of m16n8k64's e2m1 A holds the eight nibbles of
     bytes 4t .. 4t + 3 (+ 16 for r >= 2) of row g (+ 8 for odd r), exactly m16n8k32's e4m3
     A fragment of the byte image; B likewise (docs/codegen.md "Block-scaled products");
  S4 tcgen05: an unbatched 128 x N accumulator, N a multiple of 32 up to 256 (the scales of
     32 rows fill one TMEM column), K a multiple of 32 up to 128 a product (the four bytes of
     a scale column: one per k32; a loop's products each take their K; a larger K would
     need a 128 x K operand tile of more than 128 elements a thread over the four warps'
     layouts, which sema refuses, E0783), and four warps for the accumulator's lane quarters
     (and a producer and an MMA warp after them: a warp-specialized ring, plan/loops.py
     R12). Packed FP4 takes `kind::mxf4` (MXFP4, `scale_vec::2X`) or `kind::mxf4nvf4`
     `scale_vec::4X` (NVFP4, ue4m3) with the same operand images (K-major bytes, 32 a row
     per instruction) while a row's scales fit one cell: K up to 128 elements (MXFP4) or 64
     (NVFP4), N up to 128 and exactly four warps (no ring of its own yet).
"""

from __future__ import annotations

from tilelang.record import record
from tilelang.targets import FEATURES, Target


@record(frozen=True)
class ScaledForm:
    """A block-scaled tensor-core instruction for one product (PTX's names)."""

    instr: str          # mma.sync (sm_120a) or tcgen05 (sm_100a)
    kind: str           # mxf8f6f4, or mxf4nvf4 (packed FP4)
    shape: str          # m16n8k32 (m16n8k64 for FP4)
    scale_vec: str      # 1X / 2X / 4X: scales per row of A / column of B per instruction
    a: str              # e4m3 / e5m2 / e2m1
    b: str
    scale: str          # ue8m0 / ue4m3 (NVFP4's f8e4m3 scales)
    block: int          # elements per scale along K

    @property
    def per_byte(self) -> int:
        """Elements per operand byte: 2 for packed FP4 (kind::mxf4 / mxf4nvf4; an e2m1 of
        kind::mxf8f6f4 sits one per byte in an 8-bit container)."""
        return 2 if self.kind in ("mxf4", "mxf4nvf4") else 1

    @property
    def scales_per_instr(self) -> int:
        """Scale bytes per row of A (column of B) each instruction reads."""
        return {"1X": 1, "2X": 2, "4X": 4}[self.scale_vec]

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
    fp4 = a.dtype.name == b.dtype.name == "f4e2m1x2"
    names = _F8 if tc5 else _CONTAINED
    pa, pb = ("e2m1", "e2m1") if fp4 else (names.get(a.dtype.name), names.get(b.dtype.name))
    if pa is None or pb is None or (a_scale.dtype.name != "ue8m0" and not fp4):
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
        if fp4:
            if n > 128 or threads != 128:
                return ScaledPath(None, f"software dequantisation: tcgen05's FP4 forms take a "
                                        f"128 x 32..128 accumulator and four warps in Tile, "
                                        f"not 128 x {n}, {threads} threads (S4)")
            return _tc5_fp4(a, a_scale, n)
        return ScaledPath(ScaledForm("tcgen05", "mxf8f6f4", f"m128n{n}k32", "1X", pa, pb,
                                     "ue8m0", 32), "")
    if threads < 32 or threads % 32 or warp_tiling(tuple(out.shape), threads) is None:
        return ScaledPath(None, f"software dequantisation: no warp tiling of the "
                                f"accumulator for {threads} threads (S3)")
    if fp4:
        nv = a_scale.dtype.name == "f8e4m3"
        return ScaledPath(ScaledForm("mma.sync", "mxf4nvf4", "m16n8k64", "4X" if nv else "2X",
                                     "e2m1", "e2m1", "ue4m3" if nv else "ue8m0",
                                     16 if nv else 32), "")
    return ScaledPath(ScaledForm("mma.sync", "mxf8f6f4", "m16n8k32", "1X", pa, pb, "ue8m0",
                                 32), "")


def _tc5_fp4(a, a_scale, n: int) -> ScaledPath:
    """S4 for packed FP4: `kind::mxf4` (MXFP4: two ue8m0 scales a row per instruction) or
    `kind::mxf4nvf4` `scale_vec::4X` (NVFP4: four ue4m3), 64 elements (32 bytes) of K per
    instruction; every scale of a row fits one 32-bit TMEM cell (K / V <= 4: K up to 128
    elements for MXFP4, 64 for NVFP4)."""
    nv = a_scale.dtype.name == "f8e4m3"
    v = 16 if nv else 32
    k = 2 * a.shape[-1]
    if k // v > 4:
        return ScaledPath(None, f"software dequantisation: tcgen05's FP4 forms take the "
                                f"scales of a row in one TMEM cell (K up to {4 * v}), not "
                                f"K = {k} (S4)")
    return ScaledPath(ScaledForm("tcgen05", "mxf4nvf4" if nv else "mxf4", f"m128n{n}k64",
                                 "4X" if nv else "2X", "e2m1", "e2m1",
                                 "ue4m3" if nv else "ue8m0", v), "")
