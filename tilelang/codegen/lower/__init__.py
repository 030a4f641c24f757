"""Lowerings of Tile IR ops to LLVM IR, one module per family of ops (registered in `table`)."""
