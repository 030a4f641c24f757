"""The LLVM IR kernel emitter: kernel state, control flow, barriers and shared memory, warp ops, formatting, compiling to PTX."""
