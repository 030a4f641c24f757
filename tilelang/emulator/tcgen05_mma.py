"""tcgen05.mma (sm_100a): the dense kinds f16, tf32, f8f6f4 (8-bit) and i8, and the
block-scaled mxf8f6f4, mxf4 and mxf4nvf4 (docs/emulator.md, "tcgen05 and tensor memory").

Each thread that executes it issues one MMA (a GPU does too; kernels elect one), recorded as an
asynchronous operation that its tcgen05.commit completes (tmem.py). The instruction descriptor
(idesc) is decoded at issue: sparsity (bits 0-2), saturate (3), D type (4-5: f16, f32, s32),
A and B types (7-9, 10-12), negate A/B (13, 14), MN-major A/B (15, 16), N >> 3 (17-22),
M >> 4 (24-28), max shift (30-31, .ws only); the block-scaled kinds put B's and A's scale
byte in bits 4-5 and 29-30 and the scale type in bit 23. Each instruction multiplies K = 256
bits of each row: 16 f16/bf16, 8 tf32, 32 8-bit, 64 4-bit elements. With M = 128 row i of D
is TMEM lane i, column j the column of d-tmem + j (one 32-bit cell per f32/s32 element); with
M = 64 rows 16w .. 16w + 15 are lanes 32w .. 32w + 15 (`tcgen05_operands.d_lanes`).

`.cta_group::2` (M = 256, the dense kinds with A in shared memory): one thread of the even CTA
of a pair (cluster ranks 2i, 2i + 1) multiplies the pair's operands. A's descriptor names the
same shared-memory offset in both CTAs: rows 0-127 are the even CTA's, 128-255 the odd one's;
B's likewise holds columns 0 .. N/2 - 1 in the even CTA and N/2 .. N - 1 in the odd one (N in
the idesc is the pair's); D's rows 0-127 go to the even CTA's tensor memory, 128-255 to the odd
CTA's, at the same address (the reading Triton's Gluon 2-CTA kernels confirm:
tests/emulator/test_emu_tcgen05_pair.py).
"""

from __future__ import annotations

import numpy as np

from .errors import ExecutionError
from .fp8 import decode_scale
from .ptx_ast import Addr, Imm, Vec
from .ptx_types import type_info
from .tcgen05_operands import (d_lanes, descriptor, each, element_values, mx_elements,
                               operand_offsets, read_operand, tmem_address, tmem_bytes)
from .tmem import LANES, AsyncOp, check_cells, issue, split, tmem

_U32, _U64 = type_info("u32"), type_info("u64")
# idesc A/B type codes per kind (PTX ISA, "Instruction descriptor")
_TYPES = {"f16": {0: "f16", 1: "bf16"}, "tf32": {2: "tf32"},
          "f8f6f4": {0: "e4m3", 1: "e5m2", 3: "e2m3", 4: "e3m2", 5: "e2m1"},
          "i8": {0: "u8", 1: "s8"}}
_ESIZE = {"f16": 2, "bf16": 2, "tf32": 4, "e4m3": 1, "e5m2": 1, "u8": 1, "s8": 1}
_D_TYPES = {0: "f16", 1: "f32", 2: "s32"}



# -- tcgen05.mma ----------------------------------------------------------------------------------
def _decode_idesc(st, v, kind, t, opcode, pair=False):
    """The idesc's fields, checked against the kind (ExecutionError naming the field);
    `pair`: cta_group::2."""
    def bad(msg):
        return st.error(ExecutionError, f"{opcode}: instruction descriptor {v:#010x}: {msg}", t)
    if v & 0b100:
        raise bad("bit 2 (sparsity) set in a dense tcgen05.mma")
    if (v >> 30) & 3:
        raise bad("bits 30-31 (maximum shift) are for tcgen05.mma.ws")
    dty = _D_TYPES.get((v >> 4) & 3)
    codes = _TYPES[kind]
    aty, bty = codes.get((v >> 7) & 7), codes.get((v >> 10) & 7)
    if aty is None or bty is None:
        raise bad(f"A/B type codes {(v >> 7) & 7}/{(v >> 10) & 7} are not types of "
                  f".kind::{kind}")
    if kind == "f16" and aty != bty:
        raise bad(f".kind::f16 multiplies matching types, not {aty} x {bty}")
    if aty not in _ESIZE or bty not in _ESIZE:
        raise bad(f"{aty} x {bty}: the emulator does not read 6- and 4-bit operands in "
                  f".kind::f8f6f4 yet")
    want = "s32" if kind == "i8" else "f32"
    if dty != want:
        raise bad(f"D type {dty}: the emulator supports {want} accumulators for .kind::{kind}")
    sat = bool(v & 0b1000)
    if sat and kind != "i8":
        raise bad("bit 3 (saturate) applies to .kind::i8 only")
    neg_a, neg_b = bool((v >> 13) & 1), bool((v >> 14) & 1)
    if kind == "i8" and (neg_a or neg_b):
        raise bad("integer products take no negation (bits 13-14)")
    N, M = ((v >> 17) & 0x3F) << 3, ((v >> 24) & 0x1F) << 4
    if pair and M != 256:
        raise bad(f"M = {M}: the emulator runs cta_group::2 with M = 256")
    if not pair and M not in (64, 128):
        raise bad(f"M = {M}: cta_group::1 takes M = 64 or 128")
    step = 8 if M == 64 else 16
    if not (step <= N <= 256 and N % step == 0):
        raise bad(f"N = {N}: M = {M} takes N from {step} to 256 in steps of {step}")
    return {"a": aty, "b": bty, "M": M, "N": N, "neg_a": neg_a, "neg_b": neg_b, "sat": sat,
            "a_mn": bool((v >> 15) & 1), "b_mn": bool((v >> 16) & 1)}


def build_mma(ctx, ins, parts):
    if "block_scale" in parts:
        return _mma_scaled(ctx, ins, parts)
    kind = next((p[6:] for p in parts if p.startswith("kind::")), None)
    if kind not in _TYPES:
        ctx.error(f"{ins.opcode}: expected .kind::f16, ::tf32, ::f8f6f4 or ::i8")
    ops = list(ins.operands)
    if len(ops) < 5 or not isinstance(ops[0], Addr):
        ctx.error(f"{ins.opcode}: expected [d-tmem], a-desc, b-desc, idesc, "
                  f"{{disable-output-lane,}} enable-input-d{{, scale-input-d}}")
    a_in_tmem = isinstance(ops[1], Addr)
    pair = "cta_group::2" in parts
    if pair and a_in_tmem:
        ctx.error(f"{ins.opcode}: the emulator runs cta_group::2 with A in shared memory")
    gd = tmem_address(ctx, ops[0])
    ga = tmem_address(ctx, ops[1]) if a_in_tmem else ctx.src(ops[1], _U64)
    gb, gi = ctx.src(ops[2], _U64), ctx.src(ops[3], _U32)
    rest = ops[4:]
    gmask = None
    if rest and isinstance(rest[0], Vec) and pair:
        ctx.error(f"{ins.opcode}: the emulator runs cta_group::2 without disable-output-lane")
    if rest and isinstance(rest[0], Vec):
        if len(rest[0].items) != 4:
            ctx.error(f"{ins.opcode}: disable-output-lane takes 4 registers with cta_group::1")
        gmask = [ctx.src(o, _U32) for o in rest[0].items]
        rest = rest[1:]
    if not rest or len(rest) > 2:
        ctx.error(f"{ins.opcode}: expected enable-input-d{{, scale-input-d}} last")
    ge = ctx.src(rest[0], type_info("pred"))
    shift = 0
    if len(rest) == 2:
        if not isinstance(rest[1], Imm) or kind not in ("f16", "tf32"):
            ctx.error(f"{ins.opcode}: scale-input-d is an immediate of .kind::f16/::tf32")
        shift = int(ctx.src(rest[1], type_info("u32"))(None))
        if shift > 15:
            ctx.error(f"{ins.opcode}: scale-input-d must be 0 to 15")

    def run(st, m):
        idx = st.active_index(m)
        d_all, a_all, b_all = each(gd, st, idx), each(ga, st, idx), each(gb, st, idx)
        i_all = each(gi, st, idx)
        e_all = np.broadcast_to(np.asarray(ge(st), bool), (st.T,))[idx]
        masks = None if gmask is None else np.stack([each(g, st, idx) for g in gmask], -1)
        for k, t in enumerate(idx.tolist()):
            f = _decode_idesc(st, int(i_all[k]), kind, t, ins.opcode, pair)
            lane, col = split(int(d_all[k]))
            if lane:
                raise st.error(ExecutionError, f"{ins.opcode}: d-tmem names lane {lane}; the "
                               f"accumulator starts at lane 0", t)
            b = int(st.block_in_batch[t])
            peer = pair_peer(st, t, ins.opcode) if pair else None
            cols = col + np.arange(f["N"])
            for blk in (b,) if peer is None else (b, peer):
                check_cells(st, blk, np.arange(0), cols, t, ins.opcode)
            keep = np.ones(LANES, bool)
            if masks is not None:
                bits = np.array([(int(masks[k, j]) >> i) & 1 for j in range(4)
                                 for i in range(32)], bool)
                keep = ~bits
            fn = _compute(st, ins, kind, f, t, b, col, int(a_all[k]), int(b_all[k]),
                          bool(e_all[k]), shift, keep, a_in_tmem, peer)
            if st.races is not None and st.races.tmem is not None:
                tr = st.races.tmem
                if a_in_tmem:
                    al, ac = split(int(a_all[k]))
                    tr.tc_access(st, t, b, al + np.arange(f["M"]), ac + np.arange(8), fn.clk,
                                 False, "the tcgen05.mma (A)")
                for blk in (b,) if peer is None else (b, peer):
                    tr.tc_access(st, t, blk, d_lanes(f["M"]) if peer is None else
                                 np.arange(LANES), cols, fn.clk, True, "the tcgen05.mma")
            if peer is None:
                issue(st, AsyncOp(t, ins.line, fn, b, d_lanes(f["M"]), cols, fn.clk))
                continue
            # one product writing both CTAs' cells: the odd CTA's are pending as long
            issue(st, AsyncOp(t, ins.line, fn, b, np.arange(LANES), cols, fn.clk))
            issue(st, AsyncOp(t, ins.line, lambda st: None, peer, np.arange(LANES), cols))
    return run


def pair_peer(st, t, opcode) -> int:
    """The odd CTA of the pair whose even CTA thread `t` is in (cta_group::2)."""
    c = st.geom.cluster
    csize = c[0] * c[1] * c[2] if c else 1
    b = int(st.block_in_batch[t])
    rank = b % csize
    if csize % 2:
        raise st.error(ExecutionError, f"{opcode}: cta_group::2 needs clusters of an even "
                       f"number of CTAs (the launch has {csize})", t)
    if rank % 2:
        raise st.error(ExecutionError, f"{opcode}: the emulator issues cta_group::2 products "
                       f"from the even CTA of a pair (this is cluster rank {rank})", t)
    return b + 1


def _compute(st, ins, kind, f, t, b, col, adesc, bdesc, enable, shift, keep,
             a_in_tmem=False, peer=None):
    """Check the operands now (issue) and return the closure that performs the product.
    A in tensor memory (`[a-tmem]`, M = 128): row i in lane i, its 32 bytes of K along the
    cells from the address's column, lowest byte first (the reading Triton's block-scaled
    kernel confirms). With `peer` (cta_group::2) half of A's rows and of B's columns are at
    the same offsets in the peer CTA's shared memory, and half of D's rows in its TMEM."""
    M, N = f["M"], f["N"]
    ea, eb = _ESIZE[f["a"]], _ESIZE[f["b"]]
    K = 32 // ea
    fb = descriptor(st, bdesc, t, "B", ins.opcode)
    if peer is None:
        offb = operand_offsets(st, fb, N, K, eb, not f["b_mn"], t)
    else:
        # the same offsets one block on: the blocks of a cluster are consecutive in the batch
        step = (peer - b) * st.shared_stride
        offb = operand_offsets(st, fb, N // 2, K, eb, not f["b_mn"], t)
        offb = np.concatenate([offb, offb + step])
    if a_in_tmem:
        al, ac = split(adesc)
        if M != 128:
            raise st.error(ExecutionError, f"{ins.opcode}: the emulator reads A from tensor "
                           f"memory with M = 128", t)
        check_cells(st, b, al + np.arange(M), ac + np.arange(8), t, ins.opcode)
        offa = None
    else:
        fa = descriptor(st, adesc, t, "A", ins.opcode)
        if peer is None:
            offa = operand_offsets(st, fa, M, K, ea, not f["a_mn"], t)
        else:
            offa = operand_offsets(st, fa, M // 2, K, ea, not f["a_mn"], t)
            offa = np.concatenate([offa, offa + step])
    if st.proxy is not None:
        if offa is not None:
            st.proxy.check(st, offa, ea, t, f"{ins.opcode} (operand A)")
        st.proxy.check(st, offb, eb, t, f"{ins.opcode} (operand B)")
    clk = [0]
    if st.races is not None:
        if offa is not None:
            st.races.tc_read(st, t, offa, ea)
        clk[0] = st.races.tc_read(st, t, offb, eb)
    integer = kind == "i8"

    def read_a(st):
        if offa is not None:
            return read_operand(st, offa, ea, f["a"], M, K)
        raw = tmem_bytes(st, b, al + np.arange(M), ac, 32)
        word = np.ascontiguousarray(raw).view({1: np.uint8, 2: np.uint16, 4: np.uint32}[ea])
        return element_values(word.reshape(-1), f["a"]).reshape(M, K)

    def product(A, B, cells):
        """D = A @ B^T (+ the cells' accumulator) as the cells' 32-bit words."""
        if integer:
            D = A.astype(np.int64) @ B.astype(np.int64).T
            if enable:
                D = D + cells.view(np.int32).astype(np.int64)
            if f["sat"]:
                D = np.clip(D, -(1 << 31), (1 << 31) - 1)
            return ((D + (1 << 31)) % (1 << 32) - (1 << 31)).astype(np.int32).view(np.uint32)
        sa, sb = (-1.0 if f["neg_a"] else 1.0), (-1.0 if f["neg_b"] else 1.0)
        D = (A * sa) @ (B * sb).T
        if enable:
            D = D + cells.view(np.float32).astype(np.float64) * 2.0 ** -shift
        return D.astype(np.float32).view(np.uint32)

    def compute(st):
        A = read_a(st)
        B = read_operand(st, offb, eb, f["b"], N, K)
        cells = tmem(st).cells
        if peer is not None:                    # rows 0-127 here, 128-255 in the peer
            for blk, rows in ((b, slice(0, LANES)), (peer, slice(LANES, M))):
                cells[blk, :, col:col + N] = product(A[rows], B, cells[blk, :, col:col + N])
            return
        lanes = d_lanes(M)
        res = product(A, B, cells[b, lanes, col:col + N])
        rows = keep[lanes]
        cells[b, lanes[rows], col:col + N] = res[rows]

    compute.clk = clk[0]
    return compute


# -- block-scaled tcgen05.mma -------------------------------------------------------------------
# idesc of the block-scaled kinds (PTX ISA, "Instruction descriptor" for .kind::mxf8f6f4):
# B's scale byte (bits 4-5), A/B types (7-9, 10-12: e4m3 0, e5m2 1), negate (13, 14),
# MN-major (15, 16), N >> 3 (17-22), scale type (23: 1 ue8m0, 0 ue4m3), M >> 4 (24-28), A's
# scale byte (29-30)
# (.kind::mxf4 and ::mxf4nvf4: e2m1 is type 1, and the operands are K-major; ue4m3 scales
# are for ::mxf4nvf4 with 16-element blocks only)
_MX_TYPES = {"mxf8f6f4": {0: "e4m3", 1: "e5m2"}, "mxf4": {1: "e2m1"},
             "mxf4nvf4": {1: "e2m1"}}


def _decode_idesc_scaled(st, v, t, opcode, kind, nsf):
    def bad(msg):
        return st.error(ExecutionError, f"{opcode}: instruction descriptor {v:#010x}: {msg}", t)
    if v & 0b100:
        raise bad("bit 2 (sparsity) set in a dense tcgen05.mma")
    codes = _MX_TYPES[kind]
    aty, bty = codes.get((v >> 7) & 7), codes.get((v >> 10) & 7)
    if aty is None or bty is None:
        raise bad(f"A/B type codes {(v >> 7) & 7}/{(v >> 10) & 7}: the emulator reads "
                  f"{' and '.join(codes.values())} operands of .kind::{kind}")
    if kind != "mxf8f6f4" and ((v >> 15) & 3 or v >> 31):
        raise bad(f".kind::{kind} operands are K-major (bits 15-16) with K = 64 (bit 31)")
    sfmt = "ue8m0" if (v >> 23) & 1 else "ue4m3"
    if sfmt == "ue4m3" and nsf != 4:
        raise bad("bit 23: ue4m3 scales (0) are for .kind::mxf4nvf4 with 16-element blocks "
                  "(.block16 / .scale_vec::4X); these blocks take ue8m0 (1)")
    sf_a, sf_b = (v >> 29) & 3, (v >> 4) & 3
    if sf_a % nsf or sf_b % nsf:
        raise bad(f"scale byte fields {sf_a}/{sf_b} (bits 29-30 / 4-5): with {nsf} scales a "
                  f"row each instruction they are {'0' if nsf == 4 else '0 or 2'}")
    N, M = ((v >> 17) & 0x3F) << 3, ((v >> 24) & 0x1F) << 4
    if M != 128 or not (16 <= N <= 256 and N % 16 == 0):
        raise bad(f"M = {M}, N = {N}: the emulator runs block-scaled products with M = 128 "
                  f"and N from 16 to 256")
    return {"a": aty, "b": bty, "M": M, "N": N, "neg_a": bool((v >> 13) & 1),
            "neg_b": bool((v >> 14) & 1), "a_mn": bool((v >> 15) & 1),
            "b_mn": bool((v >> 16) & 1), "sf_a": sf_a, "sf_b": sf_b, "sfmt": sfmt}


def _mma_scaled(ctx, ins, parts):
    """`tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale{.block32,.scale_vec::1X} [d],
    a-desc or [a-tmem], b-desc, idesc, [scale-a], [scale-b], enable-input-d`: one ue8m0 scale
    per row and 32 K elements. A in TMEM: row i in lane i, element k in byte k of the row's
    cells from the address's column. Scales: row i of A (column n of B) in lane i (lane n) of
    the scale address's column, in the byte the idesc's scale byte field selects.
    `.kind::mxf4` (`.block32` / `.scale_vec::2X`) and `.kind::mxf4nvf4` with `.block32` /
    `.scale_vec::2X` (two ue8m0 scales a row: bytes b and b + 1) or `.block16` /
    `.scale_vec::4X` (four ue4m3 or ue8m0 scales a row, bytes 0-3, one per 16 of K: NVFP4)
    multiply K = 64 e2m1 elements packed two a byte."""
    kind = next((p[6:] for p in parts if p in ("kind::mxf8f6f4", "kind::mxf4",
                                               "kind::mxf4nvf4")), None)
    vecs = {"mxf8f6f4": {"block32": 1, "scale_vec::1X": 1},
            "mxf4": {"block32": 2, "scale_vec::2X": 2},
            "mxf4nvf4": {"block32": 2, "scale_vec::2X": 2, "block16": 4, "scale_vec::4X": 4}}
    vec = next((p for p in parts if p in vecs.get(kind, {})), None)
    if kind is None or vec is None:
        ctx.error(f"{ins.opcode}: the emulator runs .kind::mxf8f6f4 (.block32 / "
                  f".scale_vec::1X), .kind::mxf4 (.block32 / .scale_vec::2X) and "
                  f".kind::mxf4nvf4 (those, or .block16 / .scale_vec::4X) .block_scale")
    # K per instruction: 32 8-bit or 64 4-bit elements (32 bytes a row); scales per row
    nsf = vecs[kind][vec]
    K = 32 if kind == "mxf8f6f4" else 64
    ops = list(ins.operands)
    if len(ops) != 7 or not isinstance(ops[0], Addr) or not isinstance(ops[4], Addr) or \
            not isinstance(ops[5], Addr):
        ctx.error(f"{ins.opcode}: expected [d-tmem], a-desc or [a-tmem], b-desc, idesc, "
                  f"[scale-A-tmem], [scale-B-tmem], enable-input-d")
    a_in_tmem = isinstance(ops[1], Addr)
    gd, gsa, gsb = (tmem_address(ctx, ops[k]) for k in (0, 4, 5))
    ga = tmem_address(ctx, ops[1]) if a_in_tmem else ctx.src(ops[1], _U64)
    gb, gi = ctx.src(ops[2], _U64), ctx.src(ops[3], _U32)
    ge = ctx.src(ops[6], type_info("pred"))

    def run(st, m):
        idx = st.active_index(m)
        vals = [each(g, st, idx) for g in (gd, ga, gb, gi, gsa, gsb)]
        e_all = np.broadcast_to(np.asarray(ge(st), bool), (st.T,))[idx]
        for k, t in enumerate(idx.tolist()):
            d, a, bd, iv, sa, sb = (int(v[k]) for v in vals)
            f = _decode_idesc_scaled(st, iv, t, ins.opcode, kind, nsf)
            lane, col = split(d)
            if lane:
                raise st.error(ExecutionError, f"{ins.opcode}: d-tmem names lane {lane}; the "
                               f"accumulator starts at lane 0", t)
            b = int(st.block_in_batch[t])
            M, N = f["M"], f["N"]
            cols = col + np.arange(N)
            check_cells(st, b, np.arange(0), cols, t, ins.opcode)
            offb = operand_offsets(st, descriptor(st, bd, t, "B", ins.opcode), N, 32, 1,
                                    not f["b_mn"], t)
            if a_in_tmem:
                al, ac = split(a)
                check_cells(st, b, np.arange(M) + al, ac + np.arange(8), t, ins.opcode)
                offa = None
            else:
                offa = operand_offsets(st, descriptor(st, a, t, "A", ins.opcode), M, 32, 1,
                                        not f["a_mn"], t)
            for addr, rows in ((sa, M), (sb, N)):
                sl, sc = split(addr)
                check_cells(st, b, sl + np.arange(32), sc + np.arange(rows // 32), t,
                            ins.opcode, pipelined=True)
            clk = 0                     # the clock of the last read is the one published
            if st.races is not None:
                if offa is not None:
                    st.races.tc_read(st, t, offa, 1)
                clk = st.races.tc_read(st, t, offb, 1)
            if st.races is not None and st.races.tmem is not None:
                tr = st.races.tmem
                reads = [(sl + np.arange(32), sc + np.arange(rows // 32)) for (sl, sc), rows
                         in ((split(sa), M), (split(sb), N))]
                if a_in_tmem:
                    reads.append((al + np.arange(M), ac + np.arange(8)))
                for lanes_r, cols_r in reads:
                    tr.tc_access(st, t, b, lanes_r, cols_r, clk, False, "the tcgen05.mma")
                tr.tc_access(st, t, b, np.arange(M), cols, clk, True, "the tcgen05.mma")

            def compute(st, f=f, b=b, col=col, a=a, offa=offa, offb=offb, sa=sa, sb=sb,
                        enable=bool(e_all[k]), M=M, N=N):
                if offa is None:
                    al, ac = split(a)
                    A = mx_elements(tmem_bytes(st, b, al + np.arange(M), ac, 32), f["a"])
                else:
                    A = mx_elements(st.shared[offa].reshape(M, 32), f["a"])
                B = mx_elements(st.shared[offb].reshape(N, 32), f["b"])
                scale = []
                for addr, rows, byte in ((sa, M, f["sf_a"]), (sb, N, f["sf_b"])):
                    sl, sc = split(addr)
                    r = np.arange(rows)
                    cell = tmem(st).cells[b, sl + r % 32, sc + r // 32]
                    e = np.stack([(cell >> np.uint32(8 * (byte + j))) & np.uint32(0xFF)
                                  for j in range(nsf)], -1)          # (rows, scales)
                    scale.append(np.repeat(decode_scale(e, f["sfmt"]), K // nsf, axis=1))
                A = A * scale[0] * (-1.0 if f["neg_a"] else 1.0)
                B = B * scale[1] * (-1.0 if f["neg_b"] else 1.0)
                D = A @ B.T
                cells = tmem(st).cells[b, :M, col:col + N]
                if enable:
                    D = D + cells.view(np.float32).astype(np.float64)
                tmem(st).cells[b, :M, col:col + N] = D.astype(np.float32).view(np.uint32)
            issue(st, AsyncOp(t, ins.line, compute, b, np.arange(M), cols, clk))
    return run
