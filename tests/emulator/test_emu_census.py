"""The instruction census: every opcode (root and modifiers) that Tile's code generator emits
and every one in the PTX corpora the project keeps is known to the emulator
(`tilelang.emulator.coverage`), so it is executed or refused by name, never run with a
modifier ignored.

`census/tile_opcodes.txt` lists what the code generator emits for examples/**/*.tile and every
tests/**/*.tile on sm_80, sm_90a and sm_120 in the ieee, fast and approx precision modes. The
slow test recompiles them all and fails on an opcode missing from the list (a new lowering):
add it (`TILELANG_REGEN_CENSUS=1 python3 -m pytest -m slow tests/emulator/test_emu_census.py`)
and the fast test then checks it against the emulator.
"""

from __future__ import annotations

import glob
import os
import pathlib

import pytest

from tilelang.emulator.coverage import KNOWN, classify
from tilelang.emulator.device import EmulatorDevice
from tilelang.emulator.errors import PTXParseError
from tilelang.emulator.parser import parse_ptx

HERE = pathlib.Path(__file__).parent
ROOT = HERE.parent.parent
INVENTORY = HERE / "census" / "tile_opcodes.txt"
TARGETS = ("sm_80", "sm_90a", "sm_120")
PRECISIONS = ("ieee", "fast", "approx")


def opcodes(ptx: str) -> set:
    return {i.opcode for f in parse_ptx(ptx).functions.values() for i in f.instrs}


def corpus_files():
    return sorted(glob.glob(str(HERE / "fixtures" / "*.ptx")) +
                  glob.glob(str(HERE / "triton_corpus" / "*.ptx")))


def test_every_kept_opcode_is_known_to_the_emulator():
    tile = set(INVENTORY.read_text().split())
    peers = set()
    for p in corpus_files():
        peers |= opcodes(pathlib.Path(p).read_text())
    assert len(tile) > 200 and len(peers) > 200
    unknown = {o: classify(o).why for o in sorted(tile | peers) if not classify(o).known}
    assert not unknown, unknown


@pytest.mark.parametrize("opcode,why", [
    ("cvt.rs.f16x2.f32", "the emulator does not know the modifier .rs of cvt"),
    ("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32",
     "the emulator does not know the modifier .reduce of cp"),
    ("ld.global.L2::evict_half.b32", "the emulator does not know the modifier "
     ".L2::evict_half of ld"),
    ("tcgen05.mma.ws.cta_group::1.kind::f16", "the emulator does not know the modifier "
     ".ws of tcgen05"),
    ("tcgen05.ld.sync.aligned.16x64b.x4.b32", "the emulator does not know the modifier "
     ".16x64b of tcgen05"),
    ("wgmmb.fence.sync.aligned", "the emulator has no instruction 'wgmmb'"),
])
def test_unknown_forms_are_named(opcode, why):
    assert classify(opcode).why == why


def test_an_unknown_modifier_is_refused_at_load_with_the_opcode():
    from emu_support import kernel_ptx
    ptx = kernel_ptx("  cvt.rs.f16x2.f32 %r1, %f1, %f2;\n  ret;")
    with pytest.raises(PTXParseError, match=r"unsupported instruction 'cvt.rs.f16x2.f32': the "
                       r"emulator does not know the modifier .rs of cvt"):
        EmulatorDevice().load_module(ptx).get_function("k")


def test_the_table_is_inspectable():
    assert "mad" in KNOWN and "cc" in KNOWN["mad"] and "noftz" in KNOWN["atom"]
    assert classify("mad.lo.cc.u32").known and classify("atom.global.add.noftz.bf16x2").known


def _tile_sources():
    return sorted(glob.glob(str(ROOT / "examples" / "**" / "*.tile"), recursive=True) +
                  glob.glob(str(ROOT / "tests" / "**" / "*.tile"), recursive=True))


@pytest.mark.slow
def test_the_code_generator_emits_only_censused_opcodes():
    from tilelang.driver import compile_source
    from tilelang.options import CompileOptions
    seen = set()
    for path in _tile_sources():
        text = pathlib.Path(path).read_text(encoding="utf-8")
        for target in TARGETS:
            for precision in PRECISIONS:
                res = compile_source(text, path,
                                     CompileOptions(target=target, precision=precision),
                                     until="ptx")
                if res.ok and res.ptx:          # sources of diagnostics tests do not compile
                    seen |= opcodes(res.ptx)
    if os.environ.get("TILELANG_REGEN_CENSUS") == "1":
        # kept entries stay: tests/codegen/test_ptx_golden.py also holds the examples compiled
        # with the runtime's `small` array facts (32-bit offsets) to this inventory
        kept = set(INVENTORY.read_text().split())
        INVENTORY.write_text("".join(o + "\n" for o in sorted(seen | kept)))
    new = sorted(seen - set(INVENTORY.read_text().split()))
    assert not new, f"opcodes not in {INVENTORY.name} (module docstring): {new}"
    unknown = {o: classify(o).why for o in sorted(seen) if not classify(o).known}
    assert not unknown, unknown
