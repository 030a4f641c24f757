"""Special registers and clusters, printf/assert, scopes, variables, generic addressing,
parameters, counters and the device interface."""

import io

import numpy as np
import pytest

from emu_support import HEADER, kernel_ptx
from tilelang.emulator.device import DevicePtr, EmulatorDevice
from tilelang.emulator.errors import DeviceAssertion, EmulatorError

SPECIALS = ["%tid.x", "%tid.y", "%tid.z", "%ntid.x", "%ntid.y", "%ctaid.x", "%ctaid.y",
            "%ctaid.z", "%nctaid.x", "%nctaid.z", "%laneid", "%warpid", "%cluster_ctaid.x",
            "%cluster_ctaid.y", "%cluster_nctaid.x", "%cluster_ctarank", "%cluster_nctarank",
            "%clusterid.x", "%clusterid.y", "%nclusterid.x", "%is_explicit_cluster",
            "%lanemask_lt", "%dynamic_smem_size"]


def test_special_registers_with_clusters(hw):
    body = ["  ld.param.u64 %rd1, [k_p0];",
            "  mov.u32 %r1, %tid.x;", "  mov.u32 %r2, %tid.y;", "  mov.u32 %r3, %ntid.x;",
            "  mad.lo.s32 %r4, %r2, %r3, %r1;",
            "  mov.u32 %r5, %ctaid.x;", "  mov.u32 %r6, %ctaid.y;", "  mov.u32 %r7, %ctaid.z;",
            "  mov.u32 %r8, %nctaid.x;", "  mov.u32 %r9, %nctaid.y;",
            "  mad.lo.s32 %r10, %r7, %r9, %r6;", "  mad.lo.s32 %r10, %r10, %r8, %r5;",
            "  mov.u32 %r11, %ntid.y;", "  mul.lo.s32 %r12, %r3, %r11;",
            "  mad.lo.s32 %r13, %r10, %r12, %r4;",                # global linear thread id
            f"  mul.wide.u32 %rd2, %r13, {4 * len(SPECIALS)};", "  add.s64 %rd3, %rd1, %rd2;"]
    for k, name in enumerate(SPECIALS):
        body += [f"  mov.u32 %r20, {name};", f"  st.global.u32 [%rd3+{4 * k}], %r20;"]
    body.append("  ret;")
    grid, block, cluster = (4, 2, 2), (8, 6, 1), (2, 2, 1)
    nthreads = 16 * 48
    p = hw.dev.malloc(4 * len(SPECIALS) * nthreads)
    hw.run(kernel_ptx("\n".join(body), nparams=1), grid, block, [p], cluster=cluster,
           shared_mem=48)
    got = hw.dev.from_device(p, (nthreads, len(SPECIALS)), np.uint32)
    rows = []
    for bz in range(2):
        for by in range(2):
            for bx in range(4):
                for ty in range(6):
                    for tx in range(8):
                        lin = ty * 8 + tx
                        rows.append([tx, ty, 0, 8, 6, bx, by, bz, 4, 2, lin % 32, lin // 32,
                                     bx % 2, by % 2, 2, (bx % 2) + 2 * (by % 2), 4, bx // 2,
                                     by // 2, 2, 1, (1 << (lin % 32)) - 1, 48])
    assert np.array_equal(got, np.array(rows, np.uint32))


def test_implicit_cluster_registers(hw):
    body = """
  ld.param.u64 %rd1, [k_p0];
  mov.u32 %r1, %is_explicit_cluster;
  mov.u32 %r2, %cluster_nctarank;
  mov.u32 %r3, %nclusterid.x;
  st.global.v2.u32 [%rd1], {%r1, %r2};
  st.global.u32 [%rd1+8], %r3;
  ret;
"""
    p = hw.dev.malloc(12)
    hw.run(kernel_ptx(body, nparams=1), (5,), (32,), [p])
    assert list(hw.dev.from_device(p, (3,), np.uint32)) == [0, 1, 5]


PRINTF = HEADER + """
.extern .func (.param .b32 func_retval0) vprintf(.param .b64 vprintf_param_0,
    .param .b64 vprintf_param_1);
.extern .func __assertfail(.param .b64 __assertfail_param_0, .param .b64 __assertfail_param_1,
    .param .b32 __assertfail_param_2, .param .b64 __assertfail_param_3,
    .param .b64 __assertfail_param_4);
.global .align 1 .b8 $str[17] = {116, 105, 100, 61, 37, 100, 32, 118, 61, 37, 46, 50, 102,
    32, 37, 115, 10};
.global .align 1 .b8 $str1[3] = {111, 107, 0};
.global .align 1 .b8 $msg[9] = {120, 32, 60, 32, 108, 105, 109, 105, 116};
.global .align 1 .b8 $file[7] = {97, 46, 116, 105, 108, 101, 0};
.visible .entry pk(.param .u32 pk_limit)
{
  .local .align 8 .b8 __local_depot0[24];
  .reg .b64 %SP;
  .reg .b64 %SPL;
  .reg .pred %p<2>;
  .reg .b32 %r<8>;
  .reg .b64 %rd<8>;
  .reg .f64 %fd<2>;
  mov.u64 %SPL, __local_depot0;
  cvta.local.u64 %SP, %SPL;
  mov.u32 %r1, %tid.x;
  st.local.u32 [%SPL], %r1;
  cvt.rn.f64.u32 %fd1, %r1;
  mul.f64 %fd1, %fd1, 0d3FE0000000000000;
  st.local.f64 [%SPL+8], %fd1;
  mov.u64 %rd1, $str1;
  cvta.global.u64 %rd2, %rd1;
  st.local.u64 [%SPL+16], %rd2;
  mov.u64 %rd3, $str;
  cvta.global.u64 %rd4, %rd3;
  {
  .param .b64 param0;
  st.param.b64 [param0], %rd4;
  .param .b64 param1;
  st.param.b64 [param1], %SP;
  .param .b32 retval0;
  call.uni (retval0), vprintf, (param0, param1);
  ld.param.b32 %r2, [retval0];
  }
  ld.param.u32 %r3, [pk_limit];
  setp.lt.u32 %p1, %r1, %r3;
  @%p1 bra OK;
  mov.u64 %rd5, $msg;
  cvta.global.u64 %rd5, %rd5;
  mov.u64 %rd6, $file;
  cvta.global.u64 %rd6, %rd6;
  {
  .param .b64 param0;
  st.param.b64 [param0], %rd5;
  .param .b64 param1;
  st.param.b64 [param1], %rd6;
  .param .b32 param2;
  st.param.b32 [param2], 42;
  .param .b64 param3;
  st.param.b64 [param3], %rd6;
  .param .b64 param4;
  st.param.b64 [param4], 1;
  call.uni __assertfail, (param0, param1, param2, param3, param4);
  }
OK:
  ret;
}
"""


def test_vprintf_and_assertfail():
    buf = io.StringIO()
    dev = EmulatorDevice(printf_stream=buf)
    fn = dev.load_module(PRINTF).get_function("pk")
    rep = dev.launch(fn, (1,), (4,), [np.uint32(100)])
    expect = "".join(f"tid={t} v={t / 2:.2f} ok\n" for t in range(4))
    assert buf.getvalue() == expect and rep.output == expect
    with pytest.raises(DeviceAssertion) as ei:
        dev.launch(fn, (1,), (4,), [np.uint32(2)])
    assert "x < limit (a.tile:42)" in str(ei.value) and ei.value.thread == (2, 0, 0)


def test_inline_asm_scopes_shadow_registers(hw):
    body = """
  ld.param.u64 %rd1, [k_p0];
  mov.u32 %r1, %tid.x;
  {
    .reg .pred p;
    .reg .b32 t;
    setp.lt.u32 p, %r1, 3;
    selp.u32 t, 10, 20, p;
    mov.u32 %r2, t;
  }
  {
    .reg .b32 t;
    add.u32 t, %r2, 1;
    mov.u32 %r3, t;
  }
  mul.wide.u32 %rd2, %r1, 4;
  add.s64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r3;
  ret;
"""
    p = hw.dev.malloc(4 * 8)
    hw.run(kernel_ptx(body, nparams=1), (1,), (8,), [p])
    assert list(hw.dev.from_device(p, (8,), np.uint32)) == [11] * 3 + [21] * 5


def test_global_const_variables_generic_addressing_and_struct_params(hw):
    pre = """.global .align 4 .u32 counter = 7;
.const .align 4 .f32 coef[2] = {0f40000000, 0f3F000000};
.shared .align 8 .b8 sh[256];
"""
    ptx = HEADER + pre + """
.visible .entry g(.param .u64 g_out, .param .align 8 .b8 g_s[16])
{
  .reg .b32 %r<16>;
  .reg .f32 %f<4>;
  .reg .b64 %rd<16>;
  ld.param.u64 %rd1, [g_out];
  ld.param.v2.u32 {%r1, %r2}, [g_s+8];
  ld.param.u64 %rd9, [g_s];
  mov.u32 %r3, %tid.x;
  ld.global.u32 %r4, [counter];
  ld.const.f32 %f1, [coef+4];
  mov.u64 %rd2, sh;
  cvta.shared.u64 %rd3, %rd2;              // generic pointer into shared memory
  mul.wide.u32 %rd4, %r3, 4;
  add.s64 %rd5, %rd3, %rd4;
  st.u32 [%rd5], %r3;                      // generic store → shared
  bar.sync 0;
  xor.b32 %r5, %r3, 1;
  mul.wide.u32 %rd6, %r5, 4;
  add.s64 %rd7, %rd2, %rd6;
  ld.shared.u32 %r6, [%rd7];               // neighbour's value
  add.s32 %r7, %r6, %r4;
  add.s32 %r7, %r7, %r1;
  add.s32 %r7, %r7, %r2;
  cvt.rzi.u32.f32 %r8, %f1;
  cvt.u32.u64 %r9, %rd9;
  add.s32 %r7, %r7, %r9;
  cvta.global.u64 %rd10, %rd1;
  add.s64 %rd11, %rd10, %rd4;
  st.u32 [%rd11], %r7;                     // generic store → global
  atom.global.add.u32 %r10, [counter], 1;
  ret;
}
"""
    d = hw.dev
    mod = d.load_module(ptx)
    po = d.malloc(4 * 32)
    struct = np.array([1000, 0, 5, 9], np.uint32).tobytes()
    d.launch(mod.get_function("g"), (1,), (32,), [po, struct])
    t = np.arange(32)
    assert np.array_equal(d.from_device(po, (32,), np.uint32), (t ^ 1) + 7 + 5 + 9 + 1000)
    assert d.from_device(mod.get_global("counter"), (1,), np.uint32)[0] == 7 + 32


def test_coalescing_and_bank_conflict_counters(hw):
    body = """
  ld.param.u64 %rd1, [k_p0];
  ld.param.u64 %rd9, [k_p1];
  cvt.u32.u64 %r9, %rd9;                   // stride in elements
  mov.u32 %r1, %tid.x;
  mul.lo.s32 %r2, %r1, %r9;
  mul.wide.u32 %rd2, %r2, 4;
  add.s64 %rd3, %rd1, %rd2;
  ld.global.u32 %r3, [%rd3];
  mov.u32 %r4, sh;
  mad.lo.s32 %r5, %r2, 4, %r4;
  st.shared.u32 [%r5], %r3;
  ret;
"""
    ptx = kernel_ptx(body, nparams=2, prelude=".shared .align 4 .b8 sh[4096];\n")
    p = hw.dev.malloc(4 * 64 * 32)
    r1 = hw.run(ptx, (1,), (64,), [p, 1])
    r2 = hw.run(ptx, (1,), (64,), [p, 2])
    r32 = hw.run(ptx, (1,), (32,), [p, 32])
    assert (r1.global_requests, r1.global_sectors) == (2, 8)
    assert r1.coalescing_efficiency == 1.0 and r1.bank_conflicts == 0
    assert (r2.global_requests, r2.global_sectors) == (2, 16)
    assert r2.coalescing_efficiency == 0.5 and r2.bank_conflicts == 2      # 2-way, 2 warps
    assert r32.global_sectors == 32 and r32.bank_conflicts == 31          # 32-way
    text = str(r2)
    assert "bank conflicts" in text and "ld.global.u32" in text


def test_device_interface_roundtrip_and_errors():
    dev = EmulatorDevice()
    x = np.arange(10, dtype=np.int64)
    p = dev.to_device(x)
    assert isinstance(p, DevicePtr) and p.nbytes == 80
    assert np.array_equal(dev.from_device(p + 16, (8,), np.int64), x[2:])
    assert dev.memcpy_dtoh(None, p, 8) == x[:1].tobytes()
    with pytest.raises(EmulatorError):
        dev.memcpy_htod(p + 72, np.zeros(2, np.int64))    # runs past the allocation
    mod = dev.load_module(kernel_ptx("  ret;", nparams=1))
    assert mod.kernels() == ["k"]
    with pytest.raises(EmulatorError, match="no kernel"):
        mod.get_function("nope")
    fn = mod.get_function("k")
    assert dev.pack_args(fn, [p]) == int(p).to_bytes(8, "little")
    rep = dev.launch(fn, 3, 32, int(p).to_bytes(8, "little"))
    assert rep.threads == 96 and rep.instructions == {"ret": 96}


def test_blocks_are_clusters_multiplies_the_grid(hw):
    body = """
  ld.param.u64 %rd1, [k_p0];
  mov.u32 %r1, %ctaid.x;
  mov.u32 %r2, %cluster_ctarank;
  mov.u32 %r3, %nctaid.x;
  mul.wide.u32 %rd2, %r1, 8;
  add.s64 %rd3, %rd1, %rd2;
  st.global.v2.u32 [%rd3], {%r2, %r3};
  ret;
"""
    ptx = kernel_ptx(body, nparams=1,
                     directives="\n.reqnctapercluster 2, 1, 1\n.blocksareclusters")
    p = hw.dev.malloc(8 * 6)
    rep = hw.run(ptx, (3,), (32,), [p])
    assert rep.threads == 6 * 32
    got = hw.dev.from_device(p, (6, 2), np.uint32)
    assert np.array_equal(got[:, 0], [0, 1] * 3) and (got[:, 1] == 6).all()


def test_cluster_barrier_waits_for_the_other_blocks(hw):
    # rank 1 produces its value in a block laid out after the cluster barrier; rank 0 reads it
    # after barrier.cluster.wait, so it must wait for rank 1 to arrive
    body = """
  ld.param.u64 %rd1, [k_p0];
  ld.param.u64 %rd5, [k_p1];
  mov.u32 %r1, %cluster_ctarank;
  mov.u32 %r2, %clusterid.x;
  mov.u32 %r3, %ctaid.x;
  setp.eq.u32 %p1, %r1, 1;
  @%p1 bra PRODUCE;
SYNC:
  barrier.cluster.arrive;
  barrier.cluster.wait;
  setp.ne.u32 %p2, %r1, 0;
  @%p2 bra END;
  mul.wide.u32 %rd2, %r2, 4;
  add.s64 %rd3, %rd1, %rd2;
  ld.global.u32 %r4, [%rd3];
  add.s64 %rd6, %rd5, %rd2;
  st.global.u32 [%rd6], %r4;
END:
  ret;
PRODUCE:
  mul.wide.u32 %rd2, %r2, 4;
  add.s64 %rd3, %rd1, %rd2;
  add.s32 %r5, %r3, 1000;
  st.global.u32 [%rd3], %r5;
  bra.uni SYNC;
"""
    ptx = kernel_ptx(body, nparams=2)
    d = hw.dev
    mail, out = d.malloc(4 * 4), d.malloc(4 * 4)
    d.memset(mail, 0, 16)
    hw.run(ptx, (8,), (32,), [mail, out], cluster=(2, 1, 1))
    assert list(d.from_device(out, (4,), np.uint32)) == [1001, 1003, 1005, 1007]


def test_counters_off_and_attributes():
    dev = EmulatorDevice(counters=False)
    assert dev.attributes["max_threads_per_block"] == 1024
    p = dev.malloc(4 * 64)
    fn = dev.load_module(kernel_ptx("""
  ld.param.u64 %rd1, [k_p0];
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd2, %r1, 4;
  add.s64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r1;
  ret;
""", nparams=1)).get_function("k")
    rep = dev.launch(fn, 1, 64, [p])
    dev.synchronize()
    assert rep.instructions["st.global.u32"] == 64 and rep.global_requests == 0
    assert np.array_equal(dev.from_device(p, (64,), np.uint32), np.arange(64))


def test_freed_memory_is_reused_only_past_the_threshold(monkeypatch):
    import tilelang.emulator.memory as memory
    monkeypatch.setattr(memory, "REUSE_ABOVE", 4096)
    dev = EmulatorDevice()
    a = dev.malloc(1000)
    dev.malloc(1000)
    dev.free(a)
    big = dev.malloc(5000)                 # does not fit the freed range: the heap grows
    again = dev.malloc(800)                # fits: reuses a's range, zeroed
    assert int(again) == int(a) and int(big) > int(a)
    dev.memcpy_htod(again, np.ones(200, np.float32))
    with pytest.raises(EmulatorError):
        dev.memcpy_htod(again, np.ones(201, np.float32))     # the new, smaller size


def test_distributed_shared_memory_in_a_cluster(hw):
    # each CTA writes its rank-tagged values to its own shared memory, then (after the cluster
    # barrier) reads the neighbour CTA's shared memory through mapa + ld.shared::cluster
    body = """
  ld.param.u64 %rd1, [k_p0];
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, %cluster_ctarank;
  mov.u32 %r3, %cluster_nctarank;
  mov.u32 %r4, %ctaid.x;
  mov.u32 %r5, buf;
  shl.b32 %r6, %r1, 2;
  add.s32 %r7, %r5, %r6;
  mad.lo.s32 %r8, %r4, 1000, %r1;
  st.shared.u32 [%r7], %r8;
  barrier.cluster.arrive;
  barrier.cluster.wait;
  add.s32 %r9, %r2, 1;
  rem.u32 %r9, %r9, %r3;                    // the next CTA in the cluster
  mapa.shared::cluster.u32 %r10, %r7, %r9;
  ld.shared::cluster.u32 %r11, [%r10];
  getctarank.shared::cluster.u32 %r12, %r10;
  mad.lo.s32 %r13, %r4, 32, %r1;
  mul.wide.u32 %rd2, %r13, 8;
  add.s64 %rd3, %rd1, %rd2;
  st.global.v2.u32 [%rd3], {%r11, %r12};
  ret;
"""
    ptx = kernel_ptx(body, nparams=1, prelude=".shared .align 4 .b8 buf[128];\n")
    p = hw.dev.malloc(8 * 32 * 8)
    hw.run(ptx, (8,), (32,), [p], cluster=(4, 1, 1))
    got = hw.dev.from_device(p, (8, 32, 2), np.uint32)
    blk = np.arange(8)
    nxt = (blk // 4) * 4 + (blk % 4 + 1) % 4
    assert np.array_equal(got[:, :, 0], nxt[:, None] * 1000 + np.arange(32)[None, :])
    assert np.array_equal(got[:, :, 1], np.repeat(((blk % 4 + 1) % 4)[:, None], 32, 1))
