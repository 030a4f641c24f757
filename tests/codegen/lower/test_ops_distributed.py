"""PTX of the distributed built-ins (lower/distributed.py, docs/distributed.md): the ABI of a
symmetric parameter (table, world size, rank), `signal` as a release at system scope after a
block barrier, `wait_until` as acquire polling with nanosleep, `barrier` on a pad's slots; and
every opcode they emit is one the emulator knows."""

from __future__ import annotations

import re

import pytest

from tilelang.driver import compile_source
from tilelang.emulator.coverage import classify
from tilelang.emulator.parser import parse_ptx
from tilelang.options import CompileOptions

SRC = """kernel k(x: Symmetric[Array[f32, 1]], pad: Symmetric[Array[PT, 1]], y: Array[f32, 1]) {
    let me = rank();
    store(y, index = (0,), tile = load(peer(x, (me + 1) % world_size()), index = (0,),
                                       shape = (128,), padding = 0.0));
    signal(peer(pad, 0), me, 1, op = "OP");
    wait_until(peer(pad, me), 0, "CMP", 2);
    barrier(pad, channel = 1);
}
"""


def ptx_of(pt="u32", op="set", cmp="ge", target="sm_90"):
    src = SRC.replace("PT", pt).replace("OP", op).replace("CMP", cmp)
    res = compile_source(src, "t.tile", CompileOptions(target=target), until="ptx")
    assert res.ok, [str(d) for d in res.diagnostics]
    return res.ptx, res.codegen.kernel("k")


def test_abi_of_a_symmetric_parameter():
    ptx, art = ptx_of()
    assert [p.kind for p in art.params] == ["symmetric", "symmetric", "array"]
    assert art.params[0].ptx_params() == (("x", "uint64"), ("x_len", "int64"),
                                          ("x_rank", "int64"))
    assert art.params[1].written and not art.params[0].written
    # 3 + 3 + (1 + 2) PTX parameters, all 64-bit
    assert len(re.findall(r"\.param \.u64 k_param_\d+", ptx)) == 9


@pytest.mark.parametrize("pt,bits", [("u32", 32), ("i64", 64)])
def test_signal_set_is_a_release_store_after_a_block_barrier(pt, bits):
    ptx, _ = ptx_of(pt=pt)
    body = ptx[ptx.index("{"):]
    st = body.index(f"st.release.sys.global.b{bits}")
    assert "bar.sync" in body[:st]
    assert re.search(rf"@%p\d+ st\.release\.sys\.global\.b{bits} \[%rd\d+\], %r[d]?\d+;", body)


def test_signal_add_is_a_release_reduction():
    ptx, _ = ptx_of(op="add")
    assert "st.release.sys" not in ptx
    # the signal and the barrier's arrivals; the barrier's departures are relaxed
    assert ptx.count("red.release.sys.global.add.u32") >= 2
    assert "red.relaxed.sys.global.add.u32" in ptx


@pytest.mark.parametrize("cmp", ["ge", "lt", "eq", "ne"])
def test_wait_until_polls_with_acquire_loads_and_sleeps(cmp):
    ptx, _ = ptx_of(cmp=cmp)
    assert "nanosleep.u32 64;" in ptx
    # every acquire load's value is compared (unsigned for a u32 pad) and the loop goes on
    regs = re.findall(r"ld\.acquire\.sys\.global\.b32 (%r\d+), \[%rd\d+\];", ptx)
    assert len(regs) >= 2
    for r in regs:
        assert re.search(rf"setp\.\w+\.(u32|b32)\s+%p\d+, {r}, ", ptx), r


def test_signed_pads_compare_signed():
    ptx, _ = ptx_of(pt="i32", cmp="lt")
    assert "setp.lt.s32" in ptx


@pytest.mark.parametrize("target", ["sm_80", "sm_90a", "sm_120"])
@pytest.mark.parametrize("pt", ["u32", "u64"])
def test_every_opcode_is_known_to_the_emulator(target, pt):
    ptx, _ = ptx_of(pt=pt, op="add", target=target)
    ops = {i.opcode for f in parse_ptx(ptx).functions.values() for i in f.instrs}
    assert {o: classify(o).why for o in ops if not classify(o).known} == {}
