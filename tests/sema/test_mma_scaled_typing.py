"""`mma_scaled` typing: the element and scale formats it takes, the scale tiles' shapes (one
scale per 32 elements of K for ue8m0, per 16 for f8e4m3) and the diagnostics, with spans."""

from __future__ import annotations

import pytest

from sema_helpers import errors_of, run_check
from tilelang.diagnostics import render


def _error(src: str) -> str:
    errs = errors_of(run_check(src))
    assert len(errs) == 1, [render(e) for e in errs]
    return render(errs[0])


def _load_src(a="f8e4m3", sa="ue8m0", b="f8e4m3", sb="ue8m0", sha="(16, 2)", shb="(2, 8)",
              acc="f32", k=64):
    return (f"kernel k(pa: Array[{a}, 2], psa: Array[{sa}, 2], pb: Array[{b}, 2], "
            f"psb: Array[{sb}, 2], c: Array[f32, 2]) {{\n"
            f"    let x = load(pa, (0, 0), (16, {k}));\n"
            f"    let xs = load(psa, (0, 0), {sha});\n"
            f"    let y = load(pb, (0, 0), ({k}, 8));\n"
            f"    let ys = load(psb, (0, 0), {shb});\n"
            f"    store(c, (0, 0), mma_scaled(x, xs, y, ys, zeros((16, 8), {acc})));\n"
            f"}}\n")


@pytest.mark.parametrize("a,b,sa,sk", [
    ("f8e4m3", "f8e5m2", "ue8m0", 2),      # MXFP8, mixed formats as kind::mxf8f6f4 takes
    ("f6e2m3", "f6e3m2", "ue8m0", 2),      # MXFP6
    ("f4e2m1", "f4e2m1", "ue8m0", 2),      # MXFP4
    ("f4e2m1", "f4e2m1", "f8e4m3", 4),     # NVFP4: 16 elements per scale
])
def test_accepted_formats(a, b, sa, sk):
    src = _load_src(a=a, b=b, sa=sa, sb=sa, sha=f"(16, {sk})", shb=f"({sk}, 8)")
    assert not errors_of(run_check(src))


def test_batched():
    src = ("kernel k(pa: Array[f8e4m3, 3], psa: Array[ue8m0, 3], c: Array[f32, 3]) {\n"
           "    let x = load(pa, (0, 0, 0), (2, 16, 64));\n"
           "    let s = load(psa, (0, 0, 0), (2, 16, 2));\n"
           "    let y = load(pa, (0, 0, 0), (2, 64, 8));\n"
           "    let t = load(psa, (0, 0, 0), (2, 2, 8));\n"
           "    store(c, (0, 0, 0), mma_scaled(x, s, y, t, zeros((2, 16, 8), f32)));\n}\n")
    assert not errors_of(run_check(src))


def test_scale_shape_names_the_block():
    text = _error(_load_src(sha="(16, 4)"))
    assert text.splitlines()[0] == ("error[E0509]: `mma_scaled`: parameter `a_scale` is "
                                    "Tile[ue8m0, 16, 4], but one scale per 32 elements of K "
                                    "needs shape (16, 2)")
    assert text.splitlines()[1] == " --> t.tile:6:36"


def test_nvfp4_scales_take_only_f4_elements():
    text = _error(_load_src(sa="f8e4m3", sb="f8e4m3", sha="(16, 4)", shb="(4, 8)"))
    assert text.splitlines()[0] == ("error[E0508]: `mma_scaled`: parameter `a` is "
                                    "Tile[f8e4m3, 16, 64], but f8e4m3 scales (NVFP4) take "
                                    "f4e2m1 elements")


def test_element_scale_and_accumulator_dtypes():
    assert _error(_load_src(a="f16", b="f16")).splitlines()[0] == (
        "error[E0508]: `mma_scaled`: parameter `a` is Tile[f16, 16, 64], but block-scaled "
        "products take f8e4m3, f8e5m2, f6e2m3, f6e3m2, f4e2m1, f4e2m1x2")
    assert _error(_load_src(sa="u8", sb="u8")).splitlines()[0] == (
        "error[E0508]: `mma_scaled`: parameter `a_scale` is Tile[u8, 16, 2], but scales are "
        "ue8m0 (MX) or f8e4m3 (NVFP4)")
    assert _error(_load_src(sb="f8e4m3")).splitlines()[0] == (
        "error[E0508]: `mma_scaled`: parameter `b_scale` is Tile[f8e4m3, 2, 8], but `a_scale` "
        "is Tile[ue8m0, 16, 2]: both scales need the same dtype")
    assert _error(_load_src(acc="f16")).splitlines()[0] == (
        "error[E0508]: `mma_scaled`: parameter `acc` is Tile[f16, 16, 8], but block-scaled "
        "products accumulate in f32")


def test_k_smaller_than_a_block():
    text = _error(_load_src(k=16, sha="(16, 1)", shb="(1, 8)"))
    assert text.splitlines()[0] == ("error[E0509]: `mma_scaled`: parameter `a` is "
                                    "Tile[f8e4m3, 16, 16]: K (16) must be a multiple of the "
                                    "scale block (32)")


def test_plain_mma_of_a_block_scaled_format_points_to_mma_scaled():
    src = ("kernel k(pa: Array[f4e2m1, 2], c: Array[f32, 2]) {\n"
           "    let x = load(pa, (0, 0), (16, 64));\n"
           "    let y = load(pa, (0, 0), (64, 8));\n"
           "    store(c, (0, 0), mma(x, y, zeros((16, 8), f32)));\n}\n")
    errs = errors_of(run_check(src))
    assert [e.code for e in errs] == ["E0508"]
    assert errs[0].message.startswith("`mma`: parameter `a` is Tile[f4e2m1, 16, 64], but "
                                      "matrix products take f16, ")
    assert errs[0].help == ("block-scaled formats multiply with `mma_scaled(a, a_scale, b, "
                            "b_scale, acc)`")


def _packed_src(a="f4e2m1x2", b="f4e2m1x2", sa="f8e4m3", ka=32, kb=32, sk=4):
    """a (16, ka) and b (kb, 8) tiles; packed FP4 holds two elements of K a byte."""
    return (f"kernel k(pa: Array[{a}, 2], psa: Array[{sa}, 2], pb: Array[{b}, 2], "
            f"c: Array[f32, 2]) {{\n"
            f"    let x = load(pa, (0, 0), (16, {ka}));\n"
            f"    let xs = load(psa, (0, 0), (16, {sk}));\n"
            f"    let y = load(pb, (0, 0), ({kb}, 8));\n"
            f"    let ys = load(psa, (0, 0), ({sk}, 8));\n"
            f"    store(c, (0, 0), mma_scaled(x, xs, y, ys, zeros((16, 8), f32)));\n"
            f"}}\n")


@pytest.mark.parametrize("sa,sk", [("f8e4m3", 4), ("ue8m0", 2)], ids=["nvfp4", "mxfp4"])
def test_packed_fp4_counts_k_in_elements(sa, sk):
    """(16, 32) bytes x (32, 8) bytes is K = 64: four f8e4m3 scales a row (NVFP4) or two
    ue8m0 ones (MXFP4)."""
    assert not errors_of(run_check(_packed_src(sa=sa, sk=sk)))


def test_packed_fp4_scale_shape_counts_elements():
    text = _error(_packed_src(sk=2))
    assert text.splitlines()[0] == ("error[E0509]: `mma_scaled`: parameter `a_scale` is "
                                    "Tile[f8e4m3, 16, 2], but one scale per 16 elements of K "
                                    "needs shape (16, 4)")


def test_packed_fp4_with_unpacked_operand_is_refused():
    text = _error(_packed_src(b="f4e2m1", kb=64))
    assert text.splitlines()[0] == ("error[E0508]: `mma_scaled`: parameter `b` is "
                                    "Tile[f4e2m1, 64, 8], but `a` is Tile[f4e2m1x2, 16, 32]: "
                                    "packed FP4 multiplies packed FP4")
    assert "help: pack both operands two f4e2m1 a byte (f4e2m1x2) or neither" in text
    assert text.splitlines()[1] == " --> t.tile:6:40"          # at `y`
    text = _error(_packed_src(a="f8e4m3", ka=64, sa="ue8m0", sk=2))
    assert text.splitlines()[0].startswith("error[E0508]: `mma_scaled`: parameter `a` is "
                                           "Tile[f8e4m3, 16, 64], but `b` is Tile[f4e2m1x2")


def test_packed_fp4_k_must_fill_scale_blocks():
    """(16, 4) bytes are K = 8: not a whole 16-element NVFP4 block."""
    text = _error(_packed_src(ka=4, kb=4, sk=1))
    assert text.splitlines()[0] == ("error[E0509]: `mma_scaled`: parameter `a` is "
                                    "Tile[f4e2m1x2, 16, 4]: K (8 = 4 bytes of two) must be a "
                                    "multiple of the scale block (16)")
