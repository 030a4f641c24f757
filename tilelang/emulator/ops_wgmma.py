"""Warp-group MMA (sm_90a): wgmma.fence, wgmma.mma_async, wgmma.commit_group, wgmma.wait_group.

A warp group is four consecutive warps (128 threads, aligned to 128 in the block). Every wgmma
instruction must be executed by all 128 threads together; a group missing a thread (diverged or
exited) is a `WarpDivergence` ("warp group not converged").

`mma_async` is asynchronous: the emulator records it and computes it when a `wgmma.wait_group N`
covers its commit group (the latest moment the PTX ISA allows), reading shared memory then and
the A registers as they were at issue. Until then its accumulator registers are *pending*: an
instruction other than a wgmma that reads one is reported (`ExecutionError` naming both lines).
An mma_async never waited for is never computed (its registers keep their old values), as on a
GPU where the kernel exits first. Shared-memory operands are read through the matrix descriptor
(`smem_matrix.descriptor_offsets`, shared with tcgen05), with the canonical K-major and
MN-major layouts and the 32/64/128-byte swizzles applied to the byte address.
"""

from __future__ import annotations

import numpy as np

from .access import locate
from .completion import due_test
from .decode import op
from .errors import ExecutionError, MemoryFault
from .fragments import LAYOUTS, unpack_elements
from .ptx_ast import Imm, Vec
from .ptx_types import type_info
from .smem_matrix import (decode_descriptor, descriptor_offsets, element_values,  # noqa: F401
                          encode_descriptor, swizzle_address)
from .warpgroup import check_warpgroup, warpgroup_index

# input type -> (element bits, the mma.sync A-fragment table one warp's slice of A uses)
_INPUTS = {"f16": (16, "16"), "bf16": (16, "16"), "tf32": (32, "32"), "e4m3": (8, "8"),
           "e5m2": (8, "8"), "s8": (8, "8"), "u8": (8, "8")}
_SHAPE_A = {16: ("m16n8k16", "16"), 32: ("m16n8k8", "32"), 8: ("m16n8k32", "8")}
class PendingMMA:
    """One mma_async of some warp groups (`ws`: their indices in the issuing step, `threads`:
    their 128 threads each, `group`: each one's commit group), waiting for its wait_group.
    `moves`: register moves of its accumulator made before the wait (see `check_pending_reads`),
    re-run in order once it is computed."""
    __slots__ = ("threads", "group", "compute", "regs", "line", "ws", "moves")

    def __init__(self, threads, group, compute, regs, line, ws, moves=None):
        self.threads, self.group, self.compute, self.regs, self.line, self.ws = (
            threads, group, compute, regs, line, ws)
        self.moves = [] if moves is None else moves


def land(st, idx, limit=None):
    """Compute the pending mma_async of threads `idx` (all, or those of a group < limit)."""
    if not st.wg_pending:
        return
    is_due = due_test(st, idx, limit)
    keep = []
    for p in st.wg_pending:                       # issue order: chained accumulators work
        firsts = p.threads.reshape(-1, 128)[:, 0]
        due = is_due(firsts, p.group)
        if due.any():
            p.compute(st, p.ws[due])
            done = np.zeros(st.T, bool)
            done[p.threads.reshape(-1, 128)[due].reshape(-1)] = True
            for ins, m in p.moves:                # the moved copies get the results too
                ins.run(st, done if m is None else done & m)
        if not due.all():                         # other warp groups wait later
            left = ~due
            keep.append(PendingMMA(p.threads.reshape(-1, 128)[left].reshape(-1),
                                   p.group[left], p.compute, p.regs, p.line, p.ws[left],
                                   p.moves))
    st.wg_pending = keep
    st.wg_regs = {}
    for p in keep:                                # what is still pending, per register
        mark_pending(st, p)


def mark_pending(st, p):
    for r in p.regs:
        pend = st.wg_regs.get(r)
        if pend is None:
            pend = st.wg_regs[r] = np.zeros(st.T, bool)
        pend[p.threads] = True


def check_pending_reads(st, ins, em):
    """An instruction reading an accumulator of an mma_async not yet waited for.

    The PTX ISA leaves such a read undefined, but a plain register move (`mov`, also packing
    and unpacking `{a, b}`) is what LLVM emits between Triton's mma_async and the wait that
    names the moved registers (f16 accumulators unpacked to 16-bit registers): ptxas keeps
    the copy in the accumulator's own registers, so it holds the result after the wait. Here
    the move's destinations join the pending accumulator and the move is re-run when it is
    computed; any other read is an error."""
    for r in ins.reads:
        pend = st.wg_regs.get(r)
        if pend is None:
            continue
        hit = pend if em is None else pend & em
        if hit.any() and ins.root == "mov" and ins.guard is None:
            _defer_move(st, ins, em, r, hit)
            continue
        if hit.any():
            t = int(np.flatnonzero(hit)[0])
            src = next((p.line for p in st.wg_pending if r in p.regs and t in p.threads),
                       None)
            name = next((n for (f, n), i in st.prog.reg_index.items() if i == r), f"#{r}")
            raise st.error(ExecutionError, f"{ins.opcode} reads accumulator register {name} of "
                           f"the wgmma.mma_async at PTX line {src} before a "
                           f"wgmma.wait_group covering it", t)


def _defer_move(st, ins, em, r, hit):
    """`ins` moves pending accumulator register r of threads `hit`: its destinations become
    part of that mma_async's accumulator, and it runs again once the result is there."""
    for p in reversed(st.wg_pending):             # the newest mma_async writing r
        if r in p.regs and hit[p.threads].any():
            k = next((k for k, (i, _) in enumerate(p.moves) if i is ins), None)
            if k is None:
                p.moves.append((ins, None if em is None else em.copy()))
            elif p.moves[k][1] is not None:       # run again for more threads
                p.moves[k] = (ins, None if em is None else p.moves[k][1] | em)
            p.regs = tuple(p.regs) + tuple(d for d in ins.dests if d not in p.regs)
            mark_pending(st, p)
            return


def _scalar_src(ctx, o, ti):
    if isinstance(o, Imm):
        v = int(ctx.src(o, type_info("s32"))(None))
        return lambda st: v
    return ctx.src(o, ti)


@op("wgmma")
def build_wgmma(ctx, ins, parts):
    kind = parts[1] if len(parts) > 1 else ""
    if "sync" not in parts or "aligned" not in parts:
        ctx.error(f"{ins.opcode}: wgmma instructions are .sync.aligned")
    if kind == "fence":
        def fence(st, m):
            check_warpgroup(st, m, ins.opcode)
        return {"run": fence, "sync": "warpgroup"}
    if kind == "commit_group":
        def commit(st, m):
            check_warpgroup(st, m, ins.opcode)
            st.wg_commits[st.active_index(m)] += 1
        return {"run": commit, "sync": "warpgroup"}
    if kind == "wait_group":
        if len(ins.operands) != 1 or not isinstance(ins.operands[0], Imm):
            ctx.error("wgmma.wait_group takes an immediate number of groups")
        n = int(ctx.src(ins.operands[0], type_info("u32"))(None))

        def wait(st, m):
            check_warpgroup(st, m, ins.opcode)
            idx = st.active_index(m)
            land(st, idx, st.wg_commits[idx] - n)
        return {"run": wait, "sync": "warpgroup"}
    if kind != "mma_async":
        ctx.error(f"{ins.opcode} is not supported")
    return _build_mma_async(ctx, ins, parts)


def _build_mma_async(ctx, ins, parts):
    shape = next((p for p in parts if p.startswith("m64n")), None)
    types = [p for p in parts[2:] if p in ("f16", "bf16", "tf32", "f32", "e4m3", "e5m2", "s8",
                                           "u8", "s32")]
    if shape is None or len(types) != 3:
        ctx.error(f"{ins.opcode}: expected wgmma.mma_async.sync.aligned.m64nNkK.dtype.atype."
                  f"btype")
    try:
        N, K = (int(x) for x in shape[4:].split("k"))
    except ValueError:
        ctx.error(f"{ins.opcode}: bad shape .{shape}")
    dty, aty, bty = types
    if aty not in _INPUTS or bty not in _INPUTS:
        ctx.error(f"{ins.opcode}: unsupported input types")
    bits = _INPUTS[aty][0]
    if _INPUTS[bty][0] != bits or (bits == 16 and aty != bty) or (bits == 32 and aty != bty):
        ctx.error(f"{ins.opcode}: .{aty} A takes a matching B type")
    want_k = {16: 16, 32: 8, 8: 32}[bits]
    if K != want_k:
        ctx.error(f"{ins.opcode}: .{aty} inputs need k{want_k}")
    if not (8 <= N <= 256 and N % 8 == 0):
        ctx.error(f"{ins.opcode}: N must be a multiple of 8 from 8 to 256")
    integer = aty in ("s8", "u8")
    satfinite = "satfinite" in parts
    if satfinite and not integer:
        ctx.error(f"{ins.opcode}: .satfinite applies to integer wgmma")
    allowed = ("s32",) if integer else ("f32", "f16") if aty in ("f16", "e4m3", "e5m2") \
        else ("f32",)
    if dty not in allowed:
        ctx.error(f"{ins.opcode}: .{aty} inputs take {' or '.join('.' + t for t in allowed)} "
                  f"accumulators")
    ops = list(ins.operands)
    if len(ops) < 4 or not isinstance(ops[0], Vec):
        ctx.error(f"{ins.opcode}: expected {{d...}}, a, b-desc, scale-d, ...")
    dregs = ops[0].items
    nd = N // 2 if dty in ("f32", "s32") else N // 4
    if len(dregs) != nd:
        ctx.error(f"{ins.opcode}: the accumulator needs {nd} registers, found {len(dregs)}")
    a_regs = isinstance(ops[1], Vec)
    # trailing immediates: imm-scale-a, imm-scale-b[, imm-trans-a (desc A only), imm-trans-b];
    # the integer forms have none (PTX ISA: `wgmma.mma_async...s32.s8.s8 d, a, b-desc, scale-d`)
    ntrans = 0 if bits != 16 else (1 if a_regs else 2)
    nscale = 0 if integer else 2
    if len(ops) != 4 + nscale + ntrans:
        ctx.error(f"{ins.opcode}: expected {4 + nscale + ntrans} operands (d, a, b, scale-d" +
                  (", imm-scale-a, imm-scale-b" if nscale else "") +
                  (", imm-trans-a" if ntrans == 2 else "") +
                  (", imm-trans-b" if ntrans else "") + f"), found {len(ops)}")
    imms = []
    for o in ops[4:]:
        if not isinstance(o, Imm):
            ctx.error(f"{ins.opcode}: scale and transpose operands are immediates")
        imms.append(int(ctx.src(o, type_info("s32"))(None)))
    scale_a, scale_b = (imms[0], imms[1]) if nscale else (1, 1)
    if scale_a not in (1, -1) or scale_b not in (1, -1):
        ctx.error(f"{ins.opcode}: imm-scale-a/b must be 1 or -1")
    if integer and (scale_a, scale_b) != (1, 1):
        ctx.error(f"{ins.opcode}: integer wgmma takes no negation")
    trans_a = imms[2] if ntrans == 2 else 0
    trans_b = imms[-1] if ntrans else 0
    if trans_a not in (0, 1) or trans_b not in (0, 1):
        ctx.error(f"{ins.opcode}: imm-trans-a/b must be 0 or 1")
    esize = bits // 8
    b32, u64 = type_info("b32"), type_info("u64")
    dti = b32 if dty != "f32" else type_info("f32")
    dgets = [ctx.src(o, dti) for o in dregs]
    dputs = [ctx.dst(o, dti) for o in dregs]
    dreg_ids = tuple(ctx.reg(o) for o in dregs)
    if isinstance(ops[3], Imm):
        sd = int(ctx.src(ops[3], type_info("s32"))(None)) != 0
        get_scale_d = lambda st: sd            # noqa: E731
    else:
        g = ctx.src(ops[3], type_info("pred"))
        get_scale_d = lambda st: g(st)         # noqa: E731
    if a_regs:
        if len(ops[1].items) != 4:
            ctx.error(f"{ins.opcode}: A from registers takes 4 registers")
        agets = [ctx.src(o, b32) for o in ops[1].items]
    else:
        aget = ctx.src(ops[1], u64)
    bget = ctx.src(ops[2], u64)
    akind = "tf32" if aty == "tf32" else aty
    _, _, _, (arow, acol), _, _ = LAYOUTS[_SHAPE_A[bits]]
    lane = np.arange(32)
    g4, t4 = lane >> 2, lane & 3
    i = np.arange(N // 2)
    # accumulator fragment: warp w of the group holds rows 16w.., as mma's 16x8 C per n8 block
    crow = (g4[:, None] + 8 * ((i[None, :] // 2) % 2))
    ccol = 8 * (i[None, :] // 4) + 2 * t4[:, None] + (i[None, :] % 2)

    def uniform(st, v, threads, what):
        v = np.broadcast_to(np.asarray(v, np.uint64), (st.T,))[threads].reshape(-1, 128)
        if (v != v[:, :1]).any():
            bad = threads.reshape(-1, 128)[np.nonzero(v != v[:, :1])][0]
            raise st.error(ExecutionError, f"{ins.opcode}: the {what} descriptor differs "
                           f"between threads of a warp group", bad)
        return v[:, 0]

    def operand_offsets(st, desc, rows, k_major, first_threads, what):
        """Per warp group: the shared-memory byte offsets (in the batch's shared array) of
        the operand's elements, checked."""
        out = []
        for dsc, t0 in zip(desc, first_threads):
            f = decode_descriptor(int(dsc))
            if f["base_offset"] and f["swizzle"] and \
                    f["base_offset"] != (f["start"] >> 7) & 7:
                raise st.error(ExecutionError, f"{ins.opcode}: {what} descriptor base offset "
                               f"{f['base_offset']} does not match its start address "
                               f"{f['start']:#x} (the emulator swizzles absolute addresses)",
                               t0)
            addr = descriptor_offsets(f, rows, K, esize, k_major).astype(np.int64)
            flat = addr.reshape(-1)
            tid = np.full(flat.size, t0, np.int64)
            if (flat % esize).any():
                raise st.error(MemoryFault, f"{ins.opcode}: misaligned {what} element", t0)
            (region, _, off, _), = locate(st, "shared", flat.astype(np.uint64), tid, esize, 1)
            out.append(off)
        return out

    def race_read(st, offs, first_threads, clks):
        """The race check sees the operands read by each warp group's wgmma agent from the
        issue on; the group's warps see the reads end at the wait that completes them."""
        for off, t0, c in zip(offs, first_threads, clks):
            st.races.wgmma_read(st, int(t0), off, esize, int(c))

    def proxy_read(st, offs, first_threads, what):
        if st.proxy is not None:
            for off, t0 in zip(offs, first_threads):
                st.proxy.check(st, off, esize, t0, f"{ins.opcode} (operand {what})")

    def read_tile(st, desc, rows, k_major, first_threads, what, kind):
        """(W, rows, K) float64 elements of the operand each warp group's descriptor names."""
        out = np.empty((len(desc), rows, K), np.float64)
        offs = operand_offsets(st, desc, rows, k_major, first_threads, what)
        for w, off in enumerate(offs):
            raw = np.ascontiguousarray(st.shared[off[:, None] + np.arange(esize)[None, :]])
            word = raw.view({1: np.uint8, 2: np.uint16, 4: np.uint32}[esize]).reshape(-1)
            out[w] = element_values(word, kind).reshape(rows, K)
        return out

    def run(st, m):
        groups = check_warpgroup(st, m, ins.opcode)
        W = groups.size
        wg = warpgroup_index(st)
        threads = np.flatnonzero(np.isin(wg, groups))          # (W*128), group by group
        firsts = threads.reshape(W, 128)[:, 0]
        bdesc = uniform(st, bget(st), threads, "B")
        clks = None if st.races is None else st.races.wgmma_issue(st, firsts)
        if st.races is not None or st.proxy is not None:
            offs = operand_offsets(st, bdesc, N, not trans_b, firsts, "B")
            if clks is not None:
                race_read(st, offs, firsts, clks)
            proxy_read(st, offs, firsts, "B")
        if a_regs:
            words = np.stack([np.broadcast_to(np.asarray(g_(st), np.uint32), (st.T,))[threads]
                              for g_ in agets], axis=-1).reshape(W, 4, 32, 4)
            elems = unpack_elements(words.reshape(W * 4, 32, 4), bits, akind).reshape(W, 4, 32, -1)
            A = np.zeros((W, 64, K), np.float64)
            for warp in range(4):
                A[:, 16 * warp + arow, acol] = elems[:, warp]
            asnap = A
        else:
            adesc = uniform(st, aget(st), threads, "A")
            if st.races is not None or st.proxy is not None:
                offs = operand_offsets(st, adesc, 64, not trans_a, firsts, "A")
                if clks is not None:
                    race_read(st, offs, firsts, clks)
                proxy_read(st, offs, firsts, "A")
            asnap = None
        scale_d = np.broadcast_to(np.asarray(get_scale_d(st), bool), (st.T,))[threads]
        scale_d = scale_d.reshape(W, 128)
        if (scale_d != scale_d[:, :1]).any():
            raise st.error(ExecutionError, f"{ins.opcode}: scale-d differs between threads of "
                           f"a warp group", firsts[0])
        scale_d = scale_d[:, 0]

        def compute(st, ws):
            W = ws.size
            threads = all_threads.reshape(-1, 128)[ws].reshape(-1)
            A = asnap[ws] if asnap is not None else \
                read_tile(st, adesc[ws], 64, not trans_a, firsts[ws], "A", akind)
            B = read_tile(st, bdesc[ws], N, not trans_b, firsts[ws], "B", bty)   # (W, N, K)
            if clks is not None and st.races is not None:
                st.races.wgmma_done(st, firsts[ws], clks[ws])
            if integer:
                D = np.einsum("wmk,wnk->wmn", A.astype(np.int64), B.astype(np.int64))
            else:
                D = np.einsum("wmk,wnk->wmn", A * scale_a, B * scale_b)
            # gather each thread's accumulator elements: (W, 4 warps, 32 lanes, N/2)
            rows = 16 * np.arange(4)[:, None, None] + crow[None]
            frag = D[:, rows, np.broadcast_to(ccol[None], rows.shape)]
            if dty == "f16":
                old = [np.broadcast_to(np.asarray(g_(st), np.uint32), (st.T,))[threads]
                       for g_ in dgets]
                prev = np.stack(old, -1).reshape(W, 4, 32, nd)
                prev = np.stack([(prev & np.uint32(0xFFFF)), prev >> np.uint32(16)], -1)
                prev = prev.astype(np.uint16).view(np.float16).astype(np.float64)
                prev = prev.reshape(W, 4, 32, N // 2)
            else:
                prev = np.stack([np.broadcast_to(np.asarray(g_(st)), (st.T,))[threads]
                                 for g_ in dgets], -1).reshape(W, 4, 32, nd)
                prev = prev.astype(np.int64 if integer else np.float64)
            frag = np.where(scale_d[ws][:, None, None, None], frag + prev, frag)
            if integer:
                res = frag.astype(np.int64)
                if satfinite:                     # clamp instead of wrapping
                    res = np.clip(res, -(1 << 31), (1 << 31) - 1)
                res = ((res + (1 << 31)) % (1 << 32) - (1 << 31)).astype(np.int32)
                res = res.view(np.uint32).reshape(W * 128, nd)
            elif dty == "f16":
                h = frag.astype(np.float16).view(np.uint16).astype(np.uint32)
                h = h.reshape(W, 4, 32, nd, 2)
                res = (h[..., 0] | (h[..., 1] << np.uint32(16))).reshape(W * 128, nd)
            else:
                res = frag.astype(np.float32).reshape(W * 128, nd)
            sel = np.zeros(st.T, bool)
            sel[threads] = True
            for k, put in enumerate(dputs):
                full = np.zeros(st.T, res.dtype)
                full[threads] = res[:, k]
                put(st, full, sel)

        all_threads = threads
        p = PendingMMA(threads, st.wg_commits[firsts], compute, dreg_ids, ins.line,
                       np.arange(W))
        st.wg_pending.append(p)
        mark_pending(st, p)
    return {"run": run, "sync": "warpgroup"}
