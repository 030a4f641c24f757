"""Compile a module for C export (docs/cli.md "C export").

A kernel is specialized on facts about its array arguments (docs/abi.md, "Specialization
facts"); the Python runtime computes them per launch and builds what is missing, which a C
host cannot do. So every kernel ships in two variants, chosen per launch by the C launcher
from the same facts the runtime computes (`tilelang/runtime/args.py: facts_key`):

- `fast`: every array contiguous, aligned16, extent16, small and describable by a tensor map
  (what an ordinary dense buffer satisfies; TMA and 32-bit offsets where the kernel uses them);
- `generic`: no fact assumed, valid for any array the ABI allows (strided, broadcast,
  unaligned, ragged, huge).
Both are compiled with the same `const` values (the module's defaults and `-D`), so a launch
gives the same results whichever runs.

A kernel with `Optional[Array[...]]` parameters is also compiled, in both variants, once per
pattern of absent ones (`-D NAME=None`, docs/language.md "Optional arrays"): a `PatternImage`
each, chosen by the launcher from which optional pointers are 0 (NULL). At most
`MAX_OPTIONAL` optional arrays per kernel (2^k images per variant). `List[Array[...]]`
parameters are refused (E0281): their device table would need an allocation and a copy per
launch, which a launcher that may be captured into a CUDA graph does not make.
"""

from __future__ import annotations

import re
from typing import Any

from ..codegen.api import ArrayFacts, KernelArtifact
from ..diagnostics import Diagnostic, Severity, TileError, register_codes
from ..driver import compile_source, inspect_source
from ..options import CompileOptions
from ..record import record, replace

register_codes({"E0280": "the name of a C export is not usable as a C identifier prefix",
                "E0281": "a kernel's parameters cannot be exported to C"})

MAX_OPTIONAL = 4


@record(frozen=True)
class Variant:
    name: str
    facts: ArrayFacts
    meaning: str              # what a launch's arrays must satisfy (for the header's comment)


VARIANTS = (
    Variant("fast", ArrayFacts(contiguous=True, aligned16=True, extent16=True, small=True,
                               tensor_map=True),
            "every array dense along its last axis (stride 1), 16-byte aligned (address and "
            "other strides), its last extent a multiple of 16 bytes, fewer than 2^31 elements "
            "spanned, positive strides"),
    Variant("generic", ArrayFacts(contiguous=False, aligned16=False, extent16=False,
                                  small=False, tensor_map=False),
            "any other arrays"),
)


@record(frozen=True)
class CompiledVariant:
    variant: Variant
    ptx: str
    cubin: bytes
    kernels: tuple[KernelArtifact, ...]      # in the module's order

    def kernel(self, name: str) -> KernelArtifact:
        for k in self.kernels:
            if k.name == name:
                return k
        raise KeyError(name)


@record(frozen=True)
class PatternImage:
    """One kernel compiled with some optional arrays absent, in one variant."""

    variant: int                             # index into CExport.variants
    kernel: str
    mask: int                                # bit j: the kernel's j-th optional array is None
    absent: tuple[str, ...]
    ptx: str
    cubin: bytes
    artifact: KernelArtifact


@record(frozen=True)
class ExportedKernel:
    name: str
    signature: str                           # the Tile signature, const values filled in
    consts: tuple[tuple[str, str], ...]      # (name, value as Tile source text)


@record(frozen=True)
class CExport:
    prefix: str                              # of every exported C name
    source: str                              # the .tile path, as given
    target: str
    kernels: tuple[ExportedKernel, ...]
    variants: tuple[CompiledVariant, ...]    # in VARIANTS order
    patterns: tuple[PatternImage, ...] = ()  # loaded after the variants' images, in order
    optional: tuple[tuple[str, tuple[str, ...]], ...] = ()   # kernel -> its optional arrays

    def optional_of(self, kernel: str) -> tuple[str, ...]:
        return dict(self.optional).get(kernel, ())

    def images(self) -> tuple[str, ...]:
        """The PTX of each image, in the order the C source loads them (library index)."""
        return tuple(v.ptx for v in self.variants) + tuple(p.ptx for p in self.patterns)


_C_WORDS = frozenset("""auto break case char const continue default do double else enum extern
float for goto if inline int long register restrict return short signed sizeof static struct
switch typedef union unsigned void volatile while _Bool _Complex _Imaginary bool true false
alignas alignof and and_eq asm bitand bitor catch char16_t char32_t char8_t class compl concept
consteval constexpr constinit const_cast co_await co_return co_yield decltype delete
dynamic_cast explicit export friend mutable namespace new noexcept not not_eq nullptr operator
or or_eq private protected public reinterpret_cast requires static_assert static_cast template
this thread_local throw try typeid typename using virtual wchar_t xor xor_eq""".split())


def c_prefix(stem: str) -> str:
    """The C identifier prefix for an export named `stem` (the output file's name without
    `.c`); raises TileError E0280 when it cannot be one."""
    name = re.sub(r"[^A-Za-z0-9_]", "_", stem)
    if not name or name[0].isdigit() or name in _C_WORDS or name.startswith("__") \
            or re.match(r"_[A-Z]", name):
        raise TileError([Diagnostic(
            Severity.ERROR, "E0280",
            f"`{stem}` cannot name a C export: its functions are called `{name}_load`, "
            f"`{name}_launch_KERNEL`, ..., so the name must be a C identifier that is not a "
            "keyword or reserved (no leading digit, `__` or `_` and a capital)",
            help="choose another output file name with -o NAME.c")])
    return name


def export_c(text: str, path: str, options: CompileOptions, prefix: str,
             kernels: list[str] | None = None) -> CExport:
    """Compile every kernel of the module (or `kernels`) in both variants. Raises TileError
    with the compiler's diagnostics."""
    sig = inspect_source(text, path, options)
    names = list(kernels) if kernels else list(sig.kernels)
    exported, compiled = [], []
    for name in names:
        if name not in sig.kernels:
            known = ", ".join(sorted(sig.kernels)) or "none"
            raise TileError([Diagnostic(Severity.ERROR, "E0270", f"`{path}` has no kernel "
                                        f"`{name}`", help=f"its kernels are: {known}")])
        k = sig.kernels[name]
        _check_exportable(k)
        consts = tuple((p.name, _const_text(p.default)) for p in k.params if p.kind == "const")
        exported.append(ExportedKernel(name, _signature(k), consts))
    optional = tuple((n, tuple(p.name for p in sig.kernels[n].params
                               if getattr(p, "optional", False))) for n in names)
    patterns = []
    for vi, variant in enumerate(VARIANTS):
        facts = {n: {p.name: variant.facts for p in sig.kernels[n].params if p.kind == "array"}
                 for n in names}
        res = _compile(text, path, options, names, facts)
        arts = tuple(res.codegen.kernel(n) for n in names)
        compiled.append(CompiledVariant(variant, res.ptx, bytes(res.cubin), arts))
        for name, opt in optional:
            for mask in range(1, 1 << len(opt)):
                absent = tuple(o for j, o in enumerate(opt) if mask >> j & 1)
                defines = {**options.define_map(), **{o: "None" for o in absent}}
                present = {q: f for q, f in facts[name].items() if q not in absent}
                res = _compile(text, path, replace(options, defines=defines), [name],
                               {name: present})
                patterns.append(PatternImage(vi, name, mask, absent, res.ptx, bytes(res.cubin),
                                             res.codegen.kernel(name)))
    return CExport(prefix, path, options.target.name, tuple(exported), tuple(compiled),
                   tuple(patterns), optional)


def _compile(text, path, options, names, facts):
    res = compile_source(text, path, options, kernels=names, facts=facts)
    errors = [d for d in res.diagnostics if d.severity is Severity.ERROR]
    if errors or res.cubin is None:
        raise TileError(errors or list(res.diagnostics))
    return res


def _check_exportable(k) -> None:
    """E0281 for what a C launcher cannot pass (see the module docstring)."""
    lists = [p for p in k.params if p.kind == "list"]
    if lists:
        raise TileError([Diagnostic(
            Severity.ERROR, "E0281", f"kernel `{k.name}`: the C export cannot pass "
            f"`{lists[0].name}`, a list of arrays", lists[0].span, help="a list needs a device "
            "table made per launch, which the exported launchers never allocate; launch this "
            "kernel from Python, or give it one array parameter per list entry")])
    sym = [p for p in k.params if p.kind == "symmetric"]
    if sym:
        raise TileError([Diagnostic(
            Severity.ERROR, "E0281", f"kernel `{k.name}`: the C export cannot pass "
            f"`{sym[0].name}`, a symmetric array", sym[0].span, help="a symmetric array needs "
            "a world of devices and a table of their buffers (docs/distributed.md)")])
    opt = [p for p in k.params if getattr(p, "optional", False)]
    if len(opt) > MAX_OPTIONAL:
        raise TileError([Diagnostic(
            Severity.ERROR, "E0281", f"kernel `{k.name}` has {len(opt)} optional arrays; the "
            f"C export compiles one image per pattern of absent ones and takes at most "
            f"{MAX_OPTIONAL}", opt[MAX_OPTIONAL].span,
            help="export a kernel with fewer `Optional[...]` parameters")])


def _const_text(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return "?" if v is None else str(v)


def _signature(k) -> str:
    parts = []
    for p in k.params:
        dt = getattr(p.dtype, "name", p.dtype)    # `const T: dtype` has the name `dtype`
        if p.kind == "array":
            t = f"Array[{dt}, {p.rank}]"
            parts.append(f"{p.name}: " + (f"Optional[{t}]" if getattr(p, "optional", False)
                                          else t))
        elif p.kind == "const":
            parts.append(f"const {p.name}: {dt} = {_const_text(p.default)}")
        else:
            parts.append(f"{p.name}: {dt}")
    return f"kernel {k.name}(" + ", ".join(parts) + ")"
