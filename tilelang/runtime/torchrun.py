"""An emulated world whose ranks are the processes of a `torchrun` job (docs/distributed.md,
"Under torchrun").

    import tilelang.distributed as td
    w = td.init()                          # this process is rank w.rank of w.size (gloo)
    x = w.symmetric((1000,), "f32")        # collective: every rank, in the same order
    x.write(w.rank, data)                  # each process writes its own rank's buffer
    k = w.kernel("all_reduce.tile", "all_reduce")
    w.launch(k, grid, (x, y, pad))         # collective: this rank's blocks
    # or, as in one process: w.launch_all(k, grid, lambda r: (x, ys[r], pad))

`init()` joins torch.distributed (initializing a gloo process group from torchrun's
environment when none is), and opens the world's shared memory (tilelang/emulator/
shared_memory.py): rank 0 creates it, the others attach after checking it, rank 0 unlinks it.
A `ProcessWorld` has the API of the in-process `World` (tilelang/runtime/distributed.py) with
`ranks == (rank,)`: a per-rank argument function is called for this rank only, host writes go
to this rank's memory only, and `.on(r)` reads any rank's buffer (the memory is shared).
torch is imported only here, when `init()` is called.
"""

from __future__ import annotations

import datetime
import os

from tilelang.emulator.errors import EmulatorError
from tilelang.emulator.shared_memory import DEFAULT_HEAP, Segment
from tilelang.emulator.shared_world import DEFAULT_TIMEOUT, RankDevice

from .distributed import RankArray, World
from .errors import usage_error

_HELP = "run the script with `torchrun --nproc-per-node N` (2 <= N <= 8)"


def under_torchrun() -> bool:
    """True in a process that torchrun (or another launcher setting RANK and WORLD_SIZE)
    started: scripts use `init()` there and `world(n)` otherwise."""
    return "RANK" in os.environ and "WORLD_SIZE" in os.environ


class _Comm:
    """Host collectives of the world over a gloo group of torch.distributed."""

    def __init__(self, dist, timeout: float):
        self.dist, self.timeout = dist, timeout
        self.group = dist.new_group(backend="gloo")
        self.rank = dist.get_rank()

    def barrier(self) -> None:
        try:
            self.dist.monitored_barrier(group=self.group,
                                        timeout=datetime.timedelta(seconds=self.timeout))
        except RuntimeError as e:       # a rank did not arrive in time (or died)
            raise usage_error("E0919", f"rank {self.rank}: the ranks did not meet within "
                              f"{self.timeout:g} s: {str(e).splitlines()[0]}",
                              "every rank makes the same launches and symmetric allocations, "
                              "in the same order") from None

    def allgather(self, obj) -> list:
        out = [None] * self.dist.get_world_size()
        self.dist.all_gather_object(out, obj, group=self.group)
        return out

    def broadcast(self, obj):
        box = [obj]
        self.dist.broadcast_object_list(box, src=0, group=self.group)
        return box[0]


class ProcessWorld(World):
    """One rank of an emulated world of processes: this process runs its rank's blocks."""

    def __init__(self, comm: _Comm, seg: Segment, rank: int, size: int, *, race_check: bool,
                 global_race_check: bool, timeout: float):
        self.size, self._rank_id, self._comm = size, rank, comm
        self.ranks = (rank,)
        self.emu = RankDevice(seg, rank, size, comm.barrier, race_check=race_check,
                              global_race_check=global_race_check, timeout=timeout)

    @property
    def rank(self) -> int:
        return self._rank_id

    def barrier(self) -> None:
        self._comm.barrier()

    def _symmetric_parts(self, shape: tuple, dtype: str) -> list:
        own = RankArray(self, self.rank, shape, dtype)
        infos = self._comm.allgather((shape, dtype, int(own.ptr)))
        for r, (s, d, _) in enumerate(infos):
            if (tuple(s), d) != (shape, dtype):
                raise usage_error("E0919", f"rank {self.rank}: symmetric({shape}, {dtype!r}) "
                                  f"meets rank {r}'s symmetric({tuple(s)}, {d!r})",
                                  "every rank makes the same symmetric allocations, in the "
                                  "same order")
        return [own if r == self.rank else RankArray(self, r, shape, dtype, ptr=p)
                for r, (_, _, p) in enumerate(infos)]

    def _local(self, rank: int) -> int:
        r = self._rank(rank)
        if r != self.rank:
            raise usage_error("E0919", f"rank {self.rank} cannot write rank {r}'s memory from "
                              f"the host", "each process writes its own rank's buffers "
                              "(the kernel reaches the peers')")
        return r

    def launch(self, kernel, grid, args, *, max_steps: int | None = None):
        """Launch `kernel` on this rank with `args` (every rank launches it: collective)."""
        return self.launch_all(kernel, grid, lambda r: args, max_steps=max_steps)

    def _launch(self, fn, grid, block, packed: dict, max_steps):
        return self.emu.launch(fn, grid, block, packed[self.rank], max_steps=max_steps)


def _env_number(name: str, default, kind):
    text = os.environ.get(name)
    if text is None:
        return default
    try:
        v = kind(text)
    except ValueError:
        v = None
    if v is None or v <= 0:
        raise usage_error("E0925", f"{name}={text!r} is not a positive number",
                          f"unset it or give a positive {kind.__name__}")
    return v


def init(*, heap_bytes: int | None = None, timeout: float | None = None,
         race_check: bool = False, global_race_check: bool = True) -> ProcessWorld:
    """Join the emulated world of this torchrun job as rank `torch.distributed.get_rank()`.

    `heap_bytes`: global memory for all ranks together (default TILELANG_WORLD_HEAP, else
    256 MiB, a sparse file); `timeout`: seconds a rank waits for the others, at a launch or a
    flag, before it reports (TILELANG_WORLD_TIMEOUT, else 120)."""
    try:
        import torch.distributed as dist
    except ImportError:
        raise usage_error("E0919", "tilelang.distributed.init() needs torch (torch.distributed"
                          " with gloo)", "install torch, or use tilelang.distributed.world(n) "
                          "in one process") from None
    if not dist.is_initialized():
        if not under_torchrun():
            raise usage_error("E0919", "tilelang.distributed.init() runs in a process of a "
                              "torchrun job: RANK and WORLD_SIZE are not set",
                              _HELP + ", or use tilelang.distributed.world(n) in one process")
        dist.init_process_group(backend="gloo")
    size, rank = dist.get_world_size(), dist.get_rank()
    if not 2 <= size <= 8:
        raise usage_error("E0919", f"an emulated world has 2 to 8 ranks, not {size}", _HELP)
    heap = heap_bytes if heap_bytes is not None else _env_number("TILELANG_WORLD_HEAP",
                                                                 DEFAULT_HEAP, int)
    wait = timeout if timeout is not None else _env_number("TILELANG_WORLD_TIMEOUT",
                                                           DEFAULT_TIMEOUT, float)
    if isinstance(heap, bool) or not isinstance(heap, int) or heap <= 0 or \
            not (isinstance(wait, (int, float)) and wait > 0):
        raise usage_error("E0925", f"heap_bytes={heap!r}, timeout={wait!r}: both must be "
                          f"positive", "give a number of bytes and of seconds")
    comm = _Comm(dist, float(wait))
    seg, info = None, None
    if rank == 0:
        try:
            seg, path, token = Segment.create(size, heap)
            info = ("ok", path, token, heap)
        except (OSError, EmulatorError) as e:
            info = ("error", f"rank 0 could not create the world's shared memory: {e}")
    info = comm.broadcast(info)
    if info[0] == "error":
        raise usage_error("E0919", info[1], "check the temporary folder (/dev/shm)")
    _, path, token, heap = info
    failure = None
    if rank != 0:
        try:
            seg = Segment.attach(path, token, size, heap)
        except EmulatorError as e:
            failure = str(e)
    failures = comm.allgather(failure)
    if rank == 0:
        seg.unlink()                   # every rank has it mapped (or gave up): nothing stays
    bad = [(r, f) for r, f in enumerate(failures) if f is not None]
    if bad:
        raise usage_error("E0919", f"rank {bad[0][0]} could not attach the world's shared "
                          f"memory: {bad[0][1]}", "run every rank as the same user on one "
                          "machine")
    return ProcessWorld(comm, seg, rank, size, race_check=race_check,
                        global_race_check=global_race_check, timeout=float(wait))
