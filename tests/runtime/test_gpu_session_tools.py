"""The GPU-session pre-flight without a GPU: tools/gpu_session.sh (usage, a phase that packs
its results under $OUT within its budget), tools/check_cuda_bindings.py (every driver name
and call arity the project uses exists in the installed cuda-bindings) and the emulated
driver of tests/emulated_cuda.py, which backs `TILELANG_TEST_EMULATED_GPU=1 pytest -m gpu`:
the runtime's CUDA back end runs on it unchanged, and a call whose arguments cuda-bindings
refuses fails as it would on a GPU."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile

import numpy as np
import pytest

import tilelang
from rt_support import ROOT, use_emulated_driver

sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, os.path.join(ROOT, "tools"))

import check_cuda_bindings  # noqa: E402
import emulated_cuda  # noqa: E402

bindings = pytest.importorskip("cuda.bindings.driver")
SCRIPT = os.path.join(ROOT, "tools", "gpu_session.sh")


def test_session_script_refuses_an_unknown_phase():
    r = subprocess.run(["bash", SCRIPT, "everything"], capture_output=True, text=True,
                       cwd=ROOT, timeout=60)
    assert r.returncode == 2
    assert r.stderr == "usage: bash tools/gpu_session.sh all|env|tests|bench|tools " \
                       "[SECONDS] [ARGS...] (or: digest)\n"
    r = subprocess.run(["bash", SCRIPT, "tests", "5m"], capture_output=True, text=True,
                       cwd=ROOT, timeout=60)
    assert r.returncode == 2 and r.stderr == "gpu_session: SECONDS must be a whole number\n"


def test_session_phase_packs_its_results_under_out(tmp_path):
    """The `tools` phase on a machine without ncu or compute-sanitizer: the set-up step runs,
    the absent tools are named, and $OUT gets exactly the summary and the archive (flat, as
    the device tool returns files)."""
    if os.path.isdir(os.path.join(ROOT, ".whl")):
        pytest.skip("a wheelhouse (.whl/) is here: the set-up would install it")
    out = tmp_path / "out"
    env = {k: v for k, v in os.environ.items() if k != "OUT"}
    env.update(OUT=str(out), TMPDIR=str(tmp_path),
               PATH=os.pathsep.join(p for p in env["PATH"].split(os.pathsep)
                                    if not os.path.exists(os.path.join(p, "ncu"))))
    r = subprocess.run(["bash", SCRIPT, "tools", "120"], capture_output=True, text=True,
                       cwd=ROOT, env=env, timeout=180)
    assert r.returncode == 0, r.stdout + r.stderr
    assert sorted(os.listdir(out)) == ["tools-summary.txt", "tools.tar.gz"]
    summary = (out / "tools-summary.txt").read_text().splitlines()
    assert summary[0].startswith("phase tools, budget 120s, ")
    assert summary[1].startswith("ok    setup ")
    if not any(os.path.exists(os.path.join(p, "compute-sanitizer"))
               for p in env["PATH"].split(os.pathsep)):
        assert "absent: compute-sanitizer (not on PATH)" in summary
    assert summary[-1].startswith("packed after ")
    with tarfile.open(out / "tools.tar.gz") as t:
        names = {os.path.normpath(n) for n in t.getnames()}
    assert {"summary.txt", "setup.log"} <= names


def test_session_step_stops_at_its_budget(tmp_path):
    """A phase given too little time skips its steps instead of overrunning, and still packs."""
    if os.path.isdir(os.path.join(ROOT, ".whl")):
        pytest.skip("a wheelhouse (.whl/) is here: the set-up would install it")
    out = tmp_path / "out"
    env = dict(os.environ, OUT=str(out), TMPDIR=str(tmp_path))
    r = subprocess.run(["bash", SCRIPT, "tests", "10"], capture_output=True, text=True,
                       cwd=ROOT, env=env, timeout=120)
    summary = (out / "tests-summary.txt").read_text()
    assert "SKIP  pytest-gpu: no time left" in summary or "TIMEOUT" in summary, summary
    assert (out / "tests.tar.gz").exists()
    assert r.returncode != 0 or "SKIP" in summary


def test_installed_bindings_have_every_name_the_project_uses():
    assert check_cuda_bindings.check() == []


def test_bindings_check_finds_a_wrong_call(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def f(drv):\n"
                   "    drv.cuMemAlloc(16, 0)\n"
                   "    drv.cuNoSuchCall()\n"
                   "    return drv.CUresult.CUDA_NO_SUCH_ERROR\n")
    problems = [p.split(": ", 1)[1] for p in check_cuda_bindings.check([str(bad)])]
    assert sorted(problems) == ["`cuMemAlloc` takes 1 arguments here, the call passes 2",
                                "cuda.bindings.driver has no `CUresult.CUDA_NO_SUCH_ERROR`",
                                "cuda.bindings.driver has no `cuNoSuchCall`"]


@pytest.fixture
def emulated(monkeypatch):
    return use_emulated_driver(monkeypatch)


def test_emulated_driver_runs_the_cuda_back_end(emulated, tmp_path):
    """vadd through CudaBackend (cuLibraryLoadData, cuLaunchKernel with the kernelParams
    array) on the emulated driver: NumPy's sum, and every driver call the runtime made passed
    cuda-bindings' own argument conversion."""
    mod = tilelang.compile(os.path.join(ROOT, "examples", "vadd.tile"), backend="cuda",
                           cache_dir=str(tmp_path))
    assert mod.backend.limits.name.startswith("Emulated H200")
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal(3000).astype(np.float32), rng.standard_normal(3000)
    da, db, dc = mod.to_device(a), mod.to_device(b.astype(np.float32)), mod.empty(3000, "f32")
    mod.vadd[3](da, db, dc)
    np.testing.assert_array_equal(dc.numpy(), a + b.astype(np.float32))
    assert {"cuLibraryLoadData", "cuLibraryGetKernel", "cuLaunchKernel"} <= set(emulated.calls)


def test_emulated_driver_reads_registers_from_the_cubin(emulated, tmp_path):
    from tilelang.driver import compile_source
    from tilelang.options import CompileOptions
    path = os.path.join(ROOT, "examples", "layernorm.tile")
    res = compile_source(open(path).read(), path, CompileOptions(target="sm_90a"), until="cubin")
    regs, smem = emulated_cuda._elf_facts(res.cubin, "layernorm")
    assert (regs, smem) == (res.link.resources["layernorm"].registers,
                            res.link.resources["layernorm"].smem_static)


def test_tensor_map_arguments_pass_cuda_bindings(monkeypatch):
    """cuTensorMapEncodeTiled takes lists of cuuint64_t / cuuint32_t: plain ints raise
    TypeError in cuda-bindings 12.9 and 13.x (what encode_cuda passed before)."""
    from tilelang.runtime.tensormap import MapArgs, encode_cuda
    drv = emulated_cuda.EmulatedDriver()
    args = MapArgs(6, 2, 1 << 20, (520, 1000), (1040,), (64, 128), 3)
    raw = encode_cuda(drv, args)
    from tilelang.emulator import tensormap as emu
    assert raw == bytes(emu.encode(6, 2, 1 << 20, (520, 1000), (1040,), (64, 128), (1, 1), 0,
                                   3, 2, 0))
    with pytest.raises(emulated_cuda.ShapeError, match="Cannot convert int"):
        drv.cuTensorMapEncodeTiled(
            bindings.CUtensorMapDataType(6), 2, 1 << 20, [520, 1000], [1040], [64, 128], [1, 1],
            bindings.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
            bindings.CUtensorMapSwizzle(3), bindings.CUtensorMapL2promotion(2),
            bindings.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)


def test_tuner_reads_registers_of_a_tensor_map_kernel(emulated, tmp_path):
    """The tuner asks the driver for a specialization's registers through launcher.kernel; a
    TMA kernel's launcher wraps the back end's (it read 0 before TensorMapLauncher.kernel)."""
    from tilelang.runtime.tensormap import TensorMapLauncher
    from tilelang.tune.tuner import _registers
    mod = tilelang.compile(os.path.join(ROOT, "examples", "matmul.tile"), backend="cuda",
                           cache_dir=str(tmp_path))
    spec = mod.matmul.specialize(BM=64, BN=128, BK=64).compile()
    assert isinstance(spec.launcher, TensorMapLauncher)
    want = emulated._get(spec.launcher.inner.kernel, emulated_cuda._Kernel).regs
    assert want > 0 and _registers(mod.backend, spec) == want


def test_emulated_driver_enforces_the_dynamic_shared_memory_attribute(emulated, tmp_path):
    """More than 48 KB of dynamic shared memory without the kernel attribute is refused, as
    the driver does; the runtime sets it (test_rt_gpu's bigsmem kernel passes on it)."""
    from rt_support import FakeCompiler, source
    mod = tilelang.compile(source("bigsmem"), backend="cuda", compiler=FakeCompiler(),
                           cache_dir=str(tmp_path))
    out = mod.empty(128, "i32")
    mod.bigsmem[1](out)
    np.testing.assert_array_equal(out.numpy(), (np.arange(128) + 1) % 128 + 1)
    launch = mod.bigsmem._specs[next(iter(mod.bigsmem._specs))].launcher
    k = emulated._get(launch.kernel, emulated_cuda._Kernel)
    k.max_dynamic = 48 * 1024
    with pytest.raises(tilelang.DeviceError, match="CUDA_ERROR_INVALID_VALUE"):
        mod.bigsmem[1](out)


@pytest.mark.slow
def test_gpu_tests_run_on_the_emulated_driver(tmp_path):
    """`TILELANG_TEST_EMULATED_GPU=1 pytest -m gpu` on the runtime's and the TMA store's GPU
    tests: every test that needs neither torch, CuPy nor a subprocess passes (the TMA one
    failed before encode_cuda passed cuda-bindings its own integer types)."""
    env = dict(os.environ, TILELANG_TEST_EMULATED_GPU="1",
               TILELANG_CACHE_DIR=str(tmp_path / "cache"))
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m",
                        "gpu", "tests/runtime/test_rt_gpu.py",
                        "tests/codegen/lower/tensorcore/test_tma_store.py",
                        "--deselect",
                        "tests/runtime/test_rt_gpu.py::test_example_script_on_cuda"],
                       capture_output=True, text=True, cwd=ROOT, env=env, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    assert " passed" in r.stdout.splitlines()[-1] and "failed" not in r.stdout.splitlines()[-1]


def test_gpu_env_reports_without_a_gpu(tmp_path):
    """tools/gpu_env.py never fails: what is missing is reported as such."""
    import json
    out = tmp_path / "env.json"
    r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "gpu_env.py"), str(out)],
                       capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr
    env = json.loads(out.read_text())
    assert env["packages"]["numpy"] == np.__version__
    from cuda.bindings import __version__ as cb_version
    assert env["packages"]["cuda.bindings"] == cb_version
    assert set(env["tools"]) == {"nvidia-smi", "ncu", "compute-sanitizer", "ptxas", "nvcc",
                                 "cuobjdump", "nvdisasm"}
    assert "devices" in env["driver"] or env["driver"]["error"]
    assert env["tilelang_cuda"].startswith("unavailable: ") or " target sm_" in \
        env["tilelang_cuda"]
