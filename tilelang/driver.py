"""The compiler driver: runs the ordered stages on one file and collects diagnostics.

Shared by `tilec`, the language server and the Python API, so that all three report exactly
the same diagnostics for the same input.
"""

from __future__ import annotations

import gc
import os
import time
from typing import Any, Mapping

from .diagnostics import (Diagnostic, InternalCompilerError, Severity, TileError,
                          TileUsageError, register_codes, remember_source)
from .frontend import ast
from .frontend.parser import floor_division_comments, parse
from .frontend.source import read_source
from .infile import read_regular
from .options import CompileOptions
from .record import record, replace
from .sema import checker


register_codes({"E9999": "internal compiler error",
                "E0270": "the module has no kernel of that name",
                "E0271": "an include folder (`-I`, `include_dirs=`) does not exist",
                "E0272": "a define (`-D`, `defines=`) names no `const` parameter of the module"})

# Mistakes in the options rather than in the source: `tilec` exits 2 when these are all.
USAGE_CODES = frozenset({"E0271", "E0272"})


@record
class CheckResult:
    path: str
    module: ast.Module | None
    diagnostics: list[Diagnostic]
    typed: object | None = None  # the checked program, once semantic analysis ran

    @property
    def ok(self) -> bool:
        return not any(d.severity is Severity.ERROR for d in self.diagnostics)


def include_diagnostics(options: CompileOptions) -> list[Diagnostic]:
    """E0271 for each include folder that is not a folder."""
    out = []
    for d in options.include_dirs:
        if not os.path.isdir(d):
            why = "does not exist" if not os.path.exists(d) else "is not a folder"
            out.append(Diagnostic(Severity.ERROR, "E0271", f"include folder `{d}` {why}",
                                  help="-I (include_dirs=) names folders to search for "
                                       "imported modules"))
    return out


def define_diagnostics(module: ast.Module | None, options: CompileOptions) -> list[Diagnostic]:
    """E0272 for each define that no kernel of `module` takes as a `const` parameter (a define
    nobody reads is a typo that would otherwise change nothing, silently)."""
    if module is None or not options.defines:
        return []
    consts: dict[str, list[str]] = {}
    for item in module.items:
        if isinstance(item, ast.KernelDef):
            for p in item.params:
                if p.is_const or _is_optional(p):
                    consts.setdefault(p.name, []).append(item.name)
    out = []
    for name, _ in options.defines:
        if name in consts:
            continue
        import difflib
        near = [c for c in consts if c.lower() == str(name).lower()] or \
            difflib.get_close_matches(str(name), list(consts), n=1)
        hint = f"did you mean `{near[0]}`? " if near else ""
        known = ", ".join(f"`{n}`" for n in sorted(consts))
        out.append(Diagnostic(
            Severity.ERROR, "E0272",
            f"-D {name}: no kernel of `{module.file}` has a `const` parameter `{name}`",
            help=hint + (f"its `const` parameters are {known}" if known else
                         "its kernels have no `const` parameters")))
    return out


def _is_optional(p: ast.Param) -> bool:
    """An `Optional[Array[...]]` parameter: `-D NAME=None` picks its absent specialization."""
    return isinstance(p.type, ast.TypeExpr) and p.type.name == "Optional"


def _define_spans(diags: list[Diagnostic], module: ast.Module,
                  options: CompileOptions) -> list[Diagnostic]:
    """A -D value is parsed as `const __expr__ = VALUE;` in a file `<-D NAME>`: show a mistake
    in it as one in the -D value, at the parameter it gives a value to."""
    spans = {}
    for item in module.items:
        if isinstance(item, ast.KernelDef):
            for p in item.params:
                spans.setdefault(p.name, p.span)
    out = []
    for d in diags:
        f = d.span.file if d.span is not None else ""
        if isinstance(f, str) and f.startswith("<-D ") and f.endswith(">"):
            name = f[4:-1]
            value = options.define_map().get(name, "")
            d = replace(d, message=f"-D {name}={value}: {d.message}", span=spans.get(name),
                        label=f"the value of `{name}` comes from the command line",
                        related=tuple(r for r in d.related if r.span.file != f))
        out.append(d)
    return out


def check_source(text: str, path: str, options: CompileOptions | None = None) -> CheckResult:
    """Parse and check `text` as the contents of `path`; never raises for user mistakes."""
    options = options or CompileOptions()
    remember_source(path, text)
    diags: list[Diagnostic] = include_diagnostics(options)
    if not text.strip():
        diags.append(Diagnostic(Severity.WARNING, "W0001", f"`{path}` is empty: nothing to check"))
        return CheckResult(path, ast.Module((), path), diags)
    try:
        module = parse(text, path)
    except TileError as e:
        return CheckResult(path, None, diags + e.diagnostics)
    except RecursionError:
        return CheckResult(path, None, diags + [_too_deep(path)])
    diags += floor_division_comments(text, path)
    typed = None
    try:
        typed, sema_diags = checker.check_module(module, options)
        diags += sema_diags
    except TileError as e:
        diags += e.diagnostics
    except RecursionError:
        diags.append(_too_deep(path))
    if typed is not None:
        diags += absent_pattern_diagnostics(module, options)
    diags = _define_spans(diags, module, options) + define_diagnostics(module, options)
    return CheckResult(path, module, diags, typed)


MAX_EXHAUSTIVE_OPTIONAL = 3


def absent_pattern_diagnostics(module: ast.Module, options: CompileOptions) -> list[Diagnostic]:
    """E0246 of the specializations where optional arrays are None (docs/language.md
    §10.1.1). A check compiles each optional array as present unless `-D NAME=None` says
    otherwise, so a use outside an `is_none` guard would surface only when a launch passes
    None: the checker also checks the other presence patterns — all of them for up to
    `MAX_EXHAUSTIVE_OPTIONAL` optional arrays, else each one alone and all together — and
    reports their E0246s once each, with the pattern."""
    names = sorted({p.name for item in module.items if isinstance(item, ast.KernelDef)
                    for p in item.params if _is_optional(p)} - set(options.define_map()))
    if not names:
        return []
    if len(names) <= MAX_EXHAUSTIVE_OPTIONAL:
        patterns = [tuple(n for j, n in enumerate(names) if mask >> j & 1)
                    for mask in range(1, 1 << len(names))]
    else:
        patterns = [(n,) for n in names] + [tuple(names)]
    out, seen = [], set()
    for absent in patterns:
        opts = replace(options, defines={**options.define_map(), **{n: "None" for n in absent}})
        try:
            _, found = checker.check_module(module, opts)
        except TileError as e:
            found = e.diagnostics
        for d in found:
            if d.code != "E0246" or (d.span, d.message) in seen:
                continue
            seen.add((d.span, d.message))
            which = ", ".join(f"`{n}`" for n in absent)
            out.append(replace(d, notes=d.notes + (
                f"in the specialization where {which} {'is' if len(absent) == 1 else 'are'} "
                f"None ({' '.join(f'-D {n}=None' for n in absent)})",)))
    return out


def check_file(path: str, options: CompileOptions | None = None) -> CheckResult:
    try:
        text = read_source(path)
    except TileError as e:
        return CheckResult(path, None, e.diagnostics)
    return check_source(text, path, options)


def _too_deep(path: str) -> Diagnostic:
    return Diagnostic(Severity.ERROR, "E0112", f"`{path}` nests expressions or blocks too deeply "
                      "for the compiler", help="split the expression with `let` bindings")


def internal_error(where: str, exc: BaseException) -> InternalCompilerError:
    return InternalCompilerError.at(
        "E9999", f"internal compiler error in {where}: {type(exc).__name__}: {exc}", None,
        help="this is a bug in tilec; please report it with the input file")


# ---------------------------------------------------------------------------------------------
# Compilation (tilec FILE.tile, the runtime)


# The products of a compile live in compiled.py, imported on first use (`tilec check` needs
# none of them); `driver.CompileResult` and the others still work,
_COMPILED = ("ParamSig", "KernelSig", "ModuleSig", "CompiledKernel", "CompileResult")
# and the compiler's identity in compiler_id.py
_COMPILER_ID = ("COMPILER_ID", "code_digest", "code_files", "_version_id")


def __getattr__(name: str):
    if name in _COMPILED:
        from . import compiled
        return getattr(compiled, name)
    if name in _COMPILER_ID:
        from . import compiler_id
        return getattr(compiler_id, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _raise_errors(diags: list[Diagnostic]) -> None:
    if any(d.severity is Severity.ERROR for d in diags):
        from .diagnostics import TileError
        raise TileError(list(diags))


def _sources(text: str, path: str, files: list[str]) -> tuple[tuple[str, str], ...]:
    import hashlib      # here: `tilec check` never hashes (OpenSSL costs ~4 ms to load)
    out = [(path, hashlib.sha256(text.encode()).hexdigest())]
    for f in files:
        if f == path:
            continue
        try:    # an imported module's file: never blocks on a FIFO (tilelang/infile.py)
            out.append((f, hashlib.sha256(read_regular(f)).hexdigest()))
        except OSError:
            out.append((f, "unreadable"))
    return tuple(out)


def inspect_source(text: str, path: str, options: CompileOptions | None = None) -> ModuleSig:
    """The kernels of a module and their parameters (raises TileError on errors)."""
    from .compiled import KernelSig, ModuleSig, ParamSig
    from .sema.constants import ConstValue
    from .sema.types import (ArrayListType, ArrayType, DTypeType, OptionalArrayType,
                             SymmetricArrayType)
    result = check_source(text, path, options)
    _raise_errors(result.diagnostics)
    kernels = {}
    for k in result.typed.kernels:
        params = []
        spans = {p.name: p.span for p in k.node.params}
        tvars = _type_vars(k.node)
        for name, t, is_const, val in k.params:
            if is_const and isinstance(t, DTypeType):
                d = None if val.is_var else val.name
                params.append(ParamSig(name, "const", "dtype", 0, d, spans.get(name)))
            elif is_const:
                default = val.value if isinstance(val, ConstValue) and not val.is_symbolic \
                    else None
                params.append(ParamSig(name, "const", t.dtype, 0, default, spans.get(name)))
            elif isinstance(t, ArrayType):
                params.append(ParamSig(name, "array", t.dtype, t.rank, span=spans.get(name),
                                       type_var=tvars.get(name)))
            elif isinstance(t, ArrayListType):
                kind = "symmetric" if isinstance(t, SymmetricArrayType) else "list"
                params.append(ParamSig(name, kind, t.array.dtype, t.array.rank,
                                       span=spans.get(name)))
            elif isinstance(t, OptionalArrayType):
                params.append(ParamSig(name, "array", t.array.dtype, t.array.rank,
                                       span=spans.get(name), optional=True))
            else:
                params.append(ParamSig(name, "scalar", t.dtype, span=spans.get(name),
                                       type_var=tvars.get(name)))
        kernels[k.name] = KernelSig(k.name, tuple(params), k.launch, k.node.name_span)
    return ModuleSig(path, kernels, _sources(text, path, result.typed.files))


def _type_vars(k: ast.KernelDef) -> dict[str, str]:
    """Parameter name -> the `const T: dtype` parameter its declared type names, for the
    parameters typed `Array[T, n]` or `T` (docs/language.md, "Generic kernels")."""
    names = {p.name for p in k.params if p.is_const and isinstance(p.type, ast.TypeExpr)
             and p.type.name == "dtype" and p.type.args is None}
    out = {}
    for p in k.params:
        t = p.type
        if p.is_const or not isinstance(t, ast.TypeExpr):
            continue
        first = t.name if t.args is None else (
            t.args[0].id if t.name == "Array" and t.args and isinstance(t.args[0], ast.Name)
            else None)
        if first in names:
            out[p.name] = first
    return out


def _const_text(v: Any) -> str:
    if v is None:                  # an optional array given None (sema: `absent_array`)
        return "None"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        if v != v:
            return "nan"
        if v in (float("inf"), float("-inf")):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    return str(int(v)) if not isinstance(v, str) else v


def compile_source(text: str, path: str, options: CompileOptions | None = None, *,
                   kernels: list[str] | None = None, consts: Mapping[str, Any] | None = None,
                   facts: Mapping[str, Mapping[str, Any]] | None = None,
                   until: str = "cubin") -> CompileResult:
    """Run the pipeline on `text` up to `until` (tir | plan | llvm | ptx | cubin). User
    mistakes come back as diagnostics (never raised); an internal failure is an E9999
    diagnostic."""
    from .compiled import CompileResult
    options = options or CompileOptions()
    if consts:
        options = replace(options, defines={**options.define_map(),
                                            **{k: _const_text(v) for k, v in consts.items()}})
    res = CompileResult(path, [])
    # A compile allocates far more than it frees (code generation's modules on first use, the
    # IR, llvmlite's objects): the cycle collector would walk them again and again. Paused, as
    # the parser does, and resumed as it was, with the one young-generation collection that
    # the pause deferred run here (6 ms after a cold matmul), not at the caller's next
    # allocation.
    collecting = gc.isenabled()
    gc.disable()
    t0 = time.perf_counter()
    try:
        _compile(text, path, options, kernels, facts, until, res, t0)
    except TileError as e:
        res.diagnostics += e.diagnostics
    except RecursionError:
        res.diagnostics.append(_too_deep(path))
    except Exception as e:  # a bug: report it as a diagnostic, never a traceback
        res.diagnostics += internal_error("the compiler", e).diagnostics
    finally:
        if collecting:
            gc.enable()
            if gc.get_count()[0] > gc.get_threshold()[0]:
                gc.collect(0)
    return res


def _compile(text, path, options, kernels, facts, until, res: CompileResult, t0) -> None:
    from .ir.build import build_module
    from .ir.passes import PassManager
    from .ir.printer import format_module

    remember_source(path, text)
    try:
        module = parse(text, path)
    except RecursionError:
        res.diagnostics.append(_too_deep(path))
        return
    t1 = time.perf_counter()
    res.timings["parse"] = t1 - t0
    res.diagnostics += include_diagnostics(options)
    res.diagnostics += floor_division_comments(text, path)
    try:
        typed, diags = checker.check_module(module, options, kernels or None)
    except TileError as e:
        typed, diags = None, e.diagnostics
    res.diagnostics += _define_spans(list(diags), module, options)
    res.diagnostics += define_diagnostics(module, options)
    t2 = time.perf_counter()
    res.timings["sema"] = t2 - t1
    if not res.ok:
        return
    if kernels:
        known = {k.name for k in module.items if isinstance(k, ast.KernelDef)}
        for name in kernels:
            if name not in known:
                raise TileUsageError.at(
                    "E0270", f"`{path}` has no kernel `{name}`", None,
                    help=f"its kernels are: {', '.join(sorted(known)) or 'none'}")
    ir, ldiags = build_module(module, options, kernels)
    res.diagnostics += [d for d in ldiags if d.severity is Severity.ERROR]
    if ir is None:
        return
    ir = PassManager().run(ir)      # verifies the lowered module first, then after each pass
    res.ir = ir
    res.tir = format_module(ir)
    t3 = time.perf_counter()
    res.timings["ir"] = t3 - t2
    if until == "tir":
        return
    if until == "plan":
        from .codegen.generate import kernel_plans
        from .codegen.plan.dump import format_plan
        res.plan = "\n".join(format_plan(p, k) for k, p in kernel_plans(ir, options, facts))
        return
    from .codegen.generate import generate
    t_imported = time.perf_counter()
    res.timings["imports"] = t_imported - t3       # code generation's modules, on first use
    cg = generate(ir, options, facts)
    t4 = time.perf_counter()
    res.codegen = cg
    res.llvm_ir, res.ptx = cg.llvm_ir, cg.ptx
    res.diagnostics += list(cg.diagnostics)
    if "llvm" in cg.timings and "ptx" in cg.timings:
        res.timings["llvm"], res.timings["ptx"] = cg.timings["llvm"], cg.timings["ptx"]
    else:
        res.timings["codegen"] = t4 - t_imported
    if until in ("llvm", "ptx"):
        return
    from .codegen.target.link import link_ptx
    def link(ptx):
        return link_ptx(ptx, options.target, ptxas=options.ptxas,
                        knobs_file=options.knobs_file, opt_level=options.opt_level)
    linked = link(cg.ptx)
    if linked.backend == "nvjitlink":
        # nvJitLink's relocatable compile can cost an occupancy step
        # (codegen/target/register_fit.py)
        from .codegen.target.register_fit import refit
        res.ptx, linked = refit(cg.ptx, cg, options.target, linked, link)
    res.cubin = linked.cubin
    res.link = linked
    res.timings["cubin"] = time.perf_counter() - t4


def compile_kernel(text: str, path: str, kernel: str, consts: Mapping[str, Any] | None = None,
                   facts: Mapping[str, Any] | None = None,
                   options: CompileOptions | None = None, *, link: bool = True) -> CompiledKernel:
    """One specialization of one kernel (the runtime's entry point). Raises TileError."""
    from .compiled import CompiledKernel
    options = options or CompileOptions()
    res = compile_source(text, path, options, kernels=[kernel], consts=consts,
                         facts={kernel: dict(facts or {})}, until="cubin" if link else "ptx")
    _raise_errors(res.diagnostics)
    return CompiledKernel(res.codegen.kernel(kernel), res.ptx, res.cubin, options.target.name,
                          tuple(res.diagnostics), dict(res.timings), res.tir, res.llvm_ir)


def read_module_source(path: str) -> str:
    """The text of a module file (TileError E0001-E0003 when unreadable)."""
    return read_source(path)
