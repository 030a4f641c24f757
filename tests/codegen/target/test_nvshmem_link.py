"""The NVSHMEM lowering links (docs/distributed.md, "The NVSHMEM lowering"): NVSHMEM's device
bitcode is found per target, trimmed and linked into the module before the PTX, and the PTX of
every distributed example links through nvJitLink to a cubin for sm_90 with no external
function left and NVSHMEM's device state visible for nvshmemx_culibrary_init. No GPU is
needed; the tests that need the `nvidia-nvshmem-cu13` wheel (`pip install tilelang[nvshmem]`,
182 MB, so not a test extra) skip without it."""

from __future__ import annotations

import pathlib
import re

import pytest

from tilelang.codegen.emit.nvshmem import DEVICE_STATE, SIGNATURES
from tilelang.codegen.target import nvshmem_bitcode
from tilelang.diagnostics import TileError
from tilelang.driver import compile_source
from tilelang.options import CompileOptions

ROOT = pathlib.Path(__file__).resolve().parents[3]
EXAMPLES = sorted(ROOT.glob("examples/distributed/*.tile"))


def _bitcode_or_skip(target="sm_90") -> str:
    try:
        return nvshmem_bitcode.find(target)
    except TileError:
        pytest.skip("NVSHMEM's device bitcode is not installed (pip install tilelang[nvshmem])")


# ---------------------------------------------------------------------------------------------
# Finding the bitcode (no NVSHMEM needed: folders made here)

@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.setattr(nvshmem_bitcode, "_folders", lambda: [str(tmp_path)])
    return tmp_path


@pytest.mark.parametrize("target,want", [("sm_90a", "sm_90"), ("sm_90", "sm_90"),
                                         ("sm_86", "sm_80"), ("sm_100a", "sm_100"),
                                         ("sm_120", "sm_100")])
def test_the_newest_bitcode_not_above_the_target(folder, target, want):
    for a in (75, 80, 89, 90, 100):
        (folder / f"libnvshmem_device_sm_{a}.bc").write_bytes(b"")
    assert nvshmem_bitcode.find(target) == str(folder / f"libnvshmem_device_{want}.bc")


def test_one_bitcode_file_of_older_releases(folder):
    (folder / "libnvshmem_device.bc").write_bytes(b"")
    assert nvshmem_bitcode.find("sm_80") == str(folder / "libnvshmem_device.bc")


def test_no_bitcode_for_an_older_target(folder):
    (folder / "libnvshmem_device_sm_90.bc").write_bytes(b"")
    with pytest.raises(TileError) as e:
        nvshmem_bitcode.find("sm_80")
    assert e.value.diagnostics[0].code == "E0764"
    assert e.value.diagnostics[0].message == (
        f"NVSHMEM's device bitcode in {folder} has no file for sm_80 or older (it has sm_90)")


def test_no_bitcode_is_a_clear_error(folder):
    with pytest.raises(TileError) as e:
        nvshmem_bitcode.find("sm_90")
    d = e.value.diagnostics[0]
    assert d.code == "E0764"
    assert d.message == ("the NVSHMEM lowering needs NVSHMEM's device bitcode "
                         f"(libnvshmem_device*.bc), found in none of: {folder}")
    assert "tilelang[nvshmem]" in d.help


def test_a_compile_without_nvshmem_says_so_and_writes_nothing(folder, tmp_path):
    src = (ROOT / "examples/distributed/all_reduce.tile").read_text()
    res = compile_source(src, "all_reduce.tile", CompileOptions(target="sm_90",
                                                                distributed="nvshmem"))
    assert not res.ok and res.cubin is None and not res.ptx
    assert [d.code for d in res.diagnostics] == ["E0764"]


def test_an_unreadable_bitcode_is_a_clear_error(folder):
    (folder / "libnvshmem_device_sm_90.bc").write_bytes(b"not bitcode")
    with pytest.raises(TileError) as e:
        nvshmem_bitcode.library("sm_90", SIGNATURES)
    assert e.value.diagnostics[0].code == "E0765"


# ---------------------------------------------------------------------------------------------
# With the wheel

@pytest.mark.slow
def test_the_declared_signatures_are_the_bitcodes():
    _bitcode_or_skip()
    import llvmlite.binding as llvm
    text = nvshmem_bitcode.library("sm_90", SIGNATURES)
    mod = llvm.parse_assembly(text, context=llvm.create_context())
    defined = {f.name: f for f in mod.functions if not f.is_declaration}
    for name, (ret, params) in SIGNATURES.items():
        assert name in defined, name
        head = next(line for line in str(defined[name]).splitlines()
                    if line.startswith("define"))
        m = re.match(rf"define .*?(\S+) @{name}\((.*)\)", head)
        assert m.group(1) == ("ptr" if str(ret) == "i8*" else str(ret)), name
        got = [a.split()[0] for a in m.group(2).split(", ")] if m.group(2) else []
        assert got == [("ptr" if str(p) == "i8*" else str(p)) for p in params], name
    # trimmed: the entry points and what they call, not the whole library
    assert len(defined) < 200
    assert "target-cpu" not in text and "target-features" not in text


@pytest.mark.slow
@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_every_distributed_example_links_with_nvshmem_for_sm_90(example):
    _bitcode_or_skip()
    res = compile_source(example.read_text(), str(example),
                         CompileOptions(target="sm_90", distributed="nvshmem"))
    assert res.ok, [str(d) for d in res.diagnostics]
    assert res.link.backend == "nvjitlink" and res.cubin[:4] == b"\x7fELF"
    # every NVSHMEM function is defined in the module: only CUDA's system calls stay external
    assert set(re.findall(r"\.extern \.func\s+(?:\([^)]*\)\s*)?(\w+)", res.ptx)) <= {
        "vprintf", "__assertfail"}
    assert re.search(rf"\.visible \.const \.align 8 \.b8 {DEVICE_STATE}\[\d+\];", res.ptx)
    for k in res.codegen.kernels:
        assert "nvshmem" in [p.kind for p in k.params]
    # every example but all_reduce_multimem loads or stores through peer: NVLink only
    warned = [d for d in res.diagnostics if d.code == "W0766"]
    assert bool(warned) == (example.name != "all_reduce_multimem.tile")
