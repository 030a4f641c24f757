"""tilelang.distributed (docs/distributed.md): the examples of examples/distributed/ against
NumPy on emulated worlds of 2, 4 and 8 ranks with ragged sizes; a deadlocking kernel and a
cross-device race reported with their ranks and source lines; the API's refusals."""

from __future__ import annotations

import importlib.util
import re
import pathlib

import numpy as np
import pytest

import tilelang
import tilelang.distributed as td
from tilelang.emulator.errors import GlobalMemoryRace, NoProgress
from tilelang.diagnostics import TileError

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "distributed"


def _script(name):
    spec = importlib.util.spec_from_file_location(f"dist_{name}", EXAMPLES / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("n,length", [(2, 300), (4, 129), (8, 517)])
def test_all_reduce(n, length):
    _script("all_reduce").run(n, length, np.random.default_rng(n))


@pytest.mark.parametrize("n,length", [(2, 300), (4, 200), (8, 131)])
def test_all_gather(n, length):
    _script("all_gather").run(n, length, np.random.default_rng(n))


@pytest.mark.parametrize("n,shape", [(2, (70, 40, 72)), (4, (33, 48, 20)), (8, (17, 24, 65))])
def test_all_gather_matmul(n, shape):
    _script("ag_matmul").run(n, *shape, np.random.default_rng(n))


@pytest.mark.parametrize("n,shape", [(2, (150, 40, 72)), (4, (300, 24, 20)),
                                     pytest.param(8, (520, 16, 33), marks=pytest.mark.slow)])
def test_matmul_reduce_scatter(n, shape):
    _script("matmul_reduce_scatter").run(n, *shape, np.random.default_rng(n))


@pytest.mark.parametrize("n,tokens", [(2, [5, 3]), (4, [7, 0, 2, 9]),
                                      (8, [3, 1, 4, 1, 5, 0, 2, 6])])
def test_moe_dispatch(n, tokens):
    _script("moe_dispatch").run(n, tokens, np.random.default_rng(n))


RING = """kernel ring(x: Symmetric[Array[f32, 1]], flags: Symmetric[Array[u32, 1]],
          y: Array[f32, 1]) {
    let me = rank();
    let next = (me + 1) % world_size();
    wait_until(peer(flags, me), 0, "eq", 1);
    store(peer(x, next), index = (0,), tile = load(y, index = (0,), shape = (128,)));
    signal(peer(flags, next), 0, 1);
}
kernel unordered(x: Symmetric[Array[f32, 1]], flags: Symmetric[Array[u32, 1]],
                 y: Array[f32, 1]) {
    let me = rank();
    let next = (me + 1) % world_size();
    store(peer(x, next), index = (0,), tile = load(y, index = (0,), shape = (128,)));
    store(y, index = (0,), tile = load(peer(x, me), index = (0,), shape = (128,)));
}
kernel ordered(x: Symmetric[Array[f32, 1]], flags: Symmetric[Array[u32, 1]],
               y: Array[f32, 1]) {
    let me = rank();
    let next = (me + 1) % world_size();
    store(peer(x, next), index = (0,), tile = load(y, index = (0,), shape = (128,)));
    signal(peer(flags, next), 0, 1);
    wait_until(peer(flags, me), 0, "eq", 1);
    store(y, index = (0,), tile = load(peer(x, me), index = (0,), shape = (128,)));
}
"""


def _ring(n, name):
    w = td.world(n)
    x, flags = w.symmetric((128,), "f32"), w.symmetric((4,), "u32")
    ys = [np.full(128, r + 1, np.float32) for r in range(n)]
    w.launch_all(w.kernel(RING, name), 1, lambda r: (x, flags, ys[r]))
    return ys


def test_every_rank_waiting_is_no_progress_naming_each_rank():
    with pytest.raises(NoProgress) as e:
        _ring(3, "ring")
    msg = str(e.value)
    assert msg.startswith("rank 0: no progress: 3 thread(s) spin in the loop at PTX lines ")
    assert "(source <world>:5), re-reading memory that no running thread changes" in msg
    for r in range(3):
        assert re.search(rf"rank {r} waits at PTX line \d+ \(source <world>:5\)", msg)
    assert "On a GPU this launch hangs" in msg


def test_a_cross_device_race_is_reported():
    with pytest.raises(GlobalMemoryRace) as e:
        _ring(3, "unordered")
    assert re.match(r"rank 0: global-memory data race: this block reads a word that rank 2's "
                    r"block \(0, 0, 0\) wrote \(PTX line \d+\) with no release/acquire "
                    r"synchronization between them", str(e.value))


@pytest.mark.parametrize("n", [2, 5])
def test_a_signal_orders_the_store_before_the_read(n):
    ys = _ring(n, "ordered")
    # rank r read what rank r - 1 stored: its y, r - 1 + 1
    assert [float(y[0]) for y in ys] == [float((r - 1) % n + 1) for r in range(n)]
    assert all((y == y[0]).all() for y in ys)


def test_a_single_device_launch_is_refused():
    mod = tilelang.compile(RING, backend="emulator")
    with pytest.raises(TileError) as e:
        mod.ring[1](None, None, np.zeros(128, np.float32))
    d = e.value.diagnostics[0]
    assert (d.code, d.message) == ("E0919", "kernel `ring` takes the symmetric array `x`, which "
                                            "needs a world of devices (got None)")


def test_refusals():
    with pytest.raises(TileError, match=r"an emulated world has 2 to 8 ranks, not 1"):
        td.world(1)
    w = td.world(2)
    k = w.kernel(RING, "ordered")
    x, flags = w.symmetric((128,), "f32"), w.symmetric((4,), "u32")
    y0 = w.empty(0, (128,), "f32")
    with pytest.raises(TileError, match=r"rank 1: `y` of kernel `ordered` is an array "
                                               r"of rank 0"):
        w.launch_all(k, 1, [(x, flags, y0), (x, flags, y0)])
    with pytest.raises(TileError, match=r"rank 0: `flags` of kernel `ordered` is a "
                                               r"symmetric array; got ndarray"):
        w.launch_all(k, 1, lambda r: (x, np.zeros(4, np.uint32), w.empty(r, (128,), "f32")))
    with pytest.raises(TileError, match=r"rank 0: `x` of kernel `ordered` holds f32; "
                                               r"got u32"):
        w.launch_all(k, 1, lambda r: (flags, flags, w.empty(r, (128,), "f32")))
    with pytest.raises(TileError, match=r"3 argument lists for a world of 2 ranks"):
        w.launch_all(k, 1, [(x, flags, y0)] * 3)





def _tilec(*args, cwd):
    import os
    import subprocess
    import sys
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "tilelang.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def test_tilec_run_and_the_c_export_refuse_symmetric_arrays(tmp_path):
    src = str(EXAMPLES / "all_reduce.tile")
    r = _tilec("run", src, "--kernel", "all_reduce", "--grid", "1", "--backend", "emulator",
               cwd=tmp_path)
    assert r.returncode == 2
    assert r.stderr.strip().endswith(
        "tilec run: error: kernel `all_reduce` takes `x: Symmetric[Array[f32, 1]]`, a symmetric "
        "array, which needs a world of devices: launch it with tilelang.distributed "
        "(docs/distributed.md)")
    r = _tilec("--emit", "c", "-o", str(tmp_path / "k.c"), src, cwd=tmp_path)
    assert r.returncode == 1 and not (tmp_path / "k.c").exists()
    assert "error[E0281]: kernel `all_reduce`: the C export cannot pass `x`, a symmetric " \
           "array" in r.stderr


EDGES = """kernel edges(x: Symmetric[Array[f32, 1]], pad: Symmetric[Array[u32, 1]],
                y: Array[f32, 1]) {
    // a rank outside the world is an empty array; a slot outside the pad is skipped
    let far = load(peer(x, world_size() + 3), index = (0,), shape = (128,), padding = -1.0);
    wait_until(peer(pad, rank()), 1000, "eq", 7);
    signal(peer(pad, 0), 1000, 7);
    store(y, index = (0,), tile = far + load(peer(x, -1), index = (0,), shape = (128,),
                                              padding = -2.0));
}
"""


def test_peers_and_slots_outside_are_masked_off():
    w = td.world(2)
    x, pad = w.symmetric((128,), "f32"), w.symmetric((4,), "u32")
    for r in range(2):
        x.write(r, np.full(128, 5.0, np.float32))
    ys = [np.zeros(128, np.float32) for _ in range(2)]
    w.launch_all(w.kernel(EDGES, "edges"), 1, lambda r: (x, pad, ys[r]))
    assert all((y == -3.0).all() for y in ys)
    assert not pad.on(0).any() and not pad.on(1).any()


def test_an_unknown_kernel_is_named():
    w = td.world(2)
    with pytest.raises(TileError, match=r"the module has no kernel named `nope`"):
        w.launch_all(w.kernel(RING, "nope"), 1, lambda r: ())
