"""The block-size test folded into the first edge guard (emit/block_test.py): a `.maxntid`
kernel whose full-launch copy starts with a rare edge guard and nothing with an effect before
it tests `short || outside` once; a short block re-reads the block size on the rare path. A
side effect before the guard keeps the separate test. Results on the emulator against NumPy
for full, edge, short and 2-D blocks."""

from __future__ import annotations

import re

import llvmlite.ir as ir
import numpy as np
import pytest

from gen_support import run_emulated
from tilelang.codegen.emit import block_test

I32 = ir.IntType(32)


def _block_with(emit) -> ir.Block:
    """A function's first block holding what `emit(builder, fn)` writes, then a branch."""
    m = ir.Module()
    fn = ir.Function(m, ir.FunctionType(ir.VoidType(), [I32, ir.IntType(64)]), "f")
    bb = fn.append_basic_block("entry")
    b = ir.IRBuilder(bb)
    emit(b, fn, m)
    b.ret_void()
    return bb


def _sreg(b, m, name):
    fn = ir.Function(m, ir.FunctionType(I32, []), f"llvm.nvvm.read.ptx.sreg.{name}")
    return b.call(fn, [])


def test_arithmetic_addresses_and_special_registers_are_speculable():
    def emit(b, fn, m):
        x = b.shl(b.add(_sreg(b, m, "tid.x"), fn.args[0]), ir.Constant(I32, 1))
        p = b.inttoptr(fn.args[1], ir.PointerType(ir.FloatType(), 1))
        b.gep(p, [b.zext(x, ir.IntType(64))])
        b.select(b.icmp_signed("<", x, fn.args[0]), x, fn.args[0])
    assert block_test.speculable(_block_with(emit))


@pytest.mark.parametrize("what", ["store", "load", "sdiv", "asm", "call"])
def test_effects_loads_divisions_and_other_calls_are_not(what):
    def emit(b, fn, m):
        p = b.inttoptr(fn.args[1], ir.PointerType(I32, 1))
        if what == "store":
            b.store(fn.args[0], p)
        elif what == "load":
            b.load(p)
        elif what == "sdiv":
            b.sdiv(ir.Constant(I32, 7), fn.args[0])
        elif what == "asm":
            b.asm(ir.FunctionType(I32, []), "mov.u32 $0, %ntid.x;", "=r", [], False)
        else:
            b.call(ir.Function(m, ir.FunctionType(ir.VoidType(), []), "llvm.nvvm.barrier0"), [])
    assert not block_test.speculable(_block_with(emit))


def test_rare_side_reads_the_branch_weights():
    m = ir.Module()
    fn = ir.Function(m, ir.FunctionType(ir.VoidType(), [ir.IntType(1)]), "f")
    a, rare, common = (fn.append_basic_block(n) for n in ("a", "rare", "common"))
    b = ir.IRBuilder(a)
    br = b.cbranch(fn.args[0], rare, common)
    assert block_test.rare_side(br) is None            # no weights: nothing is rare
    br.set_weights([1, 1024])
    assert block_test.rare_side(br) is rare
    br.set_weights([1024, 1])
    assert block_test.rare_side(br) is None


def _vadd(tile: int):
    from test_gen_vthread import example_vadd
    return example_vadd(tile)


def _entry_until_first_branch(ptx: str) -> str:
    body = ptx[ptx.index("{"):]
    return body[:body.index(" bra")]


def test_example_vadd_tests_block_size_and_edge_once():
    """vadd at 256: the ntid compare and the tile-end compare are or-ed into the one branch
    before the full tile (the loads come after it); the rare side reads ntid again."""
    ptx = _vadd(256).ptx
    head = _entry_until_first_branch(ptx)
    assert re.search(r"setp\.lt\.u32\s+(%p\d+), %r\d+, 128;", head), head
    assert re.search(r"or\.pred\s+%p\d+, %p\d+, %p\d+;\s*@%p\d+$", head.rstrip()), head
    assert "ld.global" not in head
    rest = ptx[ptx.index(head) + len(head):]
    assert re.search(r"mov\.u32\s+%r\d+, %ntid\.x;", rest), "the rare path's own ntid.x"


@pytest.mark.parametrize("n,grid,block", [
    (64 * 256, 64, (128, 1, 1)),       # full tiles, full blocks: the folded test falls through
    (1000, 4, (128, 1, 1)),            # the last tile runs past the end: the rare side, edge
    (1000, 4, (100, 1, 1)),            # short blocks: the rare side, then the loop
    (1000, 4, (64, 2, 1)),             # 2-D within .maxntid: the loop's linear index
    (64 * 256, 64, (32, 3, 1)),
])
def test_folded_vadd_on_the_emulator(n, grid, block):
    from test_gen_vthread import run_example
    rep, got, want = run_example(_vadd(256), n, grid, block)
    np.testing.assert_array_equal(got, want)


COUNT_THEN_LOAD = """
@launch(maxntid = (128, 1, 1))
kernel tally(h: Array[i32, 1], a: Array[f32, 1], c: Array[f32, 1]) {
    atomic_add(h, 0, 1, sem = "relaxed");
    let x = load(a, index = (bid(0),), shape = (256,), padding = 0.0);
    store(c, index = (bid(0),), tile = x * 2.0);
}
"""


@pytest.mark.parametrize("block", [(128, 1, 1), (48, 1, 1), (64, 2, 1)])
def test_an_effect_before_the_guard_keeps_the_separate_test(block):
    """An atomic before the first edge guard: a short block must not run it outside its loop,
    so the entry block branches on the block size alone (no or.pred), and the counter counts
    one per block whatever the block's shape."""
    from tilelang.diagnostics import render_all
    from tilelang.driver import compile_source
    from tilelang.options import CompileOptions
    res = compile_source(COUNT_THEN_LOAD, "<tally>.tile", CompileOptions(target="sm_90a"),
                         until="ptx")
    assert res.ok, render_all(res.diagnostics)
    ptx = res.codegen.ptx
    head = _entry_until_first_branch(ptx)
    assert "or.pred" not in head and "red." not in head and "atom" not in head, head
    assert re.search(r"setp\.lt\.u32\s+%p\d+, %r\d+, 128;\s*@%p\d+$", head.rstrip()), head
    n = 1000
    a = np.arange(n, dtype=np.float32)
    h = np.zeros(1, np.int32)
    c = np.full(n, -1, np.float32)
    run_emulated(res.codegen, "tally", [h, a, c], (4, 1, 1), block=block)
    assert h[0] == 4
    np.testing.assert_array_equal(c, a * np.float32(2))


SCALE_2D = """
@launch(maxntid = (32, 4, 1))
kernel scale(a: Array[f32, 1], c: Array[f32, 1]) {
    let x = load(a, index = (bid(0),), shape = (512,), padding = 0.0);
    store(c, index = (bid(0),), tile = x * 3.0);
}
"""


@pytest.mark.parametrize("block", [(32, 4, 1), (128, 1, 1), (16, 4, 1), (8, 2, 3), (33, 3, 1)])
def test_a_block_declared_2d_folds_on_the_product_of_its_extents(block):
    """Declared (32, 4, 1): the entry block's test and the rare side's reading are of
    ntid.x * ntid.y * ntid.z; any shape of 128 threads takes the full path, a smaller one the
    loop; the last tile (1,000 of 1,024) the edge code."""
    from tilelang.diagnostics import render_all
    from tilelang.driver import compile_source
    from tilelang.options import CompileOptions
    res = compile_source(SCALE_2D, "<scale>.tile", CompileOptions(target="sm_90a"), until="ptx")
    assert res.ok, render_all(res.diagnostics)
    head = _entry_until_first_branch(res.codegen.ptx)
    assert "or.pred" in head and "%ntid.y" in head, head
    n = 1000
    a = np.arange(n, dtype=np.float32) - 300
    c = np.full(n, -1, np.float32)
    run_emulated(res.codegen, "scale", [a, c], (2, 1, 1), block=block)
    np.testing.assert_array_equal(c, a * np.float32(3))
