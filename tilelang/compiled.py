"""What compiling a module produces: the signature of its kernels (`inspect_source`), one
compiled kernel (`compile_kernel`) and every stage's product (`compile_source`).

Apart from tilelang/driver.py (which re-exports them) so that `tilec check`, which needs none
of them, does not load them; records (tilelang/record.py), not dataclasses (about 1 ms of CPU
each to create).
"""

from __future__ import annotations

from typing import Any, Mapping

from .diagnostics import Diagnostic, Severity
from .record import field, record


@record(frozen=True)
class ParamSig:
    name: str
    kind: str                 # "array" | "scalar" | "const"
    dtype: Any                # sema.types.DType
    rank: int = 0
    default: Any = None       # a const parameter's value (default or -D), else None
    span: Any = field(default=None, compare=False)   # the parameter in the source
    type_var: str | None = None   # `Array[T, 2]`, `x: T`: the `const T: dtype` it names
    optional: bool = False    # an `Optional[Array[...]]`: may be given None


@record(frozen=True)
class KernelSig:
    name: str
    params: tuple[ParamSig, ...]
    launch: Any = None        # sema.launch_attrs.LaunchSpec
    span: Any = field(default=None, compare=False)   # the kernel's name in the source


@record(frozen=True)
class ModuleSig:
    path: str
    kernels: Mapping[str, KernelSig]
    sources: tuple[tuple[str, str], ...]   # (path, sha256) of the module and its imports


@record(frozen=True)
class CompiledKernel:
    artifact: Any             # codegen.api.KernelArtifact
    ptx: str
    cubin: bytes | None
    target: str
    diagnostics: tuple[Diagnostic, ...] = ()
    timings: Mapping[str, float] = field(default_factory=dict)
    tir: str = ""
    llvm_ir: str = ""


@record
class CompileResult:
    """`compile_source`: every stage's product, for `tilec --emit` and the benchmarks."""

    path: str
    diagnostics: list[Diagnostic]
    tir: str = ""
    plan: str = ""            # the kernels' code-generation plans (codegen/plan/dump.py)
    llvm_ir: str = ""
    ptx: str = ""
    cubin: bytes | None = None
    codegen: Any = None       # codegen.api.CodegenResult
    ir: Any = None            # the optimized IRModule
    link: Any = None          # codegen.target.link.LinkResult (registers, spills per kernel)
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not any(d.severity is Severity.ERROR for d in self.diagnostics)
