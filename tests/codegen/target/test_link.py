"""PTX -> cubin with nvJitLink (in process) or a ptxas binary; resource usage; link failures as
diagnostics; ptxas knobs forwarding (seed 002_a8aa28be357af1ac.txt "ptxas Knobs File Format":
forwarded when MLIR_ENABLE_EVO and PTX_KNOBS_PATH are both set, no preflight, ptxas's
diagnostics come back through ours)."""

from __future__ import annotations

import json
import shutil
import stat
import sys

import pytest

from test_launch_support import gemm_module_ir, llvm_ptx
from tilelang.codegen.target.link import (KernelResources, knobs_file_from_env, link_ptx,
                                   parse_resource_usage)
from tilelang.diagnostics import InternalCompilerError, TileUsageError, render
from tilelang.targets import TARGETS

SM_90, SM_90A = TARGETS["sm_90"], TARGETS["sm_90a"]

SMEM_PTX = """\
.version 7.8
.target sm_90
.address_size 64

.visible .entry smem_kernel(
\t.param .u64 smem_kernel_param_0
)
.maxntid 128
{
\t.shared .align 4 .b8 buf[4096];
\t.local .align 4 .b8 depot[64];
\t.reg .b32 %r<4>;
\t.reg .b64 %rd<4>;
\tmov.u32 %r1, %tid.x;
\tshl.b32 %r2, %r1, 2;
\tmov.u32 %r3, buf;
\tadd.s32 %r3, %r3, %r2;
\tst.shared.u32 [%r3], %r1;
\tbar.sync 0;
\tmov.u64 %rd3, depot;
\tcvta.local.u64 %rd3, %rd3;
\tst.u32 [%rd3], %r1;
\tld.param.u64 %rd1, [smem_kernel_param_0];
\tcvta.to.global.u64 %rd2, %rd1;
\tld.shared.u32 %r1, [%r3];
\tst.global.u32 [%rd2], %r1;
\tret;
}
"""


def test_nvjitlink_gemm_and_resources():
    ptx = llvm_ptx(gemm_module_ir(), "sm_90", "+ptx78")
    r = link_ptx(ptx, SM_90, env={})
    assert r.cubin[:4] == b"\x7fELF" and r.backend == "nvjitlink"
    assert r.options == ("-arch=sm_90", "-O3", "-Xptxas=-v")
    res = r.resources["gemm_kernel"]
    assert res.registers > 0 and res.spill_stores == res.spill_loads == 0
    assert "Compiling entry function 'gemm_kernel' for 'sm_90'" in r.info_log
    assert r.seconds > 0  # the link time is reported (its size is a benchmark's business)


def test_static_shared_memory_and_stack_frame():
    r = link_ptx(SMEM_PTX, SM_90)
    res = r.resources["smem_kernel"]
    assert res.smem_static == 4096 and res.barriers == 1 and res.stack_frame >= 64


def test_parse_resource_usage_with_spills():
    log = """\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'big' for 'sm_80'
ptxas info    : Function properties for big
    128 bytes stack frame, 96 bytes spill stores, 112 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers, 16384 bytes smem, 380 bytes cmem[0]
ptxas info    : Compiling entry function 'small' for 'sm_80'
ptxas info    : Function properties for small
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 10 registers, used 0 barriers, 360 bytes cmem[0]
"""
    assert parse_resource_usage(log) == {
        "big": KernelResources("big", 255, 96, 112, 128, 16384, 1),
        "small": KernelResources("small", 10, 0, 0, 0, 0, 0),
    }


def test_link_failure_saves_ptx_and_names_it(tmp_path):
    bad = ".version 7.8\n.target sm_90\n.address_size 64\n.visible .entry k()\n{\n\tfoo.bar;\n}\n"
    with pytest.raises(InternalCompilerError) as e:
        link_ptx(bad, SM_90, save_dir=str(tmp_path))
    [d] = e.value.diagnostics
    [saved] = list(tmp_path.iterdir())
    assert saved.read_text() == bad
    assert d.code == "E0760"
    assert d.message == f"the generated PTX for sm_90 did not link; it is saved in {saved}"
    text = render(d)
    assert text.startswith(f"error[E0760]: the generated PTX for sm_90 did not link")
    assert "= note: ptxas: ptxas application ptx input, line 6; error" in text
    assert text.endswith(f"= help: this is a compiler bug: please report it with {saved} attached")


def test_unknown_intrinsic_only_fails_at_link(tmp_path):
    """An unknown llvm.nvvm.* name is an external call to LLVM; nvJitLink catches it."""
    ir_text = gemm_module_ir().replace("llvm.nvvm.read.ptx.sreg.tid.x",
                                       "llvm.nvvm.no.such.intrinsic")
    ptx = llvm_ptx(ir_text, "sm_90", "+ptx78")
    with pytest.raises(InternalCompilerError) as e:
        link_ptx(ptx, SM_90, save_dir=str(tmp_path))
    assert e.value.code == "E0760"


def test_knobs_env_gate():
    assert knobs_file_from_env({"MLIR_ENABLE_EVO": "1", "PTX_KNOBS_PATH": "/k.txt"}) == "/k.txt"
    assert knobs_file_from_env({"PTX_KNOBS_PATH": "/k.txt"}) is None
    assert knobs_file_from_env({"MLIR_ENABLE_EVO": "1"}) is None
    assert knobs_file_from_env({"MLIR_ENABLE_EVO": "", "PTX_KNOBS_PATH": "/k.txt"}) is None
    assert knobs_file_from_env({}) is None


def test_knobs_forwarded_through_nvjitlink_and_ptxas_answers(tmp_path):
    """No preflight: the path does not even exist. The public ptxas inside nvJitLink refuses the
    option, and its message comes back inside our diagnostic."""
    missing = str(tmp_path / "no-such-knobs.txt")
    env = {"MLIR_ENABLE_EVO": "1", "PTX_KNOBS_PATH": missing}
    with pytest.raises(TileUsageError) as e:
        link_ptx(SMEM_PTX, SM_90, env=env, save_dir=str(tmp_path))
    [d] = e.value.diagnostics
    assert d.code == "E0763" and missing in d.message
    assert any("ptxas: ptxas fatal   : Unknown option '-knobs-file'" == n for n in d.notes)
    # Without the gate nothing is forwarded and the link succeeds.
    assert "-Xptxas=--knobs-file" not in " ".join(link_ptx(SMEM_PTX, SM_90, env={}).options)


STAND_IN = """\
#!{python}
import json, sys
args = sys.argv[1:]
with open({record!r}, "w") as f:
    json.dump(sys.argv, f)
if {fail!r}:
    sys.stderr.write("ptxas fatal   : knob 'Bogus' is not recognized\\n")
    sys.exit(255)
out = args[args.index("-o") + 1]
with open(out, "wb") as f:
    f.write(b"\\x7fELF-fake-cubin")
sys.stderr.write("ptxas info    : Compiling entry function 'k' for 'sm_90a'\\n"
                 "ptxas info    : Function properties for k\\n"
                 "    0 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads\\n"
                 "ptxas info    : Used 42 registers, used 0 barriers, 512 bytes smem\\n")
"""


def stand_in(tmp_path, fail=False):
    record = tmp_path / "argv.json"
    script = tmp_path / "ptxas"
    script.write_text(STAND_IN.format(python=sys.executable, record=str(record), fail=fail))
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script), record


def test_stand_in_ptxas_records_knobs_argument(tmp_path):
    script, record = stand_in(tmp_path)
    knobs = tmp_path / "knobs.txt"
    knobs.write_text("preamble\n[knobs]\nSomeKnob=1\n")
    env = {"MLIR_ENABLE_EVO": "1", "PTX_KNOBS_PATH": str(knobs)}
    r = link_ptx(SMEM_PTX, SM_90A, ptxas=script, env=env)
    argv = json.loads(record.read_text())
    assert argv[:5] == [script, "-arch=sm_90a", "-O3", "-v", f"--knobs-file={knobs}"]
    assert argv[5] == "-o" and argv[6].endswith("tile.cubin") and argv[7].endswith("tile.ptx")
    assert len(argv) == 8 and tuple(argv) == r.options
    assert r.cubin == b"\x7fELF-fake-cubin" and r.backend == "ptxas"
    assert r.resources["k"] == KernelResources("k", 42, 8, 4, 0, 512, 0)


def test_stand_in_ptxas_knobs_option_beats_missing_env(tmp_path):
    script, record = stand_in(tmp_path)
    link_ptx(SMEM_PTX, SM_90, ptxas=script, knobs_file="/some/knobs", env={}, verbose=False,
             opt_level=2)
    assert json.loads(record.read_text())[1:4] == ["-arch=sm_90", "-O2", "--knobs-file=/some/knobs"]


def test_stand_in_ptxas_without_knobs(tmp_path):
    script, record = stand_in(tmp_path)
    link_ptx(SMEM_PTX, SM_90, ptxas=script, env={"PTX_KNOBS_PATH": "/k"})
    assert not any(a.startswith("--knobs-file") for a in json.loads(record.read_text()))


def test_stand_in_ptxas_failure_surfaces_its_message(tmp_path):
    script, _ = stand_in(tmp_path, fail=True)
    with pytest.raises(TileUsageError) as e:
        link_ptx(SMEM_PTX, SM_90, ptxas=script, knobs_file=str(tmp_path / "k"),
                 save_dir=str(tmp_path))
    d = e.value.diagnostics[0]
    assert d.notes == ("ptxas: ptxas fatal   : knob 'Bogus' is not recognized",)
    assert d.help == "check the knobs file, or unset MLIR_ENABLE_EVO / PTX_KNOBS_PATH"


def test_missing_ptxas_binary(tmp_path):
    with pytest.raises(TileUsageError) as e:
        link_ptx(SMEM_PTX, SM_90, ptxas=str(tmp_path / "nope"))
    assert e.value.code == "E0761"


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="no ptxas binary on PATH")
def test_real_ptxas_agrees_with_nvjitlink():
    a = link_ptx(SMEM_PTX, SM_90, ptxas=shutil.which("ptxas"), env={})
    b = link_ptx(SMEM_PTX, SM_90, env={})
    assert a.cubin[:4] == b"\x7fELF"
    assert a.resources["smem_kernel"] == b.resources["smem_kernel"]


def test_bad_nvjitlink_option_is_internal_error(tmp_path):
    with pytest.raises(InternalCompilerError) as e:
        link_ptx(SMEM_PTX, SM_90, extra_options=["-bogus"], save_dir=str(tmp_path))
    assert "ERROR_UNRECOGNIZED_OPTION" in "\n".join(e.value.diagnostics[0].notes)
