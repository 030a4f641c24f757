"""An emulated world: one launch of a kernel on every rank of N devices (docs/distributed.md).

    world = EmulatedWorld(4)
    bufs = [world.malloc(r, nbytes) for r in range(4)]    # rank r's memory
    mod = world.load_module(ptx)
    rep = world.launch(mod.get_function("k"), grid, block, [args_of_rank0, ..., args_of_rank3])

The ranks' memories are separate allocations of one emulated address space (every rank maps
every other's, as NVLink peers with peer access do), each named by its rank in fault messages.
A launch runs the grid on every rank *together*, as one batch of `N × blocks` blocks: block b of
rank r reads rank r's parameter buffer and sees `%ctaid` = b (the grid is per device). The
executor's scheduling interleaves them, so a block that spins on a flag another rank sets is
parked until memory changes (executor.py, "no progress") and the other ranks run; when every
rank only waits, the launch fails with the no-progress error, which then lists where each
rank's threads wait. With `global_race_check` the blocks of all ranks are checked against one
another as the blocks of one launch are (globalrace.py): a plain write on one rank and an
access on another with no release/acquire (a signal) between them is a race.

Because all ranks run in one batch, a world launch is limited to `BATCH_THREADS` threads in all
(LaunchRefused beyond): enough for the tests and examples, not for large grids.
"""

from __future__ import annotations

import time

import numpy as np

from .completion import finish_stores
from .counters import Counters, make_report
from .device import BATCH_THREADS, DevicePtr, EmulatorDevice, Function
from .errors import EmulatorError, LaunchRefused
from .executor import run_batch
from .globalrace import MAX_BLOCKS as GLOBAL_RACE_MAX_BLOCKS, GlobalRaceChecker
from .races import RaceChecker, unchecked_reason
from .state import LaunchGeometry, State
from .tmem import check_released

MIN_RANKS, MAX_RANKS = 2, 8


class EmulatedWorld:
    """N emulated devices whose memories are mapped into each other."""

    def __init__(self, n: int, *, race_check: bool = False, global_race_check: bool = True,
                 printf_stream=None):
        if not isinstance(n, int) or not MIN_RANKS <= n <= MAX_RANKS:
            raise EmulatorError(f"an emulated world has {MIN_RANKS} to {MAX_RANKS} ranks, "
                                f"not {n!r}")
        self.size = n
        self.device = EmulatorDevice(race_check=race_check,
                                     global_race_check=global_race_check,
                                     printf_stream=printf_stream)
        self._launches = 0

    # -- memory ---------------------------------------------------------------------------
    def malloc(self, rank: int, nbytes: int, what: str = "buffer") -> DevicePtr:
        self._rank(rank)
        addr = self.device.mem.alloc(int(nbytes), f"rank {rank}: {what} ({nbytes} bytes)")
        return DevicePtr(addr, int(nbytes))

    def multicast(self, buffers, nbytes: int) -> DevicePtr:
        """A multicast address (NVLink SHARP) mapping to `buffers` (one DevicePtr per rank, in
        rank order, each at least `nbytes`): multimem instructions at window offset o reach
        every rank's buffer at o (ops_multimem.py). The window is an allocation of its own, so
        its addresses are no other buffer's."""
        return multicast_window(self.device.mem, self.size, buffers, nbytes,
                                f"multicast window ({nbytes} bytes)")

    def _rank(self, rank) -> int:
        if not isinstance(rank, (int, np.integer)) or not 0 <= rank < self.size:
            raise EmulatorError(f"rank {rank!r} is not in [0, {self.size})")
        return int(rank)

    def load_module(self, ptx: str):
        return self.device.load_module(ptx)

    # -- launch ---------------------------------------------------------------------------
    def launch(self, fn: Function, grid, block, per_rank_args, *, max_steps: int | None = None):
        """Launch `fn` on every rank at once; `per_rank_args[r]` are rank r's arguments (as
        `EmulatorDevice.launch` takes them). Returns the LaunchReport of the whole world."""
        dev = self.device
        if not isinstance(fn, Function) or fn.module.device is not dev:
            raise EmulatorError("launch needs a Function from a module loaded on this world")
        if len(per_rank_args) != self.size:
            raise LaunchRefused(f"launch of {fn.name}: {len(per_rank_args)} argument lists "
                                f"for a world of {self.size} ranks")
        prog = fn.program
        if any(p.nbytes == 128 and p.align == 64 for p in fn.params if hasattr(p, "align")):
            raise LaunchRefused(f"launch of {fn.name}: TMA tensor maps are not supported on an "
                                f"emulated world")
        grid, block = tuple(grid) + (1,) * (3 - len(tuple(grid))), \
            tuple(block) + (1,) * (3 - len(tuple(block)))
        if ".reqnctapercluster" in prog.directives:
            raise LaunchRefused(f"launch of {fn.name}: clusters are not supported on an "
                                f"emulated world")
        dev._check_launch(fn, prog, grid, block, (1, 1, 1), False, 0)
        packed = [dev.pack_args(fn, a) for a in per_rank_args]
        width = (max(len(p) for p in packed) + 15) // 16 * 16 + 16
        rows = np.zeros((self.size, width), np.uint8)
        for r, p in enumerate(packed):
            rows[r, :len(p)] = np.frombuffer(p, np.uint8)
        self._launches += 1
        geom = LaunchGeometry(grid, block, (1, 1, 1), False, 0, prog.static_shared,
                              self._launches)
        nblk = geom.nblocks * self.size
        if nblk * geom.tpb > BATCH_THREADS:
            raise LaunchRefused(f"launch of {fn.name}: {nblk * geom.tpb} threads on "
                                f"{self.size} ranks; an emulated world runs every rank's "
                                f"blocks together, at most {BATCH_THREADS} threads")
        counters = Counters(len(prog.code), dev.detailed_counters)
        # block ids run rank after rank (State reads %ctaid modulo the grid)
        st = State(prog, geom, np.arange(nblk), nblk, dev.mem, rows[0], counters,
                   prog.static_shared, [])
        st.rank_of_block = np.repeat(np.arange(self.size), geom.nblocks)
        st.kparam_rows = rows
        unchecked = unchecked_reason(prog) if dev.race_check else "race_check is off"
        if unchecked is None:
            st.races = RaceChecker(st)
        note = "global_race_check is off"
        if dev.global_race_check:
            if nblk <= GLOBAL_RACE_MAX_BLOCKS:
                st.grace = GlobalRaceChecker(nblk, dev.mem.data.size)
                note = "checked: no global-memory race between blocks of any rank"
            else:
                note = f"not checked: more than {GLOBAL_RACE_MAX_BLOCKS} blocks"
        t0 = time.perf_counter()
        try:
            with np.errstate(all="ignore"):
                run_batch(st, dev.max_steps if max_steps is None else int(max_steps))
                finish_stores(st)
                check_released(st)
        finally:
            if st.out:
                dev.printf_stream.write("".join(st.out))
        rep = make_report(prog, counters, geom, time.perf_counter() - t0, "".join(st.out))
        rep.race_check = "checked: no shared-memory race" if unchecked is None else \
            f"not checked: {unchecked}"
        rep.global_race_check = note
        return rep


def multicast_window(mem, size: int, buffers, nbytes: int, what: str) -> DevicePtr:
    """A window of `nbytes` in `mem` whose multimem instructions reach each of `buffers` (one
    per rank of a world of `size`) at the same offset (ops_multimem.py)."""
    if len(buffers) != size:
        raise EmulatorError(f"a multicast address maps one buffer per rank ({size}), "
                            f"not {len(buffers)}")
    addr = mem.alloc(int(nbytes), what)
    mem.multicast[addr] = (int(nbytes), tuple(int(b) for b in buffers))
    return DevicePtr(addr, int(nbytes))
