"""NVSHMEM's host side (runtime/nvshmem_host.py, docs/distributed.md "The NVSHMEM lowering"):
a kernel compiled with the NVSHMEM lowering is initialized with nvshmemx_culibrary_init after
its cubin is loaded, and each way that cannot happen is one clear error (E0935). The tests
that need the `nvidia-nvshmem-cu13` wheel skip without it; the one that loads a cubin is
gpu-marked."""

from __future__ import annotations

import pathlib

import pytest

from tilelang.runtime import nvshmem_host
from tilelang.runtime.errors import DeviceError

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture
def fresh(monkeypatch):
    monkeypatch.setattr(nvshmem_host, "_host", None)


def _host_or_skip():
    try:
        return nvshmem_host.host_library()
    except DeviceError:
        pytest.skip("NVSHMEM's host library is not installed (pip install tilelang[nvshmem])")


def test_no_host_library_is_a_clear_error(fresh, monkeypatch, tmp_path):
    missing = str(tmp_path / nvshmem_host.SONAME)
    monkeypatch.setattr(nvshmem_host, "candidates", lambda: [missing])
    with pytest.raises(DeviceError) as e:
        nvshmem_host.init_library(0, "k")
    d = e.value.diagnostics[0]
    assert d.code == "E0935"
    assert d.message.startswith("the kernel was compiled with the NVSHMEM lowering, but "
                                f"NVSHMEM's host library could not be loaded ({missing}: ")
    assert "tilelang[nvshmem]" in d.help


def test_an_uninitialized_nvshmem_is_a_clear_error(fresh):
    lib = _host_or_skip()
    if lib.nvshmemx_init_status() >= 2:
        pytest.skip("NVSHMEM is initialized in this process")
    with pytest.raises(DeviceError) as e:
        nvshmem_host.init_library(0, "all_reduce")
    assert e.value.diagnostics[0].message == (
        "kernel `all_reduce` calls NVSHMEM, but NVSHMEM is not initialized in this process "
        "(nvshmemx_init_status() = 0)")


@pytest.mark.gpu
def test_the_linked_cubin_loads_and_asks_for_nvshmem(fresh):
    """On a GPU: the NVSHMEM build of all_reduce loads as a CUlibrary, its kernel and
    NVSHMEM's device state are found in it, and the launch path stops at the missing
    NVSHMEM initialization with E0935."""
    import os
    if os.environ.get("TILELANG_TEST_EMULATED_GPU") == "1":
        pytest.skip("NVSHMEM's device library runs on a real GPU only (the emulated driver "
                    "loads the PTX of Tile's own kernels)")
    _host_or_skip()
    from tilelang.codegen.target import nvshmem_bitcode
    from tilelang.diagnostics import TileError
    try:
        nvshmem_bitcode.find("sm_90")
    except TileError:
        pytest.skip("NVSHMEM's device bitcode is not installed")
    from cuda.bindings import driver as drv
    from tilelang.driver import compile_source
    from tilelang.options import CompileOptions
    from tilelang.runtime.cuda import CudaBackend
    be = CudaBackend()
    src = (ROOT / "examples/distributed/all_reduce.tile").read_text()
    res = compile_source(src, "all_reduce.tile", CompileOptions(target=be.default_target(),
                                                                distributed="nvshmem"))
    assert res.ok, [str(d) for d in res.diagnostics]
    prev = be.enter()
    try:
        err, lib = drv.cuLibraryLoadData(res.cubin, None, None, 0, None, None, 0)
        assert err == drv.CUresult.CUDA_SUCCESS
        err, _ = drv.cuLibraryGetKernel(lib, b"all_reduce")
        assert err == drv.CUresult.CUDA_SUCCESS
        err, _, size = drv.cuLibraryGetGlobal(lib, b"nvshmemi_device_state_d")
        assert err == drv.CUresult.CUDA_SUCCESS and size > 0
        with pytest.raises(DeviceError) as e:
            nvshmem_host.init_library(int(lib), "all_reduce")
        assert e.value.diagnostics[0].code == "E0935"
        drv.cuLibraryUnload(lib)
    finally:
        be.leave(prev)
