"""Compile Tile source and run it three ways: the PTX on the emulator (packed by hand per
docs/abi.md, independently of the runtime package), the Tile IR on the reference interpreter,
and the caller's NumPy expression."""

from __future__ import annotations

import pathlib

import numpy as np

from tilelang.codegen.api import scalar_storage
from tilelang.diagnostics import render_all
from tilelang.driver import compile_source
from tilelang.options import CompileOptions
from tilelang.emulator import EmulatorDevice
from tilelang.interp import run_kernel

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = sorted(p.name for p in (ROOT / "examples").glob("*.tile"))


def example_text(name: str) -> str:
    return (ROOT / "examples" / name).read_text()


def compile_text(text: str, path: str = "<e2e>.tile", *, defines=None, target="sm_90a",
                 opt=3, until="ptx", kernels=None, facts=None):
    res = compile_source(text, path, CompileOptions(defines=dict(defines or {}), target=target,
                                             opt_level=opt), kernels=kernels, facts=facts,
                         until=until)
    assert res.ok, render_all(res.diagnostics)
    return res


def facts_of(kernel: str, arrays: dict) -> dict:
    """The specialization facts (docs/abi.md) of NumPy arrays as the emulator will hold them
    (copied contiguous into 256-byte aligned allocations)."""
    from tilelang.codegen.api import ArrayFacts
    from tilelang.runtime.args import facts_key
    out = {}
    for name, a in arrays.items():
        a = np.ascontiguousarray(a)
        out[name] = ArrayFacts.from_key(facts_key(
            0, a.shape, tuple(s // a.itemsize for s in a.strides), a.itemsize))
    return {kernel: out}


def abi_args(dev: EmulatorDevice, artifact, args: dict):
    """Pack `args` (name -> NumPy array or scalar) per docs/abi.md; returns (values, copies)
    where copies maps each array name to its device pointer."""
    values, ptrs = [], {}
    for p in artifact.params:
        v = args[p.name]
        if p.kind == "array":
            a = np.asarray(v)
            assert a.ndim == p.rank, f"{p.name}: rank {a.ndim} != {p.rank}"
            ptr = dev.to_device(np.ascontiguousarray(a))
            ptrs[p.name] = ptr
            values.append(np.uint64(int(ptr)))
            values += [np.int64(n) for n in a.shape]
            c = np.ascontiguousarray(a)
            values += [np.int64(s // c.itemsize) for s in c.strides]
        else:
            values.append(np.array(v).astype(scalar_storage(p.dtype))[()])
    from tilelang.runtime.tensormap import array_slots, encode_emulator, map_args
    slots = array_slots(artifact.params)
    for spec in artifact.tensor_maps:        # TMA tensor maps follow (docs/abi.md)
        i, rank = slots[spec.array]
        values.append(encode_emulator(map_args(spec, int(values[i]), values[i + 1:i + 1 + rank],
                                               values[i + 1 + rank:i + 1 + 2 * rank])))
    return values, ptrs


def run_emulator(res, name: str, args: dict, grid, *, block=None, counters=False):
    """Launch kernel `name` of a compile result on the emulator; arrays in `args` are updated
    in place. Returns the LaunchReport."""
    dev = EmulatorDevice(counters=counters)
    art = res.codegen.kernel(name)
    fn = dev.load_module(res.ptx).get_function(name)
    values, ptrs = abi_args(dev, art, args)
    grid = tuple(grid) + (1,) * (3 - len(grid))
    report = dev.launch(fn, grid, block or art.block, values, cluster=art.cluster,
                        shared_mem=art.dynamic_smem)
    for pname, ptr in ptrs.items():
        a = args[pname]
        a[...] = dev.from_device(ptr, a.shape, a.dtype)
    return report


def run_interp(res, name: str, args: dict, grid, cluster=(1, 1, 1)):
    grid = tuple(grid) + (1,) * (3 - len(grid))
    run_kernel(res.ir, args, grid, name=name, cluster=cluster)
