"""The ordered pass list and the pass manager (Numba style: a named, ordered pipeline; the
verifier runs after every pass, and each pass's output can be dumped).

Default order: fold (creates constants and removes constant ifs) → cse (merges duplicates,
including the new constants) → licm (hoists what is invariant, now deduplicated) → split
(splits a masked loop where its mask's bounds are invariant, so licm has hoisted them) → dce
(removes what the others left unused, such as the comparisons split made unused). A new pass adds its name here."""

from __future__ import annotations

from typing import Callable, Sequence

from tilelang.ir.ops import IRModule, Kernel
from tilelang.ir.passes.cse import eliminate_common_subexpressions
from tilelang.ir.passes.dce import eliminate_dead_code
from tilelang.ir.passes.fold import fold_constants
from tilelang.ir.passes.licm import hoist_loop_invariants
from tilelang.ir.passes.split_loops import split_masked_loops
from tilelang.ir.verifier import IRVerificationError, verify
from tilelang.record import record, replace


@record(frozen=True)
class Pass:
    name: str
    run: Callable[[Kernel], Kernel]
    doc: str = ""


PASSES: dict[str, Pass] = {p.name: p for p in (
    Pass("fold", fold_constants, "constant folding through the registry's fold"),
    Pass("cse", eliminate_common_subexpressions, "common subexpression elimination"),
    Pass("licm", hoist_loop_invariants, "loop-invariant code motion"),
    Pass("split", split_masked_loops, "loop splitting: iterations whose mask holds run unmasked"),
    Pass("dce", eliminate_dead_code, "dead code elimination"),
)}

DEFAULT_PIPELINE: tuple[str, ...] = ("fold", "cse", "licm", "split", "dce")


class PassManager:
    """Runs passes in order over every kernel. `dump(name, module)` (optional) sees the module
    after each pass, e.g. for `tilec --emit tir --dump-after-each`."""

    def __init__(self, pipeline: Sequence[str] = DEFAULT_PIPELINE, *, verify_each: bool = True,
                 dump: Callable[[str, IRModule], None] | None = None):
        unknown = [n for n in pipeline if n not in PASSES]
        if unknown:
            raise KeyError(f"unknown pass `{unknown[0]}`; passes are {', '.join(PASSES)}")
        self.pipeline = tuple(pipeline)
        self.verify_each = verify_each
        self.dump = dump

    def run(self, module: IRModule) -> IRModule:
        typed: dict = {}       # ops already typed through the registry (verifier.verify)
        if self.verify_each:
            verify(module, typed)
        for name in self.pipeline:
            p = PASSES[name]
            module = replace(module, kernels=tuple(p.run(k) for k in module.kernels))
            if self.verify_each:
                try:
                    verify(module, typed)
                except IRVerificationError as e:
                    raise IRVerificationError(f"after pass `{name}`: {e}") from None
            if self.dump is not None:
                self.dump(name, module)
        return module


def optimize(module: IRModule, pipeline: Sequence[str] = DEFAULT_PIPELINE) -> IRModule:
    return PassManager(pipeline).run(module)
