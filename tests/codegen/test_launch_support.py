"""Helpers for the launch-contract tests (no tests here): build `@launch` attribute mappings with
real spans from a source line, the way the parser will, and PTX from llvmlite modules."""

from __future__ import annotations

import ast
import functools
import re

from tilelang.sema.launch_attrs import AttrValue, ByTarget
from tilelang.diagnostics import Span, remember_source


def _split_top(text: str, start: int) -> list[tuple[str, int]]:
    """Split `text` at top-level commas; return (piece, absolute 0-based offset) pairs."""
    out, depth, begin = [], 0, 0
    for i, ch in enumerate(text + ","):
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif ch == "," and depth == 0:
            piece = text[begin:i]
            lead = len(piece) - len(piece.lstrip())
            if piece.strip():
                out.append((piece.strip(), start + begin + lead))
            begin = i + 1
    return out


def launch(line: str, file: str = "k.tile", line_no: int = 1,
           source: str | None = None) -> dict[str, AttrValue]:
    """Attributes of `@launch(...)` in `line`; each span covers `key = value` (or the flag)."""
    remember_source(file, source if source is not None else line + "\n")
    inner_start = line.index("@launch(") + len("@launch(")
    inner = line[inner_start:line.rindex(")")]

    def span(off: int, length: int) -> Span:
        return Span(file, line_no, off + 1, line_no, off + 1 + length)

    attrs = {}
    for piece, off in _split_top(inner, inner_start):
        if "=" not in piece:
            attrs[piece] = AttrValue(True, span(off, len(piece)))
            continue
        key, value = (s.strip() for s in piece.split("=", 1))
        vstart = off + piece.index(value, len(key))
        m = re.fullmatch(r"by_target\((.*)\)", value)
        if m:
            choices = {}
            for sub, soff in _split_top(m.group(1), vstart + len("by_target(")):
                k, v = (s.strip() for s in sub.split("=", 1))
                choices[k] = AttrValue(_literal(v), span(soff, len(sub)))
            attrs[key] = AttrValue(ByTarget(choices, span(vstart, len(value))),
                                   span(off, len(piece)))
        else:
            attrs[key] = AttrValue(_literal(value), span(off, len(piece)))
    return attrs


def _literal(text: str):
    if text == "true":
        return True
    return ast.literal_eval(text)


@functools.lru_cache(maxsize=1)
def _llvm():
    import llvmlite.binding as llvm
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    return llvm


def gemm_module_ir(name: str = "gemm_kernel") -> str:
    """The seed 000 GEMM's signature (A, B, C, D: u64; M, N, K: u32) with a tiny body that
    stores %tid.x so the kernel is not empty."""
    import llvmlite.ir as ir
    m = ir.Module("gemm")
    m.triple = "nvptx64-nvidia-cuda"
    i64, i32 = ir.IntType(64), ir.IntType(32)
    fn = ir.Function(m, ir.FunctionType(ir.VoidType(), [i64] * 4 + [i32] * 3), name)
    fn.calling_convention = "ptx_kernel"
    tid = ir.Function(m, ir.FunctionType(i32, []), "llvm.nvvm.read.ptx.sreg.tid.x")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    ptr = b.inttoptr(fn.args[3], ir.PointerType(i32, addrspace=1))
    b.store(b.add(b.call(tid, []), fn.args[4]), ptr)
    b.ret_void()
    return str(m)


def llvm_ptx(ir_text: str, cpu: str, features: str) -> str:
    llvm = _llvm()
    tm = llvm.Target.from_triple("nvptx64-nvidia-cuda").create_target_machine(
        cpu=cpu, features=features, opt=2)
    mod = llvm.parse_assembly(ir_text)
    mod.verify()
    return tm.emit_assembly(mod)
