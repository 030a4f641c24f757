"""Kernels across devices (docs/distributed.md). On an emulated world: `world(n)` runs n ranks
in this process; under torchrun, `init()` makes this process one rank of a world of processes
(tilelang/runtime/distributed.py, tilelang/runtime/torchrun.py). On GPUs: a module's launch
takes PyTorch symmetric-memory tensors, or `symmetric_tensor(t, group)` / `signal_pad(t)`
(tilelang/runtime/symm_mem.py)."""

from tilelang.runtime.distributed import (RankArray, SymmetricArray, World, WorldKernel,
                                          world)
from tilelang.runtime.symm_mem import SymmetricBuffer, signal_pad, symmetric_tensor
from tilelang.runtime.torchrun import ProcessWorld, init, under_torchrun

__all__ = ["ProcessWorld", "RankArray", "SymmetricArray", "SymmetricBuffer", "World",
           "WorldKernel", "init", "signal_pad", "symmetric_tensor", "under_torchrun", "world"]
