"""Symmetric arrays at a module's launch (docs/distributed.md, "PyTorch symmetric memory").

On the CUDA back end, a `Symmetric[Array[T, N]]` parameter takes a tensor of PyTorch's
symmetric memory (`torch.distributed._symmetric_memory.empty`, on every rank of a torchrun
job) or a `SymmetricBuffer`: this rank's view of one allocation made on every rank. From the
rendezvous handle (`symm_mem.rendezvous(t, group)`: `buffer_ptrs`, `rank`, `world_size`,
`buffer_size`, `signal_pad_ptrs`, `signal_pad_size`) the launch builds the rank's table in
device memory (docs/distributed.md, "ABI": per rank the address, extents and strides, the
layout of a list's table) and passes its address, the world size and the rank. A tensor is at
the same offset of every rank's buffer, so rank r's entry is `buffer_ptrs[r]` plus the local
tensor's offset in the local buffer. Tables are cached by contents (array_lists.TableCache):
the same tensor launches with the table already on the device, and a new handle (other
pointers) gets a new table. `signal_pad(t)` gives a rank's signal pads (PyTorch zeroes them
at allocation) as a symmetric u32 (or u64) array of one axis.

torch is imported only for torch tensors, never at import time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from .args import _a
from .dtypes import ITEMSIZE, TORCH_TO_TILE, accepts
from .errors import arg_error, usage_error
from .signature import ParamInfo


class PeerView(NamedTuple):
    """Rank r's buffer of a symmetric array: one entry of the table."""
    ptr: int
    shape: tuple
    strides: tuple           # elements


@dataclass(frozen=True)
class SymmetricBuffer:
    """This rank's view of an allocation made on every rank (docs/distributed.md): the
    buffers' base addresses in rank order, this rank, and the array (dtype, shape, strides in
    elements) at byte `offset` of every rank's buffer (`buffer_size` bytes each)."""
    buffer_ptrs: tuple
    rank: int
    dtype: str
    shape: tuple
    strides: tuple
    offset: int = 0
    buffer_size: int | None = None
    where: str = "cuda"
    device_id: int = 0
    keep: object = None      # what must stay alive while the launch may run (the tensor)

    @property
    def world_size(self) -> int:
        return len(self.buffer_ptrs)

    def problem(self) -> str | None:
        """Why the buffers cannot hold the array, or None."""
        w = len(self.buffer_ptrs)
        if w < 1 or not 0 <= self.rank < w:
            return f"rank {self.rank} is not in a world of {w}"
        if self.dtype not in ITEMSIZE:
            return f"dtype {self.dtype!r} is not a Tile dtype"
        if len(self.shape) != len(self.strides) or any(s < 0 for s in self.shape):
            return f"shape {self.shape} and strides {self.strides} do not describe an array"
        if any(s < 0 for s in self.strides):
            return "negative strides are not passed in a symmetric table"
        size = ITEMSIZE[self.dtype]
        span = 0 if 0 in self.shape else \
            (sum((n - 1) * s for n, s in zip(self.shape, self.strides)) + 1) * size
        if self.offset < 0 or (self.buffer_size is not None and
                               self.offset + span > self.buffer_size):
            return (f"the array ({span} bytes at offset {self.offset}) does not fit the "
                    f"{self.buffer_size}-byte buffers")
        return None

    def peers(self) -> list[PeerView]:
        """The table's entries, in rank order."""
        return [PeerView(int(p) + self.offset, tuple(self.shape), tuple(self.strides))
                for p in self.buffer_ptrs]


def _rendezvous(t, group):
    import torch.distributed as dist
    import torch.distributed._symmetric_memory as symm_mem
    return symm_mem.rendezvous(t, group if group is not None else dist.group.WORLD)


def symmetric_tensor(t, group=None) -> SymmetricBuffer:
    """The SymmetricBuffer of a tensor allocated with `symm_mem.empty` on every rank of
    `group` (default: the world): collective the first time (PyTorch's rendezvous)."""
    handle = _rendezvous(t, group)
    return from_handle(handle, t)


def from_handle(handle, t) -> SymmetricBuffer:
    """The SymmetricBuffer of tensor `t` of a rendezvous handle (buffer_ptrs, rank,
    world_size, buffer_size)."""
    dt = TORCH_TO_TILE.get(str(t.dtype))
    ptrs = tuple(int(p) for p in handle.buffer_ptrs)
    if len(ptrs) != int(handle.world_size):
        raise usage_error("E0919", f"the symmetric-memory handle has {len(ptrs)} buffer "
                          f"pointers for a world of {handle.world_size}",
                          "pass the handle of a completed rendezvous")
    off = int(t.data_ptr()) - ptrs[int(handle.rank)]
    return SymmetricBuffer(ptrs, int(handle.rank), dt or str(t.dtype), tuple(t.shape),
                           tuple(t.stride()), off, int(handle.buffer_size),
                           "cuda" if t.is_cuda else "host",
                           (t.device.index or 0) if t.is_cuda else 0, t)


def signal_pad(t_or_handle, dtype: str = "u32", group=None) -> SymmetricBuffer:
    """The signal pads of a symmetric allocation as a `Symmetric[Array[dtype, 1]]`: every
    slot of the pad (`signal_pad_size` bytes per rank; PyTorch zeroes them)."""
    if dtype not in ("u32", "i32", "u64", "i64"):
        raise usage_error("E0925", f"a signal pad holds u32, i32, u64 or i64 slots, not "
                          f"{dtype!r}", "pass dtype='u32' (or 'u64')")
    h = t_or_handle
    keep = None
    if not hasattr(h, "signal_pad_ptrs"):       # a tensor: its rendezvous handle
        keep, h = h, _rendezvous(h, group)
    ptrs = tuple(int(p) for p in h.signal_pad_ptrs)
    n = int(h.signal_pad_size) // ITEMSIZE[dtype]
    dev = getattr(getattr(h, "device", None), "index", None) or 0
    return SymmetricBuffer(ptrs, int(h.rank), dtype, (n,), (1,), 0, int(h.signal_pad_size),
                           "cuda", dev, keep if keep is not None else h)


def as_symmetric(obj) -> SymmetricBuffer | None:
    """A SymmetricBuffer for a launch argument: itself, or a torch symmetric-memory tensor's
    (rendezvous on the world group); None for anything else."""
    if isinstance(obj, SymmetricBuffer):
        return obj
    if type(obj).__module__.startswith("torch") and hasattr(obj, "data_ptr"):
        try:
            from torch._C._distributed_c10d import _SymmetricMemory
        except ImportError:                       # torch without distributed support
            return None
        if _SymmetricMemory.is_symm_mem_tensor(obj):
            return symmetric_tensor(obj)
    return None


def read_symmetric(kernel: str, p: ParamInfo, obj, backend) -> SymmetricBuffer:
    """The SymmetricBuffer of argument `obj` for parameter `p`, checked (E0911, E0912,
    E0913, E0919)."""
    s = as_symmetric(obj)
    where = f"argument `{p.name}` of kernel `{kernel}` ({p.show()})"
    if s is None:
        raise usage_error("E0919", f"kernel `{kernel}` takes the symmetric array `{p.name}`"
                          f", which needs a world of devices (got "
                          f"{'None' if obj is None else _a(obj)})",
                          "launch it with tilelang.distributed.world(n).launch_all(...), or "
                          "on GPUs pass a tensor of torch.distributed._symmetric_memory.empty"
                          "(...) made on every rank (docs/distributed.md)", p.span)
    why = s.problem()
    if why is not None:
        raise usage_error("E0919", f"{where}: {why}", "pass the tensor of a completed "
                          "rendezvous, within its buffer", p.span)
    if not accepts(p.dtype, s.dtype):
        raise arg_error("E0911", f"{where} holds {s.dtype}", f"pass a symmetric array of "
                        f"{p.dtype}", p.span)
    if len(s.shape) != p.rank:
        raise arg_error("E0912", f"{where} has rank {len(s.shape)}", f"pass a symmetric array "
                        f"of {p.rank} axes", p.span)
    if s.where != backend.name:
        raise arg_error("E0913", f"{where} is in {s.where} memory; the module runs on "
                        f"{backend.name}", "allocate it on this device with symm_mem.empty",
                        p.span)
    dev = getattr(backend, "device_id", 0)
    if s.where == "cuda" and s.device_id != dev:
        raise arg_error("E0913", f"{where} is on cuda:{s.device_id}; the module runs on "
                        f"cuda:{dev}", f"compile the module for that device "
                        f"(`backend='cuda:{s.device_id}'`), one per rank", p.span)
    return s
