"""Autotuning of `const` kernel parameters (docs/python-api.md, "Autotuning").

    from tilelang.tune import autotune
    tuned = autotune(mod.matmul, space={"BM": [64, 128], "BN": [64, 128]},
                     grid=lambda m: (tilelang.cdiv(M, m["BM"]), tilelang.cdiv(N, m["BN"])))
    tuned(a, b, c)

`tilec tune FILE --kernel K ...` does the same from the shell (tilelang/tune/cli.py).
"""

from .space import Fit, expand, fit
from .store import TuneStore
from .tuner import TuneError, TunedKernel, TuneResult, Trial, autotune, device_name

__all__ = ["autotune", "TunedKernel", "TuneResult", "Trial", "TuneError", "TuneStore",
           "expand", "fit", "Fit", "device_name"]
