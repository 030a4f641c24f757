"""shfl.sync (all modes), vote.sync, redux, atomics and red on global and shared memory."""

import numpy as np
import pytest

from emu_support import kernel_ptx

STORE = """
  ld.param.u64 %rd1, [k_p0];
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, %ctaid.x;
  mov.u32 %r3, %ntid.x;
  mad.lo.s32 %r4, %r2, %r3, %r1;
  mul.wide.u32 %rd2, %r4, 4;
  add.s64 %rd3, %rd1, %rd2;
{op}
  st.global.u32 [%rd3], %r10;
  ret;
"""


def run_store(hw, op, nthreads, block):
    p = hw.dev.malloc(4 * nthreads)
    hw.run(kernel_ptx(STORE.format(op=op), nparams=1), (nthreads // block,), (block,), [p])
    return hw.dev.from_device(p, (nthreads,), np.uint32)


def shfl_ref(vals, mode, b, c):
    """Per-lane formulation from the PTX ISA pseudocode, one warp at a time."""
    out = np.empty_like(vals)
    for w in range(0, vals.size, 32):
        for lane in range(32):
            segmask = (c >> 8) & 31
            cval = c & 31
            max_lane = (lane & segmask) | (cval & ~segmask)
            min_lane = lane & segmask
            if mode == "up":
                j, ok = lane - b, lane - b >= max_lane
            elif mode == "down":
                j, ok = lane + b, lane + b <= max_lane
            elif mode == "bfly":
                j, ok = lane ^ b, (lane ^ b) <= max_lane
            else:
                j = min_lane | (b & ~segmask)
                ok = j <= max_lane
            out[w + lane] = vals[w + (j if ok else lane)]
    return out


@pytest.mark.parametrize("mode,b,c", [("idx", 5, 31), ("idx", 3, 0x181f), ("up", 3, 0),
                                      ("up", 1, 0x1800), ("down", 4, 31), ("down", 2, 0x181f),
                                      ("bfly", 7, 31), ("bfly", 1, 0x1c1f)])
def test_shfl_modes(hw, mode, b, c):
    op = f"  mul.lo.s32 %r5, %r4, 7;\n  shfl.sync.{mode}.b32 %r10, %r5, {b}, {c}, -1;"
    got = run_store(hw, op, 128, 64)
    vals = (np.arange(128) * 7).astype(np.uint32)
    assert np.array_equal(got, shfl_ref(vals, mode, b, c))


def test_shfl_predicate_output(hw):
    op = "  shfl.sync.down.b32 %r5|%p5, %r1, 16, 31, -1;\n  selp.u32 %r10, 1, 0, %p5;"
    got = run_store(hw, op, 64, 64)
    assert np.array_equal(got, ((np.arange(64) % 32) + 16 <= 31).astype(np.uint32))


def test_vote_ballot_all_any(hw):
    op = """  and.b32 %r5, %r1, 3;
  setp.eq.u32 %p1, %r5, 0;
  vote.sync.ballot.b32 %r6, %p1, -1;
  vote.sync.any.pred %p2, %p1, -1;
  vote.sync.all.pred %p3, %p1, -1;
  setp.lt.u32 %p4, %r1, 1000;
  vote.sync.all.pred %p5, %p4, -1;
  selp.u32 %r7, 2, 0, %p2;
  selp.u32 %r8, 4, 0, %p3;
  selp.u32 %r9, 8, 0, %p5;
  or.b32 %r7, %r7, %r8;
  or.b32 %r7, %r7, %r9;
  xor.b32 %r10, %r6, %r7;"""
    got = run_store(hw, op, 64, 64)
    ballot = sum(1 << i for i in range(32) if i % 4 == 0)
    assert np.array_equal(got, np.full(64, ballot ^ (2 | 8), np.uint32))


def test_redux_and_activemask(hw):
    op = """  redux.sync.add.u32 %r5, %r1, -1;
  redux.sync.max.u32 %r6, %r1, -1;
  activemask.b32 %r7;
  add.s32 %r10, %r5, %r6;
  xor.b32 %r10, %r10, %r7;"""
    got = run_store(hw, op, 64, 64)
    lanes = np.arange(64)
    warp = lanes // 32
    exp = np.array([sum(range(32 * w, 32 * w + 32)) + 32 * w + 31 for w in warp]) ^ 0xFFFFFFFF
    assert np.array_equal(got, exp.astype(np.uint32))


ATOM = """
  ld.param.u64 %rd1, [k_p0];
  ld.param.u64 %rd4, [k_p1];
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, %ctaid.x;
  mov.u32 %r3, %ntid.x;
  mad.lo.s32 %r4, %r2, %r3, %r1;
  and.b32 %r5, %r4, {mod};
  mul.wide.u32 %rd2, %r5, 4;
  add.s64 %rd3, %rd1, %rd2;
  mul.wide.u32 %rd5, %r4, 4;
  add.s64 %rd6, %rd4, %rd5;
{op}
  st.global.u32 [%rd6], %r10;
  ret;
"""


def run_atom(hw, op, n, mod, init):
    d = hw.dev
    cells = d.to_device(np.asarray(init, np.uint32))
    olds = d.malloc(4 * n)
    hw.run(kernel_ptx(ATOM.format(op=op, mod=mod), nparams=2), (n // 128,), (128,), [cells, olds])
    return (d.from_device(cells, (len(init),), np.uint32), d.from_device(olds, (n,), np.uint32))


def test_atom_add_returns_a_serialization(hw):
    n = 1024
    cells, olds = run_atom(hw, "  add.s32 %r6, %r4, 1;\n  atom.global.add.u32 %r10, [%rd3], %r6;",
                           n, 7, np.zeros(8))
    tid = np.arange(n) + 1
    assert np.array_equal(cells, np.array([tid[(tid - 1) % 8 == k].sum() for k in range(8)]))
    for k in range(8):   # the old values of one address are distinct prefix sums of its adds
        o = np.sort(olds[(tid - 1) % 8 == k].astype(np.int64))
        vals = tid[(tid - 1) % 8 == k]
        assert o[0] == 0 and len(set(o)) == len(o)
        assert set(o) <= set(np.concatenate([[0], np.cumsum(vals)]))


@pytest.mark.parametrize("name,ref", [("min", np.minimum), ("max", np.maximum),
                                      ("and", np.bitwise_and), ("or", np.bitwise_or),
                                      ("xor", np.bitwise_xor)])
def test_atom_bitwise_minmax(hw, name, ref):
    n = 512
    t = "u32" if name in ("min", "max") else "b32"
    op = f"  mul.lo.s32 %r6, %r4, 2654435761;\n  atom.global.{name}.{t} %r10, [%rd3], %r6;"
    init = np.full(4, 0x5A5A5A5A, np.uint32)
    cells, _ = run_atom(hw, op, n, 3, init)
    vals = (np.arange(n, dtype=np.uint64) * 2654435761 % 2**32).astype(np.uint32)
    for k in range(4):
        assert cells[k] == ref.reduce(np.concatenate([[init[k]], vals[np.arange(n) % 4 == k]]))


def test_atom_exch_cas_and_float_add(hw):
    n = 256
    cells, olds = run_atom(hw, "  atom.global.exch.b32 %r10, [%rd3], %r4;", n, 0, [12345])
    seq = np.concatenate([[12345], np.arange(n)])
    # exch forms a chain: every old value is the init or another thread's value, used once
    assert sorted(olds.tolist() + [int(cells[0])]) == sorted(seq.tolist())
    # cas: only one thread swaps 0 → its id + 1
    cells, olds = run_atom(hw, "  add.s32 %r6, %r4, 1;\n  atom.global.cas.b32 %r10, [%rd3], 0, %r6;",
                           n, 0, [0])
    assert (olds == 0).sum() == 1 and cells[0] == np.flatnonzero(olds == 0)[0] + 1
    # float add of exactly representable values
    op = "  cvt.rn.f32.u32 %f1, %r4;\n  atom.global.add.f32 %f2, [%rd3], %f1;\n  mov.b32 %r10, %f2;"
    cells, _ = run_atom(hw, op, n, 1, np.zeros(2))
    got = cells.view(np.float32)
    assert got[0] == np.arange(0, n, 2).sum() and got[1] == np.arange(1, n, 2).sum()


def test_red_and_shared_atomics(hw):
    body = """
  ld.param.u64 %rd1, [k_p0];
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, hist;
  setp.ne.u32 %p1, %r1, 0;
  @%p1 bra Z;
  st.shared.u32 [%r2], 0;
  st.shared.u32 [%r2+4], 0;
Z:
  bar.sync 0;
  and.b32 %r3, %r1, 1;
  mad.lo.s32 %r4, %r3, 4, %r2;
  atom.shared.add.u32 %r5, [%r4], 1;
  bar.sync 0;
  @%p1 bra E;
  ld.shared.u32 %r6, [%r2];
  ld.shared.u32 %r7, [%r2+4];
  red.global.add.u32 [%rd1], %r6;
  red.global.add.u32 [%rd1+4], %r7;
E:
  ret;
"""
    ptx = kernel_ptx(body, nparams=1, prelude=".shared .align 4 .b8 hist[8];\n")
    p = hw.dev.to_device(np.array([100, 200], np.uint32))
    hw.run(ptx, (5,), (96,), [p])
    assert np.array_equal(hw.dev.from_device(p, (2,), np.uint32), [100 + 5 * 48, 200 + 5 * 48])


def test_hot_address_float_atomics_serialize_in_thread_order(hw):
    # 4,096 threads add to one float: the old values are the running f32 sums in order
    body = """
  ld.param.u64 %rd1, [k_p0];
  ld.param.u64 %rd4, [k_p1];
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, %ctaid.x;
  mad.lo.s32 %r4, %r2, 256, %r1;
  cvt.rn.f32.u32 %f1, %r4;
  mul.f32 %f1, %f1, 0f3DCCCCCD;
  atom.global.add.f32 %f2, [%rd1], %f1;
  atom.global.max.s32 %r5, [%rd1+4], %r4;
  mul.wide.u32 %rd5, %r4, 4;
  add.s64 %rd6, %rd4, %rd5;
  st.global.f32 [%rd6], %f2;
  ret;
"""
    n = 4096
    d = hw.dev
    cell, olds = d.to_device(np.zeros(2, np.float32)), d.malloc(4 * n)
    hw.run(kernel_ptx(body, nparams=2), (n // 256,), (256,), [cell, olds])
    vals = np.arange(n, dtype=np.float32) * np.float32(0.1)
    seq = np.add.accumulate(np.concatenate([[np.float32(0)], vals]).astype(np.float32))
    got = d.from_device(olds, (n,), np.float32)
    assert np.array_equal(got, seq[:-1])             # serialized in thread order
    c = d.from_device(cell, (2,), np.float32)
    assert c[0] == seq[-1] and c[1:].view(np.int32)[0] == n - 1


def test_partial_last_warp(hw):
    # 48 threads: the second warp has 16 lanes; a full member mask names only existing lanes
    op = """  setp.ne.u32 %p1, %r1, 40;
  vote.sync.ballot.b32 %r5, %p1, -1;
  shfl.sync.bfly.b32 %r6, %r1, 1, 31, -1;
  xor.b32 %r10, %r5, %r6;"""
    got = run_store(hw, op, 96, 48)
    t = np.arange(96) % 48
    ballot = np.where(t < 32, 0xFFFFFFFF, 0xFFFF & ~(1 << (40 - 32)))
    assert np.array_equal(got, (ballot ^ (t ^ 1)).astype(np.uint32))
