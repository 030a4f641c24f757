"""LLVM's part: parse and link the per-kernel modules, optimize (-O0..-O3 with the new pass
manager) and emit PTX with the NVPTX back end. Targets and features are validated by
targets.py before anything here runs (some LLVM errors abort the process).

Measured on the examples' matmul for sm_90a (2026-11-24, LLVM 22.1, callgrind): the -O3 pipeline
is ~250 M instructions and NVPTX's emission ~205 M. The target machine's codegen level (0-3:
1-3 give the same PTX for every example and the same count; 0 changes the PTX), turning the
vectorizers off (same PTX, same count) save nothing; the -O2 pipeline changes the matmul's PTX
on sm_89 and -O1 most examples'; the passes llvmlite can assemble into a pipeline of our own
(no EarlyCSE, LICM, GVN) change every example's PTX."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Sequence

TRIPLE = "nvptx64-nvidia-cuda"
# NVPTX numbers each call sequence it lowers (`{ // callseq 3, 0` ... `} // callseq 3`) with a
# counter that lives in the cached target machine, so a module's PTX would depend on how many
# calls the process compiled before it; renumbered from 0 in order of appearance.
_CALLSEQ = re.compile(r"// callseq (\d+)")


def _renumber_callseqs(ptx: str) -> str:
    if "// callseq" not in ptx:
        return ptx
    seen: dict[str, int] = {}
    return _CALLSEQ.sub(lambda m: f"// callseq {seen.setdefault(m.group(1), len(seen))}", ptx)


@lru_cache(maxsize=1)
def _llvm():
    import llvmlite.binding as llvm
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    return llvm


@lru_cache(maxsize=None)
def target_machine(cpu: str, features: str, opt_level: int):
    llvm = _llvm()
    return llvm.Target.from_triple(TRIPLE).create_target_machine(
        cpu=cpu, features=features, opt=opt_level)


def data_layout(cpu: str, features: str) -> str:
    return str(target_machine(cpu, features, 3).target_data)


def compile_modules(ir_texts: list[str], cpu: str, features: str,
                    opt_level: int, libraries: Sequence[str] = ()) -> tuple[str, str]:
    """(the linked module's LLVM IR before optimization, the PTX). `libraries` (LLVM IR
    text: NVSHMEM's trimmed device library, codegen/target/nvshmem_bitcode.py) are linked in
    after the kernels' modules, their functions made internal so that the optimizer inlines
    them and drops what is not called; the IR returned is the kernels' alone."""
    llvm = _llvm()
    # a context of its own: LLVM's global one would keep every compile's named types (the
    # second compile's %f32x64 printing as %f32x64.1) for the life of the process
    ctx = llvm.create_context()
    mods = [llvm.parse_assembly(t, context=ctx) for t in ir_texts]
    main = mods[0]
    for m in mods[1:]:
        main.link_in(m)
    main.verify()
    # one module (one kernel, the runtime's case): its text as generated is the answer; LLVM
    # printing it again cost up to ~20 ms on the tensor-core matmul
    text = ir_texts[0] if len(mods) == 1 else str(main)
    for lib_text in libraries:
        lib = llvm.parse_assembly(lib_text, context=ctx)
        lib.data_layout, lib.triple = main.data_layout, main.triple
        defined = {f.name for f in lib.functions if not f.is_declaration}
        main.link_in(lib)
        for f in main.functions:
            if f.name in defined:
                f.linkage = llvm.Linkage.internal
        main.verify()
    tm = target_machine(cpu, features, opt_level)
    if opt_level > 0:
        pto = llvm.create_pipeline_tuning_options(speed_level=opt_level)
        pb = llvm.create_pass_builder(tm, pto)
        pb.getModulePassManager().run(main, pb)
    return text, _renumber_callseqs(tm.emit_assembly(main))
