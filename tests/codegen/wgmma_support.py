"""Helpers for the warp-group MMA tests (no tests here): compile a Tile source for sm_90a
with the facts of its arrays (as the runtime would) and run one kernel on the emulator."""

from __future__ import annotations

import numpy as np

from tilelang.diagnostics import render_all
from tilelang.driver import compile_source
from tilelang.options import CompileOptions


def facts_of(arrays: dict) -> dict:
    from tilelang.codegen.api import ArrayFacts
    from tilelang.runtime.args import facts_key
    out = {}
    for name, x in arrays.items():
        strides = tuple(s // x.itemsize for s in x.strides)
        # the emulator's allocations are 256-byte aligned
        out[name] = ArrayFacts.from_key(facts_key(0, x.shape, strides, x.itemsize))
    return out


def compile_for(src: str, kernel: str, arrays: dict, *, target: str = "sm_90a",
                until: str = "ptx", defines: dict | None = None, tma: bool | None = None):
    """The driver's compile (TMA as generate's default), or with `tma` given, the IR through
    generate(tma=...) (until="ptx" only)."""
    if tma is not None:
        return compile_tma(src, kernel, arrays, target=target, tma=tma)
    res = compile_source(src, "test.tile", CompileOptions(target=target, defines=defines or {}),
                         facts={kernel: facts_of(arrays)}, until=until)
    assert res.ok, render_all(res.diagnostics)
    return res


class _TmaResult:
    def __init__(self, cg):
        self.codegen, self.ptx = cg, cg.ptx


def compile_tma(src: str, kernel: str, arrays: dict, *, target: str = "sm_90a",
                tma: bool = True):
    """Like compile_for, through generate(tma=tma): with True loads may use TMA maps."""
    from tilelang.codegen.generate import generate
    from tilelang.options import CompileOptions
    res = compile_for(src, kernel, arrays, target=target, until="tir")
    facts = {kernel: facts_of(arrays)}
    return _TmaResult(generate(res.ir, CompileOptions(target=target), facts, tma=tma))


def run(src: str, kernel: str, arrays: dict, grid, *, scalars=(), target: str = "sm_90a",
        defines: dict | None = None, race_check: bool = False, tma: bool | None = None):
    """Launch `kernel` with `arrays` (name -> NumPy array, in parameter order, copied back
    in place) on the emulator; returns (compile result, launch report). A kernel that takes
    tensor maps gets them built by tilelang.runtime.tensormap's emulator encoding; `tma`
    as compile_for."""
    from tilelang.emulator import EmulatorDevice
    from tilelang.runtime.tensormap import encode_emulator, map_args
    res = compile_for(src, kernel, arrays, target=target, defines=defines, tma=tma)
    art = res.codegen.kernel(kernel)
    dev = EmulatorDevice(race_check=race_check)
    ptrs, args = {}, []
    scalars = list(scalars)
    for p in art.params:
        if p.kind != "array":
            args.append(scalars.pop(0))
            continue
        x = arrays[p.name]
        ptrs[p.name] = dev.to_device(_carrier(np.ascontiguousarray(x)))
        args += [np.uint64(int(ptrs[p.name])), *map(np.int64, x.shape),
                 *(np.int64(s // x.itemsize) for s in x.strides)]
    for spec in art.tensor_maps:
        x = arrays[spec.array]
        args.append(encode_emulator(map_args(spec, int(ptrs[spec.array]), x.shape,
                                             [st // x.itemsize for st in x.strides])))
    gx, gy, gz = (tuple(grid) + (1, 1))[:3]
    if art.cluster:
        gx += -gx % art.cluster[0]
    rep = dev.launch(dev.load_module(res.ptx).get_function(kernel), (gx, gy, gz), art.block,
                     args, cluster=art.cluster, shared_mem=art.dynamic_smem)
    for name, ptr in ptrs.items():
        x = arrays[name]
        got = dev.from_device(ptr, x.shape, _carrier(x).dtype)
        x[...] = got.view(x.dtype) if got.dtype != x.dtype else got
    return res, rep


def _carrier(x: np.ndarray) -> np.ndarray:
    """ml_dtypes' bf16 has no buffer format: move its bits as u16."""
    return x.view(np.uint16) if x.dtype.name == "bfloat16" else x


def product_bound(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """|error| allowed for an f32-accumulated product of exactly representable inputs: one
    f32 rounding per 16-deep step."""
    ad, bd = np.abs(a.astype(np.float64)), np.abs(b.astype(np.float64))
    k = a.shape[-1]
    return np.ceil(k / 16) * 2.0 ** -23 * (ad @ bd) + 1e-30


def attention_reference(q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: float,
                        causal: str) -> np.ndarray:
    """softmax(q k^T * scale) v in f64 for one head (q, k, v of shape (seq, d)); `causal`
    ("true"/"false", as the example's define) masks keys after the query."""
    qq, kk, vv = (x.astype(np.float64) for x in (q, k, v))
    s = qq @ kk.T * scale
    if causal == "true":
        seq = s.shape[0]
        s = np.where(np.arange(seq)[None, :] <= np.arange(seq)[:, None], s, -np.inf)
    p = np.exp(s - s.max(axis=1, keepdims=True))
    return (p / p.sum(axis=1, keepdims=True)) @ vv


ONE_GROUP_LAUNCH = ("@launch(reqntid = (128, 1, 1), maxnreg = by_target(sm_90a = 168), "
                    "cluster = (2, 1, 1))")


def one_group_matmul() -> str:
    """examples/matmul.tile at 128 x 128 x 64 over one warp group in clusters of two (168
    registers on sm_90a): its configuration on every target but sm_90a, whose defaults are
    the cost model's larger pick (benchmarks/gemm_pick.py). The lowering tests were written
    for this configuration; one line of launch keeps their `.replace(...)` edits exact."""
    import pathlib
    import re

    text = (pathlib.Path(__file__).resolve().parents[2] / "examples" / "matmul.tile").read_text()
    text, n = re.subn(r"^@launch\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*\)$", ONE_GROUP_LAUNCH,
                      text, count=1, flags=re.M)
    for name, value in (("BN", 128), ("BK", 64)):
        text, m = re.subn(rf"const {name}: i32 = by_target\([^()]*\)",
                          f"const {name}: i32 = {value}", text)
        n += m
    assert n == 3, "examples/matmul.tile changed: update one_group_matmul"
    return text
