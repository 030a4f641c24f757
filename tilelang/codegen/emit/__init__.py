"""The bottom of code generation: the state of one kernel being emitted (kernel.py), the values
it binds (values.py), moving elements between threads (sync.py, warp.py), values computed again
in another layout (remat.py), `print`'s formats (format.py), line information (lineinfo.py) and
the TMA tensor-map parameters (map_params.py). Imports nothing of lower/, plan/ or walk.py
(docs/codegen.md, "Layers")."""
