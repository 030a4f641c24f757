"""Helpers for the code generation tests (no tests here): compile IR kernels with `generate`,
run them on the emulator with the ABI (docs/abi.md), and run the reference interpreter on the
same inputs."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from tilelang.codegen.generate import generate
from tilelang.options import CompileOptions
from tilelang.codegen.target.link import link_ptx
from tilelang.emulator.device import EmulatorDevice
from tilelang.interp import run_kernel
from tilelang.ir.ops import IRModule, Kernel
from tilelang.targets import get_target

TARGETS = ("sm_80", "sm_86", "sm_89", "sm_90", "sm_90a", "sm_100a", "sm_120")


@dataclass
class Strided:
    """An array argument that is a view of `base` (any strides, including negative): the
    device gets base's data and the view's address, extents and element strides."""

    base: np.ndarray
    view: np.ndarray

    @property
    def offset(self) -> int:
        return (self.view.__array_interface__["data"][0]
                - self.base.__array_interface__["data"][0])


def compile_kernel(kernel: Kernel, target: str = "sm_90a", opt_level: int = 3, facts=None):
    return generate(IRModule((kernel,)), CompileOptions(target=target, opt_level=opt_level),
                    {kernel.name: facts} if facts else None)


@lru_cache(maxsize=None)
def _linked(ptx: str, target: str) -> bool:
    link_ptx(ptx, get_target(target), verbose=False, env={})
    return True


def link(result) -> None:
    _linked(result.ptx, result.target)


def run_emulated(result, name: str, args: list, grid, block=None, dev=None):
    """Launch kernel `name` of `result` on the emulator. Arrays (np.ndarray or Strided) are
    copied in and back in place; other values are scalars. Returns the LaunchReport."""
    dev = dev or EmulatorDevice()
    art = result.kernel(name)
    fn = dev.load_module(result.ptx).get_function(name)
    packed, back = [], []
    for p, a in zip(art.params, args):
        if p.kind == "array":
            s = a if isinstance(a, Strided) else Strided(a, a)
            base = np.ascontiguousarray(s.base)
            ptr = dev.to_device(base)
            back.append((s.base, ptr))
            item = s.view.itemsize
            strides = tuple(st // item for st in s.view.strides)
            check_facts(art, p.name, int(ptr) + s.offset, s.view.shape, strides, item,
                        "cp.async" in result.ptx)
            packed.append(ptr + s.offset)
            packed += [np.int64(n) for n in s.view.shape]
            packed += [np.int64(st) for st in strides]
        else:
            packed.append(np.dtype(scalar_np(p.dtype)).type(a))
    packed += tensor_maps(art, packed)
    rep = dev.launch(fn, grid, block or art.block, packed, shared_mem=art.dynamic_smem)
    for host, ptr in back:
        out = dev.from_device(ptr, host.shape, host.dtype)
        host[...] = out
    return rep


def tensor_maps(art, packed: list) -> list[bytes]:
    """The TMA tensor maps a kernel takes after its parameters (docs/abi.md), built from the
    packed array arguments with the emulator's encoding (tilelang/runtime/tensormap.py)."""
    from tilelang.runtime.tensormap import array_slots, encode_emulator, map_args
    slots = array_slots(art.params)
    out = []
    for spec in art.tensor_maps:
        i, rank = slots[spec.array]
        out.append(encode_emulator(map_args(spec, int(packed[i]), packed[i + 1:i + 1 + rank],
                                            packed[i + 1 + rank:i + 1 + 2 * rank])))
    return out


def check_facts(art, name: str, address: int, shape, strides, itemsize: int,
                copies: bool) -> None:
    """A kernel whose operands go to shared memory by 16-byte cp.async (`copies`) relies on
    the facts it was compiled with (docs/abi.md): a test that breaks one would test undefined
    behaviour, so it fails here instead. (Other kernels are launched by the IR-level tests on
    the default facts with ragged or narrow-row arrays they access element-wise.)"""
    from tilelang.codegen.api import ArrayFacts
    from tilelang.runtime.args import facts_key
    claimed = art.facts.get(name)
    if claimed is None or not copies:
        return
    got = ArrayFacts.from_key(facts_key(address, tuple(shape), strides, itemsize))
    broken = [f for f in ("contiguous", "aligned16", "extent16")
              if getattr(claimed, f) and not getattr(got, f)]
    assert not broken, f"array `{name}` {tuple(shape)} breaks the kernel's facts {broken}"


def scalar_np(dtype) -> str:
    from tilelang.codegen.api import scalar_storage
    return scalar_storage(dtype)


def interpret(kernel: Kernel, args: list, grid) -> None:
    """Run the reference interpreter (arrays mutated in place; Strided gives its view)."""
    vals = [a.view if isinstance(a, Strided) else a for a in args]
    run_kernel(kernel, vals, grid)


def vector_accesses(ptx: str, op: str) -> list[str]:
    """128-bit global vector accesses (`ld.global.v4.f32` or LLVM 22's `.v4.b32`)."""
    return re.findall(rf"\b{op}\.global(?:\.\w+)*?\.v4\.(?:f32|b32)\b", ptx)


def has_local(ptx: str) -> bool:
    return re.search(r"\.local\b|\blocal\.", ptx) is not None


def _copy(a):
    if isinstance(a, Strided):
        base = a.base.copy()
        view = np.ndarray(a.view.shape, a.view.dtype, buffer=base, offset=a.offset,
                          strides=a.view.strides)
        return Strided(base, view)
    if isinstance(a, np.ndarray):
        return a.copy()
    return a


def observed_facts(kernel: Kernel, args: list) -> dict | None:
    """The default facts, but `extent16` as each array has it (what the runtime computes per
    launch): edge tiles rely on it to decide whether a 16-byte vector can straddle the end."""
    from tilelang.codegen.api import ArrayFacts
    out = {}
    for p, a in zip(kernel.params, args):
        if isinstance(a, (np.ndarray, Strided)):
            v = a.view if isinstance(a, Strided) else a
            if v.ndim and (v.shape[-1] * v.itemsize) % 16:
                out[p.hint] = ArrayFacts(extent16=False)
    return out or None


def run_both(kernel: Kernel, args: list, grid, *, target: str = "sm_90a", facts=None,
             block=None, opt_level: int = 3):
    """Compile and run `kernel` on the emulator and in the interpreter, each on its own copy
    of `args`. Returns (emulator args, interpreter args, CodegenResult, LaunchReport); array
    arguments come back as the arrays (views for Strided). Without `facts`, the default facts
    with each array's own extent16."""
    r = compile_kernel(kernel, target, opt_level, facts or observed_facts(kernel, args))
    link(r)
    emu, ref = [_copy(a) for a in args], [_copy(a) for a in args]
    rep = run_emulated(r, kernel.name, emu, grid, block)
    interpret(kernel, ref, grid)

    def out(xs):
        return [x.view if isinstance(x, Strided) else x for x in xs]
    return out(emu), out(ref), r, rep


def same(a, b, rtol=0.0, atol=0.0) -> None:
    """Equal arrays (bitwise for rtol=atol=0; NaNs equal)."""
    if rtol == 0 and atol == 0:
        np.testing.assert_array_equal(a, b)
    else:
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, equal_nan=True)
