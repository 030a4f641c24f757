"""Precision modes (docs/numerics.md, "Precision modes"): which instructions each mode emits,
and the error bound each mode documents, measured on the emulator against correctly rounded
float64 values (tests/correctly_rounded.py; NumPy's own transcendentals vary between CPUs).

The emulator evaluates `.approx` instructions in float64 and rounds once (docs/emulator.md), so
these runs measure what the lowering adds (argument rounding, the extra multiplies); the bounds
asserted are the documented ones, which add the hardware's own error from the PTX ISA. The
kernel-level tests check where the mode comes from: the per-call `precision=`, the kernel's
`@launch(precision = ...)`, the module's option (tilec --precision, tilelang.compile), the
default ("fast").
"""

from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import pytest

from correctly_rounded import correctly_rounded
from scalar_support import KernelBatch, dtype, link_all, ulp_distance

F32 = dtype("f32")
ROOT = str(__import__("pathlib").Path(__file__).resolve().parents[3])
OPS = ("exp", "exp2", "log", "log2", "sin", "cos", "tanh", "rsqrt", "sigmoid", "/")


def exact64(op: str, operands) -> np.ndarray:
    """The exact result rounded once to float64 (division is IEEE's own, so NumPy's)."""
    ops = [np.asarray(o, np.float64) for o in operands]
    if op == "/":
        with np.errstate(all="ignore"):
            return np.divide(*ops)
    return correctly_rounded(op, ops, np.float64)

ULP = 2.0 ** -23


def _inputs(op: str, rng) -> list[np.ndarray]:
    if op in ("log", "log2", "rsqrt"):
        # magnitudes e^-80..e^80, exact (NumPy's exp varies by CPU)
        x = np.concatenate([np.ldexp(rng.uniform(1, 2, 700), rng.integers(-116, 116, 700)),
                            rng.uniform(0.5, 2.0, 300)])
        x = np.concatenate([x, [1.0, 0.5, 2.0, 0.0, np.inf, -1.0, np.nan]])
    elif op in ("sin", "cos"):
        x = np.concatenate([rng.uniform(-100 * np.pi, 100 * np.pi, 800),
                            rng.uniform(-4, 4, 200), [0.0, -0.0, np.nan]])
    elif op == "/":
        a = rng.standard_normal(1000) * 10.0 ** rng.integers(-30, 30, 1000)
        b = rng.standard_normal(1000) * 10.0 ** rng.integers(-30, 30, 1000)
        return [np.concatenate([a, [1.0, 0.0, -1.0, np.inf]]).astype(np.float32),
                np.concatenate([b, [0.0, 0.0, np.inf, 3.0]]).astype(np.float32)]
    else:
        x = np.concatenate([rng.uniform(-87, 87, 700), rng.standard_normal(300),
                            [0.0, -0.0, np.inf, -np.inf, np.nan]])
    return [x.astype(np.float32)]


def _bound(op: str, mode: str, x: np.ndarray, exact: np.ndarray) -> np.ndarray:
    """The documented absolute error bound per element (docs/numerics.md)."""
    ax, ae = np.abs(x.astype(np.float64)), np.abs(exact)
    approx = op in {"ieee": (), "fast": ("exp", "exp2", "sigmoid", "rsqrt", "/"),
                    "approx": OPS}[mode]
    if not approx:
        # the precise table: at most 3 ulps for every function here (sigmoid's), `/` exact
        ulps = 0.5 if op == "/" else 3
        return ulps * np.abs(np.spacing(exact.astype(np.float32))).astype(np.float64)
    if op in ("exp", "sigmoid"):
        return (2.0 ** -22 + ax * 2.0 ** -23 + ULP) * ae
    if op in ("exp2", "rsqrt"):
        return 2.0 ** -22 * ae
    if op == "/":
        return 2 * np.abs(np.spacing(exact.astype(np.float32))).astype(np.float64)
    if op == "log":
        return 2.0 ** -22 + 2.0 ** -22 * ae
    if op == "log2":
        return 2.0 ** -22 + 2.0 ** -22 * ae
    if op in ("sin", "cos"):
        return np.full_like(ae, 2.0 ** -20.5)
    return 2.0 ** -10.98 * ae                                  # tanh


@pytest.fixture(scope="module")
def ran():
    rng = np.random.default_rng(7)
    kb = KernelBatch("sm_90a")
    for mode in ("ieee", "fast", "approx"):
        for op in OPS:
            xs = _inputs(op, rng)
            kb.add(op, xs, [F32] * len(xs), {"precision": mode})
    kb.compile()
    return kb, kb.run()


@pytest.mark.parametrize("mode", ["ieee", "fast", "approx"])
def test_documented_bounds_on_the_emulator(ran, mode):
    _, cases = ran
    for c in cases:
        if c.params["precision"] != mode:
            continue
        with np.errstate(all="ignore"):
            exact = exact64(c.op, c.operands)
        got = c.out.astype(np.float64)
        finite = np.isfinite(exact) & (np.abs(exact) >= 2.0 ** -126) & (np.abs(exact) < 2.0 ** 127)
        with np.errstate(all="ignore"):
            bound = _bound(c.op, mode, c.operands[0], exact)
            err = np.abs(got - exact)
        bad = finite & ~(err <= bound)
        assert not bad.any(), (c.op, mode, c.operands[0][bad][:4], got[bad][:4], exact[bad][:4])
        # special values: the approximations keep the exact result's infinities, zeros and NaN
        special = ~np.isfinite(exact) | (exact == 0)
        ok = (got == exact) | (np.isnan(got) & np.isnan(exact))
        assert ok[special].all(), (c.op, mode, got[special & ~ok][:4], exact[special & ~ok][:4])


def test_ieee_is_within_the_precise_table_bit_for_bit_where_it_says_so(ran):
    _, cases = ran
    for c in cases:
        if c.params["precision"] == "ieee" and c.op == "/":
            with np.errstate(all="ignore"):
                want = (c.operands[0] / c.operands[1]).astype(np.float32)
            assert (ulp_distance(c.out, want, np.float32) == 0).all()


def test_each_mode_emits_its_instructions(ran):
    kb, _ = ran
    link_all(kb.ptx, ("sm_90a",))
    bodies = dict(re.findall(r"\.entry (k\d+)\((.*?)\n}", kb.ptx, re.S))
    want = {
        "ieee": {op: () for op in OPS},
        "fast": {"exp": ("ex2.approx.ftz.f32",), "exp2": ("ex2.approx.ftz.f32",),
                 "sigmoid": ("ex2.approx.ftz.f32", "rcp.approx.f32"),
                 "rsqrt": ("rsqrt.approx.f32",), "/": ("div.full.f32",),
                 "log": (), "log2": (), "sin": (), "cos": (), "tanh": ()},
        "approx": {"exp": ("ex2.approx.ftz.f32",), "exp2": ("ex2.approx.ftz.f32",),
                   "log": ("lg2.approx.f32",), "log2": ("lg2.approx.f32",),
                   "sin": ("sin.approx.f32",), "cos": ("cos.approx.f32",),
                   "tanh": ("tanh.approx.f32",), "rsqrt": ("rsqrt.approx.f32",),
                   "sigmoid": ("ex2.approx.ftz.f32", "rcp.approx.f32"), "/": ("div.full.f32",)},
    }
    for c in kb.cases:
        body = bodies[c.name]
        instrs = want[c.params["precision"]][c.op]
        for ins in instrs:
            assert ins in body, (c.op, c.params, ins)
        if not instrs:
            assert ".approx" not in body and "div.full" not in body, (c.op, c.params)


def test_f64_is_never_approximated():
    kb = KernelBatch("sm_90a")
    x = np.linspace(0.1, 3.0, 64)
    for op in ("exp", "log", "sin", "tanh", "rsqrt", "sigmoid"):
        kb.add(op, [x], [dtype("f64")], {"precision": "approx"})
    kb.add("/", [x, x + 1], [dtype("f64")] * 2, {"precision": "approx"})
    ptx = kb.compile()
    assert ".approx" not in ptx and "div.full" not in ptx
    for c in kb.run():
        with np.errstate(all="ignore"):
            exact = exact64(c.op, c.operands)
        assert (ulp_distance(c.out, exact, np.float64) <= 3).all(), c.op


# ---------------------------------------------------------------------------------------------
# Where the mode comes from, in whole kernels

SOFTMAX = """
{launch}
kernel softmax(x: Array[f32, 2], y: Array[f32, 2], const N: i32 = 256) {{
    let r = bid(0);
    let t = load(x, index = (r, 0), shape = (1, N), padding = -inf);
    let e = exp(t - max(t, axis = 1, keepdims = true){call});
    store(y, index = (r, 0), tile = e / sum(e, axis = 1, keepdims = true));
}}
"""


def _compile(tmp_path, launch="", call="", precision=None):
    from tilelang.driver import compile_kernel
    from tilelang.options import CompileOptions
    text = SOFTMAX.format(launch=launch, call=call)
    ck = compile_kernel(text, str(tmp_path / "s.tile"), "softmax",
                        options=CompileOptions(precision=precision), link=False)
    return ck


def _run(ck, x):
    from tilelang.emulator import EmulatorDevice
    dev = EmulatorDevice()
    fn = dev.load_module(ck.ptx).get_function("softmax")
    y = np.zeros_like(x)
    px, py = dev.to_device(x), dev.to_device(y)
    args = []
    for p, ptr in zip(ck.artifact.params, (px, py)):
        args += [ptr, np.int64(x.shape[0]), np.int64(x.shape[1]), np.int64(x.shape[1]),
                 np.int64(1)]
    dev.launch(fn, (x.shape[0], 1, 1), ck.artifact.block, args)
    return dev.from_device(py, x.shape, np.float32)


def test_default_is_fast_with_one_reciprocal_per_row(tmp_path):
    ck = _compile(tmp_path)
    assert "ex2.approx.ftz.f32" in ck.ptx
    # the row sum is a shared divisor: reciprocals, and no division per element
    assert "rcp.approx.f32" in ck.ptx and "div." not in ck.ptx
    x = (np.random.default_rng(1).standard_normal((4, 256)) * 4).astype(np.float32)
    got = _run(ck, x).astype(np.float64)
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    want = e / e.sum(axis=1, keepdims=True)
    # exp's bound at |x - max| <= ~30, then the sum's rounding and the reciprocal
    assert np.all(np.abs(got - want) <= (2.0 ** -17 + 256 * 2.0 ** -24) * want)


def test_launch_attribute_and_module_option_and_per_call(tmp_path):
    ieee = _compile(tmp_path, launch='@launch(precision = "ieee")')
    assert ".approx" not in ieee.ptx and "div.rn.f32" in ieee.ptx
    assert ".approx" not in _compile(tmp_path, precision="ieee").ptx
    # the kernel's own attribute wins over the module's option
    fast = _compile(tmp_path, launch='@launch(precision = "fast")', precision="ieee")
    assert "ex2.approx.ftz.f32" in fast.ptx
    # a per-call mode wins over the module's
    call = _compile(tmp_path, call=', precision = "approx"', precision="ieee")
    assert "ex2.approx.ftz.f32" in call.ptx and "div.rn.f32" in call.ptx
    x = (np.random.default_rng(2).standard_normal((3, 256)) * 4).astype(np.float32)
    got = _run(ieee, x)
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    want = e / e.sum(axis=1, keepdims=True)
    # the f32 rounding of x - max (|x - max| ulps of exp's argument), exp's 2 ulps, the sum
    # of 256 rounded terms (a tree: 8 levels) and one division
    rel = np.abs(got - want) / want
    d = np.abs(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    assert np.all(rel <= (d + 12) * 2.0 ** -24), rel.max()


def test_per_call_precision_overrides_the_kernel(tmp_path):
    from tilelang.driver import compile_kernel
    from tilelang.options import CompileOptions
    text = """
@launch(precision = "ieee")
kernel k(x: Array[f32, 1], y: Array[f32, 1]) {
    let t = load(x, index = (bid(0),), shape = (128,), padding = 1.0);
    store(y, index = (bid(0),), tile = exp(t, precision = "fast") + div(t, 3.0, precision = "fast"));
}
"""
    ck = compile_kernel(text, str(tmp_path / "k.tile"), "k", link=False)
    assert "ex2.approx.ftz.f32" in ck.ptx and "div.full.f32" in ck.ptx


def test_bad_modes_are_diagnosed(tmp_path):
    bad = tmp_path / "bad.tile"
    bad.write_text('@launch(precision = "exact")\nkernel k(x: Array[f32, 1]) {\n'
                   '    let t = exp(load(x, index = (0,), shape = (4,)), precision = "quick");\n}\n')
    r = subprocess.run([sys.executable, "-m", "tilelang.cli", "check", str(bad)],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 1
    assert 'error[E0727]: `precision` must be one of "ieee", "fast", "approx", found "exact"' \
        in r.stderr
    assert 'error[E0507]: `exp`: parameter `precision` must be one of "ieee", "fast", ' \
           '"approx", found "quick"' in r.stderr
    r = subprocess.run([sys.executable, "-m", "tilelang.cli", "--precision", "exact",
                        "--emit", "ptx", str(bad)], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 2 and "invalid choice: 'exact'" in r.stderr


def test_tilec_and_compile_flip_the_module(tmp_path):
    src = tmp_path / "s.tile"
    src.write_text(SOFTMAX.format(launch="", call=""))
    out = {}
    for mode in ("ieee", "fast", "approx"):
        r = subprocess.run([sys.executable, "-m", "tilelang.cli", "--precision", mode,
                            "--emit", "ptx", str(src)], capture_output=True, text=True, cwd=ROOT)
        assert r.returncode == 0, r.stderr
        out[mode] = r.stdout
    assert ".approx" not in out["ieee"] and "ex2.approx" in out["fast"]
    import tilelang
    with pytest.raises(ValueError, match="precision"):
        tilelang.compile(str(src), precision="exact", cache=False, backend="emulator")
    from tilelang.options import CompileOptions
    assert CompileOptions(precision="ieee").key() != CompileOptions().key()


def test_constant_and_shared_divisors(tmp_path):
    from tilelang.driver import compile_kernel
    text = """
kernel k(x: Array[f32, 2], y: Array[f32, 2]) {
    let t = load(x, index = (bid(0), 0), shape = (4, 64), padding = 1.0);
    let s = sum(t, axis = 1, keepdims = true);
    store(y, index = (bid(0), 0), tile = t / 3.0 + t / s + 1.0 / s + div(t, s, precision = "ieee"));
}
"""
    ck = compile_kernel(text, str(tmp_path / "k.tile"), "k", link=False)
    # t / 3.0: a multiply by RN(1/3); t / s: one rcp.approx per row; 1.0 / s (as many
    # registers as rows): div.full; the per-call ieee division: div.rn per element
    assert ck.ptx.count("rcp.approx.f32") == 1 and ck.ptx.count("div.full.f32") == 1
    assert ck.ptx.count("div.rn.f32") == 4
    from tilelang.emulator import EmulatorDevice
    dev = EmulatorDevice(race_check=True)
    fn = dev.load_module(ck.ptx).get_function("k")
    x = np.random.default_rng(0).uniform(-2, 2, (4, 64)).astype(np.float32)
    px, py = dev.to_device(x), dev.to_device(np.zeros_like(x))
    args = []
    for p in (px, py):
        args += [p, np.int64(4), np.int64(64), np.int64(64), np.int64(1)]
    dev.launch(fn, (1, 1, 1), ck.artifact.block, args)
    y = dev.from_device(py, x.shape, np.float32).astype(np.float64)
    x64 = x.astype(np.float64)
    s = x.sum(axis=1, keepdims=True, dtype=np.float32).astype(np.float64)
    parts = [x64 / 3, x64 / s, 1 / s, x64 / s]
    # each quotient within 2 ulp, plus the three additions' roundings
    bound = sum(2 * np.abs(np.spacing(p.astype(np.float32))) for p in parts) + \
        3 * np.abs(np.spacing(y.astype(np.float32)))
    s_err = 64 * 2.0 ** -24 * np.abs(x64).sum(axis=1, keepdims=True) / np.abs(s) * \
        (np.abs(parts[1]) + np.abs(parts[2]) + np.abs(parts[3]))
    assert np.all(np.abs(y - sum(parts)) <= bound + s_err)


AXPB = """
{launch}
kernel axpb(x: Array[f32, 2], y: Array[f32, 2], const N: i32 = 64) {{
    let t = load(x, index = (0, 0), shape = (1, N));
    store(y, index = (0, 0), tile = t * 1.7 - 0.3);
}}
"""


def _axpb(tmp_path, launch=""):
    from tilelang.driver import compile_kernel
    from tilelang.emulator import EmulatorDevice
    ck = compile_kernel(AXPB.format(launch=launch), str(tmp_path / "a.tile"), "axpb",
                        link=False)
    x = (np.random.default_rng(5).standard_normal((1, 64)) * 3).astype(np.float32)
    dev = EmulatorDevice()
    fn = dev.load_module(ck.ptx).get_function("axpb")
    px, py = dev.to_device(x), dev.to_device(np.zeros_like(x))
    args = []
    for ptr in (px, py):
        args += [ptr, np.int64(1), np.int64(64), np.int64(64), np.int64(1)]
    dev.launch(fn, (1, 1, 1), ck.artifact.block, args)
    return ck.ptx, x[0], dev.from_device(py, x.shape, np.float32)[0]


def _round_f32(q) -> np.float32:
    """The f32 nearest the Fraction `q` (ties to even), without a double rounding."""
    from fractions import Fraction
    f = np.float32(float(q))
    cands = [np.nextafter(f, np.float32(-np.inf)), f, np.nextafter(f, np.float32(np.inf))]
    return min(cands, key=lambda c: (abs(Fraction(float(c)) - q),
                                     int(np.array(c).view(np.uint32)) & 1))


def test_fast_contracts_multiply_add_and_ieee_does_not(tmp_path):
    from fractions import Fraction
    a, b = np.float32(1.7), np.float32(0.3)          # the loose constants, materialized as f32
    ptx, x, got = _axpb(tmp_path)
    assert "fma.rn.f32" in ptx and "mul.rn.f32" not in ptx
    # one rounding of the exact x * a - b
    want = np.array([_round_f32(Fraction(float(v)) * Fraction(float(a)) - Fraction(float(b)))
                     for v in x], np.float32)
    assert np.array_equal(got, want)
    two = (x * a) - b                                # two roundings: differs somewhere
    assert not np.array_equal(got, two)
    ieee, x2, got2 = _axpb(tmp_path, launch='@launch(precision = "ieee")')
    assert "fma.rn.f32" not in ieee and "mul.rn.f32" in ieee and "add.rn.f32" in ieee
    assert np.array_equal(got2, (x2 * a) - b)         # the reference: two roundings
