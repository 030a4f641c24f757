"""The fusion pass (tilelang/codegen/plan/fusion.py, docs/codegen.md Plans): which reductions
compute their element-wise and broadcast input piecewise, as a record and as `tilec --emit
plan` prints it, and the limits (E0783, E0787) before and after: the fused (512, 64)
comparison of a block-private histogram at 128 threads is no longer refused, a comparison
used twice still is, with the same text."""

from __future__ import annotations

import pytest

from tilelang.codegen.generate import block_shape, kernel_plans, launch_spec
from tilelang.diagnostics import DiagnosticSink, TileError, render_all
from tilelang.driver import compile_source
from tilelang.ir.resources import check_registers, estimate_registers
from tilelang.options import CompileOptions

HIST = """\
@launch(reqntid = (128, 1, 1))
kernel hist(x: Array[i32, 1], counts: Array[i32, 1]) {
    let k = load(x, index = (bid(0),), shape = (512,), padding = -1);
    let hits = expand_dims(k, 1) == expand_dims(arange(64), 0);
    atomic_add(counts, arange(64), sum(hits, axis = 0));
}
"""

# the comparison is also stored: it must exist whole, so nothing is fused
TWICE = HIST.replace("x: Array[i32, 1], counts", "x: Array[i32, 1], h: Array[bool, 2], counts") \
    .replace("    atomic_add(", "    store(h, index = (0, 0), tile = hits);\n    atomic_add(")

WEIGHTED = """\
@launch(reqntid = (128, 1, 1))
kernel weighted(x: Array[i32, 1], w: Array[f32, 1], sums: Array[f32, 1]) {
    let k = load(x, index = (bid(0),), shape = (1024,), padding = -1);
    let wk = load(w, index = (bid(0),), shape = (1024,), padding = 0.0);
    let hits = expand_dims(k, 1) == expand_dims(arange(256), 0);
    atomic_add(sums, arange(256), sum(where(hits, expand_dims(wk, 1), 0.0), axis = 0));
}
"""


def _tir(src: str):
    res = compile_source(src, "h.tile", until="tir")
    assert res.ok, render_all(res.diagnostics)
    return res.ir


def _plan(src: str):
    ((k, p),) = kernel_plans(_tir(src), CompileOptions())
    return k, p


def test_the_histogram_comparison_is_fused_into_its_sum():
    k, p = _plan(HIST)
    (g,) = p.fusion.groups
    assert g.consumer.name == "sum" and g.shape == (512, 64) and g.axes == (0,)
    assert [o.name for o in g.ops] == ["=="]
    # held: the keys (512, 1) and the bins (1, 64), never the (512, 64) booleans
    assert [v.type.shape for v in (g.ops[0].operands)] == [(512, 1), (1, 64)]
    assert set(g.leaves) == {v.id for v in g.ops[0].operands}
    assert set(p.fusion.fused) == {g.ops[0].result.id}
    assert p.fusion.by_consumer[id(g.consumer)] is g and p.fusion.declined == ()


def test_a_where_of_weights_is_fused_too():
    _, p = _plan(WEIGHTED)
    (g,) = p.fusion.groups
    assert [o.name for o in g.ops] == ["==", "where"] and g.shape == (1024, 256)
    assert len(g.leaves) == 3          # keys, bins, weights


def test_the_plan_prints_the_group():
    res = compile_source(HIST, "h.tile", until="plan")
    assert res.ok
    assert res.plan.split("\n")[5:] == [
        "  fusion:",
        "    `sum` (line 5) over axis 0: computes its 512x64 input one register at a time, "
        "never held whole",
        "      == %5 (line 4): fused: its one use is here",
        "      operands held: %2 (line 4), %4 (line 4)",
        # 32 keys x 8 bins a thread (test below), 2^7 threads as 16 x 8
        "      layout (R5): 32x8 in registers, 16x8 threads",
        ""]


def test_a_comparison_used_twice_is_declined_and_still_refused():
    _, p = _plan_unchecked(TWICE)
    assert p.fusion.groups == ()
    why = "its input is used 2 times: computed whole for its other uses (R3)"
    assert [(d.consumer.name, d.why) for d in p.fusion.declined] == [("store", why),
                                                                     ("sum", why)]
    res = compile_source(TWICE, "h.tile", until="ptx")
    assert render_all(res.diagnostics) == f"""\
error[E0783]: `==` makes a Tile[bool, 512, 64]: 256 elements for each of the 128 threads of \
kernel `hist`, more than the 128 a thread can hold
 --> h.tile:4:16
  |
4 |     let hits = expand_dims(k, 1) == expand_dims(arange(64), 0);
  |                {"^" * 47}
  |
  = help: use smaller tiles (and more blocks in the grid), or more threads \
(`@launch(maxntid = ...)`, up to 1024)"""
    assert res.ptx == ""


def _plan_unchecked(src: str):
    """The plan without the limits (kernel_plans checks E0783 first)."""
    from tilelang.codegen.generate import plan_for
    k = _tir(src).kernels[0]
    return k, plan_for(k, CompileOptions().target, block_shape(launch_spec(k)), {},
                       exact=True)


def test_the_fused_histogram_compiles():
    res = compile_source(HIST, "h.tile", until="ptx")
    assert res.ok and res.diagnostics == [], render_all(res.diagnostics)


def test_registers_count_what_is_live_after_fusion():
    """The weighted (1024, 256) f32 `where` is 2,048 registers a thread of 128 as written:
    E0787. Fused, the peak is where the weights are broadcast: the weights (1024,) f32 and
    their (1024, 1) copy, the keys' (1024, 1) copy (8 words each), the bins and their
    (1, 256) copy (2 words each): 28, under the cap."""
    k, p = _plan(WEIGHTED)
    block = block_shape(launch_spec(k))
    assert estimate_registers(k, block).words >= 2048 + 8
    with pytest.raises(TileError) as e:
        check_registers(k, block, None, DiagnosticSink())
    assert [d.code for d in e.value.diagnostics] == ["E0787"]
    fused = estimate_registers(k, block, None, p.fusion.piecewise())
    assert fused.words == 8 + 8 + 8 + 2 + 2
    sink = DiagnosticSink()
    check_registers(k, block, None, sink, p.fusion.piecewise())
    assert sink.diagnostics == []


LIVE = """\
@launch(reqntid = (128, 1, 1))
kernel hist(x: Array[i32, 1], w: Array[f32, 1], y: Array[f32, 1], counts: Array[i32, 1]) {
    let k = load(x, index = (bid(0),), shape = (512,), padding = -1);
    let hits = expand_dims(k, 1) == expand_dims(arange(64), 0);
    let big = load(w, index = (0,), shape = (4096,), padding = 0.0);
    store(y, index = (0,), tile = big * 2.0);
    atomic_add(counts, arange(64), sum(hits, axis = 0));
}
"""


def test_the_fused_operands_stay_live_until_the_consumer():
    """A fused value's operands are read where the consumer computes it. At `big * 2.0` the
    IR has `big` and its double live (4096 f32 over 128 threads: 32 + 32 words) and the
    `arange(64)` the atomic reads (1 word; booleans are predicates and count nothing). Fused,
    the comparison's operands are live there too, until the sum: the keys (512, 1) i32, 4
    words, and the bins (1, 64), 1 word."""
    k, p = _plan(LIVE)
    block = block_shape(launch_spec(k))
    assert estimate_registers(k, block).words == 32 + 32 + 1
    est = estimate_registers(k, block, None, p.fusion.piecewise())
    assert est.words == 32 + 32 + 1 + 4 + 1
    assert est.peak_span.line == 6             # `big * 2.0`


def test_a_broadcast_input_gets_the_layout_that_holds_fewest_registers():
    """(512, 64) over 128 threads is 2^8 elements a thread: r0 register bits along the keys
    and r1 along the bins with r0 + r1 = 8 and 7 thread bits. A thread holds 2^r0 keys, 2^r1
    bins and 2^r1 sums: r1 = 3 or 4 both hold 48; r1 = 3 has 8 sums to combine over 4 thread
    bits along the keys (32 shuffles or exchanges) against 16 over 5 (80)."""
    _, p = _plan(HIST)
    lay = p.fusion.groups[0].layout
    assert lay.reg == ((0, 1), (0, 2), (0, 4), (1, 0), (2, 0), (4, 0), (8, 0), (16, 0))
    assert lay.lane == ((32, 0), (64, 0), (128, 0), (256, 0), (0, 8))
    assert lay.warp == ((0, 16), (0, 32))


STORE = """\
@launch(reqntid = (128, 1, 1))
kernel outer(a: Array[f32, 1], b: Array[f32, 1], y: Array[f32, 2]) {
    let x = load(a, index = (bid(0),), shape = (512,), padding = 0.0);
    let z = load(b, index = (0,), shape = (64,), padding = 0.0);
    store(y, index = (bid(0), 0), tile = expand_dims(x, 1) * expand_dims(z, 0) + 1.0);
}
"""


def test_a_stored_outer_product_is_fused_into_its_store():
    k, p = _plan(STORE)
    (g,) = p.fusion.groups
    assert g.stores and g.shape == (512, 64) and g.axes == ()
    assert [o.name for o in g.ops] == ["*", "+"]
    # the store's access layout: 16-byte vectors of 4 f32 along the rows
    assert g.vector == 4 and g.layout.reg[:2] == ((0, 1), (0, 2))
    res = compile_source(STORE, "s.tile", until="plan")
    assert res.plan.split("\n")[5:] == [
        "  fusion:",
        "    `store` (line 5): computes its 512x64 tile one vector at a time, never held whole",
        "      * %5 (line 5): fused: its one use is here",
        "      + %6 (line 5): fused: its one use is here",
        "      operands held: %3 (line 5), %4 (line 5)",
        ""]
