"""Helpers for the runtime tests: a stand-in compiler with hand-written PTX kernels that follow
docs/abi.md, so the runtime is tested on the emulator independently of the code generator.

A "source" for the fake compiler is text with lines `kernel NAME`; each name picks a kernel of
`LIBRARY`. The PTX honours the specialization: `const` values are baked in, and for an array
compiled as contiguous the kernel ignores the last stride it is passed (as the ABI allows), so a
wrong specialization choice by the runtime gives wrong results.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field

import pytest

from tilelang.codegen.api import AbiParam, ArrayFacts, KernelArtifact
from tilelang.runtime.compiler import Built, CompileOptions
from tilelang.runtime.signature import KernelInfo, ModuleInfo, ParamInfo
from tilelang.sema.launch_verify import NvvmAttrs
from tilelang.sema.types import DTYPES

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

HEAD = ".version 8.0\n.target {target}\n.address_size 64\n"


def _arr(name, rank=1):
    out = [f".param .u64 {name}"]
    out += [f".param .u64 {name}_shape{i}" for i in range(rank)]
    out += [f".param .u64 {name}_stride{i}" for i in range(rank)]
    return out


def _target_ptx(target: str) -> str:
    return "sm_90a" if target == "sm_90a" else target


def vadd_ptx(consts, facts, target):
    tile = int(consts["TILE"])
    ca, cb, cc = (facts[n].contiguous for n in "abc")
    params = ", ".join(_arr("a") + _arr("b") + _arr("c"))
    unit = "  mov.u64 %rd{}, 1;\n"
    return HEAD.format(target=_target_ptx(target)) + f"""
// facts: a={facts['a'].key()} b={facts['b'].key()} c={facts['c'].key()} TILE={tile}
.visible .entry vadd({params})
.maxntid 128, 1, 1
{{
  .reg .pred %p<8>;
  .reg .b32 %r<8>;
  .reg .b64 %rd<40>;
  .reg .f32 %f<8>;
  ld.param.u64 %rd1, [a];
  ld.param.u64 %rd2, [a_shape0];
  ld.param.u64 %rd3, [a_stride0];
  ld.param.u64 %rd4, [b];
  ld.param.u64 %rd5, [b_shape0];
  ld.param.u64 %rd6, [b_stride0];
  ld.param.u64 %rd7, [c];
  ld.param.u64 %rd8, [c_shape0];
  ld.param.u64 %rd9, [c_stride0];
{unit.format(3) if ca else ''}{unit.format(6) if cb else ''}{unit.format(9) if cc else ''}\
  mov.u32 %r1, %ctaid.x;
  mov.u32 %r2, %tid.x;
  mov.u32 %r3, %ntid.x;
  mul.wide.u32 %rd10, %r1, {tile};
  add.s64 %rd11, %rd10, {tile};
  cvt.u64.u32 %rd12, %r2;
  add.s64 %rd13, %rd10, %rd12;
  cvt.u64.u32 %rd14, %r3;
LOOP:
  setp.ge.s64 %p1, %rd13, %rd11;
  @%p1 bra DONE;
  setp.ge.s64 %p2, %rd13, %rd8;
  @%p2 bra DONE;
  mov.f32 %f1, 0f00000000;
  setp.ge.s64 %p3, %rd13, %rd2;
  @%p3 bra SKIPA;
  mul.lo.s64 %rd15, %rd13, %rd3;
  shl.b64 %rd15, %rd15, 2;
  add.s64 %rd16, %rd1, %rd15;
  ld.global.f32 %f1, [%rd16];
SKIPA:
  mov.f32 %f2, 0f00000000;
  setp.ge.s64 %p4, %rd13, %rd5;
  @%p4 bra SKIPB;
  mul.lo.s64 %rd17, %rd13, %rd6;
  shl.b64 %rd17, %rd17, 2;
  add.s64 %rd18, %rd4, %rd17;
  ld.global.f32 %f2, [%rd18];
SKIPB:
  add.f32 %f3, %f1, %f2;
  mul.lo.s64 %rd19, %rd13, %rd9;
  shl.b64 %rd19, %rd19, 2;
  add.s64 %rd20, %rd7, %rd19;
  st.global.f32 [%rd20], %f3;
  add.s64 %rd13, %rd13, %rd14;
  bra LOOP;
DONE:
  ret;
}}
"""


def scalars_ptx(consts, facts, target):
    params = ", ".join(_arr("out") + [
        ".param .u8 a", ".param .u16 b", ".param .u32 c", ".param .u64 d", ".param .b16 e",
        ".param .f32 f", ".param .f64 g", ".param .u8 h", ".param .b16 k", ".param .u64 m"])
    unit = "  mov.u64 %rd3, 1;\n" if facts["out"].contiguous else ""
    return HEAD.format(target=_target_ptx(target)) + f"""
.visible .entry scalars({params})
.reqntid 1, 1, 1
{{
  .reg .b16 %rs<8>;
  .reg .b16 %h<4>;
  .reg .b32 %r<8>;
  .reg .b64 %rd<40>;
  .reg .f32 %f<8>;
  .reg .f64 %fd<8>;
  ld.param.u64 %rd1, [out];
  ld.param.u64 %rd3, [out_stride0];
{unit}  shl.b64 %rd3, %rd3, 3;
  ld.param.s8 %rs1, [a];
  cvt.s64.s16 %rd10, %rs1;
  st.global.u64 [%rd1], %rd10;
  add.s64 %rd1, %rd1, %rd3;
  ld.param.u16 %rs2, [b];
  cvt.u64.u16 %rd11, %rs2;
  st.global.u64 [%rd1], %rd11;
  add.s64 %rd1, %rd1, %rd3;
  ld.param.s32 %r1, [c];
  cvt.s64.s32 %rd12, %r1;
  st.global.u64 [%rd1], %rd12;
  add.s64 %rd1, %rd1, %rd3;
  ld.param.u64 %rd13, [d];
  st.global.u64 [%rd1], %rd13;
  add.s64 %rd1, %rd1, %rd3;
  ld.param.b16 %h1, [e];
  cvt.f64.f16 %fd1, %h1;
  st.global.f64 [%rd1], %fd1;
  add.s64 %rd1, %rd1, %rd3;
  ld.param.f32 %f1, [f];
  cvt.f64.f32 %fd2, %f1;
  st.global.f64 [%rd1], %fd2;
  add.s64 %rd1, %rd1, %rd3;
  ld.param.f64 %fd3, [g];
  st.global.f64 [%rd1], %fd3;
  add.s64 %rd1, %rd1, %rd3;
  ld.param.u8 %rs3, [h];
  cvt.u64.u16 %rd14, %rs3;
  st.global.u64 [%rd1], %rd14;
  add.s64 %rd1, %rd1, %rd3;
  ld.param.u16 %rs4, [k];
  cvt.u32.u16 %r2, %rs4;
  shl.b32 %r3, %r2, 16;
  mov.b32 %f2, %r3;
  cvt.f64.f32 %fd4, %f2;
  st.global.f64 [%rd1], %fd4;
  add.s64 %rd1, %rd1, %rd3;
  ld.param.u64 %rd15, [m];
  st.global.u64 [%rd1], %rd15;
  ret;
}}
"""


def copy2d_ptx(consts, facts, target):
    params = ", ".join(_arr("src", 2) + _arr("dst", 2))
    lines = []
    if facts["src"].contiguous:
        lines.append("  mov.u64 %rd5, 1;")
    if facts["dst"].contiguous:
        lines.append("  mov.u64 %rd11, 1;")
    unit = "\n".join(lines) + ("\n" if lines else "")
    return HEAD.format(target=_target_ptx(target)) + f"""
.visible .entry copy2d({params})
.maxntid 128, 1, 1
{{
  .reg .pred %p<8>;
  .reg .b32 %r<8>;
  .reg .b64 %rd<40>;
  .reg .f32 %f<4>;
  ld.param.u64 %rd1, [src];
  ld.param.u64 %rd2, [src_shape0];
  ld.param.u64 %rd3, [src_shape1];
  ld.param.u64 %rd4, [src_stride0];
  ld.param.u64 %rd5, [src_stride1];
  ld.param.u64 %rd7, [dst];
  ld.param.u64 %rd8, [dst_shape0];
  ld.param.u64 %rd9, [dst_shape1];
  ld.param.u64 %rd10, [dst_stride0];
  ld.param.u64 %rd11, [dst_stride1];
{unit}  mov.u32 %r1, %ctaid.x;
  cvt.u64.u32 %rd12, %r1;
  setp.ge.s64 %p1, %rd12, %rd8;
  @%p1 bra DONE;
  mov.u32 %r2, %tid.x;
  cvt.u64.u32 %rd13, %r2;
  mov.u32 %r3, %ntid.x;
  cvt.u64.u32 %rd14, %r3;
  mul.lo.s64 %rd15, %rd12, %rd4;
  mul.lo.s64 %rd16, %rd12, %rd10;
LOOP:
  setp.ge.s64 %p2, %rd13, %rd9;
  @%p2 bra DONE;
  mov.f32 %f1, 0f00000000;
  setp.ge.s64 %p3, %rd12, %rd2;
  setp.ge.s64 %p4, %rd13, %rd3;
  or.pred %p5, %p3, %p4;
  @%p5 bra STORE;
  mul.lo.s64 %rd17, %rd13, %rd5;
  add.s64 %rd17, %rd17, %rd15;
  shl.b64 %rd17, %rd17, 2;
  add.s64 %rd18, %rd1, %rd17;
  ld.global.f32 %f1, [%rd18];
STORE:
  mul.lo.s64 %rd19, %rd13, %rd11;
  add.s64 %rd19, %rd19, %rd16;
  shl.b64 %rd19, %rd19, 2;
  add.s64 %rd20, %rd7, %rd19;
  st.global.f32 [%rd20], %f1;
  add.s64 %rd13, %rd13, %rd14;
  bra LOOP;
DONE:
  ret;
}}
"""


def noop_ptx(consts, facts, target):
    return HEAD.format(target=_target_ptx(target)) + """
.visible .entry noop()
.maxntid 128, 1, 1
{
  ret;
}
"""


def _out_i32_kernel(name: str, directives: str, body: str, target: str,
                    contiguous: bool, extra: str = "") -> str:
    unit = "  mov.u64 %rd3, 1;\n" if contiguous else ""
    return HEAD.format(target=_target_ptx(target)) + extra + f"""
.visible .entry {name}({", ".join(_arr("out"))})
{directives}
{{
  .reg .pred %p<4>;
  .reg .b32 %r<16>;
  .reg .b64 %rd<16>;
  ld.param.u64 %rd1, [out];
  ld.param.u64 %rd2, [out_shape0];
  ld.param.u64 %rd3, [out_stride0];
{unit}{body}
  ret;
}}
"""


def _store(idx_reg: str, val_reg: str) -> str:
    """out[idx] = val (i32), skipped when idx >= extent."""
    return f"""  cvt.u64.u32 %rd4, {idx_reg};
  setp.ge.s64 %p1, %rd4, %rd2;
  @%p1 bra SKIP;
  mul.lo.s64 %rd5, %rd4, %rd3;
  shl.b64 %rd5, %rd5, 2;
  add.s64 %rd6, %rd1, %rd5;
  st.global.u32 [%rd6], {val_reg};
SKIP:"""


def cluster_ptx(consts, facts, target, name="clus", shape="2, 1, 1"):
    """out[ctaid.x] = 100 * clusterid.x + cluster_ctarank (one thread per block stores)."""
    body = """  mov.u32 %r1, %ctaid.x;
  mov.u32 %r2, %cluster_ctarank;
  mov.u32 %r3, %clusterid.x;
  mad.lo.u32 %r4, %r3, 100, %r2;
  mov.u32 %r5, %tid.x;
  setp.ne.u32 %p2, %r5, 0;
  @%p2 bra SKIP;
""" + _store("%r1", "%r4")
    return _out_i32_kernel(name, f".reqntid 32, 1, 1\n.reqnctapercluster {shape}\n"
                           ".explicitcluster", body, target, facts["out"].contiguous)


def fixed_ptx(consts, facts, target, name="fixed"):
    """out[ctaid.x * 64 + tid.x] = tid.x, with .reqntid 64."""
    body = """  mov.u32 %r1, %ctaid.x;
  mov.u32 %r2, %tid.x;
  mad.lo.u32 %r3, %r1, 64, %r2;
""" + _store("%r3", "%r2")
    return _out_i32_kernel(name, ".reqntid 64, 1, 1", body, target,
                           facts["out"].contiguous)


def bigsmem_ptx(consts, facts, target, nbytes=65536, name="bigsmem"):
    """Each thread writes tid + 1 at the end of a 64 KB dynamic shared buffer, then reads its
    neighbour's value after a barrier: out[tid] = ((tid + 1) % ntid) + 1."""
    body = f"""  mov.u32 %r1, %tid.x;
  mov.u32 %r2, %ntid.x;
  mov.u32 %r3, dsm;
  shl.b32 %r4, %r1, 2;
  add.s32 %r5, %r3, {nbytes - 4 * 128};
  add.s32 %r6, %r5, %r4;
  add.s32 %r7, %r1, 1;
  st.shared.u32 [%r6], %r7;
  bar.sync 0;
  rem.u32 %r8, %r7, %r2;
  shl.b32 %r9, %r8, 2;
  add.s32 %r10, %r5, %r9;
  ld.shared.u32 %r11, [%r10];
""" + _store("%r1", "%r11")
    return _out_i32_kernel(name, ".reqntid 128, 1, 1", body, target,
                           facts["out"].contiguous,
                           extra="\n.extern .shared .align 16 .b8 dsm[];\n")


@dataclass(frozen=True)
class FakeKernel:
    params: tuple
    ptx: object
    attrs: NvvmAttrs
    block: tuple = (128, 1, 1)
    cluster: tuple | None = None
    dynamic_smem: int = 0
    static_smem: int = 0
    reads_only: tuple = ()      # array parameters the kernel never stores into


def P(name, kind, dtype, rank=0, default=None):
    return ParamInfo(name, kind, dtype, rank, default)


F32_1 = ("array", "f32", 1)
LIBRARY = {
    "vadd": FakeKernel((P("a", *F32_1), P("b", *F32_1), P("c", *F32_1),
                        P("TILE", "const", "i32", 0, 1024)), vadd_ptx,
                       NvvmAttrs(maxntid=(128, 1, 1)), reads_only=("a", "b")),
    "scalars": FakeKernel((P("out", "array", "u64", 1), P("a", "scalar", "i8"),
                           P("b", "scalar", "u16"), P("c", "scalar", "i32"),
                           P("d", "scalar", "i64"), P("e", "scalar", "f16"),
                           P("f", "scalar", "f32"), P("g", "scalar", "f64"),
                           P("h", "scalar", "bool"), P("k", "scalar", "bf16"),
                           P("m", "scalar", "u64")), scalars_ptx,
                          NvvmAttrs(reqntid=(1, 1, 1)), block=(1, 1, 1)),
    "copy2d": FakeKernel((P("src", "array", "f32", 2), P("dst", "array", "f32", 2)),
                         copy2d_ptx, NvvmAttrs(maxntid=(128, 1, 1)), reads_only=("src",)),
    "noop": FakeKernel((), noop_ptx, NvvmAttrs(maxntid=(128, 1, 1))),
    "clus": FakeKernel((P("out", "array", "i32", 1),), cluster_ptx,
                       NvvmAttrs(reqntid=(32, 1, 1), cluster_dim=(2, 1, 1)), block=(32, 1, 1),
                       cluster=(2, 1, 1)),
    "clus16": FakeKernel((P("out", "array", "i32", 1),),
                         lambda c, f, t: cluster_ptx(c, f, t, "clus16", "4, 4, 1"),
                         NvvmAttrs(reqntid=(32, 1, 1), cluster_dim=(4, 4, 1)), block=(32, 1, 1),
                         cluster=(4, 4, 1)),
    "anyblock": FakeKernel((P("out", "array", "i32", 1),),
                           lambda c, f, t: _out_i32_kernel("anyblock", "", "", t, True),
                           NvvmAttrs()),
    "fixed": FakeKernel((P("out", "array", "i32", 1),), fixed_ptx,
                        NvvmAttrs(reqntid=(64, 1, 1)), block=(64, 1, 1)),
    "bigsmem": FakeKernel((P("out", "array", "i32", 1),), bigsmem_ptx,
                          NvvmAttrs(reqntid=(128, 1, 1)), dynamic_smem=65536),
    "hugesmem": FakeKernel((P("out", "array", "i32", 1),),
                           lambda c, f, t: bigsmem_ptx(c, f, t, 300 * 1024, "hugesmem"),
                           NvvmAttrs(reqntid=(128, 1, 1)), dynamic_smem=300 * 1024),
    "needs_const": FakeKernel((P("out", "array", "i32", 1), P("N", "const", "i32")),
                              lambda c, f, t: fixed_ptx(c, f, t, "needs_const"),
                              NvvmAttrs(reqntid=(64, 1, 1)), block=(64, 1, 1)),
}


@dataclass
class FakeCompiler:
    """The runtime's `Compiler` protocol over `LIBRARY`."""

    compiler_id: str = "fake-compiler-1"
    builds: list = field(default_factory=list)
    inspects: int = 0
    delay: float = 0.0          # seconds each build takes (widens races in the cache tests)

    def inspect(self, text: str, path: str, options: CompileOptions) -> ModuleInfo:
        """`kernel NAME` lines pick kernels; `import FILE` lines are dependencies (hashed)."""
        self.inspects += 1
        names = re.findall(r"^kernel (\w+)", text, re.M)
        kernels = {n: KernelInfo(n, LIBRARY[n].params) for n in names}
        sources = [(path, hashlib.sha256(text.encode()).hexdigest())]
        for dep in re.findall(r"^import (\S+)", text, re.M):
            with open(dep, "rb") as f:
                sources.append((dep, hashlib.sha256(f.read()).hexdigest()))
        return ModuleInfo(kernels, tuple(sources))

    def build(self, text, path, kernel, consts, facts, options, link) -> Built:
        if self.delay:
            import time
            time.sleep(self.delay)
        self.builds.append((kernel, dict(consts), {k: v.key() for k, v in facts.items()}))
        fk = LIBRARY[kernel]
        abi = tuple(AbiParam(p.name, p.kind, DTYPES[p.dtype], p.rank,
                             p.kind == "array" and p.name not in fk.reads_only)
                    for p in fk.params if p.kind != "const")
        art = KernelArtifact(kernel, abi, fk.block, fk.attrs, fk.cluster, fk.static_smem,
                             fk.dynamic_smem, dict(facts))
        ptx = fk.ptx(consts, facts, options.target.name)
        cubin = None
        if link:                                # the CUDA back end loads a cubin
            from tilelang.codegen.target.link import link_ptx
            cubin = link_ptx(ptx, options.target).cubin
        return Built(art, ptx, cubin, options.target.name)


@pytest.fixture(autouse=True)
def fresh_runtime():
    """Each test starts with no in-process builds and zeroed cache counters (import this
    fixture into a test module to use it)."""
    from tilelang.runtime import cache, module
    module.clear_memory_cache()
    cache.reset_stats()
    yield


def source(*names: str) -> str:
    return "// fake module\n" + "".join(f"kernel {n}\n" for n in names)


def run_script(code: str, cache_dir: str, extra_env=None, timeout=120):
    """Run Python code in a fresh process with the repo and this folder on the path."""
    env = dict(os.environ)
    env["TILELANG_CACHE_DIR"] = cache_dir
    env["PYTHONPATH"] = os.pathsep.join([ROOT, HERE, env.get("PYTHONPATH", "")])
    env.update(extra_env or {})
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=timeout)


def facts(**kw) -> dict:
    return {k: ArrayFacts.from_key(v) for k, v in kw.items()}


def use_emulated_driver(monkeypatch, devices: int = 1):
    """The runtime's CUDA back end on tests/emulated_cuda.py's driver with `devices` devices,
    every back end made anew; returns the driver (whose call log and state tests read)."""
    if os.path.join(ROOT, "tests") not in sys.path:
        sys.path.insert(0, os.path.join(ROOT, "tests"))
    import emulated_cuda
    from tilelang.runtime import backends, cuda
    drv = emulated_cuda.EmulatedDriver(devices=devices) if devices != 1 else \
        emulated_cuda.EmulatedDriver()
    emulated_cuda._record_links()
    monkeypatch.setattr(cuda, "_driver", lambda: drv)
    monkeypatch.setattr(backends, "_BACKENDS", {})
    return drv
