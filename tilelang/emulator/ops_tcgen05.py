"""The fifth-generation tensor core (sm_100a): tcgen05.alloc/dealloc/relinquish_alloc_permit,
mma, commit, ld/st/wait, cp, shift and fences.

Tensor memory, the asynchronous operations and their completion on mbarriers live in tmem.py
(see its docstring); the shared-memory operands are read through matrix descriptors with the
canonical layouts of smem_matrix.py. What each instruction reads and writes follows the PTX
ISA's tcgen05 chapter; docs/emulator.md, "tcgen05 and tensor memory", lists the supported
forms.

* `mma` is issued by each thread that executes it (a GPU issues one MMA per thread too; kernels
  elect one). Its instruction descriptor (idesc) is decoded at issue: sparsity (bits 0-2),
  saturate (3), D type (4-5: f16, f32, s32), A and B types (7-9, 10-12), negate A/B (13, 14),
  MN-major A/B (15, 16), N >> 3 (17-22), M >> 4 (24-28), max shift (30-31, .ws only). Each
  instruction multiplies K = 256 bits of each row: 16 f16/bf16, 8 tf32, 32 8-bit elements.
  With M = 128 (cta_group::1) row i of D is TMEM lane i, column j is the column of d-tmem + j
  (one 32-bit cell per f32/s32 element); with M = 64 rows 16w .. 16w + 15 are lanes 32w ..
  32w + 15 (`d_lanes`).
* `ld`/`st`: warp w of a warp group reaches lanes 32(w mod 4) .. +31. `.32x32b.xN`: lane i of
  the warp moves lane (base + i), register j is column (column + j); `.16x32bx2.xN`: lane i
  moves lane base + i mod 16, the upper half-warp immHalfSplitoff columns further.
  (The M = 64 layout and the 16x32bx2 mapping are the reading Triton's sm_100a kernels
  confirm: tests/emulator/test_emu_triton_blackwell.py.)
"""

from __future__ import annotations

import numpy as np

from .access import locate
from .addressing import Address
from .decode import op
from .errors import ExecutionError, MemoryFault
from .ops_warp import check_members
from .ptx_ast import Addr, Imm, Reg, Vec
from .ptx_types import type_info
from .smem_matrix import decode_descriptor_sm100, descriptor_offsets, element_values
from .tmem import AsyncOp, COLUMNS, LANES, check_cells, commit, issue, split, tmem

_U32, _U64 = type_info("u32"), type_info("u64")
# idesc A/B type codes per kind (PTX ISA, "Instruction descriptor")
_TYPES = {"f16": {0: "f16", 1: "bf16"}, "tf32": {2: "tf32"},
          "f8f6f4": {0: "e4m3", 1: "e5m2", 3: "e2m3", 4: "e3m2", 5: "e2m1"},
          "i8": {0: "u8", 1: "s8"}}
_ESIZE = {"f16": 2, "bf16": 2, "tf32": 4, "e4m3": 1, "e5m2": 1, "u8": 1, "s8": 1}
_D_TYPES = {0: "f16", 1: "f32", 2: "s32"}


def _each(g, st, idx, dtype=np.uint64):
    return np.broadcast_to(np.asarray(g(st), dtype), (st.T,))[idx]


def _tmem_address(ctx, o):
    """A getter of the TMEM address operand `[reg + imm]`, `[reg]` or a register."""
    if isinstance(o, Addr) and isinstance(o.base, Reg):
        g, k = ctx.src(o.base, _U32), int(o.offset)
        return lambda st: np.asarray(g(st), np.uint64) + np.uint64(k)
    if isinstance(o, Reg):
        g = ctx.src(o, _U32)
        return lambda st: np.asarray(g(st), np.uint64)
    ctx.error(f"{ctx.ins.opcode}: expected a tensor memory address, found {o}")


def _warps(st, m, what):
    """The active set of a .sync.aligned tcgen05 instruction: whole warps; yields each warp's
    threads."""
    act = check_members(st, m, 0xFFFFFFFF, what, require_full=True)
    idx = np.flatnonzero(act)
    w = st.warp_global[idx]
    for k in np.unique(w):
        yield idx[w == k]


def _uniform(st, vals, ths, what, opcode):
    v = np.asarray(vals)
    if (v != v[0]).any():
        raise st.error(ExecutionError, f"{opcode}: {what} differs between the threads of a "
                       f"warp", int(ths[np.flatnonzero(v != v[0])[0]]))
    return int(v[0])


def _shared_u32_write(st, space, addr, thread, value):
    (region, _, off, _), = locate(st, space, np.array([addr], np.uint64), np.array([thread]),
                                  4, 4)
    if region != "shared":
        raise st.error(MemoryFault, "tcgen05.alloc writes its address to shared memory", thread)
    if st.races is not None:
        st.races.access(st, np.array([thread]), off, 4, True)
    st.shared_view(np.uint32)[int(off[0]) // 4] = np.uint32(value)
    st.epoch += 1


@op("tcgen05")
def build_tcgen05(ctx, ins, parts):
    kind = parts[1] if len(parts) > 1 else ""
    if "cta_group::2" in parts:
        ctx.error(f"{ins.opcode}: the emulator runs cta_group::1 only")
    builder = _BUILDERS.get(kind)
    if builder is None:
        ctx.error(f"{ins.opcode} is not supported")
    return builder(ctx, ins, parts)


# -- allocation ---------------------------------------------------------------------------------
def _alloc(ctx, ins, parts):
    addr = Address(ctx, ins.operands[0], "shared")
    gn = ctx.src(ins.operands[1], _U32)

    def run(st, m):
        tm = tmem(st)
        for ths in _warps(st, m, ins.opcode):
            t0 = int(ths[0])
            n = _uniform(st, _each(gn, st, ths), ths, "the column count", ins.opcode)
            a = _uniform(st, np.broadcast_to(np.asarray(addr.get(st), np.uint64),
                                             (st.T,))[ths], ths, "the address", ins.opcode)
            b = int(st.block_in_batch[t0])
            if n < 32 or n > COLUMNS or n & (n - 1):
                raise st.error(ExecutionError, f"{ins.opcode}: {n} columns; the count must be "
                               f"a power of 2 from 32 to {COLUMNS}", t0)
            if tm.relinquished[b]:
                raise st.error(ExecutionError, f"{ins.opcode} after the CTA's "
                               f"tcgen05.relinquish_alloc_permit", t0)
            start = next((c for c in range(0, COLUMNS, n)
                          if not tm.allocated[b, c:c + n].any()), None)
            if start is None:
                raise st.error(ExecutionError, f"{ins.opcode}: {n} columns requested, "
                               f"{int((~tm.allocated[b]).sum())} free in no contiguous run "
                               f"(a GPU would wait for a tcgen05.dealloc that never comes)", t0)
            tm.allocated[b, start:start + n] = True
            _shared_u32_write(st, addr.space, a, t0, start)     # lane 0, column `start`
    return {"run": run, "sync": "warp", "members": None}


def _dealloc(ctx, ins, parts):
    ga = _tmem_address(ctx, ins.operands[0])
    gn = ctx.src(ins.operands[1], _U32)

    def run(st, m):
        tm = tmem(st)
        for ths in _warps(st, m, ins.opcode):
            t0 = int(ths[0])
            a = _uniform(st, _each(ga, st, ths), ths, "the address", ins.opcode)
            n = _uniform(st, _each(gn, st, ths), ths, "the column count", ins.opcode)
            lane, col = split(a)
            b = int(st.block_in_batch[t0])
            if lane or n < 32 or n > COLUMNS or n & (n - 1) or col + n > COLUMNS:
                raise st.error(ExecutionError, f"{ins.opcode}: address {a:#x} and {n} columns "
                               f"do not name an allocation (lane 0, a power of 2 from 32 "
                               f"to {COLUMNS} columns)", t0)
            if not tm.allocated[b, col:col + n].all():
                raise st.error(ExecutionError, f"{ins.opcode}: columns {col}..{col + n - 1} "
                               f"are not all allocated", t0)
            pend = tm.pending[b, :, col:col + n]
            if pend.any():
                raise st.error(ExecutionError, f"{ins.opcode} frees tensor memory that the "
                               f"tcgen05 operation at PTX line {int(pend[pend != 0][0])} "
                               f"has not finished writing", t0)
            tm.allocated[b, col:col + n] = False
    return {"run": run, "sync": "warp", "members": None}


def _relinquish(ctx, ins, parts):
    def run(st, m):
        tm = tmem(st)
        for ths in _warps(st, m, ins.opcode):
            tm.relinquished[int(st.block_in_batch[ths[0]])] = True
    return {"run": run, "sync": "warp", "members": None}


def _no_op(ctx, ins, parts):
    """Fences and waits: the emulator performs tcgen05.ld/st at once and orders nothing."""
    if parts[1].startswith("wait"):
        if parts[1] not in ("wait::ld", "wait::st"):
            ctx.error(f"{ins.opcode} is not supported")

        def wait(st, m):
            for _ in _warps(st, m, ins.opcode):
                pass
        return {"run": wait, "sync": "warp", "members": None}
    if parts[1] not in ("fence::before_thread_sync", "fence::after_thread_sync"):
        ctx.error(f"{ins.opcode} is not supported")
    return lambda st, m: None


# -- tcgen05.ld / tcgen05.st --------------------------------------------------------------------
def _ld_st(ctx, ins, parts):
    load = parts[1] == "ld"
    half = "16x32bx2" in parts
    if "32x32b" not in parts and not half:
        ctx.error(f"{ins.opcode}: the emulator supports the .32x32b and .16x32bx2 shapes of "
                  f"tcgen05.{parts[1]}")
    num = next((p for p in parts if p[:1] == "x" and p[1:].isdigit()), None)
    n = int(num[1:]) if num else 0
    if n not in (1, 2, 4, 8, 16, 32, 64, 128):
        ctx.error(f"{ins.opcode}: .num must be .x1 ... .x128")
    ops = list(ins.operands)
    split_off = 0
    if half:           # ld: {r}, [taddr], immHalfSplitoff; st: [taddr], immHalfSplitoff, {r}
        k = 2 if load else 1
        if len(ops) != 3 or not isinstance(ops[k], Imm):
            ctx.error(f"{ins.opcode}: .16x32bx2 takes an immediate immHalfSplitoff")
        split_off = int(ctx.src(ops[k], _U32)(None))
        del ops[k]
    regs, where = (ops[0], ops[1]) if load else (ops[1], ops[0])
    if not isinstance(regs, Vec) or len(regs.items) != n:
        ctx.error(f"{ins.opcode}: expected {{{n} .b32 registers}}")
    ga = _tmem_address(ctx, where)
    b32 = type_info("b32")
    puts = [ctx.dst(o, b32) for o in regs.items] if load else None
    gets = None if load else [ctx.src(o, b32) for o in regs.items]
    cols = np.arange(n)

    def run(st, m):
        tm = tmem(st)
        a_all = np.broadcast_to(np.asarray(ga(st), np.uint64), (st.T,))
        out = np.zeros((st.T, n), np.uint32) if load else None
        vals = None if load else np.stack([_each(g, st, slice(None), np.uint32)
                                           for g in gets], -1)
        for ths in _warps(st, m, ins.opcode):
            t0 = int(ths[0])
            a = _uniform(st, a_all[ths], ths, "the tensor memory address", ins.opcode)
            lane, col = split(a)
            slab = 32 * (int(st.thread_linear[t0]) // 32 % 4)
            if lane not in ((slab, slab + 16) if half else (slab,)):
                raise st.error(ExecutionError, f"{ins.opcode}: warp {int(st.thread_linear[t0]) // 32} "
                               f"of the CTA reaches tensor memory lanes {slab}..{slab + 31}; "
                               f"the address names lane {lane}", t0)
            b = int(st.block_in_batch[t0])
            li = st.lane[ths]
            if half:        # lanes 0-15 and 16-31 of the warp: the same 16 TMEM lanes, the
                # second half immHalfSplitoff columns on
                lanes, first = lane + li % 16, col + (li // 16) * split_off
            else:
                lanes, first = lane + li, np.full(li.size, col)
            where_cols = first[:, None] + cols[None, :]
            check_cells(st, b, np.unique(lanes), np.unique(where_cols), t0, ins.opcode,
                        reading=load)
            if load:
                out[ths] = tm.cells[b][lanes[:, None], where_cols]
            else:
                tm.cells[b][lanes[:, None], where_cols] = vals[ths]
        if load:
            for j, put in enumerate(puts):
                put(st, out[:, j], m)
    return {"run": run, "sync": "warp", "members": None}


# -- tcgen05.commit -------------------------------------------------------------------------------
def _commit(ctx, ins, parts):
    if "mbarrier::arrive::one" not in parts:
        ctx.error(f"{ins.opcode}: expected .mbarrier::arrive::one")
    if "multicast::cluster" in parts or len(ins.operands) != 1:
        ctx.error(f"{ins.opcode}: the multicast form is not supported")
    space = "shared_cluster" if "shared::cluster" in parts else "shared"
    addr = Address(ctx, ins.operands[0], space)

    def run(st, m):
        idx = st.active_index(m)
        a = np.broadcast_to(np.asarray(addr.get(st), np.uint64), (st.T,))[idx]
        for t, (region, _, off, _) in zip(idx, (locate(st, addr.space, a[k:k + 1],
                                                       idx[k:k + 1], 8, 8)[0]
                                                for k in range(idx.size))):
            if region != "shared":
                raise st.error(MemoryFault, "mbarrier objects must be in shared memory", t)
            commit(st, int(t), int(off[0]) // 8, ins.line)
    return run


# -- tcgen05.mma ----------------------------------------------------------------------------------
def _decode_idesc(st, v, kind, t, opcode):
    """The idesc's fields, checked against the kind (ExecutionError naming the field)."""
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
    if M not in (64, 128):
        raise bad(f"M = {M}: cta_group::1 takes M = 64 or 128")
    step = 16 if M == 128 else 8
    if not (step <= N <= 256 and N % step == 0):
        raise bad(f"N = {N}: M = {M} takes N from {step} to 256 in steps of {step}")
    return {"a": aty, "b": bty, "M": M, "N": N, "neg_a": neg_a, "neg_b": neg_b, "sat": sat,
            "a_mn": bool((v >> 15) & 1), "b_mn": bool((v >> 16) & 1)}


def d_lanes(M: int) -> np.ndarray:
    """The TMEM lane of each row of D with cta_group::1: row i for M = 128; for M = 64 the
    first 16 lanes of each warp's 32 (rows 16w .. 16w + 15 in lanes 32w .. 32w + 15)."""
    r = np.arange(M)
    return r if M == 128 else 32 * (r // 16) + r % 16


def _descriptor(st, desc, t, what, opcode):
    f = decode_descriptor_sm100(desc)
    if f["version"] != 1:
        raise st.error(ExecutionError, f"{opcode}: {what} descriptor {desc:#018x}: bits 46-48 "
                       f"must be 0b001 (found {f['version']:#05b})", t)
    if f["lbo_mode"]:
        raise st.error(ExecutionError, f"{opcode}: {what} descriptor: the emulator does not "
                       f"support leading-dimension mode 1 (bit 52)", t)
    if f["swizzle"] is None:
        raise st.error(ExecutionError, f"{opcode}: {what} descriptor layout type "
                       f"{f['layout']} (bits 61-63) is reserved or not supported", t)
    if f["base_offset"] and f["swizzle"] and f["base_offset"] != (f["start"] >> 7) & 7:
        raise st.error(ExecutionError, f"{opcode}: {what} descriptor base offset "
                       f"{f['base_offset']} does not match its start address "
                       f"{f['start']:#x}", t)
    return f


def _operand_offsets(st, f, rows, K, esize, k_major, t):
    addr = descriptor_offsets(f, rows, K, esize, k_major).astype(np.int64).reshape(-1)
    if (addr % esize).any():
        raise st.error(MemoryFault, "tcgen05.mma: misaligned operand element", t)
    (_, _, off, _), = locate(st, "shared", addr.astype(np.uint64),
                             np.full(addr.size, t, np.int64), esize, 1)
    return off


def _read_operand(st, off, esize, kind, rows, K):
    raw = np.ascontiguousarray(st.shared[off[:, None] + np.arange(esize)[None, :]])
    word = raw.view({1: np.uint8, 2: np.uint16, 4: np.uint32}[esize]).reshape(-1)
    return element_values(word, kind).reshape(rows, K)


def _mma(ctx, ins, parts):
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
    gd = _tmem_address(ctx, ops[0])
    ga = _tmem_address(ctx, ops[1]) if a_in_tmem else ctx.src(ops[1], _U64)
    gb, gi = ctx.src(ops[2], _U64), ctx.src(ops[3], _U32)
    rest = ops[4:]
    gmask = None
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
        d_all, a_all, b_all = _each(gd, st, idx), _each(ga, st, idx), _each(gb, st, idx)
        i_all = _each(gi, st, idx)
        e_all = np.broadcast_to(np.asarray(ge(st), bool), (st.T,))[idx]
        masks = None if gmask is None else np.stack([_each(g, st, idx) for g in gmask], -1)
        for k, t in enumerate(idx.tolist()):
            f = _decode_idesc(st, int(i_all[k]), kind, t, ins.opcode)
            lane, col = split(int(d_all[k]))
            if lane:
                raise st.error(ExecutionError, f"{ins.opcode}: d-tmem names lane {lane}; the "
                               f"accumulator starts at lane 0", t)
            b = int(st.block_in_batch[t])
            cols = col + np.arange(f["N"])
            check_cells(st, b, np.arange(0), cols, t, ins.opcode)
            keep = np.ones(LANES, bool)
            if masks is not None:
                bits = np.array([(int(masks[k, j]) >> i) & 1 for j in range(4)
                                 for i in range(32)], bool)
                keep = ~bits
            fn = _compute(st, ins, kind, f, t, b, col, int(a_all[k]), int(b_all[k]),
                          bool(e_all[k]), shift, keep, a_in_tmem)
            issue(st, AsyncOp(t, ins.line, fn, b, d_lanes(f["M"]), cols, fn.clk))
    return run


def _compute(st, ins, kind, f, t, b, col, adesc, bdesc, enable, shift, keep,
             a_in_tmem=False):
    """Check the operands now (issue) and return the closure that performs the product.
    A in tensor memory (`[a-tmem]`, M = 128): row i in lane i, its 32 bytes of K along the
    cells from the address's column, lowest byte first (the reading Triton's block-scaled
    kernel confirms)."""
    M, N = f["M"], f["N"]
    ea, eb = _ESIZE[f["a"]], _ESIZE[f["b"]]
    K = 32 // ea
    fb = _descriptor(st, bdesc, t, "B", ins.opcode)
    offb = _operand_offsets(st, fb, N, K, eb, not f["b_mn"], t)
    if a_in_tmem:
        al, ac = split(adesc)
        if M != 128:
            raise st.error(ExecutionError, f"{ins.opcode}: the emulator reads A from tensor "
                           f"memory with M = 128", t)
        check_cells(st, b, al + np.arange(M), ac + np.arange(8), t, ins.opcode)
        offa = None
    else:
        fa = _descriptor(st, adesc, t, "A", ins.opcode)
        offa = _operand_offsets(st, fa, M, K, ea, not f["a_mn"], t)
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
            return _read_operand(st, offa, ea, f["a"], M, K)
        raw = _tmem_bytes(st, b, al + np.arange(M), ac, 32)
        word = np.ascontiguousarray(raw).view({1: np.uint8, 2: np.uint16, 4: np.uint32}[ea])
        return element_values(word.reshape(-1), f["a"]).reshape(M, K)

    def compute(st):
        A = read_a(st)
        B = _read_operand(st, offb, eb, f["b"], N, K)
        lanes = d_lanes(M)
        cells = tmem(st).cells[b, lanes, col:col + N]
        if integer:
            D = A.astype(np.int64) @ B.astype(np.int64).T
            if enable:
                D = D + cells.view(np.int32).astype(np.int64)
            if f["sat"]:
                D = np.clip(D, -(1 << 31), (1 << 31) - 1)
            res = ((D + (1 << 31)) % (1 << 32) - (1 << 31)).astype(np.int32).view(np.uint32)
        else:
            sa, sb = (-1.0 if f["neg_a"] else 1.0), (-1.0 if f["neg_b"] else 1.0)
            D = (A * sa) @ (B * sb).T
            if enable:
                D = D + cells.view(np.float32).astype(np.float64) * 2.0 ** -shift
            res = D.astype(np.float32).view(np.uint32)
        rows = keep[lanes]
        tmem(st).cells[b, lanes[rows], col:col + N] = res[rows]
    compute.clk = clk[0]
    return compute


# -- block-scaled tcgen05.mma -------------------------------------------------------------------
# idesc of the block-scaled kinds (PTX ISA, "Instruction descriptor" for .kind::mxf8f6f4):
# B's scale byte (bits 4-5), A/B types (7-9, 10-12: e4m3 0, e5m2 1), negate (13, 14),
# MN-major (15, 16), N >> 3 (17-22), scale type (23: 1 ue8m0), M >> 4 (24-28), A's scale
# byte (29-30)
# (.kind::mxf4: e2m1 is type 1, and the operands are K-major)
_MX_TYPES = {"mxf8f6f4": {0: "e4m3", 1: "e5m2"}, "mxf4": {1: "e2m1"}}


def _decode_idesc_scaled(st, v, t, opcode, kind):
    def bad(msg):
        return st.error(ExecutionError, f"{opcode}: instruction descriptor {v:#010x}: {msg}", t)
    if v & 0b100:
        raise bad("bit 2 (sparsity) set in a dense tcgen05.mma")
    codes = _MX_TYPES[kind]
    aty, bty = codes.get((v >> 7) & 7), codes.get((v >> 10) & 7)
    if aty is None or bty is None:
        raise bad(f"A/B type codes {(v >> 7) & 7}/{(v >> 10) & 7}: the emulator reads "
                  f"{' and '.join(codes.values())} operands of .kind::{kind}")
    if kind == "mxf4" and ((v >> 15) & 3 or v >> 31):
        raise bad(".kind::mxf4 operands are K-major (bits 15-16) with K = 64 (bit 31)")
    if not (v >> 23) & 1:
        raise bad("bit 23: .kind::mxf8f6f4 takes ue8m0 scales (1)")
    N, M = ((v >> 17) & 0x3F) << 3, ((v >> 24) & 0x1F) << 4
    if M != 128 or not (16 <= N <= 128 and N % 16 == 0):
        raise bad(f"M = {M}, N = {N}: the emulator runs block-scaled products with M = 128 "
                  f"and N from 16 to 128")
    return {"a": aty, "b": bty, "M": M, "N": N, "neg_a": bool((v >> 13) & 1),
            "neg_b": bool((v >> 14) & 1), "a_mn": bool((v >> 15) & 1),
            "b_mn": bool((v >> 16) & 1), "sf_a": (v >> 29) & 3, "sf_b": (v >> 4) & 3}


def _mx_elements(raw, kind):
    """(rows, 32) bytes of operand rows to their float64 elements: one per byte, or two e2m1
    per byte with element 2j in the low nibble of byte j."""
    raw = np.asarray(raw, np.uint8)
    if kind == "e2m1":
        from .fp8 import decode
        nib = np.stack([raw & 0xF, raw >> 4], -1).reshape(raw.shape[0], -1)
        return decode(nib, "e2m1")
    return element_values(raw.reshape(-1), kind).reshape(raw.shape)


def _tmem_bytes(st, b, lanes, col, nbytes):
    """(rows, nbytes) bytes of TMEM rows `lanes` from column `col` (4 bytes a cell, lowest
    byte first)."""
    cells = np.ascontiguousarray(tmem(st).cells[b][np.ix_(lanes, col + np.arange(nbytes // 4))])
    return cells.view(np.uint8).reshape(len(lanes), nbytes)


def _mma_scaled(ctx, ins, parts):
    """`tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale{.block32,.scale_vec::1X} [d],
    a-desc or [a-tmem], b-desc, idesc, [scale-a], [scale-b], enable-input-d`: one ue8m0 scale
    per row and 32 K elements. A in TMEM: row i in lane i, element k in byte k of the row's
    cells from the address's column. Scales: row i of A (column n of B) in lane i (lane n) of
    the scale address's column, in the byte the idesc's scale byte field selects."""
    kind = "mxf4" if "kind::mxf4" in parts else "mxf8f6f4"
    vec = "scale_vec::2X" if kind == "mxf4" else "scale_vec::1X"
    if not {"kind::mxf8f6f4", "kind::mxf4"} & set(parts) or \
            not ({"block32", vec} & set(parts)):
        ctx.error(f"{ins.opcode}: the emulator runs .kind::mxf8f6f4 and .kind::mxf4 "
                  f".block_scale with 32-element blocks (.block32, .scale_vec::1X / ::2X)")
    # K per instruction: 32 8-bit or 64 4-bit elements (32 bytes a row); scales per row
    K, nsf = (64, 2) if kind == "mxf4" else (32, 1)
    ops = list(ins.operands)
    if len(ops) != 7 or not isinstance(ops[0], Addr) or not isinstance(ops[4], Addr) or \
            not isinstance(ops[5], Addr):
        ctx.error(f"{ins.opcode}: expected [d-tmem], a-desc or [a-tmem], b-desc, idesc, "
                  f"[scale-A-tmem], [scale-B-tmem], enable-input-d")
    a_in_tmem = isinstance(ops[1], Addr)
    gd, gsa, gsb = (_tmem_address(ctx, ops[k]) for k in (0, 4, 5))
    ga = _tmem_address(ctx, ops[1]) if a_in_tmem else ctx.src(ops[1], _U64)
    gb, gi = ctx.src(ops[2], _U64), ctx.src(ops[3], _U32)
    ge = ctx.src(ops[6], type_info("pred"))

    def run(st, m):
        idx = st.active_index(m)
        vals = [_each(g, st, idx) for g in (gd, ga, gb, gi, gsa, gsb)]
        e_all = np.broadcast_to(np.asarray(ge(st), bool), (st.T,))[idx]
        for k, t in enumerate(idx.tolist()):
            d, a, bd, iv, sa, sb = (int(v[k]) for v in vals)
            f = _decode_idesc_scaled(st, iv, t, ins.opcode, kind)
            lane, col = split(d)
            if lane:
                raise st.error(ExecutionError, f"{ins.opcode}: d-tmem names lane {lane}; the "
                               f"accumulator starts at lane 0", t)
            b = int(st.block_in_batch[t])
            M, N = f["M"], f["N"]
            cols = col + np.arange(N)
            check_cells(st, b, np.arange(0), cols, t, ins.opcode)
            offb = _operand_offsets(st, _descriptor(st, bd, t, "B", ins.opcode), N, 32, 1,
                                    not f["b_mn"], t)
            if a_in_tmem:
                al, ac = split(a)
                check_cells(st, b, np.arange(M) + al, ac + np.arange(8), t, ins.opcode)
                offa = None
            else:
                offa = _operand_offsets(st, _descriptor(st, a, t, "A", ins.opcode), M, 32, 1,
                                        not f["a_mn"], t)
            for addr, rows in ((sa, M), (sb, N)):
                sl, sc = split(addr)
                check_cells(st, b, sl + np.arange(32), sc + np.arange(rows // 32), t,
                            ins.opcode)
            clk = 0                     # the clock of the last read is the one published
            if st.races is not None:
                if offa is not None:
                    st.races.tc_read(st, t, offa, 1)
                clk = st.races.tc_read(st, t, offb, 1)

            def compute(st, f=f, b=b, col=col, a=a, offa=offa, offb=offb, sa=sa, sb=sb,
                        enable=bool(e_all[k]), M=M, N=N):
                if offa is None:
                    al, ac = split(a)
                    A = _mx_elements(_tmem_bytes(st, b, al + np.arange(M), ac, 32), f["a"])
                else:
                    A = _mx_elements(st.shared[offa].reshape(M, 32), f["a"])
                B = _mx_elements(st.shared[offb].reshape(N, 32), f["b"])
                scale = []
                for addr, rows, byte in ((sa, M, f["sf_a"]), (sb, N, f["sf_b"])):
                    sl, sc = split(addr)
                    r = np.arange(rows)
                    cell = tmem(st).cells[b, sl + r % 32, sc + r // 32]
                    e = np.stack([(cell >> np.uint32(8 * (byte + j))) & np.uint32(0xFF)
                                  for j in range(nsf)], -1)          # (rows, scales)
                    s = np.where(e == 255, np.nan, 2.0 ** (e.astype(np.float64) - 127))
                    scale.append(np.repeat(s, 32, axis=1))             # one per 32 of K
                A = A * scale[0] * (-1.0 if f["neg_a"] else 1.0)
                B = B * scale[1] * (-1.0 if f["neg_b"] else 1.0)
                D = A @ B.T
                cells = tmem(st).cells[b, :M, col:col + N]
                if enable:
                    D = D + cells.view(np.float32).astype(np.float64)
                tmem(st).cells[b, :M, col:col + N] = D.astype(np.float32).view(np.uint32)
            issue(st, AsyncOp(t, ins.line, compute, b, np.arange(M), cols, clk))
    return run


# -- tcgen05.cp and tcgen05.shift -----------------------------------------------------------------
_CP_SHAPES = {"128x256b": (128, 32), "128x128b": (128, 16), "32x128b": (32, 16)}


def _cp(ctx, ins, parts):
    shape = next((p for p in parts if p in _CP_SHAPES), None)
    if shape is None:
        ctx.error(f"{ins.opcode}: the emulator supports the .128x256b, .128x128b and "
                  f".32x128b.warpx4 shapes of tcgen05.cp")
    if any(p.startswith(("b8x16", "b6x16", "b4x16")) for p in parts):
        ctx.error(f"{ins.opcode}: the decompressing forms are not supported")
    x4 = "warpx4" in parts
    if (shape == "32x128b") != x4:
        ctx.error(f"{ins.opcode}: .32x128b takes .warpx4 (and only it)")
    rows, nbytes = _CP_SHAPES[shape]
    ga = _tmem_address(ctx, ins.operands[0])
    gs = ctx.src(ins.operands[1], _U64)

    def run(st, m):
        idx = st.active_index(m)
        a_all, s_all = _each(ga, st, idx), _each(gs, st, idx)
        for k, t in enumerate(idx.tolist()):
            lane, col = split(int(a_all[k]))
            b = int(st.block_in_batch[t])
            f = _descriptor(st, int(s_all[k]), t, "source", ins.opcode)
            # the source: `rows` K-major rows of `nbytes` bytes in the canonical layout
            off = _operand_offsets(st, f, rows, nbytes, 1, True, t)
            if st.proxy is not None:
                st.proxy.check(st, off, 1, t, ins.opcode)
            clk = 0 if st.races is None else st.races.tc_read(st, t, off, 1)
            dst = [lane + 32 * q for q in range(4)] if x4 else [lane]
            lanes = np.concatenate([d + np.arange(rows) for d in dst])
            cols = col + np.arange(nbytes // 4)
            check_cells(st, b, np.arange(0), cols, t, ins.opcode)
            if lanes.max() >= LANES or (x4 and lane):
                raise st.error(ExecutionError, f"{ins.opcode}: lanes from {lane} leave the "
                               f"{LANES} lanes", t)

            def compute(st, off=off, b=b, dst=dst, col=col):
                data = st.shared[off].reshape(rows, nbytes).copy().view(np.uint32)
                for d in dst:
                    tmem(st).cells[b, d:d + rows, col:col + nbytes // 4] = data
            issue(st, AsyncOp(t, ins.line, compute, b, lanes, cols, clk))
    return run


def _shift(ctx, ins, parts):
    if "down" not in parts:
        ctx.error(f"{ins.opcode}: expected .down")
    ga = _tmem_address(ctx, ins.operands[0])

    def run(st, m):
        idx = st.active_index(m)
        a_all = _each(ga, st, idx)
        for k, t in enumerate(idx.tolist()):
            lane, col = split(int(a_all[k]))
            if lane % 32:
                raise st.error(ExecutionError, f"{ins.opcode}: the lane ({lane}) must be a "
                               f"multiple of 32", t)
            b = int(st.block_in_batch[t])
            cols = col + np.arange(8)                  # 256 bits of each row
            check_cells(st, b, np.arange(0), cols, t, ins.opcode)

            def compute(st, b=b, lane=lane, col=col):
                c = tmem(st).cells[b, lane:lane + 32, col:col + 8]
                c[1:] = c[:-1].copy()                  # rows 0..30 move down one lane
            issue(st, AsyncOp(t, ins.line, compute, b, lane + 1 + np.arange(31), cols))
    return run


_BUILDERS = {"alloc": _alloc, "dealloc": _dealloc, "relinquish_alloc_permit": _relinquish,
             "ld": _ld_st, "st": _ld_st, "commit": _commit, "mma": _mma, "cp": _cp,
             "shift": _shift, "wait::ld": _no_op, "wait::st": _no_op,
             "fence::before_thread_sync": _no_op, "fence::after_thread_sync": _no_op}
