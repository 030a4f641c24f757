"""`tilelang.compile`, modules and kernels (docs/python-api.md).

    mod = tilelang.compile("examples/vadd.tile", backend="emulator")
    mod.vadd[(n + 1023) // 1024](a, b, c)                 # Triton's shape
    tilelang.launch(None, (g,), mod.vadd.specialize(TILE=512), (a, b, c))   # cuTile's shape

A `Kernel` is one kernel with its `const` values bound. Its two halves live beside this
module: specialising (runtime/specialize.py: facts of the arrays -> a built, cached, loaded
`Specialization`) and launching (runtime/launching.py: arguments -> packed values -> the back
end's launch call, docs/launch-path.md).
"""

from __future__ import annotations

import os
import warnings
from typing import Any, Mapping

from tilelang.codegen.api import ArrayFacts

from . import cache as cache_mod
from .backends import BACKENDS, get_backend, interpret_everything  # noqa: F401 (re-exported)
from .compile_args import (_check_arch, _check_defines, _check_include_dirs, _check_lineinfo,
                           _check_opt_level, _check_precision, _read_input)
from .compiler import CompileOptions, Compiler, DriverCompiler
from .dtypes import INT_RANGE
from .errors import KernelNotFound, _diag, arg_error, usage_error, value_error
from .facts import FACT_KEYS  # noqa: F401 (re-exported)
from .launching import Launcher, count_error, scalar_error  # noqa: F401 (re-exported)
from .packing import layout
from .signature import KernelInfo, ModuleInfo
from .specialize import Specialization, Specializer, clear_memory_cache  # noqa: F401

_DEFAULT_COMPILER: Compiler | None = None


def _default_compiler() -> Compiler:
    global _DEFAULT_COMPILER
    if _DEFAULT_COMPILER is None:
        _DEFAULT_COMPILER = DriverCompiler()
    return _DEFAULT_COMPILER


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
        self._variants: dict[tuple, Kernel] = {}

    def _bound(self, info: KernelInfo, consts: dict) -> "Kernel":
        """The kernel with these checked const values: one object per distinct set of values
        (`TILE=64` and `TILE=np.int64(64)` share their specializations)."""
        key = (info.name, tuple(sorted((n, type(v).__name__, v) for n, v in consts.items())))
        k = self._variants.get(key)
        if k is None:
            k = Kernel(self, info, consts)
            if len(self._variants) < 4096:
                self._variants[key] = k
        return k

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


class Kernel:
    """A kernel of a module with its `const` parameters bound (defaults where not given)."""

    def __init__(self, module: Module, info: KernelInfo, consts: Mapping[str, Any]):
        self.module = module
        self.consts = dict(consts)
        # A generic kernel (docs/python-api.md, "Generic kernels") binds its type variables
        # per launch, from the arrays' dtypes; bound, it is an ordinary kernel whose
        # parameters have those dtypes and whose const values name them.
        self.open_types = tuple(p for p in info.type_vars if p.name not in self.consts)
        if info.type_vars and not self.open_types:
            info = info.with_types({p.name: self.consts[p.name] for p in info.type_vars})
        self.info = info
        self.params = info.runtime_params
        self._variants: dict[tuple, Kernel] = {}
        if any(p.kind == "symmetric" for p in self.params):
            self.open_types = ()
            if module.backend.name == "interp":
                self._launch = self._launch_symmetric    # docs/distributed.md
                return
        if self.open_types:
            open_names = {p.name for p in self.open_types}
            self._typed = tuple(i for i, p in enumerate(self.params)
                                if p.kind == "array" and p.type_var in open_names)
            self._by_dtypes: dict[tuple, Kernel] = {}
            self._launch = self._launch_generic
            return
        self._layout = layout(self.params)
        self._specializer = Specializer(module, info, self.params, self.consts, self._layout)
        self._specs = self._specializer.specs
        if module.backend.name == "interp":
            from .interp_backend import InterpKernelRunner
            self._interp = InterpKernelRunner(module, info, self.params,
                                              self._specializer.const_values)
            self._launch = self._launch_interp          # the instance's launch path
        else:
            self._launcher = Launcher(info, self.params, module.backend, self._specializer,
                                      self._meta)
            self._launch = self._launcher.launch

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
        # keyed by each value's type as well: True == 1 == 1.0 == np.int8(1) as dict keys,
        # and each spelling must get the verdict it gets on a fresh module
        key = tuple(sorted((n, v.__class__, v) for n, v in consts.items()))
        try:
            k = self._variants.get(key)
        except TypeError:                    # unhashable value: let the check explain it
            k = None
        if k is None:
            merged = dict(self.consts)
            for name, value in consts.items():
                merged[name] = _check_const(self.info, name, value)
            k = self.module._bound(self.info, merged)
            if len(self._variants) < 256:
                self._variants[key] = k
        return k

    def _const_values(self) -> dict[str, Any]:
        if self.open_types:
            return self._defaulted()._const_values()
        return self._specializer.const_values()

    def _defaulted(self) -> "Kernel":
        """A generic kernel with its type variables at their defaults (for `compile()` and
        grid functions when no array fixes them)."""
        types = {}
        for p in self.open_types:
            if p.default is None:
                raise arg_error("E0916", f"kernel `{self.name}` needs a dtype for `const "
                                f"{p.name}: dtype`, which has no default", "launch it with "
                                f"arrays (their dtypes fix `{p.name}`), bind it with "
                                f"`.specialize({p.name}='f16')`, or pass `-D {p.name}=f16`",
                                p.span)
            types[p.name] = p.default
        return self.specialize(**types)

    def _launch_generic(self, grid, args: tuple, stream, block):
        """Fix the type variables from the arrays passed, then launch that specialization."""
        if len(args) != len(self.params):
            raise count_error(self.info, self.params, len(args))
        # the bound kernel by the arrays' (type, dtype): one dict lookup per launch once seen;
        # the bound kernel checks the arrays as any launch does
        try:
            key = tuple((type(args[i]), args[i].dtype) for i in self._typed)
            k = self._by_dtypes.get(key)
        except (AttributeError, TypeError):  # no `dtype`, or an unhashable one
            key = k = None
        if k is None:
            k = self.specialize(**infer_types(self, args))
            if key is not None and len(self._by_dtypes) < 256:
                self._by_dtypes[key] = k
        return k._launch(grid, args, stream, block)

    # -- launching ----------------------------------------------------------------------------
    def __getitem__(self, grid) -> "_GridLaunch":
        return _GridLaunch(self, grid)

    def launch(self, grid, args=(), *, stream=None, block=None):
        """Launch over `grid` (an int, a tuple of up to 3 ints, or a function of the const
        values). Returns the emulator's LaunchReport on the emulator, None on CUDA."""
        return self._launch(grid, _arg_tuple(self, args), stream, block)

    def _launch_symmetric(self, grid, args: tuple, stream, block):
        p = next(p for p in self.params if p.kind == "symmetric")
        raise usage_error("E0919", f"kernel `{self.name}` takes the symmetric array `{p.name}`, "
                          "which needs a world of devices", "launch it with "
                          "tilelang.distributed.world(n).launch_all(...) (docs/distributed.md)",
                          p.span)

    def _launch_interp(self, grid, args: tuple, stream, block):
        if len(args) != len(self.params):
            raise count_error(self.info, self.params, len(args))
        if callable(grid):
            grid = grid(self._meta(args))
        return self._interp.launch(grid, args, block, stream)

    def _count_error(self, got: int):
        """E0910 for `got` arguments (the tuner checks its launch key with it)."""
        return count_error(self.info, self.params, got)

    def _meta(self, args=()) -> dict[str, Any]:
        """What a grid function gets, as in Triton: every argument by parameter name (arrays
        and scalars as passed) and every `const` value."""
        meta = dict(zip((p.name for p in self.params), args))
        meta.update(self._const_values())
        return meta

    # -- compiling ----------------------------------------------------------------------------
    def compile(self, facts: Mapping[str, ArrayFacts | str] | None = None) -> Specialization:
        """Compile (or load from the caches) the specialization for the given array facts;
        arrays not named get all four (contiguous, 16-byte aligned, last extent a multiple
        of 16 bytes, offsets below 2^31 elements): what a launch with ordinary tensors uses."""
        if self.open_types:
            return self._defaulted().compile(facts)
        if self.module.backend.name == "interp":
            raise usage_error("E0925", f"kernel `{self.name}` runs on the interpreter back end, "
                              "which needs no compiled code", "compile PTX on the `emulator` or "
                              "`cuda` back end, or `tilec --emit ptx`")
        return self._specializer.get(self._specializer.facts_from(facts))


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


def infer_types(kernel: Kernel, args: tuple) -> dict[str, str]:
    """The dtype of each open type variable of a generic kernel, from the arrays passed for
    the parameters that name it; every such array must agree (E0911 names two that do
    not). A variable no array names takes its default (E0916 without one)."""
    from .args import extract
    got: dict[str, tuple] = {}
    for p, a in zip(kernel.params, args):
        if p.type_var is None or p.kind != "array" or p.type_var in kernel.consts:
            continue
        v = extract(a)
        if v is None or v.dtype is None:
            continue                 # not an array: the specialization's checks explain it
        first = got.get(p.type_var)
        if first is None:
            got[p.type_var] = (p, v.dtype)
        elif first[1] != v.dtype:
            q = first[0]
            raise arg_error("E0911", f"arguments `{q.name}` and `{p.name}` of kernel "
                            f"`{kernel.name}` are both `Array[{p.type_var}, ...]`, but "
                            f"`{q.name}` is {first[1]} and `{p.name}` is {v.dtype}",
                            f"`{p.type_var}` is one dtype per launch: convert one of them "
                            f"(e.g. `x.to(...)` / `x.astype(...)`)", p.span)
    out = {n: d for n, (_, d) in got.items()}
    for p in kernel.open_types:
        if p.name not in out:
            if p.default is None:
                raise arg_error("E0916", f"kernel `{kernel.name}` cannot tell `{p.name}` from "
                                "its arguments (no array of its type was passed) and "
                                f"`const {p.name}: dtype` has no default",
                                f"bind it: `.specialize({p.name}='f16')`", p.span)
            out[p.name] = p.default
    return out


def _check_const(info: KernelInfo, name: str, value):
    ps = {p.name: p for p in info.const_params}
    p = ps.get(name)
    if p is None:
        others = ", ".join(f"`{n}`" for n in ps) or "none"
        raise arg_error("E0916", f"kernel `{info.name}` has no const parameter `{name}`",
                        f"its const parameters are: {others}", info.span)
    if p.is_type_var:
        return _check_dtype_const(info, p, value)
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


def _check_dtype_const(info: KernelInfo, p, value) -> str:
    """A value for `const T: dtype`: a Tile dtype name (`"bf16"`), or a NumPy or torch
    dtype that has one."""
    from .dtypes import ITEMSIZE, NUMPY_TO_TILE, TORCH_TO_TILE
    name = value if isinstance(value, str) and value in ITEMSIZE else None
    if name is None and not isinstance(value, str):
        name = TORCH_TO_TILE.get(str(value))
        if name is None:
            try:
                import numpy as np
                name = NUMPY_TO_TILE.get(np.dtype(value).name)
            except TypeError:
                name = None
    if name is None:
        raise arg_error("E0916", f"const parameter `{p.name}` of kernel `{info.name}` is a "
                        f"dtype; {value!r} is not one",
                        "pass a Tile dtype name such as 'f16' or 'bf16', or a NumPy or torch "
                        "dtype", p.span)
    return name
