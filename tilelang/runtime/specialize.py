"""Specialising: a kernel's `const` values and the facts of its arrays → a built, cached and
loaded `Specialization` (docs/python-api.md, "`const` values and specialization";
docs/abi.md for the facts).

Nothing here runs per launch once a specialization exists: the launch path
(runtime/launching.py) looks a specialization up by its facts key and only calls `get` on a
miss. Builds are shared three ways: by the bound kernel (its `specs`), by the process (every
module's builds by disk key, `_BUILT`) and by the disk cache (runtime/cache.py).
"""

from __future__ import annotations

import warnings
from typing import Any, Mapping

from tilelang.codegen.api import ArrayFacts
from tilelang.diagnostics import InternalCompilerError

from . import cache as cache_mod
from .compiler import Built
from .errors import arg_error, value_error
from .facts import ABSENT, FACT_KEYS
from .signature import KernelInfo, ParamInfo
from .validate import LaunchShape, check_launch, dims

_BUILT: dict[str, Built] = {}          # disk key -> build, for every module of the process


def clear_memory_cache() -> None:
    """Forget the builds of this process (the disk cache stays): the next launch of each
    specialization loads it from disk or compiles it again."""
    _BUILT.clear()


def exact_dims(d) -> bool:
    """An int or a tuple of ints, exactly (no bools, floats or NumPy scalars)."""
    if type(d) is int:
        return True
    if type(d) is not tuple:
        return False
    for x in d:
        if type(x) is not int:
            return False
    return True


class Specialization:
    """One compiled and loaded specialization of a kernel: its build, and the back end's
    launcher for each device it has run on (the module's own device first)."""

    __slots__ = ("specializer", "facts", "built", "launcher", "shapes", "key", "written",
                 "launchers")

    def __init__(self, specializer: "Specializer", facts: tuple[str, ...], built: Built,
                 launcher, key: str):
        self.specializer, self.facts, self.built, self.launcher, self.key = (
            specializer, facts, built, launcher, key)
        self.launchers: dict[int, Any] = {}     # device ordinal -> launcher (other devices)
        self.shapes: dict = {}        # (grid, block) as given -> checked LaunchShape
        # indices (into the runtime parameters) of the arrays the kernel may store into
        self.written = frozenset(i for i, p in enumerate(built.artifact.params)
                                 if p.kind in ("array", "list") and getattr(p, "written", True))

    @property
    def ptx(self) -> str:
        return self.built.ptx

    @property
    def cubin(self) -> bytes | None:
        return self.built.cubin

    @property
    def artifact(self):
        return self.built.artifact

    def shape(self, grid, block, limits=None) -> LaunchShape:
        """The checked launch shape, remembered per (grid, block) as the caller spelled them
        (for the module's own device; another device's `limits` are checked each time)."""
        # only exact ints are remembered: True == 1 and 1.0 == 1 as dict keys, and those
        # spellings must be refused, not served the shape of grid 1
        name = self.specializer.info.name
        if limits is not None and limits is not self.specializer.backend.limits:
            return check_launch(name, self.built.artifact, limits, dims(grid, "grid", name),
                                None if block is None else dims(block, "block", name))
        key = (grid, block) if exact_dims(grid) and (block is None or exact_dims(block)) \
            else None
        s = self.shapes.get(key) if key is not None else None
        if s is None:
            s = check_launch(name, self.built.artifact, self.specializer.backend.limits,
                             dims(grid, "grid", name),
                             None if block is None else dims(block, "block", name))
            if key is not None:
                if len(self.shapes) > 1024:
                    self.shapes.clear()
                self.shapes[key] = s
        return s

    def launcher_on(self, backend):
        """The launcher of this specialization on `backend` (another device of the module's
        back end): loaded there at its first launch on that device."""
        if backend is self.specializer.backend:
            return self.launcher
        dev = backend.device_id
        got = self.launchers.get(dev)
        if got is None:
            home = self.specializer.backend
            if backend.capability != home.capability:
                raise arg_error(
                    "E0913", f"kernel `{self.specializer.info.name}` was compiled for "
                    f"{self.built.target} ({home.limits.name}), but its arrays are on "
                    f"{backend.limits.name}, of compute capability "
                    f"{backend.capability[0]}.{backend.capability[1]}",
                    f"compile the module for that device: "
                    f"`tilelang.compile(..., backend='cuda:{dev}')`")
            got = self.launchers[dev] = self.specializer.prepare(self.built, backend)
        return got


class Specializer:
    """The specializations of one bound kernel (a kernel with its const values), by facts."""

    def __init__(self, module, info: KernelInfo, params: tuple[ParamInfo, ...],
                 consts: dict[str, Any], layout):
        self.module, self.info, self.params, self.consts = module, info, params, consts
        self.backend = module.backend
        self.layout = layout
        self.arrays = tuple(i for i, p in enumerate(params) if p.kind == "array")
        # lists of arrays and symmetric arrays (a table each): their facts follow the
        # arrays' in a facts key tuple
        self.lists = tuple(i for i, p in enumerate(params) if p.kind in ("list", "symmetric"))
        self.specs: dict[tuple[str, ...], Specialization] = {}

    def get(self, facts: tuple[str, ...]) -> Specialization:
        spec = self.specs.get(facts)
        return spec if spec is not None else self.build(facts)

    def const_values(self) -> dict[str, Any]:
        out = {}
        for p in self.info.const_params:
            if p.name in self.consts:
                out[p.name] = self.consts[p.name]
            elif p.default is not None:
                out[p.name] = p.default
            else:
                name = self.info.name
                raise arg_error("E0916", f"kernel `{name}` needs a value for `const "
                                f"{p.name}: {p.dtype}`, which has no default",
                                f"pass it at the launch (`{name}[grid](..., {p.name}=...)`) "
                                f"or with `.specialize({p.name}=...)`", p.span)
        return out

    # -- facts given by the user (Kernel.compile) ---------------------------------------------
    def facts_from(self, facts: Mapping[str, ArrayFacts | str] | None) -> tuple[str, ...]:
        """The facts key tuple of `Kernel.compile(facts=...)`: arrays not named get `caes`."""
        name = self.info.name
        if facts is None:
            facts = {}
        if not isinstance(facts, Mapping):
            raise value_error(f"`facts` of kernel `{name}` is {type(facts).__name__}; "
                              "it maps array parameter names to facts",
                              "e.g. `kernel.compile(facts={'a': '-ae'})`")
        facts = dict(facts)
        key = []
        for j, i in enumerate(self.arrays):
            p = self.params[i]
            f = facts.pop(p.name, "caes")
            if f is None and p.optional:      # the specialization where it is None
                key.append(ABSENT)
                continue
            if isinstance(f, ArrayFacts):
                f = f.key()
            base, eq, k = f.partition("=") if isinstance(f, str) else (f, "", "")
            if eq and not (k.isdigit() and k.isascii() and int(k) < j and self.params[
                    self.arrays[int(k)]].rank == p.rank > 0):
                arrays = ", ".join(f"{n} `{self.params[a].name}`"
                                   for n, a in enumerate(self.arrays[:j])) or "none"
                raise value_error(f"facts of `{p.name}` for kernel `{name}`: {f!r} claims "
                                  f"the shape of array parameter {k}, which is not an earlier "
                                  f"array of the same rank", "`=k` names an earlier array "
                                  f"parameter by its number among the arrays (here: {arrays})"
                                  ", whose shape this array's equals", p.span)
            if base not in FACT_KEYS:
                raise value_error(f"facts of `{p.name}` for kernel `{name}`: {f!r} is not "
                                  "a facts key", "use ArrayFacts(...) or a key of three "
                                  "characters, `c` or `-`, `a` or `-`, `e` or `-` (c: "
                                  "contiguous, a: 16-byte aligned, e: last extent a multiple "
                                  "of 16 bytes, -: not), e.g. `cae`, then `s` for offsets "
                                  "below 2^31 elements, then `n` for an array no tensor map "
                                  "describes (a zero or negative stride), then `=k` when "
                                  "the shape equals that of array parameter k", p.span)
            key.append(ArrayFacts.from_key(f).key())
        for i in self.lists:
            p = self.params[i]
            f = facts.pop(p.name, "caes")
            f = f.key() if isinstance(f, ArrayFacts) else f
            if not isinstance(f, str) or f not in FACT_KEYS:
                raise value_error(f"facts of `{p.name}` for kernel `{name}`: {f!r} is not a "
                                  "facts key of a list (no `=k`)", "use ArrayFacts(...) or a "
                                  "key such as `caes`, which every array of the list must "
                                  "satisfy", p.span)
            key.append(ArrayFacts.from_key(f).key())
        if facts:
            bad = next(iter(facts))
            arrays = ", ".join(f"`{self.params[i].name}`" for i in self.arrays) or "none"
            raise arg_error("E0910", f"kernel `{name}` has no array parameter `{bad}`",
                            f"facts are given per array parameter; its arrays are: {arrays}",
                            self.info.span)
        return tuple(key)

    # -- building -----------------------------------------------------------------------------
    def build(self, facts: tuple[str, ...]) -> Specialization:
        mod = self.module
        consts = self.const_values()
        arrays = [self.params[i] for i in self.arrays + self.lists]
        fact_map = {p.name: ArrayFacts.from_key(k) for p, k in zip(arrays, facts)
                    if k != ABSENT}
        # an optional array given None is compiled as `-D NAME=None` (docs/abi.md, "Optional
        # arrays"): part of the key through `facts` and the compiler's defines
        consts = {**consts, **{p.name: None for p, k in zip(arrays, facts) if k == ABSENT}}
        key = cache_mod.digest({
            "format": cache_mod.FORMAT, "compiler": mod.compiler.compiler_id,
            "sources": [list(s) for s in mod.info.sources], "kernel": self.info.name,
            "consts": {k: [type(v).__name__, v] for k, v in consts.items()},  # None: absent
            "facts": dict(zip((p.name for p in arrays), facts)),
            "options": mod.options.key(), "binary": self.backend.cache_tag})
        built = _BUILT.get(key)
        if built is not None:
            cache_mod.STATS["memory_hits"] += 1
        else:
            built = self._load_or_build(key, consts, fact_map)
            _BUILT[key] = built
        self._check_abi(built)
        spec = Specialization(self, facts, built, self.prepare(built, self.backend), key)
        self.specs[facts] = spec
        return spec

    def prepare(self, built: Built, backend):
        """The back end's launcher for a build (loading its code there)."""
        if built.artifact.tensor_maps:      # TMA: 128-byte maps follow the parameters
            from .tensormap import prepare_with_maps
            return prepare_with_maps(backend, built, self.layout, self.params)
        return backend.prepare(built, self.layout)

    def _load_or_build(self, key: str, consts, fact_map) -> Built:
        mod = self.module
        disk = mod.disk
        link = self.backend.cache_tag == "cubin"
        name = self.info.name

        def build() -> Built:
            cache_mod.STATS["compiles"] += 1
            return mod.compiler.build(mod.text, mod.path, name, consts, fact_map,
                                      mod.options, link)
        if disk is None:
            return build()
        built = disk.load(key)
        if built is not None:
            return built
        info = {"kernel": name, "source": mod.path, "consts": consts,
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
                          "compiling without it", RuntimeWarning, stacklevel=4)
            if built is None:
                built = build()
        return built

    def _check_abi(self, built: Built) -> None:
        got = [(p.name, p.kind, p.dtype.name, p.rank if p.kind != "scalar" else 0)
               for p in built.artifact.params]
        want = [(p.name, p.kind, p.dtype, p.rank if p.kind != "scalar" else 0)
                for p in self.params]
        if got != want:
            raise InternalCompilerError.at(
                "E9999", f"internal compiler error: kernel `{self.info.name}` was compiled "
                f"with parameters {got}, its signature says {want}", None,
                help="this is a bug in tilec; please report it with the input file")
