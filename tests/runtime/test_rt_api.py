"""The Python API on the emulator back end, with the stand-in compiler of rt_support: both launch
shapes, const specialization, the array-facts specializations (checked by results: a kernel
compiled as contiguous ignores the last stride), NumPy copy-in/copy-out including aliasing
views, DeviceArray launches without copies, back-end selection."""

from __future__ import annotations

import numpy as np
import pytest

import tilelang
from rt_support import FakeCompiler, fresh_runtime, source  # noqa: F401 (autouse fixture)
from tilelang.codegen.api import ArrayFacts
from tilelang.emulator import LaunchReport
from tilelang.runtime import errors as rterr
from tilelang.runtime.device_array import DeviceArray
from tilelang.runtime.emulator_backend import EmulatorBackend

RNG = np.random.default_rng(7)


@pytest.fixture
def comp():
    return FakeCompiler()


@pytest.fixture
def mod(comp, tmp_path):
    return tilelang.compile(source("vadd", "copy2d", "noop", "scalars"), backend="emulator",
                            compiler=comp, cache_dir=str(tmp_path))


def vecs(n, k=3):
    return [RNG.standard_normal(n).astype(np.float32) for _ in range(k)]


def test_kernels_are_attributes(mod):
    assert set(mod.kernels) == {"vadd", "copy2d", "noop", "scalars"}
    assert mod.vadd.name == "vadd"
    assert [p.name for p in mod.vadd.params] == ["a", "b", "c"]
    assert "vadd" in dir(mod)
    assert mod.target == "sm_90a"
    assert repr(mod.vadd) == "<tilelang.Kernel kernel vadd(a: Array[f32, 1], b: Array[f32, 1], " \
        "c: Array[f32, 1], const TILE: i32)>"


def test_triton_shape_launch(mod):
    a, b, _ = vecs(3000)
    c = np.zeros(3000, np.float32)
    rep = mod.vadd[3](a, b, c)
    assert isinstance(rep, LaunchReport)
    np.testing.assert_array_equal(c, a + b)


def test_cutile_shape_launch_with_specialize(mod, comp):
    a, b, _ = vecs(1000)
    c = np.zeros(1000, np.float32)
    k = mod.vadd.specialize(TILE=256)
    assert k.consts == {"TILE": 256}
    tilelang.launch(None, (4,), k, (a, b, c))
    np.testing.assert_array_equal(c, a + b)
    assert comp.builds[-1][1] == {"TILE": 256}
    # specialize is cached: the same object, no second build
    assert mod.vadd.specialize(TILE=256) is k


def test_const_keyword_at_launch_and_grid_function(mod, comp):
    a, b, _ = vecs(1000)
    c = np.zeros(1000, np.float32)
    mod.vadd[lambda meta: ((1000 + meta["TILE"] - 1) // meta["TILE"],)](a, b, c, TILE=128)
    np.testing.assert_array_equal(c, a + b)
    assert comp.builds[-1][1] == {"TILE": 128}
    # too small a grid leaves the tail untouched: the const really changes the code
    c2 = np.zeros(1000, np.float32)
    mod.vadd[1](a, b, c2, TILE=128)
    np.testing.assert_array_equal(c2[:128], (a + b)[:128])
    assert not c2[128:].any()


def test_kernel_launch_method_and_stream_ignored(mod):
    a, b, _ = vecs(100)
    c = np.zeros(100, np.float32)
    mod.vadd.launch(1, (a, b, c), stream=0)
    np.testing.assert_array_equal(c, a + b)


def test_specializations_memory_cache(mod, comp):
    a, b, _ = vecs(512)
    for _ in range(3):
        c = np.zeros(512, np.float32)
        mod.vadd[1](a, b, c)
    assert len(comp.builds) == 1
    assert set(mod.vadd._specs) == {("caes", "caes=0", "caes=0")}    # one shape: same_shape


@pytest.mark.parametrize("case", ["strided", "negative", "offset", "broadcast"])
def test_facts_choose_the_right_specialization(mod, comp, case):
    n = 700
    base = RNG.standard_normal(4 * n).astype(np.float32)
    b = RNG.standard_normal(n).astype(np.float32)
    if case == "strided":
        a, want = base[::3][:n], "-aes"     # 700 x 4 bytes: whole 16-byte chunks
    elif case == "negative":
        a, want = base[::-2][:n], "--esn"    # no tensor map for a negative stride
    elif case == "offset":
        # a host array is copied to a fresh (aligned) buffer; a device view 4 bytes past a
        # 16-byte boundary keeps its address: contiguous, unaligned
        a, want = mod.to_device(base)[1:n + 1], "c-es"
    else:                           # stride 0: every element is base[5]
        a = np.broadcast_to(base[5], (n,))
        want = "-" + ("a" if a.ctypes.data % 16 == 0 else "-") + "esn"
    c = np.zeros(n, np.float32)
    mod.vadd[1](a, b, c)
    host_a = a.numpy() if isinstance(a, DeviceArray) else np.asarray(a)
    np.testing.assert_array_equal(c, host_a + b)
    assert comp.builds[-1][2]["a"] == want


def test_two_dimensional_views(mod, comp):
    src = RNG.standard_normal((6, 40)).astype(np.float32)
    dst = np.zeros((40, 6), np.float32)
    mod.copy2d[40](src.T, dst)                  # transposed source: strides (1, 40)
    np.testing.assert_array_equal(dst, src.T)
    # dst rows are 24 bytes apart: contiguous but not 16-byte aligned rows (nor extents)
    assert comp.builds[-1][2] == {"src": "---s", "dst": "c--s=0"}   # dst has src's shape
    dst2 = np.zeros((6, 40), np.float32)
    mod.copy2d[6](src[:, ::-1], dst2)           # negative last stride
    np.testing.assert_array_equal(dst2, src[:, ::-1])
    out = np.zeros((8, 8), np.float32)
    mod.copy2d[3](src[:3, :5], out[2:5, 1:6])   # a window written inside a larger array
    expect = np.zeros((8, 8), np.float32)
    expect[2:5, 1:6] = src[:3, :5]
    np.testing.assert_array_equal(out, expect)


def test_aliasing_views_share_device_memory(mod):
    """Even and odd halves of one array as input and output: copied in as one buffer, so
    the kernel's writes to one view do not clobber the other on the way back."""
    x = RNG.standard_normal(200).astype(np.float32)
    orig = x.copy()
    zero = np.zeros(100, np.float32)
    mod.vadd[1](x[0::2], zero, x[1::2])          # odd := even
    np.testing.assert_array_equal(x[0::2], orig[0::2])
    np.testing.assert_array_equal(x[1::2], orig[0::2])


def test_in_place_update(mod):
    a, b, _ = vecs(300)
    want = a + b
    mod.vadd[1](a, b, a)
    np.testing.assert_array_equal(a, want)


def test_read_only_inputs_are_not_written_back(mod):
    a, b, _ = vecs(64)
    a.setflags(write=False)
    c = np.zeros(64, np.float32)
    mod.vadd[1](a, b, c)
    np.testing.assert_array_equal(c, a + b)


def test_device_arrays_avoid_copies(mod):
    a, b, _ = vecs(2048)
    da, db = mod.to_device(a), tilelang.to_device(b, backend="emulator")
    dc = mod.empty(2048, "f32")
    assert isinstance(dc, DeviceArray) and dc.shape == (2048,) and dc.dtype == "f32"
    mod.vadd[2](da, db, dc)
    np.testing.assert_array_equal(dc.numpy(), a + b)
    # views of device arrays: strides and offsets pass through
    dc2 = mod.empty(1024, "f32")
    mod.vadd[1](da[::2], db[1::2], dc2)
    np.testing.assert_array_equal(dc2.numpy(), a[::2] + b[1::2])
    np.testing.assert_array_equal(da[::-1].numpy(), a[::-1])


def test_device_array_2d_transpose(mod):
    src = RNG.standard_normal((5, 7)).astype(np.float32)
    d = mod.to_device(src)
    out = mod.empty((7, 5), "f32")
    mod.copy2d[7](d.T, out)
    np.testing.assert_array_equal(out.numpy(), src.T)


def test_zero_argument_kernel(mod):
    rep = mod.noop[(4, 2)]()
    assert rep.total_instructions > 0


def test_dlpack_cpu_arrays_are_accepted(mod):
    class Holder:            # a producer that only speaks DLPack (CPU)
        def __init__(self, a):
            self.a = a

        def __dlpack__(self, stream=None):
            return self.a.__dlpack__()

        def __dlpack_device__(self):
            return self.a.__dlpack_device__()
    a, b, _ = vecs(100)
    c = np.zeros(100, np.float32)
    mod.vadd[1](Holder(a), b, Holder(c))
    np.testing.assert_array_equal(c, a + b)


def test_compile_from_path(tmp_path, comp):
    p = tmp_path / "m.tile"
    p.write_text(source("noop"))
    m = tilelang.compile(str(p), backend="emulator", compiler=comp, cache=False)
    assert m.path == str(p) and list(m.kernels) == ["noop"]
    m2 = tilelang.compile(p, backend="emulator", compiler=comp, cache=False)
    assert m2.path == str(p)


def test_unknown_kernel_is_an_attribute_error(mod):
    with pytest.raises(rterr.KernelNotFound) as e:
        mod.vsub
    assert isinstance(e.value, AttributeError)
    assert e.value.code == "E0922"
    assert e.value.diagnostics[0].message == "module `<string>` has no kernel `vsub`"
    assert e.value.diagnostics[0].help == \
        "its kernels are: `vadd`, `copy2d`, `noop`, `scalars`"
    assert not hasattr(mod, "vsub")


def test_missing_file(comp):
    with pytest.raises(tilelang.runtime.errors.TileUsageError) as e:
        tilelang.compile("no/such/file.tile", backend="emulator", compiler=comp)
    assert e.value.code == "E0923"
    assert e.value.diagnostics[0].message == \
        "cannot read `no/such/file.tile`: No such file or directory"


def test_unknown_backend(comp):
    with pytest.raises(rterr.TileUsageError) as e:
        tilelang.compile(source("noop"), backend="rocm", compiler=comp)
    assert e.value.code == "E0921"
    assert str(e.value) == "error[E0921]: unknown back end `rocm`\n  = help: the back ends are " \
        "`cuda` (a GPU through the CUDA driver; `cuda:N` for device N), `emulator` (the CPU " \
        "PTX emulator) and " \
        "`interp` (the reference interpreter)"


def test_no_driver_names_the_emulator(comp, monkeypatch):
    from gpu_probe import gpu_available
    if gpu_available():
        pytest.skip("a GPU and driver are present")
    monkeypatch.delenv("TILELANG_BACKEND", raising=False)
    with pytest.raises(rterr.BackendUnavailable) as e:
        tilelang.compile(source("noop"), compiler=comp)        # default back end: cuda
    assert e.value.code == "E0920"
    assert str(e.value).startswith("error[E0920]: no NVIDIA driver was found, so the CUDA back "
                                   "end cannot run")
    assert str(e.value).endswith("\n  = help: run on the CPU emulator instead: pass "
                                 "backend='emulator' or set TILELANG_BACKEND=emulator")
    assert e.value.diagnostics[0].help == (
        "run on the CPU emulator instead: pass backend='emulator' or set "
        "TILELANG_BACKEND=emulator")


def test_backend_from_environment(comp, monkeypatch, tmp_path):
    monkeypatch.setenv("TILELANG_BACKEND", "emulator")
    m = tilelang.compile(source("noop"), compiler=comp, cache_dir=str(tmp_path))
    assert m.backend.name == "emulator"
    assert m.backend is tilelang.get_backend("emulator")     # one shared emulator


def test_backend_object(comp, tmp_path):
    be = EmulatorBackend(capability=(8, 0))
    m = tilelang.compile(source("noop"), backend=be, compiler=comp, cache_dir=str(tmp_path))
    assert m.backend is be and m.target == "sm_80"


@pytest.mark.parametrize("cc,target", [((9, 0), "sm_90a"), ((10, 0), "sm_100a"),
                                       ((12, 0), "sm_120a"), ((8, 6), "sm_86")])
def test_emulated_device_gets_the_cuda_backends_target(cc, target):
    """The emulator of a capability compiles for what a GPU of that capability would get."""
    assert EmulatorBackend(capability=cc).default_target() == target


def test_arch_and_defines_reach_the_compiler(comp, tmp_path):
    m = tilelang.compile(source("noop"), arch="sm_89", defines={"X": 3, "Y": True},
                         backend="emulator", compiler=comp, cache_dir=str(tmp_path))
    assert m.options.target.name == "sm_89"
    assert m.options.defines == (("X", "3"), ("Y", "true"))
    spec = m.noop.compile()
    assert ".target sm_89" in spec.ptx


def test_compile_method_and_specialization_object(mod):
    spec = mod.vadd.compile({"a": "-ae"})
    assert spec.facts == ("-ae", "caes", "caes")
    assert spec.artifact.name == "vadd"
    assert "// facts: a=-ae b=caes c=caes TILE=1024" in spec.ptx
    assert mod.vadd.compile({"a": "-ae"}) is spec
    # a two-character key (before the `e` fact) claims no `e`
    assert mod.vadd.compile({"a": "ca"}).facts == ("ca-", "caes", "caes")
    assert mod.vadd.compile({"a": ArrayFacts(extent16=False)}).facts == \
        ("ca-", "caes", "caes")


def test_grid_and_block_spellings(mod):
    a = np.arange(256, dtype=np.float32)
    for grid in (1, (1,), [1], (1, 1), [1, 1, 1], np.int64(1), np.array([1])):
        c = np.zeros(256, np.float32)
        mod.vadd.launch(grid, (a, a, c), block=[64])
        np.testing.assert_array_equal(c[:256], 2 * a)
