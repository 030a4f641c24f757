"""On a real GPU (skipped without one): the driver honours the contract we write, and the
occupancy model agrees with the driver's calculator. Seed 000_b9a08466c2c6e888.txt: ".maxntid
... the same cubin works for a range of launch shapes"; ".reqntid is a hard contract — a launch
with a different shape is rejected by the driver". Seed 004_c6dc5fc6aab2fa35.txt §6: occupancy.
"""

from __future__ import annotations

import ctypes
import os

import numpy as np
import pytest

from tilelang.codegen.contract import decide_contract
from tilelang.sema.launch_attrs import AttrValue, resolve_launch
from tilelang.codegen.target.link import link_ptx
from tilelang.codegen.occupancy import occupancy
from tilelang.codegen.target.ptx_header import rewrite_ptx
from tilelang.targets import get_target, validate_target

pytestmark = pytest.mark.gpu

# Each thread writes its linear thread index to out[tid] (out is a u32 array of 1024 slots).
BODY = """\
.version 7.0
.target sm_80
.address_size 64

.visible .entry k(
\t.param .u64 k_param_0
)
{{
\t.reg .b32 %r<8>;
\t.reg .b64 %rd<4>;
\tld.param.u64 %rd1, [k_param_0];
\tcvta.to.global.u64 %rd1, %rd1;
\tmov.u32 %r1, %tid.x;
\tmov.u32 %r2, %tid.y;
\tmov.u32 %r3, %ntid.x;
\tmad.lo.s32 %r4, %r2, %r3, %r1;
\tmul.wide.u32 %rd2, %r4, 4;
\tadd.s64 %rd3, %rd1, %rd2;
\tadd.s32 %r5, %r4, 1;
\tst.global.u32 [%rd3], %r5;
\tret;
}}
"""

CC_TARGET = {(8, 0): "sm_80", (8, 6): "sm_86", (8, 9): "sm_89", (9, 0): "sm_90",
             (10, 0): "sm_100a", (12, 0): "sm_120a"}


def _check(result):
    err = result[0]
    from cuda.bindings import driver
    assert err == driver.CUresult.CUDA_SUCCESS, err
    return result[1] if len(result) == 2 else result[1:]


@pytest.fixture(scope="module")
def device():
    from cuda.bindings import driver
    _check(driver.cuInit(0))
    dev = _check(driver.cuDeviceGet(0))
    major = _check(driver.cuDeviceGetAttribute(
        driver.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev))
    minor = _check(driver.cuDeviceGetAttribute(
        driver.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev))
    target = CC_TARGET.get((major, minor))
    if target is None:
        pytest.skip(f"no Tile target for compute capability {major}.{minor}")
    ctx = _check(driver.cuDevicePrimaryCtxRetain(dev))
    _check((driver.cuCtxSetCurrent(ctx)[0], None))
    yield driver, target
    driver.cuDevicePrimaryCtxRelease(dev)


def load(driver, target, launch_line_attrs):
    tgt = get_target(target)
    spec = resolve_launch({k: AttrValue(v) for k, v in launch_line_attrs.items()}, tgt)
    contract = decide_contract("k", spec, None, tgt)
    plan = validate_target(target, contract.features(plan_target(target)))
    ptx = rewrite_ptx(BODY.format(), plan, {"k": contract})
    linked = link_ptx(ptx, get_target(target), env={})
    module = _check(driver.cuModuleLoadData(linked.cubin))
    return _check(driver.cuModuleGetFunction(module, b"k")), linked


def plan_target(name):
    return get_target(name)


def launch(driver, fn, block):
    out = _check(driver.cuMemAlloc(4 * 1024))
    _check((driver.cuMemsetD32(out, 0, 1024)[0], None))
    arg = ctypes.c_uint64(int(out))
    params = (ctypes.c_void_p * 1)(ctypes.addressof(arg))
    err, = driver.cuLaunchKernel(fn, 1, 1, 1, *block, 0, 0, ctypes.addressof(params), 0)
    host = np.zeros(1024, dtype=np.uint32)
    if err == driver.CUresult.CUDA_SUCCESS:
        _check((driver.cuCtxSynchronize()[0], None))
        _check((driver.cuMemcpyDtoH(host.ctypes.data, out, 4 * 1024)[0], None))
    driver.cuMemFree(out)
    return err, host


def test_maxntid_cubin_serves_smaller_shapes(device):
    driver, target = device
    fn, _ = load(driver, target, {"maxntid": (256, 1, 1)})
    for block in [(256, 1, 1), (128, 1, 1), (32, 1, 1), (96, 2, 1)]:
        err, host = launch(driver, fn, block)
        assert err == driver.CUresult.CUDA_SUCCESS, (block, err)
        n = block[0] * block[1]
        assert (host[:n] == np.arange(1, n + 1)).all() and not host[n:].any()
    err, _ = launch(driver, fn, (512, 1, 1))
    assert err != driver.CUresult.CUDA_SUCCESS


def test_reqntid_refuses_other_shapes(device):
    driver, target = device
    fn, _ = load(driver, target, {"reqntid": (128, 1, 1)})
    assert launch(driver, fn, (128, 1, 1))[0] == driver.CUresult.CUDA_SUCCESS
    for block in [(96, 1, 1), (64, 2, 1), (256, 1, 1)]:
        assert launch(driver, fn, block)[0] != driver.CUresult.CUDA_SUCCESS, block


def test_occupancy_model_matches_driver(device):
    driver, target = device
    fn, linked = load(driver, target, {"maxntid": (1024, 1, 1)})
    regs = _check(driver.cuFuncGetAttribute(
        driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_NUM_REGS, fn))
    assert regs == linked.resources["k"].registers      # the info log tells the truth
    if os.environ.get("TILELANG_TEST_EMULATED_GPU") == "1" and \
            driver.cuOccupancyMaxActiveBlocksPerMultiprocessor(fn, 32, 0)[0] == \
            driver.CUresult.CUDA_ERROR_NOT_SUPPORTED:
        pytest.skip("tests/emulated_cuda.py has no occupancy of its own (registers checked)")
    for threads in (32, 96, 128, 256, 640, 1024):
        blocks = _check(driver.cuOccupancyMaxActiveBlocksPerMultiprocessor(fn, threads, 0))
        assert occupancy(target, threads, regs).blocks_per_sm == blocks, (regs, threads)
