"""Throughput of the PTX emulator: thread-instructions per second on typical kernels.

    python3 benchmarks/emulator_bench.py [--no-counters]

The headline is the 1M-element f32 vector add (8,192 blocks of 128 threads) compiled by LLVM's
NVPTX back end at -O3; the goal is under 5 s on a 2-core machine.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tilelang.emulator.device import EmulatorDevice  # noqa: E402

HEADER = ".version 8.0\n.target sm_80\n.address_size 64\n"


def llvm_vadd_ptx() -> str:
    import llvmlite.binding as llvm
    import llvmlite.ir as ir
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
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
    mod = llvm.parse_assembly(str(m))
    tm = llvm.Target.from_triple(m.triple).create_target_machine(cpu="sm_80", opt=3)
    pb = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=3))
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


def bench(counters: bool):
    rng = np.random.default_rng(0)
    dev = EmulatorDevice(counters=counters)
    rows = []

    def run(label, ptx, name, grid, block, args, check):
        fn = dev.load_module(ptx).get_function(name)
        t0 = time.perf_counter()
        rep = dev.launch(fn, grid, block, args)
        dt = time.perf_counter() - t0
        ok = check()
        rows.append((label, rep.threads, rep.total_instructions, dt,
                     rep.total_instructions / dt, "ok" if ok else "WRONG"))

    n = 1 << 20
    a, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    pa, pb, pc = dev.to_device(a), dev.to_device(b), dev.malloc(4 * n)
    run("vector add f32 1M (LLVM -O3)", llvm_vadd_ptx(), "vadd", (8192,), (128,),
        [pa, pb, pc, np.int32(n)],
        lambda: np.array_equal(dev.from_device(pc, (n,), np.float32), a + b))

    x = rng.integers(-100, 100, n).astype(np.float32)
    px, po = dev.to_device(x), dev.malloc(4 * 4096)
    run("block reduction 1M (shfl+smem+bar)", REDUCE, "reduce", (4096,), (256,), [po, px],
        lambda: np.array_equal(dev.from_device(po, (4096,), np.float32),
                               x.reshape(4096, 256).sum(1)))

    m = 256
    A = rng.integers(-4, 4, (m, m)).astype(np.float32)
    B = rng.integers(-4, 4, (m, m)).astype(np.float32)
    qa, qb, qc = dev.to_device(A), dev.to_device(B), dev.malloc(4 * m * m)
    run("tiled smem matmul 256^3", MATMUL, "mm", (m // 16, m // 16), (16, 16),
        [qc, qa, qb, np.uint32(m)],
        lambda: np.array_equal(dev.from_device(qc, (m, m), np.float32), A @ B))

    k = 1 << 16
    v = rng.integers(1, 10000, k).astype(np.uint32)
    pv, pw = dev.to_device(v), dev.malloc(4 * k)

    def collatz_ok():
        got = dev.from_device(pw, (k,), np.uint32)
        steps = np.zeros(k, np.uint32)
        cur = v.astype(np.int64)
        while (cur > 1).any():
            act = cur > 1
            cur = np.where(act, np.where(cur % 2 == 0, cur // 2, 3 * cur + 1), cur)
            steps += act
        return np.array_equal(got, steps)
    run("divergent loops (collatz) 64K", COLLATZ, "collatz", (k // 128,), (128,), [pw, pv],
        collatz_ok)
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-counters", action="store_true",
                    help="skip the coalescing / bank-conflict counters")
    args = ap.parse_args(argv)
    rows = bench(not args.no_counters)
    print(f"PTX emulator throughput ({platform.processor() or platform.machine()}, "
          f"Python {platform.python_version()}, NumPy {np.__version__}, counters "
          f"{'off' if args.no_counters else 'on'})\n")
    print(f"| {'kernel':<36} | {'threads':>9} | {'thread-instr':>13} | {'seconds':>8} "
          f"| {'thread-instr/s':>14} | check |")
    print(f"|{'-' * 38}|{'-' * 11}|{'-' * 15}|{'-' * 10}|{'-' * 16}|-------|")
    for label, th, ins, dt, rate, ok in rows:
        print(f"| {label:<36} | {th:>9,} | {ins:>13,} | {dt:>8.3f} | {rate:>14,.0f} | {ok:<5} |")
    return 0 if all(r[-1] == "ok" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
