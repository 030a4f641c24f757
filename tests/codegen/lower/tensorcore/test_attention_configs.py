"""examples/attention.tile at every configuration of the static comparison
(benchmarks/attention_static.py), on the emulator against NumPy's float64 attention, with
sequence lengths on both sides of the loop-splitting bounds (docs/ir.md, Passes: split): a
whole number of key tiles (no ragged tile), one key more, fewer keys than one tile (every tile
masked), and causal blocks whose diagonal crosses two key tiles (BM = 2 * BN); and the
example's own sm_90a default (128 x 128 over 8 warps), ragged and causal. The default run
keeps three small cases; the rest are `slow`."""

from __future__ import annotations

import functools
import importlib.util
import pathlib
import re

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[4]


@functools.lru_cache(maxsize=None)
def script():
    spec = importlib.util.spec_from_file_location("attention_configs_example",
                                                  ROOT / "examples" / "attention.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@functools.lru_cache(maxsize=None)
def module(threads: int | None):
    """The example compiled for the emulator (sm_90a) with `reqntid = (threads, 1, 1)`, or as
    written (its per-target default) when `threads` is None."""
    import tempfile
    import tilelang
    src = (ROOT / "examples" / "attention.tile").read_text()
    if threads is not None:
        src, n = re.subn(r"reqntid\s*=\s*by_target\(sm_90a = \(256, 1, 1\), "
                         r"default = \(128, 1, 1\)\)", f"reqntid = ({threads}, 1, 1)", src)
        assert n == 1, "examples/attention.tile's @launch is not the one this test widens"
    d = tempfile.mkdtemp(prefix="tile-attn-cfg-")
    path = pathlib.Path(d) / "attention.tile"
    path.write_text(src)
    return tilelang.compile(str(path), backend="emulator")


def run(monkeypatch, *, dtype, d, causal, seq, bm=64, bn=None, threads=128, heads=1):
    ex = script()
    monkeypatch.setattr(ex, "BM", bm)
    if bn is not None:
        monkeypatch.setattr(ex, "key_tile", lambda d_, target, default_bn: bn)
    mod = module(threads)
    err = ex.check(mod, mod.backend, dtype, heads, seq, d, causal, np.random.default_rng(seq))
    assert err <= (2e-2 if dtype == "bf16" else 4e-3)


# (dtype, D, causal, seq, BM, BN, threads); None: the example's default on sm_90a, the
# emulator's target (128 x 128, 256 threads)
DEFAULT = [("f16", 64, True, 64, 64, 64, 128),      # whole tiles: no ragged tile
           ("bf16", 64, False, 30, 64, 64, 128),    # fewer keys than one tile
           ("f16", 64, True, 200, None, None, None)]  # the default: ragged, causal, 2 blocks
SLOW = [("f16", 64, False, 65, 64, 64, 128),
        ("bf16", 64, True, 130, 64, 64, 128),
        ("f16", 128, False, 70, 64, 64, 128),
        ("f16", 128, True, 128, 64, 64, 128),
        ("bf16", 128, True, 70, 64, 64, 128),
        ("f16", 64, True, 150, 128, 64, 128),     # BM = 2 * BN: two diagonal tiles a block
        ("f16", 128, False, 130, 128, 128, 256),  # the 8-warp configuration
        ("f16", 128, True, 200, 128, 128, 256),
        ("bf16", 64, False, 300, None, None, None),  # the default: three blocks, ragged
        ("f16", 128, False, 130, None, None, None),
        ("bf16", 128, True, 260, None, None, None)]


@pytest.mark.parametrize("dtype,d,causal,seq,bm,bn,threads", DEFAULT)
def test_configuration_matches_numpy(monkeypatch, dtype, d, causal, seq, bm, bn, threads):
    run(monkeypatch, dtype=dtype, d=d, causal=causal, seq=seq, bm=bm, bn=bn, threads=threads)


@pytest.mark.slow
@pytest.mark.parametrize("dtype,d,causal,seq,bm,bn,threads", SLOW)
def test_configuration_matches_numpy_slow(monkeypatch, dtype, d, causal, seq, bm, bn, threads):
    run(monkeypatch, dtype=dtype, d=d, causal=causal, seq=seq, bm=bm, bn=bn, threads=threads)
