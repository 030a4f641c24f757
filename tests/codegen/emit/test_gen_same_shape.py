"""The `same_shape` fact in the lowering (docs/codegen.md): an array whose shape equals an
earlier array's tests its bounds against that array's extents, the same SSA values, so LLVM
keeps one compare where there was one per array, and its extent parameters are not loaded."""

from __future__ import annotations

import os
import pathlib
import re

from tilelang.codegen.api import ArrayFacts
from tilelang.driver import compile_kernel
from tilelang.options import CompileOptions

ROOT = str(pathlib.Path(__file__).resolve().parents[3])
VADD = os.path.join(ROOT, "examples", "vadd.tile")


def vadd_ptx(keys) -> str:
    with open(VADD) as f:
        text = f.read()
    facts = {n: ArrayFacts.from_key(k) for n, k in zip("abc", keys)}
    return compile_kernel(text, VADD, "vadd", consts={"TILE": 256},
                          options=CompileOptions(target="sm_90a"), facts=facts, link=False).ptx


def tile_end_tests(ptx: str) -> set[str]:
    """The extents the tile's end is tested against: under `small` the uniform full-tile test
    of each access is `bid < extent >> 8` (256-element tiles), one shift of each extent
    tested (the full launch's copy of the body and the virtual-thread loop's share it)."""
    return set(re.findall(r"shr\.s32\s+%r\d+, (%r\d+), 8;", ptx))


def loaded_params(ptx: str) -> set[int]:
    return {int(n) for n in re.findall(r"ld\.param\.b(?:64|32)\s+%r[d]?\d+, "
                                       r"\[vadd_param_(\d+)\];", ptx)}


def test_vadd_one_bounds_test_per_vector_under_the_fact():
    plain = vadd_ptx(("caes", "caes", "caes"))
    linked = vadd_ptx(("caes", "caes=0", "caes=0"))
    assert len(tile_end_tests(plain)) == 3                 # a's, b's and c's extents
    assert len(tile_end_tests(linked)) == 1                # a's only, shared
    # parameters: a = 0 (address), 1 (extent), 2 (stride); b = 3, 4, 5; c = 6, 7, 8. The last
    # strides are not read (contiguous); b's and c's extents are not read under the fact
    assert loaded_params(plain) == {0, 1, 3, 4, 6, 7}
    assert loaded_params(linked) == {0, 1, 3, 6}
    # the edge tests of each access compare against a's extent only (its low half: `small`)
    extent = re.search(r"ld\.param\.b32\s+(%r\d+), \[vadd_param_1\];", linked).group(1)
    assert tile_end_tests(linked) == {extent}
    edge = re.findall(r"setp\.lt\.u32\s+%p\d+, %r\d+, (%r\d+);", linked)
    # one test shared by the 3 accesses (a stream: lower/stream.py), 2 copies of the body
    assert len(edge) == 2 and set(edge) == {extent}


def test_partial_link_keeps_the_other_extent():
    ptx = vadd_ptx(("caes", "caes", "caes=1"))             # c's shape is b's, a's differs
    assert len(tile_end_tests(ptx)) == 2
    assert loaded_params(ptx) == {0, 1, 3, 4, 6}
