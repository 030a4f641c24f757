"""A torchrun worker for tests/runtime/test_rt_torchrun.py: kernels with bugs (and one
without), one rank per process; each rank writes what happened to OUT/rank<r>.json.

    torchrun --nproc-per-node N torchrun_worker.py OUT ring late ordered skip1:ordered
"""
import json
import os
import sys
import time

import numpy as np

import tilelang.distributed as td
from tilelang.diagnostics import TileError
from tilelang.emulator.errors import EmulatorError

SRC = """kernel ring(x: Symmetric[Array[f32, 1]], flags: Symmetric[Array[u32, 1]],
          y: Array[f32, 1]) {
    let me = rank();
    let next = (me + 1) % world_size();
    wait_until(peer(flags, me), 0, "eq", 1);
    store(peer(x, next), index = (0,), tile = load(y, index = (0,), shape = (128,)));
    signal(peer(flags, next), 0, 1);
}
kernel late(x: Symmetric[Array[f32, 1]], flags: Symmetric[Array[u32, 1]],
            y: Array[f32, 1]) {
    // rank 0 stores into rank 1's x, then raises a flag with a relaxed atomic: rank 1 sees
    // the flag after the store, but nothing orders the store before its read (a race)
    if rank() == 0 {
        store(peer(x, 1), index = (0,), tile = load(y, index = (0,), shape = (128,)));
        atomic_add(peer(flags, 1), 0, 1, sem = "relaxed", scope = "system");
    } else {
        while atomic_add(peer(flags, rank()), 0, 0, sem = "relaxed", scope = "system") == 0 {}
        store(y, index = (0,), tile = load(peer(x, rank()), index = (0,), shape = (128,)));
    }
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


def attempt(w, name):
    skip_rank = None
    if name.startswith("skip"):              # "skip1:ordered": rank 1 does not launch
        skip, name = name.split(":")
        skip_rank = int(skip[4:])
    x, flags = w.symmetric((128,), "f32"), w.symmetric((4,), "u32")
    y = np.full(128, w.rank + 1, np.float32)
    if w.rank == skip_rank:
        return {"skipped": True}
    grid = 1
    if name.startswith("grid"):               # "grid2:ordered": rank 1 launches 2 blocks
        name, grid = name[4:].partition(":")[2], 1 + w.rank
    try:
        w.launch(w.kernel(SRC, name), grid, (x, flags, y))
    except (EmulatorError, TileError) as e:
        return {"error": type(e).__name__, "message": str(e)}
    return {"y0": float(y[0]), "same": bool((y == y[0]).all())}


def main():
    out = sys.argv[1]
    w = td.init()
    got = {name: attempt(w, name) for name in sys.argv[2:]}
    with open(os.path.join(out, f"rank{w.rank}.json"), "w") as f:
        json.dump(got, f)
    if any(a.startswith("skip") for a in sys.argv[2:]):
        # a rank skipped a launch: rank 0's barrier timed out and the gloo group is broken,
        # and torch aborts a process that tears such a group down. Leave once rank 0 has
        # written what it saw, without running the group's destructor.
        deadline = time.monotonic() + 120
        while not os.path.exists(os.path.join(out, "rank0.json")) and \
                time.monotonic() < deadline:
            time.sleep(0.1)
        sys.stdout.flush()
        os._exit(0)


main()
