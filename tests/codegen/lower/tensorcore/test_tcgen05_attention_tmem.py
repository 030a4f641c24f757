"""examples/attention.tile on sm_100a at its default tiles (BM = BN = 128, four warps): the
output O stays in tensor memory across the key loop (plan/loops.py R11), P goes through tensor
memory into the ts form of tcgen05.mma, O is rescaled there (skipped where the factor is 1),
S comes from a zero accumulator without a store (docs/codegen.md, "Attention with S, P and O
in tensor memory"). Results on the emulator against NumPy's float64 attention, with the race
checker; the PTX protocol; the plan; the rule's refusals; no spills."""

from __future__ import annotations

import contextlib
import io
import pathlib
import re

import numpy as np
import pytest

from tilelang.diagnostics import render_all
from tilelang.driver import compile_source
from tilelang.options import CompileOptions

from wgmma_support import attention_reference, run

ROOT = pathlib.Path(__file__).resolve().parents[4]
ATTENTION = (ROOT / "examples" / "attention.tile").read_text()


def _inputs(dtype, d, seq, heads, seed, kind="random"):
    import ml_dtypes
    npdt = np.float16 if dtype == "f16" else ml_dtypes.bfloat16
    rng = np.random.default_rng(seed)
    q, k, v = (rng.standard_normal((heads, seq, d)) for _ in range(3))
    if kind == "first-tile-max":        # every row's maximum in key tile 0: factor 1 after it
        q = np.abs(q)
        k = 0.05 * k
        k[:, :128] = np.abs(k[:, :128]) + 1.0
    elif kind == "growing":             # each key tile scores higher: every row rescales
        q = np.abs(q)
        k = 0.1 * np.abs(k) + (np.arange(seq) // 128)[None, :, None] * 0.5
    return tuple(x.astype(npdt) for x in (q, k, v))


def _attention(dtype, d, causal, seq, heads=2, seed=0, kind="random"):
    q, k, v = _inputs(dtype, d, seq, heads, seed, kind)
    o = np.full((heads, seq, d), np.nan, q.dtype)
    scale = 1.0 / np.sqrt(d)
    res, rep = run(ATTENTION, "attention", {"q": q, "k": k, "v": v, "o": o},
                   (-(-seq // 128), heads), scalars=[np.float32(scale)], target="sm_100a",
                   defines={"T": dtype, "D": str(d), "CAUSAL": causal}, race_check=True)
    want = np.stack([attention_reference(q[h], k[h], v[h], scale, causal)
                     for h in range(heads)])
    err = np.abs(o.astype(np.float64) - want).max() / np.abs(want).max()
    return res, rep, err


def _check(rep, err, dtype):
    assert rep.race_check == "checked: no shared-memory race"
    # P is rounded to the dtype before P V (f16: 2^-11, bf16: 2^-8 relative) and so is O
    assert np.isfinite(err) and err <= (2e-2 if dtype == "bf16" else 4e-3), err


@pytest.mark.parametrize("dtype,d,causal,seq", [
    ("f16", 64, "false", 200),       # a whole key tile and a ragged one
    ("f16", 64, "true", 200),        # causal: the masked loop takes O over in TMEM
    ("bf16", 128, "true", 77),       # one ragged tile, rows past the end dropped
])
def test_attention_matches_numpy(dtype, d, causal, seq):
    res, rep, err = _attention(dtype, d, causal, seq)
    assert "mma.sync" not in res.ptx
    _check(rep, err, dtype)


@pytest.mark.slow
@pytest.mark.parametrize("dtype,d,causal,seq", [
    ("bf16", 128, "false", 300),
    ("f16", 128, "false", 256),
    ("bf16", 64, "true", 385),
    ("f16", 128, "true", 130),
])
def test_attention_matches_numpy_more_shapes(dtype, d, causal, seq):
    _, rep, err = _attention(dtype, d, causal, seq)
    _check(rep, err, dtype)


@pytest.mark.parametrize("kind,rescaled", [("first-tile-max", 1), ("growing", 3)])
def test_rescale_skipped_and_taken(kind, rescaled):
    # the factor is exactly 1 for every row after key tile 0 (each warp skips the rescale
    # but in tile 0, whose factor is exp2(-inf) = 0), or below 1 for every row of every tile
    # (each warp rescales): both match NumPy
    _, rep, err = _attention("f16", 64, "false", 384, heads=1, seed=3, kind=kind)
    _check(rep, err, "f16")
    # 3 blocks x 128 threads, 3 key tiles each; a rescale is D / 32 = 2 loads of 32 columns
    assert rep.instructions["vote.sync.all.pred"] == 3 * 128 * 3
    assert rep.instructions["tcgen05.ld.sync.aligned.32x32b.x32.b32"] == \
        3 * 128 * rescaled * 2


def _ptx(**defines):
    res = compile_source(ATTENTION, "attention.tile", CompileOptions(
        target="sm_100a", defines={k: str(v) for k, v in defines.items()}), until="ptx")
    assert res.ok, render_all(res.diagnostics)
    return res


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_ptx_protocol(dtype):
    ptx = _ptx(T=dtype, D=128, CAUSAL="true").ptx
    # S (128 columns) and O (D = 128 after it): 256 columns
    assert "tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%r" in ptx
    assert re.search(r"tcgen05\.alloc\.[^;]*, 256;", ptx)
    # P V in the ts form: A from tensor memory, one instruction per k-step of 16 (8 columns)
    ts = re.findall(r"tcgen05\.mma\.cta_group::1\.kind::f16 \[%r\d+\], \[%r\d+\], %rd\d+", ptx)
    assert len(ts) == 2 * 128 // 16                      # the unmasked and the masked loop
    # S from a zero accumulator: enable-input-d from a register (0 on the first k-step)
    assert len(re.findall(r"setp\.ne\.b32 p, %r\d+, 0; tcgen05\.mma", ptx)) == 2 * 128 // 16
    # P packed two to a word and stored over S's columns; O rescaled 32 columns at a time
    assert ptx.count(f"cvt.rn.{dtype}x2.f32") >= 2 * 64
    assert ptx.count("tcgen05.st.sync.aligned.32x32b.x64.b32") == 2
    assert ptx.count("tcgen05.ld.sync.aligned.32x32b.x32.b32") == 2 * 128 // 32
    assert "vote.sync.all.pred" in ptx
    # S read back once per key tile (x128), O once after both loops
    assert ptx.count("tcgen05.ld.sync.aligned.32x32b.x128.b32") == 3
    assert "mma.sync" not in ptx and ".local" not in ptx


def _plan(*defines) -> str:
    from tilelang.cli import main
    out = io.StringIO()
    args = [str(ROOT / "examples" / "attention.tile"), "--arch", "sm_100a", "--emit", "plan"]
    for d in defines:
        args += ["-D", d]
    with contextlib.redirect_stdout(out):
        rc = main(args)
    assert rc in (0, None)
    return out.getvalue()


def test_plan_shows_the_output_in_tensor_memory():
    text = _plan("CAUSAL=true")
    assert "BM = 128 (by_target: sm_100a), BN = 128 (by_target: sm_100a)" in text
    assert text.count("tcgen05 kind::f16 m128n128k16") >= 2
    lines = [ln.strip() for ln in text.splitlines() if "O resident in TMEM" in ln]
    assert len(lines) == 2                  # the key loop split in two for the mask
    assert "left there for the next loop" in lines[0]
    assert "from the previous loop" in lines[1]
    assert all("columns 128..191 of 256" in ln and "takes A from TMEM (ts)" in ln and
               "rescaled on TMEM (skipped where the factor is 1)" in ln and
               "not stored first (enable-input-d off)" in ln for ln in lines)


def test_m64_tiles_keep_the_register_output():
    text = _plan("BM=64", "BN=64")
    assert "O resident" not in text
    assert "O not resident in TMEM: M = 64 (the ts form takes 128)" in text


OTHER_USE = """
kernel k(q: Array[f16, 2], kk: Array[f16, 2], v: Array[f16, 2], o: Array[f32, 2],
         t: Array[f32, 2]) {
    let tq = load(q, index = (0, 0), shape = (128, 64));
    var acc = zeros((128, 64), f32);
    var tot = zeros((128, 1), f32);
    for j in range(cdiv(dim(kk, 0), 128)) {
        let tk = load(kk, index = (j, 0), shape = (128, 64));
        let tv = load(v, index = (j, 0), shape = (128, 64));
        let s = mma(tq, transpose(tk), zeros((128, 128), f32));
        tot = tot + sum(acc, axis = 1, keepdims = true);
        acc = mma(astype(s, f16), tv, acc);
    }
    store(o, index = (0, 0), tile = acc);
    store(t, index = (0, 0), tile = tot);
}
"""


def test_an_output_used_elsewhere_in_the_body_stays_in_registers():
    from tilelang.cli import main
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        f = pathlib.Path(tmp) / "other.tile"
        f.write_text(OTHER_USE)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            rc = main([str(f), "--arch", "sm_100a", "--emit", "plan", "--block", "128"])
    text = out.getvalue()
    assert rc in (0, None), text
    assert "O not resident in TMEM: O has another use in the body" in text
    assert "O resident" not in text


def test_no_register_warning_at_the_default_tiles():
    # the estimate does not count O in registers (it lives in tensor memory)
    for d in (64, 128):
        res = _ptx(D=d, CAUSAL="true")
        assert not [x for x in res.diagnostics if x.code == "W0787"]


@pytest.mark.parametrize("d", [64, 128])
def test_links_without_local_memory(d):
    from tilelang import nvjitlink as lib
    try:
        lib.library()
    except lib.NvJitLinkUnavailable:
        pytest.skip("nvJitLink is not installed")
    for causal in ("false", "true"):
        res = compile_source(ATTENTION, "attention.tile", CompileOptions(
            target="sm_100a", defines={"D": str(d), "CAUSAL": causal}), until="cubin")
        assert res.ok, render_all(res.diagnostics)
        r = res.link.resources["attention"]
        assert (r.spill_stores, r.spill_loads, r.stack_frame) == (0, 0, 0)


def test_a_block_with_producer_and_mma_warps_keeps_the_register_output(tmp_path):
    # 192 threads: warps 4 and 5 would replicate warps 0 and 1's lanes and rescale O twice
    from tilelang.cli import main
    src = ATTENTION.replace("reqntid = by_target(sm_90a = (256, 1, 1), default = (128, 1, 1))",
                            "reqntid = (192, 1, 1)")
    assert src != ATTENTION
    f = tmp_path / "attention192.tile"
    f.write_text(src)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main([str(f), "--arch", "sm_100a", "--emit", "plan"])
    text = out.getvalue()
    assert rc in (0, None), text
    assert "O resident" not in text
    assert "O not resident in TMEM: 192 threads (it takes 128)" in text


NESTED = """
@launch(reqntid = (128, 1, 1))
kernel k(a: Array[f32, 2], b: Array[f16, 2], o: Array[f32, 3], s: Array[f32, 2]) {
    let ta = astype(load(a, index = (0, 0), shape = (128, 64)), f16);
    var acc = zeros((128, 64), f32);
    var tot = zeros((128, 1), f32);
    for j in range(2) {
        let tb = load(b, index = (j, 0), shape = (64, 64));
        let f = full((128, 1), 0.5, f32);
        tot = tot + f;
        acc = mma(ta, tb, acc * f);
    }
    for r in range(2) {
        var acc2 = acc;
        var tot2 = tot;
        for j in range(2) {
            let tb = load(b, index = (j, 0), shape = (64, 64));
            let f = full((128, 1), 0.5, f32);
            tot2 = tot2 + f;
            acc2 = mma(ta, tb, acc2 * f);
        }
        store(o, index = (r, 0, 0), tile = reshape(acc2, (1, 128, 64)));
        store(s, index = (r, 0), tile = tot2);
    }
}
"""


def test_a_loop_run_again_does_not_take_the_output_over_in_tensor_memory():
    # the second resident loop starts from the first's result on every run of the outer
    # loop: O is read back after the first and stored again before each run, not handed on
    rng = np.random.default_rng(9)
    a = rng.standard_normal((128, 64)).astype(np.float32)
    b = rng.standard_normal((128, 64)).astype(np.float16)
    o = np.full((2, 128, 64), np.nan, np.float32)
    s = np.zeros((2, 128), np.float32)
    res, rep = run(NESTED, "k", {"a": a, "b": b, "o": o, "s": s}, (1, 1), target="sm_100a",
                   race_check=True)
    assert len(re.findall(r"kind::f16 \[%r\d+\], \[%r\d+\]", res.ptx)) == 2 * 64 // 16
    assert rep.race_check == "checked: no shared-memory race"
    A = a.astype(np.float16).astype(np.float64)
    b0, b1 = (b[i * 64:(i + 1) * 64].astype(np.float64) for i in range(2))
    acc = (A @ b0) * 0.5 + A @ b1                      # 0 * 0.5 + A B0, then * 0.5 + A B1
    want = (acc * 0.5 + A @ b0) * 0.5 + A @ b1         # the same for both runs
    for r in range(2):
        np.testing.assert_allclose(o[r], want, rtol=1e-5, atol=1e-4)


OUTER = """
@launch(reqntid = (128, 1, 1))
kernel k(a: Array[f32, 2], b: Array[f16, 2], o: Array[f32, 2], s: Array[f32, 2]) {
    let ta = astype(load(a, index = (0, 0), shape = (128, 64)), f16);
    var acc = zeros((128, 64), f32);
    var tot = zeros((128, 1), f32);
    for r in range(2) {
        var acc2 = zeros((128, 64), f32);
        var tot2 = tot;
        for j in range(2) {
            let tb = load(b, index = (j, 0), shape = (64, 64));
            let f = full((128, 1), 0.5, f32);
            tot2 = tot2 + f;
            acc2 = mma(ta, tb, acc2 * f);
        }
        let tb = load(b, index = (r, 0), shape = (64, 64));
        tot = tot2;
        acc = mma(astype(acc2, f16), tb, acc);
    }
    store(o, index = (0, 0), tile = acc);
    store(s, index = (0, 0), tile = tot);
}
"""


def test_a_loop_around_a_resident_loop_keeps_its_own_output_in_registers():
    # the outer loop's body has a loop with tcgen05 products: only the inner loop keeps its O
    # in tensor memory (the outer product's accumulator goes through TMEM on its own)
    rng = np.random.default_rng(10)
    a = rng.standard_normal((128, 64)).astype(np.float32)
    b = rng.standard_normal((128, 64)).astype(np.float16)
    o = np.full((128, 64), np.nan, np.float32)
    s = np.zeros((128, 1), np.float32)
    res, rep = run(OUTER, "k", {"a": a, "b": b, "o": o, "s": s}, (1, 1), target="sm_100a",
                   race_check=True)
    assert rep.race_check == "checked: no shared-memory race"
    text = _plan_of(OUTER)
    assert text.count("O resident in TMEM") == 1
    assert "O not resident in TMEM: a loop in the body has tcgen05 products" in text
    A = a.astype(np.float16).astype(np.float64)
    b0, b1 = (b[i * 64:(i + 1) * 64].astype(np.float64) for i in range(2))
    x = (A @ b0) * 0.5 + A @ b1
    want = x.astype(np.float16).astype(np.float64) @ (b0 + b1)
    # x is rounded to f16 on both sides: at most one f16 ulp (2^-10 |x|) apart per element
    bound = 2.0 ** -10 * np.abs(x) @ (np.abs(b0) + np.abs(b1)) + 1e-4
    assert (np.abs(o - want) <= bound).all()
    np.testing.assert_array_equal(s, np.full((128, 1), 2.0, np.float32))


def _plan_of(src: str) -> str:
    from tilelang.cli import main
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        f = pathlib.Path(tmp) / "k.tile"
        f.write_text(src)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            rc = main([str(f), "--arch", "sm_100a", "--emit", "plan"])
    assert rc in (0, None), out.getvalue()
    return out.getvalue()


ODD = """
@launch(reqntid = (128, 1, 1))
kernel k(a: Array[f32, 2], b: Array[f16, 2], o: Array[f32, 2], s: Array[f32, 2]) {
    var acc = zeros((128, 16), f32);
    var tot = zeros((128, 1), f32);
    for j in range(3) {
        let ta = astype(load(a, index = (0, j), shape = (128, 32)), f16);
        let tb = load(b, index = (j, 0), shape = (32, 16));
        let f = full((128, 1), 0.5, f32);
        tot = tot + f;
        acc = mma(ta, tb, acc * f);
    }
    store(o, index = (0, 0), tile = acc);
    store(s, index = (0, 0), tile = tot);
}
"""


def test_a_narrow_output():
    # O of N = 16 columns (rescaled 16 at a time, not past its columns), P of K = 32 (16 words)
    rng = np.random.default_rng(11)
    a = rng.standard_normal((128, 96)).astype(np.float32)
    b = rng.standard_normal((96, 16)).astype(np.float16)
    o = np.full((128, 16), np.nan, np.float32)
    s = np.zeros((128, 1), np.float32)
    res, rep = run(ODD, "k", {"a": a, "b": b, "o": o, "s": s}, (1, 1), target="sm_100a",
                   race_check=True)
    assert "O resident in TMEM" in _plan_of(ODD)
    assert res.ptx.count("tcgen05.ld.sync.aligned.32x32b.x16.b32") == 2   # rescale, the end
    assert "tcgen05.ld.sync.aligned.32x32b.x32.b32" not in res.ptx
    assert rep.race_check == "checked: no shared-memory race"
    A = a.astype(np.float16).astype(np.float64)
    B = b.astype(np.float64)
    want = np.zeros((128, 16))
    for j in range(3):
        want = want * 0.5 + A[:, 32 * j:32 * (j + 1)] @ B[32 * j:32 * (j + 1)]
    np.testing.assert_allclose(o, want, rtol=1e-5, atol=1e-4)
