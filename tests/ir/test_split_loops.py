"""Loop splitting (tilelang/ir/passes/split_loops.py): a loop masked by `where(cols < seq)`
(and `cols <= rows`, the causal form) becomes an unmasked loop over the iterations whose mask
holds everywhere and the original loop over the rest; the results stay the reference's for
every range (empty, reversed, wholly masked, ragged) — run by the interpreter against NumPy,
and once on the emulator."""

from __future__ import annotations

import numpy as np
import pytest

from tilelang.diagnostics import render_all
from tilelang.driver import compile_source
from tilelang.interp import run_kernel
from tilelang.ir.ops import BuiltinOp, ForOp, walk
from tilelang.options import CompileOptions

MASKED = """
kernel masked(x: Array[f32, 2], y: Array[f32, 2], first: i32, last: i32,
              const BN: i32 = 8, const CAUSAL: bool = false) {
    let m = bid(0);
    let seq = dim(x, 1);
    var acc = zeros((4, 1), f32);
    for j in range(first, last) {
        let t = load(x, index = (m, j), shape = (4, BN), padding = 0);
        let cols = expand_dims(arange(BN) + j * BN, 0);
        var s = t + 1.0;
        if CAUSAL {
            let rows = expand_dims(arange(4) + m * 4, 1);
            s = where((cols < seq) & (cols <= rows), s, -1.0);
        } else {
            s = where(cols < seq, s, -1.0);
        }
        acc = acc + sum(s, axis = 1, keepdims = true);
    }
    store(y, index = (m, 0), tile = acc);
}
"""


def _ir(causal: bool, until="tir"):
    res = compile_source(MASKED, "masked.tile", CompileOptions(
        defines={"CAUSAL": "true" if causal else "false"}), until=until)
    assert res.ok, render_all(res.diagnostics)
    return res


def _reference(x, first, last, bn, causal):
    rows, seq = x.shape
    y = np.zeros((rows, 1), np.float64)
    for j in range(first, last):
        for c in range(j * bn, j * bn + bn):
            for r in range(rows):
                keep = c < seq and (not causal or c <= r)
                t = x[r, c] if 0 <= c < seq else 0.0          # outside the array: padding
                y[r, 0] += (t + 1.0) if keep else -1.0
    return y


@pytest.mark.parametrize("causal", [False, True])
def test_the_loop_is_split_and_the_first_part_is_unmasked(causal):
    k = _ir(causal).ir.kernels[0]
    loops = [op for op in k.body.ops if isinstance(op, ForOp)]
    assert len(loops) == 2
    head, tail = loops
    names = lambda lp: {op.name for op in walk(lp.body) if isinstance(op, BuiltinOp)}
    assert "where" not in names(head) and "<" not in names(head) and "where" in names(tail)
    assert tail.start == head.stop and tail.init == head.results


@pytest.mark.parametrize("causal", [False, True])
def test_every_range_matches_numpy(causal):
    ir = _ir(causal).ir
    rng = np.random.default_rng(3)
    cases = [(0, 5, 37), (0, 5, 40), (0, 0, 37), (3, 1, 37), (2, 6, 37), (-2, 4, 37),
             (0, 4, 1), (1, 7, 9), (5, 6, 20)]
    for first, last, seq in cases:
        x = rng.integers(-8, 8, (8, seq)).astype(np.float32)
        y = np.full((8, 1), np.nan, np.float32)
        run_kernel(ir, {"x": x, "y": y, "first": np.int32(first), "last": np.int32(last)},
                   (2, 1, 1), name="masked")
        np.testing.assert_array_equal(y, _reference(x, first, last, 8, causal),
                                      err_msg=str((first, last, seq)))


def test_loops_that_do_not_fit_stay_as_written():
    # the mask's bound moves with the loop (`seq` read inside it): no split
    text = MASKED.replace("let t = load(", "let lim = j * 3;\n        let t = load(") \
                 .replace("where(cols < seq, s, -1.0)", "where(cols < lim, s, -1.0)")
    res = compile_source(text, "m.tile", CompileOptions(defines={"CAUSAL": "false"}),
                         until="tir")
    assert res.ok, render_all(res.diagnostics)
    k = res.ir.kernels[0]
    assert len([op for op in k.body.ops if isinstance(op, ForOp)]) == 1


def test_split_loops_on_the_emulator():
    from tilelang.emulator import EmulatorDevice
    res = _ir(True, until="ptx")
    dev = EmulatorDevice()
    fn = dev.load_module(res.ptx).get_function("masked")
    # 36 columns: rows stay 16-byte aligned (the compiled facts), the last tile is ragged
    x = np.random.default_rng(4).integers(-8, 8, (8, 36)).astype(np.float32)
    y = np.zeros((8, 1), np.float32)
    px, py = dev.to_device(x), dev.to_device(y)
    args = [px, np.int64(8), np.int64(36), np.int64(36), np.int64(1),
            py, np.int64(8), np.int64(1), np.int64(1), np.int64(1), np.int32(0), np.int32(5)]
    dev.launch(fn, (2, 1, 1), (128, 1, 1), args)
    np.testing.assert_array_equal(dev.from_device(py, y.shape, np.float32),
                                  _reference(x, 0, 5, 8, True))


SUFFIX = """
kernel suffix(x: Array[f32, 2], y: Array[f32, 2], first: i32, last: i32) {
    let m = bid(0);
    let rows = expand_dims(arange(8) + m * 8, 1);          // invariant: this block's rows
    var acc = zeros((8, 1), f32);
    for j in range(first, last) {
        let cols = expand_dims(arange(4) + j * 4, 0);        // increasing with j
        let t = load(x, index = (m, j), shape = (8, 4), padding = 0);
        acc = acc + sum(where(rows <= cols, t + 1.0, -1.0), axis = 1, keepdims = true);
    }
    store(y, index = (m, 0), tile = acc);
}
"""


def test_a_mask_that_holds_from_a_bound_on_splits_the_other_way():
    res = compile_source(SUFFIX, "suffix.tile", CompileOptions(), until="tir")
    assert res.ok, render_all(res.diagnostics)
    k = res.ir.kernels[0]
    head, tail = [op for op in k.body.ops if isinstance(op, ForOp)]
    names = lambda lp: {op.name for op in walk(lp.body) if isinstance(op, BuiltinOp)}
    assert "where" in names(head) and "where" not in names(tail)
    rng = np.random.default_rng(6)
    for first, last, n in [(0, 6, 24), (0, 0, 24), (4, 2, 24), (-3, 5, 20), (2, 9, 36),
                           (0, 3, 12)]:
        x = rng.integers(-8, 8, (16, n)).astype(np.float32)
        y = np.full((16, 1), np.nan, np.float32)
        run_kernel(res.ir, {"x": x, "y": y, "first": np.int32(first), "last": np.int32(last)},
                   (2, 1, 1), name="suffix")
        want = np.zeros((16, 1))
        for j in range(first, last):
            for c in range(4 * j, 4 * j + 4):
                for r in range(16):
                    t = x[r, c] if 0 <= c < n else 0.0
                    want[r, 0] += (t + 1.0) if r <= c else -1.0
        np.testing.assert_array_equal(y, want, err_msg=str((first, last, n)))
