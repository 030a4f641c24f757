"""The virtual-thread loop of a `.maxntid` kernel (llvm/control.py): a launch with the declared
threads, which the runtime always makes, runs the body once per thread behind one uniform test
of ntid (no increment, no loop test); a smaller block still does every virtual thread's work."""

from __future__ import annotations

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
    # one compare of ntid per thread (`setp.lt.u32 %p, %ntid, 256`, its branch not taken),
    # nothing of the loop's next iteration: its opaque add and its test against the virtual
    # threads (the other `setp.lt` of the kernel)
    assert ops["setp.lt.u32"] == threads
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
    from tilelang.driver import Options, compile_source
    res = compile_source(COUNT, "<count>.tile", Options(target="sm_90a"), until="ptx")
    assert res.ok, render_all(res.diagnostics)
    h = np.zeros(512, np.int32)
    run_emulated(res.codegen, "count", [h], (2, 1, 1), block=block)
    assert (h == 2).all(), np.unique(h, return_counts=True)
