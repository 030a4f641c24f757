"""Layouts: which thread holds which element of a tile (distributed.py, over GF(2): gf2.py),
where a tile lives in shared memory (shared.py), how one layout becomes another (convert.py),
and the tensor-core fragments (mma.py). Nothing here emits code."""
