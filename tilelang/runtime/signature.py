"""What the runtime knows about a module's kernels: plain frozen data, built from the driver's
`ModuleSig` and stored as JSON in the disk cache, so that a cached module launches without
running the front end again."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

from tilelang.diagnostics import Span

from .dtypes import ITEMSIZE


@dataclass(frozen=True)
class ParamInfo:
    name: str
    kind: str                  # "array" | "scalar" | "const" | "list" | "symmetric"
    dtype: str                 # Tile dtype name
    rank: int = 0
    default: Any = None        # const parameters: the default value, or None
    span: Span | None = None
    type_var: str | None = None   # `Array[T, 2]`/`x: T`: the `const T: dtype` it names
    optional: bool = False     # `Optional[Array[...]]`: a launch may pass None

    @property
    def itemsize(self) -> int:
        return ITEMSIZE[self.dtype]

    @property
    def is_type_var(self) -> bool:
        """A `const T: dtype` parameter (docs/language.md, "Generic kernels")."""
        return self.kind == "const" and self.dtype == "dtype"

    def show(self) -> str:
        if self.kind == "list":
            return f"{self.name}: List[Array[{self.dtype}, {self.rank}]]"
        if self.kind == "symmetric":
            return f"{self.name}: Symmetric[Array[{self.dtype}, {self.rank}]]"
        if self.kind == "array":
            t = f"Array[{self.dtype}, {self.rank}]"
            return f"{self.name}: " + (f"Optional[{t}]" if self.optional else t)
        return ("const " if self.kind == "const" else "") + f"{self.name}: {self.dtype}"


@dataclass(frozen=True)
class KernelInfo:
    name: str
    params: tuple[ParamInfo, ...]
    span: Span | None = None

    @property
    def runtime_params(self) -> tuple[ParamInfo, ...]:
        """The parameters a launch passes (const parameters are compiled in)."""
        return tuple(p for p in self.params if p.kind != "const")

    @property
    def const_params(self) -> tuple[ParamInfo, ...]:
        return tuple(p for p in self.params if p.kind == "const")

    @property
    def type_vars(self) -> tuple[ParamInfo, ...]:
        """The `const T: dtype` parameters: a launch fixes them from its arrays."""
        return tuple(p for p in self.params if p.is_type_var)

    def with_types(self, types: dict[str, str]) -> "KernelInfo":
        """This signature with type variables replaced by dtype names (`{"T": "bf16"}`):
        what one specialization of a generic kernel takes."""
        params = tuple(replace(p, dtype=types[p.type_var])
                       if p.type_var in types else p for p in self.params)
        return KernelInfo(self.name, params, self.span)

    def show(self) -> str:
        return f"kernel {self.name}(" + ", ".join(p.show() for p in self.params) + ")"


@dataclass(frozen=True)
class ModuleInfo:
    kernels: dict[str, KernelInfo]
    sources: tuple[tuple[str, str], ...]     # (path, sha256) of the module and its imports

    def to_json(self) -> str:
        return json.dumps({
            "kernels": [{"name": k.name, "span": _span_json(k.span),
                         "params": [{"name": p.name, "kind": p.kind, "dtype": p.dtype,
                                     "rank": p.rank, "default": _plain(p.default),
                                     "span": _span_json(p.span), "type_var": p.type_var,
                                     "optional": p.optional}
                                    for p in k.params]}
                        for k in self.kernels.values()],
            "sources": [list(s) for s in self.sources]}, sort_keys=True)

    @staticmethod
    def from_json(text: str) -> "ModuleInfo":
        d = json.loads(text)
        kernels = {}
        for k in d["kernels"]:
            params = tuple(ParamInfo(p["name"], p["kind"], p["dtype"], int(p["rank"]),
                                     p["default"], _span_from(p["span"]), p.get("type_var"),
                                     bool(p.get("optional", False))) for p in k["params"])
            kernels[k["name"]] = KernelInfo(k["name"], params, _span_from(k["span"]))
        return ModuleInfo(kernels, tuple((s[0], s[1]) for s in d["sources"]))


def _plain(v):
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    for attr in ("value", "v"):
        inner = getattr(v, attr, None)
        if isinstance(inner, (bool, int, float)):
            return inner
    return str(v)


def _span_json(s: Span | None):
    return None if s is None else [s.file, s.line, s.col, s.end_line, s.end_col]


def _span_from(d) -> Span | None:
    return None if d is None else Span(d[0], int(d[1]), int(d[2]), int(d[3]), int(d[4]))


def module_info_from_sig(sig) -> ModuleInfo:
    """Convert the driver's `ModuleSig` (kernels: name -> KernelSig(name, params, launch))."""
    kernels = {}
    for name, ks in sig.kernels.items():
        params = []
        for p in ks.params:
            dtype = getattr(p.dtype, "name", p.dtype)
            params.append(ParamInfo(p.name, p.kind, str(dtype), int(getattr(p, "rank", 0) or 0),
                                    _plain(getattr(p, "default", None)),
                                    getattr(p, "span", None), getattr(p, "type_var", None),
                                    bool(getattr(p, "optional", False))))
        kernels[name] = KernelInfo(name, tuple(params), getattr(ks, "span", None))
    return ModuleInfo(kernels, tuple((str(a), str(b)) for a, b in sig.sources))
