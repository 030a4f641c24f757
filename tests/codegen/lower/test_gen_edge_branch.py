"""The uniform edge test of tile accesses (lower/memory.py `TileAccess.outside`): built as the
`or` of the failed bounds, the branch to the edge path needs no negated predicate. Built as an
inside `and`, LLVM computed one `not.pred` and kept it for the later accesses with the same
bounds (a row kernel's load and store under the same_shape fact): one instruction per thread.
Results against NumPy on full rows and on rows shorter than the tile (every row an edge)."""

from __future__ import annotations

import numpy as np
import pytest

from masked_support import compile_for, kernel_body, run
from tilelang.codegen.api import ArrayFacts
from tilelang.runtime.args import facts_key

SOFTMAX = """
kernel sm(x: Array[f32, 2], y: Array[f32, 2], const N: i32 = 256) {
    let r = bid(0);
    let t = load(x, index = (r, 0), shape = (1, N), padding = -inf);
    let e = exp(t - max(t, axis = 1, keepdims = true));
    store(y, index = (r, 0), tile = e / sum(e, axis = 1, keepdims = true));
}
"""


@pytest.mark.parametrize("cols", [256, 200])
def test_row_kernel_edge_test_has_no_negation(cols):
    rng = np.random.default_rng(cols)
    x = rng.standard_normal((5, cols)).astype(np.float32)
    y = np.zeros((5, cols), np.float32)
    key = facts_key(0, x.shape, (cols, 1), 4)
    # y's shape is x's (the runtime's `=0`): its bounds are x's, the same SSA values
    facts = {"x": ArrayFacts.from_key(key), "y": ArrayFacts.from_key(key + "=0")}
    res = compile_for(SOFTMAX, "sm", {"x": x, "y": y}, facts=facts)
    body = kernel_body(res.codegen.ptx, "sm")
    assert "not.pred" not in body
    emu, ref = run(res, "sm", {"x": x, "y": y}, (5,))
    x64 = x.astype(np.float64)
    want = np.exp(x64 - x64.max(axis=1, keepdims=True))
    want /= want.sum(axis=1, keepdims=True)
    for out in (emu, ref):
        np.testing.assert_allclose(out["y"], want, rtol=1e-5, atol=1e-7)
