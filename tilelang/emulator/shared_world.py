"""One rank of an emulated world whose ranks are processes (docs/distributed.md, "Under
torchrun").

Under `torchrun`, every process emulates its own rank's device and runs only its own rank's
blocks. The device memories of all ranks are one file that every process maps (`Segment`,
shared_memory.py, which says how it is made, checked and unlinked): the global heap of every
rank's emulator (`SharedGlobalMemory`) is the same bytes, so an address means the same buffer
in every process and a peer's buffer is read and written in place.

How one process sees another's writes:

- Plain loads and stores are NumPy copies into the shared mapping: a store is visible to the
  other processes as soon as it is made (the emulator's memory is sequentially consistent, as
  in one process).
- Atomics (`atom`, `red`) run under the file's lock (`flock`), so a read-modify-write of one
  process never interleaves with another's: they are system-scope atomics.
- Waiting: a block that spins on a flag is parked as in one process (executor.py, "no
  progress"). When only such blocks are left, the process publishes how far it got and looks
  at the other ranks' *write epochs* (each process counts the writes that changed memory): one
  that moved means memory changed, so the spinners look again; otherwise it sleeps, backing off
  from 0.1 ms to 50 ms. When every rank is finished or stuck, having looked after the last
  change, the launch fails with the no-progress error listing where each rank waits (a
  deadlock); if nothing changes for `timeout` seconds it fails the same way (never a hang).
- Races: the global race check (globalrace.py) keeps its shadow state (writers, vector clocks,
  published clocks) in the same file, over the blocks of all ranks, so a race between ranks is
  found as in one process: a write by one rank, then an access by another with no
  release/acquire chain between them.

A launch is collective: every rank launches the same kernel with the same grid; `sync()` (a
host barrier the runtime passes in) lets rank 0 reset the shared launch state while the others
wait. This module imports neither torch nor the runtime: the runtime gives it the barrier.
"""

from __future__ import annotations

import time
import zlib

import numpy as np

from .completion import finish_stores
from .counters import Counters, make_report
from .device import BATCH_THREADS, DevicePtr, EmulatorDevice, Function
from .errors import EmulatorError, LaunchRefused, NoProgress
from .executor import run_batch
from .globalrace import MAX_BLOCKS as GLOBAL_RACE_MAX_BLOCKS
from .races import RaceChecker, unchecked_reason
from .shared_memory import (DEFAULT_HEAP, LAUNCH_W, Segment, SharedGlobalMemory,
                            SharedRaceChecker)
from .state import LaunchGeometry, State
from .tmem import check_released
from .world import multicast_window

DEFAULT_TIMEOUT = 120.0          # seconds a rank waits with nothing changing before it reports
# a rank's state in a launch; DEADLOCKED: it reported the deadlock (its text: where it waits)
IDLE, RUNNING, STUCK, DONE, FAILED, DEADLOCKED = 0, 1, 2, 3, 4, 5


class RankLink:
    """What a running launch of one rank knows of the others: their states and write
    epochs (the executor calls `publish` and `stall`, see executor._release_or_fail)."""

    def __init__(self, seg: Segment, rank: int, size: int, launch: int, timeout: float):
        self.seg, self.rank, self.size, self.launch, self.timeout = (seg, rank, size, launch,
                                                                     timeout)
        self.row = seg.status[rank]
        self._seen = None

    def set_state(self, state: int, text: str | None = None) -> None:
        if text is not None:
            self.seg.set_text(self.rank, text)
        self.row[1] = self.launch
        self.row[0] = state

    def publish(self, epoch: int) -> None:
        self.row[2] = epoch

    def _others(self) -> int:
        s = self.seg.status
        return int(sum(int(s[r, 2]) for r in range(self.size) if r != self.rank))

    def _states(self):
        s = self.seg.status
        return [(int(s[r, 0]) if int(s[r, 1]) == self.launch else IDLE, int(s[r, 2]),
                 int(s[r, 3])) for r in range(self.size)]

    def _dead(self, states) -> bool:
        """Every rank is finished, failed, or stuck having looked after the last change."""
        total = sum(e for _, e, _ in states)
        return all(st in (DONE, FAILED, DEADLOCKED) or (st == STUCK and v == total - e)
                   for st, e, v in states)

    def stall(self, epoch: int, where) -> bool:
        """Only spinning (and waiting) threads are left in this process: True when another
        rank changed memory since they last looked (look again), False on a deadlock."""
        self.publish(epoch)
        cur = self._others()
        if cur != self._seen:          # changed since the spinners last looked: look again
            self._seen = cur
            return True
        self.row[3] = cur
        self.set_state(STUCK, where())
        t0 = time.monotonic()
        delay, stable = 1e-4, None
        while True:
            now = self._others()
            if now != cur:
                self._seen = now
                self.set_state(RUNNING)
                return True
            states = self._states()
            if self._dead(states):
                if stable == states:   # the same picture twice in a row: nobody moves
                    return False
                stable = states
            else:
                stable = None
            if time.monotonic() - t0 > self.timeout:
                return False
            time.sleep(delay)
            delay = min(delay * 2, 0.05)

    def others_waiting(self) -> str:
        """Where each other rank waits (or that it finished, failed or still runs)."""
        parts = []
        for r, (st, _, _) in enumerate(self._states()):
            if r == self.rank:
                continue
            if st in (STUCK, DEADLOCKED):
                parts.append(self.seg.get_text(r))
            elif st == FAILED:
                parts.append(f"rank {r} failed: {self.seg.get_text(r)}")
            elif st == DONE:
                parts.append(f"rank {r} finished the launch")
            else:
                parts.append(f"rank {r} still runs (nothing it wrote in {self.timeout:g} s "
                             f"released this rank)")
        return "; ".join(parts)


class RankDevice:
    """The emulated device of one rank of a world of processes, on the shared segment.

    `sync()` is a host barrier across the ranks (the runtime's, over torch.distributed)."""

    def __init__(self, seg: Segment, rank: int, size: int, sync, *, race_check: bool = False,
                 global_race_check: bool = True, timeout: float = DEFAULT_TIMEOUT,
                 printf_stream=None):
        self.seg, self.rank, self.size, self.sync, self.timeout = seg, rank, size, sync, timeout
        self.device = EmulatorDevice(race_check=race_check,
                                     global_race_check=global_race_check,
                                     printf_stream=printf_stream)
        self.device.mem = SharedGlobalMemory(seg)
        self._launches = 0

    def malloc(self, rank: int, nbytes: int, what: str = "buffer") -> DevicePtr:
        if rank != self.rank:
            raise EmulatorError(f"rank {self.rank} cannot allocate in rank {rank}'s memory")
        addr = self.device.mem.alloc(int(nbytes), f"rank {rank}: {what} ({nbytes} bytes)")
        return DevicePtr(addr, int(nbytes))

    def register(self, rank: int, addr: int, nbytes: int, what: str) -> None:
        """Make another rank's buffer (from a collective allocation) reachable here."""
        self.device.mem.register(int(addr), int(nbytes), f"rank {rank}: {what} ({nbytes} "
                                                         f"bytes)")

    def multicast(self, buffers, nbytes: int) -> DevicePtr:
        """This rank's multicast address (NVLink SHARP) for `buffers` (one per rank, in rank
        order): a window of this process's own (EmulatedWorld.multicast), whose multimem
        instructions reach every rank's buffer in the shared segment."""
        return multicast_window(self.device.mem, self.size, buffers, nbytes,
                                f"rank {self.rank}: multicast window ({nbytes} bytes)")

    def load_module(self, ptx: str):
        return self.device.load_module(ptx)

    def launch(self, fn: Function, grid, block, args, *, max_steps: int | None = None):
        """This rank's part of a collective launch: its blocks, with `args` (as
        `EmulatorDevice.launch` takes them). Returns this rank's LaunchReport."""
        dev = self.device
        if not isinstance(fn, Function) or fn.module.device is not dev:
            raise EmulatorError("launch needs a Function from a module loaded on this rank")
        prog = fn.program
        if any(p.nbytes == 128 and p.align == 64 for p in fn.params if hasattr(p, "align")):
            raise LaunchRefused(f"launch of {fn.name}: TMA tensor maps are not supported on an "
                                f"emulated world")
        grid = tuple(grid) + (1,) * (3 - len(tuple(grid)))
        block = tuple(block) + (1,) * (3 - len(tuple(block)))
        if ".reqnctapercluster" in prog.directives:
            raise LaunchRefused(f"launch of {fn.name}: clusters are not supported on an "
                                f"emulated world")
        dev._check_launch(fn, prog, grid, block, (1, 1, 1), False, 0)
        packed = dev.pack_args(fn, args)
        row = np.zeros((len(packed) + 15) // 16 * 16 + 16, np.uint8)
        row[:len(packed)] = np.frombuffer(packed, np.uint8)
        self._launches += 1
        geom = LaunchGeometry(grid, block, (1, 1, 1), False, 0, prog.static_shared,
                              self._launches)
        nb = geom.nblocks
        if nb * geom.tpb > BATCH_THREADS:
            raise LaunchRefused(f"launch of {fn.name}: {nb * geom.tpb} threads on rank "
                                f"{self.rank}; an emulated rank runs its blocks together, at "
                                f"most {BATCH_THREADS} threads")
        total = nb * self.size
        grace = None
        note = "global_race_check is off"
        if dev.global_race_check:
            if total <= GLOBAL_RACE_MAX_BLOCKS:
                grace = SharedRaceChecker(self.seg, total)
                note = "checked: no global-memory race between blocks of any rank"
            else:
                note = f"not checked: more than {GLOBAL_RACE_MAX_BLOCKS} blocks"
        mine = self.seg.status[self.rank]
        mine[4], mine[5] = nb, zlib.crc32(fn.name.encode())
        self.sync()                         # every rank is here (and done with the last launch)
        self._check_same_launch(fn.name, nb)
        if self.rank == 0:
            self.seg.words[LAUNCH_W] += 1
            if grace is not None:
                grace.reset(dev.mem.shared_top)
        self.sync()
        link = RankLink(self.seg, self.rank, self.size, int(self.seg.words[LAUNCH_W]),
                        self.timeout)
        counters = Counters(len(prog.code), dev.detailed_counters)
        st = State(prog, geom, self.rank * nb + np.arange(nb), nb, dev.mem, row, counters,
                   prog.static_shared, [])
        st.rank_of_block = np.full(nb, self.rank)
        st.world_link = link
        st.grace = grace
        unchecked = unchecked_reason(prog) if dev.race_check else "race_check is off"
        if unchecked is None:
            st.races = RaceChecker(st, strict=dev.race_check == "strict")
        link.set_state(RUNNING)
        t0 = time.perf_counter()
        try:
            with np.errstate(all="ignore"):
                run_batch(st, dev.max_steps if max_steps is None else int(max_steps))
                finish_stores(st)
                check_released(st)
        except NoProgress:
            link.publish(st.epoch)
            if int(link.row[0]) == STUCK:          # keep where it waits for the others' report
                link.set_state(DEADLOCKED)
            else:
                link.set_state(FAILED, "no progress")
            raise
        except BaseException as e:
            link.publish(st.epoch)
            why = str(e).split(" (kernel ")[0] if str(e) else type(e).__name__
            why = why.removeprefix(f"rank {self.rank}: ")
            link.set_state(FAILED, why[:400])
            raise
        finally:
            if st.out:
                dev.printf_stream.write("".join(st.out))
        link.publish(st.epoch)
        link.set_state(DONE)
        rep = make_report(prog, counters, geom, time.perf_counter() - t0, "".join(st.out))
        rep.race_check = "checked: no shared-memory race" if unchecked is None else \
            f"not checked: {unchecked}"
        rep.global_race_check = note
        return rep

    def _check_same_launch(self, name: str, nb: int) -> None:
        """Every rank launches the same kernel over the same grid (each rank sees the same
        rows, so every rank refuses together: no rank is left waiting)."""
        rows = self.seg.status[:self.size]
        for r in range(self.size):
            if int(rows[r, 4]) != int(rows[0, 4]) or int(rows[r, 5]) != int(rows[0, 5]):
                raise LaunchRefused(
                    f"launch of {name} on rank {self.rank}: rank {r} launched "
                    f"{'another kernel' if int(rows[r, 5]) != int(rows[0, 5]) else 'it'} "
                    f"over {int(rows[r, 4])} blocks, rank 0 over {int(rows[0, 4])}: a world "
                    f"launch is collective (the same kernel and grid on every rank)")


__all__ = ["DEFAULT_HEAP", "DEFAULT_TIMEOUT", "RankDevice", "RankLink"]
