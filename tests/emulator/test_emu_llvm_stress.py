"""A broad LLVM kernel (vector loads, intrinsics, i64 math, half/bf16, switch, dynamic shared
memory, barrier, atomics, fences) compiled at -O0 and -O3, checked against NumPy."""

import numpy as np
import pytest

from test_emu_llvm_ptx import compile_ptx

llvm = pytest.importorskip("llvmlite.binding")

IR = r'''
target triple = "nvptx64-nvidia-cuda"
declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
declare i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
declare float @llvm.sqrt.f32(float)
declare float @llvm.fma.f32(float, float, float)
declare float @llvm.minnum.f32(float, float)
declare i32 @llvm.smax.i32(i32, i32)
declare i32 @llvm.ctpop.i32(i32)
declare i32 @llvm.ctlz.i32(i32, i1)
@dyn = external addrspace(3) global [0 x float], align 16

define ptx_kernel void @stress(ptr addrspace(1) %out, ptr addrspace(1) %in, ptr addrspace(1) %cnt, i32 %n) {
entry:
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %bid = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
  %b64 = mul i32 %bid, 64
  %gid = add i32 %b64, %tid
  %vp = getelementptr <4 x float>, ptr addrspace(1) %in, i32 %gid
  %v = load <4 x float>, ptr addrspace(1) %vp, align 16
  %x = extractelement <4 x float> %v, i32 0
  %y = extractelement <4 x float> %v, i32 1
  %z = extractelement <4 x float> %v, i32 2
  %w = extractelement <4 x float> %v, i32 3
  %ax = call float @llvm.fabs.f32(float %x)
  %s = call float @llvm.sqrt.f32(float %ax)
  %f = call float @llvm.fma.f32(float %y, float %z, float %s)
  %m = call float @llvm.minnum.f32(float %f, float %w)
  %d = fdiv float %m, 3.0
  %xi = fptosi float %x to i32
  %mx = call i32 @llvm.smax.i32(i32 %xi, i32 -2)
  %pc = call i32 @llvm.ctpop.i32(i32 %gid)
  %lz = call i32 @llvm.ctlz.i32(i32 %gid, i1 false)
  %sum = add i32 %pc, %lz
  %sum2 = add i32 %sum, %mx
  %ext = sext i32 %sum2 to i64
  %big = mul i64 %ext, 1000000007
  %sh = ashr i64 %big, 3
  %rem = srem i64 %sh, 97
  %remf = sitofp i64 %rem to float
  %h = fptrunc float %y to half
  %h2 = fmul half %h, %h
  %hf = fpext half %h2 to float
  %bf = fptrunc float %z to bfloat
  %bff = fpext bfloat %bf to float
  %t1 = fadd float %d, %remf
  %t2 = fadd float %t1, %hf
  %t3 = fadd float %t2, %bff
  %cmp = fcmp olt float %t3, 0.0
  %sel = select i1 %cmp, float 0.0, float %t3
  ; switch on gid % 4
  %k = and i32 %gid, 3
  switch i32 %k, label %def [ i32 0, label %c0
                              i32 1, label %c1
                              i32 2, label %c2 ]
c0:
  br label %join
c1:
  br label %join
c2:
  br label %join
def:
  br label %join
join:
  %add = phi float [ 1.0, %c0 ], [ 2.0, %c1 ], [ 4.0, %c2 ], [ 8.0, %def ]
  %r = fadd float %sel, %add
  ; dynamic shared: write, barrier, read neighbour
  %sp = getelementptr float, ptr addrspace(3) @dyn, i32 %tid
  store float %r, ptr addrspace(3) %sp, align 4
  call void @llvm.nvvm.barrier0()
  %nb = xor i32 %tid, 1
  %np = getelementptr float, ptr addrspace(3) @dyn, i32 %nb
  %nv = load float, ptr addrspace(3) %np, align 4
  %res = fadd float %r, %nv
  %op = getelementptr float, ptr addrspace(1) %out, i32 %gid
  store float %res, ptr addrspace(1) %op, align 4
  ; atomics
  %old = atomicrmw add ptr addrspace(1) %cnt, i32 1 monotonic
  %cp = getelementptr i32, ptr addrspace(1) %cnt, i32 1
  %pair = cmpxchg ptr addrspace(1) %cp, i32 0, i32 %gid seq_cst seq_cst
  %fp = getelementptr float, ptr addrspace(1) %cnt, i32 2
  %of = atomicrmw fadd ptr addrspace(1) %fp, float 1.0 monotonic
  %mp = getelementptr i32, ptr addrspace(1) %cnt, i32 3
  %om = atomicrmw max ptr addrspace(1) %mp, i32 %gid monotonic
  fence seq_cst
  ret void
}
declare void @llvm.nvvm.barrier0()
declare float @llvm.fabs.f32(float)
'''


class _Mod:
    triple = "nvptx64-nvidia-cuda"

    def __str__(self):
        return IR


def reference(inp, nblk):
    x, y, z, w = (inp[:, k] for k in range(4))
    gid = np.arange(inp.shape[0])
    s = np.sqrt(np.abs(x))
    f = (y.astype(np.float64) * z + s).astype(np.float32)
    m = np.fmin(f, w)
    d = m / np.float32(3.0)
    mx = np.maximum(np.trunc(x).astype(np.int64), -2)
    pc = np.array([bin(g).count("1") for g in gid])
    lz = np.array([32 - int(g).bit_length() for g in gid])
    big = (pc + lz + mx).astype(np.int64) * 1000000007
    sh = big >> 3
    rem = np.fmod(sh, 97).astype(np.float32)
    h = y.astype(np.float16)
    hf = (h.astype(np.float32) * h.astype(np.float32)).astype(np.float16).astype(np.float32)
    bits = z.view(np.uint32).astype(np.uint64)
    rb = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint32)
    bff = (rb << 16).view(np.float32)
    t3 = ((d + rem) + hf) + bff
    sel = np.where(t3 < 0, np.float32(0), t3)
    r = sel + np.array([1, 2, 4, 8], np.float32)[gid % 4]
    nb = (gid // 64) * 64 + ((gid % 64) ^ 1)
    return (r + r[nb]).astype(np.float32)


@pytest.mark.parametrize("opt", [0, 3])
def test_llvm_stress_kernel(hw, rng, opt):
    ptx = compile_ptx(_Mod(), opt)
    nblk = 4
    n = 64 * nblk
    inp = (rng.standard_normal((n, 4)) * 8).astype(np.float32)
    d = hw.dev
    pi, po = d.to_device(inp), d.malloc(4 * n)
    pc = d.to_device(np.zeros(4, np.uint32))
    hw.run(ptx, (nblk,), (64,), [po, pi, pc, np.int32(n)], kernel="stress", shared_mem=256)
    got = d.from_device(po, (n,), np.float32)
    assert np.array_equal(got, reference(inp, nblk))
    c = d.from_device(pc, (4,), np.uint32)
    assert c[0] == n and 0 <= c[1] < n and c[2].view(np.float32) == n and c[3] == n - 1


# A 12-way switch (a jump table: brx.idx at -O0, a constant table at -O3), a struct passed by
# value, and 16/8-bit parameters.
cases = "\n".join(f"    i32 {k}, label %c{k}" for k in range(12))
blocks = "\n".join(f"c{k}:\n  br label %join" for k in range(12))
phis = ", ".join(f"[ {k*k+3}, %c{k} ]" for k in range(12))
SWITCH_IR = f'''
target triple = "nvptx64-nvidia-cuda"
declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
%struct.S = type {{ i32, float, i64 }}
define ptx_kernel void @sw(ptr addrspace(1) %out, %struct.S %s, i16 %h, i8 %b) {{
entry:
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %k = urem i32 %tid, 13
  switch i32 %k, label %def [
{cases}
  ]
{blocks}
def:
  br label %join
join:
  %v = phi i32 {phis}, [ 1000, %def ]
  %a = extractvalue %struct.S %s, 0
  %c = extractvalue %struct.S %s, 2
  %ct = trunc i64 %c to i32
  %hh = sext i16 %h to i32
  %bb = zext i8 %b to i32
  %r1 = add i32 %v, %a
  %r2 = add i32 %r1, %ct
  %r3 = add i32 %r2, %hh
  %r4 = add i32 %r3, %bb
  %p = getelementptr i32, ptr addrspace(1) %out, i32 %tid
  store i32 %r4, ptr addrspace(1) %p
  ret void
}}
'''


class _SwitchMod:
    triple = "nvptx64-nvidia-cuda"

    def __str__(self):
        return SWITCH_IR


@pytest.mark.parametrize("opt", [0, 3])
def test_llvm_switch_struct_and_small_params(hw, opt):
    ptx = compile_ptx(_SwitchMod(), opt)
    d = hw.dev
    out = d.malloc(4 * 64)
    s = np.array([5, 0], np.int32).tobytes() + np.int64(7).tobytes()
    rep = hw.run(ptx, (1,), (64,), [out, s, np.int16(-3), np.uint8(200)], kernel="sw")
    k = np.arange(64) % 13
    exp = np.where(k < 12, k * k + 3, 1000) + 5 + 7 - 3 + 200
    assert np.array_equal(d.from_device(out, (64,), np.int32), exp)
    if opt == 0:
        assert rep.instructions.get("brx.idx") == int((k < 12).sum())


BYVAL_IR = '''
target triple = "nvptx64-nvidia-cuda"
declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
define ptx_kernel void @bv(ptr addrspace(1) %out, ptr byval([8 x i32]) align 4 %arr) {
entry:
  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %k = and i32 %tid, 7
  %p = getelementptr [8 x i32], ptr %arr, i32 0, i32 %k
  %v = load i32, ptr %p
  %o = getelementptr i32, ptr addrspace(1) %out, i32 %tid
  store i32 %v, ptr addrspace(1) %o
  ret void
}
'''


class _ByvalMod:
    triple = "nvptx64-nvidia-cuda"

    def __str__(self):
        return BYVAL_IR


@pytest.mark.parametrize("opt", [0, 3])
def test_llvm_byval_array_indexed_through_a_pointer(hw, opt):
    # LLVM takes the parameter's address (mov.b64 %rd, bv_param_1) and loads ld.param [%rd]
    ptx = compile_ptx(_ByvalMod(), opt)
    d = hw.dev
    out = d.malloc(4 * 64)
    table = (np.arange(8, dtype=np.int32) * 11 - 5)
    hw.run(ptx, (1,), (64,), [out, table.tobytes()], kernel="bv")
    assert np.array_equal(d.from_device(out, (64,), np.int32), table[np.arange(64) % 8])


I128_IR = '''
target triple = "nvptx64-nvidia-cuda"
declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
declare i32 @llvm.fshl.i32(i32, i32, i32)
define ptx_kernel void @wide(ptr addrspace(1) %o, ptr addrspace(1) %in) {
  %t = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  %pa = getelementptr [2 x i128], ptr addrspace(1) %in, i32 %t, i32 0
  %pb = getelementptr [2 x i128], ptr addrspace(1) %in, i32 %t, i32 1
  %a = load i128, ptr addrspace(1) %pa, align 16
  %b = load i128, ptr addrspace(1) %pb, align 16
  %c = mul i128 %a, %b
  %d = udiv i128 %c, 7
  %e = sub i128 %d, %a
  %po = getelementptr [2 x i128], ptr addrspace(1) %o, i32 %t, i32 0
  store i128 %e, ptr addrspace(1) %po, align 16
  %lo = trunc i128 %a to i32
  %hi = trunc i128 %b to i32
  %r = call i32 @llvm.fshl.i32(i32 %lo, i32 %hi, i32 %t)
  %pr = getelementptr [2 x i128], ptr addrspace(1) %o, i32 %t, i32 1
  store i32 %r, ptr addrspace(1) %pr, align 16
  ret void
}
'''


class _WideMod:
    triple = "nvptx64-nvidia-cuda"

    def __str__(self):
        return I128_IR


@pytest.mark.parametrize("opt", [0, 3])
def test_llvm_i128_arithmetic_and_funnel_shift(hw, rng, opt):
    ptx = compile_ptx(_WideMod(), opt)
    n = 64
    words = rng.integers(0, 2**64, (n, 4), dtype=np.uint64)
    d = hw.dev
    pin, pout = d.to_device(words), d.malloc(32 * n)
    d.memset(pout, 0, 32 * n)
    hw.run(ptx, (1,), (n,), [pout, pin], kernel="wide")
    out = d.from_device(pout, (n, 4), np.uint64)
    M = 2**128
    for t in range(n):
        a = int(words[t, 0]) | int(words[t, 1]) << 64
        b = int(words[t, 2]) | int(words[t, 3]) << 64
        e = ((a * b % M) // 7 - a) % M
        assert int(out[t, 0]) | int(out[t, 1]) << 64 == e, t
        lo, hi, s = a & 0xFFFFFFFF, b & 0xFFFFFFFF, t % 32
        assert int(out[t, 2]) & 0xFFFFFFFF == ((lo << s | hi >> (32 - s)) & 0xFFFFFFFF
                                                if s else lo), t
