"""tilelang/nvjitlink.py: nvJitLink through ctypes, loaded once per process; agrees with the
`cuda.bindings.nvjitlink` module where that is installed."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

from tilelang import nvjitlink
from tilelang.codegen.target.link import link_ptx
from tilelang.targets import get_target

from test_link import SMEM_PTX

try:
    nvjitlink.library()
    HAVE = True
except nvjitlink.NvJitLinkUnavailable:
    HAVE = False

needs = pytest.mark.skipif(not HAVE, reason="nvJitLink is not installed")


@needs
def test_loaded_once_and_version():
    assert nvjitlink.library() is nvjitlink.library()
    major, minor = nvjitlink.version()
    assert major >= 12 and minor >= 0


@needs
def test_version_agrees_with_cuda_bindings():
    bindings = pytest.importorskip("cuda.bindings.nvjitlink")
    assert tuple(bindings.version()) == nvjitlink.version()


def test_result_names_agree_with_cuda_bindings():
    bindings = pytest.importorskip("cuda.bindings.nvjitlink")
    assert [(m.name, m.value) for m in bindings.Result] == \
        [(n, i) for i, n in enumerate(nvjitlink.RESULTS)]
    assert bindings.InputType.PTX.value == nvjitlink.INPUT_PTX


@needs
def test_cubin_identical_to_cuda_bindings():
    """The same PTX and options give the same bytes and log through either binding."""
    b = pytest.importorskip("cuda.bindings.nvjitlink")
    opts = ["-arch=sm_90", "-O3", "-Xptxas=-v"]
    data = SMEM_PTX.encode()
    h = b.create(len(opts), opts)
    try:
        b.add_data(h, b.InputType.PTX, data, len(data), "tile.ptx")
        b.complete(h)
        cubin = bytearray(b.get_linked_cubin_size(h))
        b.get_linked_cubin(h, cubin)
    finally:
        b.destroy(h)
    mine, info = nvjitlink.link_ptx(data, opts)
    assert mine == bytes(cubin)
    assert "Compiling entry function 'smem_kernel' for 'sm_90'" in info


@needs
def test_errors_carry_the_result_name_and_log():
    with pytest.raises(nvjitlink.LinkFailed) as e:
        nvjitlink.link_ptx(SMEM_PTX.encode(), ["-arch=sm_90", "-nonsense"])
    assert e.value.stage == "options" and e.value.error.result == "ERROR_UNRECOGNIZED_OPTION"
    bad = b".version 7.8\n.target sm_90\n.address_size 64\n.visible .entry k()\n{\n\tfoo;\n}\n"
    with pytest.raises(nvjitlink.LinkFailed) as e:
        nvjitlink.link_ptx(bad, ["-arch=sm_90"])
    assert e.value.stage == "input" and e.value.error.result == "ERROR_PTX_COMPILE"
    assert "error" in e.value.log


@needs
def test_linking_needs_no_cuda_bindings_import():
    """A compile to cubin loads the library without importing cuda.bindings (its import
    cost 30-60 ms of a cold run)."""
    code = ("import sys\n"
            "from tilelang.driver import compile_source\n"
            "from tilelang.options import CompileOptions\n"
            "r = compile_source(open('examples/vadd.tile').read(), 'vadd.tile', CompileOptions())\n"
            "assert r.ok and r.cubin[:4] == b'\\x7fELF', r.diagnostics\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'cuda'))\n")
    import pathlib
    root = pathlib.Path(__file__).resolve().parents[3]
    r = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True,
                       env={**__import__("os").environ, "PYTHONPATH": str(root)}, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


def test_unavailable_is_a_diagnostic(monkeypatch):
    monkeypatch.setattr(nvjitlink, "_loaded", None)
    monkeypatch.setattr(nvjitlink, "_failure", "no nvJitLink library could be loaded (none found)")
    from tilelang.diagnostics import TileUsageError
    with pytest.raises(TileUsageError) as e:
        link_ptx(SMEM_PTX, get_target("sm_90"))
    [d] = e.value.diagnostics
    assert d.code == "E0762"
    assert d.message == "nvJitLink is not available (no nvJitLink library could be loaded " \
                        "(none found))"
    assert "--ptxas" in d.help


def test_compiler_id_loads_neither_llvm_nor_nvjitlink():
    """The runtime's cache key: computed from file identities, so a process whose kernels are
    all cached never loads libllvmlite or nvJitLink (nor imports Lark)."""
    import os
    code = ("import sys\n"
            "from tilelang import driver, nvjitlink\n"
            "text = str(driver.COMPILER_ID)\n"
            "print(text)\n"
            "print('llvmlite.binding' in sys.modules, 'lark' in sys.modules, "
            "nvjitlink._loaded is not None)\n")
    root = pathlib.Path(__file__).resolve().parents[3]
    r = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(root)}, timeout=300)
    assert r.returncode == 0, r.stderr
    ident, loaded = r.stdout.splitlines()
    assert loaded == "False False False"
    assert "; llvmlite " in ident and "; nvJitLink " in ident
    if HAVE:
        assert os.path.basename(nvjitlink.library().path) in ident
