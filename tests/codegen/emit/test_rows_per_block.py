"""Several rows per block for narrow rows (issue 14 item 5): a 2-D tile reduced only along its
rows gets a layout with each row in one warp (kernel.rows_in_warps), so softmax and layernorm
over (R, N) tiles reduce with shuffles alone — no shared memory, no barrier — and row vectors
(weights, masks) broadcast by renaming. examples/softmax_rows.tile and layernorm_rows.tile run
on the emulator with the race checker against NumPy, ragged in rows and columns."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

from tilelang.codegen.emit.kernel import rows_in_warps
from tilelang.driver import compile_kernel
from tilelang.options import CompileOptions
from tilelang.emulator import EmulatorDevice

EXAMPLES = pathlib.Path(__file__).resolve().parents[3] / "examples"


def _compile(name: str, consts: dict, text: str | None = None, kernel: str | None = None,
             cols: int | None = None):
    """Compiled with the facts of contiguous arrays whose rows are `cols` f32 long (the
    runtime's rule: a row pitch or extent that is not a multiple of 16 bytes claims less)."""
    from tilelang.codegen.api import ArrayFacts
    path = EXAMPLES / f"{name}.tile"
    src = text if text is not None else path.read_text()
    facts = None
    if cols is not None:
        whole = cols * 4 % 16 == 0
        facts = {"x": ArrayFacts(True, whole, whole), "y": ArrayFacts(True, whole, whole),
                 "w": ArrayFacts(True, True, whole), "b": ArrayFacts(True, True, whole)}
    return compile_kernel(src, str(path), kernel or name, consts=consts, facts=facts,
                          options=CompileOptions(), link=False)


def _launch(ck, arrays, scalars, grid):
    dev = EmulatorDevice(race_check=True)
    fn = dev.load_module(ck.ptx).get_function(ck.artifact.name)
    args, ptrs = [], []
    for a in arrays:
        p = dev.to_device(a)
        ptrs.append(p)
        args += [p, *[np.int64(n) for n in a.shape],
                 *[np.int64(s // a.itemsize) for s in a.strides]]
    rep = dev.launch(fn, grid, ck.artifact.block, args + list(scalars))
    assert rep.race_check.startswith("checked"), rep.race_check
    return [dev.from_device(p, a.shape, a.dtype) for p, a in zip(ptrs, arrays)], rep


def test_layout_puts_each_row_in_one_warp():
    for shape in [(4, 256), (8, 64), (4, 512), (16, 128)]:
        lay = rows_in_warps(shape, 4, 128)
        # no warp bit moves along the row: a row's elements all lie in one warp
        assert all(b[1] == 0 for b in lay.warp), (shape, lay)
        # 16-byte vectors along the row, and every element held by some thread
        assert lay.reg[0] == (0, 1) and lay.reg[1] == (0, 2)
        assert lay.num_regs * 32 * 2 ** len(lay.warp) >= shape[0] * shape[1]


@pytest.mark.parametrize("R,N,rows,cols", [(4, 256, 10, 200), (8, 64, 19, 64), (2, 512, 5, 512),
                                           (4, 128, 7, 100)])
def test_softmax_rows(R, N, rows, cols):
    ck = _compile("softmax_rows", {"R": R, "N": N}, cols=cols)
    assert "shfl.sync.bfly" in ck.ptx
    if R >= 4 and cols * 4 % 16 == 0:   # a warp per row (fewer rows than warps: a row spans
        #                                    warps; an unaligned pitch: see layernorm below)
        assert "bar.sync" not in ck.ptx and ".shared" not in ck.ptx
    x = (np.random.default_rng(R * N).standard_normal((rows, cols)) * 3).astype(np.float32)
    (_, y), _ = _launch(ck, [x, np.full_like(x, np.nan)], [], (-(-rows // R), 1, 1))
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(y, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-9)


@pytest.mark.parametrize("R,N,rows,cols", [(4, 256, 9, 250), (8, 128, 16, 128)])
def test_layernorm_rows(R, N, rows, cols):
    ck = _compile("layernorm_rows", {"R": R, "N": N}, cols=cols)
    if cols * 4 % 16 == 0:
        # (rows whose pitch is not a multiple of 16 bytes load element-wise in the blocked
        # layout, lower/memory.py access_layout, and reduce across warps)
        assert "bar.sync" not in ck.ptx and ".shared" not in ck.ptx
    rng = np.random.default_rng(rows)
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    w, b = rng.standard_normal(cols).astype(np.float32), rng.standard_normal(cols).astype(np.float32)
    (_, _, _, y), _ = _launch(ck, [x, w, b, np.full_like(x, np.nan)], [np.float32(1e-5)],
                              (-(-rows // R), 1, 1))
    x64 = x.astype(np.float64)
    m = x64.mean(axis=1, keepdims=True)
    v = ((x64 - m) ** 2).mean(axis=1, keepdims=True)
    want = (x64 - m) / np.sqrt(v + 1e-5) * w + b
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-5)


def test_fewer_instructions_per_row_than_one_row_per_block():
    x = np.random.default_rng(0).standard_normal((16, 256)).astype(np.float32)
    one = _compile("softmax", {"N": 256}, kernel="softmax_rows")
    many = _compile("softmax_rows", {"R": 4, "N": 256})
    (_, y1), r1 = _launch(one, [x, np.zeros_like(x)], [], (16, 1, 1))
    (_, y4), r4 = _launch(many, [x, np.zeros_like(x)], [], (4, 1, 1))
    np.testing.assert_allclose(y1, y4, rtol=1e-6)
    assert r4.total_instructions < 0.8 * r1.total_instructions, (r4.total_instructions,
                                                                 r1.total_instructions)


def test_a_column_reduction_keeps_the_blocked_layout():
    text = """
kernel k(x: Array[f32, 2], y: Array[f32, 2]) {
    let t = load(x, index = (0, 0), shape = (4, 256), padding = 0.0);
    store(y, index = (0, 0), tile = t - sum(t, axis = 1, keepdims = true)
                                      + max(t, axis = 0, keepdims = true));
}
"""
    ck = compile_kernel(text, "<k>", "k", options=CompileOptions(), link=False)
    x = np.random.default_rng(4).standard_normal((4, 256)).astype(np.float32)
    (_, y), _ = _launch(ck, [x, np.zeros_like(x)], [], (1, 1, 1))
    want = x - x.sum(axis=1, keepdims=True, dtype=np.float64) + x.max(axis=0, keepdims=True)
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)
