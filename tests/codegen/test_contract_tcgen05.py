"""The launch contract of tcgen05 code (codegen/contract.py, docs/launch.md "tcgen05"): the
tensor-memory budget (E0724), CTAs kept resident together sharing it (W0728), the thread
count and the pair's cluster the generated code relies on (internal E0799), exact texts; the
examples' contracts on sm_100a; the emulated driver refusing a pair kernel launched without
a cluster of two."""

from __future__ import annotations

import numpy as np
import pytest

from tilelang.codegen.contract import CodegenFeatures, decide_contract
from tilelang.diagnostics import InternalCompilerError, TileLaunchError
from tilelang.sema.launch_attrs import LaunchSpec
from tilelang.targets import get_target

SM100 = get_target("sm_100a")


def _decide(cols, reqntid=(128, 1, 1), cluster=None, minctasm=None, pair=False):
    spec = LaunchSpec(reqntid=reqntid, cluster=cluster, minctasm=minctasm)
    return decide_contract("k", spec, CodegenFeatures(tmem_columns=cols, tc5_pair=pair), SM100)


@pytest.mark.parametrize("cols", [1024, 48, 16])
def test_tensor_memory_budget(cols):
    with pytest.raises(TileLaunchError) as e:
        _decide(cols)
    d = e.value.diagnostics[0]
    assert d.code == "E0724"
    assert d.message == (f"the kernel's tcgen05 accumulators need {cols} tensor-memory "
                         f"columns; an allocation is a power of two from 32 to the 512 "
                         f"columns of an SM")


def test_resident_ctas_share_tensor_memory():
    c = _decide(512, minctasm=2)
    (w,) = [d for d in c.diagnostics if d.code == "W0728"]
    assert w.message == ("`minctasm = 2` keeps 2 CTAs on an SM, but each allocates 512 of its "
                         "512 tensor-memory columns: the later ones wait in tcgen05.alloc "
                         "until an earlier one ends")
    assert not [d for d in _decide(256, minctasm=2).diagnostics if d.code == "W0728"]


def test_threads_and_pair_cluster_the_code_relies_on():
    assert _decide(128).attrs.reqntid == (128, 1, 1)
    assert _decide(256, reqntid=(192, 1, 1)).attrs.reqntid == (192, 1, 1)
    with pytest.raises(InternalCompilerError, match=r"tcgen05 code with threads \(256, 1, 1\) "
                       r"\(it needs `.reqntid` 128 or 192\)"):
        _decide(128, reqntid=(256, 1, 1))
    assert _decide(128, cluster=(2, 1, 1), pair=True).attrs.cluster_dim == (2, 1, 1)
    with pytest.raises(InternalCompilerError, match=r"a CTA pair's tcgen05 code with cluster "
                       r"\(1, 2, 1\) \(it needs \(2, 1, 1\)\)"):
        _decide(128, cluster=(1, 2, 1), pair=True)


def test_the_pair_kernel_header_and_a_launch_without_its_cluster():
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).parent))
    from wgmma_support import compile_for, one_group_matmul
    from tilelang.emulator import EmulatorDevice, LaunchRefused
    arrays = {"a": np.zeros((256, 64), np.float16), "b": np.zeros((64, 128), np.float16),
              "c": np.zeros((256, 128), np.float32)}
    res = compile_for(one_group_matmul(), "matmul", arrays, target="sm_100a")
    ptx = res.ptx
    assert "tcgen05.mma.cta_group::2" in ptx
    assert ".reqntid 128, 1, 1" in ptx and ".reqnctapercluster 2, 1, 1" in ptx
    # without the directive, the driver would take the launch's cluster: one CTA is refused
    bare = ptx.replace(".reqnctapercluster 2, 1, 1\n", "").replace(".explicitcluster\n", "")
    dev = EmulatorDevice()
    fn = dev.load_module(bare).get_function("matmul")
    with pytest.raises(LaunchRefused, match=r"^launch of matmul: its tcgen05 instructions with "
                       r"\.cta_group::2 run on CTA pairs, but the cluster \(1, 1, 1\) has an odd "
                       r"number of CTAs$"):
        dev.launch(fn, (2, 1, 1), (128, 1, 1), [])


PRODUCT = """
@launch(reqntid = (THREADS, 1, 1))
kernel mm(a: Array[f16, 2], b: Array[f16, 2], c: Array[f32, 2]) {
    let ta = load(a, index = (0, 0), shape = (128, 64), padding = 0);
    let tb = load(b, index = (0, 0), shape = (64, 128), padding = 0);
    store(c, index = (0, 0), tile = ta @ tb);
}
"""


@pytest.mark.parametrize("threads,target,note", [
    (256, "sm_100a", True), (512, "sm_100a", True), (128, "sm_100a", False),
    (192, "sm_100a", False), (256, "sm_90a", False), (256, "sm_120a", False)])
def test_a_product_that_fits_tcgen05_but_for_the_block(threads, target, note):
    from tilelang.driver import compile_source
    from tilelang.options import CompileOptions
    res = compile_source(PRODUCT.replace("THREADS", str(threads)), "mm.tile",
                         CompileOptions(target=target), until="ptx")
    assert res.ok
    got = [d for d in res.diagnostics if d.code == "E0729"]
    assert ("tcgen05.mma" in res.ptx) == (target == "sm_100a" and not note)
    if not note:
        assert not got
        return
    (d,) = got
    assert d.message == (f"tcgen05 needs a block of 128 threads (four warps, one for each "
                         f"quarter of tensor memory's lanes) or 192 (and a producer and an MMA "
                         f"warp), but the block shape ({threads}, 1, 1) has {threads}; using "
                         f"mma.sync instead")
    assert d.span is not None and d.span.line == 2


def test_the_runtime_refuses_a_block_the_tcgen05_kernel_was_not_compiled_for():
    import pathlib
    import tilelang
    src = (pathlib.Path(__file__).resolve().parents[2] / "examples" / "matmul.tile").read_text()
    mod = tilelang.compile(src, arch="sm_100a", backend="emulator", cache=False)
    a, b = np.zeros((256, 64), np.float16), np.zeros((64, 128), np.float16)
    c = np.zeros((256, 128), np.float32)
    with pytest.raises(tilelang.LaunchConfigError) as e:
        mod.matmul[(2, 1)](a, b, c, block=(128, 1, 1))
    assert e.value.code == "E0901"
    assert e.value.diagnostics[0].message == ("launch of `matmul`: block (128, 1, 1) differs "
                                              "from the kernel's .reqntid (192, 1, 1)")
