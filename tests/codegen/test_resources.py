"""Resource diagnostics before code generation (issue 17, item 5): the register estimate of
tilelang/ir/resources.py against what ptxas allocates, W0787 (will spill), E0787 (far too many),
E0788 (shared memory), and the issue's two cases answered within a second."""

from __future__ import annotations

import pathlib
import time

import pytest

from tilelang.codegen.generate import block_shape, launch_spec
from tilelang.diagnostics import render_all
from tilelang.driver import compile_source
from tilelang.options import CompileOptions
from tilelang.ir.resources import estimate_registers, register_cap

from wgmma_support import one_group_matmul

ROOT = pathlib.Path(__file__).resolve().parents[2]

SOFTMAX = """
@launch(maxntid = {threads})
kernel softmax_rows(x: Array[f32, 2], y: Array[f32, 2], const N: i32 = 1024) {{
    let r = bid(0);
    let t = load(x, index = (r, 0), shape = (1, N), padding = -inf);
    let e = exp(t - max(t, axis = 1, keepdims = true));
    store(y, index = (r, 0), tile = e / sum(e, axis = 1, keepdims = true));
}}
"""

# two reductions over a tile whose centred copy stays live: ptxas allocates 255 registers and
# spills 392 bytes per thread (nvJitLink, sm_90a); the estimate says 386 words
LAYERNORM = """
@launch(maxntid = 256)
kernel ln(x: Array[f32, 2], y: Array[f32, 2], const N: i32 = 32768) {
    let r = bid(0);
    let t = load(x, index = (r, 0), shape = (1, N), padding = 0.0);
    let d = t - sum(t, axis = 1, keepdims = true) / 32768.0;
    let s = d * rsqrt(sum(d * d, axis = 1, keepdims = true) / 32768.0 + 1e-5);
    let m = max(t, axis = 1, keepdims = true);
    store(y, index = (r, 0), tile = s + exp(t - m));
}
"""


def _estimate(src: str, **defines):
    res = compile_source(src, "k.tile",
                         CompileOptions(defines={k: str(v) for k, v in defines.items()}),
                         until="tir")
    assert res.ok, render_all(res.diagnostics)
    k = res.ir.kernels[0]
    spec = launch_spec(k)
    return estimate_registers(k, block_shape(spec), spec.maxnreg)


def _diags(src: str, **defines):
    t0 = time.perf_counter()
    res = compile_source(src, "k.tile",
                         CompileOptions(defines={k: str(v) for k, v in defines.items()}),
                         until="tir")
    assert res.ok
    from tilelang.diagnostics import DiagnosticSink, TileError
    from tilelang.ir.resources import check_registers
    k = res.ir.kernels[0]
    spec = launch_spec(k)
    sink = DiagnosticSink()
    try:
        check_registers(k, block_shape(spec), spec.maxnreg, sink)
    except TileError as e:
        return e.diagnostics, time.perf_counter() - t0
    return sink.diagnostics, time.perf_counter() - t0


def test_cap_follows_the_block_and_maxnreg():
    assert register_cap((128, 1, 1)) == 255
    assert register_cap((1024, 1, 1)) == 64
    assert register_cap((512, 1, 1)) == 128
    assert register_cap((128, 1, 1), maxnreg=168) == 168


@pytest.mark.parametrize("name", ["vadd.tile", "softmax.tile", "layernorm.tile",
                                  "softmax_rows.tile", "layernorm_rows.tile", "matmul.tile",
                                  "attention.tile"])
def test_examples_fit(name):
    est = _estimate((ROOT / "examples" / name).read_text())
    assert est.words <= est.cap, est


def test_estimate_grows_with_the_tile():
    # 64 and 128 elements per thread: two tiles live at the peak (the row and its exponentials)
    a = _estimate(SOFTMAX.format(threads=256), N=16384)
    b = _estimate(SOFTMAX.format(threads=256), N=32768)
    assert (a.words, b.words) == (130, 258)
    assert str(b.peak_type) == "Tile[f32, 1, 32768]"


def test_matmul_accumulator_is_counted_once_and_operands_are_staged():
    est = _estimate(one_group_matmul())
    assert 128 <= est.words < 168  # the 128 x 128 f32 accumulator over 128 threads


def test_softmax_32768_at_256_threads_does_not_warn():
    # ptxas allocates 232 registers and no spills for it: within the estimate's margin
    diags, _ = _diags(SOFTMAX.format(threads=256), N=32768)
    assert diags == []


def test_spilling_kernel_warns_within_a_second():
    diags, took = _diags(LAYERNORM)
    assert took < 1.0
    assert [d.code for d in diags] == ["W0787"]
    msg = diags[0].message
    assert msg.startswith("kernel `ln` keeps about 386 registers per thread of tiles live here "
                          "(the largest is Tile[f32, 1, 32768]: 128 per thread), over 256 "
                          "threads; a thread has 255: expect about 524 bytes per thread"), msg
    assert "smaller tiles" in diags[0].help


def test_far_too_many_registers_is_an_error():
    # 1,024 threads leave 64 registers each; eight live 64-per-thread tiles need 512
    src = """
@launch(maxntid = 1024)
kernel many(x: Array[f32, 2], y: Array[f32, 2]) {
    let t = load(x, index = (bid(0), 0), shape = (1, 65536), padding = 0.0);
    let a = t - max(t, axis = 1, keepdims = true);
    let b = a * sum(a, axis = 1, keepdims = true);
    let c = b + max(b, axis = 1, keepdims = true);
    let d = c * min(c, axis = 1, keepdims = true);
    let e = d - sum(d, axis = 1, keepdims = true);
    let f = e * max(e, axis = 1, keepdims = true);
    store(y, index = (bid(0), 0), tile = t + a + b + c + d + e + f);
}
"""
    diags, took = _diags(src)
    assert took < 1.0
    assert [d.code for d in diags] == ["E0787"], diags
    assert "spill about" in diags[0].message and "a thread has 64" in diags[0].message


def test_huge_softmax_is_refused_within_a_second():
    # issue 17: -D N=131072 compiled for more than two minutes
    t0 = time.perf_counter()
    res = compile_source((ROOT / "examples" / "softmax.tile").read_text(), "softmax.tile",
                         CompileOptions(defines={"N": "131072"}), until="ptx")
    assert time.perf_counter() - t0 < 1.5
    assert [d.code for d in res.diagnostics] == ["E0783"]


def test_shared_memory_past_the_block_limit_is_refused():
    src = one_group_matmul().replace(
        "@launch(reqntid = (128, 1, 1), maxnreg = by_target(sm_90a = 168), cluster = (2, 1, 1))",
        "@launch(reqntid = (512, 1, 1))")
    res = compile_source(src, "mm.tile", CompileOptions(defines={"BM": "256", "BN": "256",
                                                          "BK": "256"}), until="llvm")
    errs = [d for d in res.diagnostics if d.code == "E0788"]
    assert errs and errs[0].message == (
        "kernel `matmul` needs 262144 bytes of shared memory per block (pipeline stages, "
        "reduction and exchange scratch); a block can have 232448"), render_all(res.diagnostics)
