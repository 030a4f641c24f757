"""Matrix products on tensor cores: operands in swizzled shared memory, `ldmatrix` fragments,
`mma.sync.aligned.m16n8kK` into an accumulator held in the fragment layout (layouts/mma.py).

Shared memory. An operand tile is stored as rows of its *contiguous* axis (the one its
16-byte vectors run along: K, or for 16-bit types possibly M/N), batch-major. Each row is a
run of 16-byte chunks; chunk c of row r sits at chunk position c ^ f(r) with
f(r) = (r / per) mod S, S = min(chunks per row, 8), per = max(8 / chunks per row, 1): the 8 rows
one `ldmatrix` reads (and the 8 chunks a quarter-warp stores) land in 8 different 16-byte bank
groups, so neither side has bank conflicts.

Fragments. One `ldmatrix.x4` loads four 8 x 16-byte matrices; lane l gives the address of row
l % 8 of matrix l / 8. For A (m16 x kK) the matrices are (m+0, k chunk 0), (m+8, 0), (m+0, 1),
(m+8, 1), which is the order of a0..a7 of the instruction; for B (kK x n16, two n8 tiles) they
are (n+0, 0), (n+0, 1), (n+8, 0), (n+8, 1): b0b1, b2b3 of n-tile 0, then of n-tile 1. When
the contiguous axis is not K (a 16-bit operand stored along M or N), the rows are K rows and
`.trans` hands each thread the K-consecutive pair the instruction wants.
"""

from __future__ import annotations

import llvmlite.ir as ir

from tilelang.codegen.layouts.distributed import Layout, log2, vector_width
from tilelang.codegen.layouts.mma import MT, NT, MmaForm, WarpTiling, acc_register
from tilelang.codegen.emit.kernel import I32, KernelEmitter, TileVal
from tilelang.codegen.lower.memory import gated
from tilelang.record import record

I8 = ir.IntType(8)
HALF2 = ir.VectorType(ir.HalfType(), 2)


@record(frozen=True)
class SmemOperand:
    """An operand tile in shared memory (see the module docstring)."""

    base: ir.Value          # i8 addrspace(3)*
    shape: tuple[int, ...]  # the tile's shape ((X, Y) or (B, X, Y))
    cax: int                # the contiguous tile axis (rank-1 or rank-2)
    itemsize: int
    span: int = 0           # wgmma's panel image of `span`-byte swizzled rows (32, 64, 128;
                            # layouts/shared.wgmma_image); 0: the ldmatrix image above

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def row_elems(self) -> int:
        return self.shape[self.cax]

    @property
    def row_bytes(self) -> int:
        return self.row_elems * self.itemsize

    @property
    def rows_per_batch(self) -> int:
        other = self.rank - 1 if self.cax == self.rank - 2 else self.rank - 2
        return self.shape[other]

    @property
    def chunks(self) -> int:
        return self.row_bytes // 16

    @property
    def wg(self) -> bool:
        return self.span > 0

    @property
    def pitch(self) -> int:
        """Bytes from one image row to the next (a panel row for wgmma images)."""
        return self.span if self.wg else self.row_bytes

    @property
    def panel_bytes(self) -> int:
        """Bytes of one panel (every row, `span` bytes wide) of a wgmma image."""
        batch = self.shape[0] if self.rank == 3 else 1
        return batch * self.rows_per_batch * self.span

    def swizzle_bits(self) -> tuple[int, int]:
        """(log2 per, S - 1): f(r) = (r >> log2 per) & (S - 1)."""
        if self.wg:         # address bits 4.. XOR bits 7..: rows of `span` bytes
            return log2(128 // self.span), self.span // 16 - 1
        s = min(self.chunks, 8)
        per = max(8 // self.chunks, 1)
        return log2(per), s - 1

    def offset(self, b: ir.IRBuilder, row: ir.Value, chunk: ir.Value) -> ir.Value:
        """Byte offset (i32) of chunk `chunk` of row `row` (i32) in the image."""
        sh, mask = self.swizzle_bits()
        f = b.and_(b.lshr(row, _c(sh)), _c(mask)) if mask else _c(0)
        if not self.wg:
            return b.add(b.mul(row, _c(self.row_bytes)), b.shl(b.xor(chunk, f), _c(4)))
        per = self.span // 16
        panel = b.mul(b.lshr(chunk, _c(log2(per))), _c(self.panel_bytes))
        within = b.shl(b.xor(b.and_(chunk, _c(per - 1)), f), _c(4))
        return b.add(b.add(panel, b.mul(row, _c(self.span))), within)

    def const_offset(self, rows: int, chunks: int) -> int:
        """What moving `rows` rows (a multiple of 8) and `chunks` chunks (a multiple of 8)
        adds to any offset: both commute with the swizzle."""
        assert rows % 8 == 0 and chunks % 8 == 0
        if self.wg:
            return rows * self.span + (chunks // (self.span // 16)) * self.panel_bytes
        return rows * self.pitch + (chunks // 8) * 128


def _c(v: int) -> ir.Constant:
    return ir.Constant(I32, v)


def smem_address(kern: KernelEmitter, op: SmemOperand, row: ir.Value, chunk: ir.Value,
                 byte_in_chunk: int | ir.Value = 0) -> ir.Value:
    """i8 addrspace(3)* of byte `byte_in_chunk` of chunk `chunk` of row `row` (all i32)."""
    b = kern.builder
    off = op.offset(b, row, chunk)
    if not (isinstance(byte_in_chunk, int) and byte_in_chunk == 0):
        off = b.add(off, byte_in_chunk if isinstance(byte_in_chunk, ir.Value)
                    else _c(byte_in_chunk))
    return b.gep(op.base, [off])


def element_row_col(op: SmemOperand, coord: list[ir.Value], kern: KernelEmitter
                    ) -> tuple[ir.Value, ir.Value]:
    """(row, column) in the smem image of a tile coordinate (i32 per axis)."""
    b = kern.builder
    r = op.rank
    other = r - 1 if op.cax == r - 2 else r - 2
    row = coord[other]
    if r == 3:
        row = b.add(b.mul(coord[0], _c(op.rows_per_batch)), row)
    return row, coord[op.cax]


def choose_cax(t: TileVal, k_axis: int, sixteen_bit: bool) -> int:
    """The contiguous axis for staging register tile `t`: K unless a 16-bit tile is held in
    longer vectors along its other matrix axis (then `.trans` fragments read it)."""
    r = t.layout.rank
    other = r - 1 if k_axis == r - 2 else r - 2
    if sixteen_bit and vector_width(t.layout, other) > vector_width(t.layout, k_axis):
        return other
    return k_axis


def fill_from_registers(kern: KernelEmitter, t: TileVal, op: SmemOperand,
                        storage: ir.Type) -> None:
    """Store a register tile into its smem image (16-byte vector stores where the layout
    holds whole chunks, else element stores) by the threads that own the elements (copies
    held by other warps too would race). The caller brackets it with barriers."""
    gated(kern, kern.owner(t.layout), lambda: _fill(kern, t, op, storage))


def _fill(kern: KernelEmitter, t: TileVal, op: SmemOperand, storage: ir.Type) -> None:
    b = kern.builder
    lay = t.layout
    e = 16 // op.itemsize
    vw = vector_width(lay, op.cax)
    tc = [kern.thread_coord(lay, d) for d in range(lay.rank)]
    owned = lay.owned_regs()
    if vw >= e:
        vty = ir.VectorType(storage, e)
        for g in range(0, lay.num_regs, e):
            if g not in owned:
                continue
            rc = lay.reg_coord(g)
            coord = [b.add(tc[d], _c(rc[d])) if rc[d] else tc[d] for d in range(lay.rank)]
            row, col = element_row_col(op, coord, kern)
            chunk = b.lshr(col, _c(log2(e)))
            vec = ir.Constant(vty, ir.Undefined)
            for k in range(e):
                vec = b.insert_element(vec, _bits(kern, t.regs[g + k], storage), _c(k))
            ptr = smem_address(kern, op, row, chunk)
            b.store(vec, b.bitcast(ptr, ir.PointerType(vty, addrspace=3)), align=16)
        return
    for g in owned:
        rc = lay.reg_coord(g)
        coord = [b.add(tc[d], _c(rc[d])) if rc[d] else tc[d] for d in range(lay.rank)]
        row, col = element_row_col(op, coord, kern)
        chunk = b.lshr(col, _c(log2(e)))
        within = b.mul(b.and_(col, _c(e - 1)), _c(op.itemsize))
        ptr = smem_address(kern, op, row, chunk, within)
        b.store(_bits(kern, t.regs[g], storage),
                b.bitcast(ptr, ir.PointerType(storage, addrspace=3)), align=op.itemsize)


def _bits(kern: KernelEmitter, v: ir.Value, storage: ir.Type) -> ir.Value:
    return v if v.type == storage else kern.builder.bitcast(v, storage)


# ---------------------------------------------------------------------------------------------
# Fragments and the instruction

class FragmentLoader:
    """The ldmatrix fragments of one operand. Addresses are 32-bit shared-window offsets: a
    per-lane part computed once (one register per distinct low swizzle term, at most four),
    plus the stage's base, plus a compile-time offset written into the instruction; so the
    main loop keeps a handful of address registers instead of one per fragment."""

    def __init__(self, kern: KernelEmitter, op: SmemOperand, is_a: bool, warp_off: dict,
                 warp_chunks_aligned: bool):
        """`warp_chunks_aligned`: every warp's offset along the non-K axis is a multiple of 8
        chunks (or 0), so it commutes with the swizzle."""
        b = kern.builder
        self.kern, self.op, self.is_a = kern, op, is_a
        self.k_axis = op.rank - 1 if is_a else op.rank - 2
        self.trans = op.cax != self.k_axis
        lane = kern.lane()
        j = b.and_(lane, _c(7))
        bit3 = b.and_(b.lshr(lane, _c(3)), _c(1))
        bit4 = b.and_(b.lshr(lane, _c(4)), _c(1))
        # (which lane bit selects +8 along the non-K axis, which selects the second K chunk)
        nk_bit, kc_bit = (bit3, bit4) if is_a else (bit4, bit3)
        e = 16 // op.itemsize
        self.e = e
        nk_off = warp_off["m" if is_a else "n"]          # runtime, multiple of 16
        batch_off = warp_off["b"]
        if not self.trans:
            # rows along M/N: row = nk + j + 8*nk_bit; chunk = k0/E + kc_bit
            row_lane = b.add(j, b.shl(nk_bit, _c(3)))
            chunk_lane = kc_bit
        else:
            # rows along K: row = k0 + 8*kc_bit + j; chunk = nk/E + nk_bit
            row_lane = b.add(j, b.shl(kc_bit, _c(3)))
            chunk_lane = nk_bit
        sh, mask = op.swizzle_bits()
        # every other row term is a multiple of 8, so the swizzle depends on j only
        self.f = b.and_(b.lshr(j, _c(sh)), _c(mask)) if mask else _c(0)
        self.chunk_lane = chunk_lane
        rows = row_lane
        if op.rank == 3:
            rows = b.add(rows, b.mul(batch_off, _c(op.rows_per_batch)))
        self.chunk_rt = None
        if not self.trans:
            rows = b.add(rows, nk_off)
        else:
            self.chunk_rt = b.lshr(nk_off, _c(log2(e)))   # the warp's first chunk
        # a panel image (span > 0, TMA's swizzled boxes: SmemOperand.offset) holds `per`
        # chunks of a row per panel, the panels one after another; the ldmatrix image is one
        # panel of 8-chunk groups 128 bytes apart, so both read the same way below
        self.per = op.span // 16 if op.wg else 8
        self.unit = op.panel_bytes if op.wg else 128
        self.row_base = b.mul(rows, _c(op.pitch))
        self.wide = self.chunk_rt is None or warp_chunks_aligned
        if self.chunk_rt is not None and self.wide:
            self.row_base = b.add(self.row_base, self._chunk_bytes(self.chunk_rt))
        self.lane_xor = b.xor(chunk_lane, self.f)
        self._lo: dict[int, ir.Value] = {}

    def _chunk_bytes(self, chunk: ir.Value) -> ir.Value:
        """Bytes from a row's start to chunk `chunk` (a multiple of `per` here, so the
        swizzle leaves it alone)."""
        b = self.kern.builder
        if not self.op.wg:
            return b.shl(chunk, _c(4))
        return b.mul(b.lshr(chunk, _c(log2(self.per))), _c(self.unit))

    def lane_part(self, lo: int) -> ir.Value:
        """row_base + ((lane_xor ^ lo) << 4): invariant, one per distinct lo."""
        got = self._lo.get(lo)
        if got is None:
            b = self.kern.builder
            x = b.xor(self.lane_xor, _c(lo)) if lo else self.lane_xor
            got = b.add(self.row_base, b.shl(x, _c(4)))
            self._lo[lo] = got
        return got

    def load(self, base: ir.Value, bi: int, nk0: int, k0: int) -> list[ir.Value]:
        """Four i32 registers: the x4 fragment at non-K offset nk0 (within the warp tile),
        K offset k0, batch bi (within the warp), from the operand image at 32-bit shared
        address `base`."""
        kern, op, b = self.kern, self.op, self.kern.builder
        if not self.trans:
            row_c = nk0 + bi * op.rows_per_batch
            chunk_c = k0 // self.e
        else:
            row_c = k0 + bi * op.rows_per_batch
            chunk_c = nk0 // self.e
        per = self.per
        if self.wide:
            addr = b.add(base, self.lane_part(chunk_c & (per - 1)))
            const = row_c * op.pitch + (chunk_c // per) * self.unit
        else:
            chunk = b.add(b.add(self.chunk_rt, self.chunk_lane), _c(chunk_c))
            if op.wg:
                within = b.and_(chunk, _c(per - 1))
                off = b.add(self._chunk_bytes(b.sub(chunk, within)),
                            b.shl(b.xor(within, self.f), _c(4)))
            else:
                off = b.shl(b.xor(chunk, self.f), _c(4))
            addr = b.add(base, b.add(self.row_base, off))
            const = row_c * op.pitch
        return ldmatrix_x4(kern, addr, const, self.trans)


def ldmatrix_x4(kern: KernelEmitter, addr: ir.Value, offset: int, trans: bool
                ) -> list[ir.Value]:
    """`ldmatrix.sync.aligned.m8n8.x4[.trans].shared.b16` at 32-bit shared address
    addr + offset (the offset is an immediate of the instruction)."""
    b = kern.builder
    ret = ir.LiteralStructType([I32] * 4)
    text = ("ldmatrix.sync.aligned.m8n8.x4" + (".trans" if trans else "") +
            f".shared.b16 {{$0, $1, $2, $3}}, [$4+{offset}];")
    asm = ir.InlineAsm(ir.FunctionType(ret, [I32]), text, "=r,=r,=r,=r,r", side_effect=True)
    r = b.call(asm, [addr])
    return [b.extract_value(r, i) for i in range(4)]


def shared_address(kern: KernelEmitter, ptr: ir.Value) -> ir.Value:
    """A shared-memory pointer as the 32-bit shared-window address PTX instructions take."""
    b = kern.builder
    return b.trunc(b.ptrtoint(ptr, ir.IntType(64)), I32)


def mma_intrinsic(form: MmaForm, b_class: str) -> tuple[str, ir.Type, ir.Type]:
    """(intrinsic name, operand register type, accumulator register type)."""
    k = f"m16n8k{form.k}"
    if form.ab == "f16":
        if form.acc == "f16":
            return f"llvm.nvvm.mma.{k}.row.col.f16.f16", HALF2, HALF2
        return f"llvm.nvvm.mma.{k}.row.col.f32.f32", HALF2, ir.FloatType()
    if form.ab in ("bf16", "tf32"):
        return f"llvm.nvvm.mma.{k}.row.col.{form.ab}", I32, ir.FloatType()
    if form.ab in ("s8", "u8"):
        name = form.ab if b_class == form.ab else f"{form.ab}.{b_class}"
        return f"llvm.nvvm.mma.{k}.row.col.{name}", I32, I32
    return f"llvm.nvvm.mma.{k}.row.col.f32.{form.ab}.{b_class}.f32", I32, ir.FloatType()


def warp_offsets(kern: KernelEmitter, acc: Layout) -> dict:
    """This warp's (batch, row, column) offset in the accumulator (i32, from warp bits)."""
    rank = acc.rank
    nl = len(acc.lane)
    out = {}
    for key, axis in (("b", 0), ("m", rank - 2), ("n", rank - 1)):
        if key == "b" and rank == 2:
            out[key] = _c(0)
            continue
        w = (0,) * nl + tuple(basis[axis] for basis in acc.warp)
        out[key] = kern.thread_linear(w)
    return out


def product(kern: KernelEmitter, form: MmaForm, b_class: str, tiling: WarpTiling,
            sa: SmemOperand, sb: SmemOperand, acc: TileVal, k: int, *, scaled=None
            ) -> list[ir.Value]:
    """acc + A @ B over K = k from the two smem operands; `acc` is in the accumulator layout
    with registers in the accumulator's compute type. Returns the new registers. `scaled`:
    a callable taking this warp's offsets to the block-scaled instructions
    (lower/tensorcore/mma_block_scale.py) that replace the plain ones."""
    loaders = fragment_loaders(kern, tiling, sa, sb, acc.layout)
    if scaled is not None:
        scaled = scaled(warp_offsets(kern, acc.layout))
    return product_from(kern, form, b_class, tiling, loaders,
                        (shared_address(kern, sa.base), shared_address(kern, sb.base)), acc.regs, k,
                        scaled=scaled)


def fragment_loaders(kern: KernelEmitter, tiling: WarpTiling, sa: SmemOperand,
                     sb: SmemOperand, acc: Layout) -> tuple[FragmentLoader, FragmentLoader]:
    """The per-lane address parts of both operands (emit before the main loop)."""
    offs = warp_offsets(kern, acc)
    e = 16 // sa.itemsize
    la = FragmentLoader(kern, sa, True, offs, tiling.warps_m == 1 or (tiling.wm // e) % 8 == 0)
    lb = FragmentLoader(kern, sb, False, offs, tiling.warps_n == 1 or (tiling.wn // e) % 8 == 0)
    return la, lb


def product_from(kern: KernelEmitter, form: MmaForm, b_class: str, tiling: WarpTiling,
                 loaders, bases, acc_regs, k: int, *, scaled=None) -> list[ir.Value]:
    """acc + A @ B with fragments read through `loaders` from the operand images at 32-bit
    shared addresses `bases`. Returns the new accumulator registers. `scaled`: the
    block-scaled instructions (mma_block_scale.BlockScaledMma) that replace the plain ones."""
    b = kern.builder
    name, opty, accty = mma_intrinsic(form, b_class)
    la, lb = loaders
    regs = list(acc_regs)
    t = tiling
    half_acc = form.acc == "f16"
    ret = ir.LiteralStructType([accty] * (2 if half_acc else 4))
    fn = scaled.call if scaled is not None else \
        kern.se.declare(name, ret, [opty] * 6 + [accty] * (2 if half_acc else 4))

    def cast_op(v):
        return b.bitcast(v, opty) if opty != I32 else v

    # every m-tile's A fragments are held across the n-tiles, so each fragment of A and B is
    # read once per k-step (a 64 x 64 warp tile: 16 registers of A, 4 of B at a time)
    group = t.m_tiles
    step = _KStep(b, fn, t, la, lb, bases, regs, cast_op, half_acc, scaled is not None)
    for bi in range(t.batch_per_warp):
        for k0 in range(0, k, form.k):
            for mg in range(0, t.m_tiles, group):
                _k_step(step, bi, k0, range(mg, min(mg + group, t.m_tiles)))
    return regs


@record
class _KStep:
    """What every k-step of one product shares: the builder, the intrinsic, the tiling, the
    fragment loaders and their image addresses, the accumulator registers (updated in place)
    and how operands and a half-precision accumulator are packed."""

    b: ir.IRBuilder
    fn: object
    t: WarpTiling
    la: object
    lb: object
    bases: tuple
    regs: list
    cast_op: object
    half_acc: bool
    scaled: bool = False        # fn is BlockScaledMma.call (takes the tile's position too)


def _k_step(step: _KStep, bi: int, k0: int, mis) -> None:
    """One k-step of the m-tiles `mis` against every n-tile (regs updated in place)."""
    b, fn, t, la, lb, bases = step.b, step.fn, step.t, step.la, step.lb, step.bases
    regs, cast_op, half_acc = step.regs, step.cast_op, step.half_acc
    afr = {mi: [cast_op(v) for v in la.load(bases[0], bi, mi * MT, k0)] for mi in mis}
    for pair in range(t.n_tiles // 2):
        bfr = [cast_op(v) for v in lb.load(bases[1], bi, pair * 2 * NT, k0)]
        for mi in mis:
            for h in range(2):
                idx = [acc_register(t, bi, mi, 2 * pair + h, i) for i in range(4)]
                c = [regs[i] for i in idx]
                if half_acc:
                    c = [_pack_half2(b, c[0], c[1]), _pack_half2(b, c[2], c[3])]
                if step.scaled:
                    d = fn(afr[mi], bfr[2 * h:2 * h + 2], c, mi, 2 * pair + h, k0)
                else:
                    d = b.call(fn, afr[mi] + bfr[2 * h:2 * h + 2] + c)
                if half_acc:
                    outs = []
                    for q in range(2):
                        v = b.extract_value(d, q)
                        outs += [b.extract_element(v, _c(0)), b.extract_element(v, _c(1))]
                else:
                    outs = [b.extract_value(d, q) for q in range(4)]
                for i, v in zip(idx, outs):
                    regs[i] = v


def _pack_half2(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    v = b.insert_element(ir.Constant(HALF2, ir.Undefined), x, _c(0))
    return b.insert_element(v, y, _c(1))
