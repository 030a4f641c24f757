"""The tensor-core path as the compiler emits it through LLVM intrinsics: cp.async into shared
memory, ldmatrix (x4 and x2.trans) and mma.sync m16n8k16 f16 → f32, at -O0 and -O3."""

import numpy as np
import pytest

from test_emu_llvm_ptx import compile_ptx

pytest.importorskip("llvmlite.binding")

TC_IR = '''
target triple = "nvptx64-nvidia-cuda"
declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
declare void @llvm.nvvm.cp.async.ca.shared.global.16(ptr addrspace(3), ptr addrspace(1))
declare void @llvm.nvvm.cp.async.commit.group()
declare void @llvm.nvvm.cp.async.wait.group(i32)
declare void @llvm.nvvm.barrier0()
declare {i32, i32, i32, i32} @llvm.nvvm.ldmatrix.sync.aligned.m8n8.x4.b16(ptr addrspace(3))
declare {i32, i32} @llvm.nvvm.ldmatrix.sync.aligned.m8n8.x2.trans.b16(ptr addrspace(3))
declare {float, float, float, float} @llvm.nvvm.mma.m16n8k16.row.col.f32.f32(<2 x half>, <2 x half>, <2 x half>, <2 x half>, <2 x half>, <2 x half>, float, float, float, float)
@sa = internal addrspace(3) global [256 x half] undef, align 16
@sb = internal addrspace(3) global [128 x half] undef, align 16

define ptx_kernel void @tc(ptr addrspace(1) %out, ptr addrspace(1) %A, ptr addrspace(1) %B) {
entry:
  %t = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
  ; A: 16x16 halves = 512 bytes = 32 x 16B; B (stored transposed? no: row-major 16x8) = 256 bytes = 16 x 16B
  %off = mul i32 %t, 8
  %ga = getelementptr half, ptr addrspace(1) %A, i32 %off
  %sa_p = getelementptr half, ptr addrspace(3) @sa, i32 %off
  call void @llvm.nvvm.cp.async.ca.shared.global.16(ptr addrspace(3) %sa_p, ptr addrspace(1) %ga)
  %lt16 = icmp ult i32 %t, 16
  br i1 %lt16, label %cpb, label %cont
cpb:
  %gb = getelementptr half, ptr addrspace(1) %B, i32 %off
  %sb_p = getelementptr half, ptr addrspace(3) @sb, i32 %off
  call void @llvm.nvvm.cp.async.ca.shared.global.16(ptr addrspace(3) %sb_p, ptr addrspace(1) %gb)
  br label %cont
cont:
  call void @llvm.nvvm.cp.async.commit.group()
  call void @llvm.nvvm.cp.async.wait.group(i32 0)
  call void @llvm.nvvm.barrier0()
  ; ldmatrix x4 for A: lane l -> row (l % 16), col block (l / 16) * 8
  %r = urem i32 %t, 16
  %cb = udiv i32 %t, 16
  %rowoff = mul i32 %r, 16
  %coloff = mul i32 %cb, 8
  %ai = add i32 %rowoff, %coloff
  %ap = getelementptr half, ptr addrspace(3) @sa, i32 %ai
  %fa = call {i32, i32, i32, i32} @llvm.nvvm.ldmatrix.sync.aligned.m8n8.x4.b16(ptr addrspace(3) %ap)
  ; B is 16x8 row-major (k rows); ldmatrix .trans x2: lane l (<16) -> row l
  %bl = urem i32 %t, 16
  %bi = mul i32 %bl, 8
  %bp = getelementptr half, ptr addrspace(3) @sb, i32 %bi
  %fb = call {i32, i32} @llvm.nvvm.ldmatrix.sync.aligned.m8n8.x2.trans.b16(ptr addrspace(3) %bp)
  %a0 = extractvalue {i32, i32, i32, i32} %fa, 0
  %a1 = extractvalue {i32, i32, i32, i32} %fa, 1
  %a2 = extractvalue {i32, i32, i32, i32} %fa, 2
  %a3 = extractvalue {i32, i32, i32, i32} %fa, 3
  %b0 = extractvalue {i32, i32} %fb, 0
  %b1 = extractvalue {i32, i32} %fb, 1
  %va0 = bitcast i32 %a0 to <2 x half>
  %va1 = bitcast i32 %a1 to <2 x half>
  %va2 = bitcast i32 %a2 to <2 x half>
  %va3 = bitcast i32 %a3 to <2 x half>
  %vb0 = bitcast i32 %b0 to <2 x half>
  %vb1 = bitcast i32 %b1 to <2 x half>
  %d = call {float, float, float, float} @llvm.nvvm.mma.m16n8k16.row.col.f32.f32(<2 x half> %va0, <2 x half> %va1, <2 x half> %va2, <2 x half> %va3, <2 x half> %vb0, <2 x half> %vb1, float 0.0, float 0.0, float 0.0, float 0.0)
  ; store D fragments: c0,c1 at (g, 2*tig + {0,1}); c2,c3 at (g+8, ...)
  %g = udiv i32 %t, 4
  %tig = urem i32 %t, 4
  %col = mul i32 %tig, 2
  %row0 = mul i32 %g, 8
  %i0 = add i32 %row0, %col
  %i2 = add i32 %i0, 64
  %d0 = extractvalue {float, float, float, float} %d, 0
  %d1 = extractvalue {float, float, float, float} %d, 1
  %d2 = extractvalue {float, float, float, float} %d, 2
  %d3 = extractvalue {float, float, float, float} %d, 3
  %p0 = getelementptr float, ptr addrspace(1) %out, i32 %i0
  store float %d0, ptr addrspace(1) %p0
  %p1 = getelementptr float, ptr addrspace(1) %p0, i32 1
  store float %d1, ptr addrspace(1) %p1
  %p2 = getelementptr float, ptr addrspace(1) %out, i32 %i2
  store float %d2, ptr addrspace(1) %p2
  %p3 = getelementptr float, ptr addrspace(1) %p2, i32 1
  store float %d3, ptr addrspace(1) %p3
  ret void
}
'''


class _TcMod:
    triple = "nvptx64-nvidia-cuda"

    def __str__(self):
        return TC_IR


@pytest.mark.parametrize("opt", [0, 3])
def test_llvm_cp_async_ldmatrix_mma_pipeline(hw, rng, opt):
    ptx = compile_ptx(_TcMod(), opt)
    A = rng.integers(-4, 4, (16, 16)).astype(np.float16)
    B = rng.integers(-4, 4, (16, 8)).astype(np.float16)
    d = hw.dev
    out = d.malloc(4 * 128)
    rep = hw.run(ptx, (1,), (32,), [out, d.to_device(A), d.to_device(B)], kernel="tc")
    D = d.from_device(out, (16, 8), np.float32)
    assert np.array_equal(D, A.astype(np.float32) @ B.astype(np.float32))
    names = " ".join(rep.instructions)
    assert "mma.sync" in names and "ldmatrix" in names and "cp.async" in names
