"""Every example's PTX, byte for byte, on sm_80, sm_90a and sm_120 in every precision mode,
with the default array facts and with `small` added (the 32-bit offset path the runtime takes
for ordinary arrays): the guard of refactorings that must not change generated code.

The expected values are SHA-256 digests in golden/ptx_digests.json. A change that is meant to
change the PTX regenerates them (`TILELANG_REGEN_GOLDEN=1 python3 -m pytest -q
tests/codegen/test_ptx_golden.py`) and says in its commit message what changed and why; one
that is not (a code move, a rename) must leave every digest as it is. To see what moved,
compare `tilec --emit ptx` of the failing case before and after the change.

Each PTX is also held to the emulator's instruction census (tests/emulator/test_emu_census.py):
every opcode is in the committed inventory and known to the emulator, so a new lowering that
emits an instruction the emulator cannot run fails the default run, not only `-m slow`.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os

import pytest

from tilelang.codegen.api import ArrayFacts
from tilelang.driver import compile_source
from tilelang.emulator.coverage import classify
from tilelang.emulator.parser import parse_ptx
from tilelang.options import CompileOptions
from tilelang.sema.types import ArrayType

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DIGESTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden", "ptx_digests.json")
# examples/*.tile and the kernels across devices of examples/distributed/ (named by their path
# under examples/)
EXAMPLES = sorted(os.path.relpath(p, os.path.join(ROOT, "examples")) for p in
                  glob.glob(os.path.join(ROOT, "examples", "*.tile")) +
                  glob.glob(os.path.join(ROOT, "examples", "distributed", "*.tile")))
TARGETS = ("sm_80", "sm_90a", "sm_120")
PRECISIONS = ("ieee", "fast", "approx")
SMALL = ArrayFacts(small=True)
INVENTORY = os.path.join(ROOT, "tests", "emulator", "census", "tile_opcodes.txt")
# Specializations beyond each example's defaults: a generic kernel's other dtype (its default
# is f16), and the sm_100a tensor-memory path of the matmuls and attention (tcgen05), which no
# other target takes.
DEFINES = {"attention.tile": ("T=bf16",)}
MORE_TARGETS = {"matmul.tile": ("sm_100a", "sm_120a"),
                "matmul_persistent.tile": ("sm_100a", "sm_120a"),
                "attention.tile": ("sm_100a",),
                "matmul_mxfp8.tile": ("sm_100a", "sm_120a"),
                "matmul_nvfp4.tile": ("sm_100a", "sm_120a")}
# Examples that need a newer target than sm_80: multimem (NVLink SHARP) is sm_90+ (E0752 below)
TARGETS_OF = {"distributed/all_reduce_multimem.tile": ("sm_90a", "sm_120")}


def _ptx(example: str, target: str, precision: str, small: bool, define: str = "") -> str:
    with open(os.path.join(ROOT, "examples", example), encoding="utf-8") as f:
        text = f.read()
    # the name the PTX may carry (a device assertion's file), the same in every checkout
    path = f"examples/{example}"
    defines = dict([define.split("=", 1)]) if define else {}
    options = CompileOptions(target=target, precision=precision, defines=defines)
    facts = None
    if small:
        first = compile_source(text, path, options, until="tir")
        assert first.ok, first.diagnostics
        facts = {k.name: {p.hint: SMALL for p in k.params if isinstance(p.type, ArrayType)}
                 for k in first.ir.kernels}
    res = compile_source(text, path, options, facts=facts, until="ptx")
    assert res.ok and res.ptx, [d.render() if hasattr(d, "render") else str(d)
                                for d in res.diagnostics]
    return res.ptx


def _cases():
    return [(e, t, p, s, d) for e in EXAMPLES for d in ("",) + DEFINES.get(e, ())
            for t in TARGETS_OF.get(e, TARGETS) + MORE_TARGETS.get(e, ()) for p in PRECISIONS
            for s in (False, True)]


def _key(example, target, precision, small, define=""):
    return (f"{example}:{target}:{precision}" + (":small" if small else "")
            + (f":{define}" if define else ""))


def _expected() -> dict:
    try:
        with open(DIGESTS, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        return {}


_REGEN = os.environ.get("TILELANG_REGEN_GOLDEN") == "1"
_GOT: dict[str, str] = {}


@pytest.mark.parametrize("example,target,precision,small,define", _cases(),
                         ids=[_key(*c) for c in _cases()])
def test_example_ptx_is_unchanged(example, target, precision, small, define):
    ptx = _ptx(example, target, precision, small, define)
    digest = hashlib.sha256(ptx.encode()).hexdigest()
    key = _key(example, target, precision, small, define)
    ops = {i.opcode for f in parse_ptx(ptx).functions.values() for i in f.instrs}
    with open(INVENTORY, encoding="utf-8") as f:
        missing = ops - set(f.read().split())
    assert not missing, f"{key} emits opcodes outside the census inventory: {sorted(missing)}"
    unknown = {o: classify(o).why for o in ops if not classify(o).known}
    assert not unknown, f"{key} emits opcodes the emulator does not know: {unknown}"
    if _REGEN:
        _GOT[key] = digest
        table = {**_expected(), **_GOT}
        with open(DIGESTS, "w", encoding="utf-8") as f:
            json.dump(dict(sorted(table.items())), f, indent=0)
            f.write("\n")
        return
    want = _expected().get(key)
    assert want is not None, f"no golden digest for {key}: regenerate (module docstring)"
    assert digest == want, f"the PTX of {key} changed (module docstring says what to do)"


def test_every_case_has_a_digest_and_no_stale_ones():
    if _REGEN:
        pytest.skip("regenerating")
    assert set(_expected()) == {_key(*c) for c in _cases()}
