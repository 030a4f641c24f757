"""`call`: device functions (through shared param slots) and the built-ins vprintf and
__assertfail."""

from __future__ import annotations

import re

import numpy as np

from .decode import Decoded
from .errors import DeviceAssertion, PTXParseError
from .memory import GLOBAL_BASE, LOCAL_WINDOW, SHARED_WINDOW


def build_call(prog, f, ins) -> Decoded:
    rets, callee, args = ins.call
    if callee == "vprintf":
        run = _vprintf(prog, f, ins, rets, args)
        return Decoded(ins.opcode, "call", ins.line, run, *_guard(prog, f, ins), func=f.name)
    if callee == "__assertfail":
        run = _assertfail(prog, f, ins, args)
        return Decoded(ins.opcode, "call", ins.line, run, *_guard(prog, f, ins), func=f.name)
    if callee in ("malloc", "free"):
        raise PTXParseError(f"device-side {callee} is not supported", ins.line)
    g = prog.module.functions[callee]
    if len(args) != len(g.params) or len(rets) != len(g.rets):
        raise PTXParseError(f"call to {callee} with {len(args)} arguments and {len(rets)} "
                            f"results; it takes {len(g.params)} and returns {len(g.rets)}",
                            ins.line)
    # Argument and result slots alias the callee's own parameter slots (see Program._layout),
    # so the call itself only jumps.
    return Decoded(ins.opcode, "call", ins.line, lambda st, m: None, *_guard(prog, f, ins),
                   ctrl="call", target=prog.entry[callee], func=f.name)


def _guard(prog, f, ins):
    if ins.guard is None:
        return (None, False)
    g, neg = ins.guard
    return (prog.reg_index[(f.name, g.name)], neg)


def _slot(prog, f, op, line):
    sp, off, size = prog.symbol(f, op.name, line)
    if sp != "pslot":
        raise PTXParseError(f"call argument {op.name} is not a .param variable", line)
    return off


def _u64_slot(st, off, idx):
    return np.ascontiguousarray(st.pslots[idx, off:off + 8]).view(np.uint64)[:, 0]


def _read_bytes(st, t, addr, n):
    """Bytes at a generic address for thread t (strings and vprintf argument buffers)."""
    addr = int(addr)
    if LOCAL_WINDOW <= addr < LOCAL_WINDOW + (1 << 32):
        o = t * st.local_size + addr - LOCAL_WINDOW
        return st.local[o:o + n].tobytes()
    if SHARED_WINDOW <= addr < SHARED_WINDOW + (1 << 32):
        o = int(st.block_in_batch[t]) * st.shared_stride + addr - SHARED_WINDOW
        return st.shared[o:o + n].tobytes()
    off = addr - GLOBAL_BASE
    if off < 0 or off >= st.mem.data.size:       # a bad pointer prints as an empty string
        return b""
    return st.mem.data[off:off + n].tobytes()


def _cstring(st, t, addr):
    out = bytearray()
    while len(out) < 4096:
        chunk = _read_bytes(st, t, addr + len(out), 64)
        if not chunk:
            break
        z = chunk.find(b"\0")
        if z >= 0:
            out += chunk[:z]
            break
        out += chunk
    return out.decode("utf-8", "replace")


_CONV = re.compile(r"%([-+ #0]*)(\*|\d+)?(?:\.(\d+))?(hh|h|ll|l|z|j|t)?([diouxXcsfFeEgGpa%])")


def format_printf(fmt: str, read_arg) -> str:
    """C printf formatting where `read_arg(size, kind)` pulls the next packed argument."""
    def repl(mt):
        flags, width, prec, length, conv = mt.groups()
        if conv == "%":
            return "%"
        spec = "%" + flags + (width or "") + ("." + prec if prec else "")
        if conv in "fFeEgGa":
            v = read_arg(8, "f")
            return (spec + (conv if conv != "a" else "e")) % v
        if conv == "s":
            return (spec + "s") % read_arg(8, "s")
        if conv == "p":
            return hex(read_arg(8, "u"))
        size = 8 if length in ("l", "ll", "z", "j", "t") else 4
        v = read_arg(size, "s" if conv in "di" else "u")
        if conv == "c":
            return (spec + "c") % chr(v & 0xFF)
        return (spec + ("d" if conv in "diu" else conv)) % v
    return _CONV.sub(repl, fmt)


def _vprintf(prog, f, ins, rets, args):
    if len(args) != 2:
        raise PTXParseError("vprintf takes two arguments", ins.line)
    fmt_off, buf_off = _slot(prog, f, args[0], ins.line), _slot(prog, f, args[1], ins.line)

    def run(st, m):
        idx = st.active_index(m)
        fmts, bufs = _u64_slot(st, fmt_off, idx), _u64_slot(st, buf_off, idx)
        for t, fa, ba in zip(idx, fmts, bufs):
            t = int(t)
            pos = [0]

            def read_arg(size, kind, t=t, ba=int(ba)):
                p = (pos[0] + size - 1) // size * size     # arguments are naturally aligned
                pos[0] = p + size
                raw = _read_bytes(st, t, ba + p, size)
                if kind == "f":
                    return float(np.frombuffer(raw, np.float64)[0])
                return int.from_bytes(raw, "little", signed=(kind == "s"))

            text = format_printf_with_strings(_cstring(st, t, int(fa)), read_arg, st, t)
            st.out.append(text)
    return run


def format_printf_with_strings(fmt, read_arg, st, t):
    """printf formatting; `%s` arguments are device pointers read from thread t's view."""
    out = []
    last = 0
    for mt in _CONV.finditer(fmt):
        out.append(fmt[last:mt.start()])
        last = mt.end()
        conv = mt.group(5)
        if conv == "s":
            ptr = read_arg(8, "u")
            spec = "%" + mt.group(1) + (mt.group(2) or "") + \
                ("." + mt.group(3) if mt.group(3) else "") + "s"
            out.append(spec % _cstring(st, t, ptr))
        else:
            out.append(format_printf(mt.group(0), read_arg))
    out.append(fmt[last:])
    return "".join(out)


def _assertfail(prog, f, ins, args):
    offs = [_slot(prog, f, a, ins.line) for a in args[:4]]

    def run(st, m):
        idx = st.active_index(m)
        if idx.size == 0:
            return
        t = int(idx[0])
        msg = _cstring(st, t, int(_u64_slot(st, offs[0], idx[:1])[0]))
        file = _cstring(st, t, int(_u64_slot(st, offs[1], idx[:1])[0])) if len(offs) > 1 else ""
        line = int(np.ascontiguousarray(st.pslots[t, offs[2]:offs[2] + 4]).view(np.uint32)[0]) \
            if len(offs) > 2 else 0
        raise st.error(DeviceAssertion, f"device assertion failed: {msg} ({file}:{line})", t)
    return run
