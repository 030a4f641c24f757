"""Decoding: parsed instructions become closures, once, at module load.

Each opcode family has one builder in an `ops_*` module, registered in `OPS` under the first
part of the opcode (`mul` for `mul.wide.s32`). A builder reads the type suffixes and operands
once and returns a `run(st, mask)` closure; `mask` is None when every thread of the batch is
active (the fast path), else a boolean array over the batch's threads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from . import coverage, targets
from .errors import PTXParseError
from .ptx_ast import Addr, Imm, Not, Reg, Sink, Sym, Vec
from .ptx_types import TYPE_NAMES, TypeInfo, parse_imm, type_info, uint_dtype

OPS: dict = {}
# instructions that change memory whenever they run (st, atom and red count a change only
# where the value changed: see access.store, ops_mem.build_atom)
WRITES = frozenset({"cp", "stmatrix", "mbarrier", "tensormap", "tcgen05"})


def op(*names):
    """Register a builder for one or more opcode roots."""
    def deco(fn):
        for n in names:
            OPS[n] = fn
        return fn
    return deco


@dataclass(frozen=True)
class Decoded:
    opcode: str
    root: str
    line: int
    run: Callable | None
    guard: int | None = None        # register index of the guard predicate
    guard_neg: bool = False
    ctrl: str | None = None         # None, "bra", "exit", "ret", "call", "trap"
    target: int | None = None       # branch target / callee entry
    sync: str | None = None         # "block" (bar.sync) or "warp" (.sync warp ops): threads
    members: Callable | None = None  # wait here for the rest of their block / member lanes
    extra: tuple | None = None      # named barriers: (id getter, count getter, is_arrive)
    targets: tuple | None = None    # brx.idx: jump table (instruction indices)
    index: Callable | None = None   # brx.idx: getter of the per-thread table index
    func: str = ""
    reads: frozenset = frozenset()  # registers read (checked against pending wgmma results)
    dests: frozenset = frozenset()  # registers written (a moved wgmma accumulator: ops_wgmma)
    writes: bool = False            # may change memory (wakes threads parked as spinning)


SPECIAL_PREFIXES = ("%tid", "%ntid", "%ctaid", "%nctaid", "%laneid", "%warpid", "%nwarpid",
                    "%smid", "%nsmid", "%gridid", "%lanemask", "%clock", "%globaltimer",
                    "%cluster", "%nclusterid", "%is_explicit_cluster", "%dynamic_smem_size",
                    "%total_smem_size", "%aggr_smem_size", "%envreg", "%pm", "%warpsz",
                    "%reserved_smem")


def is_special(name: str) -> bool:
    return name.startswith(SPECIAL_PREFIXES)


def to_bits(v, storage: np.dtype):
    """Reinterpret/convert a computed value to a register's storage dtype."""
    v = np.asarray(v)
    if v.dtype == storage:
        return v
    if storage == np.bool_:
        return v != 0
    if v.dtype == np.bool_:
        return v.astype(storage)
    if v.dtype.itemsize == storage.itemsize:
        return v.view(storage)
    if v.dtype.kind == "f":
        v = v.view(uint_dtype(v.dtype.itemsize))
    return v.astype(storage)


class DecodeCtx:
    """What builders need while decoding one function of a program (see executor.Program)."""

    def __init__(self, prog, fn, ins):
        self.prog, self.fn, self.ins = prog, fn, ins
        self.reads = set()
        self.dests = set()

    def error(self, msg: str):
        raise PTXParseError(msg, self.ins.line)

    def type(self, name: str) -> TypeInfo:
        try:
            return type_info(name)
        except KeyError:
            self.error(f"unknown type .{name} in {self.ins.opcode}")

    def types(self, parts) -> list:
        return [self.type(p) for p in parts if p in TYPE_NAMES]

    def reg(self, op) -> int:
        if not isinstance(op, Reg):
            self.error(f"expected a register operand in {self.ins.opcode}, found {op}")
        idx = self.prog.reg_index.get((self.fn.name, op.name))
        if idx is None:
            self.error(f"undefined register {op.name}")
        return idx

    # -- sources --------------------------------------------------------------------------
    def src(self, op, ti: TypeInfo):
        """A getter `st -> array or scalar` of the operand's value typed as `ti`."""
        want = ti.dtype
        if isinstance(op, Imm):
            try:
                c = parse_imm(op.text, ti)
            except ValueError:
                self.error(f"bad immediate {op.text}")
            return lambda st: c
        if isinstance(op, Reg) and is_special(op.name):
            name = op.name
            self.prog.check_special(name, self.ins.line)
            if want == np.uint32:
                return lambda st: st.special(name)
            return lambda st: to_bits(st.special(name), uint_dtype(want.itemsize)).view(want) \
                if want != np.bool_ else st.special(name) != 0
        if isinstance(op, Sym):
            addr = self.prog.symbol_address(self.fn, op.name, self.ins.line)
            c = np.array(addr & ((1 << (8 * ti.size)) - 1), uint_dtype(ti.size)).view(want)[()]
            return lambda st: c
        if isinstance(op, Vec):
            return self.pack_src(op, ti)
        if isinstance(op, Not):
            if ti.kind != "pred":
                self.error("'!' applies to predicates only")
            g = self.src(op.reg, ti)
            return lambda st: np.logical_not(g(st))
        i = self.reg(op)
        self.reads.add(i)
        have = self.prog.reg_dtypes[i]
        if have == want:
            return lambda st: st.regs[i]
        if want == np.bool_:
            if have == np.bool_:
                return lambda st: st.regs[i]
            return lambda st: st.regs[i] != 0
        if have == np.bool_:
            self.error(f"predicate {op.name} used as a .{ti.name} value")
        if have.itemsize == want.itemsize:
            return lambda st: st.regs[i].view(want)
        ud = uint_dtype(want.itemsize)
        if want.kind == "i" and have.itemsize < want.itemsize:
            sd = np.dtype(f"i{have.itemsize}")
            return lambda st: st.regs[i].view(sd).astype(want)
        return lambda st: st.regs[i].astype(ud).view(want)

    def pack_src(self, vec: Vec, ti: TypeInfo):
        """`{%r1, %r2}` read as one wider value (mov.b64 d, {lo, hi})."""
        n = len(vec.items)
        if ti.size % n:
            self.error("vector operand does not divide the type")
        part = type_info(f"b{ti.size * 8 // n}")
        gets = [self.src(o, part) for o in vec.items]
        ud = uint_dtype(ti.size)
        shift = part.size * 8

        def get(st):
            acc = None
            for k, g in enumerate(gets):
                v = np.asarray(g(st)).astype(ud) << ud.type(k * shift)
                acc = v if acc is None else acc | v
            return acc.view(ti.dtype)
        return get

    # -- destinations ---------------------------------------------------------------------
    def dst(self, op, ti: TypeInfo | None = None):
        """A setter `(st, value, mask) -> None` writing the operand register."""
        if isinstance(op, Sink):
            return lambda st, v, m: None
        if isinstance(op, Vec) and ti is not None:
            return self.unpack_dst(op, ti)
        i = self.reg(op)
        self.dests.add(i)
        storage = self.prog.reg_dtypes[i]

        def put(st, v, m):
            v = to_bits(v, storage)
            if m is None:
                st.regs[i] = v if v.ndim else np.full(st.T, v, storage)
            else:
                st.regs[i] = np.where(m, v, st.regs[i])
        return put

    def unpack_dst(self, vec: Vec, ti: TypeInfo):
        n = len(vec.items)
        part = type_info(f"b{ti.size * 8 // n}")
        puts = [self.dst(o, part) for o in vec.items]
        ud = uint_dtype(ti.size)
        pd = uint_dtype(part.size)
        shift = part.size * 8

        def put(st, v, m):
            u = to_bits(v, ud)
            for k, p in enumerate(puts):
                p(st, (u >> ud.type(k * shift)).astype(pd), m)
        return put

    # -- addresses ------------------------------------------------------------------------
    def address(self, op):
        """(kind, value): kind "sym" → (symbol name, offset); "reg" → getter of u64 addresses."""
        if not isinstance(op, Addr):
            self.error(f"expected an address [..] in {self.ins.opcode}")
        b = op.base
        if isinstance(b, Sym):
            return "sym", (b.name, op.offset)
        if isinstance(b, Imm):
            a = parse_imm(b.text, type_info("u64")) + np.uint64(op.offset % (1 << 64))
            return "reg", (lambda st: a)
        i = self.reg(b)
        self.reads.add(i)
        off = np.uint64(op.offset % (1 << 64))
        have = self.prog.reg_dtypes[i]
        if have == np.uint64:
            if op.offset == 0:
                return "reg", (lambda st: st.regs[i])
            return "reg", (lambda st: st.regs[i] + off)
        return "reg", (lambda st: st.regs[i].astype(np.uint64) + off)


def decode_instr(prog, fn, ins) -> Decoded:
    parts = ins.opcode.split(".")
    root = parts[0]
    builder = OPS.get(root)
    if builder is None:
        raise PTXParseError(f"unknown or unsupported instruction {ins.opcode!r}", ins.line)
    verdict = coverage.classify(ins.opcode)
    if not verdict.known:                 # a modifier no builder reads: refuse, never ignore
        raise PTXParseError(f"unsupported instruction {ins.opcode!r}: {verdict.why}", ins.line)
    ctx = DecodeCtx(prog, fn, ins)
    too_new = targets.check(prog.module.target, ins.opcode)
    if too_new:
        raise PTXParseError(too_new, ins.line)
    res = builder(ctx, ins, parts)
    kw = res if isinstance(res, dict) else {"run": res}
    guard, neg = None, False
    if ins.guard is not None:
        g, neg = ins.guard
        guard = ctx.reg(g)
        ctx.reads.add(guard)
        if prog.reg_dtypes[guard] != np.bool_:
            ctx.error(f"guard {g.name} is not a predicate")
    return Decoded(opcode=ins.opcode, root=root, line=ins.line, guard=guard, guard_neg=neg,
                   func=fn.name, reads=frozenset(ctx.reads), dests=frozenset(ctx.dests),
                   writes=root in WRITES and not
                   (root == "mbarrier" and parts[1] in ("test_wait", "try_wait")), **kw)
