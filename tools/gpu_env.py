#!/usr/bin/env python3
"""What a GPU session's machine has, as JSON (and a short text on stdout):

    python3 tools/gpu_env.py [FILE.json]

The GPU, its driver and CUDA version (cuda.bindings), the versions of the Python packages the
project and its benchmarks use, and which command-line tools are on PATH (ncu,
compute-sanitizer, ptxas, cuobjdump, nvdisasm, nvidia-smi). Every probe is guarded: a missing
or broken piece is reported as such, and the script always exits 0 (it is the first thing a
session runs, to learn what it may rely on).
"""

from __future__ import annotations

import importlib
import json
import platform
import shutil
import subprocess
import sys

PACKAGES = ("numpy", "cuda.bindings", "cuda.core", "torch", "triton", "cupy", "llvmlite", "lark",
            "ml_dtypes", "matplotlib", "pytest", "pytest_timeout", "xdist",
            "dist:nvidia-nvjitlink", "dist:nvidia-nvjitlink-cu12", "dist:cuda-python")
TOOLS = ("nvidia-smi", "ncu", "compute-sanitizer", "ptxas", "nvcc", "cuobjdump", "nvdisasm")


def _version(name: str) -> str:
    if name.startswith("dist:"):              # a distribution with no module of its name
        from importlib.metadata import PackageNotFoundError, version
        try:
            return version(name[5:])
        except PackageNotFoundError:
            return "absent"
    try:
        mod = importlib.import_module(name)
    except Exception as e:                     # absent, or broken on import
        return f"absent ({type(e).__name__}: {str(e).splitlines()[0][:120] if str(e) else ''})"
    v = getattr(mod, "__version__", None)
    if v is None:
        try:
            from importlib.metadata import version
            v = version({"cuda.bindings": "cuda-bindings", "cuda.core": "cuda-core",
                         "xdist": "pytest-xdist"}.get(name, name))
        except Exception:
            v = "present (version unknown)"
    return str(v)


def _driver() -> dict:
    out: dict = {}
    try:
        from cuda.bindings import driver as drv
    except Exception as e:
        return {"error": f"cuda.bindings.driver: {e}"}

    def call(fn, *args):
        res = fn(*args)
        err, *rest = res if isinstance(res, tuple) else (res,)
        if int(err) != 0:
            raise RuntimeError(f"{fn.__name__} -> {err!r}")
        return rest[0] if len(rest) == 1 else rest
    try:
        call(drv.cuInit, 0)
        v = call(drv.cuDriverGetVersion)
        out["driver_cuda_version"] = f"{v // 1000}.{v % 1000 // 10}"
        out["devices"] = []
        A = drv.CUdevice_attribute
        for i in range(call(drv.cuDeviceGetCount)):
            dev = call(drv.cuDeviceGet, i)
            name = call(drv.cuDeviceGetName, 256, dev).split(b"\0", 1)[0].decode()

            def attr(n):
                return int(call(drv.cuDeviceGetAttribute, getattr(A, n), dev))
            out["devices"].append({
                "name": name,
                "capability": f"{attr('CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR')}."
                              f"{attr('CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR')}",
                "sms": attr("CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT"),
                "smem_optin": attr("CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"),
                "l2_bytes": attr("CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE"),
                "memory_bytes": int(call(drv.cuDeviceTotalMem, dev)),
            })
    except Exception as e:
        out["error"] = f"{type(e).__name__}: {e}"
    return out


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        return "absent"
    try:
        p = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30)
        lines = [ln for ln in (p.stdout or p.stderr).splitlines() if ln.strip()]
        return f"{path}: {lines[-1][:120] if lines else 'no version text'}"
    except Exception as e:
        return f"{path}: {type(e).__name__}"


def collect() -> dict:
    env = {"python": sys.version.split()[0], "executable": sys.executable,
           "platform": platform.platform(),
           "packages": {n: _version(n) for n in PACKAGES},
           "driver": _driver(),
           "tools": {t: _tool(t) for t in TOOLS}}
    try:
        import tilelang
        env["tilelang"] = tilelang.__version__
        be = tilelang.get_backend("cuda")
        env["tilelang_cuda"] = f"{be.limits.name}, target {be.default_target()}"
    except Exception as e:
        env["tilelang_cuda"] = f"unavailable: {str(e).splitlines()[0][:200]}"
    try:
        import torch
        env["torch_cuda"] = (f"{torch.version.cuda}, {torch.cuda.get_device_name()}"
                             if torch.cuda.is_available() else "no GPU for torch")
    except Exception as e:
        env["torch_cuda"] = f"unavailable: {type(e).__name__}"
    return env


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    env = collect()
    text = json.dumps(env, indent=2)
    if argv:
        with open(argv[0], "w", encoding="utf-8") as f:
            f.write(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
