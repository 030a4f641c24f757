"""Helpers for the scan/atomic/print/assert code generation tests (no tests here): compile an IR
kernel for sm_90a and sm_80 and link both PTX with nvJitLink, run it on the emulator and on the
reference interpreter (capturing what each prints), each on its own copy of the arguments."""

from __future__ import annotations

import io
import zlib
from dataclasses import dataclass

import numpy as np

from gen_support import _copy, compile_kernel, link, observed_facts, run_emulated
from tilelang.interp import run_kernel
from tilelang.ir.ops import Kernel

LINK_TARGETS = ("sm_90a", "sm_80")


@dataclass
class OpsRun:
    emu: list            # the emulator's copies of the arguments, after the launch
    ref: list            # the interpreter's copies
    result: object       # CodegenResult of the first target
    report: object       # the emulator's LaunchReport
    ref_output: str      # what the interpreter printed


def compile_linked(kernel: Kernel, targets=LINK_TARGETS, opt_level: int = 3, facts=None):
    """CodegenResult per target, each PTX linked for its target."""
    out = []
    for t in targets:
        r = compile_kernel(kernel, t, opt_level, facts)
        link(r)
        out.append(r)
    return out


def run_ops(kernel: Kernel, args: list, grid=(1, 1, 1), *, block=None,
            targets=LINK_TARGETS, opt_level: int = 3, interp: bool = True,
            bf16: tuple[int, ...] = ()) -> OpsRun:
    """`bf16`: positions of bf16 arrays (float32 holding bf16 values, as the interpreter
    takes them); the emulator gets their bits and they come back as float32."""
    results = compile_linked(kernel, targets, opt_level, observed_facts(kernel, args))
    emu = [to_bf16_bits(a) if i in bf16 else _copy(a) for i, a in enumerate(args)]
    rep = run_emulated(results[0], kernel.name, emu, grid, block)
    emu = [from_bf16_bits(a) if i in bf16 else a for i, a in enumerate(emu)]
    ref = [_copy(a) for a in args]
    text = io.StringIO()
    if interp:
        run_kernel(kernel, ref, grid, out=text)
    return OpsRun(emu, ref, results[0], rep, text.getvalue())


def rng_for(*key) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def to_bf16_bits(a: np.ndarray) -> np.ndarray:
    """float32 holding bf16 values -> their 16-bit patterns."""
    bits = np.ascontiguousarray(a, np.float32).view(np.uint32)
    assert not (bits & 0xFFFF).any(), "not bf16 values"
    return (bits >> 16).astype(np.uint16)


def from_bf16_bits(a: np.ndarray) -> np.ndarray:
    return (a.astype(np.uint32) << 16).view(np.float32)
