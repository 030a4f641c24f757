"""multimem on the emulated world (docs/distributed.md, "Multimem"): the one-shot all-reduce
over NVLink SHARP of examples/distributed/ against NumPy at 2, 4 and 8 ranks (ragged); the
reductions per element type (wrapping integer adds, signed and unsigned min/max, f64 adds in
rank order) with masks and indices outside the array; a multicast store from one rank landing
in every rank's buffer; and a multimem instruction at an address that is no multicast address
faulting."""

from __future__ import annotations

import importlib.util
import pathlib

import numpy as np
import pytest

import tilelang.distributed as td
from tilelang.emulator.errors import MemoryFault
from tilelang.emulator.world import EmulatedWorld

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "distributed" / "all_reduce_multimem.py"


def _example():
    spec = importlib.util.spec_from_file_location("dist_all_reduce_multimem", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("n,length", [(2, 300), (4, 129), (8, 1100), (3, 1)])
def test_all_reduce_multimem(n, length):
    _example().run(n, length, np.random.default_rng(n))


SRC = """@launch(reqntid = (64, 1, 1))
kernel k(x: Symmetric[Array[DT, 1]], y: Array[DT, 1], z: Symmetric[Array[DT, 1]],
         pad: Symmetric[Array[u32, 1]]) {
    barrier(pad, channel = 0);
    let i = arange(64);
    store(y, index = (0,), tile = multimem_reduce(x, (i,), op = "OP", mask = i % 3 != 1));
    if rank() == 1 {
        multimem_store(z, (i + 10,), multimem_reduce(x, (i,), op = "OP"), mask = i < 40);
    }
    barrier(pad, channel = 1);
}
"""

NP = {"i32": np.int32, "u32": np.uint32, "i64": np.int64, "u64": np.uint64, "f64": np.float64,
      "f32": np.float32}


def _data(dt, rng, n):
    t = np.dtype(NP[dt])
    if t.kind == "f":
        return rng.standard_normal(n).astype(t)
    info = np.iinfo(t)
    return rng.integers(info.min, info.max, n, dtype=t, endpoint=True)


@pytest.mark.parametrize("dt,op", [("i32", "add"), ("i32", "min"), ("u32", "max"),
                                   ("i64", "add"), ("i64", "max"), ("u64", "add"),
                                   ("u64", "min"), ("f64", "add"), ("f32", "add")])
def test_reductions_masks_and_a_multicast_store(dt, op):
    n, length = 3, 50
    rng = np.random.default_rng(5)
    w = td.world(n)
    x = w.symmetric((length,), dt)
    z = w.symmetric((64,), dt)
    pad = w.symmetric((2 * n,), "u32")
    data = [_data(dt, rng, length) for _ in range(n)]
    for r in range(n):
        x.write(r, data[r])
    ys = [np.full(64, 7, NP[dt]) for _ in range(n)]
    k = w.kernel(SRC.replace("DT", dt).replace("OP", op), "k")
    w.launch_all(k, 1, lambda r: (x, ys[r], z, pad))
    with np.errstate(over="ignore"):
        want = data[0].copy()
        for d in data[1:]:                     # rank order; integers wrap
            want = {"add": np.add, "min": np.minimum, "max": np.maximum}[op](want, d)
    e = np.arange(64)
    y_want = np.zeros(64, NP[dt])
    keep = (e < length) & (e % 3 != 1)
    y_want[keep] = want[e[keep]]
    z_want = np.zeros(64, NP[dt])
    z_want[10:50] = want[:40]
    for r in range(n):
        assert np.array_equal(ys[r], y_want), (r, ys[r], y_want)
        assert np.array_equal(z.on(r), z_want), r
        assert np.array_equal(x.on(r), data[r])


PTX = """.version 8.1
.target sm_90
.address_size 64
.visible .entry k(.param .u64 p, .param .u64 q) {
  .reg .b64 %rd<3>;
  .reg .b32 %r<2>;
  ld.param.u64 %rd1, [p];
  ld.param.u64 %rd2, [q];
  mov.b32 %r1, 5;
  multimem.st.relaxed.sys.global.u32 [%rd1], %r1;
  ret;
}
"""


def test_a_multimem_store_to_a_plain_buffer_faults():
    w = EmulatedWorld(2)
    bufs = [w.malloc(r, 64) for r in range(2)]
    fn = w.load_module(PTX).get_function("k")
    with pytest.raises(MemoryFault, match="multimem access of 4 bytes at an address that is "
                                          "no multicast address"):
        w.launch(fn, (1,), (32,), [(bufs[r], bufs[r]) for r in range(2)])


def test_a_multicast_window_reaches_every_rank():
    # every rank multicasts to the same word: the race check reports the concurrent stores,
    # without it each rank's buffer holds the value
    from tilelang.emulator.errors import GlobalMemoryRace
    for check in (True, False):
        w = EmulatedWorld(3, global_race_check=check)
        bufs = [w.malloc(r, 64) for r in range(3)]
        mc = w.multicast(bufs, 64)
        fn = w.load_module(PTX).get_function("k")
        if check:
            with pytest.raises(GlobalMemoryRace, match="this block writes a word that rank"):
                w.launch(fn, (1,), (32,), [(mc, bufs[r]) for r in range(3)])
            continue
        w.launch(fn, (1,), (32,), [(mc, bufs[r]) for r in range(3)])
        for b in bufs:
            got = w.device.memcpy_dtoh(np.zeros(16, np.uint32), b)
            assert got[0] == 5 and not got[1:].any()


RACY = """@launch(reqntid = (64, 1, 1))
kernel racy(x: Symmetric[Array[f32, 1]], y: Array[f32, 1], pad: Symmetric[Array[u32, 1]]) {
    let i = arange(64);
    store(peer(x, rank()), index = (0,), tile = zeros((64,), f32) + 1.0);
    BARRIER
    store(y, index = (0,), tile = multimem_reduce(x, (i,)));
}
"""


@pytest.mark.parametrize("ordered", [False, True])
def test_a_multimem_reduce_races_with_unordered_stores(ordered):
    """Every rank writes its own x, then reads all of them through the multicast address:
    without a barrier between, the cross-device race check reports it; with one, every rank
    gets the sum."""
    from tilelang.emulator.errors import GlobalMemoryRace
    n = 2
    w = td.world(n)
    x = w.symmetric((64,), "f32")
    pad = w.symmetric((n,), "u32")
    k = w.kernel(RACY.replace("BARRIER", "barrier(pad);" if ordered else ""), "racy")
    ys = [np.zeros(64, np.float32) for _ in range(n)]
    if not ordered:
        with pytest.raises(GlobalMemoryRace, match=r"global-memory data race: this block reads "
                                                   r"a word that rank \d's block"):
            w.launch_all(k, 1, lambda r: (x, ys[r], pad))
        return
    w.launch_all(k, 1, lambda r: (x, ys[r], pad))
    assert all((y == n).all() for y in ys)
