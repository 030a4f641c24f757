"""The NVSHMEM lowering of the distributed built-ins (lower/distributed.py, emit/nvshmem.py,
docs/distributed.md "The NVSHMEM lowering"), checked on the kernel's LLVM module before
NVSHMEM's device library is linked in, so that these tests need no NVSHMEM: the ABI of a
symmetric parameter (an array's parameters), which NVSHMEM functions each operation calls and
with which operation/comparison codes and PEs. tests/codegen/target/test_nvshmem_link.py links
the result with the real bitcode."""

from __future__ import annotations

import pathlib
import re

import pytest

from tilelang.codegen.emit.nvshmem import CMP, SIGNATURES
from tilelang.codegen.generate import abi_params, block_shape, emit_kernel, launch_spec
from tilelang.codegen.target.compile import data_layout
from tilelang.driver import compile_source
from tilelang.options import CompileOptions
from tilelang.targets import TARGETS

ROOT = pathlib.Path(__file__).resolve().parents[3]
SRC = """kernel k(x: Symmetric[Array[f32, 1]], pad: Symmetric[Array[PT, 1]], y: Array[f32, 1]) {
    let me = rank();
    store(y, index = (0,), tile = load(peer(x, (me + 1) % world_size()), index = (0,),
                                       shape = (128,), padding = 0.0));
    signal(peer(pad, 0), me, 1, op = "OP");
    wait_until(peer(pad, me), 0, "CMP", 2);
    barrier(pad, channel = 1);
}
"""


def module_of(src, distributed="nvshmem", target="sm_90"):
    opts = CompileOptions(target=target, distributed=distributed)
    res = compile_source(src, "t.tile", opts, until="tir")
    assert res.ok, [str(d) for d in res.diagnostics]
    k = res.ir.kernels[0]
    tgt = TARGETS[target]
    m, stats, _ = emit_kernel(k, tgt, block_shape(launch_spec(k)), {}, exact=True,
                              layout=data_layout(tgt.llvm_cpu, tgt.llvm_features(tgt.min_ptx)),
                              distributed=distributed)
    return str(m), stats, abi_params(k, distributed)


def kernel_ir(pt="u32", op="set", cmp="ge"):
    return module_of(SRC.replace("PT", pt).replace("OP", op).replace("CMP", cmp))


def calls(text: str, name: str) -> list[str]:
    """The argument lists of every call of `name`."""
    return re.findall(rf'call \S+ @"?{name}"?\(([^)]*)\)', text)


def declared(text: str) -> set[str]:
    return {m for m in re.findall(r'declare \S+ @"?(nvshmemx?_\w+)"?\(', text)}


def test_a_symmetric_parameter_is_an_array_in_the_heap():
    text, stats, params = kernel_ir()
    assert [p.kind for p in params] == ["nvshmem", "nvshmem", "array"]
    assert params[0].ptx_params() == (("x", "uint64"), ("x_shape0", "int64"),
                                      ("x_stride0", "int64"))
    head = re.search(r'define ptx_kernel void @"k"\(([^)]*)\)', text).group(1)
    assert head.count("i64") == 9            # (1 + 2) per parameter, no table, no rank
    assert stats.nvshmem and "nvshmem" in stats.features
    # no table is read: every peer comes from nvshmem_ptr
    assert "invariant.load" not in text


def test_declarations_have_the_bitcode_signatures():
    text, _, _ = kernel_ir()
    names = declared(text)
    assert names == {"nvshmem_my_pe", "nvshmem_n_pes", "nvshmem_ptr", "nvshmem_quiet",
                     "nvshmem_uint32_atomic_set", "nvshmem_uint32_atomic_add",
                     "nvshmem_uint32_wait_until"}
    for name in names:
        ret, params = SIGNATURES[name]
        m = re.search(rf'declare (\S+) @"{name}"\(([^)]*)\)', text)
        assert m.group(1) == str(ret)
        got = [a.split()[0] for a in m.group(2).split(", ")] if m.group(2) else []
        assert got == [str(p) for p in params], name


def test_rank_and_world_size_come_from_nvshmem():
    text, _, _ = kernel_ir()
    # once per symmetric parameter, in the entry block
    assert len(calls(text, "nvshmem_my_pe")) == 2 and len(calls(text, "nvshmem_n_pes")) == 2


def test_peer_is_nvshmem_ptr_and_an_unreachable_peer_traps():
    text, _, _ = kernel_ir()
    assert len(calls(text, "nvshmem_ptr")) >= 1
    assert 'call void @"llvm.trap"()' in text


@pytest.mark.parametrize("pt,name,code", [
    ("u32", "nvshmem_uint32_atomic_set", None), ("i32", "nvshmem_int32_atomic_set", None),
    ("i64", "nvshmem_long_atomic_set", None), ("u64", "nvshmemx_signal_op", 9)])
def test_signal_set(pt, name, code):
    text, _, _ = kernel_ir(pt=pt)
    (args,) = calls(text, name)
    if code is not None:                      # (address, value, NVSHMEM_SIGNAL_SET, pe)
        assert f"i32 {code}," in args
    # fence.acq_rel.sys, then nvshmem_quiet, then the signal
    at = text.index(f'@"{name}"(')
    before = text[:at]
    assert before.rindex("nvshmem_quiet") > before.rindex("fence.acq_rel.sys")


@pytest.mark.parametrize("pt,name", [("u32", "nvshmem_uint32_atomic_add"),
                                     ("u64", "nvshmemx_signal_op")])
def test_signal_add(pt, name):
    text, _, _ = kernel_ir(pt=pt, op="add")
    if pt == "u64":
        (args,) = calls(text, name)
        assert "i32 10," in args              # NVSHMEM_SIGNAL_ADD
    else:                                    # the signal and the barrier's arrive/take-back
        assert len(calls(text, name)) == 3


@pytest.mark.parametrize("cmp", sorted(CMP))
def test_wait_until_on_ones_own_pad_is_nvshmem_wait(cmp):
    text, _, _ = kernel_ir(cmp=cmp)
    waits = calls(text, "nvshmem_uint32_wait_until")
    # the wait (its comparison code and value 2) and the barrier's (>= 1)
    assert any(f"i32 {CMP[cmp]}, i32 2" in w for w in waits)
    assert any(f"i32 {CMP['ge']}, i32 1" in w for w in waits)
    # another rank's pad is polled over NVLink (ld.acquire.sys), as in the peer lowering
    assert "ld.acquire.sys.global.b32" in text


def test_u64_wait_is_the_signal_wait():
    text, _, _ = kernel_ir(pt="u64", cmp="eq")
    assert any(f"i32 {CMP['eq']}, i64 2" in w for w in calls(text, "nvshmem_signal_wait_until"))


def test_barrier_is_nvshmem_atomics_and_waits():
    text, _, _ = kernel_ir(pt="i64")
    adds = calls(text, "nvshmem_long_atomic_add")
    assert any("i64 1," in a for a in adds) and any("i64 -1," in a for a in adds)
    assert any(f"i32 {CMP['ge']}, i64 1" in w for w in calls(text, "nvshmem_long_wait_until"))
    # no plain atomic on a pad NVSHMEM's atomics update
    assert "red.release.sys" not in text and "red.relaxed.sys" not in text


def test_the_peer_lowering_calls_no_nvshmem():
    text, stats, params = module_of(SRC.replace("PT", "u32").replace("OP", "set")
                                    .replace("CMP", "ge"), distributed="peers")
    assert not declared(text) and not stats.nvshmem
    assert [p.kind for p in params] == ["symmetric", "symmetric", "array"]


def test_a_kernel_without_symmetric_arrays_is_unchanged():
    src = "kernel k(y: Array[f32, 1]) { store(y, index = (0,), tile = zeros((128,), f32)); }"
    a, sa, _ = module_of(src, distributed="nvshmem")
    b, _, _ = module_of(src, distributed="peers")
    assert a == b and not sa.nvshmem


def test_emit_plan_shows_the_lowering():
    from tilelang.cli import main
    import contextlib
    import io
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["--emit", "plan", "--distributed", "nvshmem",
                     str(ROOT / "examples/distributed/all_reduce.tile")]) == 0
    text = out.getvalue()
    assert "  distributed: nvshmem (x, pad: one address in the NVSHMEM symmetric heap, " \
           "extents, strides)\n" in text
    assert "    barrier: nvshmem_quiet, nvshmem_<T>_atomic_add, nvshmem_<T>_wait_until\n" in text
    assert "    peer: nvshmem_ptr\n" in text


def _nvlink_warnings(src, path="t.tile"):
    # generate()'s check, on the IR (the compile itself needs NVSHMEM's bitcode; with it,
    # tests/codegen/target/test_nvshmem_link.py sees the warning in the compile's diagnostics)
    from tilelang.codegen.generate import _warn_nvlink_only
    from tilelang.diagnostics import DiagnosticSink
    res = compile_source(src, path, CompileOptions(target="sm_90", distributed="nvshmem"),
                         until="tir")
    sink = DiagnosticSink()
    for k in res.ir.kernels:
        _warn_nvlink_only(k, sink)
    return sink.diagnostics


def test_peer_loads_and_stores_warn_that_they_need_nvlink():
    src = (ROOT / "examples/distributed/all_reduce.tile").read_text()
    (w,) = _nvlink_warnings(src)
    assert w.code == "W0766"
    assert w.message == ("kernel `all_reduce` loads or stores another PE's buffer through `peer` "
                         "(1 place): under NVSHMEM that reaches PEs of this node's NVLink domain "
                         "only (nvshmem_ptr), and the kernel traps on a PE of another node")
    assert (w.span.line, w.span.col) == (20, 26)          # load(peer(x, r), ...)


def test_signals_waits_and_ones_own_buffer_need_no_nvlink():
    src = """kernel k(x: Symmetric[Array[f32, 1]], pad: Symmetric[Array[u64, 1]],
                      y: Array[f32, 1]) {
        store(y, index = (0,), tile = load(peer(x, rank()), index = (0,), shape = (128,)));
        signal(peer(pad, (rank() + 1) % world_size()), 0, 1, op = "add");
        wait_until(peer(pad, rank()), 0, "ge", 1);
        barrier(pad);
    }
    """
    assert _nvlink_warnings(src) == []
