"""One rank of an emulated world whose ranks are processes (docs/distributed.md, "Under
torchrun").

Under `torchrun`, every process emulates its own rank's device and runs only its own rank's
blocks. The device memories of all ranks are one file that every process maps (`Segment`): the
global heap of every rank's emulator (`SharedGlobalMemory`) is the same bytes, each allocation
taken from one bump pointer in the file's header, so an address means the same buffer in every
process and a peer's buffer is read and written in place. Rank 0 creates the file in a fresh
private folder (random name, mode 0700, file mode 0600) with a random token in its header; the
others attach only after checking owner, mode, size and token, and rank 0 unlinks file and
folder as soon as everyone has attached (the mappings stay; nothing is left behind, even after
a crash).

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

import contextlib
import fcntl
import mmap
import os
import secrets
import stat
import tempfile
import time
import zlib

import numpy as np

from .completion import finish_stores
from .counters import Counters, make_report
from .device import BATCH_THREADS, DevicePtr, EmulatorDevice, Function
from .errors import EmulatorError, LaunchRefused, NoProgress
from .executor import run_batch
from .globalrace import MAX_BLOCKS as GLOBAL_RACE_MAX_BLOCKS, GlobalRaceChecker
from .memory import GLOBAL_BASE, GlobalMemory
from .races import RaceChecker, unchecked_reason
from .state import LaunchGeometry, State
from .tmem import check_released

MAX_RANKS = 8
DEFAULT_HEAP = 256 << 20         # bytes of global memory for all ranks together (sparse file)
DEFAULT_TIMEOUT = 120.0          # seconds a rank waits with nothing changing before it reports
HEADER = 1 << 16
MAGIC = 0x314C524F57454C54       # b"TLEWORL1", little-endian
TOKEN_BYTES = 16
_ALIGN = 256
_LOCS = 1024                     # release/acquire locations the shared race check can hold
# header words (int64): 2 magic, 3 heap capacity, 4 heap top, 5 world size, 6 launch number
_MAGIC_W, _CAP_W, _TOP_W, _SIZE_W, _LAUNCH_W = 2, 3, 4, 5, 6
_STATUS_W = 64                   # 8 words per rank: state, launch, epoch, view, blocks, kernel
_TEXT = 4096                     # 1 KiB of text per rank: where it waits, or why it failed
_TEXT_BYTES = 1024
# a rank's state in a launch; DEADLOCKED: it reported the deadlock (its text: where it waits)
IDLE, RUNNING, STUCK, DONE, FAILED, DEADLOCKED = 0, 1, 2, 3, 4, 5


def _layout(cap: int) -> dict:
    """Byte offsets of the file's regions for a heap of `cap` bytes."""
    n = GLOBAL_RACE_MAX_BLOCKS
    sizes = [("heap", cap), ("w_blk", 2 * (cap + 1)), ("w_clk", 4 * (cap + 1)),
             ("w_line", 4 * (cap + 1)), ("vc", 4 * n * n), ("fence", 4 * n),
             ("loc_keys", 8 * _LOCS), ("loc_vals", 4 * _LOCS * n)]
    out, off = {}, HEADER
    for name, size in sizes:
        out[name] = (off, size)
        off = -(-(off + size) // 4096) * 4096
    out["total"] = (0, off)
    return out


class Segment:
    """The shared file of a world: header, heap and the race check's shadow, mapped."""

    def __init__(self, fd: int, cap: int, path: str):
        self.fd, self.cap, self.path = fd, cap, path
        self.layout = _layout(cap)
        self.map = mmap.mmap(fd, self.layout["total"][1], mmap.MAP_SHARED,
                             mmap.PROT_READ | mmap.PROT_WRITE)
        buf = np.frombuffer(self.map, np.uint8)
        self.words = buf[:HEADER].view(np.int64)
        self.status = self.words[_STATUS_W:_STATUS_W + 8 * MAX_RANKS].reshape(MAX_RANKS, 8)
        self.text = buf[_TEXT:_TEXT + _TEXT_BYTES * MAX_RANKS].reshape(MAX_RANKS, _TEXT_BYTES)
        self.region = {k: buf[o:o + s] for k, (o, s) in self.layout.items() if k != "total"}
        self._depth = 0

    # -- creation and trust -----------------------------------------------------------------
    @classmethod
    def create(cls, size: int, cap: int = DEFAULT_HEAP) -> tuple["Segment", str, bytes]:
        """Rank 0: a new file in a new private folder. Returns it, its path and its token."""
        base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) \
            else None
        folder = tempfile.mkdtemp(prefix="tile-world-", dir=base)      # mode 0700, random
        path = os.path.join(folder, "memory")
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                     0o600)
        try:
            os.ftruncate(fd, _layout(cap)["total"][1])                  # sparse: zeros
            seg = cls(fd, cap, path)
        except BaseException:
            os.close(fd)
            os.unlink(path)
            os.rmdir(folder)
            raise
        token = secrets.token_bytes(TOKEN_BYTES)
        seg.words[_MAGIC_W], seg.words[_CAP_W], seg.words[_SIZE_W] = MAGIC, cap, size
        np.frombuffer(seg.map, np.uint8)[:TOKEN_BYTES] = np.frombuffer(token, np.uint8)
        return seg, path, token

    @classmethod
    def attach(cls, path: str, token: bytes, size: int, cap: int) -> "Segment":
        """Another rank: open rank 0's file after checking that it is what rank 0 made."""
        uid = os.getuid()
        folder = os.path.dirname(path)
        try:
            d = os.lstat(folder)
        except OSError as e:
            raise EmulatorError(f"the world's shared memory folder {folder}: {e.strerror}") \
                from None
        if not stat.S_ISDIR(d.st_mode) or d.st_uid != uid or d.st_mode & 0o077:
            raise EmulatorError(f"the world's shared memory folder {folder} is not a private "
                                f"folder of this user: refusing to use it")
        try:
            fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError as e:
            raise EmulatorError(f"the world's shared memory file {path}: {e.strerror}") \
                from None
        try:
            f = os.fstat(fd)
            want = _layout(cap)["total"][1]
            if not stat.S_ISREG(f.st_mode) or f.st_uid != uid or f.st_mode & 0o077 or \
                    f.st_nlink != 1 or f.st_size != want:
                raise EmulatorError(f"the world's shared memory file {path} is not a private "
                                    f"file of this user of {want} bytes: refusing to use it")
            seg = cls(fd, cap, path)
        except BaseException:
            os.close(fd)
            raise
        head = bytes(np.frombuffer(seg.map, np.uint8)[:TOKEN_BYTES])
        if not secrets.compare_digest(head, token) or int(seg.words[_MAGIC_W]) != MAGIC or \
                int(seg.words[_CAP_W]) != cap or int(seg.words[_SIZE_W]) != size:
            raise EmulatorError(f"the world's shared memory file {path} does not carry rank "
                                f"0's token: refusing to use it")
        return seg

    def unlink(self) -> None:
        """Rank 0, once every rank has attached: remove file and folder (mappings stay)."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        with contextlib.suppress(OSError):
            os.rmdir(os.path.dirname(self.path))

    # -- the lock ---------------------------------------------------------------------------
    @contextlib.contextmanager
    def lock(self):
        """The world's one lock (re-entrant within a process): atomics and shared bookkeeping."""
        if self._depth == 0:
            fcntl.flock(self.fd, fcntl.LOCK_EX)
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1
            if self._depth == 0:
                fcntl.flock(self.fd, fcntl.LOCK_UN)

    def set_text(self, rank: int, text: str) -> None:
        b = text.encode()[:_TEXT_BYTES - 1]
        row = self.text[rank]
        row[:len(b)] = np.frombuffer(b, np.uint8)
        row[len(b)] = 0

    def get_text(self, rank: int) -> str:
        row = bytes(self.text[rank])
        return row[:row.index(0) if 0 in row else len(row)].decode(errors="replace")


class SharedGlobalMemory(GlobalMemory):
    """A global heap that is the shared file's heap: allocations from the shared top pointer;
    a peer's allocation is `register`ed so that accesses to it pass the bounds check."""

    def __init__(self, seg: Segment):
        super().__init__()
        self.seg = seg
        self.data = seg.region["heap"]

    def alloc(self, nbytes: int, name: str = "") -> int:
        if nbytes < 0:
            raise EmulatorError(f"cannot allocate {nbytes} bytes")
        with self.seg.lock():
            off = (int(self.seg.words[_TOP_W]) + _ALIGN - 1) // _ALIGN * _ALIGN
            end = off + max(int(nbytes), 1)
            if end > self.data.size:
                raise EmulatorError(f"out of memory: the world's shared heap has "
                                    f"{self.data.size} bytes for all ranks (set "
                                    f"TILELANG_WORLD_HEAP to a larger size)")
            self.seg.words[_TOP_W] = end
        self.register(GLOBAL_BASE + off, int(nbytes), name)
        return GLOBAL_BASE + off

    def register(self, addr: int, nbytes: int, name: str) -> None:
        off = int(addr) - GLOBAL_BASE
        i = int(np.searchsorted(self._np_starts, off))
        self.starts.insert(i, off)
        self.ends.insert(i, off + int(nbytes))
        self.names.insert(i, name)
        self._np_starts = np.asarray(self.starts, np.int64)
        self._np_ends = np.asarray(self.ends, np.int64)

    def atomically(self):
        return self.seg.lock()

    @property
    def shared_top(self) -> int:
        return int(self.seg.words[_TOP_W])


class _SharedLocs:
    """The race check's published clocks per word, as an open-addressing table in the file."""

    def __init__(self, seg: Segment, n: int):
        self.keys = seg.region["loc_keys"].view(np.int64)
        self.vals = seg.region["loc_vals"].view(np.int32)[:_LOCS * n].reshape(_LOCS, n)

    def _slot(self, word: int, insert: bool):
        h = (word * 0x9E3779B1) % _LOCS
        for k in range(_LOCS):
            s = (h + k) % _LOCS
            key = int(self.keys[s])
            if key == word:
                return s
            if key == -1:
                if insert:
                    self.keys[s] = word
                    return s
                return None
        raise EmulatorError(f"the cross-process race check holds at most {_LOCS} "
                            f"release/acquire locations per launch")

    def get(self, word: int):
        s = self._slot(word, False)
        return None if s is None else self.vals[s].copy()

    def __setitem__(self, word: int, vc) -> None:
        self.vals[self._slot(word, True)] = vc


class SharedRaceChecker(GlobalRaceChecker):
    """The global race check with its state in the shared file, over every rank's blocks
    (block ids run rank after rank); every step runs under the world's lock."""

    def __init__(self, seg: Segment, nblocks: int):        # noqa: super().__init__ not called
        n = self.n = nblocks
        self.seg = seg
        r = seg.region
        self.vc = r["vc"].view(np.int32)[:n * n].reshape(n, n)
        self.fence_vc = r["fence"].view(np.int32)[:n]
        self.w_blk = r["w_blk"].view(np.int16)
        self.w_clk = r["w_clk"].view(np.int32)
        self.w_line = r["w_line"].view(np.int32)
        self.locs = _SharedLocs(seg, n)

    def reset(self, top: int) -> None:
        """Rank 0, while the others wait: a fresh state for this launch."""
        self.w_blk[:top + 1] = -1
        self.w_clk[:top + 1] = 0
        self.w_line[:top + 1] = 0
        self.vc[...] = 0
        self.vc[np.arange(self.n), np.arange(self.n)] = 1
        self.fence_vc[...] = 0
        self.locs.keys[...] = -1

    def _grow(self, words):
        """The shadow covers the whole heap already."""

    def access(self, *a, **k):
        with self.seg.lock():
            super().access(*a, **k)

    def sync(self, *a, **k):
        with self.seg.lock():
            super().sync(*a, **k)

    def fence(self, *a, **k):
        with self.seg.lock():
            super().fence(*a, **k)


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
            self.seg.words[_LAUNCH_W] += 1
            if grace is not None:
                grace.reset(dev.mem.shared_top)
        self.sync()
        link = RankLink(self.seg, self.rank, self.size, int(self.seg.words[_LAUNCH_W]),
                        self.timeout)
        counters = Counters(len(prog.code), dev.detailed_counters)
        st = State(prog, geom, self.rank * nb + np.arange(nb), nb, dev.mem, row, counters,
                   prog.static_shared, [])
        st.rank_of_block = np.full(nb, self.rank)
        st.world_link = link
        st.grace = grace
        unchecked = unchecked_reason(prog) if dev.race_check else "race_check is off"
        if unchecked is None:
            st.races = RaceChecker(st)
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


__all__ = ["DEFAULT_HEAP", "DEFAULT_TIMEOUT", "NoProgress", "RankDevice", "Segment",
           "SharedGlobalMemory"]
