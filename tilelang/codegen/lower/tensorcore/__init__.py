"""The tensor-core families: matrix products (matmul.py) by mma.sync (mma_sync.py) or warp-group
MMAs (wgmma_*.py), their operands, epilogues and plans, cp.async and TMA copies, and the
pipelined loops that overlap them (docs/codegen.md, "Layers"). Imported on a kernel's first
product only."""
