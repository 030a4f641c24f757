"""Compiling the configurations in worker processes before the tuner needs them.

Compiling is most of a tuning run's time on a GPU (a matmul configuration takes about a second
and is timed in a fraction of that), and the compiler is Python: threads would share one
interpreter. Each worker is a fresh Python process (not a multiprocessing child, which would
import the caller's main script again) that compiles its share of the configurations through
the public API, so their kernels land in the disk cache under exactly the keys the tuner's own
compile looks up; the tuner then loads them. A configuration that fails to compile in a worker
is simply not cached: the tuner compiles it itself and reports the diagnostic. The job goes in
on stdin as JSON; nothing is unpickled.

What a worker imports is this installation's `tilelang`, never a package in the working
folder: it starts with `-c` and a boot line that puts this installation's folder first on the
import path and drops the working folder (`python -m` would put the working folder first, so a
`tilelang/` or `numpy/` planted there would run). A worker that dies (an exception outside a
configuration's compile, a crash, a kill) is an error, E0941, with the last lines it wrote to
stderr: a silent fallback would hide a broken installation (docs/cli.md, `tilec tune`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

from tilelang.runtime.errors import DeviceError, _diag

#: Lines of a dead worker's stderr shown in the error.
STDERR_LINES = 12

# argv[1] is this installation's folder (the one holding `tilelang/`). With `-c`, sys.path[0]
# is "" (the working folder); PYTHONSAFEPATH keeps it out on Python 3.11+, this line on 3.10.
_BOOT = ("import sys; sys.path[:] = [sys.argv[1]] + [p for p in sys.path if p not in ('', '.')]"
         "; from tilelang.tune.parallel import _worker; sys.exit(_worker())")


class WorkerError(DeviceError):
    """A compile worker of the tuner died (E0941)."""


def default_workers(n_configs: int) -> int:
    """Up to 8 workers, at most one per configuration, leaving a core for the rest."""
    cores = os.cpu_count() or 1
    return max(0, min(8, n_configs, cores - 1))


def worker_command() -> list[str]:
    """The command line of one worker (its job comes on stdin)."""
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return [sys.executable, "-c", _BOOT, here]


def precompile(kernel, configs: list[dict], facts: dict, workers: int) -> int:
    """Compile `configs` of `kernel` for `facts` in up to `workers` processes, into the disk
    cache. Returns how many compiled there (0 when it does not apply: no disk cache, fewer
    than two workers or configurations, the interpreter). Raises WorkerError when a worker
    dies."""
    mod = kernel.module
    if mod.disk is None or workers < 2 or len(configs) < 2 or mod.backend.name == "interp":
        return 0
    opts = mod.options
    common = {"source": mod.text if mod.path == "<string>" else mod.path,
              "target": opts.target.name, "defines": dict(opts.defines),
              "include_dirs": list(opts.include_dirs), "opt_level": opts.opt_level,
              "precision": opts.precision, "lineinfo": opts.lineinfo,
              "backend": mod.backend.name, "cache_dir": mod.disk.root, "kernel": kernel.name,
              "facts": dict(facts)}
    base = dict(kernel.consts)
    n = min(workers, len(configs))
    shares = [[{**base, **c} for c in configs[i::n]] for i in range(n)]
    env = dict(os.environ, PYTHONSAFEPATH="1")
    procs = []
    try:
        for share in shares:
            err = tempfile.TemporaryFile()          # a pipe could fill up and block the worker
            p = subprocess.Popen(worker_command(), stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, stderr=err, env=env, text=True)
            procs.append((p, err))
            try:
                p.stdin.write(json.dumps({**common, "consts": share}))
                p.stdin.close()
            except OSError:                         # it died already: reported below
                pass
        done, dead = 0, []
        for p, err in procs:
            out = p.stdout.read()
            p.wait()
            try:
                done += int(out.strip().splitlines()[-1])
                ok = p.returncode == 0
            except (ValueError, IndexError):
                ok = False
            if not ok:
                dead.append((p.returncode, _tail(err)))
    finally:
        for p, err in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
            err.close()
    if dead:
        raise _worker_error(kernel, len(procs), dead)
    return done


def _tail(f) -> list[str]:
    f.seek(0)
    text = f.read()[-64 * 1024:].decode("utf-8", "replace")
    return [ln for ln in text.splitlines() if ln.strip()][-STDERR_LINES:]


def _worker_error(kernel, n: int, dead: list[tuple[int, list[str]]]) -> WorkerError:
    status, lines = dead[0]
    how = f"exit status {status}" if status >= 0 else f"signal {-status}"
    notes = tuple(f"stderr: {ln}" for ln in lines) or ("it wrote nothing to stderr",)
    return WorkerError(_diag(
        "E0941", f"autotuning kernel `{kernel.name}`: {len(dead)} of {n} compile worker "
        f"processes died (the first: {how})",
        "the notes show the end of its stderr; `workers=0` (`tilec tune --workers 0`) "
        "compiles in this process instead", kernel.info.span, notes))


def _worker() -> int:
    job = json.loads(sys.stdin.read())
    from tilelang.runtime.module import compile as compile_module
    from tilelang.tune.variant import kernel_for
    mod = compile_module(job["source"], arch=job["target"], defines=job["defines"] or None,
                         include_dirs=job["include_dirs"], opt_level=job["opt_level"],
                         backend=job["backend"], cache_dir=job["cache_dir"],
                         precision=job["precision"], lineinfo=job["lineinfo"])
    kernel = getattr(mod, job["kernel"])
    modules: dict = {}
    done = 0
    for consts in job["consts"]:
        try:
            kernel_for(kernel, consts, modules).compile(job["facts"])
            done += 1
        except Exception:        # the tuner compiles it again and reports the diagnostic
            pass
    print(done)
    return 0
