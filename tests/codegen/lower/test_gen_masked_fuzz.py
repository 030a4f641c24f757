"""Random masked and offset tile accesses (slow): dtypes of 1-8 bytes, rank 1 and 2, tile
shapes from 1 to 64, ragged extents with and without a 16-byte row pitch, tile indices,
constant or run-time element offsets (negative ones included), masks per row, per column,
per element and scalar, on the load and optionally the store. The emulator's result equals
the reference interpreter's on every case."""

from __future__ import annotations

import random

import numpy as np
import pytest

from gen_support import Strided
from masked_support import compile_for, run

DT = {"f32": np.float32, "f16": np.float16, "f64": np.float64, "i8": np.int8, "u16": np.uint16}


def case(rnd: random.Random, seed: int):
    dt = rnd.choice(list(DT))
    rank = rnd.choice([1, 2])
    shape = [rnd.choice([1, 2, 4, 8, 16, 32, 64]) for _ in range(rank)]
    if rank == 2 and shape[0] * shape[1] > 2048:
        shape[1] = 2048 // shape[0]
    ext = tuple(rnd.randint(1, 80) for _ in range(rank))
    pitch = ext[-1] + rnd.choice([0, 0, 1, 3, 8])
    comma = "," if rank == 1 else ""
    idx = ", ".join(f"bid({d})" for d in range(rank))
    kind = rnd.choice(["index", "const", "runtime"])
    if kind == "index":
        place = f"index = ({idx}{comma})"
    else:
        parts = [f"bid({d}) * {shape[d]} + " + (str(rnd.randint(-5, 20)) if kind == "const"
                                                 else f"o{d}") for d in range(rank)]
        place = f"offset = ({', '.join(parts)}{comma})"
    shp = f"({', '.join(map(str, shape))}{comma})"
    masks = {"none": "", "elem": ", mask = m != 0", "scalar": ", mask = flag",
             "col": (f", mask = arange({shape[-1]}, i32) % 2 == 0" if rank == 1 else
                     f", mask = expand_dims(arange({shape[-1]}, i32) % 5 != 2, 0)"),
             "row": (f", mask = expand_dims(arange({shape[0]}, i32) % 3 != 1, 1)"
                     if rank == 2 else "")}
    mask = masks[rnd.choice(list(masks))]
    smask = mask if rnd.random() < 0.5 else ""
    params = ", ".join(f"o{d}: i32" for d in range(rank))
    src = f"""
kernel k(x: Array[{dt}, {rank}], y: Array[{dt}, {rank}], mm: Array[i8, {rank}], {params},
         flag: bool) {{
    let m = load(mm, index = ({idx}{comma}), shape = {shp});
    let t = load(x, {place}, shape = {shp}, padding = 3{mask});
    store(y, {place}, tile = t{smask});
}}
"""
    rng = np.random.default_rng(seed)
    xb = rng.integers(-50, 50, ext[:-1] + (pitch,)).astype(DT[dt])
    args = {"x": Strided(xb, xb[..., :ext[-1]]), "y": np.zeros(ext, DT[dt]),
            "mm": rng.integers(0, 2, tuple(s * 4 for s in shape)).astype(np.int8)}
    for d in range(rank):
        args[f"o{d}"] = rnd.randint(-4, 9)
    args["flag"] = rnd.random() < 0.7
    grid = tuple(-(-e // s) + 1 for e, s in zip(ext, shape))
    return src, args, grid


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(4))
def test_random_masked_and_offset_accesses(seed):
    rnd = random.Random(seed)
    for k in range(25):
        src, args, grid = case(rnd, seed * 100 + k)
        res = compile_for(src, "k", {n: args[n] for n in ("x", "y", "mm")})
        emu, ref = run(res, "k", args, grid)
        np.testing.assert_array_equal(emu["y"], ref["y"], err_msg=src)
