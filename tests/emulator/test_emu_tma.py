"""TMA on the emulator: the 128-byte tensor-map encoding, cp.async.bulk.tensor loads (boxes,
out-of-bounds fill, swizzle, multicast) and stores, plain bulk copies, bulk groups, mbarrier
transaction counts, cluster barriers and setmaxnreg."""

import numpy as np
import pytest

from tilelang.emulator import EmulatorDevice
from tilelang.emulator import tensormap
from tilelang.emulator.errors import (BarrierDivergence, ExecutionError, PTXParseError,
                                      WarpDivergence)

SMEM = 16384


def _swz(addr, sw):
    if not sw:
        return addr
    b = {32: 1, 64: 2, 128: 3}[sw]
    return addr ^ (((addr >> 7) & ((1 << b) - 1)) << 4)


def load_kernel(rank, nbytes, extra_tx=0, multicast=False, ncoords=None):
    ncoords = ncoords or rank
    coords = ", ".join(f"%r{20 + i}" for i in range(ncoords))
    params = ", ".join(f".param .u32 k_c{i}" for i in range(5))
    loads = "\n".join(f"  ld.param.u32 %r{20 + i}, [k_c{i}];" for i in range(5))
    mc = ".multicast::cluster" if multicast else ""
    mask = ", %rs1" if multicast else ""
    return f""".version 8.0
.target sm_90a
.address_size 64
.visible .entry k(.param .align 64 .b8 k_map[128], .param .u64 k_out, {params})
{{
  .reg .pred %p<8>;
  .reg .b16 %rs<4>;
  .reg .b32 %r<40>;
  .reg .b64 %rd<16>;
  .shared .align 1024 .b8 smem[{SMEM}];
  .shared .align 8 .b64 bar;
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, bar;
  mov.u32 %r3, smem;
  setp.eq.u32 %p1, %r1, 0;
  @%p1 mbarrier.init.shared::cta.b64 [%r2], 1;
  barrier.cluster.arrive.aligned;
  barrier.cluster.wait.aligned;
  mov.u64 %rd1, k_map;
  cvta.param.u64 %rd1, %rd1;
  prefetch.tensormap [%rd1];
{loads}
  mov.u32 %r30, %cluster_ctarank;
  setp.eq.u32 %p3, %r30, 0;
  and.pred %p4, %p1, %p3;
  mov.b16 %rs1, 3;
  @%p1 mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r2], {nbytes};
  @{'%p4' if multicast else '%p1'} cp.async.bulk.tensor.{rank}d.shared::cluster.global.tile.mbarrier::complete_tx::bytes{mc} [%r3], [%rd1, {{{coords}}}], [%r2]{mask};
  {'@%p1 mbarrier.expect_tx.shared::cta.b64 [%r2], ' + str(extra_tx) + ';' if extra_tx else ''}
WAIT:
  mbarrier.try_wait.parity.shared::cta.b64 %p2, [%r2], 0;
  @!%p2 bra WAIT;
  // dump shared memory: out[ctarank * SMEM + i]
  ld.param.u64 %rd2, [k_out];
  mul.wide.u32 %rd3, %r30, {SMEM};
  add.s64 %rd2, %rd2, %rd3;
  mov.u32 %r5, %r1;
COPY:
  setp.ge.u32 %p5, %r5, {SMEM // 4};
  @%p5 bra DONE;
  shl.b32 %r6, %r5, 2;
  add.s32 %r7, %r3, %r6;
  ld.shared.u32 %r8, [%r7];
  mul.wide.u32 %rd4, %r5, 4;
  add.s64 %rd5, %rd2, %rd4;
  st.global.u32 [%rd5], %r8;
  add.s32 %r5, %r5, %ntid.x;
  bra COPY;
DONE:
  ret;
}}
"""


def run_load(tmap_args, coords, nbytes, cluster=None, **kw):
    rank = tmap_args["rank"]
    dev = EmulatorDevice()
    src = tmap_args.pop("array")
    p = dev.to_device(src)
    raw = tensormap.encode(global_address=int(p), **tmap_args)
    ptx = load_kernel(rank, nbytes, **kw)
    fn = dev.load_module(ptx).get_function("k")
    nblk = 1 if cluster is None else cluster[0]
    out = dev.malloc(SMEM * nblk)
    args = [raw, out] + [np.uint32(c % (1 << 32)) for c in list(coords) + [0] * (5 - len(coords))]
    dev.launch(fn, (nblk, 1, 1), (64, 1, 1), args, cluster=cluster)
    return dev.from_device(out, (nblk, SMEM), np.uint8)


@pytest.mark.parametrize("swizzle", [0, 1, 2, 3])
def test_tma_load_2d_box_with_swizzle(swizzle):
    sw = tensormap.SWIZZLE_BYTES[swizzle]
    A = np.arange(40 * 96, dtype=np.float16).reshape(40, 96)     # rows x cols
    box_cols = (sw or 64) // 2                                   # inner box bytes = swizzle span
    img = run_load(dict(array=A, dtype="f16", rank=2, global_dims=(96, 40),
                        global_strides=(96 * 2,), box_dims=(box_cols, 16), element_strides=(1, 1),
                        swizzle=swizzle), (8, 4), box_cols * 16 * 2)[0]
    want = A[4:20, 8:8 + box_cols]
    got = np.zeros_like(want)
    for r in range(16):
        for c in range(box_cols):
            a = _swz(r * box_cols * 2 + c * 2, sw)
            got[r, c] = img[a:a + 2].view(np.float16)[0]
    np.testing.assert_array_equal(got, want)


def test_tma_load_out_of_bounds_fill_and_3d():
    A = np.arange(2 * 5 * 8, dtype=np.float32).reshape(2, 5, 8) + 1
    common = dict(dtype=7, rank=3, global_dims=(8, 5, 2), global_strides=(32, 160),
                  box_dims=(8, 4, 2), element_strides=(1, 1, 1))
    # box at (-4, 3, 1): columns -4..3, rows 3..6, planes 1..2 — mostly outside
    img = run_load(dict(array=A, **common), (-4, 3, 1), 8 * 4 * 2 * 4)[0]
    box = img[:8 * 4 * 2 * 4].view(np.float32).reshape(2, 4, 8)
    want = np.zeros((2, 4, 8), np.float32)
    want[0, :2, 4:] = A[1, 3:5, 0:4]
    np.testing.assert_array_equal(box, want)
    img = run_load(dict(array=A, oob_fill=1, **common), (-4, 3, 1), 8 * 4 * 2 * 4)[0]
    box = img[:8 * 4 * 2 * 4].view(np.float32).reshape(2, 4, 8)
    assert np.isnan(box[0, 0, 0]) and np.isnan(box[1]).all() and box[0, 0, 4] == A[1, 3, 0]


def test_tma_element_strides():
    A = np.arange(64, dtype=np.int32).reshape(4, 16)
    img = run_load(dict(array=A, dtype="s32", rank=2, global_dims=(16, 4), global_strides=(64,),
                        box_dims=(8, 4), element_strides=(2, 1)), (0, 0), 4 * 4 * 4)[0]
    np.testing.assert_array_equal(img[:64].view(np.int32).reshape(4, 4), A[:, 0:8:2])


def test_tma_multicast_to_the_cluster():
    A = np.arange(32 * 16, dtype=np.uint16).reshape(32, 16)
    img = run_load(dict(array=A, dtype="u16", rank=2, global_dims=(16, 32),
                        global_strides=(32,), box_dims=(16, 8), element_strides=(1, 1)),
                   (0, 8), 256, cluster=(2, 1, 1), multicast=True)
    for r in range(2):      # one load by CTA 0, mask 0b11: both CTAs get the box
        np.testing.assert_array_equal(img[r, :256].view(np.uint16).reshape(8, 16), A[8:16])


def test_tx_count_underflow_and_never_completing_phase():
    A = np.zeros((8, 16), np.float32)
    args = dict(array=A, dtype="f32", rank=2, global_dims=(16, 8), global_strides=(64,),
                box_dims=(16, 8), element_strides=(1, 1))
    # expect 256 bytes but the box has 512: more bytes complete than announced
    with pytest.raises(ExecutionError, match=r"mbarrier tx-count underflow: 256 bytes more "
                       r"were completed than expect_tx announced for the phase \(the bulk copy "
                       r"at PTX line \d+\)"):
        run_load(dict(args), (0, 0), 256)
    # announce 512 + 64 more: the phase never completes — no progress, not a hang
    with pytest.raises(ExecutionError, match="no progress"):
        run_load(dict(args), (0, 0), 512, extra_tx=64)


def test_tensormap_encoding_roundtrip_and_checks():
    raw = tensormap.encode("bf16", 3, 0x7000_0000_0100, (64, 33, 7), (128, 128 * 33),
                           (64, 16, 1), (1, 1, 1), 0, 3, 2, 1)
    assert len(raw) == 128 and raw[:4] == b"TLTM"
    tm = tensormap.decode(raw)
    assert (tm.dtype, tm.rank, tm.global_address, tm.global_dims, tm.global_strides,
            tm.box_dims, tm.swizzle, tm.l2_promotion, tm.oob_fill) == \
        (9, 3, 0x7000_0000_0100, (64, 33, 7), (128, 4224), (64, 16, 1), 3, 2, 1)
    assert tm.box_bytes == 64 * 16 * 2
    bad = [
        (dict(global_address=8), "not 16-byte aligned"),
        (dict(global_strides=(100,)), "multiples of 16 bytes"),
        (dict(box_dims=(300, 4)), "box dimensions"),
        (dict(box_dims=(4, 4)), "not a multiple of 16"),
        (dict(swizzle=1), "exceeds the 32-byte swizzle span"),
        (dict(rank=6), "rank 6"),
        (dict(element_strides=(9, 1)), "element strides"),
        (dict(global_strides=()), "needs 1 entries"),
    ]
    base = dict(dtype="f16", rank=2, global_address=0x1000, global_dims=(64, 64),
                global_strides=(128,), box_dims=(64, 8), element_strides=(1, 1))
    for change, msg in bad:
        with pytest.raises(ValueError, match=msg):
            tensormap.encode(**dict(base, **change))
    with pytest.raises(ValueError, match="not a tensor map of the emulator's encoding"):
        tensormap.decode(bytes(128))


STORE = """.version 8.0
.target sm_90a
.address_size 64
.visible .entry k(.param .align 64 .b8 k_map[128], .param .u64 k_in, .param .u32 k_c0,
                  .param .u32 k_c1, .param .u64 k_dst, .param .u64 k_src2)
{
  .reg .pred %p<8>;
  .reg .b32 %r<40>;
  .reg .b64 %rd<16>;
  .shared .align 1024 .b8 smem[4096];
  mov.u32 %r1, %tid.x;
  mov.u32 %r3, smem;
  ld.param.u64 %rd2, [k_in];
  mov.u32 %r5, %r1;
FILL:
  setp.ge.u32 %p5, %r5, 1024;
  @%p5 bra FILLED;
  mul.wide.u32 %rd4, %r5, 4;
  add.s64 %rd5, %rd2, %rd4;
  ld.global.u32 %r8, [%rd5];
  shl.b32 %r6, %r5, 2;
  add.s32 %r7, %r3, %r6;
  st.shared.u32 [%r7], %r8;
  add.s32 %r5, %r5, %ntid.x;
  bra FILL;
FILLED:
  fence.proxy.async.shared::cta;
  bar.sync 0;
  setp.eq.u32 %p1, %r1, 0;
  mov.u64 %rd1, k_map;
  cvta.param.u64 %rd1, %rd1;
  ld.param.u32 %r20, [k_c0];
  ld.param.u32 %r21, [k_c1];
  ld.param.u64 %rd6, [k_dst];
  @%p1 cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%rd1, {%r20, %r21}], [%r3];
  @%p1 cp.async.bulk.global.shared::cta.bulk_group [%rd6], [%r3], 64;
  @%p1 cp.async.bulk.commit_group;
  @%p1 cp.async.bulk.wait_group.read 0;
  ret;
}
"""


def test_tma_store_skips_out_of_bounds_and_plain_bulk_store():
    dev = EmulatorDevice()
    C = np.full((10, 24), -1.0, np.float32)
    pc = dev.to_device(C)
    tile = np.arange(1024, dtype=np.float32) + 0.5            # the shared image
    raw = tensormap.encode("f32", 2, int(pc), (24, 10), (96,), (32, 8), (1, 1), 0, 3, 0, 0)
    dst = dev.to_device(np.zeros(16, np.float32))
    fn = dev.load_module(STORE).get_function("k")
    dev.launch(fn, (1, 1, 1), (64, 1, 1), [raw, dev.to_device(tile), np.uint32(16),
                                           np.uint32(6), dst, 0])
    got = dev.from_device(pc, (10, 24), np.float32)
    want = C.copy()
    img = tile.view(np.uint8)
    for r in range(8):                 # box rows 6..13, cols 16..47: only 6..9 x 16..23 exist
        for c in range(32):
            gr, gc = 6 + r, 16 + c
            if gr < 10 and gc < 24:
                a = _swz(r * 128 + c * 4, 128)
                want[gr, gc] = img[a:a + 4].view(np.float32)[0]
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(dev.from_device(dst, (16,), np.float32), tile[:16])


CLUSTER = """.version 8.0
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 k_out)
.explicitcluster
{
  .reg .pred %p<8>;
  .reg .b32 %r<40>;
  .reg .b64 %rd<16>;
  .shared .align 4 .b32 val;
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, %cluster_ctarank;
  mov.u32 %r3, val;
  setp.eq.u32 %p1, %r1, 0;
  add.s32 %r4, %r2, 100;
  @%p1 st.shared.u32 [%r3], %r4;
  barrier.cluster.arrive.release;
  // work between arrive and wait
  mul.lo.s32 %r9, %r2, 3;
  barrier.cluster.wait.acquire;
  // read the neighbour's value through distributed shared memory
  add.s32 %r5, %r2, 1;
  rem.u32 %r5, %r5, 2;
  mapa.shared::cluster.u32 %r6, %r3, %r5;
  ld.shared::cluster.u32 %r7, [%r6];
  ld.param.u64 %rd1, [k_out];
  mov.u32 %r8, %ctaid.x;
  mad.lo.s32 %r10, %r8, 128, %r1;
  mul.wide.u32 %rd2, %r10, 4;
  add.s64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r7;
  barrier.cluster.arrive;
  barrier.cluster.wait;
  setmaxnreg.dec.sync.aligned.u32 40;
  ret;
}
"""


def test_cluster_barrier_split_arrive_wait_and_dsmem():
    dev = EmulatorDevice()
    fn = dev.load_module(CLUSTER).get_function("k")
    out = dev.malloc(4 * 4 * 128)
    dev.launch(fn, (4, 1, 1), (128, 1, 1), [out], cluster=(2, 1, 1))
    got = dev.from_device(out, (4, 128), np.uint32)
    assert (got == np.array([101, 100, 101, 100])[:, None]).all()


def test_cluster_wait_without_arrive_and_setmaxnreg_rules():
    dev = EmulatorDevice()
    bad = CLUSTER.replace("  barrier.cluster.arrive.release;\n", "")
    with pytest.raises(BarrierDivergence, match="barrier.cluster.wait without a preceding "
                       "barrier.cluster.arrive"):
        dev.launch(dev.load_module(bad).get_function("k"), (2, 1, 1), (128, 1, 1),
                   [dev.malloc(4 * 256)], cluster=(2, 1, 1))
    for n, msg in ((20, "multiple of 8 in 24..256"), (260, "multiple of 8 in 24..256"),
                   (44, "multiple of 8 in 24..256")):
        with pytest.raises(PTXParseError, match=msg):
            dev.load_module(CLUSTER.replace("u32 40;", f"u32 {n};")).get_function("k")
    # 64 threads: half a warp group executes setmaxnreg
    with pytest.raises(WarpDivergence, match="setmaxnreg.dec.sync.aligned.u32: warp group not "
                       "converged: the block has 64 threads"):
        dev.launch(dev.load_module(CLUSTER).get_function("k"), (2, 1, 1), (64, 1, 1),
                   [dev.malloc(4 * 256)], cluster=(2, 1, 1))


def test_tma_store_without_proxy_fence_is_reported():
    dev = EmulatorDevice()
    pc = dev.to_device(np.zeros((10, 24), np.float32))
    raw = tensormap.encode("f32", 2, int(pc), (24, 10), (96,), (32, 8), (1, 1), 0, 3, 0, 0)
    ptx = STORE.replace("  fence.proxy.async.shared::cta;\n", "")
    fn = dev.load_module(ptx).get_function("k")
    with pytest.raises(ExecutionError, match=r"cp.async.bulk.tensor.2d.global.shared::cta."
                       r"bulk_group reads shared memory written at PTX line \d+ through the "
                       r"generic proxy with no fence.proxy.async"):
        dev.launch(fn, (1, 1, 1), (64, 1, 1), [raw, dev.to_device(np.ones(1024, np.float32)),
                                               np.uint32(0), np.uint32(0),
                                               dev.malloc(64), 0])


INVAL = """.version 8.0
.target sm_90a
.address_size 64
.visible .entry k(.param .align 64 .b8 k_map[128], .param .u32 k_mode)
{
  .reg .pred %p<8>;
  .reg .b32 %r<24>;
  .reg .b64 %rd<4>;
  .shared .align 1024 .b8 smem[4096];
  .shared .align 8 .b64 bar;
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, bar;
  mov.u32 %r3, smem;
  setp.eq.u32 %p1, %r1, 0;
  @%p1 mbarrier.init.shared::cta.b64 [%r2], 1;
  bar.sync 0;
  mov.u64 %rd1, k_map;
  cvta.param.u64 %rd1, %rd1;
  ld.param.u32 %r9, [k_mode];
  mov.u32 %r20, 0;
  @%p1 mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r2], 512;
  @%p1 cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes
      [%r3], [%rd1, {%r20, %r20}], [%r2];
  setp.eq.u32 %p2, %r9, 1;
  and.pred %p3, %p1, %p2;
  @%p3 cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes
      [%r3], [%rd1, {%r20, %r20}], [%r2];
  setp.eq.u32 %p5, %r9, 2;
  @%p5 bra INVAL;
WAIT:
  mbarrier.try_wait.parity.shared::cta.b64 %p4, [%r2], 0;
  @!%p4 bra WAIT;
INVAL:
  bar.sync 0;
  @%p1 mbarrier.inval.shared::cta.b64 [%r2];
  ret;
}
"""


@pytest.mark.parametrize("mode,error", [
    (0, None),
    # the same box copied twice: its second 512 bytes complete on the next phase, which no
    # expect_tx announced (a GPU would complete a later phase early)
    (1, r"mbarrier.inval with 512 transaction bytes completed that no expect_tx announced"),
    # invalidated without waiting: the copy would complete on whatever is there next
    (2, r"mbarrier.inval while the bulk copy at PTX line \d+ is still to complete on it"),
])
def test_mbarrier_inval_with_transactions_due_is_reported(mode, error):
    dev = EmulatorDevice()
    A = np.arange(8 * 16, dtype=np.float32).reshape(8, 16)
    raw = tensormap.encode("f32", 2, int(dev.to_device(A)), (16, 8), (64,), (16, 8), (1, 1))
    fn = dev.load_module(INVAL).get_function("k")
    if error is None:
        dev.launch(fn, (1, 1, 1), (32, 1, 1), [raw, np.uint32(mode)])
        return
    with pytest.raises(ExecutionError, match=error):
        dev.launch(fn, (1, 1, 1), (32, 1, 1), [raw, np.uint32(mode)])


@pytest.mark.parametrize("wait", [True, False])
def test_tma_store_source_overwritten_before_the_wait_is_reported(wait):
    # thread 0 writes the image again after issuing the store and before its wait_group.read
    # (or with no wait at all): a GPU may store the old or the new value
    dev = EmulatorDevice()
    pc = dev.to_device(np.zeros((10, 24), np.float32))
    raw = tensormap.encode("f32", 2, int(pc), (24, 10), (96,), (32, 8), (1, 1), 0, 3, 0, 0)
    ptx = STORE.replace("  @%p1 cp.async.bulk.commit_group;\n",
                        "  @%p1 cp.async.bulk.commit_group;\n"
                        "  @%p1 st.shared.u32 [%r3+4], %r1;\n")
    if not wait:
        ptx = ptx.replace("  @%p1 cp.async.bulk.wait_group.read 0;\n", "")
    fn = dev.load_module(ptx).get_function("k")
    when = "a cp.async.bulk.wait_group covered the store" if wait else "the block ended"
    with pytest.raises(ExecutionError, match=r"shared memory that the bulk store at PTX line "
                       rf"\d+ reads was overwritten before {when}"):
        dev.launch(fn, (1, 1, 1), (64, 1, 1), [raw, dev.to_device(np.ones(1024, np.float32)),
                                               np.uint32(0), np.uint32(0), dev.malloc(64), 0])
