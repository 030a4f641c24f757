"""Tile IR passes, run in order by the pass manager (manager.py)."""

from tilelang.ir.passes.manager import DEFAULT_PIPELINE, PASSES, Pass, PassManager, optimize

__all__ = ["DEFAULT_PIPELINE", "PASSES", "Pass", "PassManager", "optimize"]
