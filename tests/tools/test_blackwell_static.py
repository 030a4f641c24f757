"""benchmarks/blackwell_static.py's block-scaled table: the tiles it reads from the examples'
constants are the ones the compiler resolves, every example has a row as written on each
target, a tile it sets lands in the source, and the NVFP4 rows count the FP4 block-scaled
instructions a K-step that the tile implies (OMMA: BM * BN * BK / (16 * 8 * 64) a warp of
four; UTCOMMA: BK / 64)."""

from __future__ import annotations

import importlib.util
import pathlib
import sys

import pytest

from tilelang.tools import sass

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _script():
    spec = importlib.util.spec_from_file_location(
        "blackwell_static", ROOT / "benchmarks" / "blackwell_static.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod        # its dataclass looks its module up while it is built
    spec.loader.exec_module(mod)
    return mod


bs = _script()


def _example(fmt: str) -> str:
    return (ROOT / "examples" / bs.SCALED_EXAMPLE[fmt]).read_text("utf-8")


@pytest.mark.parametrize("fmt,target,tile", [
    ("mxfp8", "sm_120a", (64, 64, 64)), ("mxfp8", "sm_100a", (128, 128, 128)),
    ("nvfp4", "sm_120a", (64, 64, 64)), ("nvfp4", "sm_100a", (128, 64, 64))])
def test_example_defaults(fmt, target, tile):
    assert bs.example_defaults(_example(fmt), target) == tile


def test_every_example_has_a_row_as_written_on_each_target():
    written = {(fmt, t) for _, t, bm, bn, bk, fmt in bs.SCALED
               if (bm, bn, bk) == bs.example_defaults(_example(fmt), t)}
    assert written == {(f, t) for f in bs.SCALED_EXAMPLE for t in bs.TARGETS}
    ring, = (r for r in bs.SCALED if r[0] == bs.RING)
    assert ring[1:] == ("sm_100a", 128, 128, 128, "mxfp8")
    assert len({r[0] for r in bs.SCALED}) == len(bs.SCALED)


def test_fixed_tiles_sets_each_constant_and_four_warps():
    text = bs._fixed_tiles(_example("mxfp8"), 128, 64, 32)
    assert bs.example_defaults(text, "sm_100a") == (128, 64, 32)
    assert bs.example_defaults(text, "sm_120a") == (128, 64, 32)
    assert "@launch(reqntid = (128, 1, 1))" in text and "(192, 1, 1)" not in text
    text = bs._fixed_tiles(_example("nvfp4"), 128, 64, 128)
    assert bs.example_defaults(text, "sm_120a") == (128, 64, 128)
    with pytest.raises(AssertionError, match="the example's BN is not one"):
        bs._fixed_tiles(_example("nvfp4").replace("const BN: i32 = 64,\n", ""), 64, 64, 64)


@pytest.mark.slow
@pytest.mark.parametrize("fmt,target", [("nvfp4", "sm_120a"), ("nvfp4", "sm_100a"),
                                        ("mxfp8", "sm_120a")])
def test_as_written_is_what_the_compiler_resolves(fmt, target):
    """At four warps the example as written and the example with its parsed defaults set
    explicitly compile to the same PTX; another tile does not."""
    from tilelang.driver import compile_source
    from tilelang.options import CompileOptions

    src = _example(fmt)

    def ptx(text):
        return compile_source(text, "m.tile", CompileOptions(target=target), until="ptx").ptx
    mine = ptx(src)
    assert ptx(bs._fixed_tiles(src, *bs.example_defaults(src, target))) == mine
    assert ptx(bs._fixed_tiles(src, 128, 64, 128)) != mine


@pytest.mark.slow
@pytest.mark.skipif(not sass.tools_available(), reason="cuobjdump/nvdisasm wheels not installed")
def test_nvfp4_rows_count_fp4_instructions_a_k_step(monkeypatch):
    monkeypatch.setattr(bs, "SCALED", tuple(r for r in bs.SCALED if r[5] == "nvfp4"))
    builds = bs.scaled_tile_builds()
    assert [(b.target, tile) for b, tile, _ in builds] == [
        ("sm_120a", (64, 64, 64)), ("sm_120a", (128, 64, 128)), ("sm_100a", (128, 64, 64))]
    for b, (bm, bn, bk), fmt in builds:
        assert fmt == "nvfp4"
        m = bs.analyze_scaled(b, (bm, bn, bk))
        want = (f"{bm * bn * bk // (16 * 8 * 64) // 4} OMMA" if b.target == "sm_120a"
                else f"{bk // 64} UTCOMMA")
        assert m["mma"] == want, (b.how, m)
        assert m["spills"] == 0 and m["local"] == 0, (b.how, m)
        assert m["per_k_step"] > 0
