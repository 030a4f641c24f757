"""Predicated global accesses: `@p ld.global` / `@p st.global` as inline PTX.

LLVM has no predicated load or store: a conditional access is a branch around it, and the NVPTX
back end keeps the branch (one `bra` per element of an edge tile). Here the access is one
instruction under a predicate; a load's destination registers start as the padding value (tied
operands), so a false predicate leaves the padding without a `selp`.

An access moves `count` words of `bits` each (`ld.global.v4.b32`, `.v2.b64`, `.b16`, ...); the
elements are packed into the words with LLVM bitcasts, which fold away for whole words. One-byte
elements alone are moved as `.b8` through a 16-bit register (PTX has no 8-bit registers).
The asm is volatile with a memory clobber: it must stay ordered with the kernel's other
accesses and barriers, as the plain loads and stores it replaces are.
"""

from __future__ import annotations

import llvmlite.ir as ir

I1 = ir.IntType(1)
I16 = ir.IntType(16)
_REG = {16: "h", 32: "r", 64: "l"}


def _words(nbytes: int, itemsize: int) -> tuple[int, int]:
    """(word bits, word count) of an access of `nbytes` made of `itemsize`-byte elements."""
    if nbytes == 1:
        return 8, 1
    bits = min(nbytes, 8 if itemsize == 8 else 4) * 8
    count = nbytes * 8 // bits
    assert count in (1, 2, 4) and bits * count == nbytes * 8, (nbytes, itemsize)
    return bits, count


def _pack(b: ir.IRBuilder, vals: list[ir.Value], bits: int, count: int) -> list[ir.Value]:
    """Elements (storage type) -> `count` integer words (i16 for a lone byte)."""
    if bits == 8:
        return [b.zext(vals[0], I16)]
    wty = ir.IntType(bits)
    if len(vals) == 1 and count == 1:
        v = vals[0]
        return [v if v.type == wty else b.bitcast(v, wty)]
    vec = ir.Constant(ir.VectorType(vals[0].type, len(vals)), ir.Undefined)
    for k, v in enumerate(vals):
        vec = b.insert_element(vec, v, ir.Constant(ir.IntType(32), k))
    if count == 1:
        return [b.bitcast(vec, wty)]
    words = b.bitcast(vec, ir.VectorType(wty, count))
    return [b.extract_element(words, ir.Constant(ir.IntType(32), k)) for k in range(count)]


def _unpack(b: ir.IRBuilder, words: list[ir.Value], elem: ir.Type, n: int, bits: int):
    if bits == 8:
        return [b.trunc(words[0], elem)]
    if n == 1 and len(words) == 1:
        w = words[0]
        return [w if w.type == elem else b.bitcast(w, elem)]
    wty = ir.IntType(bits)
    if len(words) == 1:
        vec = b.bitcast(words[0], ir.VectorType(elem, n))
    else:
        wv = ir.Constant(ir.VectorType(wty, len(words)), ir.Undefined)
        for k, w in enumerate(words):
            wv = b.insert_element(wv, w, ir.Constant(ir.IntType(32), k))
        vec = b.bitcast(wv, ir.VectorType(elem, n))
    return [b.extract_element(vec, ir.Constant(ir.IntType(32), k)) for k in range(n)]


def _suffix(bits: int, count: int) -> str:
    return (f".v{count}" if count > 1 else "") + f".b{bits}"


def _at(operand: str, imm: int) -> str:
    """An address operand with a constant byte offset folded in (`[%rd4+2048]`)."""
    return f"[{operand}+{imm}]" if imm else f"[{operand}]"      # LLVM's spelling: [%rd4+-8]


def predicated_load(b: ir.IRBuilder, addr: ir.Value, pred: ir.Value, pads: list[ir.Value],
                    itemsize: int, imm: int = 0) -> list[ir.Value]:
    """`len(pads)` consecutive elements at `addr` (i64 or a pointer) plus `imm` bytes where
    `pred` (i1) holds, else `pads` (storage-type values, one per element)."""
    n = len(pads)
    bits, count = _words(n * itemsize, itemsize)
    wregs = _REG[max(bits, 16)]
    wty = ir.IntType(max(bits, 16))
    outs = ", ".join(f"${k}" for k in range(count))
    regs = f"{{{outs}}}" if count > 1 else "$0"
    text = f"@${count + 1} ld.global{_suffix(bits, count)} {regs}, {_at(f'${count}', imm)};"
    cons = ",".join([f"={wregs}"] * count + ["l", "b"] + [str(k) for k in range(count)])
    rty = wty if count == 1 else ir.LiteralStructType([wty] * count)
    fty = ir.FunctionType(rty, [ir.IntType(64), I1] + [wty] * count)
    asm = ir.InlineAsm(fty, text, cons + ",~{memory}", side_effect=True)
    if isinstance(addr.type, ir.PointerType):
        addr = b.ptrtoint(addr, ir.IntType(64))
    res = b.call(asm, [addr, pred] + _pack(b, pads, bits, count))
    words = [res] if count == 1 else [b.extract_value(res, k) for k in range(count)]
    return _unpack(b, words, pads[0].type, n, bits)


def predicated_store(b: ir.IRBuilder, addr: ir.Value, pred: ir.Value, vals: list[ir.Value],
                     itemsize: int, imm: int = 0) -> None:
    """Store consecutive elements `vals` (storage type) at `addr` plus `imm` bytes where
    `pred` (i1) holds."""
    bits, count = _words(len(vals) * itemsize, itemsize)
    wregs = _REG[max(bits, 16)]
    wty = ir.IntType(max(bits, 16))
    ins = ", ".join(f"${k + 2}" for k in range(count))
    regs = f"{{{ins}}}" if count > 1 else "$2"
    text = f"@$1 st.global{_suffix(bits, count)} {_at('$0', imm)}, {regs};"
    cons = ",".join(["l", "b"] + [wregs] * count)
    fty = ir.FunctionType(ir.VoidType(), [ir.IntType(64), I1] + [wty] * count)
    asm = ir.InlineAsm(fty, text, cons + ",~{memory}", side_effect=True)
    if isinstance(addr.type, ir.PointerType):
        addr = b.ptrtoint(addr, ir.IntType(64))
    b.call(asm, [addr, pred] + _pack(b, vals, bits, count))
