"""Kernels across devices on an emulated world (docs/distributed.md): `world(n)` runs n ranks
in this process; under torchrun, `init()` makes this process one rank of a world of processes
(the implementation is tilelang/runtime/distributed.py and tilelang/runtime/torchrun.py)."""

from tilelang.runtime.distributed import (RankArray, SymmetricArray, World, WorldKernel,
                                          world)
from tilelang.runtime.torchrun import ProcessWorld, init, under_torchrun

__all__ = ["ProcessWorld", "RankArray", "SymmetricArray", "World", "WorldKernel", "init",
           "under_torchrun", "world"]
