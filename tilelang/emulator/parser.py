"""Parser for the PTX subset that LLVM's NVPTX back end (and our inline asm) emits.

The parser works on a token stream with line numbers. Statements inside function bodies end at
`;`; nested `{ }` scopes get their own `.reg`/`.param` names and labels, which the parser renames
to unique names so later stages see one flat namespace per function.
"""

from __future__ import annotations

import re
from dataclasses import replace

from .errors import PTXParseError
from .ptx_ast import (Addr, Function, Imm, Instr, Module, Not, PredPair, Reg, Sink, Sym,
                      TensorAddr, Vec, VarDecl)

_TOKEN = re.compile(r"""
    (?P<ws>[ \t\r\f\v]+)
  | (?P<nl>\n)
  | (?P<lcom>//[^\n]*)
  | (?P<bcom>/\*.*?\*/)
  | (?P<str>"(?:[^"\\\n]|\\.)*")
  | (?P<num>0[fF][0-9a-fA-F]{8}|0[dD][0-9a-fA-F]{16}|0[xX][0-9a-fA-F]+U?
            |[0-9]+\.[0-9]*(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+|[0-9]+U?)
  | (?P<ident>[%$]?[A-Za-z_$][\w$]*(?:\.[\w$]+(?:::[\w$]+)*)*)
  | (?P<dir>\.[A-Za-z_][\w]*)
  | (?P<punct>[{}()\[\];,:<>@!+\-|=*])
""", re.S | re.X)

LAUNCH_DIRECTIVES = {".maxntid", ".reqntid", ".minnctapersm", ".maxnreg", ".explicitcluster",
                     ".reqnctapercluster", ".maxclusterrank", ".blocksareclusters",
                     ".maxnctapersm", ".noreturn", ".pragma"}
_SPACES = {".global": "global", ".shared": "shared", ".const": "const", ".local": "local",
           ".param": "param"}


def tokenize(text: str) -> list:
    """Split PTX into (kind, text, line) tokens, dropping whitespace and comments."""
    toks, line, pos = [], 1, 0
    n = len(text)
    while pos < n:
        m = _TOKEN.match(text, pos)
        if m is None:
            raise PTXParseError(f"unexpected character {text[pos]!r}", line)
        kind = m.lastgroup
        s = m.group()
        if kind == "nl":
            line += 1
        elif kind in ("lcom", "ws"):
            pass
        elif kind == "bcom":
            line += s.count("\n")
        else:
            toks.append((kind, s, line))
        pos = m.end()
    toks.append(("eof", "", line))
    return toks


class _Parser:
    def __init__(self, text: str):
        self.toks = tokenize(text)
        self.i = 0
        self.module = Module()

    # -- token helpers --------------------------------------------------------------------
    def peek(self, k: int = 0):
        return self.toks[min(self.i + k, len(self.toks) - 1)]

    def next(self):
        t = self.toks[self.i]
        self.i += 1
        return t

    def at(self, s: str) -> bool:
        return self.peek()[1] == s

    def accept(self, s: str) -> bool:
        if self.at(s):
            self.i += 1
            return True
        return False

    def expect(self, s: str):
        t = self.next()
        if t[1] != s:
            raise PTXParseError(f"expected {s!r}, found {t[1] or 'end of file'!r}", t[2])
        return t

    def error(self, msg: str, tok=None):
        raise PTXParseError(msg, (tok or self.peek())[2])

    def int_tok(self) -> int:
        t = self.next()
        if t[0] != "num":
            self.error(f"expected an integer, found {t[1]!r}", t)
        return parse_int(t[1])

    # -- module level ---------------------------------------------------------------------
    def parse(self) -> Module:
        mod = self.module
        while self.peek()[0] != "eof":
            t = self.peek()
            s = t[1]
            if s == ".version":
                self.next()
                mod.version = self.next()[1]
            elif s == ".target":
                self.next()
                names = [self.next()[1]]
                while self.accept(","):
                    names.append(self.next()[1])
                mod.target = tuple(names)
            elif s == ".address_size":
                self.next()
                mod.address_size = self.int_tok()
            elif s == ".file":
                toks = self.line_tokens()
                if len(toks) >= 3 and toks[1][0] == "num" and toks[2][1].startswith('"'):
                    mod.files[int(toks[1][1])] = toks[2][1].strip('"')
            elif s == ".loc":
                self.skip_line()
            elif s == ".pragma":
                self.skip_statement()
            elif s == ".section":
                self.next()
                self.next()
                self.skip_braces()
            elif s in (".visible", ".extern", ".weak", ".common") or s in (".entry", ".func") \
                    or s in _SPACES:
                self.parse_toplevel_decl()
            elif s == ";":
                self.next()
            else:
                self.error(f"unexpected {s!r} at module level")
        return mod

    def line_tokens(self) -> list:
        """The tokens of a debug directive's line (it ends at the line end, with no `;`)."""
        first = self.next()
        out = [first]
        while self.peek()[2] == first[2] and self.peek()[0] != "eof" and not self.at(";"):
            out.append(self.next())
        self.accept(";")
        return out

    def skip_line(self):
        """Debug directives (.file, .loc) end at the end of their line, with no `;`."""
        line = self.next()[2]
        while self.peek()[2] == line and self.peek()[0] != "eof" and not self.at(";"):
            self.next()
        self.accept(";")

    def skip_statement(self):
        while not self.at(";") and self.peek()[0] != "eof":
            self.next()
        self.accept(";")

    def skip_braces(self):
        self.expect("{")
        depth = 1
        while depth:
            t = self.next()
            if t[0] == "eof":
                self.error("unterminated '{'", t)
            depth += {"{": 1, "}": -1}.get(t[1], 0)

    def parse_toplevel_decl(self):
        extern = False
        while self.peek()[1] in (".visible", ".extern", ".weak", ".common"):
            extern |= self.next()[1] == ".extern"
        s = self.peek()[1]
        if s in (".entry", ".func"):
            self.parse_function(extern)
        elif s in _SPACES:
            v = self.parse_var(extern)
            self.expect(";")
            self.module.variables.append(v)
        else:
            self.error(f"unexpected {s!r} after linkage directive")

    def parse_var(self, extern: bool, allow_init: bool = True) -> VarDecl:
        """`.space [.align N] [.ptr ...] .type name[[K]] [= init]` (without the `;`)."""
        t = self.next()
        space = _SPACES[t[1]]
        align, typ = None, None
        while self.peek()[0] == "dir":
            d = self.next()[1]
            if d == ".align":
                align = self.int_tok()
            elif d in (".ptr", ".global", ".shared", ".const", ".local", ".v2", ".v4"):
                continue
            else:
                typ = d[1:]
        if typ is None:
            self.error("variable declaration without a type", t)
        nt = self.next()
        if nt[0] != "ident":
            self.error(f"expected a variable name, found {nt[1]!r}", nt)
        name, count = nt[1], None
        if self.accept("<"):                  # `.param` arrays of this form do not occur
            self.error("parameterized variable names are not supported", nt)
        while self.accept("["):
            if self.accept("]"):
                count = 0
            else:
                k = self.int_tok()
                self.expect("]")
                count = k if count is None else count * k
        init = None
        if self.accept("="):
            if not allow_init:
                self.error("initializer not allowed here", nt)
            init = tuple(self.parse_initializer())
        from .ptx_ast import type_size
        try:
            esize = type_size(typ)
        except (KeyError, IndexError):
            self.error(f"unknown type .{typ}", t)
        return VarDecl(name, space, typ, count, align or esize, init, extern, t[2])

    def parse_initializer(self) -> list:
        if self.accept("{"):
            vals = []
            while not self.accept("}"):
                vals.extend(self.parse_initializer())
                self.accept(",")
            return vals
        neg = self.accept("-")
        t = self.next()
        if t[0] not in ("num", "ident"):
            self.error(f"bad initializer {t[1]!r}", t)
        if t[0] == "ident":                   # generic(sym) / sym address initializers
            self.error("address initializers are not supported", t)
        return [("-" if neg else "") + t[1]]

    def parse_function(self, extern: bool):
        kt = self.next()
        kind = kt[1][1:]
        rets = []
        if kind == "func" and self.at("("):
            rets = self.parse_param_list()
        nt = self.next()
        if nt[0] != "ident":
            self.error(f"expected a function name, found {nt[1]!r}", nt)
        params = self.parse_param_list() if self.at("(") else []
        directives = {}
        while self.peek()[0] == "dir" and self.peek()[1] in LAUNCH_DIRECTIVES:
            d = self.next()[1]
            if d == ".pragma":
                directives.setdefault(".pragma", []).append(self.next()[1])
                self.accept(";")
                continue
            vals = []
            if self.peek()[0] == "num":
                vals.append(self.int_tok())
                while self.accept(","):
                    vals.append(self.int_tok())
            directives[d] = tuple(vals)
        fn = Function(nt[1], kind, params, rets, {}, [], [], {}, directives, kt[2])
        if self.accept(";"):
            fn.defined = False
        else:
            if not self.at("{"):
                self.error(f"expected '{{' to open the body of {nt[1]}")
            _BodyParser(self, fn).parse_body()
        old = self.module.functions.get(fn.name)
        if old is None or not old.defined:
            self.module.functions[fn.name] = fn

    def parse_param_list(self) -> list:
        self.expect("(")
        out = []
        while not self.accept(")"):
            if not self.at(".param") and not self.at(".reg"):
                self.error(f"expected .param, found {self.peek()[1]!r}")
            if self.at(".reg"):
                self.next()
                self.toks[self.i - 1] = ("dir", ".param", self.toks[self.i - 1][2])
                self.i -= 1
            out.append(self.parse_var(False, allow_init=False))
            self.accept(",")
        return out


class _BodyParser:
    """Parses one function body: declarations, labels, instructions and nested scopes."""

    def __init__(self, p: _Parser, fn: Function):
        self.p, self.fn = p, fn
        self.scopes = [{}]        # name -> unique name (registers and scoped .param vars)
        self.counter = 0
        self.pending_labels = []
        self.label_lines = {}
        # labels are scoped like registers (PTX ISA: a label is visible in the block that
        # declares it and the blocks inside it), so two inline-asm blocks may each define
        # `waitLoop:`. Each nested scope has an id; its labels are stored as `name@Lid`, and
        # branch targets are resolved once the body is read (labels may come later).
        self.scope_ids = [0]
        self.scope_labels = {}    # (scope id, name) -> unique name
        self.branch_refs = []     # (instruction index, scope chain, label, line)

    def rename(self, name: str) -> str:
        for sc in reversed(self.scopes):
            if name in sc:
                return sc[name]
        return name

    def declare(self, name: str) -> str:
        uniq = name
        if len(self.scopes) > 1 or name in self.fn.regs:
            self.counter += 1
            uniq = f"{name}@{self.counter}"
        self.scopes[-1][name] = uniq
        return uniq

    def parse_body(self):
        p = self.p
        p.expect("{")
        depth = 1
        while True:
            t = p.peek()
            s = t[1]
            if t[0] == "eof":
                p.error("unterminated function body", t)
            if s == "{":
                p.next()
                self.scopes.append({})
                self.counter += 1
                self.scope_ids.append(self.counter)
                depth += 1
            elif s == "}":
                p.next()
                depth -= 1
                self.scopes.pop()
                self.scope_ids.pop()
                if depth == 0:
                    break
            elif s == ".reg":
                self.parse_reg_decl()
            elif s in _SPACES:
                v = p.parse_var(False)
                p.expect(";")
                uniq = self.declare(v.name) if v.space == "param" else v.name
                v = VarDecl(uniq, v.space, v.type, v.count, v.align, v.init, v.extern, v.line)
                if v.space in ("global", "const"):
                    p.module.variables.append(v)
                else:
                    self.fn.locals.append(v)
            elif s == ".loc":
                toks = p.line_tokens()      # .loc file line column: the next instructions'
                if len(toks) >= 3 and toks[1][0] == "num" and toks[2][0] == "num":
                    self.fn.locs[len(self.fn.instrs)] = (int(toks[1][1]), int(toks[2][1]))
            elif s == ".file":
                p.skip_line()
            elif s == ".pragma":
                p.skip_statement()
            elif s == ";":
                p.next()
            elif s == ".branchtargets":
                self.parse_branchtargets(t)
            elif t[0] == "ident" and p.peek(1)[1] == ":" and not s.startswith("%"):
                p.next()
                p.next()
                scope = self.scope_ids[-1]
                uniq = s if scope == 0 else f"{s}@L{scope}"
                if (scope, s) in self.scope_labels or uniq in self.fn.labels:
                    p.error(f"label {s} defined twice", t)
                self.scope_labels[(scope, s)] = uniq
                self.fn.labels[uniq] = len(self.fn.instrs)
                self.last_label = uniq
            else:
                self.parse_instr()
        self.resolve_branches()
        for name, ln in self.label_lines.items():
            if name not in self.fn.labels:
                raise PTXParseError(f"undefined label {name}", ln)

    def resolve_branches(self):
        """Point each branch at the innermost enclosing scope's label of its name."""
        for k, chain, name, line in self.branch_refs:
            uniq = next((self.scope_labels[(sc, name)] for sc in reversed(chain)
                         if (sc, name) in self.scope_labels), None)
            if uniq is None:
                raise PTXParseError(f"undefined label {name}", line)
            ins = self.fn.instrs[k]
            self.fn.instrs[k] = replace(ins, operands=(Sym(uniq),) + ins.operands[1:])

    def parse_branchtargets(self, t):
        """`$L_brx_0: .branchtargets L1, L2, ...;` — the jump table of a brx.idx."""
        p = self.p
        p.next()
        name = getattr(self, "last_label", None)
        if name is None or self.fn.labels.get(name) != len(self.fn.instrs):
            p.error(".branchtargets must follow its label", t)
        del self.fn.labels[name]
        labels = [p.next()[1]]
        while p.accept(","):
            labels.append(p.next()[1])
        p.expect(";")
        for lab in labels:
            self.label_lines.setdefault(lab, t[2])
        self.fn.branchtargets[name] = labels

    def parse_reg_decl(self):
        p = self.p
        t = p.next()
        typ = None
        while p.peek()[0] == "dir":
            d = p.next()[1]
            if d in (".v2", ".v4"):
                p.error("vector registers are not supported", t)
            typ = d[1:]
        if typ is None:
            p.error(".reg without a type", t)
        while True:
            nt = p.next()
            if nt[0] != "ident":
                p.error(f"expected a register name, found {nt[1]!r}", nt)
            if p.accept("<"):
                k = p.int_tok()
                p.expect(">")
                for j in range(k):
                    self.fn.regs[self.declare(f"{nt[1]}{j}")] = typ
            else:
                self.fn.regs[self.declare(nt[1])] = typ
            if not p.accept(","):
                break
        p.expect(";")

    def parse_instr(self):
        p = self.p
        guard = None
        first = p.peek()
        if p.accept("@"):
            neg = p.accept("!")
            g = p.next()
            reg = self.reg_operand(g)
            if not isinstance(reg, Reg):
                p.error(f"guard must be a predicate register, found {g[1]!r}", g)
            guard = (reg, neg)
        ot = p.next()
        if ot[0] != "ident":
            p.error(f"expected an instruction, found {ot[1]!r}", ot)
        opcode = ot[1]
        if opcode.split(".")[0] == "call":
            self.fn.instrs.append(self.parse_call(opcode, guard, first[2]))
            return
        ops = []
        if not p.at(";"):
            ops.append(self.operand())
            while p.accept(","):
                ops.append(self.operand())
        p.expect(";")
        if opcode.split(".")[0] == "bra" and ops and isinstance(ops[0], Sym):
            self.branch_refs.append((len(self.fn.instrs), tuple(self.scope_ids), ops[0].name,
                                     first[2]))
        elif opcode.split(".")[0] == "brx" and ops and isinstance(ops[0], Sym):
            self.label_lines.setdefault(ops[0].name, first[2])
        self.fn.instrs.append(Instr(opcode, tuple(ops), guard, first[2]))

    def parse_call(self, opcode, guard, line):
        p = self.p
        rets = ()
        if p.at("("):
            rets = self.name_list()
            p.expect(",")
        ct = p.next()
        callee = ct[1]
        args = ()
        if p.accept(","):
            if p.at("("):
                args = self.name_list()
            if p.accept(","):               # prototype for indirect calls
                p.next()
        p.expect(";")
        return Instr(opcode, (), guard, line,
                     call=(rets, Reg(self.rename(callee)) if callee.startswith("%") else callee,
                           args))

    def name_list(self) -> tuple:
        p = self.p
        p.expect("(")
        out = []
        while not p.accept(")"):
            out.append(self.operand())
            p.accept(",")
        return tuple(out)

    def reg_operand(self, t):
        if t[0] != "ident":
            self.p.error(f"expected a register, found {t[1]!r}", t)
        name = self.rename(t[1])
        if t[1].startswith("%") or name in self.fn.regs:
            return Reg(name)
        return Sym(name)

    def operand(self):
        p = self.p
        t = p.next()
        s = t[1]
        if s == "[":
            base, off = None, 0
            if p.peek()[0] == "num":
                base = Imm(p.next()[1])
            else:
                base = self.reg_operand(p.next())
            while p.peek()[1] in ("+", "-"):
                sign = -1 if p.next()[1] == "-" else 1
                if p.accept("-"):
                    sign = -sign
                off += sign * p.int_tok()
            if p.accept(","):               # [tensorMap, {coords}] of cp.async.bulk.tensor
                coords = self.operand()
                p.expect("]")
                if not isinstance(coords, Vec):
                    p.error("expected {coordinates} after the tensor map", t)
                return TensorAddr(Addr(base, off), coords)
            p.expect("]")
            return Addr(base, off)
        if s == "{":
            items = []
            while not p.accept("}"):
                items.append(self.operand())
                p.accept(",")
            return Vec(tuple(items))
        if s == "-":
            nt = p.next()
            if nt[0] != "num":
                p.error(f"expected a number after '-', found {nt[1]!r}", nt)
            return Imm("-" + nt[1])
        if s == "!":
            return Not(self.reg_operand(p.next()))
        if t[0] == "num":
            return Imm(s)
        if t[0] == "ident":
            if s == "_":
                return Sink()
            op = self.reg_operand(t)
            if p.accept("|"):
                return PredPair(op, self.reg_operand(p.next()))
            return op
        p.error(f"unexpected {s!r} in operand", t)


def parse_int(text: str) -> int:
    t = text.rstrip("U")
    neg = t.startswith("-")
    t = t.lstrip("-")
    v = int(t, 16) if t[:2] in ("0x", "0X") else int(t, 8) if len(t) > 1 and t[0] == "0" \
        and t.isdigit() else int(t)
    return -v if neg else v


def parse_ptx(text: str) -> Module:
    """Parse PTX text into a `Module`; raises `PTXParseError` naming the line."""
    return _Parser(text).parse()
