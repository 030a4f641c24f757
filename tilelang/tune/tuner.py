"""`autotune(kernel, configs=..., key=...)`: pick a kernel's `const` values per launch key.

    tuned = tilelang.tune.autotune(mod.matmul, space={"BM": [64, 128], "BN": [64, 128]},
                                   grid=lambda m: (cdiv(M, m["BM"]), cdiv(N, m["BN"])))
    tuned(a, b, c)                           # tunes on the first launch of each key, then runs

For each new launch key (the shapes and dtypes of the arrays, the values of the scalars named
in `key`, the device), the configurations are compiled and pruned by the resource model
(space.fit) before anything runs; the survivors are timed with `do_bench` on a GPU, or run
once each on the emulator, checked against a reference answer and ranked by the emulator's
cost model (tilelang.testing.bench). The winner is remembered in memory and on disk
(store.TuneStore), so a later process tunes nothing.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from tilelang.diagnostics import TileError
from tilelang.runtime.args import extract, facts_key, shape_links
from tilelang.runtime.dtypes import ITEMSIZE
from tilelang.runtime.errors import _diag, RuntimeUsageError, value_error
from tilelang.runtime.module import Kernel, get_backend, infer_types

from .parallel import default_workers, precompile
from .space import config_text, expand, fit
from .store import TuneStore
from .variant import PRECISIONS, kernel_for as _kernel_for, split_precision  # noqa: F401


class TuneError(RuntimeUsageError):
    """No configuration compiled, fit the device and ran (E0940)."""


@dataclass
class Trial:
    config: dict
    status: str = "pending"       # "ok", "pruned", "wrong", "failed"
    value: float | None = None    # ms on a GPU, cost on the emulator
    reason: str = ""
    occupancy: float | None = None

    def to_json(self) -> dict:
        return {"config": self.config, "status": self.status, "value": self.value,
                "reason": self.reason, "occupancy": self.occupancy}

    @classmethod
    def from_json(cls, d: dict) -> "Trial":
        return cls(dict(d["config"]), str(d["status"]), d.get("value"), str(d.get("reason", "")),
                   d.get("occupancy"))


@dataclass
class TuneResult:
    kernel: str
    key: dict
    config: dict
    metric: str                    # "ms" (GPU time) or "cost" (the emulator's cost model)
    trials: list = field(default_factory=list)
    seconds: float = 0.0
    cached: bool = False           # read from the disk store

    @property
    def value(self) -> float | None:
        for t in self.trials:
            if t.config == self.config and t.status == "ok":
                return t.value
        return None

    def to_json(self) -> dict:
        return {"kernel": self.kernel, "key": self.key, "config": self.config,
                "metric": self.metric, "seconds": self.seconds,
                "trials": [t.to_json() for t in self.trials]}

    @classmethod
    def from_json(cls, d: dict) -> "TuneResult":
        return cls(str(d["kernel"]), dict(d["key"]), dict(d["config"]), str(d["metric"]),
                   [Trial.from_json(t) for t in d["trials"]], float(d.get("seconds", 0.0)),
                   True)

    def table(self) -> str:
        """One row per configuration: status, value, occupancy, why it was left out."""
        unit = "ms" if self.metric == "ms" else "cost"
        rows = [("config", "status", unit, "occupancy", "note")]
        for t in self.trials:
            best = t.status == "ok" and t.config == self.config
            v = "" if t.value is None else (f"{t.value:.4f}" if unit == "ms" else f"{t.value:.0f}")
            occ = "" if t.occupancy is None else f"{100 * t.occupancy:.0f}%"
            rows.append((config_text(t.config), t.status + (" *" if best else ""), v, occ,
                         t.reason))
        w = [max(len(r[i]) for r in rows) for i in range(5)]
        lines = ["  ".join(c.ljust(w[i]) for i, c in enumerate(r)).rstrip() for r in rows]
        lines.insert(1, "  ".join("-" * x for x in w))
        return "\n".join(lines)


def _progress_writer(progress):
    if progress is None or progress is True:
        stream = sys.stderr
    elif progress is False:
        return None
    elif callable(progress):
        return progress
    else:
        stream = progress

    def write(text: str) -> None:
        stream.write(text + "\n")
        stream.flush()
    return write


def default_tolerance(dtype: str) -> tuple[float, float]:
    """(rtol, atol) between configurations: their sums may add in another order."""
    if dtype in ("f16", "bf16", "tf32") or dtype.startswith("f8"):
        return 2e-2, 1e-2
    if dtype == "f64":
        return 1e-9, 1e-12
    return 1e-4, 1e-5


class TunedKernel:
    """A kernel whose `const` values are chosen per launch key. Call it with the kernel's
    arguments (`tuned(a, b, c)`, or `tuned[grid](...)` to override the grid)."""

    def __init__(self, kernel: Kernel, configs: list[dict], *, grid, key, prune, warmup, rep,
                 check, reference, rtol, atol, cache, cache_dir, progress, workers=None):
        self.kernel = kernel
        self.configs = configs
        self.grid = grid
        self.key_names = key
        self.prune = prune
        self.warmup, self.rep = warmup, rep
        self.check, self.reference = check, reference
        self.rtol, self.atol = rtol, atol
        self.workers = workers
        self.store = TuneStore(cache_dir) if cache else None
        self._write = _progress_writer(progress)
        self.results: dict[str, TuneResult] = {}      # launch key (JSON text) -> result
        self._variants: dict[tuple, Kernel] = {}      # (shape, dtype) per argument -> kernel
        self._modules: dict[str, Any] = {}            # precision mode -> module compiled so
        self.last: TuneResult | None = None
        names = [p.name for p in kernel.params]
        for n in key or ():
            if n not in names:
                raise value_error(f"`key` names `{n}`, which is no parameter of kernel "
                                  f"`{kernel.name}`", "its parameters are: "
                                  + ", ".join(f"`{x}`" for x in names))

    def __repr__(self) -> str:
        return f"<tilelang.tune.TunedKernel {self.kernel.name}, {len(self.configs)} configs>"

    @property
    def name(self) -> str:
        return self.kernel.name

    # -- configurations -----------------------------------------------------------------------
    def kernel_for(self, config: Mapping[str, Any]) -> Kernel:
        """The kernel with a configuration's const values bound; a `precision` key (when the
        kernel has no const of that name) compiles the module in that math mode."""
        return _kernel_for(self.kernel, config, self._modules)

    # -- launching ----------------------------------------------------------------------------
    def __getitem__(self, grid):
        def call(*args, stream=None):
            return self._run(grid, args, stream)
        return call

    def __call__(self, *args, stream=None):
        if self.grid is None:
            raise value_error(f"tuned kernel `{self.name}` has no grid", "pass grid= to "
                              "autotune, or launch it as tuned[grid](...)")
        return self._run(self.grid, args, stream)

    def _run(self, grid, args, stream):
        # the launch key's facts as a tuple, for a dict lookup per launch; a miss (or anything
        # unusual) takes the full path
        quick = None
        try:
            quick = tuple((v.shape, v.dtype) if v is not None else None
                          for v in map(extract, args))
        except Exception:
            pass
        variant = self._variants.get(quick) if quick is not None else None
        if variant is None:
            res = self.tune(args, grid=grid)
            variant = self.kernel_for(res.config)
            if quick is not None and self.key_names is None and len(self._variants) < 1024:
                self._variants[quick] = variant
        return variant[grid](*args, stream=stream)

    def best_config(self, *args, grid=None) -> dict:
        return dict(self.tune(args, grid=grid if grid is not None else self.grid).config)

    # -- the launch key -----------------------------------------------------------------------
    def launch_key(self, args: Sequence) -> dict:
        be = self.kernel.module.backend
        params = self.kernel.params
        if len(args) != len(params):
            raise self.kernel._count_error(len(args))
        arrays, scalars = {}, {}
        for p, a in zip(params, args):
            if p.name not in self.key_names if self.key_names is not None \
                    else p.kind != "array":
                continue                # default: the arrays only
            if p.kind == "array":
                v = extract(a)
                if v is None:
                    raise value_error(f"argument `{p.name}` of tuned kernel `{self.name}` is "
                                      f"{type(a).__name__}, not an array", "pass an array")
                dtype = v.dtype if p.type_var else p.dtype    # a generic kernel's T: the array's
                arrays[p.name] = [dtype, [int(x) for x in v.shape]]
            else:
                scalars[p.name] = a if isinstance(a, (bool, int, float)) else float(a)
        return {"arrays": arrays, "scalars": scalars, "device": device_name(be),
                "target": self.kernel.module.target}

    def material(self, key: dict) -> dict:
        k = self.kernel
        mod = k.module
        tuned = {n for c in self.configs for n in c}
        return {"compiler": str(mod.compiler.compiler_id),
                "sources": [list(s) for s in mod.info.sources], "kernel": k.name,
                "consts": {n: v for n, v in k.consts.items() if n not in tuned},
                "configs": self.configs, "options": mod.options.key(),
                "backend": mod.backend.name, "key": key,
                "check": [self.check, self.reference if isinstance(self.reference, str) else
                          "function " + getattr(self.reference, "__qualname__", "?")]
                if mod.backend.name == "emulator" else None}

    # -- tuning -------------------------------------------------------------------------------
    def tune(self, args: Sequence, *, grid=None, force: bool = False) -> TuneResult:
        """The result for these arguments' launch key: from memory, from disk, or tuned now
        (`force`: tuned again, the stored result replaced)."""
        args = tuple(args)
        key = self.launch_key(args)
        import json
        ktext = json.dumps(key, sort_keys=True)
        if not force:
            res = self.results.get(ktext)
            if res is not None:
                return res
            if self.store is not None:
                got = self.store.load(self.material(key))
                res = self._from_store(got)
                if res is not None:
                    self.results[ktext] = self.last = res
                    if self._write:
                        self._write(f"tune {self.name}: {config_text(res.config)} (tuned "
                                    "before, from the cache)")
                    return res
        grid = grid if grid is not None else self.grid
        if grid is None:
            raise value_error(f"tuned kernel `{self.name}` has no grid", "pass grid= to "
                              "autotune, or launch it as tuned[grid](...)")
        res = self._search(args, grid, key)
        self.results[ktext] = self.last = res
        self._variants.clear()                         # a forced re-tune may change a choice
        if self.store is not None:
            try:
                self.store.store(self.material(key), res.to_json())
            except OSError as e:
                if self._write:
                    self._write(f"tune {self.name}: cannot write the result to "
                                f"{self.store.root} ({e.strerror or e})")
        return res

    def _from_store(self, got) -> TuneResult | None:
        if got is None:
            return None
        try:
            res = TuneResult.from_json(got)
        except (KeyError, TypeError, ValueError, AttributeError):
            return None
        if res.config not in self.configs:
            return None
        return res

    def _search(self, args: tuple, grid, key: dict) -> TuneResult:
        t0 = time.perf_counter()
        k = self.kernel
        if k.open_types:            # a generic kernel: the arguments fix its dtypes first
            k = k.specialize(**infer_types(k, tuple(args)))
        be = k.module.backend
        emulated = be.name == "emulator"
        configs = list(self.configs)
        trials = [Trial(dict(c)) for c in configs]
        if self.prune is not None:
            kept = self.prune([dict(c) for c in configs], _meta(k, args))
            kept = [dict(c) for c in kept]
            for t in trials:
                if t.config not in kept:
                    t.status, t.reason = "pruned", "left out by prune()"
        facts = _facts(k, args)
        n = len(trials)
        say = self._write
        pending = [t.config for t in trials if t.status == "pending"]
        workers = default_workers(len(pending)) if self.workers is None else self.workers
        if workers >= 2 and len(pending) >= 2 and k.module.disk is not None:
            if say:
                say(f"tune {self.name}: compiling {len(pending)} configurations in "
                    f"{min(workers, len(pending))} processes")
            precompile(k, pending, facts, workers)
        for i, t in enumerate(trials):
            if t.status != "pending":
                continue
            try:
                spec = _kernel_for(k, t.config, self._modules).compile(facts)
            except TileError as e:
                d = e.diagnostics[0] if e.diagnostics else None
                t.status = "pruned"
                t.reason = f"does not compile: {d.code} {d.message}" if d else str(e)
                continue
            regs = _registers(be, spec)
            f = fit(spec.artifact, k.module.target, regs, _max_shared(be))
            t.occupancy = f.occupancy
            if not f.ok:
                t.status, t.reason = "pruned", f.reason
        left = [t for t in trials if t.status == "pending"]
        if say:
            pruned = n - len(left)
            say(f"tune {self.name}: {n} configurations, {pruned} pruned before running, "
                f"{'running' if emulated else 'timing'} {len(left)} on {device_name(be)}")
        reference = None
        if emulated and self.check and callable(self.reference):
            reference = _user_answer(k, self.reference, args)
        for j, t in enumerate(left):
            variant = _kernel_for(k, t.config, self._modules)
            try:
                if emulated:
                    t.value, out = _emulate(variant, grid, args)
                    if self.check:
                        want = reference
                        if self.reference == "interp":
                            want = _interp_answer(k, t.config, args, grid)
                        if want is None:            # "first", or no interpreter answer
                            want = reference = reference if reference is not None else out
                        bad = _compare(k, out, want, self.rtol, self.atol)
                        if bad:
                            t.status, t.reason = "wrong", bad
                            t.value = None
                else:
                    t.value = _time(variant, grid, args, self.warmup, self.rep)
                    if self.check:
                        out = _gpu_answer(variant, grid, args)
                        if reference is None:
                            reference = out
                        bad = _compare(k, out, reference, self.rtol, self.atol)
                        if bad:
                            t.status = "wrong"
                            t.reason = bad.replace("the reference", "the first configuration")
                            t.value = None
            except TileError as e:
                d = e.diagnostics[0] if e.diagnostics else None
                t.status = "failed"
                t.reason = f"{d.code} {d.message}" if d else str(e)
            if t.status == "pending":
                t.status = "ok"
            if say:
                v = "" if t.value is None else (f"{t.value:.4f} ms" if not emulated
                                                 else f"cost {t.value:.0f}")
                say(f"  [{j + 1}/{len(left)}] {config_text(t.config)}: {t.status} {v}"
                    + (f" ({t.reason})" if t.reason else ""))
        ok = [t for t in trials if t.status == "ok"]
        if not ok:
            lines = tuple(f"{config_text(t.config)}: {t.status}, {t.reason}" for t in trials)
            raise TuneError(_diag(
                "E0940", f"autotuning kernel `{self.name}`: none of its {n} configurations "
                "compiles, fits the device and runs" + (" correctly" if self.check else ""),
                "add configurations with smaller tiles or fewer stages; the notes say what "
                "happened to each", k.info.span, lines))
        best = min(ok, key=lambda t: t.value)        # ties: the first configuration given
        res = TuneResult(self.name, key, dict(best.config), "cost" if emulated else "ms",
                         trials, time.perf_counter() - t0)
        if say:
            v = f"{best.value:.4f} ms" if not emulated else f"cost {best.value:.0f}"
            say(f"tune {self.name}: best {config_text(best.config)} ({v}), "
                f"{res.seconds:.1f} s")
        return res


def device_name(backend) -> str:
    if backend.name == "emulator":
        return f"emulator sm_{backend.limits.sm}"
    name = backend.limits.name.rsplit(" (device", 1)[0]
    return f"{name} sm_{backend.limits.sm}"


def _meta(kernel: Kernel, args) -> dict:
    return dict(zip((p.name for p in kernel.params), args))


def _facts(kernel: Kernel, args) -> dict:
    out, shapes = {}, []
    for p, a in zip(kernel.params, args):
        if p.kind == "array":
            v = extract(a)
            if v is not None and v.strides is not None and p.dtype in ITEMSIZE:
                out[p.name] = facts_key(v.ptr, v.shape, v.strides, ITEMSIZE[p.dtype])
                shapes.append(v.shape)
    if len(out) == sum(p.kind == "array" for p in kernel.params):
        # the launch's same_shape links (docs/abi.md), so the trials are its specialization
        out = dict(zip(out, shape_links(list(out.values()), shapes)))
    return out


def _registers(backend, spec) -> int:
    """Registers per thread from the driver (a GPU), else 0: not known on the emulator."""
    if backend.name != "cuda":
        return 0
    try:
        drv = backend.drv
        attr = drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_NUM_REGS
        return int(backend._check(drv.cuKernelGetAttribute(attr, spec.launcher.kernel,
                                                           backend.dev),
                                  "cuKernelGetAttribute(NUM_REGS)"))
    except Exception:
        return 0


def _max_shared(backend) -> int | None:
    if backend.name == "cuda":
        return int(backend.limits.max_shared_per_block)
    return None


def _copy_args(args) -> tuple:
    """Fresh host copies of the NumPy arrays (the emulator runs each configuration on its own
    copy, so every one starts from the same inputs)."""
    return tuple(np.array(a, copy=True) if isinstance(a, np.ndarray) else a for a in args)


def _emulate(variant: Kernel, grid, args) -> tuple[float, list]:
    from tilelang.testing.bench import count_emulator
    fresh = _copy_args(args)
    counts = count_emulator(lambda: variant[grid](*fresh))
    outs = [np.asarray(a) for p, a in zip(variant.params, fresh) if p.kind == "array"]
    return counts.cost, outs


def _interp_answer(kernel: Kernel, config: dict, args, grid) -> list | None:
    """The reference interpreter's answer for `config`, or None when it cannot run here (the
    first configuration's answer is the reference then)."""
    from tilelang.runtime.module import compile as compile_module
    mod = kernel.module
    try:
        consts, precision = split_precision(kernel, config)
        ref = compile_module(mod.text if mod.path == "<string>" else mod.path,
                             defines=dict(mod.options.defines) or None,
                             include_dirs=mod.options.include_dirs, backend="interp",
                             precision=precision or mod.options.precision)
        k = getattr(ref, kernel.name).specialize(**{**kernel.consts, **consts})
        fresh = _copy_args(args)
        k[grid](*fresh)
    except Exception:
        return None
    return [np.asarray(a) for p, a in zip(kernel.params, fresh) if p.kind == "array"]


def _user_answer(kernel: Kernel, fn, args) -> list:
    """The caller's reference: fn(*args) on host copies returns the expected arrays, as a
    dict by parameter name (arrays not named are not compared) or in parameter order."""
    fresh = _copy_args(args)
    got = fn(*fresh)
    arrays = [p for p in kernel.params if p.kind == "array"]
    if isinstance(got, Mapping):
        return [None if got.get(p.name) is None else np.asarray(got[p.name]) for p in arrays]
    if got is None:                  # the function filled the copies in place
        return [np.asarray(a) for p, a in zip(kernel.params, fresh) if p.kind == "array"]
    got = list(got) if isinstance(got, (list, tuple)) else [got]
    return [np.asarray(g) if g is not None else None for g in got] + \
        [None] * (len(arrays) - len(got))


def _compare(kernel: Kernel, out: list, ref: list, rtol, atol) -> str:
    arrays = [p for p in kernel.params if p.kind == "array"]
    for p, a, b in zip(arrays, out, ref):
        if a is None or b is None:
            continue
        if a.shape != b.shape:
            return f"`{p.name}` has shape {a.shape}, the reference {b.shape}"
        if p.dtype.startswith(("i", "u")) or p.dtype == "bool":
            if not np.array_equal(a, b):
                return f"`{p.name}` differs from the reference"
            continue
        r, t = default_tolerance(p.dtype)
        r = r if rtol is None else rtol
        t = t if atol is None else atol
        x, y = a.astype(np.float64), b.astype(np.float64)
        if not np.array_equal(np.isnan(x), np.isnan(y)):
            return f"`{p.name}` has NaNs where the reference has none, or none where it has"
        ok = ~np.isnan(y)
        if not np.array_equal(np.isinf(x[ok]) * np.sign(x[ok]), np.isinf(y[ok]) * np.sign(y[ok])):
            return f"`{p.name}` has infinities where the reference has none"
        fin = ok & np.isfinite(y)
        if fin.any():
            # against the largest magnitude: sums in another order differ most where they
            # cancel, near zero, by what the large terms round by
            err = float(np.abs(x[fin] - y[fin]).max())
            scale = float(np.abs(y[fin]).max())
            if err > t + r * scale:
                return (f"`{p.name}` differs from the reference (max error {err:.3g}, "
                        f"largest value {scale:.3g})")
    return ""


def _gpu_answer(variant: Kernel, grid, args) -> list:
    """The array arguments after one launch from the saved inputs, on the host (None for
    arrays of a type whose contents cannot be read back here)."""
    restore = _snapshot(args)
    try:
        variant[grid](*args)
        variant.module.backend.synchronize()
        return [_host_copy(a) for p, a in zip(variant.params, args) if p.kind == "array"]
    finally:
        restore()


def _host_copy(a):
    mod = type(a).__module__.split(".")[0]
    try:
        if mod == "torch":
            t = a.detach()
            if str(t.dtype) == "torch.bfloat16" or "float8" in str(t.dtype):
                t = t.float()
            return t.cpu().numpy()
        if mod == "cupy":
            return a.get()
        if isinstance(a, np.ndarray):
            return a.copy()
        if type(a).__name__ == "DeviceArray":
            return np.asarray(a)
    except (TypeError, RuntimeError, ValueError):     # a dtype the library cannot export
        pass
    return None


def _time(variant: Kernel, grid, args, warmup, rep) -> float:
    from tilelang.testing.bench import do_bench
    restore = _snapshot(args)
    try:
        return do_bench(lambda: variant[grid](*args), warmup=warmup, rep=rep,
                        quantiles=(0.5, 0.2, 0.8), backend="cuda")[0]
    finally:
        restore()


def _snapshot(args) -> Callable[[], None]:
    """Copies of the array arguments and a function that puts them back (timing runs a kernel
    many times: one that updates its arguments in place must not see its own results)."""
    saved = []
    for a in args:
        mod = type(a).__module__.split(".")[0]
        if mod == "torch":
            saved.append((a, a.clone(), lambda d, s: d.copy_(s)))
        elif mod == "cupy":
            saved.append((a, a.copy(), lambda d, s: d.__setitem__(Ellipsis, s)))
        elif isinstance(a, np.ndarray):
            saved.append((a, a.copy(), lambda d, s: np.copyto(d, s)))
        elif type(a).__name__ == "DeviceArray" and a.is_contiguous():
            saved.append((a, a.numpy(), lambda d, s: d.copy_from(s)))

    def restore():
        for dst, src, put in saved:
            put(dst, src)
    return restore


def autotune(kernel: Kernel, configs: Sequence[Mapping[str, Any]] | None = None, *,
             space: Mapping[str, Sequence[Any]] | None = None, grid=None,
             key: Sequence[str] | None = None, prune: Callable | None = None,
             warmup: float = 25, rep: float = 100, check: bool = True,
             reference="interp", rtol: float | None = None, atol: float | None = None,
             cache: bool = True, cache_dir: str | None = None, progress=True,
             workers: int | None = None) -> TunedKernel:
    """A `TunedKernel` choosing `kernel`'s const values among `configs` (a list of dicts)
    and/or the product of `space` (name -> values) for each launch key (docs/python-api.md).

    grid: the launch grid, an int, tuple or function of `meta` (the arguments by name and the
    const values, as for `kernel[grid]`). key: the parameter names whose shapes (arrays) or
    values (scalars) make the key (default: every array's shape and dtype). prune: a function
    (configs, args by name) -> the configurations to keep. On a GPU each is timed with
    do_bench(warmup, rep) (the median) and, with `check`, compared with the first
    configuration's answer; on the emulator each runs once and is checked (`check`) against
    `reference` within rtol/atol: "interp", the reference interpreter's answer for the same
    configuration (catches miscompiled configurations); "first", the first configuration's
    answer; or a function of the arguments (host copies) returning the expected arrays (a
    dict by name, or in order; None: it filled the copies). progress: True (stderr), False, a
    stream or a function of one line. workers: processes compiling the configurations ahead
    into the disk cache (default: up to 8, one core left free; 0 or 1: compile in this
    process only)."""
    if not isinstance(kernel, Kernel):
        raise value_error(f"autotune needs a kernel of a compiled module, got "
                          f"{type(kernel).__name__}", "e.g. autotune(mod.matmul, configs=...)")
    cfgs = expand(configs, space)
    for c in cfgs:
        consts, _ = split_precision(kernel, c)     # a precision mode that is none: E0925
        kernel.specialize(**consts)                # unknown names, wrong types: E0916 now
    if key is not None:
        if isinstance(key, str):
            key = [key]
        key = [str(n) for n in key]
    if reference not in ("interp", "first") and not callable(reference):
        raise value_error(f"`reference` is {reference!r}; it is 'interp', 'first' or a "
                          "function", "'interp': the reference interpreter's answer for each "
                          "configuration; 'first': the first configuration's; a function of "
                          "the arguments: the expected arrays")
    for name, v in (("warmup", warmup), ("rep", rep)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not v >= 0:
            raise value_error(f"`{name}` is {v!r}; it is a time in ms", f"e.g. {name}=25")
    if prune is not None and not callable(prune):
        raise value_error(f"`prune` is {type(prune).__name__}, not a function",
                          "prune(configs, args) returns the configurations to keep")
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int)
                                or workers < 0):
        raise value_error(f"`workers` is {workers!r}; it is a number of processes (0: none)",
                          "e.g. workers=4, or leave it out")
    return TunedKernel(kernel, cfgs, grid=grid, key=key, prune=prune, warmup=warmup, rep=rep,
                       check=check, reference=reference, rtol=rtol, atol=atol, cache=cache,
                       cache_dir=cache_dir, progress=progress, workers=workers)
