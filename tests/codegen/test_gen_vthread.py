"""The virtual-thread loop of a `.maxntid` kernel (walk.py): a launch with the declared
threads, which the runtime always makes, runs the body once per thread behind one uniform test
of ntid (no increment, no loop test); a smaller block still does every virtual thread's work."""

from __future__ import annotations

import re

import numpy as np
import pytest

from gen_support import compile_kernel, run_emulated, same
from tilelang.ir import samples

N = 3000


def vadd_run(block):
    r = compile_kernel(samples.vadd())                  # `.maxntid 256`, 4 x f32 per thread
    a = np.arange(N, dtype=np.float32)
    b = np.float32(0.5) * a
    c = np.full(N, -1, np.float32)
    rep = run_emulated(r, "vadd", [a, b, c], (3, 1, 1), block=block)
    same(c, a + b)
    return rep


def test_full_launch_runs_the_body_once_without_a_loop_test():
    rep = vadd_run((256, 1, 1))
    threads = 3 * 256
    ops = rep.instructions
    # one compare of ntid per thread (`setp.lt.u32 %p, %ntid, 256`, or-ed with the tile-end
    # test: emit/block_test.py), and one more in the last block, whose tile runs past the end
    # (3,000 of 3,072): its rare side reads ntid again before the edge code; nothing of the
    # loop's next iteration: its opaque add and its test against the virtual threads (the
    # other `setp.lt` of the kernel)
    assert ops["setp.lt.u32"] == threads + 256
    assert "add.u32" not in ops and "setp.gt.u32" not in ops
    assert ops["ret"] == threads


@pytest.mark.parametrize("block", [(128, 1, 1), (96, 1, 1), (7, 1, 1), (1, 1, 1)])
def test_smaller_blocks_go_round(block):
    rep = vadd_run(block)
    real = 3 * block[0]
    # every real thread takes the loop back until the 256 virtual threads are done
    assert rep.instructions["add.u32"] == 3 * 256
    assert rep.instructions["ret"] == real


COUNT = """
@launch(maxntid = (128, 1, 1))
kernel count(h: Array[i32, 1]) {
    atomic_add(h, arange(512, i32), ones((512,), i32), sem = "relaxed");
}
"""


@pytest.mark.parametrize("block", [(128, 1, 1), (64, 2, 1), (32, 2, 2), (16, 3, 2), (1, 1, 1)])
def test_every_block_shape_within_maxntid_does_each_element_once(block):
    """`.maxntid` bounds the product of the extents only (seed 000), so a kernel declared 1-D
    may be launched as (64, 2, 1): its y and z threads are further threads, not copies of
    x's (atomics would count twice)."""
    from tilelang.diagnostics import render_all
    from tilelang.driver import compile_source
    from tilelang.options import CompileOptions
    res = compile_source(COUNT, "<count>.tile", CompileOptions(target="sm_90a"), until="ptx")
    assert res.ok, render_all(res.diagnostics)
    h = np.zeros(512, np.int32)
    run_emulated(res.codegen, "count", [h], (2, 1, 1), block=block)
    assert (h == 2).all(), np.unique(h, return_counts=True)


COUNT_LOOP = """
@launch(maxntid = (128, 1, 1))
kernel count2(h: Array[i32, 1]) {
    for k in range(num_tiles(h, axis = 0, shape = (256,))) {
        atomic_add(h, arange(512, i32), ones((512,), i32), sem = "relaxed");
    }
}
"""


@pytest.mark.parametrize("block", [(128, 1, 1), (64, 2, 1), (16, 3, 2), (5, 1, 1)])
def test_a_body_with_a_loop_shares_it_with_the_short_blocks(block):
    """A body with a loop is not versioned: the full launch joins the virtual-thread loop
    and leaves after one turn; every block shape still does each element once per turn."""
    from tilelang.diagnostics import render_all
    from tilelang.driver import compile_source
    from tilelang.options import CompileOptions
    res = compile_source(COUNT_LOOP, "<count2>.tile", CompileOptions(target="sm_90a"), until="ptx")
    assert res.ok, render_all(res.diagnostics)
    # one copy of the body (its loop's header once in the LLVM IR generated)
    assert len(re.findall(r"^for\.header[.\d]*:", res.codegen.llvm_ir, re.M)) == 1
    h = np.zeros(512, np.int32)
    run_emulated(res.codegen, "count2", [h], (2, 1, 1), block=block)
    assert (h == 4).all(), np.unique(h, return_counts=True)


def example_vadd(tile: int):
    """examples/vadd.tile at TILE = `tile`, compiled with the facts the runtime derives for
    three equal-length contiguous f32 arrays (`caes`, then b and c `=0`: docs/abi.md)."""
    import os
    from tilelang.codegen.api import ArrayFacts
    from tilelang.driver import compile_kernel as compile_source_kernel
    from tilelang.options import CompileOptions
    path = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "vadd.tile")
    with open(path) as f:
        text = f.read()
    facts = {n: ArrayFacts.from_key(k) for n, k in zip("abc", ("caes", "caes=0", "caes=0"))}
    return compile_source_kernel(text, path, "vadd", consts={"TILE": tile},
                                 options=CompileOptions(target="sm_90a"), facts=facts, link=False)


def run_example(ck, n: int, grid: int, block=(128, 1, 1)):
    from tilelang.emulator import EmulatorDevice
    rng = np.random.default_rng(n)
    a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    dev = EmulatorDevice()
    ptrs = [dev.to_device(v) for v in (a, b, np.full(n, -7.0, np.float32))]
    fn = dev.load_module(ck.ptx).get_function("vadd")
    args = []
    for p in ptrs:
        args += [p, np.int64(n), np.int64(1)]
    rep = dev.launch(fn, (grid, 1, 1), block, args)
    return rep, dev.from_device(ptrs[2], (n,), np.float32), a + b


def test_example_vadd_full_launch_takes_no_branch():
    """vadd at 256: the full launch runs its own copy of the body and falls through one
    test, the ntid compare or-ed with the tile-end compare (emit/block_test.py): per thread
    the thread index and ntid (3: mov, mov, setp), the parameters (4: a, b, c and the shared extent), the tile end in
    32 bits (`bid < n >> 8`: mov, shr, setp), the `or.pred` and its branch (not taken, so not
    executed), the offset (shl, shl, or, mul.wide) and three addresses, two v2 loads, two
    adds, a v2 store and `ret`: 24 instructions executed and no branch taken (23 with a
    branch of its own for ntid, which cost ptxas a SASS compare and branch more: 25 SASS
    instructions per thread against 24 now)."""
    ck = example_vadd(256)
    n = 64 * 256
    rep, got, want = run_example(ck, n, 64)
    same(got, want)
    ops = rep.instructions
    assert "bra" not in ops and "bra.uni" not in ops, ops
    assert not [o for o in ops if re.search(r"\.[su]64$", o) and o.startswith("setp")], ops
    assert rep.total_instructions == 24 * 64 * 128, ops


@pytest.mark.parametrize("block", [(128, 1, 1), (32, 1, 1), (64, 2, 1)])
def test_example_vadd_edge_and_short_blocks(block):
    """The last block's tile runs past the end (1,000 elements over 4 tiles of 256); short
    and 2-D blocks take the virtual-thread loop's copy."""
    ck = example_vadd(256)
    rep, got, want = run_example(ck, 1000, 4, block)
    same(got, want)


def unpredicated_loads(ptx: str) -> int:
    return len(re.findall(r"^\s*ld\.global\.v[24]\.b32", ptx, re.M))


def test_versioning_is_bounded_by_the_body_size():
    """Two copies of a small body (256: one v2 load per array per copy), one of a body above
    VERSION_LIMIT (4,096, streamed, about 1,800 LLVM instructions: 16 v4 loads)."""
    assert unpredicated_loads(example_vadd(256).ptx) == 2 * 2
    assert unpredicated_loads(example_vadd(4096).ptx) == 16


def count_kernel(launch: str) -> str:
    return f"""
@launch(maxntid = {launch})
kernel count3(h: Array[i32, 1]) {{
    atomic_add(h, arange(512, i32), ones((512,), i32), sem = "relaxed");
}}
"""


@pytest.mark.parametrize("launch,block", [
    ("(96, 1, 1)", (96, 1, 1)), ("(96, 1, 1)", (64, 1, 1)), ("(96, 1, 1)", (48, 2, 1)),
    ("(32, 4, 1)", (32, 4, 1)), ("(32, 4, 1)", (128, 1, 1)), ("(32, 4, 1)", (16, 4, 1)),
    ("(32, 4, 1)", (8, 2, 3))])
def test_declared_shapes_versioned(launch, block):
    """A versioned body under a declared count that is not a power of two (96: the real
    threads past 64 have no work) and a declared 2-D block (its linear index on both paths):
    each element once per block, whatever the launch's shape within `.maxntid`."""
    from tilelang.diagnostics import render_all
    from tilelang.driver import compile_source
    from tilelang.options import CompileOptions
    res = compile_source(count_kernel(launch), "<count3>.tile", CompileOptions(target="sm_90a"),
                         until="ptx")
    assert res.ok, render_all(res.diagnostics)
    # two copies of the body: 512 elements over the 128 or 64 layout threads, a `red` each
    threads = 64 if launch.startswith("(96") else 128
    assert len(re.findall(r"\bred\.", res.codegen.llvm_ir)) == 2 * 512 // threads
    h = np.zeros(512, np.int32)
    run_emulated(res.codegen, "count3", [h], (3, 1, 1), block=block)
    assert (h == 3).all(), np.unique(h, return_counts=True)
