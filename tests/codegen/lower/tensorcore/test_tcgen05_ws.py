"""Warp specialization on sm_100a (docs/codegen.md, "sm_100a"): a block of four epilogue
warps, a producer warp and an MMA warp (`@launch(reqntid = (192, 1, 1))`) runs the tcgen05
TMA ring specialized (lower/tensorcore/tcgen05_ws.py): the producer's elected thread copies
every stage once the MMAs released it (tcgen05.commit to the stage's empty mbarrier), the
MMA warp's elected thread waits for each stage's full mbarrier and issues the MMAs, the
epilogue warps wait for the final commit and read the accumulator out of tensor memory.
Results on the emulator (with its race checker) against NumPy, the PTX's protocol, the plan,
and nvJitLink's assembly (no local memory; each warp's loop shorter than the unspecialized
ring's)."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import numpy as np
import pytest

from wgmma_support import compile_for, one_group_matmul, product_bound, run

ROOT = Path(__file__).resolve().parents[4]
# the example's configuration on every target but sm_90a, with two more warps and without
# its cluster (in clusters of two along M the ring runs on the CTA pair:
# test_tcgen05_pair.py), so that the race checker follows every copy
SRC = one_group_matmul().replace("reqntid = (128, 1, 1)", "reqntid = (192, 1, 1)") \
    .replace(", cluster = (2, 1, 1)", "")
assert "reqntid = (192, 1, 1)" in SRC and "cluster = " not in SRC


def _arrays(m, n, k, seed=0, exact=True):
    rng = np.random.default_rng(seed)
    if exact:               # small integers: every product and partial sum exact in f32
        a = rng.integers(-3, 4, (m, k)).astype(np.float16)
        b = rng.integers(-3, 4, (k, n)).astype(np.float16)
    else:
        a = rng.standard_normal((m, k)).astype(np.float16)
        b = rng.standard_normal((k, n)).astype(np.float16)
    return {"a": a, "b": b, "c": np.full((m, n), np.nan, np.float32)}


@pytest.mark.parametrize("m,n,k,exact", [
    (128, 128, 448, True),           # 7 K-steps in 3 stages: the ring wraps twice
    (200, 136, 200, False),          # ragged on every side, two blocks each way
    (128, 128, 40, True),            # K below one step
    (130, 256, 64, True),            # one K-step (fewer than the stages), blocks along N
])
def test_matches_numpy(m, n, k, exact):
    arrays = _arrays(m, n, k, seed=m + n + k, exact=exact)
    res, rep = run(SRC, "matmul", arrays, (-(-m // 128), -(-n // 128)), target="sm_100a",
                   race_check=True)
    assert "tcgen05.mma" in res.ptx
    # the full/empty mbarriers order every refill after the MMAs' reads of the stage
    assert rep.race_check == "checked: no shared-memory race"
    want = arrays["a"].astype(np.float64) @ arrays["b"].astype(np.float64)
    if exact:
        assert np.array_equal(arrays["c"], want)
    else:
        assert (np.abs(arrays["c"] - want) <= product_bound(arrays["a"], arrays["b"])).all()


def test_protocol_and_contract():
    ptx = compile_for(SRC, "matmul", _arrays(256, 256, 256), target="sm_100a").ptx
    assert ".reqntid 192, 1, 1" in ptx
    # one loop per issuing warp: the producer's copies (two operands' panels) and the MMA
    # warp's four MMAs per stage, each committed to the stage's empty mbarrier, then one
    # commit to the completion mbarrier
    assert len(re.findall(r"tcgen05\.mma\.cta_group::1\.kind::f16 ", ptx)) == 4
    assert ptx.count("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64"
                     ) == 2
    assert "cp.async.bulk.tensor.2d.shared::cluster.global" in ptx
    # after the split only the epilogue warps go on: named barriers of their 128 threads
    body = ptx[ptx.index("tcgen05.ld.sync"):]
    assert "barrier.sync 1, 128;" in body and "bar.sync 0" not in body
    assert "mma.sync" not in ptx and "wgmma" not in ptx and ".local" not in ptx


def test_plan_says_warp_specialized(tmp_path):
    from tilelang.cli import main
    src = tmp_path / "matmul_ws.tile"
    src.write_text(SRC)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main([str(src), "--arch", "sm_100a", "--emit", "plan"])
    assert rc in (0, None)
    text = out.getvalue()
    assert "128 of 192 threads (exact)" in text
    assert "pipelined (tcgen05), TMA ring of 3 stages x 32 KB" in text
    assert "multicast: none; warp-specialized: yes" in text


def test_other_block_shapes_are_not_specialized():
    # 160 threads (one extra warp) is no tcgen05 block: mma.sync; 128 threads: the ring of
    # one issuing thread (tcgen05_pipeline.py)
    a = _arrays(128, 128, 64)
    ptx = compile_for(SRC.replace("(192, 1, 1)", "(160, 1, 1)"), "matmul", a,
                      target="sm_100a").ptx
    assert "tcgen05" not in ptx and "mma.sync" in ptx
    ptx = compile_for(SRC.replace("(192, 1, 1)", "(128, 1, 1)"), "matmul", a,
                      target="sm_100a").ptx
    assert "tcgen05.mma" in ptx and "barrier.sync 1, 128;" not in ptx


def test_sass_loops_are_shorter_than_the_single_issuer_ring():
    from tilelang import nvjitlink as lib
    from tilelang.tools import sass
    try:
        lib.library()
    except lib.NvJitLinkUnavailable:
        pytest.skip("nvJitLink is not installed")
    if not sass.tools_available():
        pytest.skip("cuobjdump / nvdisasm are not installed")
    from tilelang.driver import compile_source
    from tilelang.options import CompileOptions

    def loops(src):
        res = compile_source(src, "matmul.tile", CompileOptions(target="sm_100a"),
                             until="cubin")
        assert res.ok
        r = res.link.resources["matmul"]
        assert (r.spill_stores, r.spill_loads, r.stack_frame) == (0, 0, 0)
        ins = sass.disassemble(res.link.cubin)["matmul"]
        return [lp for lp in sass.loops(ins)
                if any(i.op in ("UTCHMMA", "UTMALDG") for i in lp.instrs)]

    single, = loops(SRC.replace("(192, 1, 1)", "(128, 1, 1)"))
    ws = loops(SRC)
    mma = [lp for lp in ws if any(i.op == "UTCHMMA" for i in lp.instrs)]
    copies = [lp for lp in ws if any(i.op == "UTMALDG" for i in lp.instrs)]
    assert len(mma) == 1 and len(copies) == 1 and mma != copies
    assert sum(i.op == "UTCHMMA" for i in mma[0].instrs) == 4
    # the MMA warp's loop carries only its waits, MMAs and commit; the producer's loop
    # (LLVM unrolls it by two: count per K-step) only its waits and copies
    steps = sum(i.op == "UTMALDG" for i in copies[0].instrs) // 3
    assert len(mma[0].instrs) < len(single.instrs)
    assert len(copies[0].instrs) / steps < len(single.instrs)


def test_persistent_ring_with_the_extra_warps_replicating():
    # a ring inside a persistent loop over output tiles that is not the accumulator pipeline
    # (R13: here a branch after the ring) is not specialized (R5): warps 4 and 5 replicate
    # warps 0 and 1, reaching the same TMEM lane quarters (warp w: 32(w mod 4)..)
    src = (ROOT / "examples" / "matmul_persistent.tile").read_text()
    store = "        store(c, index = (mn[0], mn[1]), tile = acc);\n"
    assert "sm_100a = (192, 1, 1)" in src and store in src
    src = src.replace(store, "        if mn[0] >= 0 {\n    " + store + "        }\n")
    rng = np.random.default_rng(1)
    a = rng.standard_normal((300, 200)).astype(np.float16)
    b = rng.standard_normal((200, 200)).astype(np.float16)
    c = np.zeros((300, 200), np.float32)
    res, rep = run(src, "matmul_persistent", {"a": a, "b": b, "c": c}, (2,),
                   target="sm_100a", race_check=True)
    assert "tcgen05.mma" in res.ptx and "barrier.sync 1, 128;" not in res.ptx
    assert rep.race_check == "checked: no shared-memory race"
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert (np.abs(c - ref) <= product_bound(a, b)).all()
