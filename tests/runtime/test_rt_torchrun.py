"""Emulated worlds of processes (docs/distributed.md, "Under torchrun"): every example of
examples/distributed/ under `torchrun --nproc-per-node 2` and 4 with gloo, a deadlock and a
race across processes reported (not hung), a rank that never launches reported after the
timeout; the shared memory's checks (owner, mode, token) and cleanup without torch."""

from __future__ import annotations

import json
import os
import pathlib
import re
import stat
import subprocess
import sys

import numpy as np
import pytest

from tilelang.emulator.errors import EmulatorError
from tilelang.emulator.memory import GLOBAL_BASE
from tilelang.emulator.shared_memory import Segment, SharedGlobalMemory

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "distributed"
WORKER = pathlib.Path(__file__).with_name("torchrun_worker.py")


def _torchrun(n: int, *args, timeout: int = 600, env=None):
    pytest.importorskip("torch")
    import torch.distributed as dist
    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("torch.distributed with gloo is not available")
    e = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1", **(env or {}))
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        e.pop(k, None)
    return subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                           f"--nproc-per-node={n}", *map(str, args)], env=e,
                          capture_output=True, text=True, timeout=timeout)


EXAMPLE_NAMES = ["all_reduce", "all_gather", "ag_matmul", "matmul_reduce_scatter",
                 "moe_dispatch", "all_reduce_multimem"]


@pytest.mark.parametrize("n", [2, pytest.param(4, marks=pytest.mark.slow)])
@pytest.mark.parametrize("name", [n if n == "all_reduce" else
                                  pytest.param(n, marks=pytest.mark.slow)
                                  for n in EXAMPLE_NAMES])
def test_example_under_torchrun(name, n):
    r = _torchrun(n, EXAMPLES / f"{name}.py")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    for rank in range(n):                 # (the processes' lines may run into each other)
        assert re.search(rf"{name}: rank {rank} of {n}, .*?: ok \(torchrun\)", r.stdout), \
            r.stdout


def _worker(tmp_path, n, *cases, env=None):
    r = _torchrun(n, WORKER, tmp_path, *cases, env=env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return [json.loads((tmp_path / f"rank{k}.json").read_text()) for k in range(n)]


def test_a_deadlock_and_a_race_across_processes_are_reported(tmp_path):
    got = _worker(tmp_path, 2, "ring", "late", "ordered", "grid:ordered",
                  env={"TILELANG_WORLD_TIMEOUT": "60"})
    for me, other in ((0, 1), (1, 0)):
        ring = got[me]["ring"]
        assert ring["error"] == "NoProgress"
        msg = ring["message"]
        assert msg.startswith(f"rank {me}: no progress: 1 thread(s) spin in the loop at PTX "
                              f"lines "), msg
        assert "(source <world>:5), re-reading memory that no running thread changes" in msg
        # where this rank waits, then where the other process's rank waits
        assert re.search(rf"; rank {me} waits at PTX line \d+ \(source <world>:5\).*; rank "
                         rf"{other} waits at PTX line \d+ \(source <world>:5\)", msg), msg
        assert "On a GPU this launch hangs" in msg and "failed" not in msg
    assert got[0]["late"] == {"y0": 1.0, "same": True}
    late = got[1]["late"]
    assert late["error"] == "GlobalMemoryRace"
    assert re.match(r"rank 1: global-memory data race: this block reads a word that rank 0's "
                    r"block \(0, 0, 0\) wrote \(PTX line \d+\) with no release/acquire "
                    r"synchronization between them", late["message"]), late["message"]
    # a signal orders the store before the read: rank r reads rank r - 1's y (r - 1 + 1)
    assert got[0]["ordered"] == {"y0": 2.0, "same": True}
    assert got[1]["ordered"] == {"y0": 1.0, "same": True}
    # rank 1 launches over 2 blocks, rank 0 over 1: both refuse, neither waits
    for me in (0, 1):
        err = got[me]["grid:ordered"]
        assert err["error"] == "LaunchRefused"
        assert err["message"].startswith(
            f"launch of ordered on rank {me}: rank 1 launched it over 2 blocks, rank 0 over 1: "
            f"a world launch is collective (the same kernel and grid on every rank)")


@pytest.mark.slow
def test_a_rank_that_never_launches_is_reported_after_the_timeout(tmp_path):
    got = _worker(tmp_path, 2, "skip1:ordered", env={"TILELANG_WORLD_TIMEOUT": "4"})
    assert got[1] == {"skip1:ordered": {"skipped": True}}
    err = got[0]["skip1:ordered"]
    assert err["error"] == "RuntimeUsageError"
    assert "error[E0919]: rank 0: the ranks did not meet within 4 s: " in err["message"], \
        err["message"]


# -- the shared memory, without torch: two mappings of one file in this process -------------
def test_shared_memory_is_one_heap_for_every_mapping(tmp_path):
    seg, path, token = Segment.create(2, 1 << 20)
    try:
        other = Segment.attach(path, token, 2, 1 << 20)
    finally:
        seg.unlink()
    assert not os.path.exists(path) and not os.path.exists(os.path.dirname(path))
    a, b = SharedGlobalMemory(seg), SharedGlobalMemory(other)
    p = a.alloc(1000, "rank 0: x")
    q = b.alloc(64, "rank 1: y")                       # the same bump pointer: no overlap
    assert q >= p + 1000 and (q - GLOBAL_BASE) % 256 == 0
    a.write(p, np.arange(250, dtype=np.float32))
    b.register(p, 1000, "rank 0: x")                   # a peer's buffer, reachable
    assert np.array_equal(np.frombuffer(b.read(p, 1000), np.float32), np.arange(250))
    with pytest.raises(EmulatorError, match="outside every live allocation"):
        b.read(p + 1000, 4)
    with pytest.raises(EmulatorError, match=r"out of memory: the world's shared heap has "
                                            r"1048576 bytes for all ranks"):
        a.alloc(1 << 20)


def test_attach_checks_token_mode_and_folder(tmp_path):
    seg, path, token = Segment.create(2, 1 << 16)
    try:
        assert stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode) == 0o700
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        with pytest.raises(EmulatorError, match="does not carry rank 0's token"):
            Segment.attach(path, bytes(16), 2, 1 << 16)
        with pytest.raises(EmulatorError, match="does not carry rank 0's token"):
            Segment.attach(path, token, 3, 1 << 16)             # another world size
        with pytest.raises(EmulatorError, match="is not a private file of this user"):
            Segment.attach(path, token, 2, 1 << 20)             # another size
        os.chmod(path, 0o644)
        with pytest.raises(EmulatorError, match="is not a private file of this user"):
            Segment.attach(path, token, 2, 1 << 16)
        os.chmod(path, 0o600)
        os.chmod(os.path.dirname(path), 0o755)
        with pytest.raises(EmulatorError, match="is not a private folder of this user"):
            Segment.attach(path, token, 2, 1 << 16)
        os.chmod(os.path.dirname(path), 0o700)
        link = tmp_path / "link"
        link.symlink_to(os.path.dirname(path))
        with pytest.raises(EmulatorError, match="is not a private folder of this user"):
            Segment.attach(str(link / "memory"), token, 2, 1 << 16)
    finally:
        seg.unlink()
    with pytest.raises(EmulatorError, match="No such file or directory"):
        Segment.attach(path, token, 2, 1 << 16)


def test_init_outside_torchrun_is_a_clear_error(monkeypatch):
    pytest.importorskip("torch")
    import tilelang.distributed as td
    from tilelang.diagnostics import TileError
    for k in ("RANK", "WORLD_SIZE"):
        monkeypatch.delenv(k, raising=False)
    with pytest.raises(TileError) as e:
        td.init()
    d = e.value.diagnostics[0]
    assert (d.code, d.message) == ("E0919", "tilelang.distributed.init() runs in a process of "
                                            "a torchrun job: RANK and WORLD_SIZE are not set")


# -- the waiting protocol of one rank, with the other rank's status set by hand -------------
def _links(timeout=30.0):
    from tilelang.emulator.shared_world import RankLink
    seg, path, token = Segment.create(2, 1 << 16)
    seg.unlink()
    seg.words[6] = 1                                   # launch number 1
    return seg, RankLink(seg, 0, 2, 1, timeout), RankLink(seg, 1, 2, 1, timeout)


def test_a_stuck_rank_looks_again_after_another_rank_wrote():
    import threading
    seg, me, other = _links()
    me.set_state(1)                                    # RUNNING
    other.set_state(1)
    other.publish(5)
    assert me.stall(0, lambda: "rank 0 waits at X") is True    # new writes: look again
    # nothing new: stuck until the other rank writes (0.2 s later), then running again
    threading.Timer(0.2, other.publish, (6,)).start()
    assert me.stall(0, lambda: "rank 0 waits at X") is True
    assert me.row[0] == 1 and seg.get_text(0) == "rank 0 waits at X"


def test_every_rank_stuck_or_done_is_a_deadlock():
    from tilelang.emulator.shared_world import DONE
    seg, me, other = _links()
    other.publish(3)
    other.set_state(DONE)
    assert me.stall(0, lambda: "rank 0 waits at X") is True    # first look after the writes
    assert me.stall(0, lambda: "rank 0 waits at X") is False   # nothing can change any more
    assert me.others_waiting() == "rank 1 finished the launch"
    assert seg.get_text(0) == "rank 0 waits at X"


def test_a_rank_that_never_writes_again_times_out():
    import time
    seg, me, other = _links(timeout=0.3)
    other.set_state(1)                                 # still running, never writes
    assert me.stall(0, lambda: "w") is True
    t0 = time.monotonic()
    assert me.stall(0, lambda: "w") is False
    assert 0.3 <= time.monotonic() - t0 < 5
    assert me.others_waiting() == "rank 1 still runs (nothing it wrote in 0.3 s released " \
                                  "this rank)"


def test_freed_ranges_are_reused_once_the_heap_is_full():
    seg, path, token = Segment.create(2, 1 << 12)
    seg.unlink()
    mem = SharedGlobalMemory(seg)
    a = mem.alloc(1000, "a")
    b = mem.alloc(2900, "b")                       # the heap is full
    mem.write(a, np.ones(250, np.float32))
    with pytest.raises(EmulatorError, match="out of memory"):
        mem.alloc(1200)
    mem.free(a)
    with pytest.raises(EmulatorError, match="outside every live allocation"):
        mem.read(a, 4)                              # a stale pointer faults ...
    c = mem.alloc(900, "c")                         # ... until the heap is full: reused
    assert c == a and np.frombuffer(mem.read(c, 900), np.uint8).max() == 0
    assert b > a
