"""tcgen05 products on sm_100a (docs/codegen.md, "sm_100a"): `mma` / `@` with an f32
accumulator of 128 rows in a block of four warps lower to `tcgen05.mma.cta_group::1.kind::f16`
with the accumulator in tensor memory, issued by one thread, completion through
`tcgen05.commit` to an mbarrier, the epilogue through `tcgen05.ld`, TMEM allocated once per
kernel (alloc / relinquish_alloc_permit / dealloc).

Results come from the emulator, whose tcgen05 decodes the descriptors, the instruction
descriptor and TMEM on its own (it runs Triton's sm_100a matmuls against NumPy), compared with
NumPy; the cubin comes from nvJitLink."""

from __future__ import annotations

import pathlib
import re

import numpy as np
import pytest

from tilelang.driver import compile_source
from tilelang.options import CompileOptions

from wgmma_support import compile_for, one_group_matmul, product_bound, run

ROOT = pathlib.Path(__file__).resolve().parents[4]
# the example at one warp group's configuration (wgmma_support.one_group_matmul); without
# its cluster of two the product is one CTA's (cta_group::1), with it the CTA pair's
# (test_tcgen05_pair.py)
EXAMPLE = one_group_matmul()
MATMUL = EXAMPLE.replace(", cluster = (2, 1, 1)", "")
assert MATMUL != EXAMPLE


def operands(shape_a, shape_b, dtype="f16", seed=0, exact=True):
    rng = np.random.default_rng(seed)
    if dtype == "bf16":
        import ml_dtypes
        npdt = ml_dtypes.bfloat16
    else:
        npdt = np.float16
    if exact:       # small integers times 1/8: every product and partial sum exact in f32
        a = (rng.integers(-8, 9, shape_a) / 8).astype(npdt)
        b = (rng.integers(-8, 9, shape_b) / 8).astype(npdt)
    else:
        a = rng.standard_normal(shape_a).astype(npdt)
        b = rng.standard_normal(shape_b).astype(npdt)
    return a, b


def matmul(M, N, K, dtype="f16", exact=True, bn=128, race_check=False, tma=None):
    src = MATMUL if dtype == "f16" else MATMUL.replace("f16", "bf16")
    a, b = operands((M, K), (K, N), dtype, seed=M + N + K, exact=exact)
    c = np.zeros((M, N), np.float32)
    res, _ = run(src, "matmul", {"a": a, "b": b, "c": c}, (-(-M // 128), -(-N // bn)),
                 target="sm_100a", defines={"BN": bn} if bn != 128 else None,
                 race_check=race_check, tma=tma)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    return res, c, ref, a, b


def test_matmul_example_emits_tcgen05_with_tensor_memory():
    a, b = operands((256, 64), (64, 256))
    c = np.zeros((256, 256), np.float32)
    ptx = compile_for(MATMUL, "matmul", {"a": a, "b": b, "c": c}, target="sm_100a").ptx
    assert ".target sm_100a" in ptx and ".reqntid 128, 1, 1" in ptx
    for text in ("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32",
                 "tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;",
                 "tcgen05.st.sync.aligned.32x32b.x128.b32",
                 "tcgen05.ld.sync.aligned.32x32b.x128.b32", "tcgen05.wait::ld.sync.aligned;",
                 "tcgen05.dealloc.cta_group::1.sync.aligned.b32"):
        assert ptx.count(text) == 1, text
    # K = 64: four k-steps of 16, each one instruction for the whole 128 x 128 accumulator;
    # one commit per stage (to its empty mbarrier) and one when the loop is done
    assert len(re.findall(r"tcgen05\.mma\.cta_group::1\.kind::f16 ", ptx)) == 4
    assert ptx.count("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64"
                     ) == 2
    # the TMA ring: the operands' bulk tensor copies, no cp.async
    assert "cp.async.bulk.tensor.2d.shared::cluster.global" in ptx and "cp.async.cg" not in ptx
    assert "mma.sync" not in ptx and "wgmma" not in ptx and ".local" not in ptx


def test_without_tma_each_product_stages_its_operands():
    # no tensor maps: the loop is not pipelined; cp.async copies (rows of 16-byte multiples),
    # one product at a time
    a, b = operands((130, 128), (128, 192), seed=7)
    c = np.zeros((130, 192), np.float32)
    res, _ = run(MATMUL, "matmul", {"a": a, "b": b, "c": c}, (2, 2), target="sm_100a",
                 tma=False)
    assert "tcgen05.mma" in res.ptx and "cp.async.bulk.tensor" not in res.ptx
    assert "cp.async.cg" in res.ptx
    np.testing.assert_array_equal(c, (a.astype(np.float64) @ b.astype(np.float64)
                                      ).astype(np.float32))


def test_plan_shows_the_tcgen05_decision(tmp_path):
    from tilelang.cli import main
    import contextlib
    import io
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main([str(ROOT / "examples" / "matmul.tile"), "--arch", "sm_100a",
                   "--emit", "plan"])
    assert rc in (0, None)
    assert "tcgen05 kind::f16 m128n128k16: 4 instruction(s) per product, 128 TMEM " \
           "columns (R4)" in out.getvalue()
    # the example's sm_100a default: 192 threads in clusters of two along M, the
    # warp-specialized ring on the CTA pair
    assert "warp-specialized: yes; CTA pair (cta_group::2, M = 256)" in out.getvalue()
    pair = tmp_path / "pair.tile"
    pair.write_text(EXAMPLE)          # 128 threads in clusters of two: the CTA pair
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main([str(pair), "--arch", "sm_100a", "--emit", "plan"])
    assert rc in (0, None)
    assert "CTA pair (cta_group::2, M = 256)" in out.getvalue()
    single = tmp_path / "matmul.tile"
    single.write_text(MATMUL)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main([str(single), "--arch", "sm_100a", "--emit", "plan"])
    assert rc in (0, None) and "CTA pair" not in out.getvalue()
    assert "pipelined (tcgen05), TMA ring of 3 stages x 32 KB" in out.getvalue()


def test_cubin_links_through_nvjitlink_without_local_memory():
    from tilelang import nvjitlink as lib
    try:
        lib.library()
    except lib.NvJitLinkUnavailable:
        pytest.skip("nvJitLink is not installed")
    res = compile_source(MATMUL, "matmul.tile", CompileOptions(target="sm_100a"),
                         until="cubin")
    assert res.ok and res.link.backend == "nvjitlink"
    r = res.link.resources["matmul"]
    assert (r.spill_stores, r.spill_loads, r.stack_frame) == (0, 0, 0)
    assert "tcgen05.mma" in res.ptx


def test_square_f16_matches_numpy_exactly():
    res, c, ref, _, _ = matmul(128, 128, 64)
    assert "tcgen05.mma" in res.ptx
    np.testing.assert_array_equal(c, ref.astype(np.float32))


@pytest.mark.parametrize("M,N,K,dtype,ring", [(100, 140, 150, "bf16", False),
                                              (200, 200, 200, "f16", True)])
def test_ragged_loops_match_numpy(M, N, K, dtype, ring):
    # two blocks along N, three or four iterations along K (the last one ragged); with TMA
    # the loop is the ring (four iterations in three stages: it wraps), without it each
    # product stages its own operands
    res, c, ref, a, b = matmul(M, N, K, dtype, exact=False, race_check=True, tma=ring)
    assert "tcgen05.mma" in res.ptx
    assert ("cp.async.bulk.tensor" in res.ptx) == ring
    assert (np.abs(c - ref) <= product_bound(a, b)).all()


@pytest.mark.slow
@pytest.mark.parametrize("M,N,K,dtype", [(256, 256, 128, "f16"), (200, 150, 100, "f16"),
                                         (130, 260, 200, "bf16"), (128, 128, 64, "bf16")])
def test_more_shapes_match_numpy(M, N, K, dtype):
    res, c, ref, a, b = matmul(M, N, K, dtype, exact=False)
    assert (np.abs(c - ref) <= product_bound(a, b)).all()


def test_narrow_tile_n64():
    res, c, ref, _, _ = matmul(128, 96, 48, bn=64)
    # 64 TMEM columns; N = 64 goes in the instruction descriptor (bits 17-22: 64 >> 3)
    assert re.search(r"tcgen05\.alloc\.[^;]*, 64;", res.ptx)
    np.testing.assert_array_equal(c, ref.astype(np.float32))


REGISTER_OPERANDS = """
@launch(reqntid = (128, 1, 1))
kernel fma(a: Array[f16, 2], b: Array[f16, 2], c: Array[f32, 2]) {
    let ta = load(a, index = (0, 0), shape = (128, 32), padding = 0);
    let tb = load(b, index = (0, 0), shape = (32, 64), padding = 0);
    let acc = load(c, index = (0, 0), shape = (128, 64), padding = 0);
    store(c, index = (0, 0), tile = mma(ta * ta, tb, acc));
}
"""


def test_register_operand_and_loaded_accumulator():
    # A computed in registers (stored into its image by the threads) and an accumulator that
    # is not zero (tcgen05.st into TMEM before the MMAs)
    a, b = operands((128, 32), (32, 64), seed=3)
    c = (np.random.default_rng(4).integers(-8, 9, (128, 64)) / 4).astype(np.float32)
    ref = (a.astype(np.float64) ** 2) @ b.astype(np.float64) + c
    res, _ = run(REGISTER_OPERANDS, "fma", {"a": a, "b": b, "c": c}, (1,), target="sm_100a")
    assert "tcgen05.mma" in res.ptx and "tcgen05.st" in res.ptx
    np.testing.assert_array_equal(c, ref.astype(np.float32))


def test_other_thread_counts_stay_on_mma_sync():
    # the epilogue's 32x32b loads need exactly four warps (warp w reads lanes 32w..32w+31)
    src = MATMUL.replace("reqntid = (128, 1, 1)", "reqntid = (256, 1, 1)")
    a, b = operands((128, 64), (64, 128))
    c = np.zeros((128, 128), np.float32)
    ptx = compile_for(src, "matmul", {"a": a, "b": b, "c": c}, target="sm_100a").ptx
    assert "tcgen05" not in ptx and "mma.sync" in ptx


def test_other_targets_are_unchanged():
    a, b = operands((128, 64), (64, 128))
    c = np.zeros((128, 128), np.float32)
    for target, instr in (("sm_90a", "wgmma.mma_async"), ("sm_80", "mma.sync"),
                          ("sm_120", "mma.sync")):
        ptx = compile_for(MATMUL, "matmul", {"a": a, "b": b, "c": c}, target=target).ptx
        assert instr in ptx and "tcgen05" not in ptx


def test_persistent_example_carries_the_ring_and_reuses_tensor_memory():
    # six output tiles on two blocks, each a K loop of four iterations in a ring of three
    # stages: the ring's stage and phase carry over from one tile to the next, and one TMEM
    # allocation serves every tile (at 128 threads: one issuing thread; the example's
    # sm_100a default of 192 runs the accumulator pipeline, test_tcgen05_persistent.py)
    src = (ROOT / "examples" / "matmul_persistent.tile").read_text()
    assert "reqntid = by_target(sm_100a = (192, 1, 1), default = (128, 1, 1))" in src
    src = src.replace("by_target(sm_100a = (192, 1, 1), default = (128, 1, 1))",
                      "(128, 1, 1)")
    a, b = operands((300, 200), (200, 200), exact=False)
    c = np.zeros((300, 200), np.float32)
    res, _ = run(src, "matmul_persistent", {"a": a, "b": b, "c": c}, (2,), target="sm_100a",
                 race_check=True)
    assert res.ptx.count("tcgen05.alloc.") == 1 and res.ptx.count("tcgen05.dealloc.") == 1
    # the ring's mbarriers live as long as the kernel: only the completion one is invalidated
    assert "cp.async.bulk.tensor" in res.ptx and res.ptx.count("mbarrier.inval") == 1
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert (np.abs(c - ref) <= product_bound(a, b)).all()


def test_contract_writes_reqntid_without_a_launch_attribute():
    # the lowering relies on exactly four warps: the exact-thread code it runs in is launched
    # with `.reqntid`, so a driver refuses another block shape
    src = MATMUL.replace("@launch(reqntid = (128, 1, 1), maxnreg = 168, cluster = (2, 1, 1))",
                         "")
    a, b = operands((128, 64), (64, 128))
    c = np.zeros((128, 128), np.float32)
    ptx = compile_for(src, "matmul", {"a": a, "b": b, "c": c}, target="sm_100a").ptx
    assert "tcgen05.mma" in ptx and ".reqntid 128, 1, 1" in ptx and ".maxntid" not in ptx
    # and a launch of another block shape is refused, not run with missing lane quarters
    from tilelang.emulator import EmulatorDevice
    from tilelang.emulator.errors import LaunchRefused
    dev = EmulatorDevice()
    fn = dev.load_module(ptx).get_function("matmul")
    with pytest.raises(LaunchRefused, match=r"block \(64, 1, 1\) differs from the \.reqntid "
                                            r"\(128, 1, 1\)"):
        dev.launch(fn, (1, 1, 1), (64, 1, 1), [])
