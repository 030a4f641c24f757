"""Source lines in the PTX (`tilec --lineinfo`, CompileOptions.lineinfo,
tilelang.compile(lineinfo=)):
`.file` names the .tile file and each op's instructions follow a `.loc` of its line; without
the option the PTX has neither. The PTX links with nvJitLink and runs on the emulator alike."""

from __future__ import annotations

import os
import re

import numpy as np
import pytest

import tilelang
from tilelang.cli import main
from tilelang.codegen.target.link import link_ptx
from tilelang.driver import compile_source
from tilelang.options import CompileOptions
from tilelang.runtime.emulator_backend import EmulatorBackend
from tilelang.targets import get_target

SCALE = """\
kernel scale(x: Array[f32, 1], y: Array[f32, 1]) {
    let i = bid(0);
    let t = load(x, index = (i,), shape = (128,));

    store(y, index = (i,), tile = t * 2.0);
}
"""
STORE_LINE = 5

GELU = """\
import std.math;

kernel act(x: Array[f32, 1], y: Array[f32, 1]) {
    let t = load(x, index = (bid(0),), shape = (128,));
    store(y, index = (bid(0),), tile = math.gelu(t));
}
"""


def _ptx(text, path, **kw):
    res = compile_source(text, path, CompileOptions(**kw), until="ptx")
    assert res.ok, [str(d) for d in res.diagnostics]
    return res.ptx


def _files(ptx):
    return dict(re.findall(r'^\s*\.file\s+(\d+)\s+"([^"]*)"', ptx, re.M))


def test_store_follows_the_loc_of_its_line(tmp_path):
    path = str(tmp_path / "scale.tile")
    ptx = _ptx(SCALE, path, lineinfo=True)
    assert _files(ptx) == {"1": os.path.abspath(path)}
    lines = ptx.splitlines()
    st = next(i for i, ln in enumerate(lines) if "st.global" in ln)
    locs = [ln.split() for ln in lines[:st] if ln.strip().startswith(".loc")]
    assert locs[-1][:3] == [".loc", "1", str(STORE_LINE)]
    ld = next(i for i, ln in enumerate(lines) if "ld.global" in ln)
    locs = [ln.split() for ln in lines[:ld] if ln.strip().startswith(".loc")]
    assert locs[-1][:3] == [".loc", "1", "3"]
    # every line named is a line of the source with code on it (0: LLVM merged two lines)
    named = {int(ln.split()[2]) for ln in lines if ln.strip().startswith(".loc")}
    assert named <= {0, 1, 2, 3, 5} and {3, 5} <= named
    assert ".debug_info" not in ptx and ".debug_abbrev" not in ptx   # line tables only


def test_off_by_default_and_unchanged(tmp_path):
    path = str(tmp_path / "scale.tile")
    plain = _ptx(SCALE, path)
    assert ".loc" not in plain and ".file" not in plain and ".section" not in plain
    with_lines = _ptx(SCALE, path, lineinfo=True)
    strip = [ln for ln in with_lines.splitlines()
             if not re.match(r"\s*(\.loc|\.file|\.section|\$L__(tmp|func))", ln)]
    # the same instructions; only the line directives (and their labels) differ
    assert [ln for ln in strip if ln.strip() and not ln.strip().startswith("//")] == \
        [ln for ln in plain.splitlines() if ln.strip() and not ln.strip().startswith("//")]
    assert CompileOptions().key() != CompileOptions(lineinfo=True).key()


def test_an_imported_function_names_its_own_file(tmp_path):
    path = str(tmp_path / "act.tile")
    ptx = _ptx(GELU, path, lineinfo=True)
    files = _files(ptx)
    assert os.path.abspath(path) in files.values()
    assert any(f.endswith(os.path.join("std", "math.tile")) for f in files.values())


@pytest.mark.parametrize("target", ["sm_80", "sm_90a"])
def test_links_with_nvjitlink(tmp_path, target):
    ptx = _ptx(SCALE, str(tmp_path / "scale.tile"), lineinfo=True, target=target)
    res = link_ptx(ptx, get_target(target))
    assert res.cubin[:4] == b"\x7fELF"


def test_cli_flag(tmp_path, capsys):
    src = tmp_path / "scale.tile"
    src.write_text(SCALE)
    out = tmp_path / "scale.ptx"
    assert main([str(src), "--emit", "ptx", "--lineinfo", "-o", str(out)]) == 0
    assert re.search(rf"^\s*\.loc\s+1 {STORE_LINE} ", out.read_text(), re.M)
    assert main([str(src), "--emit", "ptx", "-o", str(out)]) == 0
    assert ".loc" not in out.read_text()


def test_same_results_on_the_emulator(tmp_path):
    src = tmp_path / "act.tile"
    src.write_text(GELU)
    x = np.linspace(-3, 3, 256, dtype=np.float32)
    outs = []
    for lineinfo in (False, True):
        m = tilelang.compile(str(src), backend=EmulatorBackend(), cache_dir=str(tmp_path / "c"),
                             lineinfo=lineinfo)
        y = np.zeros_like(x)
        m.act[(2,)](x, y)
        outs.append(y)
    np.testing.assert_array_equal(outs[0], outs[1])
    xd = x.astype(np.float64)         # std.math.gelu: the tanh approximation
    ref = 0.5 * xd * (1 + np.tanh(np.sqrt(2 / np.pi) * (xd + 0.044715 * xd ** 3)))
    np.testing.assert_allclose(outs[1], ref, rtol=1e-5, atol=1e-6)


def test_lineinfo_must_be_a_bool():
    with pytest.raises(ValueError, match="`lineinfo` is 1; it is True or False"):
        tilelang.compile(SCALE, backend=EmulatorBackend(), lineinfo=1)


FLOW = """\
kernel flow(x: Array[i32, 1], y: Array[i32, 1]) {
    var acc = zeros((4,), i32);
    for i in range(8) {
        if i == 5 {
            break;
        }
        if i == 2 {
            continue;
        }
        acc = acc + load(x, index = (i,), shape = (4,));
    }
    print("acc {}", sum(acc));
    store(y, index = (0,), tile = acc);
}
"""


def test_loops_branches_and_print_keep_their_results():
    # every instruction carries a location, calls included (LLVM's verifier requires it in a
    # function with a subprogram): loops with break/continue and a device printf
    from gen_support import run_emulated
    x = np.arange(32, dtype=np.int32)
    want = sum(x[4 * i:4 * i + 4] for i in (0, 1, 3, 4))     # tile indices 0, 1, 3, 4
    for lineinfo in (False, True):
        res = compile_source(FLOW, "flow.tile", CompileOptions(target="sm_80", lineinfo=lineinfo),
                             until="ptx")
        assert res.ok, [str(d) for d in res.diagnostics]
        named = {int(m) for m in re.findall(r"^\s*\.loc\s+\d+\s+(\d+)", res.ptx, re.M)}
        if not lineinfo:
            assert not named and ".file" not in res.ptx
        else:
            assert {3, 4, 10, 12, 13} <= named <= {0, 1, 2, 3, 4, 5, 7, 8, 10, 12, 13}
        y = np.zeros(4, np.int32)
        rep = run_emulated(res.codegen, "flow", [x, y], (1, 1, 1))
        np.testing.assert_array_equal(y, want)
        assert rep.output.strip() == f"[block (0, 0, 0)] acc {want.sum()}"
