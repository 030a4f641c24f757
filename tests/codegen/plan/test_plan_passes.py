"""The planning passes' records (tilelang/codegen/plan/, docs/codegen.md Plans), field by
field: which product runs how, which loop is pipelined how, which tiles stream or are read
again and why. Expected numbers are derived here from the documented rules and the tiles'
sizes, not read back from the code under test."""

from __future__ import annotations

import pathlib

import pytest

from tilelang.codegen.generate import kernel_plans
from tilelang.codegen.layouts.distributed import drop_axes
from tilelang.codegen.occupancy import ARCH_LIMITS
from tilelang.driver import compile_source
from tilelang.options import CompileOptions

from wgmma_support import one_group_matmul

ROOT = pathlib.Path(__file__).resolve().parents[3]
KB = 1024


def plans(src: str, target: str = "sm_90a", precision: str | None = None, **defines):
    options = CompileOptions(target=target, precision=precision,
                             defines={k: str(v) for k, v in defines.items()})
    res = compile_source(src, "t.tile", options, until="tir")
    assert res.ok, [str(d) for d in res.diagnostics]
    return {k.name: p for k, p in kernel_plans(res.ir, options)}


def example(name: str) -> str:
    return (ROOT / "examples" / f"{name}.tile").read_text()


def test_matmul_on_hopper_is_a_tma_ring_of_wgmma_with_multicast():
    p = plans(one_group_matmul())["matmul"]
    (d,) = p.products.decisions
    assert d.name == "mma" and d.shape == (128, 128) and d.deferred == (True, True)
    assert d.plan.wg is not None and d.plan.wg.instr_n == 128
    assert d.why.startswith("wgmma m64n128k16")
    (loop,) = p.loops.loops
    lp = loop.pipelined
    assert lp is not None and loop.prefetch is None
    # one stage: a 128 x 64 and a 64 x 128 f16 image, whole 1024-byte units
    assert lp.image_bytes == (128 * 64 * 2, 64 * 128 * 2)
    # R1: 128 + 40 registers a thread -> 65,536 // (168 * 128) = 3 blocks by registers, at
    # most 2: (228 KB / 2 - 1 KB) // 32 KB = 3 stages
    lim = ARCH_LIMITS["sm_90a"]
    assert lim.smem_per_sm // 2 - lim.smem_reserved_per_block == 113 * KB
    assert lp.stages == 113 * KB // (32 * KB) == 3
    assert "96 KB of 113 KB" in lp.stages_why
    assert lp.tma and not lp.warp_specialized and not lp.nested
    # cluster (2, 1, 1): a's rows follow bid(0), so each CTA loads its own; b's columns follow
    # bid(1), the same for both CTAs of a cluster: shared along x
    assert lp.multicast.cluster == (2, 1, 1)
    assert lp.multicast.groups == (None, frozenset({0}))
    assert p.streams.streams == () and p.reloads.values == frozenset()


def test_matmul_on_ampere_is_a_cp_async_ring_of_mma_sync():
    p = plans(example("matmul"), "sm_80")["matmul"]
    (d,) = p.products.decisions
    assert d.plan.wg is None and d.plan.form.k == 16 and "sm_80 has no wgmma" in d.why
    lp = p.loops.loops[0].pipelined
    assert not lp.tma and lp.multicast is None       # no TMA, no clusters below sm_90
    # 128-byte units: 16 KB per image, as on Hopper; sm_80 has 164 KB per SM
    assert lp.image_bytes == (16 * KB, 16 * KB)
    lim = ARCH_LIMITS["sm_80"]
    budget = min(lim.smem_per_block, lim.smem_per_sm // 2 - lim.smem_reserved_per_block)
    assert lp.stages == min(4, budget // (32 * KB))


def test_attention_prefetches_its_operands_and_keeps_q_in_registers():
    # the sm_90a default: 128 x 128 tiles over two warp groups
    p = plans(example("attention"))["attention"]
    # loop splitting (docs/ir.md): the key tiles below the sequence's end, unmasked, then the
    # ragged last one; each loop has its two products, and both prefetch alike
    qk, pv, qk2, pv2 = p.products.decisions
    for d in (qk, pv, qk2, pv2):
        assert d.deferred == (False, True)
    loop, tail = p.loops.loops
    for lp in (loop, tail):
        assert lp.pipelined is None and "carries more than the accumulator" in lp.why
        pf = lp.prefetch
        # K and V tiles, 128 x 64 f16 = 16 KB each, one stage; num_stages not given: 2
        assert pf.stages == 2 and pf.stage_bytes == 2 * 128 * 64 * 2
        assert [f.offset for f in pf.fetches] == [0, 128 * 64 * 2]
        assert pf.tma and not pf.warp_specialized
    # R6: the output is carried in the second product's accumulator layout, the running max
    # and sum in the layout the row reduction of the scores leaves (rows of the accumulator)
    (o,) = [c for c in loop.carried if c.product is not None]
    m, l = [c for c in loop.carried if c.reduction is not None]
    assert len(loop.carried) == 3 and o.product == pv.result and o.layout == pv.plan.acc
    assert m.layout == l.layout and o.reduction is None
    # the scores' rows reduced with keepdims: the accumulator's layout with axis 1 dropped
    assert m.layout == drop_axes(qk.plan.acc, (1,), True) and m.layout.shape == (128, 1)
    # two warp groups of 64 query rows each: m64n128k16 a group
    assert qk.plan.wg.groups_m == 2 and qk.why.startswith("wgmma m64n128k16: 2 warp group(s)")


@pytest.mark.parametrize("d,threads,spread", [(64, 128, True), (128, 128, True),
                                               (256, 128, False), (256, 256, True)])
def test_a_prefetch_stage_spreads_its_tma_copies_one_per_warp(d, threads, spread):
    # R3: a stage takes one copy per 128-byte panel (64 f16) of K and of V, 2 * d / 64
    # copies; they are spread, one per warp, when the block has that many warps (at D = 256:
    # 8 copies, more than 4 warps but not than 8)
    src = example("attention").replace(
        "reqntid = by_target(sm_90a = (256, 1, 1), default = (128, 1, 1))",
        f"reqntid = ({threads}, 1, 1)")
    p = plans(src, D=d, BM=64, BN=64)["attention"]
    copies = 2 * d // 64
    assert copies > 1 and (copies <= threads // 32) == spread
    for lp in p.loops.loops:
        assert lp.prefetch.tma and lp.prefetch.spread == spread


def test_a_producer_block_specializes_its_first_ring_only():
    src = one_group_matmul().replace(
        "@launch(reqntid = (128, 1, 1), maxnreg = by_target(sm_90a = 168), cluster = (2, 1, 1))",
        "@launch(reqntid = (384, 1, 1))")
    lp = plans(src)["matmul"].loops.loops[0].pipelined
    assert lp.tma and lp.warp_specialized
    p = plans(src, "sm_80")["matmul"]                   # no TMA: nothing to specialize
    assert not p.loops.loops[0].pipelined.warp_specialized


def test_softmax_reloads_its_row_past_the_budget():
    # 4,096 f32 over 128 threads: 32 registers a thread for the row across the max (budget
    # 8: only loads to repeat), and 32 for the exponentials across the sum (budget 16: an
    # approximated exp to repeat, precision "fast")
    p = plans(example("softmax"), N=4096)["softmax_rows"]
    (row, e) = p.reloads.reasons
    assert (row.reduction, row.registers, row.budget, row.math) == ("max", 32, 8, None)
    assert (e.reduction, e.registers, e.budget, e.math) == ("sum", 32, 16, "approx")
    kinds = [s.store.name for s in p.streams.streams]
    assert kinds == ["max", "sum", "store"]
    # at 1,024 columns a row is 8 registers a thread: nothing to reload, nothing streams
    # (the reductions keep their input whole)
    p = plans(example("softmax"))["softmax_rows"]
    assert p.reloads.reasons == () and p.streams.streams == ()


def test_exact_exp_is_kept_and_the_row_then_streams_nowhere():
    p = plans(example("softmax"), precision="ieee", N=4096)["softmax_rows"]
    assert [k.reduction for k in p.reloads.kept] == ["sum"]
    assert [r.reduction for r in p.reloads.reasons] == ["max"]
    assert p.streams.streams == ()


def test_a_store_streams_its_loads_and_arithmetic():
    src = ("kernel vadd(x: Array[f32, 1], y: Array[f32, 1], z: Array[f32, 1]) {\n"
           "    let i = bid(0);\n"
           "    let a = load(x, index = (i,), shape = (4096,));\n"
           "    let b = load(y, index = (i,), shape = (4096,));\n"
           "    store(z, index = (i,), tile = a + b * 2.0);\n}\n")
    p = plans(src)["vadd"]
    (s,) = p.streams.streams
    assert s.store.name == "store" and not s.reduces
    assert [o.name for o in s.ops] == ["load", "load", "*", "+"]
    assert set(p.streams.deferred) == {o.result.id for o in s.ops}


def test_a_second_use_keeps_a_tile_out_of_the_stream():
    src = ("kernel two(x: Array[f32, 1], z: Array[f32, 1], w: Array[f32, 1]) {\n"
           "    let i = bid(0);\n"
           "    let a = load(x, index = (i,), shape = (4096,));\n"
           "    store(z, index = (i,), tile = a + 1.0);\n"
           "    store(w, index = (i,), tile = a * 2.0);\n}\n")
    # `a` has two uses and is no reload candidate (R2): neither store's chain holds a load,
    # and a stream without one has nothing to interleave
    p = plans(src)["two"]
    assert p.streams.streams == () and p.streams.deferred == {}


PRODUCT = ("@launch(reqntid = ({threads}, 1, 1))\n"
           "kernel p(a: Array[{t}, 2], b: Array[{t}, 2], c: Array[{acc}, 2]) {{\n"
           "    let x = load(a, index = (0, 0), shape = (64, 64));\n"
           "    let y = load(b, index = (0, 0), shape = (64, 64));\n"
           "    store(c, index = (0, 0), tile = {product});\n}}\n")
MMA = "mma(x, y, zeros((64, 64), {acc}))"


@pytest.mark.parametrize("t,acc,threads,target,why", [
    ("f16", "f32", 128, "sm_90a", "wgmma m64n64k16"),
    ("f16", "f32", 64, "sm_90a", "wgmma declined: 64 threads are not whole warp groups"),
    ("f16", "f32", 128, "sm_80", "mma.sync k16"),
    ("f32", "f32", 128, "sm_90a", "FMA: no mma.sync form for f32 x f32 -> f32 (R2)"),
    ("i8", "i32", 128, "sm_90a", "mma.sync k32: 2 x 2 warps (s8 operands / i32 accumulator "
                                 "have no wgmma form) (R2)"),
    ("f16", "f32", 48, "sm_90a", "FMA: 48 threads are not whole warps (R1)"),
])
def test_each_product_says_how_it_runs_and_why(t, acc, threads, target, why):
    p = plans(PRODUCT.format(t=t, acc=acc, threads=threads, product=MMA.format(acc=acc)),
              target)["p"]
    (d,) = p.products.decisions
    assert why in d.why
    assert (d.plan is None) == d.why.startswith("FMA")
    assert d.declined_wgmma == ("declined" in why)
    assert p.products.wgmma_declined == d.declined_wgmma


def test_the_plan_follows_the_thread_mode():
    # a kernel that needs no communication runs in virtual-thread mode: nothing planned
    # needs the thread count, and its plan says so
    p = plans(example("vadd"))["vadd"]
    assert not p.exact and p.products.decisions == () and p.loops.loops == ()


def test_plan_imports_nothing_of_the_lowerings_or_the_emitter():
    """plan/ is data computed from the IR (docs/codegen.md, Plans): it imports neither lower/
    nor the emitter nor the code generation entry, at module or function level."""
    import ast
    banned = ("tilelang.codegen.lower", "tilelang.codegen.llvm", "tilelang.codegen.emit",
              "tilelang.codegen.walk", "tilelang.codegen.generate")
    seen = []
    for path in sorted((ROOT / "tilelang" / "codegen" / "plan").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                seen.append((path.name, node.module or ""))
            elif isinstance(node, ast.Import):
                seen += [(path.name, a.name) for a in node.names]
    assert any(m.startswith("tilelang.codegen.layouts") for _, m in seen)   # the walk works
    assert [(f, m) for f, m in seen if m.startswith(banned)] == []
