"""Linking one kernel: reachable functions, register numbering, memory layouts, decoding."""

from __future__ import annotations

import numpy as np

from .decode import decode_instr, is_special, Decoded
from .errors import PTXParseError
from .ptx_ast import Function, Instr, Module, Reg
from .ptx_types import type_info

BUILTIN_CALLEES = {"vprintf", "__assertfail", "malloc", "free"}


def _align(x: int, a: int) -> int:
    return (x + a - 1) // a * a


class Program:
    """A kernel decoded for execution, with every function it calls.

    code: one flat list of `Decoded`; the kernel starts at 0, each callee at `entry[name]`.
    """

    def __init__(self, module: Module, kernel: str, global_addrs: dict):
        fn = module.functions.get(kernel)
        if fn is None or fn.kind != "entry":
            raise PTXParseError(f"no kernel (.entry) named {kernel!r}")
        self.module, self.kernel, self.global_addrs = module, fn, global_addrs
        self.functions = self._reachable(module, fn)
        # registers: (function name, register name) -> index into the batch register list
        self.reg_index, self.reg_dtypes = {}, []
        for f in self.functions:
            for name, t in f.regs.items():
                self.reg_index[(f.name, name)] = len(self.reg_dtypes)
                ti = type_info(t) if t != "pred" else type_info("pred")
                self.reg_dtypes.append(ti.bits if t != "pred" else np.dtype(bool))
        self._layout(module)
        self.entry, self.code = {}, []
        base = 0
        for f in self.functions:
            self.entry[f.name] = base
            base += len(f.instrs) + 1            # +1: implicit `ret` at the end of the body
        self.locs = []                           # per pc: (.file number, line) or None
        for f in self.functions:
            loc = None
            for k in range(len(f.instrs) + 1):
                loc = f.locs.get(k, loc)
                self.locs.append(loc)
            for k, ins in enumerate(f.instrs):
                if ins.call is not None:
                    self.code.append(self._decode_call(f, ins))
                else:
                    d = decode_instr(self, f, ins)
                    if d.ctrl == "bra":
                        d = self._resolve_branch(f, ins, d)
                    self.code.append(d)
            self.code.append(Decoded("ret", "ret", f.line, None, ctrl="ret", func=f.name))
        self.directives = fn.directives
        self.lines = np.array([d.line for d in self.code], np.int64)
        from .proxy import wanted
        self.async_proxy = wanted(self)          # check generic writes vs async-proxy reads

    def source_line(self, pc: int) -> str | None:
        """`file:line` of the .loc in effect at pc, when the PTX carries line information."""
        loc = self.locs[pc] if 0 <= pc < len(self.locs) else None
        if loc is None:
            return None
        return f"{self.module.files.get(loc[0], f'file {loc[0]}')}:{loc[1]}"

    # -- structure ------------------------------------------------------------------------
    @staticmethod
    def _reachable(module: Module, kernel: Function) -> list:
        out, seen, todo = [], {kernel.name}, [kernel]
        while todo:
            f = todo.pop(0)
            out.append(f)
            for ins in f.instrs:
                if ins.call is None:
                    continue
                callee = ins.call[1]
                if isinstance(callee, Reg):
                    raise PTXParseError("indirect calls are not supported", ins.line)
                if callee in BUILTIN_CALLEES and callee not in seen:
                    continue
                g = module.functions.get(callee)
                if g is None:
                    raise PTXParseError(f"call to undeclared function {callee}", ins.line)
                if not g.defined:
                    if callee in BUILTIN_CALLEES:
                        continue
                    raise PTXParseError(f"call to external function {callee}, which the "
                                        f"emulator does not provide", ins.line)
                if g.name not in seen:
                    seen.add(g.name)
                    todo.append(g)
        return out

    def _layout(self, module: Module):
        # kernel parameters: natural C layout in the packed argument buffer
        self.kparams, off = {}, 0
        for p in self.kernel.params:
            off = _align(off, p.align)
            self.kparams[p.name] = (off, p.nbytes, p)
            off += p.nbytes
        self.kparam_size = off
        # shared memory: module-level and function-level static variables, then dynamic
        self.shared, off = {}, 0
        dyn = []
        shared_vars = [v for v in module.variables if v.space == "shared"] + \
            [v for f in self.functions for v in f.locals if v.space == "shared"]
        for v in shared_vars:
            if v.extern or v.count == 0:
                dyn.append(v)
                continue
            off = _align(off, max(v.align, 1))
            self.shared[v.name] = off
            off += v.nbytes
        self.static_shared = off
        self.dyn_shared_offset = _align(off, max([16] + [v.align for v in dyn]))
        for v in dyn:
            self.shared[v.name] = self.dyn_shared_offset
        # local memory: one frame per thread holding every function's locals (no recursion)
        self.local, off = {}, 0
        for f in self.functions:
            for v in f.locals:
                if v.space == "local":
                    off = _align(off, max(v.align, 1))
                    self.local[(f.name, v.name)] = off
                    off += v.nbytes
        self.local_size = _align(off, 16)
        # per-thread param slots: callee params/returns, then call-site .param variables; a
        # call-site variable passed to (or returned from) a defined function shares the
        # callee's slot, so calling needs no copies.
        self.pslots, off = {}, 0
        for f in self.functions:
            if f is self.kernel:
                continue
            for v in f.params + f.rets:
                off = _align(off, max(v.align, 1))
                self.pslots[(f.name, v.name)] = (off, v.nbytes)
                off += v.nbytes
        alias = {}
        for f in self.functions:
            for ins in f.instrs:
                if ins.call is None or ins.call[1] in BUILTIN_CALLEES:
                    continue
                g = module.functions[ins.call[1]]
                for ops, decls in ((ins.call[2], g.params), (ins.call[0], g.rets)):
                    for o, v in zip(ops, decls):
                        if hasattr(o, "name"):
                            alias[(f.name, o.name)] = (g.name, v.name)
        for f in self.functions:
            for v in f.locals:
                if v.space != "param":
                    continue
                key = (f.name, v.name)
                if key in alias:
                    o, _ = self.pslots[alias[key]]
                    self.pslots[key] = (o, v.nbytes)
                    continue
                off = _align(off, max(v.align, 1))
                self.pslots[key] = (off, v.nbytes)
                off += v.nbytes
        self.pslot_size = _align(off, 16)

    # -- symbols --------------------------------------------------------------------------
    def symbol(self, fn: Function, name: str, line: int):
        """Where a named variable lives: (space, offset-or-address, size)."""
        if (fn.name, name) in self.pslots:
            off, size = self.pslots[(fn.name, name)]
            return "pslot", off, size
        if fn is self.kernel and name in self.kparams:
            off, size, _ = self.kparams[name]
            return "kparam", off, size
        if (fn.name, name) in self.local:
            return "local", self.local[(fn.name, name)], None
        if name in self.shared:
            return "shared", self.shared[name], None
        if name in self.global_addrs:
            return "global", self.global_addrs[name], None
        raise PTXParseError(f"undefined symbol {name}", line)

    def symbol_address(self, fn: Function, name: str, line: int) -> int:
        space, off, _ = self.symbol(fn, name, line)
        if space == "kparam":                  # byval parameters accessed through a pointer
            from .memory import PARAM_WINDOW
            return PARAM_WINDOW + off
        if space == "pslot":
            raise PTXParseError(f"taking the address of parameter {name} is not supported",
                                line)
        return off

    def check_special(self, name: str, line: int):
        if not is_special(name):
            raise PTXParseError(f"unknown special register {name}", line)

    # -- control flow ---------------------------------------------------------------------
    def _resolve_branch(self, f: Function, ins: Instr, d: Decoded) -> Decoded:
        from dataclasses import replace
        from .ptx_ast import Sym
        if not ins.operands or not isinstance(ins.operands[0], Sym):
            raise PTXParseError("bra needs a label operand", ins.line)
        label = ins.operands[0].name
        if label not in f.labels:
            raise PTXParseError(f"undefined label {label}", ins.line)
        return replace(d, target=self.entry[f.name] + f.labels[label])

    def _decode_call(self, f: Function, ins: Instr) -> Decoded:
        from .ops_call import build_call
        return build_call(self, f, ins)
