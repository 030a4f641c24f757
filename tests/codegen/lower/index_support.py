"""Helpers for the indexing and rearranging code generation tests (no tests here): compile
Tile source for sm_90a (with the runtime's array facts when given), run it on the emulator and
on the reference interpreter, and make deterministic data of any dtype."""

from __future__ import annotations

import pathlib
import sys

import numpy as np

from tilelang.diagnostics import render_all
from tilelang.driver import compile_source
from tilelang.emulator import EmulatorDevice
from tilelang.interp import run_kernel
from tilelang.options import CompileOptions

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "e2e"))
from e2e_support import abi_args, facts_of  # noqa: E402,F401


NP = {"f32": np.float32, "f16": np.float16, "f64": np.float64, "i8": np.int8, "u16": np.uint16,
      "i64": np.int64, "bool": np.bool_}


def build(text: str, defines: dict, facts=None):
    """PTX for sm_90a; `facts` (kernel -> array facts) as the runtime would specialize: a
    ragged array's rows are not vector-aligned, which the default facts assume."""
    res = compile_source(text, "<index>.tile", CompileOptions(defines=defines, target="sm_90a"),
                         until="ptx", facts=facts)
    assert res.ok, render_all(res.diagnostics)
    return res


def emulate(res, name: str, args: dict, grid, bf16=()):
    """`bf16`: names of bf16 arrays (float32 holding bf16 values, as the interpreter takes
    them): the emulator gets their bit patterns, and they come back as float32."""
    dev = EmulatorDevice()
    art = res.codegen.kernel(name)
    dev_args = {k: (np.asarray(v, np.float32).view(np.uint32) >> 16).astype(np.uint16)
                if k in bf16 else v for k, v in args.items()}
    values, ptrs = abi_args(dev, art, dev_args)
    dev.launch(dev.load_module(res.ptx).get_function(name), tuple(grid) + (1,) * (3 - len(grid)),
               art.block, values, shared_mem=art.dynamic_smem)
    for p, ptr in ptrs.items():
        got = dev.from_device(ptr, dev_args[p].shape, dev_args[p].dtype)
        if p in bf16:
            got = (got.astype(np.uint32) << 16).view(np.float32)
        args[p][...] = got


def interpret(res, name: str, args: dict, grid):
    run_kernel(res.ir, args, tuple(grid) + (1,) * (3 - len(grid)), name=name)


def data(shape, dt: str) -> np.ndarray:
    x = (np.arange(int(np.prod(shape))) * 37 % 101).reshape(shape)
    return (x % 2 == 1) if dt == "bool" else (x - 50).astype(NP[dt]) if dt[0] in "if" \
        else x.astype(NP[dt])
