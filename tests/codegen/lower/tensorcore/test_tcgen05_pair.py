"""tcgen05 on a CTA pair (docs/codegen.md, "sm_100a"; plan/loops.py R9): examples/matmul.tile
declares clusters of two CTAs along x, the M tiles, and both CTAs of a cluster use the same B
tile, so on sm_100a its K loop runs on the pair (lower/tensorcore/tcgen05_pair.py): each CTA
copies its A rows and half of B's panels, both completing on the even CTA's mbarriers; the
even CTA issues `tcgen05.mma.cta_group::2` of M = 256 and commits them to both CTAs; each CTA
reads its rows from its own tensor memory, allocated with `cta_group::2`. With a producer and
an MMA warp (192 threads: the example's sm_100a default) the pair's ring is warp-specialized
(lower/tensorcore/tcgen05_ws.py): each CTA's producer warp copies, the even CTA's MMA warp
issues for both, the epilogue warps of both CTAs drain their own tensor memory.

Results on the emulator (whose reading of the 2-CTA instructions Triton's Gluon kernel judges:
tests/emulator/test_emu_tcgen05_pair.py) against NumPy. The pair under the emulator's strict
race check (clocks across the cluster's CTAs) is test_tcgen05_races.py's."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import numpy as np
import pytest

from tilelang.driver import compile_source
from tilelang.options import CompileOptions

from wgmma_support import compile_for, one_group_matmul, product_bound, run

ROOT = Path(__file__).resolve().parents[4]
SRC = one_group_matmul()       # the example's configuration on every target but sm_90a
assert "cluster = (2, 1, 1)" in SRC


def _arrays(m, n, k, dtype="f16", exact=True, seed=0):
    rng = np.random.default_rng(seed)
    if dtype == "bf16":
        import ml_dtypes
        npdt = ml_dtypes.bfloat16
    else:
        npdt = np.float16
    if exact:               # small integers: every product and partial sum exact in f32
        a = rng.integers(-3, 4, (m, k)).astype(npdt)
        b = rng.integers(-3, 4, (k, n)).astype(npdt)
    else:
        a = rng.standard_normal((m, k)).astype(npdt)
        b = rng.standard_normal((k, n)).astype(npdt)
    return {"a": a, "b": b, "c": np.full((m, n), np.nan, np.float32)}


@pytest.mark.parametrize("m,n,k,dtype,exact", [
    (256, 128, 64, "f16", True),     # one pair, one K-step
    (300, 136, 448, "f16", True),    # two pairs (the second CTA of the second one past M),
                                     # two tile columns, 7 K-steps: the ring wraps
    (130, 104, 200, "bf16", False),  # ragged everywhere
])
def test_matches_numpy(m, n, k, dtype, exact):
    src = SRC if dtype == "f16" else SRC.replace("f16", "bf16")
    arrays = _arrays(m, n, k, dtype, exact, seed=m + n + k)
    res, _ = run(src, "matmul", arrays, (-(-m // 128), -(-n // 128)), target="sm_100a")
    assert "tcgen05.mma.cta_group::2.kind::f16" in res.ptx
    a, b = arrays["a"], arrays["b"]
    want = a.astype(np.float64) @ b.astype(np.float64)
    if exact:
        assert np.array_equal(arrays["c"], want)
    else:
        assert (np.abs(arrays["c"] - want) <= product_bound(a, b)).all()


def test_protocol_and_contract():
    ptx = compile_for(SRC, "matmul", _arrays(256, 256, 256), target="sm_100a").ptx
    assert ".reqntid 128, 1, 1" in ptx and ".reqnctapercluster 2, 1, 1" in ptx
    for form in ("tcgen05.alloc.cta_group::2.sync.aligned.shared::cta.b32",
                 "tcgen05.relinquish_alloc_permit.cta_group::2.sync.aligned;",
                 "tcgen05.dealloc.cta_group::2.sync.aligned.b32"):
        assert ptx.count(form) == 1, form
    # K = 64: four M = 256 products per stage, committed to both CTAs' empty mbarriers, and
    # one commit to both CTAs' completion mbarriers
    assert len(re.findall(r"tcgen05\.mma\.cta_group::2\.kind::f16 ", ptx)) == 4
    assert ptx.count("tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster."
                     "multicast::cluster.b64") == 2
    assert "cta_group::1" not in ptx
    # each CTA's copies (A, and one of B's two 64-column panels) complete on the even CTA's
    # full mbarrier, whose bytes both CTAs announce
    assert "cp.async.bulk.tensor.2d.cta_group::2.shared::cluster.global" in ptx
    assert "mbarrier.arrive.expect_tx.shared::cluster.b64" in ptx
    assert "mapa.shared::cluster.u32" in ptx and "%cluster_ctarank" in ptx
    assert "barrier.cluster.wait.acquire.aligned;" in ptx


def test_plan_names_the_pair(tmp_path):
    from tilelang.cli import main
    out = io.StringIO()
    path = tmp_path / "matmul.tile"
    path.write_text(SRC)
    with contextlib.redirect_stdout(out):
        rc = main([str(path), "--arch", "sm_100a", "--emit", "plan"])
    assert rc in (0, None)
    assert "multicast: none; warp-specialized: no; CTA pair (cta_group::2, M = 256)" in \
        out.getvalue()


@pytest.mark.parametrize("change,why", [
    # the cluster along the N tiles: the CTAs share A, not B
    (("let m = bid(0);\n    let n = bid(1);", "let m = bid(1);\n    let n = bid(0);"),
     "B's tile differs between the cluster's CTAs"),
    # BN = 64: one panel of B, nothing to halve
    (("const BN: i32 = 128,", "const BN: i32 = 64,"),
     "B's tile is not an even number of panels along N"),
    # a cluster of four: no pair to speak of
    (("cluster = (2, 1, 1)", "cluster = (4, 1, 1)"), None),
])
def test_other_launches_keep_one_cta_products(change, why, tmp_path):
    src = SRC.replace(*change)
    assert src != SRC
    ptx = compile_for(src, "matmul", _arrays(256, 256, 128), target="sm_100a").ptx
    assert "tcgen05.mma.cta_group::1.kind::f16" in ptx and "cta_group::2" not in ptx
    from tilelang.cli import main
    path = tmp_path / "matmul.tile"
    path.write_text(src)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main([str(path), "--arch", "sm_100a", "--emit", "plan"]) in (0, None)
    if why is None:
        assert "CTA pair" not in out.getvalue()
    else:
        assert f"; not a CTA pair: {why}" in out.getvalue()


def test_launch_without_whole_pairs_is_refused():
    # the kernel relies on its pair: the PTX says so (.reqnctapercluster above), a launch
    # takes clusters of two from it, and a grid of an odd number of CTAs along x is refused,
    # not run with a missing peer
    from tilelang.emulator import EmulatorDevice
    from tilelang.emulator.errors import LaunchRefused
    from tilelang.runtime.tensormap import encode_emulator, map_args
    arrays = _arrays(256, 128, 64)
    res = compile_for(SRC, "matmul", arrays, target="sm_100a")
    art = res.codegen.kernel("matmul")
    assert art.cluster == (2, 1, 1)
    dev = EmulatorDevice()
    ptrs, args = {}, []
    for p in art.params:
        x = arrays[p.name]
        ptrs[p.name] = dev.to_device(x)
        args += [np.uint64(int(ptrs[p.name])), *map(np.int64, x.shape),
                 *(np.int64(st // x.itemsize) for st in x.strides)]
    for spec in art.tensor_maps:
        x = arrays[spec.array]
        args.append(encode_emulator(map_args(spec, int(ptrs[spec.array]), x.shape,
                                             [st // x.itemsize for st in x.strides])))
    fn = dev.load_module(res.ptx).get_function("matmul")
    with pytest.raises(LaunchRefused, match="cluster"):
        dev.launch(fn, (3, 1, 1), art.block, args, shared_mem=art.dynamic_smem)


def test_links_without_local_memory():
    from tilelang import nvjitlink as lib
    from tilelang.tools import sass
    try:
        lib.library()
    except lib.NvJitLinkUnavailable:
        pytest.skip("nvJitLink is not installed")
    res = compile_source(SRC, "matmul.tile", CompileOptions(target="sm_100a"), until="cubin")
    assert res.ok and res.link.backend == "nvjitlink"
    r = res.link.resources["matmul"]
    assert (r.spill_stores, r.spill_loads, r.stack_frame) == (0, 0, 0)
    if not sass.tools_available():
        return
    ins = sass.disassemble(res.link.cubin)["matmul"]
    loop, = [lp for lp in sass.loops(ins) if any(i.op == "UTCHMMA" for i in lp.instrs)]
    # per K-step: four M = 256 MMAs, A's copy and one of B's two panels
    assert sum(i.op == "UTCHMMA" for i in loop.instrs) == 4
    assert sum(i.op == "UTMALDG" for i in loop.instrs) == 2


# ---------------------------------------------------------------------------------------------
# The warp-specialized pair: 192 threads in clusters of two along M

WS = SRC.replace("reqntid = (128, 1, 1)", "reqntid = (192, 1, 1)")
assert WS != SRC


@pytest.mark.parametrize("m,n,k,dtype,exact", [
    (256, 128, 64, "f16", True),     # one pair, one K-step (fewer than the stages)
    (300, 136, 448, "f16", True),    # two pairs (the second's odd CTA wholly past M), two
                                     # tile columns, 7 K-steps in 3 stages: the ring wraps
    (130, 104, 200, "bf16", False),  # ragged everywhere
    (256, 256, 40, "f16", True),     # K below one step
])
def test_specialized_pair_matches_numpy(m, n, k, dtype, exact):
    src = WS if dtype == "f16" else WS.replace("f16", "bf16")
    arrays = _arrays(m, n, k, dtype, exact, seed=m + n + k + 1)
    res, _ = run(src, "matmul", arrays, (2 * -(-m // 256), -(-n // 128)), target="sm_100a")
    assert "tcgen05.mma.cta_group::2.kind::f16" in res.ptx and ".reqntid 192, 1, 1" in res.ptx
    a, b = arrays["a"], arrays["b"]
    want = a.astype(np.float64) @ b.astype(np.float64)
    if exact:
        assert np.array_equal(arrays["c"], want)
    else:
        assert (np.abs(arrays["c"] - want) <= product_bound(a, b)).all()


def test_specialized_pair_protocol():
    ptx = compile_for(WS, "matmul", _arrays(256, 256, 256), target="sm_100a").ptx
    assert ".reqntid 192, 1, 1" in ptx and ".reqnctapercluster 2, 1, 1" in ptx
    for form in ("tcgen05.alloc.cta_group::2.sync.aligned.shared::cta.b32",
                 "tcgen05.relinquish_alloc_permit.cta_group::2.sync.aligned;",
                 "tcgen05.dealloc.cta_group::2.sync.aligned.b32"):
        assert ptx.count(form) == 1, form
    # the MMA warp's loop: four M = 256 products per stage committed to both CTAs' empty
    # mbarriers; after it one commit to both CTAs' completion mbarriers
    assert len(re.findall(r"tcgen05\.mma\.cta_group::2\.kind::f16 ", ptx)) == 4
    assert ptx.count("tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster."
                     "multicast::cluster.b64") == 2
    assert "cta_group::1" not in ptx
    # the producer's copies (A, one of B's two panels: LLVM unrolls its loop) complete on
    # the even CTA's full[s]
    n = ptx.count("cp.async.bulk.tensor.2d.cta_group::2.shared::cluster.global")
    assert n >= 2 and n % 2 == 0
    assert "cp.async.bulk.tensor.2d.shared::cluster.global" not in ptx
    assert "mbarrier.arrive.expect_tx.shared::cluster.b64" in ptx
    assert "mapa.shared::cluster.u32" in ptx and "%cluster_ctarank" in ptx
    # cluster barriers: before the allocation, after the setup, before the deallocation
    # (the last one met by every thread, the producer and MMA warps too: LLVM may give
    # their path a copy of its own)
    assert ptx.count("barrier.cluster.wait.acquire.aligned;") in (3, 4)
    free = ptx.index("tcgen05.dealloc")
    assert ptx.rindex("barrier.cluster.wait.acquire.aligned;", 0, free) > \
        ptx.rindex("barrier.sync 1, 128;", 0, free)
    # after the split the epilogue warps' barriers are named barriers of their 128 threads
    body = ptx[ptx.index("tcgen05.ld.sync"):]
    assert "barrier.sync 1, 128;" in body and "bar.sync 0" not in body
    assert ".local" not in ptx


def test_specialized_pair_plan(tmp_path):
    from tilelang.cli import main
    out = io.StringIO()
    path = tmp_path / "matmul.tile"
    path.write_text(WS)
    with contextlib.redirect_stdout(out):
        assert main([str(path), "--arch", "sm_100a", "--emit", "plan"]) in (0, None)
    assert "128 of 192 threads (exact)" in out.getvalue()
    assert "multicast: none; warp-specialized: yes; CTA pair (cta_group::2, M = 256)" in \
        out.getvalue()


def test_specialized_pair_sass():
    # per K-step the even CTA's MMA warp issues four M = 256 products (half the issue work
    # per output row of the one-CTA specialized ring's), each producer copies A and one of
    # B's two panels (one copy fewer)
    from tilelang import nvjitlink as lib
    from tilelang.tools import sass
    try:
        lib.library()
    except lib.NvJitLinkUnavailable:
        pytest.skip("nvJitLink is not installed")
    if not sass.tools_available():
        pytest.skip("cuobjdump / nvdisasm are not installed")

    def loops(src):
        res = compile_source(src, "matmul.tile", CompileOptions(target="sm_100a"),
                             until="cubin")
        assert res.ok
        r = res.link.resources["matmul"]
        assert (r.spill_stores, r.spill_loads, r.stack_frame) == (0, 0, 0)
        ins = sass.disassemble(res.link.cubin)["matmul"]
        return [lp for lp in sass.loops(ins)
                if any(i.op in ("UTCHMMA", "UTMALDG") for i in lp.instrs)]

    mma, copies = [], []
    for lp in loops(WS):
        (mma if any(i.op == "UTCHMMA" for i in lp.instrs) else copies).append(lp)
    assert len(mma) == 1 and len(copies) == 1
    assert sum(i.op == "UTCHMMA" for i in mma[0].instrs) == 4
    assert not any(i.op == "UTMALDG" for i in mma[0].instrs)
    single = loops(WS.replace(", cluster = (2, 1, 1)", ""))
    single_copies, = [lp for lp in single if not any(i.op == "UTCHMMA" for i in lp.instrs)]

    def per_step(lp, copies_per_step):
        return len(lp.instrs) / (sum(i.op == "UTMALDG" for i in lp.instrs) / copies_per_step)
    # two copies a K-step on the pair (A, half of B), three alone (A, B's two panels)
    assert per_step(copies[0], 2) < per_step(single_copies, 3)
