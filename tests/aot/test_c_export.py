"""`tilec --emit c`: the exported C compiles as C99 and as C++ with -Wall -Werror, and a
program calling it through a test double of the driver library (fake_cuda.c) launches with
parameter buffers equal, byte for byte, to what the Python runtime packs for the same
arguments; replayed on the emulator, those launches compute what NumPy does.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import struct
import subprocess
import sys

import numpy as np
import pytest

import tilelang
from tilelang.aot.c_text import render
from tilelang.aot.export import VARIANTS, c_prefix, export_c
from tilelang.diagnostics import TileError
from tilelang.options import CompileOptions
from tilelang.emulator import EmulatorDevice as Device
from tilelang.runtime.tensormap import MapArgs, encode_emulator, map_args

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CC = shutil.which("cc") or shutil.which("gcc")
CXX = shutil.which("c++") or shutil.which("g++")


def cuda_include() -> str | None:
    """A folder holding cuda.h: CUDA_HOME/CUDA_PATH, the nvidia-cuda-runtime wheel (a test
    dependency), /usr/local/cuda."""
    cands = [os.path.join(os.environ[v], "include") for v in ("CUDA_HOME", "CUDA_PATH")
             if os.environ.get(v)]
    try:
        import nvidia
        for base in nvidia.__path__:
            cands += sorted(glob.glob(os.path.join(base, "cu*", "include")), reverse=True)
            cands.append(os.path.join(base, "cuda_runtime", "include"))
    except ImportError:
        pass
    cands += sorted(glob.glob("/usr/local/cuda*/include"), reverse=True)
    return next((c for c in cands if os.path.isfile(os.path.join(c, "cuda.h"))), None)


CUDA_INCLUDE = cuda_include()
pytestmark = pytest.mark.skipif(CC is None or CXX is None or CUDA_INCLUDE is None,
                                reason="needs a C and C++ compiler and cuda.h "
                                       "(the nvidia-cuda-runtime wheel of the test extra)")
CFLAGS = ["-Wall", "-Wextra", "-Werror", "-isystem", CUDA_INCLUDE or ""]


def _export(tmp, source, name, **opts):
    path = os.path.join(ROOT, "examples", source) if not os.path.isabs(source) else source
    with open(path, encoding="utf-8") as f:
        text = f.read()
    ex = export_c(text, path, CompileOptions(**opts), c_prefix(name))
    header, code = render(ex, name + ".h")
    with open(os.path.join(tmp, name + ".h"), "w") as f:
        f.write(header)
    with open(os.path.join(tmp, name + ".c"), "w") as f:
        f.write(code)
    return ex


def _build(tmp, name, main: str) -> list[str]:
    """Build `main` against the export and the driver double, once as C99 and once with the
    export compiled as C++; the two executables."""
    with open(os.path.join(tmp, "main.c"), "w") as f:
        f.write(main)
    fake = os.path.join(HERE, "fake_cuda.c")
    objs = {}
    for src, lang in ((name + ".c", "c"), ("main.c", "c"), (fake, "c"), (name + ".c", "c++")):
        out = os.path.join(tmp, os.path.basename(src) + "." + lang.replace("+", "x") + ".o")
        cmd = ([CC, "-std=c99", "-pedantic"] if lang == "c" else [CXX, "-x", "c++"]) + \
            CFLAGS + ["-c", os.path.join(tmp, src), "-o", out]
        r = subprocess.run(cmd, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        objs[(src, lang)] = out
    exes = []
    for lang, linker in (("c", CC), ("c++", CXX)):
        exe = os.path.join(tmp, f"main_{lang.replace('+', 'x')}")
        r = subprocess.run([linker, objs[(name + ".c", lang)], objs[("main.c", "c")],
                            objs[(fake, "c")], "-o", exe], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        exes.append(exe)
    return exes


def _run(exe, tmp, **env) -> list[dict]:
    log = os.path.join(tmp, "calls.log")
    if os.path.exists(log):
        os.unlink(log)
    r = subprocess.run([exe], capture_output=True, text=True, timeout=60,
                       env={**os.environ, "TILE_FAKE_CUDA_LOG": log, **env})
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
    out = []
    with open(log) as f:
        for line in f:
            kind, *fields = line.split()
            rec = {"kind": kind}
            for fl in fields:
                k, _, v = fl.partition("=")
                rec[k] = v
            out.append(rec)
    return out


def _c_array(values) -> str:
    return "{" + ", ".join(f"{int(v)}LL" for v in values) + "}"


def _main(prefix, kernel, grid, args: list[str], decls: str = "") -> str:
    """A program that loads, launches once with `args` (C expressions) and unloads; exits
    with the first status that is not CUDA_SUCCESS."""
    call = ", ".join(["(CUstream)0x5150", *map(str, grid), *args])
    return f"""#include "{prefix}.h"
#include <stdio.h>
{decls}
int main(void)
{{
    CUresult err = {prefix}_load();
    if (err != CUDA_SUCCESS) {{ printf("load %d\\n", (int)err); return 1; }}
    err = {prefix}_launch_{kernel}({call});
    if (err != CUDA_SUCCESS) {{ printf("launch %d\\n", (int)err); return 2; }}
    err = {prefix}_unload();
    if (err != CUDA_SUCCESS) {{ printf("unload %d\\n", (int)err); return 3; }}
    return 0;
}}
"""


class _Spy:
    """Records every launch the emulator receives (the Python runtime's packed buffer)."""

    def __init__(self, monkeypatch):
        self.calls = []
        real = Device.launch

        def launch(dev, fn, grid, block, args=(), cluster=None, shared_mem=0, **kw):
            self.calls.append({"grid": tuple(grid), "block": tuple(block), "params": bytes(args),
                               "cluster": cluster, "smem": shared_mem})
            return real(dev, fn, grid, block, args, cluster=cluster, shared_mem=shared_mem, **kw)
        monkeypatch.setattr(Device, "launch", launch)


def _array_args(arr) -> tuple[list[str], str]:
    """C arguments (pointer, shape, strides) for a DeviceArray, with their declarations."""
    n = f"a{id(arr)}"
    decl = (f"static const int64_t {n}_shape[] = {_c_array(arr.shape)};\n"
            f"static const int64_t {n}_strides[] = {_c_array(arr.strides)};\n")
    return [f"(CUdeviceptr){arr.ptr}ULL", f"{n}_shape", f"{n}_strides"], decl


def _replay(ex, rec, device, maps=()):
    """Run a recorded launch of the C launcher on the emulator: the variant's PTX, the
    recorded buffer (tensor-map markers replaced by the emulator's encoding)."""
    v = ex.variants[int(rec["library"])]
    params = bytearray.fromhex(rec["params"])
    for m in maps:
        at = params.find(b"TILEMAP\0" + struct.pack("<Q", int(m["index"])))
        assert at >= 0 and at % 64 == 0
        params[at:at + 128] = encode_emulator(_map_args(m))
    fn = device.load_module(v.ptx).get_function(rec["name"])
    cluster = tuple(int(x) for x in rec["cluster"].split(","))
    device.launch(fn, tuple(int(x) for x in rec["grid"].split(",")),
                  tuple(int(x) for x in rec["block"].split(",")), bytes(params),
                  cluster=None if cluster == (0, 0, 0) else cluster,
                  shared_mem=int(rec["smem"]))


def _map_args(m) -> MapArgs:
    ints = lambda s: tuple(int(x) for x in s.split(",") if x)   # noqa: E731
    return MapArgs(int(m["dtype"]), int(m["rank"]), int(m["address"]), ints(m["dims"]),
                   ints(m["strides"]), ints(m["box"]), int(m["swizzle"]))


def test_vadd_packs_as_the_runtime_and_computes_on_the_emulator(tmp_path, monkeypatch):
    tmp = str(tmp_path)
    ex = _export(tmp, "vadd.tile", "vadd")
    mod = tilelang.compile(os.path.join(ROOT, "examples", "vadd.tile"), backend="emulator")
    rng = np.random.default_rng(1)
    n = 3000
    ha, hb = rng.standard_normal(2 * n).astype(np.float32), rng.standard_normal(n) \
        .astype(np.float32)
    a_full, b = mod.to_device(ha), mod.to_device(hb)
    cases = [("fast", a_full[:n]), ("generic", a_full[::2])]      # dense; every other element
    for variant, a in cases:
        c = mod.to_device(np.zeros(n, np.float32))
        spy = _Spy(monkeypatch)
        grid = (tilelang.cdiv(n, 1024), 1, 1)
        mod.vadd[grid](a, b, c)
        assert len(spy.calls) == 1
        args, decls = [], ""
        for arr in (a, b, c):
            got, d = _array_args(arr)
            args += got
            decls += d
        for exe in _build(tmp, "vadd", _main("vadd", "vadd", grid, args, decls)):
            recs = _run(exe, tmp)
            kinds = [r["kind"] for r in recs]
            assert kinds == ["load", "kernel", "load", "kernel", "launch", "unload", "unload"]
            sizes = [int(r["size"]) for r in recs if r["kind"] == "load"]
            assert sizes == [len(v.cubin) for v in ex.variants]
            launch = next(r for r in recs if r["kind"] == "launch")
            assert ex.variants[int(launch["library"])].variant.name == variant
            assert bytes.fromhex(launch["params"]) == spy.calls[0]["params"]
            assert launch["grid"] == "3,1,1" and launch["stream"] == "5150"
            assert tuple(int(x) for x in launch["block"].split(",")) == spy.calls[0]["block"]
            c.copy_from(np.zeros(n, np.float32))
            _replay(ex, launch, mod.backend.device)
            np.testing.assert_array_equal(c.numpy(), np.asarray(a) + hb)


SCALARS = """
kernel scalars(out: Array[f64, 1], a: i8, b: u16, c: f16, d: bf16, e: bool, f: f64, g: i64,
               h: u8, i: f32, j: i32, k: u32, l: i16, m: u64, n: tf32) {
    store(out, index = (0,), tile = full((1,), a, f64));
    store(out, index = (1,), tile = full((1,), b, f64));
    store(out, index = (2,), tile = full((1,), c, f64));
    store(out, index = (3,), tile = full((1,), d, f64));
    store(out, index = (4,), tile = full((1,), where(e, 1.0, 2.0), f64));
    store(out, index = (5,), tile = full((1,), f, f64));
    store(out, index = (6,), tile = full((1,), g, f64));
    store(out, index = (7,), tile = full((1,), h, f64));
    store(out, index = (8,), tile = full((1,), i, f64));
    store(out, index = (9,), tile = full((1,), j, f64));
    store(out, index = (10,), tile = full((1,), k, f64));
    store(out, index = (11,), tile = full((1,), l, f64));
    store(out, index = (12,), tile = full((1,), m, f64));
    store(out, index = (13,), tile = full((1,), n, f64));
}
"""


def test_every_scalar_type_packs_as_the_runtime(tmp_path, monkeypatch):
    import ml_dtypes
    tmp = str(tmp_path)
    src = os.path.join(tmp, "scalars.tile")
    with open(src, "w") as f:
        f.write(SCALARS)
    ex = _export(tmp, src, "sc")
    mod = tilelang.compile(src, backend="emulator")
    out = mod.to_device(np.zeros(16, np.float64))
    values = [-7, 65000, 1.5, -2.25, True, 1e300, -(2**40) - 3, 250, 0.375, -123456, 4000000000,
              -30000, 2**52 + 1, 3.5]
    spy = _Spy(monkeypatch)
    mod.scalars[1](out, *values)
    f16 = int(np.float16(1.5).view(np.uint16))
    bf16 = int(np.array(-2.25, ml_dtypes.bfloat16).view(np.uint16))
    c_vals = ["(int8_t)-7", "(uint16_t)65000", f"(uint16_t){f16}", f"(uint16_t){bf16}", "true",
              "1e300", "(int64_t)-1099511627779LL", "(uint8_t)250", "0.375f", "-123456",
              "4000000000U", "(int16_t)-30000", "4503599627370497ULL", "3.5f"]
    ptr, decls = _array_args(out)
    exes = _build(tmp, "sc", _main("sc", "scalars", (1, 1, 1), ptr + c_vals, decls))
    for exe in exes:
        launch = next(r for r in _run(exe, tmp) if r["kind"] == "launch")
        assert bytes.fromhex(launch["params"]) == spy.calls[0]["params"]
        out.copy_from(np.zeros(16, np.float64))
        _replay(ex, launch, mod.backend.device)
        want = [-7, 65000, 1.5, -2.25, 1.0, 1e300, -(2**40) - 3, 250, 0.375, -123456,
                4000000000, -30000, float(2**52 + 1), 3.5]
        np.testing.assert_array_equal(out.numpy()[:14], np.array(want, np.float64))


def test_tma_cluster_matmul_packs_maps_and_computes(tmp_path, monkeypatch):
    """sm_90a matmul: a cluster launch through cuLaunchKernelEx, TMA tensor maps encoded with
    the arguments the runtime computes, results equal to NumPy's product on the emulator."""
    tmp = str(tmp_path)
    ex = _export(tmp, "matmul.tile", "mm", target="sm_90a")
    fast = ex.variants[0].kernel("matmul")
    assert fast.tensor_maps and fast.cluster == (2, 1, 1)
    mod = tilelang.compile(os.path.join(ROOT, "examples", "matmul.tile"), backend="emulator",
                           arch="sm_90a")
    sig = [p for p in fast.params]
    rng = np.random.default_rng(2)
    m, n, k = 256, 128, 64
    names = [p.name for p in sig]
    ha = rng.standard_normal((m, k)).astype(np.float16)
    hb = rng.standard_normal((k, n)).astype(np.float16)
    arrays = {names[0]: mod.to_device(ha), names[1]: mod.to_device(hb),
              names[2]: mod.to_device(np.zeros((m, n), np.float32))}
    assert [p.kind for p in sig] == ["array"] * 3
    spy = _Spy(monkeypatch)
    grid = (tilelang.cdiv(m, 128), tilelang.cdiv(n, 128), 1)
    mod.matmul[grid](*arrays.values())
    args, decls = [], ""
    for arr in arrays.values():
        got, d = _array_args(arr)
        args += got
        decls += d
    for exe in _build(tmp, "mm", _main("mm", "matmul", grid, args, decls)):
        recs = _run(exe, tmp)
        launch = next(r for r in recs if r["kind"] == "launch")
        maps = [r for r in recs if r["kind"] == "tensormap"]
        assert launch["library"] == "0" and launch["cluster"] == "2,1,1"
        assert len(maps) == len(fast.tensor_maps)
        for spec, rec in zip(fast.tensor_maps, maps):
            arr = arrays[spec.array]
            assert _map_args(rec) == map_args(spec, arr.ptr, arr.shape, arr.strides)
            assert (rec["interleave"], rec["l2"], rec["oob"]) == ("0", "2", "0")
        params = bytearray.fromhex(launch["params"])
        for rec in maps:
            at = params.find(b"TILEMAP\0" + struct.pack("<Q", int(rec["index"])))
            params[at:at + 128] = encode_emulator(_map_args(rec))
        assert bytes(params) == spy.calls[0]["params"]
        assert spy.calls[0]["smem"] == int(launch["smem"])
        arrays[names[2]].copy_from(np.zeros((m, n), np.float32))
        _replay(ex, launch, mod.backend.device, maps)
        ref = ha.astype(np.float64) @ hb.astype(np.float64)
        np.testing.assert_allclose(arrays[names[2]].numpy(), ref, rtol=2e-3, atol=2e-3)


def test_launcher_refuses_what_the_abi_does_not_allow(tmp_path):
    tmp = str(tmp_path)
    _export(tmp, "vadd.tile", "vadd")
    decls = "const int64_t sh[] = {8LL}, neg[] = {-1LL}, st[] = {1LL};\n"
    good = ["(CUdeviceptr)4096ULL", "sh", "st"]
    neg = ["(CUdeviceptr)4096ULL", "neg", "st"] + good * 2
    cases = {"negative extent": ((1, 1, 1), neg),
             "negative extent, empty grid": ((0, 1, 1), neg)}
    for what, (grid, args) in cases.items():
        for exe in _build(tmp, "vadd", _main("vadd", "vadd", grid, args, decls)):
            r = subprocess.run([exe], capture_output=True, text=True,
                               env={**os.environ, "TILE_FAKE_CUDA_LOG": tmp + "/x.log"})
            assert (r.returncode, r.stdout.strip()) == (2, "launch 1"), what   # INVALID_VALUE


def test_empty_grid_launches_nothing(tmp_path):
    """A zero grid extent is CUDA_SUCCESS without a driver call (docs/cli.md "C export")."""
    tmp = str(tmp_path)
    _export(tmp, "vadd.tile", "vadd")
    decls = "const int64_t sh[] = {8LL}, st[] = {1LL};\n"
    args = ["(CUdeviceptr)4096ULL", "sh", "st"] * 3
    for grid in ((0, 1, 1), (4, 0, 1), (1, 1, 0)):
        for exe in _build(tmp, "vadd", _main("vadd", "vadd", grid, args, decls)):
            kinds = [rec["kind"] for rec in _run(exe, tmp)]
            assert "launch" not in kinds and "load" in kinds, (grid, kinds)
    for exe in _build(tmp, "vadd", _main("vadd", "vadd", (2, 1, 1), args, decls)):
        assert "launch" in [rec["kind"] for rec in _run(exe, tmp)]


def test_launch_before_load_and_failed_load(tmp_path):
    tmp = str(tmp_path)
    _export(tmp, "vadd.tile", "vadd")
    main = """#include "vadd.h"
#include <stdio.h>
int main(void)
{
    static const int64_t sh[] = {8LL}, st[] = {1LL};
    CUresult e = vadd_launch_vadd(NULL, 1, 1, 1, 4096, sh, st, 4096, sh, st, 4096, sh, st);
    printf("%d %d\\n", (int)e, (int)vadd_load());
    return 0;
}
"""
    exe = _build(tmp, "vadd", main)[0]
    log = tmp + "/y.log"
    r = subprocess.run([exe], capture_output=True, text=True,
                       env={**os.environ, "TILE_FAKE_CUDA_LOG": log,
                            "TILE_FAKE_CUDA_FAIL": "cuLibraryGetKernel"})
    # not loaded: CUDA_ERROR_NOT_INITIALIZED (3); the load's own failure (NOT_FOUND, 500)
    assert r.stdout.split() == ["3", "500"]
    with open(log) as f:          # what loaded before the failure is unloaded again
        assert [ln.split()[0] for ln in f] == ["load", "unload"]


def test_large_shared_memory_attribute_set_on_load(tmp_path):
    """A kernel with more than 48 KB of dynamic shared memory: load() sets the attribute for
    the current context's device; without a current context it waits for prepare_device."""
    tmp = str(tmp_path)
    ex = _export(tmp, "matmul.tile", "mm", target="sm_90a")
    big = [(i, k) for i, v in enumerate(ex.variants) for k in v.kernels if k.dynamic_smem > 0]
    assert big, "the sm_90a matmul stages its operands in dynamic shared memory"
    main = """#include "mm.h"
int main(void) { return vadd_dummy(); }
""".replace("vadd_dummy()", "mm_load() != CUDA_SUCCESS || mm_unload() != CUDA_SUCCESS")
    exe = _build(tmp, "mm", main)[0]
    recs = _run(exe, tmp)
    attrs = [r for r in recs if r["kind"] == "attribute"]
    assert sorted((int(r["library"]), r["name"], int(r["value"])) for r in attrs
                  if r["attr"] == "8") == sorted((i, k.name, k.dynamic_smem) for i, k in big)
    recs = _run(exe, tmp, TILE_FAKE_CUDA_NO_CONTEXT="1")
    assert not [r for r in recs if r["kind"] == "attribute"]


def test_cli_writes_both_files_and_refuses_bad_names(tmp_path):
    tmp = str(tmp_path)
    src = os.path.join(ROOT, "examples", "vadd.tile")
    cli = [sys.executable, "-m", "tilelang.cli"]
    r = subprocess.run(cli + ["--emit", "c", src, "-o", os.path.join(tmp, "v1.c"),
                              "-D", "TILE=512"], capture_output=True, text=True, cwd=tmp)
    assert r.returncode == 0, r.stderr
    with open(os.path.join(tmp, "v1.h")) as f:
        header = f.read()
    assert "CUresult v1_launch_vadd(CUstream stream," in header
    assert "const TILE: i32 = 512" in header
    assert '#include "v1.h"' in open(os.path.join(tmp, "v1.c")).read()
    r = subprocess.run(cli + ["--emit", "c", src], capture_output=True, text=True, cwd=tmp)
    assert r.returncode == 0 and os.path.isfile(os.path.join(tmp, "vadd.c"))
    for bad, code in (("-", 2), (os.path.join(tmp, "x.txt"), 2)):
        r = subprocess.run(cli + ["--emit", "c", src, "-o", bad], capture_output=True,
                           text=True, cwd=tmp)
        assert r.returncode == code and "-o must name the .c file" in r.stderr
    r = subprocess.run(cli + ["--emit", "c", src, "-o", os.path.join(tmp, "9lives.c")],
                       capture_output=True, text=True, cwd=tmp)
    assert r.returncode == 1 and "E0280" in r.stderr
    assert not os.path.exists(os.path.join(tmp, "9lives.h"))


def test_prefix_rules():
    assert c_prefix("my-kernels.v2") == "my_kernels_v2"
    for bad in ("1x", "int", "__x", "_X", "class"):
        with pytest.raises(TileError):
            c_prefix(bad)


def test_two_exports_link_into_one_program(tmp_path):
    """Two specializations of one module, exported under two names, link together."""
    tmp = str(tmp_path)
    _export(tmp, "vadd.tile", "va")
    src = os.path.join(ROOT, "examples", "vadd.tile")
    with open(src) as f:
        text = f.read()
    ex = export_c(text, src, CompileOptions(defines={"TILE": "256"}), "vb")
    header, code = render(ex, "vb.h")
    with open(os.path.join(tmp, "vb.h"), "w") as f:
        f.write(header)
    with open(os.path.join(tmp, "vb.c"), "w") as f:
        f.write(code)
    main = """#include "va.h"
#include "vb.h"
int main(void) { return va_load() || vb_load() || va_unload() || vb_unload(); }
"""
    with open(os.path.join(tmp, "main.c"), "w") as f:
        f.write(main)
    objs = []
    for s in ("va.c", "vb.c", "main.c", os.path.join(HERE, "fake_cuda.c")):
        o = os.path.join(tmp, os.path.basename(s) + ".o")
        r = subprocess.run([CC, "-std=c99", *CFLAGS, "-c", os.path.join(tmp, s), "-o", o],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        objs.append(o)
    exe = os.path.join(tmp, "both")
    assert subprocess.run([CC, *objs, "-o", exe]).returncode == 0
    recs = _run(exe, tmp)
    assert [r["kind"] for r in recs].count("load") == 4


def _example_copy(tmp) -> str:
    """examples/c and examples/vadd.tile laid out as in the repository, in `tmp`."""
    os.makedirs(os.path.join(tmp, "c"))
    for f in ("main.c", "Makefile"):
        shutil.copy(os.path.join(ROOT, "examples", "c", f), os.path.join(tmp, "c", f))
    shutil.copy(os.path.join(ROOT, "examples", "vadd.tile"), tmp)
    return os.path.join(tmp, "c")


def _make(folder, *args) -> subprocess.CompletedProcess:
    tilec = f"{sys.executable} -m tilelang.cli"
    return subprocess.run(["make", "-C", folder, f"TILEC={tilec}",
                           f"CUDA_INCLUDE={CUDA_INCLUDE}", *args],
                          capture_output=True, text=True, timeout=300)


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_example_c_program_builds_with_its_makefile(tmp_path):
    """examples/c: the Makefile exports vadd and builds main.c with -Wall -Wextra -Werror
    (linked here against the driver double; it runs on a GPU in the gpu test below)."""
    folder = _example_copy(str(tmp_path))
    fake = os.path.join(str(tmp_path), "fake_cuda.o")
    r = subprocess.run([CC, "-std=c99", *CFLAGS, "-c", os.path.join(HERE, "fake_cuda.c"),
                        "-o", fake], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    r = _make(folder, "vadd_demo", f"LIBCUDA={fake}")
    assert r.returncode == 0, r.stdout + r.stderr
    assert os.path.isfile(os.path.join(folder, "vadd_demo"))
    assert os.path.isfile(os.path.join(folder, "vadd.h"))


def _libcuda() -> str | None:
    import ctypes.util
    name = ctypes.util.find_library("cuda")
    if name is None:
        return None
    try:
        import ctypes
        ctypes.CDLL(name)
    except OSError:
        return None
    for d in ("/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib/aarch64-linux-gnu",
              "/usr/local/nvidia/lib64", "/usr/lib"):
        p = os.path.join(d, name)
        if os.path.exists(p):
            return p
    return f"-l:{name}"


@pytest.mark.gpu
@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_example_c_program_runs_on_the_gpu(tmp_path):
    """The exported launcher, for real: examples/c adds a million floats on the GPU through
    the driver library and checks every element."""
    sys.path.insert(0, os.path.dirname(HERE))
    from gpu_probe import gpu_available
    lib = _libcuda()
    if not gpu_available() or lib is None or os.environ.get("TILELANG_TEST_EMULATED_GPU"):
        pytest.skip("needs an NVIDIA GPU and its driver library (not the emulated driver)")
    folder = _example_copy(str(tmp_path))
    r = _make(folder, "run", f"LIBCUDA={lib}")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "vadd: 0 of 1000003 elements wrong" in r.stdout


OPTIONAL = """
kernel epilogue(x: Array[f32, 1], bias: Optional[Array[f32, 1]],
                residual: Optional[Array[f32, 1]], y: Array[f32, 1]) {
    let i = bid(0);
    var t = load(x, index = (i,), shape = (256,));
    if not is_none(bias) {
        t = t + load(bias, index = (i,), shape = (256,));
    }
    if not is_none(residual) {
        t = t - 2.0 * load(residual, index = (i,), shape = (256,));
    }
    store(y, index = (i,), tile = t);
}
"""


def test_optional_arrays_null_picks_the_image_of_its_pattern(tmp_path, monkeypatch):
    """NULL for an optional array: the launcher runs the image compiled with it absent, packs
    its slots as zeros exactly as the runtime packs None, and computes what NumPy does."""
    tmp = str(tmp_path)
    src = os.path.join(tmp, "opt.tile")
    with open(src, "w") as f:
        f.write(OPTIONAL)
    ex = _export(tmp, src, "opt")
    # both variants, three absent patterns each (bias, residual, both), after the variants
    assert [(p.variant, p.mask, p.absent) for p in ex.patterns] == [
        (v, m, a) for v in (0, 1) for m, a in ((1, ("bias",)), (2, ("residual",)),
                                                 (3, ("bias", "residual")))]
    with open(os.path.join(tmp, "opt.h")) as f:
        header = f.read()
    assert "bias: Optional[Array[f32, 1]]" in header and "pointer is 0 (NULL)" in header
    mod = tilelang.compile(src, backend="emulator")
    rng = np.random.default_rng(5)
    n = 1000
    hx, hb, hr = (rng.standard_normal(n).astype(np.float32) for _ in range(3))
    x, b, r = mod.to_device(hx), mod.to_device(hb), mod.to_device(hr)
    images = ex.images()
    for use_b, use_r in ((True, False), (False, True), (False, False), (True, True)):
        y = mod.to_device(np.zeros(n, np.float32))
        spy = _Spy(monkeypatch)
        grid = (tilelang.cdiv(n, 256), 1, 1)
        mod.epilogue[grid](x, b if use_b else None, r if use_r else None, y)
        args, decls = [], ""
        for arr, given in ((x, True), (b, use_b), (r, use_r), (y, True)):
            if given:
                got, d = _array_args(arr)
                args += got
                decls += d
            else:
                args += ["(CUdeviceptr)0", "NULL", "NULL"]
        mask = (0 if use_b else 1) | (0 if use_r else 2)
        for exe in _build(tmp, "opt", _main("opt", "epilogue", grid, args, decls)):
            launch = next(rec for rec in _run(exe, tmp) if rec["kind"] == "launch")
            lib = int(launch["library"])
            if mask == 0:
                assert lib == 0                       # the fast variant, all present
            else:
                pat = ex.patterns[lib - len(ex.variants)]
                assert (pat.variant, pat.mask) == (0, mask)
            assert bytes.fromhex(launch["params"]) == spy.calls[0]["params"]
            y.copy_from(np.full(n, np.nan, np.float32))
            fn = mod.backend.device.load_module(images[lib]).get_function("epilogue")
            mod.backend.device.launch(fn, grid, tuple(int(v) for v in
                                                      launch["block"].split(",")),
                                      bytes.fromhex(launch["params"]))
            want = hx.astype(np.float64) + (hb if use_b else 0) - 2.0 * (hr if use_r else 0)
            np.testing.assert_allclose(y.numpy(), want.astype(np.float32), rtol=1e-6,
                                       atol=1e-6)


def test_too_many_optional_arrays_are_refused(tmp_path):
    params = ", ".join(f"o{i}: Optional[Array[f32, 1]]" for i in range(5))
    src = f"kernel k(x: Array[f32, 1], {params}) {{ }}\n"
    with pytest.raises(TileError) as e:
        export_c(src, "many.tile", CompileOptions(), "many")
    d = e.value.diagnostics[0]
    assert (d.code, d.message) == (
        "E0281", "kernel `k` has 5 optional arrays; the C export compiles one image per "
        "pattern of absent ones and takes at most 4")


def test_lists_of_arrays_are_refused(tmp_path):
    src = os.path.join(ROOT, "examples", "grouped_matmul.tile")
    with open(src, encoding="utf-8") as f:
        text = f.read()
    with pytest.raises(TileError) as e:
        export_c(text, src, CompileOptions(), "gm")
    d = e.value.diagnostics[0]
    assert (d.code, d.message) == (
        "E0281", "kernel `grouped_matmul`: the C export cannot pass `a`, a list of arrays")
    assert d.span.line == 12                                   # `a: List[...]`
    r = subprocess.run([sys.executable, "-m", "tilelang.cli", "--emit", "c", src, "-o",
                        os.path.join(str(tmp_path), "gm.c")], capture_output=True, text=True,
                       cwd=str(tmp_path))
    assert r.returncode == 1 and "error[E0281]" in r.stderr and "Traceback" not in r.stderr
    assert not os.listdir(str(tmp_path))                     # nothing written half-way
