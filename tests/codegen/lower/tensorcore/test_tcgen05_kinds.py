"""The dense tcgen05 kinds beside f16/bf16 on sm_100a (docs/codegen.md, "sm_100a"): tf32
operands (`kind::tf32`, K = 8 a step), f8e4m3 / f8e5m2 mixed or not (`kind::f8f6f4`, K = 32)
into f32, and i8 / u8 mixed or not (`kind::i8`, K = 32) into i32, each with its operand type
codes and D type in the instruction descriptor; tf32 operand images are K-major (as on
mma.sync and wgmma: an operand stored along M/N is staged through registers into a K-major
image), 8-bit ones K-major or MN-major (the descriptor's transpose bits, as Triton's sm_100a
kernels read an f8 or i8 B stored (K, N)).

Results are the emulator's (its tcgen05.mma decodes the instruction descriptor's type codes,
the descriptors and TMEM on its own, and tf32, e4m3 and e5m2 with its own decoders; Triton's
own tf32, i8 and e4m3 kernels judge that reading: tests/emulator/test_emu_triton_blackwell.py,
and Triton 3.9's K-major kernels of benchmarks/triton_ref/gen_kinds_matmul_ptx.py carry the
same instruction descriptors as Tile's) against NumPy computed independently:

* integer products are exact: i8 x i8, u8 x u8 and the mixes against int64 NumPy, equal;
* f8: multiples of 1/8 in [-1, 1] are exact in both formats and every partial sum of their
  products (multiples of 1/64, K <= 512) is exact in f32: equal to float64 NumPy; random
  finite codes of either format within one f32 rounding (2^-23 relative to sum |a||b|) per
  k32 instruction of the running sum (a product of two 8-bit floats has at most 8
  significant bits: exact; only the accumulation rounds);
* tf32: a tf32 value has 11 significant bits, a product 22, exact in f32; against float64
  NumPy of the tf32-rounded inputs within one f32 rounding per k8 instruction.

Shapes: ragged on every side (M, N and K not multiples of the tile), batched (the 3-d
pattern of examples/batched_matmul.tile), the TMA ring (single issuer, warp-specialized, and
the CTA pair, each CTA copying half of the K-major B's rows), products on their own
(cp.async or register operands) and 64-row accumulators. The race checker runs on the
one-CTA rings."""

from __future__ import annotations

import contextlib
import io
import re

import ml_dtypes
import numpy as np
import pytest

from tilelang.sema.types import round_to_tf32
from wgmma_support import compile_for, run

NP = {"f16": np.float16, "tf32": np.float32, "f8e4m3": ml_dtypes.float8_e4m3fn,
      "f8e5m2": ml_dtypes.float8_e5m2, "i8": np.int8, "u8": np.uint8, "f32": np.float32,
      "i32": np.int32}
# (A, B, accumulator) -> the kind, its K per instruction, A's and B's idesc type codes
KINDS = {("tf32", "tf32", "f32"): ("tf32", 8, 2, 2),
         ("f8e4m3", "f8e4m3", "f32"): ("f8f6f4", 32, 0, 0),
         ("f8e5m2", "f8e5m2", "f32"): ("f8f6f4", 32, 1, 1),
         ("f8e4m3", "f8e5m2", "f32"): ("f8f6f4", 32, 0, 1),
         ("i8", "i8", "i32"): ("i8", 32, 1, 1),
         ("u8", "u8", "i32"): ("i8", 32, 0, 0),
         ("u8", "i8", "i32"): ("i8", 32, 0, 1),
         ("f8e5m2", "f8e4m3", "f32"): ("f8f6f4", 32, 1, 0),
         ("i8", "u8", "i32"): ("i8", 32, 1, 0),
         ("f16", "f16", "f32"): ("f16", 16, 0, 0)}
TYPES = list(KINDS)[:7]
# a ring's operand copies (the epilogue's TMA store is global.shared::cta)
TMA_LOAD = "cp.async.bulk.tensor.2d.shared::cluster.global"

# A (M, K) and B stored (N, K), loaded with order = (1, 0): both K-major, both copied by TMA
KMAJOR = """
@launch(reqntid = (THREADS, 1, 1))
kernel mm(a: Array[TA, 2], bt: Array[TB, 2], c: Array[TC, 2], const BM: i32 = 128,
          const BN: i32 = 128, const BK: i32 = 128) {
    let m = bid(0);
    let n = bid(1);
    var acc = zeros((BM, BN), TC);
    for k in range(num_tiles(a, axis = 1, shape = (BM, BK))) {
        let ta = load(a, index = (m, k), shape = (BM, BK), padding = 0);
        let tb = load(bt, index = (k, n), shape = (BK, BN), order = (1, 0), padding = 0);
        acc = mma(ta, tb, acc);
    }
    store(c, index = (m, n), tile = acc);
}
"""

# examples/batched_matmul.tile's pattern: 3-d arrays, the batch on the grid's third axis, B
# stored (K, N) per batch (N-major: staged through registers into its K-major image)
BATCHED = """
@launch(reqntid = (128, 1, 1))
kernel bmm(a: Array[TA, 3], b: Array[TB, 3], c: Array[TC, 3], const BM: i32 = 64,
           const BN: i32 = 64, const BK: i32 = 32) {
    let m = bid(0);
    let n = bid(1);
    let z = bid(2);
    var acc = zeros((BM, BN), TC);
    for k in range(num_tiles(a, axis = 2, shape = (1, BM, BK))) {
        let ta = load(a, index = (z, m, k), shape = (1, BM, BK), padding = 0).reshape((BM, BK));
        let tb = load(b, index = (z, k, n), shape = (1, BK, BN), padding = 0).reshape((BK, BN));
        acc = mma(ta, tb, acc);
    }
    store(c, index = (z, m, n), tile = acc.reshape((1, BM, BN)));
}
"""

# f32 arrays rounded to tf32 in the kernel (`astype`): the explicit opt-in; the operands are
# then register values, stored into their images by the threads
ASTYPE = """
@launch(reqntid = (128, 1, 1))
kernel mmr(a: Array[f32, 2], b: Array[f32, 2], c: Array[f32, 2]) {
    let m = bid(0);
    let n = bid(1);
    var acc = zeros((128, 64), f32);
    for k in range(num_tiles(a, axis = 1, shape = (128, 32))) {
        let ta = load(a, index = (m, k), shape = (128, 32), padding = 0);
        let tb = load(b, index = (k, n), shape = (32, 64), padding = 0);
        acc = mma(astype(ta, tf32), astype(tb, tf32), acc);
    }
    store(c, index = (m, n), tile = acc);
}
"""


def source(types, text=KMAJOR, threads=128) -> str:
    ta, tb, tc = types
    return text.replace("THREADS", str(threads)).replace("TA", ta).replace("TB", tb) \
        .replace("TC", tc)


def operand(rng, dt: str, shape, exact: bool) -> np.ndarray:
    """Values of dtype `dt` (as NumPy's or ml_dtypes' type); `exact`: eighths for the
    floats (every product and partial sum exact in f32)."""
    if dt == "i8":
        return rng.integers(-128, 128, shape).astype(np.int8)
    if dt == "u8":
        return rng.integers(0, 256, shape).astype(np.uint8)
    if exact:
        return (rng.integers(-8, 9, shape) / 8).astype(NP[dt])
    if dt == "tf32":
        return round_to_tf32(rng.standard_normal(shape).astype(np.float32)).astype(np.float32)
    codes = rng.integers(0, 256, shape).astype(np.uint8).view(NP[dt])
    return np.where(np.isfinite(codes.astype(np.float32)), codes, NP[dt](0)).astype(NP[dt])


def _bits(x: np.ndarray) -> np.ndarray:
    """The emulator moves ml_dtypes' 8-bit floats as their bytes."""
    return x.view(np.uint8) if x.dtype.name.startswith("float8") else x


def check(c, a, b, types, exact: bool) -> None:
    """c against a @ b (the last two axes): integers and exact inputs equal, floats within
    one f32 rounding of the running sum per instruction."""
    kstep = KINDS[types][1]
    if types[2] == "i32":
        want = np.matmul(a.astype(np.int64), b.astype(np.int64))
        np.testing.assert_array_equal(c, ((want + 2**31) % 2**32 - 2**31).astype(np.int32))
        return
    af, bf = a.astype(np.float64), b.astype(np.float64)
    want = np.matmul(af, bf)
    if exact:
        np.testing.assert_array_equal(c, want.astype(np.float32))
        return
    k = a.shape[-1]
    bound = np.ceil(k / kstep) * 2.0**-23 * np.matmul(np.abs(af), np.abs(bf)) + 1e-30
    err = np.abs(c.astype(np.float64) - want)
    assert (err <= bound).all(), float((err / bound).max())


def idesc(types, m: int, n: int) -> int:
    """The instruction descriptor of a K-major product, from the PTX ISA's table (D type
    bits 4-5, A / B type codes 7-9 / 10-12, N >> 3 at 17, M >> 4 at 24)."""
    _, _, ca, cb = KINDS[types]
    d = 2 if types[2] == "i32" else 1
    return d << 4 | ca << 7 | cb << 10 | (n >> 3) << 17 | (m >> 4) << 24


def row128(types) -> int:
    """K of a 128-byte operand row (one 128-byte swizzle panel)."""
    return 128 // np.dtype(NP[types[0]]).itemsize


def mma_lines(ptx: str) -> list[str]:
    return re.findall(r"tcgen05\.mma\.[^\n]*", ptx)


def ring(types, M, N, K, *, threads=128, bm=128, bn=128, bk=None, exact=False, seed=0,
         tma=None, pair=False):
    """The K-major product kernel on the emulator (with the race checker but for a CTA
    pair's: see test_tcgen05_pair.py) against NumPy; returns the compile result."""
    rng = np.random.default_rng(seed)
    a = operand(rng, types[0], (M, K), exact)
    bt = operand(rng, types[1], (N, K), exact)
    c = np.zeros((M, N), NP[types[2]])
    bk = bk or row128(types)
    src = source(types, threads=threads)
    if pair:
        src = src.replace("1, 1))", "1, 1), cluster = (2, 1, 1))", 1)
    checked = tma is not False and not pair
    res, rep = run(src, "mm", {"a": _bits(a), "bt": _bits(bt), "c": c},
                   (-(-M // bm), -(-N // bn)), target="sm_100a",
                   defines={"BM": bm, "BN": bn, "BK": bk}, race_check=checked, tma=tma)
    if checked:
        assert rep.race_check == "checked: no shared-memory race"
    check(c, a, bt.T, types, exact)
    return res


@pytest.mark.parametrize("types", TYPES, ids=["-".join(t) for t in TYPES])
def test_ring_ragged_matches_numpy(types):
    # two blocks each way, ragged on every side; K = 304 (rows of whole 16-byte units, which
    # TMA needs) is three to ten iterations of a ring of three stages (it wraps), the last
    # one ragged
    res = ring(types, 200, 140, 304, seed=len(types[0]) + len(types[1]))
    kind, kstep = KINDS[types][:2]
    lines = mma_lines(res.ptx)
    # one instruction per k-step of the 128-byte rows of each stage
    bk = row128(types)
    assert len(lines) == bk // kstep
    assert all(f"tcgen05.mma.cta_group::1.kind::{kind} " in x for x in lines)
    assert TMA_LOAD in res.ptx and "mma.sync" not in res.ptx
    assert ".local" not in res.ptx
    # the instruction descriptor: a constant (moved into the MMAs' register)
    assert re.search(rf"\b{idesc(types, 128, 128)}\b", res.ptx)


@pytest.mark.parametrize("types", [("f8e4m3", "f8e5m2", "f32"), ("tf32", "tf32", "f32")],
                         ids=["e4m3-e5m2", "tf32"])
def test_exact_inputs_equal_numpy(types):
    # eighths: every product and partial sum is exact in f32 whatever the order
    ring(types, 128, 128, 512, exact=True, seed=5)


@pytest.mark.parametrize("types", [("f8e5m2", "f8e4m3", "f32"), ("i8", "u8", "i32"),
                                   ("tf32", "tf32", "f32")],
                         ids=["e5m2-e4m3", "i8-u8", "tf32"])
def test_warp_specialized_ring(types):
    # a producer and an MMA warp after the four epilogue warps (192 threads)
    res = ring(types, 130, 256, 208, threads=192, seed=11)
    assert ".reqntid 192, 1, 1" in res.ptx and TMA_LOAD in res.ptx
    assert all(f"kind::{KINDS[types][0]} " in x for x in mma_lines(res.ptx))


# examples/matmul.tile's shape: B stored (K, N), its image MN-major (8-bit types: the
# instruction descriptor's transpose bit for B; tf32 operands have no MN-major image)
ROW_B = """
@launch(reqntid = (THREADS, 1, 1))
kernel mmb(a: Array[TA, 2], b: Array[TB, 2], c: Array[TC, 2], const BK: i32 = 128) {
    let m = bid(0);
    let n = bid(1);
    var acc = zeros((128, 128), TC);
    for k in range(num_tiles(a, axis = 1, shape = (128, BK))) {
        let ta = load(a, index = (m, k), shape = (128, BK), padding = 0);
        let tb = load(b, index = (k, n), shape = (BK, 128), padding = 0);
        acc = mma(ta, tb, acc);
    }
    store(c, index = (m, n), tile = acc);
}
"""
ROW_B_TYPES = [("f8e4m3", "f8e5m2", "f32"), ("i8", "u8", "i32")]


@pytest.mark.parametrize("threads,tma", [(128, None), (192, None), (128, False)],
                         ids=["ring", "warp-specialized", "cp.async"])
@pytest.mark.parametrize("types", ROW_B_TYPES, ids=["e4m3-e5m2", "i8-u8"])
def test_mn_major_b_of_8_bit_types(types, threads, tma):
    # B (K, N) is copied straight into an MN-major image (TMA or cp.async), no registers;
    # ragged on every side
    rng = np.random.default_rng(47)
    M, N, K = 200, 144, 304
    a, b = operand(rng, types[0], (M, K), False), operand(rng, types[1], (K, N), False)
    c = np.zeros((M, N), NP[types[2]])
    res, rep = run(source(types, ROW_B, threads), "mmb", {"a": _bits(a), "b": _bits(b), "c": c},
                   (2, 2), target="sm_100a", race_check=True, tma=tma)
    assert rep.race_check == "checked: no shared-memory race"
    assert (TMA_LOAD in res.ptx) == (tma is None) and ("cp.async.cg" in res.ptx) == (tma is False)
    # the transpose bit of B (16) in the instruction descriptor
    assert re.search(rf"\b{idesc(types, 128, 128) | 1 << 16}\b", res.ptx)
    assert all(f"kind::{KINDS[types][0]} " in x for x in mma_lines(res.ptx))
    check(c, a, b, types, False)


def test_tf32_b_stored_along_n_is_staged_k_major(tmp_path):
    text = _plan(tmp_path, source(("tf32", "tf32", "f32"), ROW_B, 128).replace(
        "const BK: i32 = 128", "const BK: i32 = 32"))
    assert "tcgen05 kind::tf32" in text
    assert "not pipelined: an operand cannot be copied into its image" in text, text


PAIR = [("tf32", "tf32", "f32"), ("f8e4m3", "f8e5m2", "f32"), ("u8", "i8", "i32"),
        ("f16", "f16", "f32")]


@pytest.mark.parametrize("types", PAIR, ids=["-".join(t) for t in PAIR])
def test_cta_pair_with_k_major_b(types):
    # clusters of two along M: cta_group::2 of M = 256; each CTA copies half of B's rows
    # (its K-major image holds N / 2 rows: a box of 64 rows at N coordinate rank x 64).
    # Three pairs (the last CTA past M), two tile columns, a ragged K that wraps the ring
    res = ring(types, 600, 200, 304, pair=True, seed=41)
    lines = mma_lines(res.ptx)
    assert lines and all(f"tcgen05.mma.cta_group::2.kind::{KINDS[types][0]} " in x
                         for x in lines)
    assert re.search(rf"\b{idesc(types, 256, 128)}\b", res.ptx)
    assert ".reqnctapercluster 2, 1, 1" in res.ptx
    assert "cp.async.bulk.tensor.2d.cta_group::2.shared::cluster.global" in res.ptx


@pytest.mark.parametrize("types", [("f8e4m3", "f8e4m3", "f32"), ("u8", "u8", "i32"),
                                   ("tf32", "tf32", "f32")],
                         ids=["e4m3", "u8", "tf32"])
def test_products_on_their_own_by_cp_async(types):
    # no tensor maps: each product copies its operands into K-major images by cp.async
    # (rows of whole 16-byte chunks: K = 112), the last K tile ragged
    res = ring(types, 130, 70, 112, bn=64, seed=3, tma=False)
    assert "cp.async.cg" in res.ptx and TMA_LOAD not in res.ptx
    assert all(f"kind::{KINDS[types][0]} " in x for x in mma_lines(res.ptx))


@pytest.mark.parametrize("types", [("i8", "i8", "i32"), ("f8e5m2", "f8e5m2", "f32"),
                                   ("tf32", "tf32", "f32")],
                         ids=["i8", "e5m2", "tf32"])
def test_batched_with_row_major_b_matches_numpy(types):
    # three matrices, 64-row accumulators (16x32bx2 reads), B (K, N) staged through
    # registers into its K-major image, ragged M, N and K
    rng = np.random.default_rng(17)
    Z, M, N, K = 3, 100, 70, 90
    a = operand(rng, types[0], (Z, M, K), False)
    b = operand(rng, types[1], (Z, K, N), False)
    c = np.zeros((Z, M, N), NP[types[2]])
    res, _ = run(source(types, BATCHED), "bmm", {"a": _bits(a), "b": _bits(b), "c": c},
                 (-(-M // 64), -(-N // 64), Z), target="sm_100a")
    lines = mma_lines(res.ptx)
    assert lines and all(f"kind::{KINDS[types][0]} " in x for x in lines)
    # K-major images (bits 15-16 clear), M = 64 and N = 64 in the descriptor
    assert re.search(rf"\b{idesc(types, 64, 64)}\b", res.ptx)
    check(c, a, b, types, False)


def test_f32_rounded_to_tf32_in_the_kernel():
    # `astype(x, tf32)` rounds f32 values (cvt.rna.tf32.f32) before the product: the
    # reference rounds the same inputs to tf32 first
    rng = np.random.default_rng(23)
    a = rng.standard_normal((150, 70)).astype(np.float32)
    b = rng.standard_normal((70, 100)).astype(np.float32)
    c = np.zeros((150, 100), np.float32)
    res, _ = run(ASTYPE, "mmr", {"a": a, "b": b, "c": c}, (2, 2), target="sm_100a")
    assert all("kind::tf32 " in x for x in mma_lines(res.ptx)) and mma_lines(res.ptx)
    ra, rb = round_to_tf32(a).astype(np.float32), round_to_tf32(b).astype(np.float32)
    check(c, ra, rb, ("tf32", "tf32", "f32"), False)
    # and the rounding matters: exact f32 inputs give another result
    assert not np.array_equal(c, (a.astype(np.float64) @ b).astype(np.float32))


def test_f32_products_stay_exact():
    # f32 operands are not rounded to tf32 behind the user's back: the FMA path
    src = source(("f32", "f32", "f32"))
    arrays = {"a": np.zeros((128, 32), np.float32), "bt": np.zeros((128, 32), np.float32),
              "c": np.zeros((128, 128), np.float32)}
    ptx = compile_for(src, "mm", arrays, target="sm_100a", defines={"BK": 32}).ptx
    assert "tcgen05" not in ptx and "mma.sync" not in ptx


def _plan(tmp_path, src: str) -> str:
    from tilelang.cli import main
    f = tmp_path / "k.tile"
    f.write_text(src)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main([str(f), "--arch", "sm_100a", "--emit", "plan"])
    assert rc in (0, None)
    return out.getvalue()


@pytest.mark.parametrize("types", TYPES, ids=["-".join(t) for t in TYPES])
def test_plan_names_the_kind(tmp_path, types):
    kind, kstep = KINDS[types][:2]
    bk = row128(types)
    text = _plan(tmp_path, source(types).replace("const BK: i32 = 128", f"const BK: i32 = {bk}"))
    assert f"tcgen05 kind::{kind} m128n128k{kstep}: {bk // kstep} instruction(s) per " \
           f"product, 128 TMEM columns (R4)" in text, text
    assert "pipelined (tcgen05), TMA ring of" in text


def test_k_not_a_multiple_of_the_step_stays_on_mma_sync(tmp_path):
    # f8 K = 16: no whole k32 step (mma.sync's k32 cannot take it either: the FMA path)
    text = _plan(tmp_path, source(("f8e4m3", "f8e4m3", "f32")).replace(
        "const BK: i32 = 128", "const BK: i32 = 16"))
    assert "tcgen05" not in text.split("loops:")[0]
    # tf32 K = 8 is one step
    text = _plan(tmp_path, source(("tf32", "tf32", "f32")).replace(
        "const BK: i32 = 128", "const BK: i32 = 8"))
    assert "tcgen05 kind::tf32 m128n128k8: 1 instruction(s) per product" in text, text


# examples/matmul_persistent.tile's loops over output tiles with a K-major B: the ring
# inside carries its stage and phase from one tile to the next
PERSISTENT = """
@launch(reqntid = (128, 1, 1))
kernel mmp(a: Array[TA, 2], bt: Array[TB, 2], c: Array[TC, 2], const BK: i32 = 128) {
    let num_m = num_tiles(a, axis = 0, shape = (128, BK));
    let num_n = num_tiles(bt, axis = 0, shape = (128, BK));
    for t in range(bid(0), num_m * num_n, num_blocks(0)) {
        let m = floordiv(t, num_n);
        let n = t % num_n;
        var acc = zeros((128, 128), TC);
        for k in range(num_tiles(a, axis = 1, shape = (128, BK))) {
            let ta = load(a, index = (m, k), shape = (128, BK), padding = 0);
            let tb = load(bt, index = (k, n), shape = (BK, 128), order = (1, 0), padding = 0);
            acc = mma(ta, tb, acc);
        }
        store(c, index = (m, n), tile = acc);
    }
}
"""


@pytest.mark.parametrize("types", [("u8", "i8", "i32"), ("tf32", "tf32", "f32")],
                         ids=["u8-i8", "tf32"])
def test_persistent_ring(types):
    # six output tiles on two blocks, each K loop of three iterations (tf32: ten) in a ring
    # of three stages carried across tiles
    rng = np.random.default_rng(43)
    M, N, K = 300, 200, 320 if types[0] != "tf32" else 304
    a, bt = operand(rng, types[0], (M, K), False), operand(rng, types[1], (N, K), False)
    c = np.zeros((M, N), NP[types[2]])
    res, rep = run(source(types, PERSISTENT), "mmp", {"a": _bits(a), "bt": _bits(bt), "c": c},
                   (2,), target="sm_100a", defines={"BK": row128(types)}, race_check=True)
    assert rep.race_check == "checked: no shared-memory race"
    assert TMA_LOAD in res.ptx and res.ptx.count("tcgen05.alloc.") == 1
    assert all(f"kind::{KINDS[types][0]} " in x for x in mma_lines(res.ptx))
    check(c, a, bt.T, types, False)


@pytest.mark.parametrize("types", [("tf32", "tf32", "f32"), ("f8e4m3", "f8e5m2", "f32"),
                                   ("i8", "i8", "i32")], ids=["tf32", "e4m3-e5m2", "i8"])
@pytest.mark.parametrize("threads", [128, 192])
def test_cubin_has_no_local_memory(types, threads):
    from tilelang import nvjitlink as lib
    try:
        lib.library()
    except lib.NvJitLinkUnavailable:
        pytest.skip("nvJitLink is not installed")
    arrays = {"a": np.zeros((256, 256), NP[types[0]]), "bt": np.zeros((256, 256), NP[types[1]]),
              "c": np.zeros((256, 256), NP[types[2]])}
    res = compile_for(source(types, threads=threads), "mm", {k: _bits(v) for k, v in
                                                              arrays.items()},
                      target="sm_100a", defines={"BK": row128(types)}, until="cubin")
    assert res.link.backend == "nvjitlink" and TMA_LOAD in res.ptx
    (r,) = res.link.resources.values()
    assert (r.spill_stores, r.spill_loads, r.stack_frame) == (0, 0, 0)


@pytest.mark.slow
@pytest.mark.parametrize("types", TYPES, ids=["-".join(t) for t in TYPES])
def test_more_shapes(types):
    # 64-row tiles (M = 64 descriptors, 16x32bx2 reads) and narrow N in the ring, and a
    # warp-specialized ring of K below one stage
    assert TMA_LOAD in ring(types, 150, 90, 272, bm=64, bn=32, seed=29).ptx
    assert TMA_LOAD in ring(types, 128, 128, row128(types) // 2, threads=192, seed=31).ptx
