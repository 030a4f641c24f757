"""Matrix products on tensor cores (lower/tensorcore/mma_sync.py) on the emulator, against NumPy.

Tolerances. Every tensor-core input dtype (f16, bf16, tf32, f8) has at most 11 significant
bits, so a product of two inputs (at most 22 bits) is exact in f32 and the only error of an f32
accumulation is the rounding of the running sums: at most K additions, each off by at most
2^-24 of a partial sum bounded by sum_k |a_ik| |b_kj|. The bound checked is therefore
K * 2^-24 * (|a| @ |b|) against an exact float64 reference (the order of the additions is the
hardware's and is not specified). An f16 accumulator rounds to f16 after every instruction
(K / 16 roundings of 2^-11 relative error each), plus the final rounding. Integer products are
exact (i32, wrapping).
"""

from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest

from gen_support import run_emulated
from tilelang.codegen.api import ArrayFacts
from tilelang.diagnostics import render_all
from tilelang.driver import compile_source
from tilelang.options import CompileOptions
from tilelang.emulator import EmulatorDevice
from tilelang.runtime.args import facts_key

NP = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "f8e4m3": ml_dtypes.float8_e4m3fn,
      "f8e5m2": ml_dtypes.float8_e5m2, "tf32": np.float32, "i8": np.int8, "u8": np.uint8,
      "f32": np.float32, "i32": np.int32}


def source(a: str, b: str, c: str, *, a_t=False, b_t=False, BM=64, BN=64, BK=32,
           threads=128, use_matmul=False) -> str:
    """A tiled product kernel; a_t / b_t: the operand array is stored transposed and loaded
    with order = (1, 0)."""
    la = (f"load(a, index = (m, k), shape = (BM, BK), padding = 0, order = (1, 0))" if a_t
          else f"load(a, index = (m, k), shape = (BM, BK), padding = 0)")
    lb = (f"load(b, index = (k, n), shape = (BK, BN), padding = 0, order = (1, 0))" if b_t
          else f"load(b, index = (k, n), shape = (BK, BN), padding = 0)")
    ktiles = ("num_tiles(a, axis = 0, shape = (BK, BM))" if a_t
              else "num_tiles(a, axis = 1, shape = (BM, BK))")
    step = "acc = acc + ta @ tb;" if use_matmul else "acc = mma(ta, tb, acc);"
    return f"""
@launch(reqntid = ({threads}, 1, 1))
kernel mm(a: Array[{a}, 2], b: Array[{b}, 2], c: Array[{c}, 2],
          const BM: i32 = {BM}, const BN: i32 = {BN}, const BK: i32 = {BK}) {{
    let m = bid(0);
    let n = bid(1);
    var acc = zeros((BM, BN), {c});
    for k in range({ktiles}) {{
        let ta = {la};
        let tb = {lb};
        {step}
    }}
    store(c, index = (m, n), tile = acc);
}}
"""


def compile_text(text: str, path: str, *, target: str, facts: dict):
    res = compile_source(text, path, CompileOptions(target=target), facts=facts, until="ptx")
    assert res.ok, render_all(res.diagnostics)
    return res


def facts_of(kernel: str, arrays: dict) -> dict:
    """The facts the runtime computes for these arrays (views included) as the emulator holds
    them: their base copied into a 256-byte aligned allocation."""
    return {kernel: {n: array_facts(a) for n, a in arrays.items()}}


def array_facts(a: np.ndarray, address: int = 0) -> ArrayFacts:
    base = a.base if isinstance(a.base, np.ndarray) else a
    offset = a.__array_interface__["data"][0] - base.__array_interface__["data"][0]
    return ArrayFacts.from_key(facts_key(address + offset, a.shape,
                                         tuple(st // a.itemsize for st in a.strides),
                                         a.itemsize))


def run_emulator(res, name: str, args: dict, grid, counters=False):
    art = res.codegen.kernel(name)
    dev = EmulatorDevice(counters=counters)
    grid = tuple(grid) + (1,) * (3 - len(grid))
    return run_emulated(res.codegen, name, [_raw(args[p.name]) for p in art.params], grid,
                        dev=dev)


def _raw(a):
    """ml_dtypes arrays go to the device as their bits (same memory)."""
    if isinstance(a, np.ndarray) and a.dtype.kind == "V" or a.dtype in (
            np.dtype(ml_dtypes.bfloat16), np.dtype(ml_dtypes.float8_e4m3fn),
            np.dtype(ml_dtypes.float8_e5m2)):
        return a.view(np.uint16 if a.itemsize == 2 else np.uint8)
    return a


def operands(rng, dt: str, shape):
    if dt in ("i8",):
        return rng.integers(-128, 128, shape).astype(np.int8)
    if dt == "u8":
        return rng.integers(0, 256, shape).astype(np.uint8)
    x = rng.standard_normal(shape).astype(np.float32)
    if dt == "tf32":
        from tilelang.sema.types import round_to_tf32
        return round_to_tf32(x).astype(np.float32)
    return x.astype(NP[dt])


def reference(a, b, c_dt: str):
    if c_dt == "i32":
        r = a.astype(np.int64) @ b.astype(np.int64)
        return ((r + 2**31) % 2**32 - 2**31).astype(np.int32), None
    af, bf = a.astype(np.float64), b.astype(np.float64)
    return af @ bf, np.abs(af) @ np.abs(bf)


def check(c, ref, mag, c_dt: str, K: int):
    if c_dt == "i32":
        np.testing.assert_array_equal(c, ref)
        return
    if c_dt == "f16":
        bound = ((K // 16 + 2) * 2.0**-11) * mag + 2.0**-24
    else:
        bound = K * 2.0**-24 * mag + 1e-30
    err = np.abs(c.astype(np.float64) - ref)
    assert np.all(err <= bound), float(np.max(err / np.maximum(bound, 1e-300)))


def run(a_dt, b_dt, c_dt, M, N, K, *, target="sm_80", a_t=False, b_t=False, seed=0, **kw):
    rng = np.random.default_rng(seed)
    a = operands(rng, a_dt, (M, K))
    b = operands(rng, b_dt, (K, N))
    ha = np.ascontiguousarray(a.T) if a_t else a
    hb = np.ascontiguousarray(b.T) if b_t else b
    c = np.zeros((M, N), NP[c_dt])
    src = source(a_dt, b_dt, c_dt, a_t=a_t, b_t=b_t, **kw)
    res = compile_text(src, "mm.tile", target=target,
                       facts=facts_of("mm", {"a": ha, "b": hb, "c": c}))
    BM, BN = kw.get("BM", 64), kw.get("BN", 64)
    rep = run_emulator(res, "mm", {"a": ha, "b": hb, "c": c}, (-(-M // BM), -(-N // BN)))
    ref, mag = reference(a, b, c_dt)
    check(c, ref, mag, c_dt, K)
    return res, rep


def mma_lines(ptx: str) -> list[str]:
    return re.findall(r"mma\.sync\.aligned\.\S+", ptx)


SIXTEEN = [("f16", "f32"), ("bf16", "f32"), ("f16", "f16")]


@pytest.mark.parametrize("dt,acc", SIXTEEN)
@pytest.mark.parametrize("a_t,b_t", [(False, False), (True, True)])
def test_sixteen_bit_square_both_orders(dt, acc, a_t, b_t):
    res, _ = run(dt, dt, acc, 128, 128, 64, a_t=a_t, b_t=b_t)
    want = {"f16": f"m16n8k16.row.col.{acc}.f16.f16.{acc}",
            "bf16": "m16n8k16.row.col.f32.bf16.bf16.f32"}[dt]
    assert mma_lines(res.ptx) and all(want in m for m in mma_lines(res.ptx))
    assert ".extern" not in res.ptx
    assert "ldmatrix" in res.ptx


@pytest.mark.parametrize("a_t,b_t", [(False, True), (True, False)])
def test_f16_mixed_orders_ragged(a_t, b_t):
    run("f16", "f16", "f32", 127, 129, 65, a_t=a_t, b_t=b_t)


def test_f16_ragged_row_major():
    res, _ = run("f16", "f16", "f32", 127, 129, 65)
    assert mma_lines(res.ptx)


def test_matmul_operator_uses_tensor_cores():
    res, _ = run("bf16", "bf16", "f32", 64, 64, 64, use_matmul=True)
    assert mma_lines(res.ptx)


@pytest.mark.parametrize("a_dt,b_dt", [("i8", "i8"), ("u8", "u8"), ("i8", "u8"), ("u8", "i8")])
def test_int8_exact(a_dt, b_dt):
    res, _ = run(a_dt, b_dt, "i32", 128, 64, 128, BK=64)
    assert all("m16n8k32" in m for m in mma_lines(res.ptx)) and mma_lines(res.ptx)


def test_int8_ragged_and_transposed():
    run("i8", "i8", "i32", 127, 129, 65, BK=64, a_t=True, b_t=True)


@pytest.mark.parametrize("a_t,b_t", [(False, False), (True, True)])
def test_tf32(a_t, b_t):
    res, _ = run("tf32", "tf32", "f32", 128, 64, 64, a_t=a_t, b_t=b_t)
    assert all("m16n8k8.row.col.f32.tf32.tf32.f32" in m for m in mma_lines(res.ptx))


def test_exact_f32_keeps_the_fma_path():
    """f32 operands are not rounded to tf32 behind the user's back."""
    res, _ = run("f32", "f32", "f32", 64, 64, 32)
    assert not mma_lines(res.ptx)


@pytest.mark.parametrize("a_dt,b_dt", [("f8e4m3", "f8e4m3"), ("f8e5m2", "f8e4m3")])
def test_f8_on_sm89(a_dt, b_dt):
    res, _ = run(a_dt, b_dt, "f32", 128, 64, 64, BK=64, target="sm_89")
    pa, pb = (x[2:] for x in (a_dt, b_dt))
    assert all(f"m16n8k32.row.col.f32.{pa}.{pb}.f32" in m for m in mma_lines(res.ptx))


def test_f8_ragged_transposed():
    run("f8e4m3", "f8e4m3", "f32", 127, 129, 65, BK=64, target="sm_90a", a_t=True, b_t=True)


def test_f8_below_sm89_uses_fma():
    res, _ = run("f8e4m3", "f8e4m3", "f32", 64, 64, 64, BK=64, target="sm_86")
    assert not mma_lines(res.ptx)


BATCHED = """
@launch(reqntid = (128, 1, 1))
kernel bmm(a: Array[f16, 3], b: Array[f16, 3], c: Array[f32, 3],
           const BB: i32 = 2, const BM: i32 = 32, const BN: i32 = 32, const BK: i32 = 32) {
    let z = bid(2);
    let m = bid(0);
    let n = bid(1);
    var acc = zeros((BB, BM, BN), f32);
    for k in range(num_tiles(a, axis = 2, shape = (BB, BM, BK))) {
        let ta = load(a, index = (z, m, k), shape = (BB, BM, BK), padding = 0);
        let tb = load(b, index = (z, k, n), shape = (BB, BK, BN), padding = 0);
        acc = mma(ta, tb, acc);
    }
    store(c, index = (z, m, n), tile = acc);
}
"""


@pytest.mark.parametrize("shape", [(4, 64, 64, 64), (3, 33, 47, 40)])
def test_batched(shape):
    B, M, N, K = shape
    rng = np.random.default_rng(1)
    a = rng.standard_normal((B, M, K)).astype(np.float16)
    b = rng.standard_normal((B, K, N)).astype(np.float16)
    c = np.zeros((B, M, N), np.float32)
    res = compile_text(BATCHED, "bmm.tile", target="sm_80",
                       facts=facts_of("bmm", {"a": a, "b": b, "c": c}))
    assert mma_lines(res.ptx)
    run_emulator(res, "bmm", {"a": a, "b": b, "c": c}, (-(-M // 32), -(-N // 32), -(-B // 2)))
    af, bf = a.astype(np.float64), b.astype(np.float64)
    check(c, af @ bf, np.abs(af) @ np.abs(bf), "f32", K)


# ---------------------------------------------------------------------------------------------
# The pipelined loop (lower/tensorcore/mma_pipeline.py) and the epilogue (lower/tensorcore/mma_epilogue.py)

def padded(x, cols_multiple=8):
    """`x` as a view of a wider array whose rows are 16-byte aligned (row pitch a multiple of
    `cols_multiple` elements), so a ragged shape still gets the 16-byte facts."""
    rows, cols = x.shape
    pitch = -(-cols // cols_multiple) * cols_multiple
    base = np.zeros((rows, pitch), x.dtype)
    base[:, :cols] = x
    return base[:, :cols]


@pytest.mark.parametrize("target", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("a_t,b_t,shape", [(False, False, (100, 72, 200)),
                                           (True, True, (100, 72, 200)),
                                           (False, False, (100, 70, 195)),
                                           (True, False, (97, 70, 195))])
def test_pipelined_ragged_with_aligned_rows(target, a_t, b_t, shape):
    """M, N, K not multiples of the tile, rows 16-byte aligned: the cp.async ring with
    zero-fill at every edge, several K iterations (more than the stages), both orders; with
    N = 70 and K = 195 a 16-byte chunk straddles the contiguous edge (partial src-size)."""
    from gen_support import Strided
    M, N, K = shape
    rng = np.random.default_rng(3)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    ha = padded(np.ascontiguousarray(a.T) if a_t else a)
    hb = padded(np.ascontiguousarray(b.T) if b_t else b)
    c = padded(np.zeros((M, N), np.float32), 4)
    facts = facts_of("mm", {"a": ha, "b": hb, "c": c})
    assert all(f.aligned16 for f in facts["mm"].values())
    res = compile_text(source("f16", "f16", "f32", a_t=a_t, b_t=b_t, BK=32), "mm.tile",
                       target=target, facts=facts)
    # 4 chunks of 16 bytes per thread and stage: a prologue stage or more, and the loop's
    # (on sm_90a the aligned operands go by TMA: tests/codegen/lower/tensorcore/test_tma.py)
    assert res.ptx.count("cp.async.cg.shared.global") >= 8 or \
        (target == "sm_90a" and "cp.async.bulk.tensor" in res.ptx)
    args = [Strided(x.base, x) for x in (ha, hb, c)]
    rep = run_emulated(res.codegen, "mm", args, (2, 2, 1), dev=EmulatorDevice(race_check=True))
    if "mbarrier" not in res.ptx:        # the emulator's race check skips mbarrier kernels
        assert rep.race_check == "checked: no shared-memory race"
    af, bf = a.astype(np.float64), b.astype(np.float64)
    check(c, af @ bf, np.abs(af) @ np.abs(bf), "f32", K)
    assert np.all(c.base[:, N:] == 0)          # nothing written past the edge


WHOLE = re.compile(r"selp\.b32 n, 16, 0, %p\d+; cp\.async\.cg\.shared\.global "
                   r"\[%r\d+\+\d+\], \[%rd\d+\], 16, n;")


def copies(ptx: str) -> tuple[int, int]:
    """(cp.async copies, those of a whole chunk or zeros by a predicate)."""
    return ptx.count("cp.async.cg.shared.global"), len(WHOLE.findall(ptx))


@pytest.mark.parametrize("dt,acc,M,N,K,a_t,b_t", [
    ("f16", "f32", 100, 72, 200, False, False), ("bf16", "f32", 104, 136, 264, True, True),
    ("i8", "i32", 100, 80, 208, False, True), ("tf32", "f32", 60, 68, 100, False, True)])
def test_whole_chunk_copies_with_extent16(dt, acc, M, N, K, a_t, b_t):
    """Contiguous extents of whole 16-byte chunks (the `e` fact) with ragged M, N and K (not
    multiples of the tile): every copy is a whole chunk or zeros by one predicate, and the
    product is right (zero-fill at every edge, both orders)."""
    res, _ = run(dt, dt, acc, M, N, K, a_t=a_t, b_t=b_t, BK=64 if dt == "i8" else 32,
                 seed=M)
    total, whole = copies(res.ptx)
    assert total >= 8 and whole == total


def test_without_extent16_chunks_straddling_the_edge_take_a_byte_count():
    """The (M, 65) view of a (M, 72) f16 buffer: contiguous, aligned, no `e`: copies along
    its contiguous axis take a clamped src-size (the chunk at column 64 holds 1 element of
    the array and 7 zeros), the other operand keeps whole chunks; the product is exact to the
    f32 bound."""
    from gen_support import Strided
    M, N, K = 64, 64, 65
    rng = np.random.default_rng(7)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    ha, hb, c = padded(a), padded(b), padded(np.zeros((M, N), np.float32), 4)
    hb = hb.base[:, :N]
    facts = facts_of("mm", {"a": ha, "b": hb, "c": c})["mm"]
    assert facts["a"] == ArrayFacts(contiguous=True, aligned16=True, extent16=False, small=True)
    assert facts["b"] == ArrayFacts(small=True)
    res = compile_text(source("f16", "f16", "f32", BK=32), "mm.tile", target="sm_80",
                       facts={"mm": facts})
    total, whole = copies(res.ptx)
    assert 0 < whole < total
    ha.base[:, K:] = np.float16(np.nan)        # past the edge: must never be read
    args = [Strided(x.base, x) for x in (ha, hb, c)]
    run_emulated(res.codegen, "mm", args, (1, 1, 1))
    af, bf = a.astype(np.float64), b.astype(np.float64)
    check(c, af @ bf, np.abs(af) @ np.abs(bf), "f32", K)


def test_epilogue_stores_16_bytes():
    res, rep = run("f16", "f16", "f32", 128, 128, 64, BM=128, BN=128, BK=32)
    assert re.search(r"st\.global\.v4\.(b32|f32)", res.ptx)
    assert not re.search(r"st\.global\.v2\.(b32|f32)", res.ptx)


def test_f16_accumulator_epilogue():
    res, _ = run("f16", "f16", "f16", 128, 64, 64, BM=64, BN=64, BK=32)
    assert re.search(r"st\.global\.v4\.b32", res.ptx)


@pytest.mark.slow
@pytest.mark.parametrize("dt,acc,target", [("bf16", "f32", "sm_80"), ("i8", "i32", "sm_80"),
                                           ("tf32", "f32", "sm_90a"),
                                           ("f8e4m3", "f32", "sm_89")])
def test_big_tiles_many_iterations(dt, acc, target):
    run(dt, dt, acc, 256, 256, 512, BM=128, BN=128, BK=64 if dt not in ("tf32",) else 32,
        target=target)


@pytest.mark.parametrize("stages,waits", [(1, None), (3, "cp.async.wait_group 1"),
                                          (4, "cp.async.wait_group 2")])
def test_num_stages_overrides_the_ring_depth(stages, waits):
    src = source("f16", "f16", "f32").replace(
        "@launch(reqntid = (128, 1, 1))", f"@launch(reqntid = (128, 1, 1), num_stages = {stages})")
    M = N = 64
    K = 160
    rng = np.random.default_rng(5)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    c = np.zeros((M, N), np.float32)
    res = compile_text(src, "mm.tile", target="sm_80",
                       facts=facts_of("mm", {"a": a, "b": b, "c": c}))
    ptx = re.sub(r"\s+", " ", res.ptx)
    if waits is None:       # one stage: copies of each iteration waited for at once
        assert "cp.async.wait_group 1" not in ptx and "cp.async.wait_group 2" not in ptx
    else:
        assert waits in ptx
    run_emulated(res.codegen, "mm", [a, b, c], (1, 1, 1), dev=EmulatorDevice(race_check=True))
    af, bf = a.astype(np.float64), b.astype(np.float64)
    check(c, af @ bf, np.abs(af) @ np.abs(bf), "f32", K)


def test_num_stages_out_of_range_is_e0726():
    src = source("f16", "f16", "f32").replace(
        "@launch(reqntid = (128, 1, 1))", "@launch(reqntid = (128, 1, 1), num_stages = 9)")
    res = compile_source(src, "mm.tile", CompileOptions(target="sm_80"), until="ptx")
    assert not res.ok
    assert [d.code for d in res.diagnostics] == ["E0726"]
    assert "`num_stages` must be between 1 and 8, found 9" in render_all(res.diagnostics)


OTHER_USES = """
@launch(maxntid = (96, 1, 1))
kernel k(a: Array[f16, 2], b: Array[f16, 2], c: Array[f32, 2], s: Array[f32, 1]) {
    let ta = load(a, index = (0, 0), shape = (32, 32));
    let tb = load(b, index = (0, 0), shape = (32, 32));
    let p = ta @ tb;                              // no loop; ta is used again below
    let q = mma(ta, tb, p + 1.0);                 // an accumulator that is not a splat
    store(c, index = (0, 0), tile = q);
    store(s, index = (0,), tile = reshape(sum(q, axis = 1), (32,)) + sum(astype(ta, f32)));
}
"""


def test_products_outside_loops_with_other_uses_and_odd_blocks():
    """A block of 96 threads (64 in the layouts), operands also used elsewhere (not
    deferred), `@` then `mma` with a computed accumulator, and a reduction of the result."""
    rng = np.random.default_rng(9)
    a = rng.standard_normal((32, 32)).astype(np.float16)
    b = rng.standard_normal((32, 32)).astype(np.float16)
    c = np.zeros((32, 32), np.float32)
    s = np.zeros(32, np.float32)
    res = compile_text(OTHER_USES, "k.tile", target="sm_86",
                       facts=facts_of("k", {"a": a, "b": b, "c": c, "s": s}))
    assert mma_lines(res.ptx)
    run_emulator(res, "k", {"a": a, "b": b, "c": c, "s": s}, (1, 1))
    af, bf = a.astype(np.float64), b.astype(np.float64)
    q = 2 * (af @ bf) + 1.0
    mag = 2 * (np.abs(af) @ np.abs(bf)) + 1.0
    check(c, q, mag, "f32", 64)
    np.testing.assert_allclose(s, q.sum(axis=1) + af.sum(), rtol=1e-4, atol=1e-3)


def test_tiles_below_one_warp_tile_use_fma():
    res, _ = run("f16", "f16", "f32", 16, 8, 16, BM=16, BN=8, BK=16)
    assert not mma_lines(res.ptx)


@pytest.mark.parametrize("tile", [(32, 32, 16), (16, 16, 16), (64, 32, 16)])
def test_small_tiles_copied_once_without_races(tile):
    """Tiles with fewer 16-byte chunks than the block has threads: the threads (and warps)
    that replicate another's chunks or accumulator copy and store nothing, so the emulator's
    race check finds no two warps writing the same shared words."""
    BM, BN, BK = tile
    M = N = K = 64
    rng = np.random.default_rng(11)
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    c = np.zeros((M, N), np.float32)
    res = compile_text(source("f16", "f16", "f32", BM=BM, BN=BN, BK=BK), "mm.tile",
                       target="sm_80", facts=facts_of("mm", {"a": a, "b": b, "c": c}))
    assert mma_lines(res.ptx)
    rep = run_emulated(res.codegen, "mm", [a, b, c], (M // BM, N // BN, 1),
                       dev=EmulatorDevice(race_check=True))
    assert rep.race_check == "checked: no shared-memory race"
    af, bf = a.astype(np.float64), b.astype(np.float64)
    check(c, af @ bf, np.abs(af) @ np.abs(bf), "f32", K)


@pytest.mark.parametrize("target", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("threads,tensor_cores", [(48, False), (80, False), (64, True)])
def test_block_of_partial_warps_takes_the_fma_path(target, threads, tensor_cores):
    # 48 or 80 threads: the layouts use 32 or 64 and the rest replicate them in a partial
    # warp of 16; ldmatrix / mma.sync (.aligned) need whole warps, so the product is the FMA
    # one (the emulator reports a partial warp at ldmatrix otherwise)
    res, _ = run("f16", "f16", "f32", 40, 48, 40, target=target, threads=threads,
                 BM=32, BN=32, BK=16)
    assert bool(mma_lines(res.ptx)) == tensor_cores
