"""Block-scaled mma.sync on sm_120a (plan/scaled.py S1-S3; docs/codegen.md "Block-scaled
products"): `mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X
.f32.<a>.<b>.f32.ue8m0 d, a, b, c, scale-a, {0, 0}, scale-b, {0, 0}`.

The A and B fragments are the 8-bit float fragments of the ordinary m16n8k32 (ldmatrix from
the swizzled images of lower/tensorcore/mma_sync.py). Each instruction also takes one ue8m0
scale per row of its 16 x 32 A tile and per column of its 32 x 8 B tile, from registers: with
byte-id 0 and thread-id 0 (the immediates `{0, 0}`), row m's scale is the low byte of lane
4 (m mod 8) + m / 8 and column n's of lane 4 n (PTX ISA, "Warp-level matrix multiply with
block scaling"). So lane l loads row l / 4 + 8 (l mod 2) of a_scale and column l / 4 of
b_scale (the lanes the instruction does not read load a neighbour's, harmlessly), one byte
each from the scale tiles that the product first writes to shared memory row-major beside
its operand images; each is loaded once per k-step and m-tile (n-tile).

Packed FP4 (`f4e2m1x2`): `mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale
.scale_vec::{2X,4X}.f32.e2m1.e2m1.f32.{ue8m0,ue4m3}` on the same byte fragments (plan/scaled.py
S3), one instruction per 32 bytes (64 elements) of K, with two (MXFP4, one per 32) or four
(NVFP4, one per 16) scales per row and column in the bytes of one register, the scale of the
lower K first (byte-id 0). A row's are adjacent in the row-major a_scale tile, and b_scale
is written transposed (`transposed_b`) so that a column's are adjacent too: one 16- or 32-bit
load per m-tile (n-tile) and instruction.
"""

from __future__ import annotations

import llvmlite.ir as ir

from tilelang.codegen.emit.kernel import I32, KernelEmitter, TileVal
from tilelang.codegen.plan.scaled import ScaledForm

F32 = ir.FloatType()
# (left shift, mask) of four one-per-byte elements into 8-bit containers
_CONTAINER = {"e2m1": (2, 0x3C3C3C3C), "e2m3": (0, 0x3F3F3F3F), "e3m2": (0, 0x3F3F3F3F)}


def _c(v: int) -> ir.Constant:
    return ir.Constant(I32, v)


def store_rows(kern: KernelEmitter, t: TileVal, base: ir.Value,
               transposed: bool = False) -> None:
    """Write tile `t` (one byte per element) row-major, unpadded, at `base` (i8
    addrspace(3)*): each thread its owned registers. `transposed`: a 2-d tile's transpose
    (its columns contiguous)."""
    b = kern.builder
    lay = t.layout
    assert lay.is_one_hot(), "store_rows adds register offsets to the thread's base"
    if transposed:                      # one-hot bases: each is one bit of the index
        rows = lay.shape[0]
        lin = lambda c: c[1] * rows + c[0]                   # noqa: E731
    else:
        lin = lay.linear
    wbase = kern.thread_linear(tuple(lin(x) for x in lay.thread_bases))
    for r in lay.owned_regs():
        i = b.add(wbase, _c(lin(lay.reg_coord(r))))
        b.store(kern.to_storage(t.regs[r], t.dtype), b.gep(base, [i]))


def transposed_b(form: ScaledForm) -> bool:
    """Whether b_scale goes to shared memory transposed: when an instruction reads several
    scales of a column (FP4), so that they are adjacent bytes."""
    return form.scales_per_instr > 1


class BlockScaledMma:
    """The instructions of one block-scaled product: `call` issues one m16n8k32 of m-tile
    `mi`, n-tile `ni` at K offset `k0`, loading the scales it needs once."""

    def __init__(self, kern: KernelEmitter, form: ScaledForm, sa: ir.Value, sb: ir.Value,
                 k: int, n: int, warp_off: dict):
        b = kern.builder
        self.kern, self.form = kern, form
        self.sa, self.sb = sa, sb
        # k: bytes of K in the operand tiles; ka: scales per row of a_scale
        self.ka, self.n = k * form.per_byte // form.block, n
        lane = kern.lane()
        quad = b.lshr(lane, _c(2))
        row = b.add(quad, b.shl(b.and_(lane, _c(1)), _c(3)))
        self.a_base = b.mul(b.add(warp_off["m"], row), _c(self.ka))
        self.b_base = b.add(warp_off["n"], quad)
        self._a: dict = {}
        self._b: dict = {}
        text = (f"mma.sync.aligned.{form.shape}.row.col.kind::{form.kind}.block_scale"
                f".scale_vec::{form.scale_vec}.f32.{form.a}.{form.b}.f32.{form.scale} "
                "{$0, $1, $2, $3}, {$4, $5, $6, $7}, {$8, $9}, {$10, $11, $12, $13}, "
                "$14, {0, 0}, $15, {0, 0};")
        ret = ir.LiteralStructType([F32] * 4)
        fty = ir.FunctionType(ret, [I32] * 6 + [F32] * 4 + [I32] * 2)
        self.asm = ir.InlineAsm(fty, text, "=f,=f,=f,=f," + "r," * 6 + "f," * 4 + "r,r")

    def _byte(self, ptr: ir.Value, index: ir.Value) -> ir.Value:
        b = self.kern.builder
        return b.zext(b.load(b.gep(ptr, [index])), I32)

    def _bytes(self, ptr: ir.Value, index: ir.Value) -> ir.Value:
        """The instruction's scales_per_instr adjacent bytes at `index`, byte j in bits
        8j .. 8j + 7 (one aligned load: the row's scales start at a multiple of it)."""
        n = self.form.scales_per_instr
        if n == 1:
            return self._byte(ptr, index)
        b = self.kern.builder
        wide = ir.IntType(8 * n)
        p = b.bitcast(b.gep(ptr, [index]), wide.as_pointer(ptr.type.addrspace))
        v = b.load(p, align=n)
        return v if n == 4 else b.zext(v, I32)

    def _k_index(self, k0: int) -> int:
        """The scale column (a_scale) or row (b_scale) of the instruction at byte offset k0."""
        return k0 * self.form.per_byte // self.form.block

    def _scale_a(self, mi: int, k0: int) -> ir.Value:
        key = (mi, k0)
        if key not in self._a:
            off = mi * 16 * self.ka + self._k_index(k0)
            self._a[key] = self._bytes(self.sa, self.kern.builder.add(self.a_base, _c(off)))
        return self._a[key]

    def _scale_b(self, ni: int, k0: int) -> ir.Value:
        key = (ni, k0)
        if key not in self._b:
            b = self.kern.builder
            if transposed_b(self.form):     # b_scale's transpose: column n at n * ka
                row = b.mul(b.add(self.b_base, _c(ni * 8)), _c(self.ka))
                self._b[key] = self._bytes(self.sb, b.add(row, _c(self._k_index(k0))))
            else:
                off = self._k_index(k0) * self.n + ni * 8
                self._b[key] = self._byte(self.sb, b.add(self.b_base, _c(off)))
        return self._b[key]

    def _contain(self, regs: list, kind: str) -> list:
        """Fragment registers (four elements one per byte, Tile's image) in the instruction's
        8-bit containers: e2m1 in bits 2-5, the 6-bit types in bits 0-5 (PTX ISA, mma's
        kind::f8f6f4 operands; a stray high bit of a byte is cleared either way)."""
        shift, mask = _CONTAINER.get(kind, (0, None))
        if mask is None:
            return list(regs)
        b = self.kern.builder
        return [b.and_(b.shl(r, _c(shift)) if shift else r, _c(mask)) for r in regs]

    def call(self, afr: list, bfr: list, c: list, mi: int, ni: int, k0: int) -> ir.Value:
        sa, sb = self._scale_a(mi, k0), self._scale_b(ni, k0)
        if self.form.kind == "mxf8f6f4":   # packed FP4 (mxf4nvf4) is read as its bytes are
            afr, bfr = self._contain(afr, self.form.a), self._contain(bfr, self.form.b)
        return self.kern.builder.call(self.asm, [*afr, *bfr, *c, sa, sb])
