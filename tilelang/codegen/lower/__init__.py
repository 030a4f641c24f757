"""Lowerings of Tile IR ops to LLVM IR, one module per family of ops (registered in `table`);
the tensor-core families in `tensorcore/`. Imports emit/, layouts/ and scalar/, never walk.py
(docs/codegen.md, "Layers")."""
