"""Reference PTX kernels for the emulator: a vector add built by LLVM's NVPTX back end, a block
reduction (shuffles, shared memory, barrier), a tiled shared-memory matrix product and a kernel
with divergent data-dependent loops. The tests check them against NumPy and the benchmark
times them, so both run exactly the same code.
"""

from __future__ import annotations

HEADER = ".version 8.0\n.target sm_80\n.address_size 64\n"


def vadd_ir():
    """An llvmlite module: `vadd(a, b, c, n)` with c[i] = a[i] + b[i] for i < n, one element per
    thread (i = ctaid.x * ntid.x + tid.x)."""
    import llvmlite.ir as ir
    i32, f32, ptr = ir.IntType(32), ir.FloatType(), ir.PointerType(addrspace=1)
    m = ir.Module()
    m.triple = "nvptx64-nvidia-cuda"
    fn = ir.Function(m, ir.FunctionType(ir.VoidType(), [ptr, ptr, ptr, i32]), "vadd")
    fn.calling_convention = "ptx_kernel"
    b = ir.IRBuilder(fn.append_basic_block())

    def sreg(name):
        f = m.declare_intrinsic(f"llvm.nvvm.read.ptx.sreg.{name}", fnty=ir.FunctionType(i32, []))
        return b.call(f, [])
    i = b.add(b.mul(sreg("ctaid.x"), sreg("ntid.x")), sreg("tid.x"))
    with b.if_then(b.icmp_signed("<", i, fn.args[3])):
        x = b.load(b.gep(fn.args[0], [i], source_etype=f32), typ=f32)
        y = b.load(b.gep(fn.args[1], [i], source_etype=f32), typ=f32)
        b.store(b.fadd(x, y), b.gep(fn.args[2], [i], source_etype=f32))
    b.ret_void()
    return m


def llvm_vadd_ptx(opt: int = 3) -> str:
    """`vadd_ir()` compiled by LLVM's NVPTX back end for sm_80."""
    import llvmlite.binding as llvm
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    m = vadd_ir()
    mod = llvm.parse_assembly(str(m))
    tm = llvm.Target.from_triple(m.triple).create_target_machine(cpu="sm_80", opt=opt)
    if opt:
        pb = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=opt))
        pb.getModulePassManager().run(mod, pb)
    return tm.emit_assembly(mod)


REDUCE = HEADER + """
.shared .align 4 .f32 partial[32];
.visible .entry reduce(.param .u64 out, .param .u64 inp)
{
  .reg .pred %p<4>;
  .reg .b32 %r<20>;
  .reg .f32 %f<8>;
  .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [out];
  ld.param.u64 %rd2, [inp];
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, %ctaid.x;
  mov.u32 %r3, %ntid.x;
  mad.lo.s32 %r4, %r2, %r3, %r1;
  mul.wide.u32 %rd3, %r4, 4;
  add.s64 %rd4, %rd2, %rd3;
  ld.global.f32 %f1, [%rd4];
  mov.u32 %r5, 16;
LOOP:
  shfl.sync.bfly.b32 %f2, %f1, %r5, 31, -1;
  add.f32 %f1, %f1, %f2;
  shr.u32 %r5, %r5, 1;
  setp.ne.u32 %p1, %r5, 0;
  @%p1 bra LOOP;
  and.b32 %r6, %r1, 31;
  shr.u32 %r7, %r1, 5;
  setp.ne.u32 %p2, %r6, 0;
  @%p2 bra SKIP;
  mov.u32 %r8, partial;
  shl.b32 %r9, %r7, 2;
  add.s32 %r10, %r8, %r9;
  st.shared.f32 [%r10], %f1;
SKIP:
  bar.sync 0;
  setp.ne.u32 %p3, %r1, 0;
  @%p3 bra END;
  mov.f32 %f3, 0f00000000;
  shr.u32 %r11, %r3, 5;
  mov.u32 %r12, 0;
  mov.u32 %r13, partial;
SUM:
  ld.shared.f32 %f4, [%r13];
  add.f32 %f3, %f3, %f4;
  add.s32 %r13, %r13, 4;
  add.s32 %r12, %r12, 1;
  setp.lt.u32 %p1, %r12, %r11;
  @%p1 bra SUM;
  mul.wide.u32 %rd5, %r2, 4;
  add.s64 %rd6, %rd1, %rd5;
  st.global.f32 [%rd6], %f3;
END:
  ret;
}
"""

MATMUL = HEADER + """
.shared .align 4 .b8 As[1024];
.shared .align 4 .b8 Bs[1024];
.visible .entry mm(.param .u64 pc, .param .u64 pa, .param .u64 pb, .param .u32 pn)
{
  .reg .pred %p<4>;
  .reg .b32 %r<40>;
  .reg .f32 %f<8>;
  .reg .b64 %rd<16>;
  ld.param.u64 %rd1, [pc];
  ld.param.u64 %rd2, [pa];
  ld.param.u64 %rd3, [pb];
  ld.param.u32 %r1, [pn];
  mov.u32 %r2, %tid.x;
  mov.u32 %r3, %tid.y;
  mov.u32 %r4, %ctaid.x;
  mov.u32 %r5, %ctaid.y;
  mad.lo.s32 %r6, %r5, 16, %r3;
  mad.lo.s32 %r7, %r4, 16, %r2;
  mov.f32 %f1, 0f00000000;
  mov.u32 %r8, 0;
  mov.u32 %r20, As;
  mov.u32 %r21, Bs;
  mad.lo.s32 %r22, %r3, 16, %r2;
  shl.b32 %r22, %r22, 2;
TILE:
  add.s32 %r9, %r8, %r2;
  mad.lo.s32 %r10, %r6, %r1, %r9;
  mul.wide.u32 %rd4, %r10, 4;
  add.s64 %rd5, %rd2, %rd4;
  ld.global.f32 %f2, [%rd5];
  add.s32 %r23, %r20, %r22;
  st.shared.f32 [%r23], %f2;
  add.s32 %r11, %r8, %r3;
  mad.lo.s32 %r12, %r11, %r1, %r7;
  mul.wide.u32 %rd6, %r12, 4;
  add.s64 %rd7, %rd3, %rd6;
  ld.global.f32 %f3, [%rd7];
  add.s32 %r24, %r21, %r22;
  st.shared.f32 [%r24], %f3;
  bar.sync 0;
  mov.u32 %r13, 0;
INNER:
  mad.lo.s32 %r14, %r3, 16, %r13;
  shl.b32 %r14, %r14, 2;
  add.s32 %r14, %r14, %r20;
  ld.shared.f32 %f4, [%r14];
  mad.lo.s32 %r15, %r13, 16, %r2;
  shl.b32 %r15, %r15, 2;
  add.s32 %r15, %r15, %r21;
  ld.shared.f32 %f5, [%r15];
  fma.rn.f32 %f1, %f4, %f5, %f1;
  add.s32 %r13, %r13, 1;
  setp.lt.u32 %p1, %r13, 16;
  @%p1 bra INNER;
  bar.sync 0;
  add.s32 %r8, %r8, 16;
  setp.lt.u32 %p2, %r8, %r1;
  @%p2 bra TILE;
  mad.lo.s32 %r16, %r6, %r1, %r7;
  mul.wide.u32 %rd8, %r16, 4;
  add.s64 %rd9, %rd1, %rd8;
  st.global.f32 [%rd9], %f1;
  ret;
}
"""

COLLATZ = HEADER + """
.visible .entry collatz(.param .u64 out, .param .u64 inp)
{
  .reg .pred %p<4>;
  .reg .b32 %r<10>;
  .reg .b64 %rd<8>;
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, %ctaid.x;
  mov.u32 %r3, %ntid.x;
  mad.lo.s32 %r4, %r2, %r3, %r1;
  ld.param.u64 %rd1, [out];
  ld.param.u64 %rd2, [inp];
  mul.wide.u32 %rd3, %r4, 4;
  add.s64 %rd4, %rd2, %rd3;
  ld.global.u32 %r5, [%rd4];
  mov.u32 %r6, 0;
WHILE:
  setp.le.u32 %p1, %r5, 1;
  @%p1 bra DONE;
  and.b32 %r7, %r5, 1;
  setp.eq.u32 %p2, %r7, 0;
  @%p2 bra EVEN;
  mad.lo.s32 %r5, %r5, 3, 1;
  bra.uni NEXT;
EVEN:
  shr.u32 %r5, %r5, 1;
NEXT:
  add.s32 %r6, %r6, 1;
  bra.uni WHILE;
DONE:
  add.s64 %rd5, %rd1, %rd3;
  st.global.u32 [%rd5], %r6;
  ret;
}
"""
