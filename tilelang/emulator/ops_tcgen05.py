"""The fifth-generation tensor core (sm_100a): tcgen05.alloc/dealloc/relinquish_alloc_permit,
commit, ld/st/wait, cp, shift and fences here; the products in tcgen05_mma.py, the operand
reading both use in tcgen05_operands.py.

Tensor memory, the asynchronous operations and their completion on mbarriers live in tmem.py
(see its docstring). What each instruction reads and writes follows the PTX ISA's tcgen05
chapter; docs/emulator.md, "tcgen05 and tensor memory", lists the supported forms.

* `ld`/`st`: warp w of a warp group reaches lanes 32(w mod 4) .. +31. `.32x32b.xN`: lane i of
  the warp moves lane (base + i), register j is column (column + j); `.16x32bx2.xN`: lane i
  moves lane base + i mod 16, the upper half-warp immHalfSplitoff columns further (the
  reading Triton's sm_100a kernels confirm: tests/emulator/test_emu_triton_blackwell.py).
"""

from __future__ import annotations

import numpy as np

from .access import locate
from .addressing import Address
from .decode import op
from .errors import ExecutionError, MemoryFault
from .ops_warp import check_members
from .ptx_ast import Imm, Vec
from .ptx_types import type_info
from .tcgen05_mma import build_mma
from .tcgen05_operands import descriptor, each, operand_offsets, tmem_address
from .tmem import (COLUMNS, LANES, AsyncOp, check_cells, commit, commit_many, issue,
                   split, tmem)
from .tmemrace import ld_issued, ld_waited

_U32, _U64 = type_info("u32"), type_info("u64")


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
    if "cta_group::2" in parts and kind not in _PAIR_FORMS:
        ctx.error(f"{ins.opcode}: the emulator runs cta_group::2 for "
                  f"{', '.join(sorted(_PAIR_FORMS))} only")
    builder = _BUILDERS.get(kind)
    if builder is None:
        ctx.error(f"{ins.opcode} is not supported")
    return builder(ctx, ins, parts)


# cta_group::2: the pair's warps allocate together; the emulator runs each CTA's allocation on
# its own (both CTAs allocate alike, so the columns coincide) and checks the peer's columns
# when a pair's product writes them (tcgen05_mma.py)
_PAIR_FORMS = {"alloc", "dealloc", "relinquish_alloc_permit", "mma", "commit"}


# -- allocation ---------------------------------------------------------------------------------
def _alloc(ctx, ins, parts):
    addr = Address(ctx, ins.operands[0], "shared")
    gn = ctx.src(ins.operands[1], _U32)

    def run(st, m):
        tm = tmem(st)
        for ths in _warps(st, m, ins.opcode):
            t0 = int(ths[0])
            n = _uniform(st, each(gn, st, ths), ths, "the column count", ins.opcode)
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
            if st.races is not None and st.races.tmem is not None:
                st.races.tmem.reset(b, np.arange(start, start + n))
            _shared_u32_write(st, addr.space, a, t0, start)     # lane 0, column `start`
    return {"run": run, "sync": "warp", "members": None}


def _dealloc(ctx, ins, parts):
    ga = tmem_address(ctx, ins.operands[0])
    gn = ctx.src(ins.operands[1], _U32)

    def run(st, m):
        tm = tmem(st)
        for ths in _warps(st, m, ins.opcode):
            t0 = int(ths[0])
            a = _uniform(st, each(ga, st, ths), ths, "the address", ins.opcode)
            n = _uniform(st, each(gn, st, ths), ths, "the column count", ins.opcode)
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

        kind = parts[1][6:]

        def wait(st, m):
            for ths in _warps(st, m, ins.opcode):
                if st.races is not None and st.races.tmem is not None:
                    st.races.tmem.wait(st, ths, kind)     # the warp's ld/st finished
                if kind == "ld" and st.tc_ld_regs:
                    ld_waited(st, ths)
        return {"run": wait, "sync": "warp", "members": None}
    if parts[1] not in ("fence::before_thread_sync", "fence::after_thread_sync"):
        ctx.error(f"{ins.opcode} is not supported")
    before = parts[1] == "fence::before_thread_sync"

    def fence(st, m):
        tr = None if st.races is None else st.races.tmem
        if tr is None:
            return
        idx = st.active_index(m)
        w = st.warp_global[idx]
        for k in np.unique(w):
            (tr.fence_before if before else tr.fence_after)(st, idx[w == k])
    return fence


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
    # .pack::16b (ld) / .unpack::16b (st): register j holds the low 16 bits of columns 2j
    # (bits 0-15) and 2j + 1 (bits 16-31); an unpacking store zeroes the cells' upper halves
    packed = ("pack::16b" if load else "unpack::16b") in parts
    if ("unpack::16b" if load else "pack::16b") in parts:
        ctx.error(f"{ins.opcode}: tcgen05.ld packs (.pack::16b), tcgen05.st unpacks "
                  f"(.unpack::16b)")
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
    ga = tmem_address(ctx, where)
    b32 = type_info("b32")
    puts = [ctx.dst(o, b32) for o in regs.items] if load else None
    dests = [ctx.reg(o) for o in regs.items] if load else None
    gets = None if load else [ctx.src(o, b32) for o in regs.items]
    cols = np.arange(2 * n if packed else n)

    def run(st, m):
        tm = tmem(st)
        a_all = np.broadcast_to(np.asarray(ga(st), np.uint64), (st.T,))
        out = np.zeros((st.T, n), np.uint32) if load else None
        vals = None if load else np.stack([each(g, st, slice(None), np.uint32)
                                           for g in gets], -1)
        for ths in _warps(st, m, ins.opcode):
            t0 = int(ths[0])
            a = _uniform(st, a_all[ths], ths, "the tensor memory address", ins.opcode)
            lane, col = split(a)
            warp = int(st.thread_linear[t0]) // 32
            slab = 32 * (warp % 4)
            if lane not in ((slab, slab + 16) if half else (slab,)):
                raise st.error(ExecutionError, f"{ins.opcode}: warp {warp} of the CTA reaches "
                               f"tensor memory lanes {slab}..{slab + 31}; the address names "
                               f"lane {lane}", t0)
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
            if st.races is not None and st.races.tmem is not None and load:
                st.races.tmem.warp_access(st, t0, b, lanes, where_cols, False)
            if load:
                got = tm.cells[b][lanes[:, None], where_cols]
                if packed:
                    got = (got[:, 0::2] & np.uint32(0xFFFF)) | (got[:, 1::2] << np.uint32(16))
                out[ths] = got
            else:
                v = vals[ths]
                if packed:
                    v = np.stack([v & np.uint32(0xFFFF), v >> np.uint32(16)],
                                 -1).reshape(v.shape[0], -1)
                if st.races is not None and st.races.tmem is not None:
                    # the cells that keep their value: another warp's unordered store of
                    # the same value (a replicated layout) is no race
                    same = tm.cells[b][lanes[:, None], where_cols] == v
                    st.races.tmem.warp_access(st, t0, b, lanes, where_cols, True,
                                              (lanes, where_cols, same))
                tm.cells[b][lanes[:, None], where_cols] = v
        if load:
            for j, put in enumerate(puts):
                put(st, out[:, j], m)
            if st.races is not None and st.races.strict:
                ld_issued(st, dests, st.active_index(m), ins.line)
    return {"run": run, "sync": "warp", "members": None}


# -- tcgen05.commit -------------------------------------------------------------------------------
def _commit(ctx, ins, parts):
    """`tcgen05.commit...mbarrier::arrive::one [mbar]`, or with `.multicast::cluster [mbar],
    ctaMask`: the arrival goes to the mbarrier at mbar's offset in every CTA of the cluster
    whose rank's bit is set in the 16-bit mask."""
    if "mbarrier::arrive::one" not in parts:
        ctx.error(f"{ins.opcode}: expected .mbarrier::arrive::one")
    multicast = "multicast::cluster" in parts
    if len(ins.operands) != (2 if multicast else 1):
        ctx.error(f"{ins.opcode}: expected [mbar]" + (", ctaMask" if multicast else ""))
    space = "shared_cluster" if "shared::cluster" in parts else "shared"
    addr = Address(ctx, ins.operands[0], space)
    gmask = ctx.src(ins.operands[1], type_info("u16")) if multicast else None

    def run(st, m):
        idx = st.active_index(m)
        a = np.broadcast_to(np.asarray(addr.get(st), np.uint64), (st.T,))[idx]
        masks = None if gmask is None else each(gmask, st, idx)
        for k, t in enumerate(idx.tolist()):
            (region, _, off, _), = locate(st, addr.space, a[k:k + 1], idx[k:k + 1], 8, 8)
            if region != "shared":
                raise st.error(MemoryFault, "mbarrier objects must be in shared memory", t)
            elem = int(off[0]) // 8
            if masks is None:
                commit(st, t, elem, ins.line)
                continue
            c = st.geom.cluster
            csize = c[0] * c[1] * c[2] if c else 1
            mask = int(masks[k])
            if mask >> csize:
                raise st.error(ExecutionError, f"{ins.opcode}: ctaMask {mask:#x} names CTAs "
                               f"outside the cluster of {csize}", t)
            # the same offset in each named CTA (consecutive blocks of the batch)
            base = elem - (int(st.block_in_batch[t]) % csize) * (st.shared_stride // 8)
            commit_many(st, t, [base + r * (st.shared_stride // 8) for r in range(csize)
                                if mask >> r & 1], ins.line)
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
    ga = tmem_address(ctx, ins.operands[0])
    gs = ctx.src(ins.operands[1], _U64)

    def run(st, m):
        idx = st.active_index(m)
        a_all, s_all = each(ga, st, idx), each(gs, st, idx)
        for k, t in enumerate(idx.tolist()):
            lane, col = split(int(a_all[k]))
            b = int(st.block_in_batch[t])
            f = descriptor(st, int(s_all[k]), t, "source", ins.opcode)
            # the source: `rows` K-major rows of `nbytes` bytes in the canonical layout
            off = operand_offsets(st, f, rows, nbytes, 1, True, t)
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
            if st.races is not None and st.races.tmem is not None:
                st.races.tmem.tc_access(st, t, b, lanes, cols, clk, True, "the tcgen05.cp")

            def compute(st, off=off, b=b, dst=dst, col=col):
                data = st.shared[off].reshape(rows, nbytes).copy().view(np.uint32)
                for d in dst:
                    tmem(st).cells[b, d:d + rows, col:col + nbytes // 4] = data
            issue(st, AsyncOp(t, ins.line, compute, b, lanes, cols, clk, pipe=True))
    return run


def _shift(ctx, ins, parts):
    if "down" not in parts:
        ctx.error(f"{ins.opcode}: expected .down")
    ga = tmem_address(ctx, ins.operands[0])

    def run(st, m):
        idx = st.active_index(m)
        a_all = each(ga, st, idx)
        for k, t in enumerate(idx.tolist()):
            lane, col = split(int(a_all[k]))
            if lane % 32:
                raise st.error(ExecutionError, f"{ins.opcode}: the lane ({lane}) must be a "
                               f"multiple of 32", t)
            b = int(st.block_in_batch[t])
            cols = col + np.arange(8)                  # 256 bits of each row
            check_cells(st, b, np.arange(0), cols, t, ins.opcode)
            clk = 0
            if st.races is not None and st.races.tmem is not None:
                clk = int(st.races.wgmma_issue(st, [t])[0])
                st.races.tmem.tc_access(st, t, b, lane + np.arange(32), cols, clk, True,
                                        "the tcgen05.shift")

            def compute(st, b=b, lane=lane, col=col):
                c = tmem(st).cells[b, lane:lane + 32, col:col + 8]
                c[1:] = c[:-1].copy()                  # rows 0..30 move down one lane
            issue(st, AsyncOp(t, ins.line, compute, b, lane + 1 + np.arange(31), cols, clk,
                              pipe=True))
    return run


_BUILDERS = {"alloc": _alloc, "dealloc": _dealloc, "relinquish_alloc_permit": _relinquish,
             "ld": _ld_st, "st": _ld_st, "commit": _commit, "mma": build_mma, "cp": _cp,
             "shift": _shift, "wait::ld": _no_op, "wait::st": _no_op,
             "fence::before_thread_sync": _no_op, "fence::after_thread_sync": _no_op}
