"""Compiling the configurations in worker processes before the tuner needs them.

Compiling is most of a tuning run's time on a GPU (a matmul configuration takes about a second
and is timed in a fraction of that), and the compiler is Python: threads would share one
interpreter. Each worker is a fresh `python -m tilelang.tune.parallel` process (not a
multiprocessing child, which would import the caller's main script again) that compiles its
share of the configurations through the public API, so their kernels land in the disk cache
under exactly the keys the tuner's own compile looks up; the tuner then loads them. A
configuration that fails in a worker is simply not cached: the tuner compiles it itself and
reports the diagnostic. The job goes in on stdin as JSON; nothing is unpickled.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys


def default_workers(n_configs: int) -> int:
    """Up to 8 workers, at most one per configuration, leaving a core for the rest."""
    cores = os.cpu_count() or 1
    return max(0, min(8, n_configs, cores - 1))


def precompile(kernel, configs: list[dict], facts: dict, workers: int) -> int:
    """Compile `configs` of `kernel` for `facts` in up to `workers` processes, into the disk
    cache. Returns how many compiled there (0 when it does not apply: no disk cache, fewer
    than two workers or configurations, the interpreter)."""
    mod = kernel.module
    if mod.disk is None or workers < 2 or len(configs) < 2 or mod.backend.name == "interp":
        return 0
    opts = mod.options
    common = {"source": mod.text if mod.path == "<string>" else mod.path,
              "target": opts.target, "defines": dict(opts.defines),
              "include_dirs": list(opts.include_dirs), "opt_level": opts.opt_level,
              "precision": opts.precision,
              "backend": mod.backend.name, "cache_dir": mod.disk.root, "kernel": kernel.name,
              "facts": dict(facts)}
    base = dict(kernel.consts)
    n = min(workers, len(configs))
    shares = [[{**base, **c} for c in configs[i::n]] for i in range(n)]
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ)
    env["PYTHONPATH"] = here + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    procs = []
    for share in shares:
        p = subprocess.Popen([sys.executable, "-m", "tilelang.tune.parallel"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, env=env, text=True)
        procs.append(p)
        p.stdin.write(json.dumps({**common, "consts": share}))
        p.stdin.close()
    done = 0
    for p in procs:
        out = p.stdout.read()
        p.wait()
        try:
            done += int(out.strip().splitlines()[-1])
        except (ValueError, IndexError):
            pass
    return done


def _worker() -> int:
    job = json.loads(sys.stdin.read())
    import tilelang
    mod = tilelang.compile(job["source"], arch=job["target"], defines=job["defines"] or None,
                           include_dirs=job["include_dirs"], opt_level=job["opt_level"],
                           backend=job["backend"], cache_dir=job["cache_dir"],
                           precision=job["precision"])
    from tilelang.tune.tuner import _kernel_for
    kernel = getattr(mod, job["kernel"])
    modules: dict = {}
    done = 0
    for consts in job["consts"]:
        try:
            _kernel_for(kernel, consts, modules).compile(job["facts"])
            done += 1
        except Exception:        # the tuner compiles it again and reports the diagnostic
            pass
    print(done)
    return 0


if __name__ == "__main__":
    sys.exit(_worker())
