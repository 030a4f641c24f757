"""Tile codegen stage: Tile IR -> LLVM IR -> PTX. generate.py is the entry; the layers below it
(walk.py, lower/, plan/, emit/, beside layouts/, scalar/ and target/) import only downward
(docs/codegen.md, "Layers")."""
