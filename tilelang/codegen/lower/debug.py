"""`print` and `assert` (builtins_debug.py).

print: one `vprintf` call per block (the owner of a scalar: virtual thread 0 of the primary
threads), so the line is whole even when blocks print at once. The format is built at compile
time: `[block (%d, %d, %d)] ` from %ctaid, the literal text (`{{`/`}}` unescaped, `%` doubled),
one conversion per value and a newline. Values print as the interpreter prints them
(`str(np.asarray(v))`):
- loose constants: their text, at compile time;
- integers: `%d`/`%u` (8-32 bits), `%lld`/`%llu` (64 bits); bool: `True`/`False` (`%s`);
- floats: `%s` of a local buffer written by emit/format.py (NumPy's shortest digits and its
  positional/scientific choice); bf16, tf32 and f8 print as the f32 value they hold, as in the
  interpreter.
Tiles print in NumPy's nesting with one space between elements and no padding:
`[[1 2]\\n [3 4]]`, blank lines between blocks of a 3-D tile; a tile of more than 1000 elements
shows the first and last 3 items of every axis around `...` (NumPy's threshold and edge items).
Each element uses the scalar text above, so this equals NumPy's `str` whenever NumPy needs no
padding (elements of equal width) and no line wrapping (75 columns); NumPy's common float
precision (`[1.  2.5]`) is not reproduced. A tile spread over threads is first staged in shared
memory (exact mode); the printing thread reads the elements shown.

assert: every thread checks the elements it holds and calls
`__assertfail(msg, file, line, kernel, 1)` (CUDA's device assert) when one is false; the message
is the user's, else "assertion failed" (the interpreter's text), with the source file and line.
"""

from __future__ import annotations

import weakref
from math import prod

import llvmlite.ir as ir

from tilelang.codegen.layouts.distributed import Layout
from tilelang.codegen.emit.format import BUF_BYTES, FORMATS, format_function
from tilelang.codegen.emit.kernel import I1, I8, I32, I64, KernelEmitter, TileVal
from tilelang.codegen.emit.sync import padded, stage
from tilelang.codegen.lower.table import lowers
from tilelang.codegen.lower.memory import gated
from tilelang.codegen.scalar.float_text import float_text
from tilelang.codegen.scalar.rounding import round_to
from tilelang.ir.ops import BuiltinOp
from tilelang.ir.values import Value
from tilelang.sema.builtins_debug import _PLACEHOLDER
from tilelang.sema.constants import ConstValue
from tilelang.sema.types import F32, DType

PTR = ir.PointerType(I8)
THRESHOLD, EDGE = 1000, 3      # NumPy's print options: summarize above 1000, 3 edge items


# ---------------------------------------------------------------------------------------------
# Compile-time layout of the text

def split_format(fmt: str) -> list[str | None]:
    """Literal pieces and None for each `{}`."""
    out: list[str | None] = []

    def add(p: str | None) -> None:
        if p is not None and out and out[-1] is not None:
            out[-1] += p
        elif p != "":
            out.append(p)
    last = 0
    for m in _PLACEHOLDER.finditer(fmt):
        add(fmt[last:m.start()])
        add({"{{": "{", "}}": "}"}.get(m.group()))
        last = m.end()
    add(fmt[last:])
    return out


def tile_template(shape: tuple[int, ...]) -> list[str | int]:
    """The text of a tile as literal pieces and element linear indices (module docstring)."""
    summarize = prod(shape) > THRESHOLD

    def items(n: int) -> list[int | None]:
        if summarize and n > 2 * EDGE:
            return list(range(EDGE)) + [None] + list(range(n - EDGE, n))
        return list(range(n))

    def rec(depth: int, base: int) -> list[str | int]:
        n = shape[depth]
        stride = prod(shape[depth + 1:])
        rest = len(shape) - depth
        sep = " " if rest == 1 else "\n" * (rest - 1) + " " * (depth + 1)
        out: list[str | int] = ["["]
        for k, i in enumerate(items(n)):
            if k:
                out.append(sep)
            if i is None:
                out.append("...")
            elif rest == 1:
                out.append(base + i)
            else:
                out += rec(depth + 1, base + i * stride)
        out.append("]")
        return out
    return rec(0, 0) if shape else [0]


def const_text(c: ConstValue) -> str:
    """How the interpreter prints an inline constant (its `_const_value`, then `str` of it as
    a 0-d array), without NumPy: loose floats print as f64; bf16, tf32 and f8 as the f32 value
    they hold; integers wrap to their dtype as NumPy's cast does."""
    v, dt = c.value, c.dtype
    if dt is None:
        return float_text(v, "f64") if isinstance(v, float) else str(v)
    if dt.is_bool:
        return str(bool(v))
    if dt.is_int:
        w = int(v) % (1 << dt.bits)
        return str(w - (1 << dt.bits) if dt.signed and w > dt.max else w)
    fmt = dt.name if dt.name in ("f16", "f64") else "f32"
    return float_text(round_to(float(v), dt), fmt)


def _escape(text: str) -> str:
    return text.replace("%", "%%")


# ---------------------------------------------------------------------------------------------
# Run-time pieces

class _Printf:
    """Builds one vprintf call: format text and the argument struct's fields."""

    def __init__(self, kern: KernelEmitter):
        self.kern = kern
        self.fmt: list[str] = []
        self.fields: list[ir.Value] = []
        self.text_bufs = 0

    def literal(self, text: str) -> None:
        self.fmt.append(_escape(text))

    def value(self, v: ir.Value, dtype: DType, buf_at) -> None:
        """One scalar element (in its compute type); `buf_at(k)` gives the k-th text buffer."""
        kern, b = self.kern, self.kern.builder
        if dtype.is_bool:
            t, f = _cstring(kern, "True"), _cstring(kern, "False")
            self.fmt.append("%s")
            self.fields.append(b.select(v, t, f))
        elif dtype.is_int:
            if dtype.bits == 64:
                self.fmt.append("%lld" if dtype.signed else "%llu")
                self.fields.append(v)
            else:
                self.fmt.append("%d" if dtype.signed else "%u")
                self.fields.append(b.sext(v, I32) if dtype.signed and dtype.bits < 32 else
                                   b.zext(v, I32) if dtype.bits < 32 else v)
        else:
            name = dtype.name
            if name not in FORMATS:
                v, name = kern.se.cast(v, dtype, F32), "f32"   # bf16/tf32/f8: their f32 value
            buf = buf_at(self.text_bufs)
            self.text_bufs += 1
            b.call(format_function(kern.module, FORMATS[name]), [v, buf])
            self.fmt.append("%s")
            self.fields.append(buf)

    def call(self) -> None:
        kern, b = self.kern, self.kern.builder
        fmt = _cstring(kern, "".join(self.fmt))
        vprintf = kern.se.declare("vprintf", I32, [PTR, PTR])
        if not self.fields:
            b.call(vprintf, [fmt, ir.Constant(PTR, None)])
            return
        sty = ir.LiteralStructType([f.type for f in self.fields])
        slot = _entry_alloca(kern, sty)
        for i, f in enumerate(self.fields):
            b.store(f, b.gep(slot, [ir.Constant(I32, 0), ir.Constant(I32, i)]))
        b.call(vprintf, [fmt, b.bitcast(slot, PTR)])


_STRINGS: "weakref.WeakKeyDictionary[ir.Module, dict[bytes, ir.GlobalVariable]]" = \
    weakref.WeakKeyDictionary()


def _cstring(kern: KernelEmitter, text: str) -> ir.Value:
    """A generic i8* to a NUL-terminated constant (one per distinct text per module)."""
    data = text.encode("utf-8") + b"\0"
    m = kern.module
    table = _STRINGS.setdefault(m, {})
    g = table.get(data)
    if g is None:
        ty = ir.ArrayType(I8, len(data))
        g = ir.GlobalVariable(m, ty, m.get_unique_name("__tile_str"))
        g.initializer = ir.Constant(ty, bytearray(data))
        g.global_constant = True
        g.linkage = "private"
        g.unnamed_addr = True
        table[data] = g
    return kern.builder.bitcast(g, PTR)


def _entry_alloca(kern: KernelEmitter, ty: ir.Type) -> ir.Value:
    """A stack slot allocated at the kernel's start (static local memory)."""
    b = kern.builder
    here = b.block
    b.position_at_start(kern.entry)
    slot = b.alloca(ty)
    b.position_at_end(here)
    return slot


def _text_buffers(kern: KernelEmitter, count: int):
    """A function k -> i8* of the k-th BUF_BYTES text buffer (allocated on first use)."""
    holder: dict[str, ir.Value] = {}

    def at(k: int) -> ir.Value:
        if "base" not in holder:
            holder["base"] = kern.builder.bitcast(
                _entry_alloca(kern, ir.ArrayType(I8, BUF_BYTES * max(count, 1))), PTR)
        return kern.builder.gep(holder["base"], [ir.Constant(I32, BUF_BYTES * k)])
    return at


def _in_thread(layout: Layout) -> bool:
    return not any(any(bs) for bs in layout.thread_bases)


def _element_readers(kern: KernelEmitter, tiles: list[TileVal]) -> list:
    """For each tile, a function lin -> the element's value in the printing thread. Tiles
    spread over threads are staged in shared memory first, together (all threads take part)."""
    b = kern.builder
    spread = [t for t in tiles if not _in_thread(t.layout)]
    ptrs = dict(zip(map(id, spread), stage(kern, spread))) if spread else {}
    out = []
    for t in tiles:
        if id(t) in ptrs:
            out.append(lambda lin, t=t, p=ptrs[id(t)]: kern.from_storage(
                b.load(b.gep(p, [ir.Constant(I32, padded(lin))])), t.dtype))
            continue
        where: dict[int, int] = {}
        for r in t.layout.owned_regs():
            where.setdefault(t.layout.reg_linear(r), r)
        out.append(lambda lin, t=t, w=where: t.regs[w[lin]])
    return out


@lowers("print")
def print_(kern: KernelEmitter, op: BuiltinOp) -> None:
    pieces = split_format(op.arg_map["fmt"].value)
    args = iter(op.varargs)
    plan: list = []          # str | ("scalar", TileVal) | ("tile", TileVal, template)
    floats = 0
    for p in pieces:
        if p is not None:
            plan.append(p)
            continue
        a = next(args)
        if isinstance(a, ConstValue):
            plan.append(const_text(a))
            continue
        assert isinstance(a, Value)
        t = kern.tile(a)
        if not t.shape:
            plan.append(("scalar", t))
            floats += t.dtype.is_float
            continue
        template = tile_template(tuple(t.shape))
        plan.append(("tile", t, template))
        floats += t.dtype.is_float * sum(1 for x in template if isinstance(x, int))
    tiles = [item[1] for item in plan if isinstance(item, tuple) and item[0] == "tile"]
    readers = dict(zip(map(id, tiles), _element_readers(kern, tiles)))
    def body():
        pf = _Printf(kern)
        bufs = _text_buffers(kern, floats)
        pf.literal("[block (")
        for i, axis in enumerate("xyz"):
            pf.fmt.append("%d")
            pf.fields.append(kern.sreg(f"ctaid.{axis}"))
            pf.literal(", " if i < 2 else ")] ")
        for item in plan:
            if isinstance(item, str):
                pf.literal(item)
            elif item[0] == "scalar":
                pf.value(item[1].value, item[1].dtype, bufs)
            else:
                _, t, template = item
                reader = readers[id(t)]
                for x in template:
                    if isinstance(x, str):
                        pf.literal(x)
                    else:
                        pf.value(reader(x), t.dtype, bufs)
        pf.literal("\n")
        pf.call()
    gated(kern, kern.owner(kern.scalar_layout), body)


@lowers("assert")
def assert_(kern: KernelEmitter, op: BuiltinOp) -> None:
    cond_arg = op.arg_map["cond"]
    msg = op.arg_map["msg"].value if "msg" in op.arg_map else ""
    b = kern.builder
    if isinstance(cond_arg, ConstValue):
        if bool(cond_arg.value):
            return
        ok = ir.Constant(I1, 0)
    else:
        t = kern.tile(cond_arg)
        ok = ir.Constant(I1, 1)
        for r in t.layout.owned_regs():
            ok = b.and_(ok, t.regs[r])
    fail_unless(kern, ok, msg or "assertion failed", op.span)


def fail_unless(kern: KernelEmitter, ok: ir.Value, msg: str, span) -> None:
    """`__assertfail(msg, file, line, kernel, 1)` where i1 `ok` is false (CUDA's device
    assert; the emulator reports a DeviceAssertion with the message)."""
    b = kern.builder
    fail = kern.fn.append_basic_block("assert.fail")
    cont = kern.fn.append_basic_block("assert.ok")
    b.cbranch(ok, cont, fail)
    b.position_at_end(fail)
    fn = kern.se.declare("__assertfail", ir.VoidType(), [PTR, PTR, I32, PTR, I64])
    b.call(fn, [_cstring(kern, msg),
                _cstring(kern, span.file if span else kern.kernel.name),
                ir.Constant(I32, span.line if span else 0),
                _cstring(kern, kern.kernel.name), ir.Constant(I64, 1)])
    b.branch(cont)
    b.position_at_end(cont)

