"""Warp specialization (issue 16 scope 3): a block of two consumer warp groups and one
producer warp group (`@launch(reqntid = (384, 1, 1))`) runs its pipelined TMA + wgmma loop
specialized (wgmma_product._ws_loop): the producer's first thread issues every stage's TMA
copies on full mbarriers after the consumers released the stage on empty ones, the consumers
wait, multiply and release; `setmaxnreg` moves registers from the producer (40) to the
consumers (232). Results on the emulator against NumPy, the PTX's protocol, and nvJitLink's
assembly (no spills)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from wgmma_support import attention_reference, compile_for, one_group_matmul, run

ROOT = Path(__file__).resolve().parents[4]
SRC = one_group_matmul().replace(
    "@launch(reqntid = (128, 1, 1), maxnreg = by_target(sm_90a = 168), cluster = (2, 1, 1))",
    "@launch(reqntid = (384, 1, 1))")


def _arrays(m, n, k, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.integers(-3, 4, (m, k)).astype(np.float16)
    b = rng.integers(-3, 4, (k, n)).astype(np.float16)
    return {"a": a, "b": b, "c": np.full((m, n), np.nan, np.float32)}


@pytest.mark.parametrize("m,n,k,tile", [
    (128, 128, 512, None),           # 8 K-steps: the ring of stages wraps, empties released
    (200, 136, 200, None),           # ragged on every side
    (128, 128, 40, None),            # K below one step
    (192, 64, 96, (64, 64, 32)),     # 64 x 64 tiles: the two consumer groups split N
])
def test_matches_numpy(m, n, k, tile):
    arrays = _arrays(m, n, k)
    defines = {} if tile is None else dict(zip(("BM", "BN", "BK"), map(str, tile)))
    bm, bn = tile[:2] if tile else (128, 128)
    _, rep = run(SRC, "matmul", arrays, (-(-m // bm), -(-n // bn)), defines=defines,
                 race_check=True)
    # the full/empty rings order every stage's refill after the consumers' reads
    assert rep.race_check == "checked: no shared-memory race"
    want = arrays["a"].astype(np.float64) @ arrays["b"].astype(np.float64)
    assert np.array_equal(arrays["c"], want)


def test_protocol_and_contract():
    res = compile_for(SRC, "matmul", _arrays(256, 256, 256), until="cubin")
    ptx = res.ptx
    assert ".reqntid 384, 1, 1" in ptx and ".maxnreg 168" in ptx
    assert "setmaxnreg.dec.sync.aligned.u32 40;" in ptx
    assert "setmaxnreg.inc.sync.aligned.u32 232;" in ptx
    # full and empty mbarriers: consumers arrive on the empties, the producer waits on them
    assert re.search(r"mbarrier\.init\.shared::cta\.b64 \[%r\d+\], 256;", ptx)
    assert "mbarrier.arrive.shared::cta.b64" in ptx
    # no block-wide barrier after the split: the epilogue's are named barriers of the 256
    # consumer threads
    split = ptx.index("setmaxnreg.inc")
    assert "bar.sync" not in ptx[split:] and "barrier.sync 1, 256;" in ptx[split:]
    r = res.link.resources["matmul"]
    assert (r.spill_stores, r.spill_loads) == (0, 0)


def test_without_a_producer_group_nothing_changes():
    # 256 threads: two warp groups, no producer; the ring is the ordinary one
    src = SRC.replace("reqntid = (384, 1, 1)", "reqntid = (256, 1, 1)")
    ptx = compile_for(src, "matmul", _arrays(256, 256, 256)).ptx
    assert "setmaxnreg" not in ptx and "barrier.sync 1" not in ptx


@pytest.mark.gpu
def test_matches_numpy_on_gpu():
    # setmaxnreg, the producer's exit and the named barriers on a real sm_90 device
    import tilelang
    mod = tilelang.compile(SRC, backend="cuda")
    rng = np.random.default_rng(1)
    m, n, k = 1000, 1000, 520
    a = (rng.integers(-8, 9, (m, k)) / 8).astype(np.float16)
    b = (rng.integers(-8, 9, (k, n)) / 8).astype(np.float16)
    da, db = (tilelang.to_device(x, backend=mod.backend) for x in (a, b))
    dc = tilelang.to_device(np.full((m, n), np.nan, np.float32), backend=mod.backend)
    mod.matmul[(-(-m // 128), -(-n // 128))](da, db, dc)
    mod.backend.synchronize()
    assert np.array_equal(np.asarray(dc), a.astype(np.float64) @ b.astype(np.float64))


def _two(n, rows):
    import test_prefetch as tp
    src = tp.TWO.replace("reqntid = (128, 1, 1)", "reqntid = (384, 1, 1)")
    rng = np.random.default_rng(rows)
    a = rng.integers(-3, 4, (64, 64)).astype(np.float16)
    k = rng.integers(-3, 4, (rows, 64)).astype(np.float16)
    v = rng.integers(-3, 4, (rows, 64)).astype(np.float16)
    arrays = {"a": a, "k": k, "v": v, "c": np.full((64, 64), np.nan, np.float32)}
    res, rep = run(src, "two", arrays, (1,), scalars=[np.int32(n)], race_check=True)
    assert rep.race_check == "checked: no shared-memory race"
    assert np.array_equal(arrays["c"], tp._two_reference(a, k, v, n))
    return res.ptx


@pytest.mark.parametrize("n,rows", [(5, 320), (4, 200), (1, 64), (0, 64)])
def test_prefetched_loop_specialized(n, rows):
    # a loop of two products (lower/tensorcore/mma_prefetch.py) in a block of 384 threads: the producer
    # group copies K and V ahead on full mbarriers, the consumers release each stage at the
    # end of its iteration; the ring wraps, a ragged tile, one iteration, none
    ptx = _two(n, rows)
    assert "setmaxnreg.dec.sync.aligned.u32 40;" in ptx and ".maxnreg 168" in ptx
    assert "mbarrier.arrive.shared::cta.b64" in ptx and "barrier.sync 1, 256;" in ptx


@pytest.mark.parametrize("causal", ["false", "true"])
def test_attention_specialized(causal):
    # examples/attention.tile with 384 threads and 128 query rows: two consumer warp groups
    # of 64 rows, K and V by the producer group; vs NumPy's softmax
    src = (ROOT / "examples" / "attention.tile").read_text().replace(
        "@launch(reqntid = by_target(sm_90a = (256, 1, 1), default = (128, 1, 1)))", "@launch(reqntid = (384, 1, 1))")
    seq, d = 200, 64
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((1, seq, d)).astype(np.float16) for _ in range(3))
    arrays = {"q": q, "k": k, "v": v, "o": np.full((1, seq, d), np.nan, np.float16)}
    scale = 1.0 / np.sqrt(d)
    res, rep = run(src, "attention", arrays, (2, 1), scalars=[np.float32(scale)],
                   defines={"BM": "128", "BN": "64", "D": "64", "CAUSAL": causal},
                   race_check=True)
    assert rep.race_check == "checked: no shared-memory race"
    assert "setmaxnreg.inc" in res.ptx
    want = attention_reference(q[0], k[0], v[0], scale, causal)
    got = arrays["o"][0].astype(np.float64)
    assert np.abs(got - want).max() / np.abs(want).max() < 4e-3


def test_only_the_first_loop_specializes():
    # the producer group exits after the first specialized loop: a second loop runs on the
    # consumers alone with thread 0 issuing its copies (one setmaxnreg.dec in the kernel)
    import test_prefetch as tp
    second = ("    var acc2 = zeros((64, 64), f32);\n"
              "    for j in range(n) {\n"
              "        let tk = load(k, index = (j, 0), shape = (64, 64), padding = 0);\n"
              "        let tv = load(v, index = (j, 0), shape = (64, 64), padding = 0);\n"
              "        let s = mma(ta, transpose(tk), zeros((64, 64), f32)) * 0.25;\n"
              "        acc2 = mma(astype(s, f16), tv, acc2);\n"
              "    }\n"
              "    store(c, index = (0, 0), tile = acc + acc2);\n}")
    src = tp.TWO.replace("reqntid = (128, 1, 1)", "reqntid = (384, 1, 1)").replace(
        "    store(c, index = (0, 0), tile = acc);\n}", second)
    rng = np.random.default_rng(9)
    a = rng.integers(-3, 4, (64, 64)).astype(np.float16)
    k = rng.integers(-3, 4, (200, 64)).astype(np.float16)
    v = rng.integers(-3, 4, (200, 64)).astype(np.float16)
    arrays = {"a": a, "k": k, "v": v, "c": np.full((64, 64), np.nan, np.float32)}
    res, rep = run(src, "two", arrays, (1,), scalars=[np.int32(4)], race_check=True)
    assert rep.race_check == "checked: no shared-memory race"
    assert res.ptx.count("setmaxnreg.dec") == 1
    assert np.array_equal(arrays["c"], 2 * tp._two_reference(a, k, v, 4))
