"""Tensor-core instructions: mma.sync, ldmatrix and stmatrix, following the PTX ISA fragment
layouts (groupID = lane >> 2, threadID_in_group = lane % 4)."""

from __future__ import annotations

import numpy as np

from .access import locate, region_view
from .addressing import Address
from .decode import op
from .ops_warp import check_members
from .ptx_ast import Imm, Vec
from .fragments import C_LAYOUT, CONTAINED, LAYOUTS, contained_elements, unpack_elements
from .ptx_types import type_info

def _regs_of(ctx, operand):
    items = operand.items if isinstance(operand, Vec) else (operand,)
    return items


def _block_scale(ctx, ins, parts, shape, atype, btype, dtype_):
    """`mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.{e4m3,
    e5m2}.{e4m3,e5m2}.f32.ue8m0 d, a, b, c, scale-a, {byte-id-a, thread-id-a}, scale-b,
    {byte-id-b, thread-id-b}` (sm_120a): one ue8m0 scale 2^(e - 127) per row of A and column
    of B and 32 K. Row m's scale is byte byte-id-a of lane 4(m mod 8) + 2 thread-id-a + m / 8,
    column n's byte byte-id-b of lane 4n + thread-id-b. `m16n8k64...kind::mxf4nvf4.
    block_scale.scale_vec::2X...e2m1.e2m1.f32.ue8m0`: two scales each (K = 64, one per 32),
    bytes byte-id and byte-id + 1 (byte-id 0 or 2) of the same lanes; `scale_vec::4X` with
    `.ue4m3` (NVFP4) or `.ue8m0`: four scales each (one per 16 of K), all four bytes (byte-id
    0), byte j scaling K elements 16 j .. 16 j + 15. (The reading Triton 3.9's sm_120a
    `tl.dot_scaled` kernels confirm: tests/emulator/test_emu_triton_blackwell.py.) Returns
    `scales(st, fetch) -> ((W, 16, K), (W, 8, K))`. The mxf8f6f4 operand types are any of
    CONTAINED, one element per byte (fragments.contained_elements)."""
    from .fp8 import decode_scale
    mx8 = ("kind::mxf8f6f4" in parts and "scale_vec::1X" in parts and shape == "m16n8k32"
           and atype in CONTAINED and btype in CONTAINED)
    vec = next((p for p in parts if p in ("scale_vec::2X", "scale_vec::4X")), None)
    mx4 = (("kind::mxf4nvf4" in parts or ("kind::mxf4" in parts and vec == "scale_vec::2X"))
           and vec is not None and shape == "m16n8k64" and atype == btype == "e2m1")
    sfmt = next((p for p in parts if p in ("ue8m0", "ue4m3")), None)
    if not (mx8 or mx4) or sfmt is None or dtype_ != "f32" or \
            (sfmt == "ue4m3" and vec != "scale_vec::4X"):
        ctx.error(f"{ins.opcode}: the emulator runs block-scaled mma.sync as m16n8k32 "
                  f".kind::mxf8f6f4.block_scale.scale_vec::1X (e4m3, e5m2, e2m3, e3m2, e2m1 in "
                  f"8-bit containers, .ue8m0), m16n8k64 "
                  f".kind::mxf4nvf4.block_scale.scale_vec::2X (e2m1, .ue8m0) or "
                  f"scale_vec::4X (e2m1, .ue4m3 or .ue8m0), with f32 accumulators")
    nsf = 1 if mx8 else (4 if vec == "scale_vec::4X" else 2)
    block = (32 if mx8 else 64) // nsf                    # K elements per scale
    ops = ins.operands
    if len(ops) != 8 or not all(isinstance(ops[k], Vec) and len(ops[k].items) == 2 and
                                all(isinstance(x, Imm) for x in ops[k].items) for k in (5, 7)):
        ctx.error(f"{ins.opcode}: expected d, a, b, c, scale-a, {{byte-id-a, thread-id-a}}, "
                  f"scale-b, {{byte-id-b, thread-id-b}}")
    u32 = type_info("u32")
    (bid_a, tid_a), (bid_b, tid_b) = (
        (int(ctx.src(x, u32)(None)) for x in ops[k].items) for k in (5, 7))
    if bid_a > 4 - nsf or bid_b > 4 - nsf or bid_a % nsf or bid_b % nsf or tid_a > 1 or \
            tid_b > 1:
        ctx.error(f"{ins.opcode}: byte-id is {({1: '0 to 3', 2: '0 or 2', 4: '0'})[nsf]} "
                  f"and thread-id 0 or 1")
    gsa, gsb = ctx.src(ops[4], u32), ctx.src(ops[6], u32)
    m, n = np.arange(16), np.arange(8)
    lane_a = 4 * (m % 8) + 2 * tid_a + m // 8
    lane_b = 4 * n + tid_b

    def scales(st, fetch):
        out = []
        for g, lanes, bid in ((gsa, lane_a, bid_a), (gsb, lane_b, bid_b)):
            words = fetch([g])[..., 0].astype(np.uint32)[:, lanes]      # (W, rows)
            e = np.stack([(words >> np.uint32(8 * (bid + j))) & np.uint32(0xFF)
                          for j in range(nsf)], -1)                    # (W, rows, nsf)
            out.append(np.repeat(decode_scale(e, sfmt), block, axis=-1))
        return out
    return scales


@op("mma")
def build_mma(ctx, ins, parts):
    shape = next((p for p in parts if p.startswith("m") and "n" in p and "k" in p), None)
    types = [p for p in parts if p in ("f16", "bf16", "tf32", "f32", "f64", "s8", "u8", "s32",
                                         "s4", "u4", "e4m3", "e5m2", "e2m1", "e2m3",
                                         "e3m2")]
    if shape is None or len(types) not in (2, 4):
        ctx.error(f"{ins.opcode}: unsupported mma form")
    if len(types) == 4:
        dtype_, atype, btype, ctype = types
    else:                                   # mma.sync...m16n8k16.row.col.f32.bf16.bf16.f32
        dtype_, atype, btype, ctype = types[0], types[1], types[1], types[0]
    if "row" not in parts or "col" not in parts:
        ctx.error("mma.sync needs .row.col for these shapes")
    # accumulator types the PTX ISA allows per input type (ptxas refuses the others)
    allowed = {"f16": ("f16", "f32"), "bf16": ("f32",), "tf32": ("f32",), "s8": ("s32",),
               "u8": ("s32",), "e4m3": ("f16", "f32"), "e5m2": ("f16", "f32"),
               "e2m1": ("f32",), "e2m3": ("f32",), "e3m2": ("f32",)}.get(atype)
    if allowed is not None and (dtype_ not in allowed or ctype not in allowed):
        ctx.error(f"{ins.opcode}: .{atype} inputs take {' or '.join('.' + t for t in allowed)}"
                  f" accumulators")
    if atype in ("f16", "bf16", "tf32") and btype != atype:
        ctx.error(f"{ins.opcode}: .{atype} A takes a .{atype} B")
    if atype in ("e4m3", "e5m2") and dtype_ != ctype:
        ctx.error(f"{ins.opcode}: 8-bit float products need equal .dtype and .ctype")
    # kind::mxf8f6f4: every float type one per byte (its 8-bit container)
    contained = "kind::mxf8f6f4" in parts
    elem = "8" if contained else {"f16": "16", "bf16": "16", "tf32": "32", "s8": "8", "u8": "8",
                                  "e4m3": "8", "e5m2": "8", "e2m1": "4"}.get(atype)
    if atype in ("e2m1", "e2m3", "e3m2") and "block_scale" not in parts:
        ctx.error(f"{ins.opcode}: the emulator runs .{atype} mma.sync in its block-scaled form")
    key = (shape, elem)
    if key not in LAYOUTS:
        ctx.error(f"mma shape {shape} with .{atype} inputs is not supported")
    M, N, K, (ar, ac), (br, bc), bits = LAYOUTS[key]
    satfinite = "satfinite" in parts
    d, a, b, c = ins.operands[:4]
    b32 = type_info("b32")
    da, db, dc, dd = (_regs_of(ctx, o) for o in (a, b, c, d))
    na = ar.shape[1] * bits // 32
    nb = br.shape[1] * bits // 32
    nd = 2 if dtype_ == "f16" else 4         # 4 accumulator elements: f16x2 pairs or words
    nc = 2 if ctype == "f16" else 4
    if (len(da), len(db), len(dc), len(dd)) != (na, nb, nc, nd):
        ctx.error(f"{ins.opcode}: expected {nd}, {na}, {nb}, {nc} registers for d, a, b, c")
    ga = [ctx.src(o, b32) for o in da]
    gb = [ctx.src(o, b32) for o in db]
    gc = [ctx.src(o, b32) for o in dc]
    puts = [ctx.dst(o, b32) for o in dd]
    cr, cc = C_LAYOUT
    integer = atype in ("s8", "u8")
    scaled = _block_scale(ctx, ins, parts, shape, atype, btype, dtype_) \
        if "block_scale" in parts else None

    def run(st, m):
        check_members(st, m, 0xFFFFFFFF, ins.opcode, require_full=True)
        act = np.ones(st.T, bool) if m is None else m
        W = st.T // 32
        warps = np.unique(st.warp_global[act])

        def fetch(getters):
            cols = [np.broadcast_to(np.asarray(g(st)), (st.T,)).reshape(W, 32)[warps]
                    for g in getters]
            return np.stack(cols, axis=-1)
        A = np.zeros((warps.size, M, K))
        B = np.zeros((warps.size, K, N))
        if contained:
            Ae, Be = contained_elements(fetch(ga), atype), contained_elements(fetch(gb), btype)
        else:
            Ae = unpack_elements(fetch(ga), bits, atype)
            Be = unpack_elements(fetch(gb), bits, btype)
        wi = np.arange(warps.size)[:, None, None]
        A[wi, ar[None], ac[None]] = Ae
        B[wi, br[None], bc[None]] = Be
        if scaled is not None:
            sa, sb = scaled(st, fetch)
            A = A * sa                                   # (W, M, K)
            B = B * sb.transpose(0, 2, 1)                # (W, K, N)
        Cw = fetch(gc)
        if ctype == "f16":
            Ce = unpack_elements(Cw, 16, "f16")
        else:
            Ce = unpack_elements(Cw, 32, "s32" if integer else "f32")
        C = np.zeros((warps.size, M, N))
        C[wi, cr[None], cc[None]] = Ce
        if integer:
            D = np.einsum("wmk,wkn->wmn", A.astype(np.int64), B.astype(np.int64)) + \
                C.astype(np.int64)
            De = D[wi, cr[None], cc[None]]
            if satfinite:
                De = np.clip(De, -2**31, 2**31 - 1)
            out = (De & 0xFFFFFFFF).astype(np.uint32)
        else:
            D = np.einsum("wmk,wkn->wmn", A, B) + C
            De = D[wi, cr[None], cc[None]]
            if dtype_ == "f16":
                h = De.astype(np.float16).view(np.uint16).astype(np.uint32)
                out = h[..., 0::2] | (h[..., 1::2] << np.uint32(16))
            else:
                out = De.astype(np.float32).view(np.uint32)
        # scatter back to full per-thread arrays
        for k, put in enumerate(puts):
            full = np.zeros((W, 32), np.uint32)
            full[warps] = out[..., k]
            put(st, full.reshape(-1), m)
    return {"run": run, "sync": "warp", "members": None}


def _ldst_matrix_addrs(st, m, ga, nmat, what):
    """Row addresses: lane i*8 + r of each warp gives row r of matrix i."""
    check_members(st, m, 0xFFFFFFFF, what, require_full=True)
    act = np.ones(st.T, bool) if m is None else m
    idx = np.flatnonzero(act)
    addrs = np.broadcast_to(np.asarray(ga(st), np.uint64), (st.T,))
    return act, idx, addrs


@op("ldmatrix", "stmatrix")
def build_ldmatrix(ctx, ins, parts):
    num = next((p for p in parts if p in ("x1", "x2", "x4")), None)
    if num is None or "m8n8" not in parts:
        ctx.error(f"{ins.opcode}: only .m8n8 with .x1/.x2/.x4 is supported")
    nmat = int(num[1:])
    trans = "trans" in parts
    space = "shared"
    store_form = parts[0] == "stmatrix"
    if store_form:
        a, regs = ins.operands[:2]
    else:
        regs, a = ins.operands[:2]
    items = regs.items if isinstance(regs, Vec) else (regs,)
    if len(items) != nmat:
        ctx.error(f"{ins.opcode} needs {nmat} registers")
    addr = Address(ctx, a, space)
    b32 = type_info("b32")
    puts = [ctx.dst(o, b32) for o in items] if not store_form else None
    gets = [ctx.src(o, b32) for o in items] if store_form else None
    lane = np.arange(32)

    def element_addrs(st, idx, rowaddr, i):
        """Byte addresses of the two 16-bit elements thread `idx` holds of matrix i."""
        base = idx - st.lane[idx]
        ln = st.lane[idx]
        if not trans:
            r = rowaddr[base + i * 8 + (ln >> 2)] + (2 * (ln & 3) * 2).astype(np.uint64)
            return r, r + np.uint64(2)
        r0 = rowaddr[base + i * 8 + 2 * (ln & 3)] + (2 * (ln >> 2)).astype(np.uint64)
        r1 = rowaddr[base + i * 8 + 2 * (ln & 3) + 1] + (2 * (ln >> 2)).astype(np.uint64)
        return r0, r1

    def run(st, m):
        act, idx, _ = _ldst_matrix_addrs(st, m, lambda s: 0, nmat, ins.opcode)
        rowaddr = np.broadcast_to(np.asarray(addr.get(st), np.uint64), (st.T,))
        # each providing lane's row must be a valid, 16-byte aligned 16-byte row
        provider = st.lane[idx] < 8 * nmat
        rows = locate(st, addr.space, rowaddr[idx[provider]], idx[provider], 16, 16)
        for region, gi, off, ad in rows:
            if st.counters.detailed:
                st.counters.record_ldmatrix(st, gi, ad.astype(np.int64), nmat)
            if st.races is not None:
                st.races.access(st, gi, off, 16, store_form)
        for i in range(nmat):
            e0, e1 = element_addrs(st, idx, rowaddr, i)
            g0 = locate(st, addr.space, e0, idx, 2, 2)
            g1 = locate(st, addr.space, e1, idx, 2, 2)
            if store_form:
                word = np.broadcast_to(np.asarray(gets[i](st), np.uint32), (st.T,))[idx]
                lo, hi = (word & np.uint32(0xFFFF)).astype(np.uint16), \
                    (word >> np.uint32(16)).astype(np.uint16)
                for (region, gi, off, ad), vals in ((g0[0], lo), (g1[0], hi)):
                    region_view(st, region, np.uint16)[off // 2] = vals
                    if region == "shared" and st.proxy is not None:
                        st.proxy.wrote(st, off, 2)
                continue
            vals = []
            for (region, gi, off, ad) in (g0[0], g1[0]):
                vals.append(region_view(st, region, np.uint16)[off // 2].astype(np.uint32))
            full = np.zeros(st.T, np.uint32)
            full[idx] = vals[0] | (vals[1] << np.uint32(16))
            puts[i](st, full, m)
    return {"run": run, "sync": "warp", "members": None}
