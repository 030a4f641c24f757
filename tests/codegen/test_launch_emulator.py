"""The contract at run time, on the CPU emulator (which refuses launches like the driver).
Seed 000_b9a08466c2c6e888.txt: ".maxntid ... lets the same cubin work for a range of launch
shapes"; ".reqntid is a hard contract — a launch with a different shape is rejected"; cluster
kernels are dispatched in clusters of the declared shape. The PTX is the one our pipeline wrote
(LLVM body + our header) and nvJitLink accepted."""

from __future__ import annotations

import numpy as np
import pytest

from test_launch_support import launch, llvm_ptx
from tilelang.codegen.contract import CodegenFeatures, decide_contract
from tilelang.sema.launch_attrs import resolve_launch
from tilelang.codegen.target.link import link_ptx
from tilelang.codegen.target.ptx_header import plan_module, rewrite_ptx

emu = pytest.importorskip("tilelang.emulator.device")
from tilelang.emulator.errors import LaunchRefused  # noqa: E402
from tilelang.targets import get_target

N = 1024


def index_kernel_ir() -> str:
    """out[b * ntid.x * ntid.y + tid.y * ntid.x + tid.x] = that index + 1."""
    import llvmlite.ir as ir
    m = ir.Module("idx")
    m.triple = "nvptx64-nvidia-cuda"
    i32 = ir.IntType(32)
    fn = ir.Function(m, ir.FunctionType(ir.VoidType(), [ir.PointerType(i32, 1)]), "k")
    fn.calling_convention = "ptx_kernel"
    b = ir.IRBuilder(fn.append_basic_block())

    def sreg(name):
        f = m.globals.get(f"llvm.nvvm.read.ptx.sreg.{name}") or ir.Function(
            m, ir.FunctionType(i32, []), f"llvm.nvvm.read.ptx.sreg.{name}")
        return b.call(f, [])

    nx = sreg("ntid.x")
    per_block = b.mul(nx, sreg("ntid.y"))
    idx = b.add(b.add(b.mul(sreg("ctaid.x"), per_block), b.mul(sreg("tid.y"), nx)),
                sreg("tid.x"))
    b.store(b.add(idx, ir.Constant(i32, 1)), b.gep(fn.args[0], [idx]))
    b.ret_void()
    return str(m)


def build(line: str, target: str = "sm_90", features=None) -> str:
    spec = resolve_launch(launch(line), get_target(target))
    contract = decide_contract("k", spec, features, get_target(target))
    plan = plan_module(get_target(target), {"k": contract})
    ptx = rewrite_ptx(llvm_ptx(index_kernel_ir(), plan.llvm_cpu, plan.llvm_features), plan,
                      {"k": contract})
    link_ptx(ptx, get_target(target), verbose=False, env={})
    return ptx


def run(ptx: str, grid, block, cluster=None) -> np.ndarray:
    dev = emu.EmulatorDevice()
    out = dev.to_device(np.zeros(N, np.uint32))
    fn = dev.load_module(ptx).get_function("k")
    dev.launch(fn, grid, block, [out], cluster=cluster)
    return dev.from_device(out, (N,), np.uint32)


def expect(total: int) -> np.ndarray:
    want = np.zeros(N, np.uint32)
    want[:total] = np.arange(1, total + 1)
    return want


def test_one_maxntid_cubin_serves_smaller_shapes():
    ptx = build("@launch(maxntid = (256, 1, 1))", "sm_80")
    assert ".maxntid 256, 1, 1\n" in ptx and ".reqntid" not in ptx
    for grid, block in [((2, 1, 1), (256, 1, 1)), ((3, 1, 1), (128, 1, 1)),
                        ((4, 1, 1), (32, 1, 1)), ((2, 1, 1), (64, 2, 1)), ((1, 1, 1), (96, 1, 1))]:
        total = grid[0] * block[0] * block[1]
        assert (run(ptx, grid, block) == expect(total)).all(), (grid, block)
    with pytest.raises(LaunchRefused):
        run(ptx, (1, 1, 1), (512, 1, 1))


def test_compiler_chosen_shape_for_adaptive_code_is_maxntid():
    ptx = build("@launch(minctasm = 2)", "sm_86", CodegenFeatures(threads=(128, 1, 1)))
    assert ".maxntid 128, 1, 1\n.minnctapersm 2\n" in ptx
    assert (run(ptx, (2, 1, 1), (64, 1, 1)) == expect(128)).all()


def test_reqntid_kernel_refuses_other_shapes():
    ptx = build("@launch(maxnreg = 64)", "sm_90",
                CodegenFeatures(threads=(128, 1, 1), warp_specialized=True))
    assert ".reqntid 128, 1, 1\n.maxnreg 64\n" in ptx
    assert (run(ptx, (2, 1, 1), (128, 1, 1)) == expect(256)).all()
    for block in [(96, 1, 1), (64, 2, 1), (256, 1, 1)]:
        with pytest.raises(LaunchRefused, match="reqntid"):
            run(ptx, (1, 1, 1), block)


def test_cluster_contract_enforced():
    ptx = build("@launch(reqntid = (128, 1, 1), cluster = (2, 1, 1))", "sm_90")
    assert ".explicitcluster\n.reqnctapercluster 2, 1, 1\n" in ptx
    assert (run(ptx, (4, 1, 1), (128, 1, 1)) == expect(512)).all()
    with pytest.raises(LaunchRefused, match="divisible"):
        run(ptx, (3, 1, 1), (128, 1, 1))
    with pytest.raises(LaunchRefused, match="reqnctapercluster"):
        run(ptx, (4, 1, 1), (128, 1, 1), cluster=(4, 1, 1))


def test_sm80_build_of_cluster_kernel_runs_without_clusters():
    """The cluster group is dropped for sm_80, so the same source launches there unclustered."""
    ptx = build("@launch(reqntid = (128, 1, 1), cluster = (2, 1, 1))", "sm_80")
    assert ".explicitcluster" not in ptx
    assert (run(ptx, (3, 1, 1), (128, 1, 1)) == expect(384)).all()
