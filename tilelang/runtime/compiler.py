"""The runtime's view of the compiler: inspect a module's signature, build one specialization.

`DriverCompiler` calls `tilelang.driver` (inspect_source, compile_kernel, COMPILER_ID); tests
substitute an object with the same three members. The options are the compiler's own record
(tilelang/options.py), frozen and hashable, so they are part of cache keys as they are.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Protocol

from tilelang.codegen.api import ArrayFacts, KernelArtifact
from tilelang.options import CompileOptions

from .errors import usage_error
from .signature import ModuleInfo, module_info_from_sig


@dataclass(frozen=True)
class Built:
    """One compiled specialization: what the runtime loads and launches."""

    artifact: KernelArtifact
    ptx: str
    cubin: bytes | None
    target: str


class Compiler(Protocol):
    compiler_id: str

    def inspect(self, text: str, path: str, options: CompileOptions) -> ModuleInfo: ...

    def build(self, text: str, path: str, kernel: str, consts: Mapping[str, object],
              facts: Mapping[str, ArrayFacts], options: CompileOptions, link: bool) -> Built: ...


class DriverCompiler:
    """The real compiler (`tilelang.driver`), imported on first use."""

    def __init__(self):
        self._driver = None

    def _get(self):
        if self._driver is None:
            import tilelang.driver as driver
            missing = [n for n in ("inspect_source", "compile_kernel", "COMPILER_ID")
                       if not hasattr(driver, n)]
            if missing:
                raise usage_error(
                    "E0924", "this build of tilelang has no compiler entry point "
                    f"`tilelang.driver.{missing[0]}`",
                    "the runtime needs tilelang.driver.inspect_source and compile_kernel; "
                    "update tilelang, or run a prebuilt kernel by hand (docs/abi.md)")
            self._driver = driver
        return self._driver

    @property
    def compiler_id(self) -> str:
        # not through the driver: a module whose kernels are cached needs no front end
        from tilelang.compiler_id import COMPILER_ID
        return str(COMPILER_ID)

    def inspect(self, text: str, path: str, options: CompileOptions) -> ModuleInfo:
        sig = self._get().inspect_source(text, path, options)
        return module_info_from_sig(sig)

    def build(self, text, path, kernel, consts, facts, options, link) -> Built:
        ck = self._get().compile_kernel(text, path, kernel, consts=dict(consts),
                                         facts=dict(facts), options=options, link=link)
        return Built(ck.artifact, ck.ptx, ck.cubin, ck.target)
