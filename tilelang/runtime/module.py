"""`tilelang.compile`, modules, kernels, specialization and launching (docs/python-api.md).

    mod = tilelang.compile("examples/vadd.tile", backend="emulator")
    mod.vadd[(n + 1023) // 1024](a, b, c)                 # Triton's shape
    tilelang.launch(None, (g,), mod.vadd.specialize(TILE=512), (a, b, c))   # cuTile's shape

A `Kernel` is one kernel with its `const` values bound. Its specializations are keyed by the
array facts of each launch (docs/abi.md); each holds the loaded code and the parameter layout,
prepared once, so a launch only reads the arguments, packs them and calls the back end.
"""

from __future__ import annotations

import os
import struct
import warnings
from typing import Any, Callable, Mapping

import numpy as np

from tilelang.codegen.api import ArrayFacts
from tilelang.diagnostics import InternalCompilerError

from . import cache as cache_mod
from .args import check_array, extract, facts_key, make_binder, shape_links
from .compiler import Built, CompileOptions, Compiler, DriverCompiler
from .dtypes import INT_RANGE, ITEMSIZE, SCALAR_CONVERT, accepts, scalar_problem
from .errors import KernelNotFound, _diag, arg_error, usage_error, value_error
from .packing import layout
from .signature import KernelInfo, ModuleInfo, ParamInfo
from .validate import LaunchShape, check_launch, dims

BACKENDS = ("cuda", "emulator", "interp")
# three characters (c: contiguous, a: 16-byte aligned, e: last extent a multiple of 16 bytes),
# then `s` (small) and `n` (no tensor map) when they apply;
# the two-character keys from before `e` existed are accepted and claim no `e`
FACT_KEYS = tuple(c + a + e + s + t for c in "c-" for a in "a-" for e in "e-" for s in ("", "s")
                  for t in ("", "n")) + ("ca", "c-", "-a", "--")
_BACKENDS: dict[str, Any] = {}
_BUILT: dict[str, Built] = {}          # disk key -> build, for every module of the process
_DEFAULT_COMPILER: Compiler | None = None


def clear_memory_cache() -> None:
    """Forget the builds of this process (the disk cache stays): the next launch of each
    specialization loads it from disk or compiles it again."""
    _BUILT.clear()


def get_backend(backend=None):
    """A back end object from a name ("cuda", "emulator"), None (`TILELANG_BACKEND`, else
    "cuda") or a back-end object (returned as is). One shared object per name, so device
    arrays made with `tilelang.to_device` work with every module on that back end."""
    if backend is None:
        backend = os.environ.get("TILELANG_BACKEND", "").strip() or "cuda"
    if not isinstance(backend, str):
        if not all(hasattr(backend, a) for a in ("name", "malloc", "limits")):
            raise usage_error("E0921", f"`backend` is {type(backend).__name__}, not a back end",
                              "pass a back-end name (`cuda`, `emulator`, `interp`) or an "
                              "object from `tilelang.get_backend`")
        return backend
    name = backend.strip().lower()
    if name not in BACKENDS:
        raise usage_error("E0921", f"unknown back end `{backend}`",
                          "the back ends are `cuda` (a GPU through the CUDA driver), "
                          "`emulator` (the CPU PTX emulator) and `interp` (the reference "
                          "interpreter)")
    if interpret_everything():
        name = "interp"
    b = _BACKENDS.get(name)
    if b is None:
        if name == "cuda":
            from .cuda import CudaBackend
            b = CudaBackend()
        elif name == "interp":
            from .interp_backend import InterpBackend
            b = InterpBackend()
        else:
            from .emulator_backend import EmulatorBackend
            b = EmulatorBackend()
        _BACKENDS[name] = b
    return b


def interpret_everything() -> bool:
    """`TILELANG_INTERPRET=1`: every launch runs on the reference interpreter, whatever back
    end was asked for by name (as Triton's `TRITON_INTERPRET=1`)."""
    return os.environ.get("TILELANG_INTERPRET", "").strip().lower() in ("1", "true", "yes", "on")


def _default_compiler() -> Compiler:
    global _DEFAULT_COMPILER
    if _DEFAULT_COMPILER is None:
        _DEFAULT_COMPILER = DriverCompiler()
    return _DEFAULT_COMPILER


def _read_input(path_or_source) -> tuple[str, str]:
    """(text, path): a path-like or a one-line string naming a file, else source text."""
    if isinstance(path_or_source, os.PathLike):
        path = os.fspath(path_or_source)
    elif isinstance(path_or_source, str):
        s = path_or_source
        if "\n" in s or "{" in s or not s.strip():
            return s, "<string>"
        path = s
    else:
        raise usage_error("E0923", f"tilelang.compile takes a path or source text, got "
                          f"{type(path_or_source).__name__}",
                          "pass a .tile file name or the source as a string")
    try:
        with open(path, encoding="utf-8") as f:
            return f.read(), path
    except (OSError, UnicodeDecodeError) as e:
        raise usage_error("E0923", f"cannot read `{path}`: "
                          f"{getattr(e, 'strerror', None) or e}",
                          "pass an existing .tile file, or the source text itself (a string "
                          "with a newline is taken as source)") from None


def _define_text(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _check_arch(arch):
    if arch is None:
        return None
    if not isinstance(arch, str):
        raise value_error(f"`arch` is {type(arch).__name__}, not a target name",
                          "e.g. arch='sm_90a', or leave it out for the device's own")
    from tilelang.targets import get_target
    return get_target(arch)      # the target record, once; E0750 with the supported targets


def _check_defines(defines) -> tuple[tuple[str, str], ...]:
    if defines is None:
        return ()
    if not isinstance(defines, Mapping):
        raise value_error(f"`defines` is {type(defines).__name__}; it maps const names to "
                          "values", "e.g. defines={'TILE': 256}")
    out = []
    for k, v in defines.items():
        if not isinstance(k, str) or not k.isidentifier():
            raise value_error(f"`defines` key {k!r} is not a const name",
                              "keys are the names of `const` declarations or parameters")
        if isinstance(v, np.generic) and v.shape == ():
            v = v.item()
        if not isinstance(v, (bool, int, float, str)):
            raise value_error(f"`defines[{k!r}]` is {type(v).__name__}; a const value is a "
                              "number, a bool or source text", f"e.g. defines={{'{k}': 256}}")
        out.append((k, _define_text(v)))
    return tuple(sorted(out))


def _check_include_dirs(dirs) -> tuple[str, ...]:
    if isinstance(dirs, (str, os.PathLike)):
        dirs = (dirs,)                 # one folder, not its characters
    try:
        dirs = tuple(dirs)
    except TypeError:
        raise value_error(f"`include_dirs` is {type(dirs).__name__}, not a list of folders",
                          "e.g. include_dirs=['lib']") from None
    out = []
    for d in dirs:
        if not isinstance(d, (str, os.PathLike)):
            raise value_error(f"`include_dirs` holds {type(d).__name__} {d!r}, not a folder",
                              "e.g. include_dirs=['lib']")
        out.append(os.path.abspath(os.fspath(d)))      # the driver checks they exist (E0271)
    return tuple(out)


def _check_opt_level(level) -> int:
    if isinstance(level, bool) or not isinstance(level, (int, np.integer)) or \
            not 0 <= int(level) <= 3:
        raise value_error(f"`opt_level` is {level!r}; it is 0, 1, 2 or 3",
                          "as `tilec -O0` .. `-O3`")
    return int(level)


def _check_precision(mode) -> str | None:
    if mode is None or (isinstance(mode, str) and mode in ("ieee", "fast", "approx")):
        return mode
    raise value_error(f"`precision` is {mode!r}; it is \"ieee\", \"fast\" or \"approx\"",
                      "as `tilec --precision=...` (docs/numerics.md)")


def _check_lineinfo(flag, backend) -> bool:
    if flag is None:
        return getattr(backend, "name", None) == "emulator"
    if isinstance(flag, bool):
        return flag
    raise value_error(f"`lineinfo` is {flag!r}; it is True or False",
                      "as `tilec --lineinfo` (docs/python-api.md)")


def compile(path_or_source, arch: str | None = None, defines: Mapping[str, Any] | None = None,
            *, include_dirs=(), opt_level: int = 3, backend=None, cache: bool = True,
            cache_dir: str | None = None, compiler: Compiler | None = None,
            precision: str | None = None, lineinfo: bool | None = None) -> "Module":
    """Check a Tile module and return it with its kernels as attributes. Kernels are compiled
    for each specialization at their first launch (or `Kernel.compile()`). `precision`
    ("ieee", "fast", "approx") is the math mode of kernels without `@launch(precision=)`.
    `lineinfo` puts source lines in the PTX (`tilec --lineinfo`); by default only for the
    emulator, whose errors then name them."""
    text, path = _read_input(path_or_source)
    be = get_backend(backend)
    options = CompileOptions(
        target=_check_arch(arch) or be.default_target(), defines=_check_defines(defines),
        include_dirs=_check_include_dirs(include_dirs), opt_level=_check_opt_level(opt_level),
        precision=_check_precision(precision),
        lineinfo=_check_lineinfo(lineinfo, be))
    if cache_dir is not None and not isinstance(cache_dir, (str, os.PathLike)):
        raise value_error(f"`cache_dir` is {type(cache_dir).__name__}, not a folder name",
                          "pass a path, or leave it out for TILELANG_CACHE_DIR / "
                          "~/.cache/tilelang")
    comp = compiler or _default_compiler()
    disk = cache_mod.DiskCache(cache_dir) if cache else None
    info = None
    mkey = cache_mod.digest({"compiler": comp.compiler_id, "path": path,
                             "sha256": cache_mod.sha256_hex(text), "options": options.key(),
                             "format": cache_mod.FORMAT})
    if disk is not None:
        info = disk.load_module(mkey, path)
    if info is None:
        info = comp.inspect(text, path, options)
        cache_mod.STATS["inspects"] += 1
        if disk is not None:
            try:
                disk.store_module(mkey, info)
            except OSError as e:
                warnings.warn(f"tilelang: cannot write the kernel cache in {disk.root} ({e})",
                              RuntimeWarning, stacklevel=2)
    return Module(text, path, options, be, comp, info, disk)


class Module:
    """A checked Tile module; `module.<kernel>` is a `Kernel`."""

    def __init__(self, text: str, path: str, options: CompileOptions, backend, compiler,
                 info: ModuleInfo, disk):
        self.text, self.path, self.options = text, path, options
        self.backend, self.compiler, self.info, self.disk = backend, compiler, info, disk
        self.kernels = {name: Kernel(self, k, {}) for name, k in info.kernels.items()}

    @property
    def target(self) -> str:
        return self.options.target.name

    def __getattr__(self, name: str) -> "Kernel":
        kernels = self.__dict__.get("kernels")
        if kernels is None or name.startswith("__"):
            raise AttributeError(name)
        k = kernels.get(name)
        if k is None:
            fns = self.host_functions
            if name in fns:
                return fns[name]
            if name in self.__dict__.get("_plain_fns", ()):
                raise KernelNotFound(_diag(
                    "E0922", f"`{name}` in `{self.path}` is a `fn` without `@host`: only "
                    "kernels and @host functions can be used from Python",
                    f"mark it `@host` to call it from Python (docs/language.md §9.2), or "
                    f"launch a kernel that calls it"))
            raise KernelNotFound(_diag(
                "E0922", f"module `{self.path}` has no kernel `{name}`",
                "its kernels are: " + (", ".join(f"`{n}`" for n in kernels) or "none")
                + ("; its @host functions: " + ", ".join(f"`{n}`" for n in fns)
                   if fns else "")))
        return k

    @property
    def host_functions(self) -> dict:
        """The module's `@host fn`s by name, callable from Python (`mod.vadd_grid(n)`); they
        run on the reference interpreter."""
        fns = self.__dict__.get("_host_fns")
        if fns is None:
            from .host_fn import HostFunction, functions
            try:
                found, plain = functions(self.text, self.path)
            except Exception:          # the module checked; a stand-in compiler's text may not
                found, plain = {}, set()
            self.__dict__["_plain_fns"] = plain
            fns = self.__dict__["_host_fns"] = {n: HostFunction(self, f)
                                                for n, f in found.items()}
        return fns

    def __dir__(self):
        return list(super().__dir__()) + list(self.kernels) + list(self.host_functions)

    def __repr__(self) -> str:
        return (f"<tilelang.Module {self.path} target={self.target} backend={self.backend.name} "
                f"kernels={list(self.kernels)}>")

    def to_device(self, array):
        """Copy a host array to this module's back end (a `DeviceArray`)."""
        from .device_array import DeviceArray
        return DeviceArray.from_host(self.backend, array)

    def empty(self, shape, dtype: str):
        from .device_array import DeviceArray
        return DeviceArray.empty(self.backend, shape, dtype)


class Specialization:
    """One compiled and loaded specialization of a kernel."""

    __slots__ = ("kernel", "facts", "built", "launcher", "shapes", "key", "written")

    def __init__(self, kernel: "Kernel", facts: tuple[str, ...], built: Built, launcher,
                 key: str):
        self.kernel, self.facts, self.built, self.launcher, self.key = (
            kernel, facts, built, launcher, key)
        self.shapes: dict = {}        # (grid, block) as given -> checked LaunchShape
        # indices (into the runtime parameters) of the arrays the kernel may store into
        self.written = frozenset(i for i, p in enumerate(built.artifact.params)
                                 if p.kind == "array" and getattr(p, "written", True))

    @property
    def ptx(self) -> str:
        return self.built.ptx

    @property
    def cubin(self) -> bytes | None:
        return self.built.cubin

    @property
    def artifact(self):
        return self.built.artifact

    def shape(self, grid, block) -> LaunchShape:
        """The checked launch shape, remembered per (grid, block) as the caller spelled them."""
        # only exact ints are remembered: True == 1 and 1.0 == 1 as dict keys, and those
        # spellings must be refused, not served the shape of grid 1
        key = (grid, block) if _exact_dims(grid) and (block is None or _exact_dims(block)) \
            else None
        s = self.shapes.get(key) if key is not None else None
        if s is None:
            name = self.kernel.info.name
            lim = self.kernel.module.backend.limits
            s = check_launch(name, self.built.artifact, lim, dims(grid, "grid", name),
                             None if block is None else dims(block, "block", name))
            if key is not None:
                if len(self.shapes) > 1024:
                    self.shapes.clear()
                self.shapes[key] = s
        return s


class Kernel:
    """A kernel of a module with its `const` parameters bound (defaults where not given)."""

    def __init__(self, module: Module, info: KernelInfo, consts: Mapping[str, Any]):
        self.module, self.info = module, info
        self.consts = dict(consts)
        self.params = info.runtime_params
        self._arrays = tuple(i for i, p in enumerate(self.params) if p.kind == "array")
        self._convert = tuple(_scalar_converter(info.name, p) for p in self.params)
        self._nparams = len(self.params)
        self._bind = make_binder(self.params, self._convert, module.backend)
        self._stream_handle = module.backend.stream_handle
        self._specs: dict[tuple[str, ...], Specialization] = {}
        self._variants: dict[tuple, Kernel] = {}
        self._layout = layout(self.params)
        if module.backend.name == "interp":
            from .interp_backend import InterpKernelRunner
            self._interp = InterpKernelRunner(self)
            self._launch = self._launch_interp          # the instance's launch path

    @property
    def name(self) -> str:
        return self.info.name

    def __repr__(self) -> str:
        bound = ", ".join(f"{k}={v!r}" for k, v in self.consts.items())
        return f"<tilelang.Kernel {self.info.show()}" + (f" with {bound}" if bound else "") + ">"

    # -- const values -------------------------------------------------------------------------
    def specialize(self, **consts) -> "Kernel":
        """This kernel with more `const` values bound: `mod.vadd.specialize(TILE=512)`."""
        if not consts:
            return self
        key = tuple(sorted(consts.items(), key=lambda kv: kv[0]))
        try:
            k = self._variants.get(key)
        except TypeError:                    # unhashable value: let the check explain it
            k = None
        if k is None:
            merged = dict(self.consts)
            for name, value in consts.items():
                merged[name] = _check_const(self.info, name, value)
            k = Kernel(self.module, self.info, merged)
            if len(self._variants) < 256:
                self._variants[key] = k
        return k

    def _const_values(self) -> dict[str, Any]:
        out = {}
        for p in self.info.const_params:
            if p.name in self.consts:
                out[p.name] = self.consts[p.name]
            elif p.default is not None:
                out[p.name] = p.default
            else:
                raise arg_error("E0916", f"kernel `{self.name}` needs a value for `const "
                                f"{p.name}: {p.dtype}`, which has no default",
                                f"pass it at the launch (`{self.name}[grid](..., {p.name}=...)`) "
                                f"or with `.specialize({p.name}=...)`", p.span)
        return out

    # -- launching ----------------------------------------------------------------------------
    def __getitem__(self, grid) -> "_GridLaunch":
        return _GridLaunch(self, grid)

    def launch(self, grid, args=(), *, stream=None, block=None):
        """Launch over `grid` (an int, a tuple of up to 3 ints, or a function of the const
        values). Returns the emulator's LaunchReport on the emulator, None on CUDA."""
        return self._launch(grid, _arg_tuple(self, args), stream, block)

    def _launch(self, grid, args: tuple, stream, block):
        """The per-call path: `_bind` (generated per kernel, see `make_binder`) reads each
        array with a reader chosen once per (parameter, Python type) that also checks dtype,
        rank and device, and converts the scalars; then the specialization is looked up by
        the facts, the values packed and the kernel launched. Anything unusual (host arrays
        to stage, an argument that fails a check, a type without a fast reader) takes
        `_launch_slow`, which gives the same result or the diagnostic."""
        if len(args) != self._nparams:
            raise self._count_error(len(args))
        if callable(grid):
            grid = grid(self._meta(args))
        if type(grid) is list:
            grid = tuple(grid)
        got = self._bind(args)
        if got is None:
            return self._launch_slow(grid, args, stream, block)
        values, facts, lib = got
        spec = self._specs.get(facts)
        if spec is None:
            spec = self._build(facts)
        shape = None
        if block is None:
            tg = type(grid)
            if tg is int:
                shape = spec.shapes.get((grid, None))
            elif tg is tuple:
                shape = spec.shapes.get((grid, None))
                if shape is not None:        # (True,) == (1,): only exact ints may hit
                    for x in grid:
                        if type(x) is not int:
                            shape = None
                            break
        if shape is None:                    # other spellings: checked (and remembered if exact)
            shape = spec.shape(grid, block)
        try:
            return spec.launcher.launch(values, shape,
                                        self._stream_handle(stream, lib))
        except (struct.error, OverflowError, TypeError) as e:
            self._diagnose_scalars(args)
            raise e

    def _launch_interp(self, grid, args: tuple, stream, block):
        if len(args) != self._nparams:
            raise self._count_error(len(args))
        if callable(grid):
            grid = grid(self._meta(args))
        return self._interp.launch(grid, args, block, stream)

    def _issue(self, values, facts, grid, block, stream, lib, args, views=None):
        spec = self._specs.get(facts)
        if spec is None:
            spec = self._build(facts)
        if views is not None and spec.written:
            self._check_writes(spec.written, views, args)
        shape = spec.shape(grid, block)
        handle = self.module.backend.stream_handle(stream, lib)
        try:
            return spec.launcher.launch(values, shape, handle)
        except (struct.error, OverflowError, TypeError) as e:
            self._diagnose_scalars(args)
            raise e

    def _check_writes(self, written, views, args) -> None:
        """Refuse arrays the kernel stores into whose stores would be lost (a read-only NumPy
        array is not copied back) or racy (a broadcast view: many elements, one address)."""
        for (i, v) in zip(self._arrays, views):
            if i not in written:
                continue
            p = self.params[i]
            where = f"argument `{p.name}` of kernel `{self.name}` ({p.show()})"
            keep = v.keep
            if isinstance(keep, np.ndarray) and not keep.flags.writeable:
                raise arg_error("E0914", f"{where} is a read-only array, but the kernel writes "
                                "it", "pass a writable array (e.g. `x.copy()`); read-only "
                                "arrays are fine for parameters the kernel only reads", p.span)
            bad = [d for d, (n, st) in enumerate(zip(v.shape, v.strides)) if st == 0 and n > 1]
            if bad:
                raise arg_error("E0914", f"{where} is a broadcast view (stride 0 in dimension "
                                f"{bad[0]}, shape {tuple(v.shape)}), but the kernel writes it: "
                                "its elements share memory", "pass an array with memory of "
                                "its own, e.g. `np.ascontiguousarray(x)` / `x.contiguous()`",
                                p.span)

    def _launch_slow(self, grid, args: tuple, stream, block):
        params = self.params
        backend = self.module.backend
        views = []
        staged = None
        for i in self._arrays:
            a = args[i]
            p = params[i]
            v = extract(a)
            if v is None or v.problem is not None or not accepts(p.dtype, v.dtype) or \
                    len(v.shape) != p.rank or v.strides is None or v.where != backend.name or \
                    (v.what == "DeviceArray" and v.keep.backend is not backend):
                if v is not None and v.where == "host" and backend.host_arrays and \
                        v.problem is None and accepts(p.dtype, v.dtype) and \
                        len(v.shape) == p.rank and v.strides is not None:
                    if staged is None:
                        staged = []
                    staged.append((i, v))
                else:
                    check_array(self.name, p, v, a, backend, backend.host_arrays)
            views.append(v)
        finish = None
        originals = views
        try:
            if staged:
                addrs, finish = backend.stage(staged)
                views = [v._replace(ptr=addrs[i]) if i in addrs else v
                         for i, v in zip(self._arrays, views)]
            values: list = []
            facts: list = []
            it = iter(views)
            convert = self._convert
            for i, p in enumerate(params):
                if p.kind == "array":
                    v = next(it)
                    values.append(v.ptr)
                    values.extend(v.shape)
                    values.extend(v.strides)
                    facts.append(facts_key(v.ptr, v.shape, v.strides, ITEMSIZE[p.dtype]))
                else:
                    c = convert[i]
                    values.append(args[i] if c is None else c(args[i]))
            lib = next((v.what for v in views if v.what != "DeviceArray"), None)
            facts = shape_links(facts, [v.shape for v in views])
            return self._issue(values, tuple(facts), grid, block, stream, lib, args, originals)
        finally:
            if finish is not None:
                finish()

    def _meta(self, args=()) -> dict[str, Any]:
        """What a grid function gets, as in Triton: every argument by parameter name (arrays
        and scalars as passed) and every `const` value."""
        meta = dict(zip((p.name for p in self.params), args))
        meta.update(self._const_values())
        return meta

    def _count_error(self, got: int):
        want = ", ".join(p.name for p in self.params) or "no arguments"
        return arg_error("E0910", f"kernel `{self.name}` takes {len(self.params)} argument"
                         f"{'s' if len(self.params) != 1 else ''} ({want}), got {got}",
                         "const parameters are not passed positionally: give them as keywords "
                         "or with `.specialize(...)`", self.info.span)

    def _diagnose_scalars(self, args) -> None:
        for p, a in zip(self.params, args):
            if p.kind == "scalar":
                why = scalar_problem(p.dtype, a)
                if why:
                    raise scalar_error(self.name, p, why)

    # -- compiling ----------------------------------------------------------------------------
    def compile(self, facts: Mapping[str, ArrayFacts | str] | None = None) -> Specialization:
        """Compile (or load from the caches) the specialization for the given array facts;
        arrays not named get all four (contiguous, 16-byte aligned, last extent a multiple
        of 16 bytes, offsets below 2^31 elements): what a launch with ordinary tensors uses."""
        if self.module.backend.name == "interp":
            raise usage_error("E0925", f"kernel `{self.name}` runs on the interpreter back end, "
                              "which needs no compiled code", "compile PTX on the `emulator` or "
                              "`cuda` back end, or `tilec --emit ptx`")
        if facts is None:
            facts = {}
        if not isinstance(facts, Mapping):
            raise value_error(f"`facts` of kernel `{self.name}` is {type(facts).__name__}; "
                              "it maps array parameter names to facts",
                              "e.g. `kernel.compile(facts={'a': '-ae'})`")
        facts = dict(facts)
        key = []
        for j, i in enumerate(self._arrays):
            name = self.params[i].name
            f = facts.pop(name, "caes")
            if isinstance(f, ArrayFacts):
                f = f.key()
            base, eq, k = f.partition("=") if isinstance(f, str) else (f, "", "")
            if eq and not (k.isdigit() and k.isascii() and int(k) < j and self.params[
                    self._arrays[int(k)]].rank == self.params[i].rank > 0):
                arrays = ", ".join(f"{n} `{self.params[a].name}`"
                                   for n, a in enumerate(self._arrays[:j])) or "none"
                raise value_error(f"facts of `{name}` for kernel `{self.name}`: {f!r} claims "
                                  f"the shape of array parameter {k}, which is not an earlier "
                                  f"array of the same rank", "`=k` names an earlier array "
                                  f"parameter by its number among the arrays (here: {arrays})"
                                  ", whose shape this array's equals", self.params[i].span)
            if base not in FACT_KEYS:
                raise value_error(f"facts of `{name}` for kernel `{self.name}`: {f!r} is not "
                                  "a facts key", "use ArrayFacts(...) or a key of three "
                                  "characters, `c` or `-`, `a` or `-`, `e` or `-` (c: "
                                  "contiguous, a: 16-byte aligned, e: last extent a multiple "
                                  "of 16 bytes, -: not), e.g. `cae`, then `s` for offsets "
                                  "below 2^31 elements, then `n` for an array no tensor map "
                                  "describes (a zero or negative stride), then `=k` when "
                                  "the shape equals that of array parameter k",
                                  self.params[i].span)
            key.append(ArrayFacts.from_key(f).key())
        if facts:
            bad = next(iter(facts))
            arrays = ", ".join(f"`{self.params[i].name}`" for i in self._arrays) or "none"
            raise arg_error("E0910", f"kernel `{self.name}` has no array parameter "
                            f"`{bad}`", f"facts are given per array parameter; its arrays "
                            f"are: {arrays}", self.info.span)
        t = tuple(key)
        return self._specs.get(t) or self._build(t)

    def _build(self, facts: tuple[str, ...]) -> Specialization:
        mod = self.module
        consts = self._const_values()
        arrays = [self.params[i] for i in self._arrays]
        fact_map = {p.name: ArrayFacts.from_key(k) for p, k in zip(arrays, facts)}
        backend = mod.backend
        key = cache_mod.digest({
            "format": cache_mod.FORMAT, "compiler": mod.compiler.compiler_id,
            "sources": [list(s) for s in mod.info.sources], "kernel": self.name,
            "consts": {k: [type(v).__name__, v] for k, v in consts.items()},
            "facts": dict(zip((p.name for p in arrays), facts)),
            "options": mod.options.key(), "binary": backend.cache_tag})
        built = _BUILT.get(key)
        if built is not None:
            cache_mod.STATS["memory_hits"] += 1
        else:
            built = self._load_or_build(key, consts, fact_map)
            _BUILT[key] = built
        self._check_abi(built)
        if built.artifact.tensor_maps:      # TMA: 128-byte maps follow the parameters
            from .tensormap import prepare_with_maps
            launcher = prepare_with_maps(backend, built, self._layout, self.params)
        else:
            launcher = backend.prepare(built, self._layout)
        spec = Specialization(self, facts, built, launcher, key)
        self._specs[facts] = spec
        return spec

    def _load_or_build(self, key: str, consts, fact_map) -> Built:
        mod = self.module
        disk = mod.disk
        link = mod.backend.cache_tag == "cubin"

        def build() -> Built:
            cache_mod.STATS["compiles"] += 1
            return mod.compiler.build(mod.text, mod.path, self.name, consts, fact_map,
                                      mod.options, link)
        if disk is None:
            return build()
        built = disk.load(key)
        if built is not None:
            return built
        info = {"kernel": self.name, "source": mod.path, "consts": consts,
                "facts": {k: v.key() for k, v in fact_map.items()},
                "compiler": str(mod.compiler.compiler_id)}
        try:
            with disk.lock(key):
                built = disk.load(key)         # built by another process while we waited
                if built is None:
                    built = build()
                    disk.store(key, built, info)
        except OSError as e:                   # an unwritable cache must not stop a launch
            warnings.warn(f"tilelang: cannot use the kernel cache in {disk.root} ({e}); "
                          "compiling without it", RuntimeWarning, stacklevel=3)
            if built is None:
                built = build()
        return built

    def _check_abi(self, built: Built) -> None:
        got = [(p.name, p.kind, p.dtype.name, p.rank if p.kind == "array" else 0)
               for p in built.artifact.params]
        want = [(p.name, p.kind, p.dtype, p.rank if p.kind == "array" else 0)
                for p in self.params]
        if got != want:
            raise InternalCompilerError.at(
                "E9999", f"internal compiler error: kernel `{self.name}` was compiled with "
                f"parameters {got}, its signature says {want}", None,
                help="this is a bug in tilec; please report it with the input file")


class _GridLaunch:
    """`kernel[grid]`: call it with the arguments (and const values / stream= / block=)."""

    __slots__ = ("kernel", "grid")

    def __init__(self, kernel: Kernel, grid):
        self.kernel, self.grid = kernel, grid

    def __call__(self, *args, stream=None, block=None, **consts):
        k = self.kernel.specialize(**consts) if consts else self.kernel
        return k._launch(self.grid, args, stream, block)


def launch(stream, grid, kernel: Kernel, args=(), *, block=None):
    """cuTile's shape: `tilelang.launch(stream, grid, kernel, (a, b, c))`."""
    if not isinstance(kernel, Kernel):
        raise usage_error("E0922", f"tilelang.launch needs a kernel of a compiled module, got "
                          f"{type(kernel).__name__}",
                          "e.g. `mod = tilelang.compile(path)` then "
                          "`tilelang.launch(stream, grid, mod.vadd, args)`")
    return kernel._launch(grid, _arg_tuple(kernel, args), stream, block)


def _arg_tuple(kernel: Kernel, args) -> tuple:
    """The arguments of `launch(...)` as a tuple: a tuple or list of them, not one of them."""
    if type(args) is tuple:
        return args
    if isinstance(args, (list, tuple)):
        return tuple(args)
    raise arg_error("E0910", f"the arguments of kernel `{kernel.name}` are a tuple or list, "
                    f"got {type(args).__name__}", "e.g. `launch(stream, grid, kernel, (a, b, c))`"
                    " — a single argument is `(a,)`", kernel.info.span)


# ---------------------------------------------------------------------------------------------

def _exact_dims(d) -> bool:
    """An int or a tuple of ints, exactly (no bools, floats or NumPy scalars)."""
    if type(d) is int:
        return True
    if type(d) is not tuple:
        return False
    for x in d:
        if type(x) is not int:
            return False
    return True


def _scalar_converter(kernel: str, p: ParamInfo) -> Callable | None:
    """None when struct packs the value as given (its checks then reject bad values)."""
    if p.kind != "scalar":
        return None
    conv = SCALAR_CONVERT.get(p.dtype)
    if p.dtype == "bool" or conv is not None:
        def convert(v, p=p, conv=conv):
            why = scalar_problem(p.dtype, v)
            if why:
                raise scalar_error(kernel, p, why)
            return conv(float(v)) if conv is not None else (1 if v else 0)
        return convert
    return None


def scalar_error(kernel: str, p: ParamInfo, why: str):
    return arg_error("E0915", f"argument `{p.name}` of kernel `{kernel}` ({p.show()}): {why}",
                     f"pass a value representable as {p.dtype}", p.span)


def _check_const(info: KernelInfo, name: str, value):
    ps = {p.name: p for p in info.const_params}
    p = ps.get(name)
    if p is None:
        others = ", ".join(f"`{n}`" for n in ps) or "none"
        raise arg_error("E0916", f"kernel `{info.name}` has no const parameter `{name}`",
                        f"its const parameters are: {others}", info.span)
    v = value.item() if hasattr(value, "item") and getattr(value, "shape", None) == () else value
    ok = False
    if p.dtype == "bool":
        ok = isinstance(v, bool)
    elif p.dtype in INT_RANGE:
        lo, hi = INT_RANGE[p.dtype]
        ok = isinstance(v, int) and not isinstance(v, bool) and lo <= v < hi
    else:
        ok = isinstance(v, (int, float)) and not isinstance(v, bool)
        v = float(v) if ok else v
    if not ok:
        raise arg_error("E0916", f"const parameter `{name}` of kernel `{info.name}` is "
                        f"{p.dtype}; {value!r} is not a valid value",
                        f"pass a value representable as {p.dtype}", p.span)
    return v
