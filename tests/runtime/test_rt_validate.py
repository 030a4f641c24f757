"""Launch validation before the driver (tilelang/runtime/validate.py), each rule on the emulator
back end: block vs .reqntid/.maxntid and the device limits, grid limits, grid divisible by the
cluster shape (seed 004_c6dc5fc6aab2fa35.txt: "The grid dimensions must be divisible by the
cluster dimensions"), clusters on a pre-SM90 device, cluster size, shared memory over the
device limit. The errors are LaunchConfigError diagnostics raised before the emulator sees the
launch; valid launches of the same kernels run."""

from __future__ import annotations

import numpy as np
import pytest

import tilelang
from rt_support import FakeCompiler, fresh_runtime, source  # noqa: F401 (autouse fixture)
from tilelang.runtime.emulator_backend import EmulatorBackend
from tilelang.runtime.errors import LaunchConfigError

KERNELS = ("vadd", "fixed", "clus", "clus16", "bigsmem", "hugesmem", "anyblock")


@pytest.fixture
def mod(tmp_path):
    return tilelang.compile(source(*KERNELS), backend="emulator", compiler=FakeCompiler(),
                            cache_dir=str(tmp_path))


def refused(fn):
    with pytest.raises(LaunchConfigError) as e:
        fn()
    d = e.value.diagnostics[0]
    return d.code, d.message, d.help


OUT = np.zeros(256, np.int32)
F = np.zeros(64, np.float32)


def test_reqntid_is_exact(mod):
    assert refused(lambda: mod.fixed.launch(1, (OUT,), block=(32, 1, 1))) == (
        "E0901", "launch of `fixed`: block (32, 1, 1) differs from the kernel's .reqntid "
        "(64, 1, 1)", "the kernel's code depends on that exact thread count; launch without "
        "`block=` to use it")
    out = np.zeros(128, np.int32)
    mod.fixed.launch(2, (out,), block=(64, 1, 1))
    np.testing.assert_array_equal(out, np.tile(np.arange(64), 2))


def test_maxntid_is_a_bound(mod):
    assert refused(lambda: mod.vadd.launch(1, (F, F, F), block=(256,))) == (
        "E0901", "launch of `vadd`: block (256, 1, 1) has 256 threads, more than the kernel's "
        ".maxntid (128, 1, 1) allows (128)", "launch with at most that many threads, or "
        "without `block=`")
    a = np.arange(64, dtype=np.float32)
    c = np.zeros(64, np.float32)
    mod.vadd.launch(1, (a, a, c), block=(32, 2))     # 64 threads, within the bound
    np.testing.assert_array_equal(c, 2 * a)


def test_block_device_limits(mod):
    assert refused(lambda: mod.anyblock.launch(1, (OUT,), block=(1, 1, 128))) == (
        "E0901", "launch of `anyblock`: block (1, 1, 128) exceeds the device limits (1024 "
        "threads, dimensions (1024, 1024, 64))", "use a smaller block")
    assert refused(lambda: mod.anyblock.launch(1, (OUT,), block=(64, 32)))[0] == "E0901"
    assert refused(lambda: mod.anyblock.launch(1, (OUT,), block=(0,)))[0] == "E0901"


def test_grid_limits(mod):
    assert refused(lambda: mod.vadd[(1, 70000)](F, F, F)) == (
        "E0903", "launch of `vadd`: grid (1, 70000, 1) exceeds the device limit (2147483647, "
        "65535, 65535) in dimension y", "use fewer, larger tiles, or move work to another grid "
        "dimension (x allows 2^31 - 1 blocks)")
    assert refused(lambda: mod.vadd[2**31](F, F, F))[1] == \
        "launch of `vadd`: grid (2147483648, 1, 1) exceeds the device limit (2147483647, " \
        "65535, 65535) in dimension x"
    assert refused(lambda: mod.vadd[(4, -1)](F, F, F)) == (
        "E0903", "launch of `vadd`: grid (4, -1, 1) has a negative dimension",
        "every grid dimension must be at least 0 (0 launches nothing)")
    assert refused(lambda: mod.vadd[(1, 2, 3, 4)](F, F, F)) == (
        "E0903", "launch of `vadd`: the grid must be an int or a tuple of 1 to 3 ints, got "
        "(1, 2, 3, 4)", "e.g. `grid=(8,)` or `grid=(8, 4, 1)`")
    assert refused(lambda: mod.vadd["8"](F, F, F))[0] == "E0903"


def test_grid_divisible_by_cluster(mod):
    assert refused(lambda: mod.clus[3](OUT)) == (
        "E0902", "launch of `clus`: grid (3, 1, 1) is not divisible by the cluster shape "
        "(2, 1, 1) (in x: 3 % 2 = 1)", "round the grid up to a multiple of the cluster shape; "
        "the kernel's bounds checks skip the extra blocks' work")
    out = np.full(6, -1, np.int32)
    mod.clus[6](out)
    np.testing.assert_array_equal(out, [0, 1, 100, 101, 200, 201])


def test_clusters_need_sm90(tmp_path):
    m = tilelang.compile(source("clus"), backend=EmulatorBackend(capability=(8, 0)),
                         compiler=FakeCompiler(), cache_dir=str(tmp_path))
    assert refused(lambda: m.clus[2](OUT)) == (
        "E0904", "launch of `clus`: the kernel uses thread-block clusters (2, 1, 1), but the "
        "emulator is sm_80; clusters need sm_90 or newer",
        "compile without `@launch(cluster = ...)` for this device")


def test_cluster_size_limit(mod):
    assert refused(lambda: mod.clus16[(4, 4)](OUT)) == (
        "E0906", "launch of `clus16`: cluster (4, 4, 1) has 16 blocks; the emulator allows 8 "
        "(portable limit)", "use a smaller cluster shape")


def test_shared_memory_limit(mod):
    assert refused(lambda: mod.hugesmem[1](OUT)) == (
        "E0905", "launch of `hugesmem`: the kernel needs 307200 bytes of shared memory per "
        "block (0 static + 307200 dynamic); the emulator allows 232448",
        "use smaller tiles or fewer pipeline stages")


def test_more_than_48k_dynamic_shared_memory_runs(mod):
    out = np.zeros(128, np.int32)
    mod.bigsmem[1](out)
    np.testing.assert_array_equal(out, (np.arange(128) + 1) % 128 + 1)
    assert mod.bigsmem.compile().artifact.dynamic_smem == 65536


def test_checked_shapes_are_remembered(mod):
    a = np.zeros(64, np.float32)
    mod.vadd[(1,)](a, a, a)
    # the launch's facts: caes, and one shape for all three (same_shape)
    spec = mod.vadd.compile({"b": "caes=0", "c": "caes=0"})
    assert ((1,), None) in spec.shapes
    assert spec.shapes[((1,), None)].grid == (1, 1, 1)
