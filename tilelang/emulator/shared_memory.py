"""The shared memory of an emulated world whose ranks are processes (docs/distributed.md,
"Under torchrun"; the ranks themselves are shared_world.py).

One file holds everything the processes share, mapped by each (`Segment`): a header (a token,
the allocation pointer, each rank's state and text), the global heap of every rank
(`SharedGlobalMemory`: allocations from one pointer, so an address means the same buffer in
every process; a peer's allocation is `register`ed to pass the bounds check), and the global
race check's state over the blocks of all ranks (`SharedRaceChecker`). Rank 0 creates the file
in a fresh private folder (random name, mode 0700; the file 0600) with a random token; the
others attach only after checking owner, mode, size and token; rank 0 unlinks file and folder
once everyone has attached (the mappings stay; nothing is left behind, even after a crash).
The file's lock (`flock`, re-entrant within a process) makes atomics and the shared
bookkeeping atomic across processes.
"""

from __future__ import annotations

import bisect
import contextlib
import fcntl
import mmap
import os
import secrets
import stat
import tempfile

import numpy as np

from .errors import EmulatorError
from .globalrace import MAX_BLOCKS as GLOBAL_RACE_MAX_BLOCKS, GlobalRaceChecker
from .memory import GLOBAL_BASE, GlobalMemory

MAX_RANKS = 8
DEFAULT_HEAP = 256 << 20         # bytes of global memory for all ranks together (sparse file)
HEADER = 1 << 16
MAGIC = 0x314C524F57454C54       # b"TLEWORL1", little-endian
TOKEN_BYTES = 16
_ALIGN = 256
_LOCS = 1024                     # release/acquire locations the shared race check can hold
# header words (int64): 2 magic, 3 heap capacity, 4 heap top, 5 world size, 6 launch number
_MAGIC_W, _CAP_W, _TOP_W, _SIZE_W, LAUNCH_W = 2, 3, 4, 5, 6
_STATUS_W = 64                   # 8 words per rank: state, launch, epoch, view, blocks, kernel
_TEXT = 4096                     # 1 KiB of text per rank: where it waits, or why it failed
_TEXT_BYTES = 1024


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


def _room(folder: str, nbytes: int) -> bool:
    """Whether `folder` is writable and has room for the whole (sparse) file: a mapped page
    that the file system cannot back is a SIGBUS, so a small /dev/shm (containers) is passed
    over for the temporary folder."""
    try:
        st = os.statvfs(folder)
    except OSError:
        return False
    return os.access(folder, os.W_OK) and st.f_bavail * st.f_frsize >= nbytes


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
        total = _layout(cap)["total"][1]
        base = "/dev/shm" if _room("/dev/shm", total) else None
        folder = tempfile.mkdtemp(prefix="tile-world-", dir=base)      # mode 0700, random
        path = os.path.join(folder, "memory")
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                     0o600)
        try:
            os.ftruncate(fd, total)                                    # sparse: zeros
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
        self._freed: list = []                # (offset, bytes) this process freed

    def alloc(self, nbytes: int, name: str = "") -> int:
        if nbytes < 0:
            raise EmulatorError(f"cannot allocate {nbytes} bytes")
        with self.seg.lock():
            off = (int(self.seg.words[_TOP_W]) + _ALIGN - 1) // _ALIGN * _ALIGN
            end = off + max(int(nbytes), 1)
            if end <= self.data.size:
                self.seg.words[_TOP_W] = end
        if end > self.data.size:
            reused = self._reuse_own(int(nbytes), name)
            if reused is None:
                raise EmulatorError(f"out of memory: the world's shared heap has "
                                    f"{self.data.size} bytes for all ranks (set "
                                    f"TILELANG_WORLD_HEAP to a larger size)")
            return reused
        self.register(GLOBAL_BASE + off, int(nbytes), name)
        return GLOBAL_BASE + off

    def free(self, addr: int) -> None:
        """Free an allocation of this process (its range stays reserved in the file, so
        stale pointers keep faulting, until the heap is full: then this process reuses it)."""
        off = int(addr) - GLOBAL_BASE
        i = bisect.bisect_left(self.starts, off)
        size = self.ends[i] - off if i < len(self.starts) and self.starts[i] == off else 0
        super().free(addr)
        self._freed.append((off, -(-max(size, 1) // _ALIGN) * _ALIGN))

    def _reuse_own(self, nbytes: int, name: str):
        """First fit among the ranges this process freed (no other process allocates them)."""
        for k, (off, cap) in enumerate(self._freed):
            if cap >= max(nbytes, 1):
                del self._freed[k]
                i = bisect.bisect_left(self.starts, off)
                self.ends[i], self.names[i] = off + nbytes, name
                self._np_ends = np.asarray(self.ends, np.int64)
                self.data[off:off + nbytes] = 0
                return GLOBAL_BASE + off
        return None

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
