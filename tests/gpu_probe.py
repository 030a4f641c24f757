"""Whether a GPU and a working driver are present. Tests import it from here, never from
`conftest` (several folders have a conftest.py, so `import conftest` is ambiguous)."""

from __future__ import annotations

import functools


@functools.lru_cache(maxsize=1)
def gpu_available() -> bool:
    try:
        from cuda.bindings import driver
    except Exception:
        return False
    try:
        (err,) = driver.cuInit(0)
        if err != driver.CUresult.CUDA_SUCCESS:
            return False
        err, count = driver.cuDeviceGetCount()
        return err == driver.CUresult.CUDA_SUCCESS and count > 0
    except Exception:
        return False
