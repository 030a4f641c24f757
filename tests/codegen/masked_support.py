"""Helpers of the predicated-access tests, shared by tests in several folders of tests/codegen:
compile a kernel for given arrays' facts, run it on the emulator and in the reference
interpreter, find a kernel's body in PTX."""

from __future__ import annotations

import numpy as np

from gen_support import Strided, link, run_emulated
from tilelang.codegen.api import ArrayFacts
from tilelang.diagnostics import render_all
from tilelang.driver import compile_source
from tilelang.interp import run_kernel
from tilelang.options import CompileOptions
from tilelang.runtime.args import facts_key


def facts_of(arrays: dict) -> dict:
    """Each array's facts as the emulator holds it (256-byte aligned copies of the base)."""
    out = {}
    for name, a in arrays.items():
        v = a.view if isinstance(a, Strided) else a
        item = v.itemsize
        out[name] = ArrayFacts.from_key(facts_key(
            0 if not isinstance(a, Strided) else a.offset, v.shape,
            tuple(s // item for s in v.strides), item))
    return out


def compile_for(src: str, kernel: str, arrays: dict, defines=None, facts=None):
    res = compile_source(src, "<masked>.tile", CompileOptions(defines=dict(defines or {})),
                         facts={kernel: facts or facts_of(arrays)}, until="ptx")
    assert res.ok, render_all(res.diagnostics)
    link(res.codegen)
    return res


def run(res, kernel: str, args: dict, grid):
    """(emulator outputs, interpreter outputs) on copies of `args`, in the kernel's order."""
    grid = tuple(grid) + (1,) * (3 - len(grid))

    def copy(a):
        if isinstance(a, Strided):
            base = a.base.copy()
            return Strided(base, np.ndarray(a.view.shape, a.view.dtype, buffer=base,
                                            offset=a.offset, strides=a.view.strides))
        return a.copy() if isinstance(a, np.ndarray) else a
    emu = {k: copy(v) for k, v in args.items()}
    ref = {k: copy(v) for k, v in args.items()}
    run_emulated(res.codegen, kernel, list(emu.values()), grid)
    run_kernel(res.ir, {k: (v.view if isinstance(v, Strided) else v) for k, v in ref.items()},
               grid, name=kernel)

    def views(d):
        return {k: (v.view if isinstance(v, Strided) else v) for k, v in d.items()}
    return views(emu), views(ref)


def kernel_body(ptx: str, name: str) -> str:
    return ptx[ptx.index(f".entry {name}("):]
