"""codegen/target/register_fit.py: after nvJitLink, a kernel a few registers above an occupancy step is
linked again with `.maxnreg` at the step, kept only when that costs no spills."""

from __future__ import annotations

import pathlib
import re
from types import SimpleNamespace

import pytest

from tilelang.codegen.target import register_fit as rf
from tilelang.codegen.target.link import KernelResources
from tilelang.codegen.plan import reloads as reload   # the budgets: the reloads pass
from tilelang.codegen.occupancy import occupancy
from tilelang.driver import compile_source
from tilelang.options import CompileOptions
from tilelang.targets import get_target

ROOT = pathlib.Path(__file__).resolve().parents[3]


def test_step_below():
    # 128 threads on sm_90a: 34 registers fit 12 blocks, 32 fit 16 (the thread limit)
    assert rf.step_below("sm_90a", 128, 34, 0) == 32
    assert rf.step_below("sm_90a", 128, 40, 0) == 32
    assert rf.step_below("sm_90a", 128, 41, 0) == 40
    assert rf.step_below("sm_90a", 128, 105, 0) is None      # 9 above the step: its own need
    assert rf.step_below("sm_90a", 128, 28, 0) is None       # already at full occupancy
    assert rf.step_below("sm_90a", 128, 162, 0) is None      # the step below is 128
    assert rf.step_below("sm_90a", 128, 170, 0) == 168
    # limited by shared memory, not registers: fewer registers gain nothing
    assert rf.step_below("sm_90a", 128, 34, 100 * 1024) is None
    for regs in range(24, 256):
        cap = rf.step_below("sm_90a", 256, regs, 0)
        if cap is not None:
            assert regs - rf.MARGIN <= cap < regs
            assert occupancy("sm_90a", 256, cap).blocks_per_sm > \
                occupancy("sm_90a", 256, regs).blocks_per_sm


PTX = """\
.version 7.8
.target sm_90
.address_size 64

.visible .entry a(
\t.param .u64 a_param_0
)
.reqntid 128, 1, 1
{
\tret;
}

.visible .entry b(
\t.param .u64 b_param_0
)
.maxntid 256, 1, 1
.minnctapersm 2
.explicitcluster
{
\tret;
}
"""


def test_with_maxnreg_goes_where_ptx_header_orders_it():
    out = rf.with_maxnreg(PTX, {"a": 32, "b": 64})
    assert ")\n.reqntid 128, 1, 1\n.maxnreg 32\n{" in out
    assert ")\n.maxntid 256, 1, 1\n.minnctapersm 2\n.maxnreg 64\n.explicitcluster\n{" in out
    assert rf.with_maxnreg(PTX, {"b": 64}).count(".maxnreg") == 1
    assert rf.with_maxnreg(PTX, {}) == PTX


def _res(name, regs, spills=0, frame=0):
    return KernelResources(name, regs, spills, spills, frame)


def _codegen(*names, fixed=()):
    attrs = SimpleNamespace(maxnreg=None, minctasm=None)
    fixed_attrs = SimpleNamespace(maxnreg=64, minctasm=None)
    return SimpleNamespace(kernels=tuple(
        SimpleNamespace(name=n, block=(128, 1, 1), static_smem=0, dynamic_smem=0,
                        attrs=fixed_attrs if n in fixed else attrs) for n in names))


def test_refit_keeps_what_pays_and_drops_what_spills():
    first = SimpleNamespace(resources={"a": _res("a", 34), "b": _res("b", 36)})
    seen = []

    def link(ptx):
        seen.append(re.findall(r"\.entry (\w+)[^{]*\.maxnreg (\d+)", ptx, re.S))
        capped = dict(seen[-1])
        # `a` fits in 32 registers; `b` spills when capped
        return SimpleNamespace(resources={
            "a": _res("a", 32 if "a" in capped else 34),
            "b": _res("b", 32, spills=8) if "b" in capped else _res("b", 36)})
    ptx, linked = rf.refit(PTX, _codegen("a", "b"), get_target("sm_90a"), first, link)
    assert seen == [[("a", "32"), ("b", "32")], [("a", "32")]]
    assert ".maxnreg 32" in ptx and ptx.count(".maxnreg") == 1
    assert linked.resources["a"].registers == 32


def test_refit_takes_a_second_step_when_the_first_lands_near_the_next():
    """44 registers: the step below is 40 (12 blocks of 128 threads); linked at 40, the next
    step, 32 (16 blocks), is within MARGIN and is tried too, kept when it spills nothing; when
    it spills, the first step stands."""
    first = SimpleNamespace(resources={"a": _res("a", 44)})
    for spills_at_32 in (False, True):
        seen = []

        def link(ptx):
            cap = int(re.search(r"\.maxnreg (\d+)", ptx).group(1))
            seen.append(cap)
            spill = 8 if cap == 32 and spills_at_32 else 0
            return SimpleNamespace(resources={"a": _res("a", cap, spills=spill)})
        ptx, linked = rf.refit(PTX, _codegen("a"), get_target("sm_90a"), first, link)
        assert seen == [40, 32]
        want = 40 if spills_at_32 else 32
        assert ptx.count(".maxnreg") == 1 and f".maxnreg {want}" in ptx
        assert linked.resources["a"].registers == want


def test_refit_leaves_contract_choices_and_full_occupancy_alone():
    first = SimpleNamespace(resources={"a": _res("a", 34), "b": _res("b", 28)})

    def link(ptx):
        raise AssertionError("no second link expected")
    assert rf.refit(PTX, _codegen("a", "b", fixed=("a",)), get_target("sm_90a"), first,
                    link) == \
        (PTX, first)


def test_a_failing_second_link_keeps_the_first():
    first = SimpleNamespace(resources={"a": _res("a", 34)})

    def link(ptx):
        raise RuntimeError("boom")
    assert rf.refit(PTX, _codegen("a"), get_target("sm_90a"), first, link) == (PTX, first)


def test_vadd_reaches_full_occupancy():
    """examples/vadd.tile links at 100% occupancy on sm_90a, and the PTX --emit ptx gives has
    no .maxnreg (only a link can decide one)."""
    res = compile_source((ROOT / "examples" / "vadd.tile").read_text(), "vadd.tile",
                         CompileOptions(target="sm_90a"))
    if not res.ok and any(d.code == "E0762" for d in res.diagnostics):
        pytest.skip("nvJitLink is not installed")
    assert res.ok, res.diagnostics
    r = res.link.resources["vadd"]
    assert r.spill_stores == r.spill_loads == 0
    assert occupancy("sm_90a", 128, r.registers).fraction == 1.0
    assert ".maxnreg" not in compile_source((ROOT / "examples" / "vadd.tile").read_text(),
                                            "vadd.tile", CompileOptions(target="sm_90a"),
                                            until="ptx").ptx


# examples/vadd.tile's PTX for sm_90a as the compiler emitted it on 2026-11-24 (before the
# virtual-thread rework): `.maxntid 128`, 34 registers through nvJitLink, 28 through ptxas.
GAP_PTX = (ROOT / "tests" / "codegen" / "golden" / "link" / "vadd_maxntid_sm90a_ptx.txt")


def test_refit_closes_a_real_relocatable_gap():
    from tilelang import nvjitlink
    from tilelang.codegen.target.link import link_ptx
    try:
        nvjitlink.library()
    except nvjitlink.NvJitLinkUnavailable:
        pytest.skip("nvJitLink is not installed")
    ptx = GAP_PTX.read_text()

    def link(text):
        return link_ptx(text, get_target("sm_90a"), env={})
    first = link(ptx)
    assert first.resources["vadd"].registers == 34         # nvJitLink 13.5
    ptx2, linked = rf.refit(ptx, _codegen("vadd"), get_target("sm_90a"), first, link)
    assert ".maxntid 128, 1, 1\n.maxnreg 32\n{" in ptx2
    r = linked.resources["vadd"]
    assert r.registers == 32 and r.spill_stores == r.spill_loads == 0
    assert occupancy("sm_90a", 128, 32).fraction == 1.0 > occupancy("sm_90a", 128, 34).fraction


def test_deep_tries_reach_half_occupancy_then_the_step():
    # 128 threads on sm_90a: 96 registers fit 5 blocks (31%), 80 fit 6, 64 fit 8 (50%)
    assert rf.deep("sm_90a", 128, 96, 0) == [64, 80]
    assert rf.deep("sm_90a", 256, 96, 0) == [64, 80]      # 2 blocks of 256; 3 at 80; 4 at 64
    assert rf.deep("sm_90a", 128, 88, 0) == []            # within MARGIN: step_below's
    assert rf.deep("sm_90a", 128, 72, 0) == []            # 44%, but 64 is within MARGIN
    assert rf.deep("sm_90a", 128, 64, 0) == []            # already at LOW
    assert rf.deep("sm_90a", 128, 230, 0) == []           # above DEEP_MAX: its own need
    assert rf.deep("sm_90a", 128, 96, 100 * 1024) == []   # shared memory limits it
    for regs in range(rf.MIN_REGS + 1, rf.DEEP_MAX + 1):
        tries = rf.deep("sm_90a", 128, regs, 0)
        assert len(tries) <= 2 and all(c < regs - rf.MARGIN for c in tries)
        if tries:
            assert occupancy("sm_90a", 128, tries[0]).fraction >= rf.LOW


def _deep_link(spill_below, seen):
    """A link where kernel `a` spills under a cap below `spill_below` and otherwise meets it."""
    def link(ptx):
        caps = dict(re.findall(r"\.entry (\w+)[^{]*\.maxnreg (\d+)", ptx, re.S))
        seen.append({k: int(v) for k, v in caps.items()})
        cap = int(caps.get("a", 96))
        res = _res("a", cap, spills=8, frame=16) if cap < spill_below else _res("a", cap)
        return SimpleNamespace(resources={"a": res, "b": _res("b", 28)})
    return link


@pytest.mark.parametrize("spill_below, want, links", [
    (0, 32, [{"a": 64}, {"a": 32}]),            # reaches 50% at once, then full occupancy
    (40, 64, [{"a": 64}, {"a": 32}]),           # ... where it spills: 50% stands
    (72, 80, [{"a": 64}, {"a": 80}]),           # spills at 64: the step below stands
    (96, None, [{"a": 64}, {"a": 80}]),         # spills at both: the first link stands
])
def test_refit_deep(spill_below, want, links):
    first = SimpleNamespace(resources={"a": _res("a", 96), "b": _res("b", 28)})
    seen = []
    ptx, linked = rf.refit(PTX, _codegen("a", "b"), get_target("sm_90a"), first,
                           _deep_link(spill_below, seen))
    assert seen == links
    if want is None:
        assert (ptx, linked) == (PTX, first)
    else:
        assert ptx.count(".maxnreg") == 1 and f".maxnreg {want}" in ptx
        r = linked.resources["a"]
        assert r.registers == want and r.spill_stores == r.spill_loads == r.stack_frame == 0


def test_refit_deep_next_to_a_margin_step():
    """`b` takes the MARGIN step (34 -> 32) in the first link; `a`'s deep tries keep it."""
    first = SimpleNamespace(resources={"a": _res("a", 96), "b": _res("b", 34)})
    seen = []

    def link(ptx):
        caps = {k: int(v) for k, v in re.findall(r"\.entry (\w+)[^{]*\.maxnreg (\d+)", ptx, re.S)}
        seen.append(caps)
        a = caps.get("a", 96)
        return SimpleNamespace(resources={"a": _res("a", a, spills=4 if a < 72 else 0),
                                          "b": _res("b", caps.get("b", 34))})
    ptx, linked = rf.refit(PTX, _codegen("a", "b"), get_target("sm_90a"), first, link)
    assert seen == [{"b": 32}, {"a": 64, "b": 32}, {"a": 80, "b": 32}]
    assert linked.resources["a"].registers == 80 and linked.resources["b"].registers == 32
    assert ".reqntid 128, 1, 1\n.maxnreg 80\n{" in ptx and ".maxnreg 32" in ptx


def _softmax_ieee_4096(monkeypatch, **kw):
    """The example softmax at N = 4,096 in precision "ieee" with its row kept in registers
    (lower/reload.py re-reads it instead since: 40 registers, 75%), the kernel whose
    relocatable compile costs most."""
    monkeypatch.setattr(reload, "BUDGET", 1 << 30)
    monkeypatch.setattr(reload, "CHEAP_BUDGET", 1 << 30)
    res = compile_source((ROOT / "examples" / "softmax.tile").read_text(), "softmax.tile",
                         CompileOptions(target="sm_90a", precision="ieee"),
                         kernels=["softmax_rows"], consts={"N": 4096}, **kw)
    if not res.ok and any(d.code == "E0762" for d in res.diagnostics):
        pytest.skip("nvJitLink is not installed")
    assert res.ok, res.diagnostics
    return res


def _nvjitlink_or_skip():
    from tilelang import nvjitlink
    try:
        nvjitlink.library()
    except nvjitlink.NvJitLinkUnavailable:
        pytest.skip("nvJitLink is not installed")


def test_softmax_ieee_4096_reaches_half_occupancy(monkeypatch):
    """nvJitLink alone: 85 registers, 37% at 128 threads (whole-program ptxas: 56); the MARGIN
    steps take it to 72 (44%), and capped at 64 it spills nothing, so the driver keeps 64
    (50%)."""
    _nvjitlink_or_skip()
    res = _softmax_ieee_4096(monkeypatch)
    r = res.link.resources["softmax_rows"]
    assert r.registers <= 64 and r.spill_stores == r.spill_loads == r.stack_frame == 0
    assert occupancy("sm_90a", 128, r.registers).fraction >= 0.5
    assert ".reqntid 128, 1, 1\n.maxnreg 64\n{" in res.ptx


def test_a_cap_that_really_spills_is_refused(monkeypatch):
    """With LOW raised to 75% the deep try is 40 registers, where this softmax really spills
    (nvJitLink 13.5: some 200 bytes stored); that link is refused and what the MARGIN steps
    reached is kept."""
    _nvjitlink_or_skip()
    from tilelang.codegen.target.link import link_ptx
    ptx = _softmax_ieee_4096(monkeypatch, until="ptx").ptx
    seen = []

    def link(text):
        out = link_ptx(text, get_target("sm_90a"), env={})
        seen.append(out.resources["softmax_rows"])
        return out
    first = link(ptx)
    monkeypatch.setattr(rf, "LOW", 0.75)
    ptx2, linked = rf.refit(ptx, _codegen("softmax_rows"), get_target("sm_90a"), first, link)
    refused = [t for t in seen[1:] if t.spill_stores > 0]
    if not refused:
        pytest.skip("this nvJitLink fits softmax ieee@4,096 in 40 registers")
    assert refused[-1].registers <= 40 and ".maxnreg 40\n" not in ptx2
    r = linked.resources["softmax_rows"]
    cap = re.search(r"\.maxnreg (\d+)\n", ptx2)
    assert cap and 40 < int(cap.group(1)) < seen[0].registers and r.registers <= int(cap.group(1))
    assert r.spill_stores == r.spill_loads == r.stack_frame == 0


def test_full_is_where_registers_stop_limiting():
    # 128 threads on sm_90a: 32 registers or fewer fit the 16 blocks the thread limit allows
    assert rf.full("sm_90a", 128, 64, 0) == 32
    assert rf.full("sm_90a", 128, 33, 0) == 32
    assert rf.full("sm_90a", 128, 65, 0) is None          # above FULL_MAX
    assert rf.full("sm_90a", 128, 32, 0) is None          # not limited by registers
    assert rf.full("sm_90a", 256, 48, 0) == 32
    assert rf.full("sm_90a", 128, 48, 100 * 1024) is None  # shared memory limits it
    for regs in range(rf.MIN_REGS + 1, rf.FULL_MAX + 1):
        c = rf.full("sm_90a", 128, regs, 0)
        if c is not None:
            assert occupancy("sm_90a", 128, c).fraction == 1.0 > \
                occupancy("sm_90a", 128, regs).fraction


def test_the_full_try_skips_a_cap_already_refused():
    """`b` spilled at 32 in the MARGIN step: the full-occupancy try does not link it again."""
    first = SimpleNamespace(resources={"a": _res("a", 34), "b": _res("b", 36)})
    seen = []

    def link(ptx):
        caps = {k: int(v) for k, v in re.findall(r"\.entry (\w+)[^{]*\.maxnreg (\d+)", ptx,
                                                 re.S)}
        seen.append(caps)
        return SimpleNamespace(resources={
            "a": _res("a", caps.get("a", 34)),
            "b": _res("b", 32, spills=8) if "b" in caps else _res("b", 36)})
    rf.refit(PTX, _codegen("a", "b"), get_target("sm_90a"), first, link)
    assert seen == [{"a": 32, "b": 32}, {"a": 32}]


def test_rows_of_8192_reach_full_occupancy():
    """softmax over 8,192-wide rows (re-loaded: 16 vectors per pass), specialized as the
    runtime specializes it for contiguous aligned rows, links at 75 registers (ptxas hoists a
    pass's loads); the MARGIN steps reach 64 and the full-occupancy try 32, with no spill.
    (Compiled without array facts it spills 4 bytes at 32: 64 stands.)"""
    import numpy as np
    from masked_support import facts_of
    _nvjitlink_or_skip()
    x = np.zeros((2, 8192), np.float32)
    res = compile_source((ROOT / "examples" / "softmax.tile").read_text(), "softmax.tile",
                         CompileOptions(target="sm_90a"), kernels=["softmax_rows"],
                         consts={"N": 8192}, facts={"softmax_rows": facts_of({"x": x, "y": x})})
    assert res.ok, res.diagnostics
    r = res.link.resources["softmax_rows"]
    assert r.registers <= 32 and r.spill_stores == r.spill_loads == r.stack_frame == 0
    assert ".maxnreg 32\n" in res.ptx


# a spilling default cap (relax) ------------------------------------------------------------

CAPPED = PTX.replace(".reqntid 128, 1, 1\n", ".reqntid 128, 1, 1\n.maxnreg 72\n")


def test_without_maxnreg_drops_only_the_named_entries():
    both = rf.with_maxnreg(PTX, {"a": 72, "b": 64})
    assert rf.without_maxnreg(both, {"a"}) == rf.with_maxnreg(PTX, {"b": 64})
    assert rf.without_maxnreg(both, {"a", "b"}) == PTX
    assert rf.without_maxnreg(both, set()) == both


def _default_capped(name="a", default=True):
    attrs = SimpleNamespace(maxnreg=72, minctasm=None)
    return SimpleNamespace(kernels=(SimpleNamespace(
        name=name, block=(128, 1, 1), static_smem=0, dynamic_smem=0, attrs=attrs,
        default_maxnreg=default),))


def _wgmma_link(seen, spills_uncapped=False):
    """A kernel that needs 87 registers: any cap below spills (8 bytes per missing register)."""
    def link(ptx):
        cap = rf.caps_in(ptx).get("a")
        seen.append(cap)
        if cap is None:
            return SimpleNamespace(resources={"a": _res("a", 87, spills=16 * spills_uncapped)})
        return SimpleNamespace(resources={"a": _res("a", cap, spills=8 * (87 - cap))})
    return link


def test_a_spilling_default_cap_is_dropped():
    """The launch contract's `.maxnreg 72` (wgmma_maxnreg) spills; without it the kernel takes
    87 registers and spills nothing, so the cap goes. Then it is fitted like any other: the
    step below 87 at 128 threads is 80 (6 blocks instead of 5), which spills here: refused."""
    seen = []
    link = _wgmma_link(seen)
    first = link(CAPPED)
    ptx, linked = rf.refit(CAPPED, _default_capped(), get_target("sm_90a"), first, link)
    assert seen == [72, None, 80]
    assert ptx == PTX and ".maxnreg" not in ptx
    assert linked.resources["a"] == _res("a", 87)


def test_a_default_cap_that_spills_either_way_stays():
    seen = []
    link = _wgmma_link(seen, spills_uncapped=True)
    first = link(CAPPED)
    ptx, linked = rf.refit(CAPPED, _default_capped(), get_target("sm_90a"), first, link)
    assert seen == [72, None]
    assert (ptx, linked) == (CAPPED, first)


def test_a_users_cap_stands_even_when_it_spills():
    seen = []
    link = _wgmma_link(seen)
    first = link(CAPPED)
    ptx, linked = rf.refit(CAPPED, _default_capped(default=False), get_target("sm_90a"), first,
                           link)
    assert seen == [72]
    assert (ptx, linked) == (CAPPED, first)


def test_matmul_epilogue_spills_nothing_on_sm90a():
    """examples/matmul_epilogue.tile on sm_90a spilled 52 B under the contract's default
    `.maxnreg 72` (nvJitLink 13.x); the driver drops the cap (87 registers, no local memory)."""
    _nvjitlink_or_skip()
    path = ROOT / "examples" / "matmul_epilogue.tile"
    ptx = compile_source(path.read_text(), str(path), CompileOptions(target="sm_90a"),
                         until="ptx").ptx
    assert ".maxnreg 72\n" in ptx                   # the contract's default, before the link
    res = compile_source(path.read_text(), str(path), CompileOptions(target="sm_90a"),
                         until="cubin")
    assert res.ok, res.diagnostics
    r = res.link.resources["matmul_bias_gelu"]
    assert r.spill_stores == r.spill_loads == r.stack_frame == 0
    assert ".maxnreg 72\n" not in res.ptx
