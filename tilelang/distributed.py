"""Kernels across devices on an emulated world: `tilelang.distributed.world(n)`
(docs/distributed.md; the implementation is tilelang/runtime/distributed.py)."""

from tilelang.runtime.distributed import (RankArray, SymmetricArray, World, WorldKernel,
                                          world)

__all__ = ["RankArray", "SymmetricArray", "World", "WorldKernel", "world"]
