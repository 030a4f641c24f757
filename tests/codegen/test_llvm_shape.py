"""The shape of the generated LLVM IR that LLVM's and Python's time depend on (issue 18,
compile speed), and what must not change with it: the tensor-core matmul's wgmma asm returns
named structs, the MMAs of a K-step are one asm, a TMA kernel is emitted once with its map
parameters, and a compile's LLVM context is its own."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import tilelang.codegen.generate as generate_mod
from tilelang.codegen import walk as control
from tilelang.driver import compile_source
from tilelang.options import CompileOptions

ROOT = Path(__file__).resolve().parents[2]


def _compile(name: str, until: str = "ptx", target: str = "sm_90a"):
    path = ROOT / "examples" / f"{name}.tile"
    res = compile_source(path.read_text(), str(path), CompileOptions(target=target), until=until)
    assert res.ok, [d.message for d in res.diagnostics]
    return res


@pytest.fixture(scope="module")
def matmul():
    return _compile("matmul")


def test_wgmma_results_are_named_structs(matmul):
    text = matmul.llvm_ir
    # no literal struct of floats anywhere: it would be spelled out at every extractvalue
    body = "\n".join(ln for ln in text.splitlines() if " = type {" not in ln)
    assert not re.search(r"\{\s*float\s*,", body)
    named = set(re.findall(r'^%"?(f32x\d+)"? = type \{', text, re.M))
    assert named == {"f32x128"}, named          # fence, the MMAs, the waits
    for line in text.splitlines():
        if "extractvalue" in line:
            assert re.search(r'extractvalue %"?f32x\d+"? ', line), line
    # the 128 x 128 f32 accumulator over 128 threads: 128 registers; every asm returning them
    # is extracted once per register
    assert len(text) < 150_000, len(text)


def test_mmas_of_a_k_step_are_one_asm(matmul):
    text, ptx = matmul.llvm_ir, matmul.ptx
    calls = [ln for ln in text.splitlines() if "call" in ln and "wgmma.mma_async" in ln]
    # one asm holds all eight MMAs of a K step (sm_90a's default tile, 128 x 256 x 128 over
    # two warp groups: each group's 64 rows by eight k16 steps of m64n256k16); the PTX has
    # them one per line
    per_call = [ln.count("wgmma.mma_async") for ln in calls]
    assert per_call and all(n == 8 for n in per_call), per_call
    mma_lines = [ln for ln in ptx.splitlines() if ln.strip().startswith("wgmma.mma_async")]
    assert len(mma_lines) == 8 * len(calls)
    # each instruction names its own accumulator registers (N / 2 of m64nNk16 per thread)
    for ln in mma_lines:
        n = int(re.search(r"\.m64n(\d+)k16\.", ln).group(1))
        regs = re.search(r"\{([^}]*)\}", ln).group(1).split(",")
        assert n == 256 and len(regs) == n // 2 and len(set(regs)) == n // 2, ln[:80]


def test_tma_kernel_is_emitted_once(monkeypatch):
    calls = []
    real = generate_mod.emit_kernel_body

    def counting(kern):
        calls.append(kern.kernel.name)
        return real(kern)

    monkeypatch.setattr(generate_mod, "emit_kernel_body", counting)
    res = _compile("matmul", until="llvm")
    assert calls == ["matmul"]
    maps = res.codegen.kernel("matmul").tensor_maps
    assert [m.array for m in maps] == ["a", "b", "c"]
    # the maps follow the source parameters, in that order, 64-byte aligned and byval
    head = re.search(r'define ptx_kernel void @"?matmul"?\((.*)\)', res.llvm_ir).group(1)
    params = [p.strip() for p in head.split(", ")]
    assert [p.rsplit(" ", 1)[-1] for p in params[-3:]] == \
        ['%"a_tmap0"', '%"b_tmap1"', '%"c_tmap2"']
    assert all("byval([128 x i8]) align 64" in p for p in params[-3:])
    # each is a grid constant, annotated with its 1-based parameter index
    ints = dict(re.findall(r"^(!\d+) = !\{ i32 (\d+) \}", res.llvm_ir, re.M))
    marked = re.findall(r'@"?matmul"?, !"grid_constant", (!\d+) \}', res.llvm_ir)
    assert sorted(int(ints[m]) for m in marked) == [len(params) - 2, len(params) - 1,
                                                    len(params)]


def test_tma_maps_match_a_second_emission_with_them_given(monkeypatch):
    """The lazily added parameters give the kernel the old way gave it: emitting with the maps
    known from the start (KernelEmitter(tensor_maps=...)) yields the same PTX."""
    first = _compile("matmul")
    maps = first.codegen.kernel("matmul").tensor_maps
    real_emitter = generate_mod.KernelEmitter

    def with_maps(*args, **kwargs):
        kwargs["tensor_maps"] = maps
        return real_emitter(*args, **kwargs)

    def eager_emit(kernel, target, block, facts, *, exact, layout, fast_math=False, tma=False,
                   lineinfo=False, distributed="peers"):
        m = generate_mod._new_module(kernel.name, target)
        m.data_layout = layout
        plan = generate_mod.plan_for(kernel, target, block, facts, exact=exact,
                                     fast_math=fast_math, tma=tma, distributed=distributed)
        kern = with_maps(m, kernel, target, block=block, exact=exact, facts=facts,
                         fast_math=fast_math, tma=tma, lineinfo=lineinfo, plan=plan)
        control.emit_kernel_body(kern)
        return m, kern.stats, exact

    monkeypatch.setattr(generate_mod, "emit_kernel", eager_emit)
    second = _compile("matmul")
    assert second.ptx == first.ptx


def test_a_compile_has_its_own_llvm_context():
    # attention's wgmma results are named structs: in the process-wide context the second
    # compile's named types would print as %"f32x32.1" ...
    a = _compile("attention", until="ptx")
    b = _compile("attention", until="ptx")
    assert re.search(r'%"?f32x32"? = type', a.llvm_ir) and ".1\" = type" not in b.llvm_ir \
        and ".1 = type" not in b.llvm_ir
    assert a.llvm_ir == b.llvm_ir and a.ptx == b.ptx


def test_tensor_core_lowerings_load_only_for_products():
    """A kernel without a matrix product does not import the tensor-core lowerings (~16 ms of
    CPU on every cold compile); the matmul loads them when it meets its product."""
    code = (
        "import json, sys\n"
        "from tilelang.driver import compile_source\nfrom tilelang.options import CompileOptions\n"
        "out = {}\n"
        "for name in ('softmax', 'matmul'):\n"
        "    p = f'examples/{name}.tile'\n"
        "    r = compile_source(open(p).read(), p, CompileOptions(target='sm_90a'), until='ptx')\n"
        "    assert r.ok\n"
        "    out[name] = sorted(m for m in sys.modules if m.startswith('tilelang.codegen'))\n"
        "print(json.dumps(out))\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    mods = json.loads(r.stdout.splitlines()[-1])
    heavy = {"tilelang.codegen.lower.tensorcore.wgmma_product", "tilelang.codegen.lower.tensorcore.mma_sync",
             "tilelang.codegen.lower.tensorcore.mma_pipeline", "tilelang.codegen.lower.tensorcore.tma_load",
             "tilelang.codegen.layouts.wgmma"}
    assert not (heavy | {"tilelang.codegen.lower.tensorcore.matmul"}) & set(mods["softmax"])
    assert heavy <= set(mods["matmul"])     # (its pipelined loop lowers the product itself)


def test_product_names_agree():
    from tilelang.codegen.lower.tensorcore import mma_operands
    from tilelang.codegen.lower import table
    assert table.PRODUCTS == mma_operands.PRODUCTS
