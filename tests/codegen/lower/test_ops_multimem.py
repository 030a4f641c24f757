"""PTX of multimem_store and multimem_reduce (lower/multimem.py, docs/distributed.md
"Multimem"): the multicast address as a fourth parameter of exactly the symmetric arrays a
kernel uses multimem on, the instruction per element type and reduction, sm_90 as the floor
(E0752 below it), sema's refusals (no float min/max, no 16-bit types, a symmetric array
required), NVSHMEM's nvshmemx_mc_ptr under the NVSHMEM lowering, and the emulator knowing
every opcode emitted."""

from __future__ import annotations

import re

import pytest

from tilelang.codegen.generate import block_shape, emit_kernel, launch_spec
from tilelang.codegen.target.compile import data_layout
from tilelang.driver import compile_source
from tilelang.emulator.coverage import classify
from tilelang.emulator.parser import parse_ptx
from tilelang.options import CompileOptions
from tilelang.targets import TARGETS

SRC = """kernel k(x: Symmetric[Array[DT, 1]], z: Symmetric[Array[DT, 1]],
         u: Symmetric[Array[DT, 1]], y: Array[DT, 1]) {
    let i = arange(128);
    let s = multimem_reduce(x, (i,), op = "OP");
    multimem_store(z, (i,), s, mask = i < 100);
    store(y, index = (0,), tile = s + load(peer(u, 0), index = (0,), shape = (128,)));
}
"""


def compiled(dt="f32", op="add", target="sm_90", until="ptx"):
    src = SRC.replace("DT", dt).replace("OP", op)
    return compile_source(src, "t.tile", CompileOptions(target=target), until=until)


def ptx_of(**kw):
    res = compiled(**kw)
    assert res.ok, [str(d) for d in res.diagnostics]
    return res.ptx, res.codegen.kernel("k")


def test_the_multicast_address_is_passed_for_the_arrays_multimem_uses():
    ptx, art = ptx_of()
    assert [p.multicast for p in art.params] == [True, True, False, False]
    assert art.params[0].ptx_params() == (("x", "uint64"), ("x_len", "int64"),
                                          ("x_rank", "int64"), ("x_mc", "uint64"))
    assert art.params[2].ptx_params() == (("u", "uint64"), ("u_len", "int64"),
                                          ("u_rank", "int64"))
    assert len(re.findall(r"\.param \.u64 k_param_\d+", ptx)) == 4 + 4 + 3 + 3
    assert art.params[1].written and not art.params[0].written
    # the artifact round-trips through the cache's JSON
    from tilelang.codegen.api import AbiParam
    assert AbiParam.from_json(art.params[0].to_json()) == art.params[0]
    assert "multicast" not in art.params[2].to_json()


@pytest.mark.parametrize("dt,op,ld,st", [
    ("f32", "add", "add.f32", "f32"), ("f64", "add", "add.f64", "f64"),
    ("i32", "min", "min.s32", "s32"), ("u32", "max", "max.u32", "u32"),
    ("i64", "add", "add.u64", "s64"), ("i64", "max", "max.s64", "s64"),
    ("u64", "add", "add.u64", "u64")])
def test_instructions(dt, op, ld, st):
    ptx, _ = ptx_of(dt=dt, op=op)
    assert re.search(rf"@%p\d+ multimem\.ld_reduce\.relaxed\.sys\.global\.{re.escape(ld)} "
                     rf"%r[d]?\d+, \[%rd\d+\];", ptx)
    assert re.search(rf"@%p\d+ multimem\.st\.relaxed\.sys\.global\.{st} \[%rd\d+\], "
                     rf"%r[d]?\d+;", ptx)


def test_every_opcode_is_known_to_the_emulator():
    for dt, op in (("f32", "add"), ("i64", "min"), ("u64", "add")):
        ptx, _ = ptx_of(dt=dt, op=op)
        ops = {i.opcode for f in parse_ptx(ptx).functions.values() for i in f.instrs}
        assert any(o.startswith("multimem.") for o in ops)
        assert {o: classify(o).why for o in ops if not classify(o).known} == {}


@pytest.mark.parametrize("target", ["sm_80", "sm_89"])
def test_below_sm_90_is_e0752(target):
    res = compiled(target=target)
    assert not res.ok and not res.ptx
    (d,) = [d for d in res.diagnostics if d.severity.name == "ERROR"]
    assert d.code == "E0752"
    assert d.message == f"`multimem` needs sm_90 or newer; the target is {target}"


@pytest.mark.parametrize("dt,op,code,msg", [
    ("f32", "min", "E0508", '`multimem_reduce`: parameter `x` is a symmetric Array[f32, 1], but '
                            'multimem_reduce\'s "min" takes i32, u32, i64, u64'),
    ("f16", "add", "E0508", "`multimem_reduce`: parameter `x` is a symmetric Array[f16, 1], but "
                            "multimem takes arrays of i32, u32, i64, u64, f32, f64"),
    ("f32", "mul", "E0507", '`multimem_reduce`: parameter `op` must be one of "add", "min", '
                            '"max", found "mul"'),
])
def test_sema_refusals(dt, op, code, msg):
    res = compiled(dt=dt, op=op, until="tir")
    d = res.diagnostics[0]
    assert (d.code, d.message) == (code, msg)


def test_a_plain_array_is_refused():
    src = "kernel k(y: Array[f32, 1]) { multimem_store(y, (arange(4),), zeros((4,), f32)); }"
    res = compile_source(src, "t.tile", CompileOptions(target="sm_90"), until="tir")
    d = res.diagnostics[0]
    assert d.code == "E0506" and d.message.startswith(
        "`multimem_store`: parameter `x` must be a symmetric array")


def test_plan_names_the_multicast_arrays():
    res = compiled(until="plan")
    assert "    multicast address passed for: x, z\n" in res.plan


def test_under_nvshmem_the_multicast_address_is_nvshmemx_mc_ptr():
    res = compiled(until="tir")
    k = res.ir.kernels[0]
    tgt = TARGETS["sm_90"]
    m, stats, _ = emit_kernel(k, tgt, block_shape(launch_spec(k)), {}, exact=True,
                              layout=data_layout(tgt.llvm_cpu, tgt.llvm_features(tgt.min_ptx)),
                              distributed="nvshmem")
    text = str(m)
    # team NVSHMEM_TEAM_WORLD (0), this PE's heap address of x and of z
    assert len(re.findall(r'call i8\* @"nvshmemx_mc_ptr"\(i32 0, i8\* %', text)) == 2
    assert "multimem.ld_reduce" in text and "multimem.st" in text
    assert {"nvshmem", "multimem"} <= stats.features
