"""Re-loads (lower/reload.py, lower/stream.py): a row too wide to keep across a block reduction
is read again after it. Softmax, layernorm and RMSNorm (the examples) at 4,096 columns run on
the emulator and in the interpreter against NumPy, full and ragged rows, in place; the PTX reads
the row once per pass at 4,096 and once at 1,024; a store or an atomic between the load and the
later pass keeps the row in registers (the result is the old values'); and the output is
bit-identical to the kernel that keeps the row (the budgets raised)."""

from __future__ import annotations

import pathlib
import re

import numpy as np
import pytest

from masked_support import compile_for, kernel_body, run
from tilelang.codegen.plan import reloads as reload   # the budgets: the reloads pass

ROOT = pathlib.Path(__file__).resolve().parents[3]
EXAMPLES = {"softmax": "softmax_rows", "layernorm": "layernorm", "rmsnorm": "rmsnorm"}


def _keep_rows(monkeypatch) -> None:
    """Budgets no tile exceeds: the kernels as they were before re-loads."""
    monkeypatch.setattr(reload, "BUDGET", 1 << 30)
    monkeypatch.setattr(reload, "CHEAP_BUDGET", 1 << 30)


def _source(kernel: str) -> str:
    return (ROOT / "examples" / f"{kernel}.tile").read_text()


def _inputs(kernel: str, rows: int, cols: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed + cols)
    x = (rng.standard_normal((rows, cols)) * 3).astype(np.float32)
    d = {"x": x}
    if kernel != "softmax":
        d["w"] = rng.standard_normal(cols).astype(np.float32)
    if kernel == "layernorm":
        d["b"] = rng.standard_normal(cols).astype(np.float32)
    d["y"] = np.full((rows, cols), 7.0, np.float32)
    if kernel != "softmax":
        d["eps"] = np.float32(1e-5)
    return d


def _reference(kernel: str, d: dict) -> np.ndarray:
    x = d["x"].astype(np.float64)
    if kernel == "softmax":
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)
    if kernel == "layernorm":
        m = x.mean(axis=1, keepdims=True)
        v = ((x - m) ** 2).mean(axis=1, keepdims=True)
        return (x - m) / np.sqrt(v + 1e-5) * d["w"] + d["b"]
    ms = (x * x).mean(axis=1, keepdims=True)
    return x / np.sqrt(ms + 1e-5) * d["w"]


def _close(got: np.ndarray, want: np.ndarray) -> None:
    # against each row's largest value (layernorm's x_hat * w + b cancels to near 0 in places)
    scale = np.max(np.abs(want), axis=1, keepdims=True)
    assert np.max(np.abs(got - want) / scale) < 2e-5


def _full_loads(ptx: str, name: str) -> int:
    """Vector loads per thread on the full-tile paths (`ld.global.v4` without a predicate)."""
    body = kernel_body(ptx, name)
    return len(re.findall(r"^\s*ld\.global\.v4\.b32\s", body, re.M))


# full-path vector loads per thread: a 4,096-wide f32 row is 8 vectors per thread, 1,024 is 2.
# softmax reads x in its max, sum and store passes at 4,096; layernorm in its mean, variance and
# store passes, with w and b in the last; RMSNorm in its sum of squares and store, with w.
# At 2,048 (16 registers) softmax keeps its row (its exponentials are within reload.BUDGET),
# layernorm and RMSNorm, with no math function to compute again, re-read theirs (above
# reload.CHEAP_BUDGET).
LOADS = {"softmax": {4096: 3 * 8, 2048: 4, 1024: 2},
         "layernorm": {4096: 3 * 8 + 2 * 8, 2048: 3 * 4 + 2 * 4, 1024: 3 * 2},
         "rmsnorm": {4096: 2 * 8 + 8, 2048: 2 * 4 + 4, 1024: 2 * 2}}


@pytest.mark.parametrize("kernel", sorted(EXAMPLES))
@pytest.mark.parametrize("cols", [4096, 4000])
def test_examples_at_4096_against_numpy(kernel, cols):
    d = _inputs(kernel, 5, cols)
    name = EXAMPLES[kernel]
    res = compile_for(_source(kernel), name, {k: v for k, v in d.items() if k != "eps"},
                      defines={"N": 4096})
    emu, ref = run(res, name, d, (5,))
    want = _reference(kernel, d)
    _close(emu["y"], want)
    _close(ref["y"], want)
    np.testing.assert_array_equal(emu["x"], d["x"])


@pytest.mark.parametrize("kernel", sorted(EXAMPLES))
def test_the_row_is_read_once_per_pass_at_4096_and_once_at_1024(kernel):
    name = EXAMPLES[kernel]
    for n, want in LOADS[kernel].items():
        d = _inputs(kernel, 2, n)
        res = compile_for(_source(kernel), name, {k: v for k, v in d.items() if k != "eps"},
                          defines={"N": n})
        assert _full_loads(res.codegen.ptx, name) == want, (n, kernel)


IN_PLACE = {
    "softmax": """
kernel softmax_ip(x: Array[f32, 2], const N: i32 = 4096) {
    let r = bid(0);
    let t = load(x, index = (r, 0), shape = (1, N), padding = -inf);
    let e = exp(t - max(t, axis = 1, keepdims = true));
    store(x, index = (r, 0), tile = e / sum(e, axis = 1, keepdims = true));
}
""",
    "rmsnorm": """
kernel rmsnorm_ip(x: Array[f32, 2], w: Array[f32, 1], eps: f32, const N: i32 = 4096) {
    let r = bid(0);
    let t = load(x, index = (r, 0), shape = (1, N), padding = 0.0);
    let ms = sum(t * t, axis = 1, keepdims = true) / astype(x.shape[1], f32);
    let scale = expand_dims(load(w, index = (0,), shape = (N,), padding = 0.0), 0);
    store(x, index = (r, 0), tile = t * rsqrt(ms + eps) * scale);
}
""",
    "layernorm": """
kernel layernorm_ip(x: Array[f32, 2], w: Array[f32, 1], b: Array[f32, 1], eps: f32,
                    const N: i32 = 4096) {
    let r = bid(0);
    let n = astype(x.shape[1], f32);
    let t = load(x, index = (r, 0), shape = (1, N), padding = 0.0);
    let mean = sum(t, axis = 1, keepdims = true) / n;
    let d = where(arange(N, dtype = i32) < x.shape[1], t - mean, 0.0);
    let variance = sum(d * d, axis = 1, keepdims = true) / n;
    let scale = load(w, index = (0,), shape = (N,), padding = 0.0);
    let shift = load(b, index = (0,), shape = (N,), padding = 0.0);
    store(x, index = (r, 0), tile = d * rsqrt(variance + eps) * scale + shift);
}
""",
}


@pytest.mark.parametrize("kernel", sorted(IN_PLACE))
@pytest.mark.parametrize("cols", [4096, 4000])
def test_in_place(kernel, cols):
    """y is x: the store pass reads each vector before it writes it, the earlier passes
    read the row before anything is written."""
    d = _inputs(kernel, 3, cols, seed=5)
    want = _reference(kernel, d)
    args = {k: v for k, v in d.items() if k != "y"}
    name = f"{kernel}_ip"
    res = compile_for(IN_PLACE[kernel], name, {k: v for k, v in args.items() if k != "eps"})
    assert _full_loads(res.codegen.ptx, name) == LOADS[kernel][4096]
    emu, ref = run(res, name, args, (3,))
    _close(emu["x"], want)
    _close(ref["x"], want)


BETWEEN = """
kernel between(x: Array[f32, 2], y: Array[f32, 2], const N: i32 = 4096) {
    let r = bid(0);
    let t = load(x, index = (r, 0), shape = (1, N), padding = -inf);
    let m = max(t, axis = 1, keepdims = true);
    WRITE
    let e = exp(t - m);
    store(y, index = (r, 0), tile = e / sum(e, axis = 1, keepdims = true));
}
"""


@pytest.mark.parametrize("write,changed", [
    ("store(x, index = (r, 0), tile = zeros((1, N), dtype = f32));", "zeros"),
    ("atomic_add(x, (r, 1), 100.0);", "atomic"),
])
def test_a_write_between_keeps_the_row(write, changed):
    """The row's tile of x is overwritten (or one element of it added to) after the max: the
    later passes must see the values loaded before, so the row is read once and kept."""
    src = BETWEEN.replace("WRITE", write)
    rng = np.random.default_rng(11)
    x = (rng.standard_normal((3, 4096)) * 3).astype(np.float32)
    y = np.zeros((3, 4096), np.float32)
    res = compile_for(src, "between", {"x": x, "y": y})
    assert _full_loads(res.codegen.ptx, "between") == 8
    emu, ref = run(res, "between", {"x": x, "y": y}, (3,))
    want = _reference("softmax", {"x": x})
    after = np.zeros_like(x) if changed == "zeros" else x.copy()
    if changed == "atomic":
        after[:, 1] += np.float32(100.0)
    for out in (emu, ref):
        _close(out["y"], want)
        np.testing.assert_array_equal(out["x"], after)


@pytest.mark.parametrize("kernel,precision", [(k, None) for k in sorted(EXAMPLES)] +
                         [("layernorm", "ieee"), ("rmsnorm", "ieee")])
def test_bit_identical_to_keeping_the_row(kernel, precision, monkeypatch):
    """The same instructions per element in the same order, the same reduction trees: the
    output equals, bit for bit, that of the kernel that keeps the row in registers."""
    from tilelang.driver import compile_source
    from tilelang.options import CompileOptions
    from gen_support import link, run_emulated
    from masked_support import facts_of
    name = EXAMPLES[kernel]
    d = _inputs(kernel, 4, 4000, seed=9)
    arrays = {k: v for k, v in d.items() if k != "eps"}

    def out() -> tuple[np.ndarray, int]:
        res = compile_source(_source(kernel), f"{kernel}.tile",
                             CompileOptions(defines={"N": "4096"}, precision=precision),
                             facts={name: facts_of(arrays)}, until="ptx")
        assert res.ok
        link(res.codegen)
        args = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in d.items()}
        run_emulated(res.codegen, name, list(args.values()), (4, 1, 1))
        return args["y"], _full_loads(res.codegen.ptx, name)

    again, reads = out()
    _keep_rows(monkeypatch)
    kept, once = out()
    assert reads == LOADS[kernel][4096] and once == LOADS[kernel][4096] - (
        16 if kernel != "rmsnorm" else 8)
    np.testing.assert_array_equal(again, kept)


def test_an_exact_exp_is_not_computed_twice():
    """In precision "ieee" softmax's `exp` is a polynomial of some 25 instructions: computing
    it again in the store pass would nearly double the kernel, so the row is read once and
    the exponentials are kept (plan/reloads._math)."""
    from tilelang.driver import compile_source
    from tilelang.options import CompileOptions
    from masked_support import facts_of
    d = _inputs("softmax", 2, 4096)
    arrays = {k: v for k, v in d.items()}
    for precision, want in (("ieee", 8), ("fast", 3 * 8)):
        res = compile_source(_source("softmax"), "softmax.tile",
                             CompileOptions(defines={"N": "4096"}, precision=precision),
                             facts={"softmax_rows": facts_of(arrays)}, until="ptx")
        assert res.ok
        assert _full_loads(res.codegen.ptx, "softmax_rows") == want, precision


@pytest.mark.parametrize("kernel,precision", [(k, None) for k in sorted(EXAMPLES)] +
                         [("layernorm", "ieee"), ("rmsnorm", "ieee")])
def test_full_occupancy_at_4096(kernel, precision):
    """Issue 14's goal: the linked cubin (nvJitLink, then register_fit) of each example at
    4,096 columns, specialized as the runtime specializes it for contiguous aligned rows,
    takes at most 32 registers without spilling: 100% theoretical occupancy at 128 threads."""
    from tilelang import nvjitlink
    from tilelang.codegen.occupancy import occupancy
    from tilelang.driver import compile_source
    from tilelang.options import CompileOptions
    from masked_support import facts_of
    try:
        nvjitlink.library()
    except nvjitlink.NvJitLinkUnavailable:
        pytest.skip("nvJitLink is not installed")
    name = EXAMPLES[kernel]
    d = _inputs(kernel, 2, 4096)
    arrays = {k: v for k, v in d.items() if k != "eps"}
    res = compile_source(_source(kernel), f"{kernel}.tile",
                         CompileOptions(defines={"N": "4096"}, precision=precision), kernels=[name],
                         facts={name: facts_of(arrays)})
    assert res.ok
    r = res.link.resources[name]
    assert r.registers <= 32 and r.spill_stores == r.spill_loads == r.stack_frame == 0, r
    assert occupancy("sm_90a", 128, r.registers).fraction == 1.0


SQUARE = """
kernel sq(x: Array[DT, 2], y: Array[DT, 2]) {
    let t = load(x, index = (bid(0), 0), shape = (64, 64), padding = 0.0);
    let s = sum(t, axis = 0);
    let m = max(t, axis = 1, keepdims = true);
    store(y, index = (bid(0), 0), tile = (t - s) * 0.5 + m);
}
"""


@pytest.mark.parametrize("dt,npdt,tol", [("f32", np.float32, 1e-5), ("f16", np.float16, 2e-2)])
def test_square_tiles_reduced_along_both_axes(dt, npdt, tol, monkeypatch):
    """A (64, 64) tile (32 f32 registers per thread) reduced over its columns and over its
    rows: read in three passes, each reduction fed one vector at a time in its own tree; the
    result equals NumPy's and, bit for bit, the kernel that keeps the tile (f16 accumulates in
    f32 in both)."""
    src = SQUARE.replace("DT", dt)
    rng = np.random.default_rng(4)
    x = rng.standard_normal((128, 64)).astype(npdt)
    y = np.zeros_like(x)
    outs = []
    for keep in (False, True):
        if keep:
            _keep_rows(monkeypatch)
        res = compile_for(src, "sq", {"x": x, "y": y})
        emu, ref = run(res, "sq", {"x": x, "y": y}, (2,))
        outs.append((emu["y"], _full_loads(res.codegen.ptx, "sq")))
    vectors = 8 if dt == "f32" else 4
    assert [n for _, n in outs] == [3 * vectors, vectors]
    np.testing.assert_array_equal(outs[0][0], outs[1][0])
    want = np.empty(x.shape)
    for i in range(0, 128, 64):
        t = x[i:i + 64].astype(np.float64)
        want[i:i + 64] = (t - t.sum(0)) * 0.5 + t.max(1, keepdims=True)
    assert np.max(np.abs(outs[0][0] - want)) < tol * np.max(np.abs(want))
