"""`reduce` and `scan` with a combine function, through generate: the emulator and the
interpreter against NumPy (exact for integers and for argmax-like pairs, ties included), and the
emitted code of a combine equal to a built-in's no longer than the built-in's, counted in
executed instructions on the emulator."""

from __future__ import annotations

import numpy as np
import pytest

from gen_support import run_emulated
from ops_support import rng_for
from tilelang.driver import compile_source
from tilelang.interp import run_kernel
from tilelang.options import CompileOptions

HEAD = """
fn add(a, b) { return a + b; }
fn bigger(a, b) { return maximum(a, b); }
fn first_max(a, b) {
    let (va, ia) = a;
    let (vb, ib) = b;
    let take_b = vb > va or (vb == va and ib < ia);
    return where(take_b, vb, va), where(take_b, ib, ia);
}
"""


def build(body: str, params: str, threads: int = 128, target: str = "sm_80"):
    src = HEAD + f"""
@launch(reqntid = ({threads}, 1, 1))
kernel k({params}) {{
{body}
}}
"""
    res = compile_source(src, "<combine>.tile", CompileOptions(target=target), until="ptx")
    assert res.ok, [str(d) for d in res.diagnostics]
    return res


def run(res, args):
    """(emulator outputs, interpreter outputs, the emulator's launch report)."""
    emu = [a.copy() for a in args]
    rep = run_emulated(res.codegen, "k", emu, (1, 1, 1))
    ref = [a.copy() for a in args]
    run_kernel(res.ir, ref, (1, 1, 1))
    return emu, ref, rep


SHAPES = [((16, 64), 1), ((64, 64), 0), ((1024,), 0), ((8, 4, 32), 1)]


def _reduce_body(shape, axis, expr):
    rank = len(shape)
    zeros = ", ".join(["0"] * rank) + ("," if rank == 1 else "")
    out_rank = rank - 1
    oz = ", ".join(["0"] * out_rank) + ("," if out_rank == 1 else "")
    store = f"store(o, index=({oz}), tile={expr});" if out_rank else \
        f"store(o, index=(0,), tile=reshape({expr}, (1,)));"
    return f"""    let t = load(x, index=({zeros}), shape={tuple(shape)});
    {store}"""


@pytest.mark.parametrize("shape,axis", SHAPES)
@pytest.mark.parametrize("custom,builtin", [("add", "sum"), ("bigger", "max")])
def test_custom_reduce_no_longer_than_builtin(shape, axis, custom, builtin):
    """A custom reduce whose combine is the built-in's: the same values and no more executed
    instructions (the same tree with the same combine inlined)."""
    rank = len(shape)
    params = f"x: Array[i32, {rank}], o: Array[i32, {max(rank - 1, 1)}]"
    rng = rng_for("reduce", shape, axis, custom)
    x = rng.integers(-1000, 1000, shape).astype(np.int32)
    want = np.asarray(x.sum(axis=axis) if builtin == "sum" else x.max(axis=axis))
    want = want.reshape(want.shape or (1,))
    counts = {}
    for name, expr in (("custom", f"reduce(t, {custom}, axis={axis})"),
                       ("builtin", f"{builtin}(t, axis={axis})")):
        res = build(_reduce_body(shape, axis, expr), params)
        o = np.zeros(want.shape, np.int32)
        emu, ref, rep = run(res, [x, o])
        np.testing.assert_array_equal(emu[1], want)
        np.testing.assert_array_equal(ref[1], want)
        counts[name] = rep.total_instructions
    assert counts["custom"] <= counts["builtin"], counts


@pytest.mark.parametrize("shape,axis", [((16, 64), 1), ((64, 64), 0), ((1024,), 0)])
def test_float_sum_and_max(shape, axis):
    rank = len(shape)
    params = f"x: Array[f32, {rank}], o: Array[f32, {max(rank - 1, 1)}], " \
             f"m: Array[f32, {max(rank - 1, 1)}]"
    oz = ", ".join(["0"] * max(rank - 1, 1)) + ("," if max(rank - 1, 1) == 1 else "")
    rs = "" if rank > 1 else ", (1,)"
    wrap = (lambda e: f"reshape({e}{rs})") if rank == 1 else (lambda e: e)
    z = ", ".join(["0"] * rank) + ("," if rank == 1 else "")
    body = f"""    let t = load(x, index=({z}), shape={tuple(shape)});
    store(o, index=({oz}), tile={wrap(f"reduce(t, add, axis={axis})")});
    store(m, index=({oz}), tile={wrap(f"reduce(t, bigger, axis={axis})")});"""
    res = build(body, params)
    rng = rng_for("fsum", shape, axis)
    x = rng.standard_normal(shape).astype(np.float32)
    oshape = x.sum(axis=axis).shape or (1,)
    emu, ref, _ = run(res, [x, np.zeros(oshape, np.float32), np.zeros(oshape, np.float32)])
    exact = x.astype(np.float64).sum(axis=axis).reshape(oshape)
    for out in (emu, ref):
        np.testing.assert_allclose(out[1], exact, rtol=1e-5, atol=1e-4)
        np.testing.assert_array_equal(out[2], x.max(axis=axis).reshape(oshape))


@pytest.mark.parametrize("shape,axis", [((16, 64), 1), ((64, 64), 0), ((4, 256), 1)])
def test_tuple_reduce_first_max_with_ties(shape, axis):
    """(value, index) pairs reduced together: NumPy's argmax (first of equal maxima)."""
    rank = len(shape)
    body = f"""    let t = load(x, index=(0, 0), shape={tuple(shape)});
    let i = broadcast_to(expand_dims(arange({shape[axis]}), {1 - axis}), {tuple(shape)});
    let (v, j) = reduce((t, i), first_max, axis={axis});
    store(o, index=(0,), tile=v);
    store(p, index=(0,), tile=j);"""
    res = build(body, "x: Array[f32, 2], o: Array[f32, 1], p: Array[i32, 1]")
    rng = rng_for("argmax", shape, axis)
    x = rng.integers(-3, 4, shape).astype(np.float32)      # many ties
    n = shape[1 - axis]
    emu, ref, _ = run(res, [x, np.zeros(n, np.float32), np.zeros(n, np.int32)])
    for out in (emu, ref):
        np.testing.assert_array_equal(out[1], x.max(axis=axis))
        np.testing.assert_array_equal(out[2], x.argmax(axis=axis))


@pytest.mark.parametrize("shape,axis,threads", [((16, 64), 1, 128), ((64, 64), 0, 128),
                                               ((1024,), 0, 128), ((512,), 0, 64),
                                               ((4, 8), 1, 32)])
@pytest.mark.parametrize("reverse", [False, True])
def test_scan_add_and_max(shape, axis, threads, reverse):
    rank = len(shape)
    z = ", ".join(["0"] * rank) + ("," if rank == 1 else "")
    rv = "true" if reverse else "false"
    body = f"""    let t = load(x, index=({z}), shape={tuple(shape)});
    store(o, index=({z}), tile=scan(t, add, axis={axis}, reverse={rv}));
    store(m, index=({z}), tile=scan(t, bigger, axis={axis}, reverse={rv}));"""
    res = build(body, f"x: Array[i32, {rank}], o: Array[i32, {rank}], m: Array[i32, {rank}]",
                threads)
    rng = rng_for("scan", shape, axis, reverse)
    x = rng.integers(-1000, 1000, shape).astype(np.int32)
    f = (lambda a: np.flip(a, axis)) if reverse else (lambda a: a)
    want_s = f(np.cumsum(f(x), axis=axis, dtype=np.int32))
    want_m = f(np.maximum.accumulate(f(x), axis=axis))
    emu, ref, _ = run(res, [x, np.zeros_like(x), np.zeros_like(x)])
    for out in (emu, ref):
        np.testing.assert_array_equal(out[1], want_s)
        np.testing.assert_array_equal(out[2], want_m)


def test_tuple_scan_running_argmax():
    """A scan of (value, index) pairs: the running argmax, first index on ties."""
    body = """    let t = load(x, index=(0,), shape=(256,));
    let (v, j) = scan((t, arange(256)), first_max);
    store(o, index=(0,), tile=v);
    store(p, index=(0,), tile=j);"""
    res = build(body, "x: Array[f32, 1], o: Array[f32, 1], p: Array[i32, 1]")
    x = rng_for("runmax").integers(-20, 20, 256).astype(np.float32)
    want_j = np.array([int(np.argmax(x[:i + 1])) for i in range(256)], np.int32)
    emu, ref, _ = run(res, [x, np.zeros(256, np.float32), np.zeros(256, np.int32)])
    for out in (emu, ref):
        np.testing.assert_array_equal(out[1], np.maximum.accumulate(x))
        np.testing.assert_array_equal(out[2], want_j)


def _errors(src: str) -> list[str]:
    res = compile_source(src, "<bad>.tile", CompileOptions(target="sm_80"), until="tir")
    assert not res.ok
    return [d.message for d in res.diagnostics if d.severity.name == "ERROR"]


BAD = """
fn one(a) { return a; }
fn wide(a, b) { return astype(a + b, f64); }
fn branchy(a, b) {
    var r = a;
    if b > a { r = b; }
    return r;
}
@launch(reqntid = (128, 1, 1))
kernel k(x: Array[f32, 1], o: Array[f32, 1]) {
    let t = load(x, index=(0,), shape=(128,));
    store(o, index=(0,), tile=reshape(reduce(t, COMBINE), (1,)));
}
"""


@pytest.mark.parametrize("combine,message", [
    ("one", "`reduce`: the combine function `one` must take two arguments (two f32 scalars), "
            "but it takes 1"),
    ("wide", "`reduce`: the combine function `wide` must return f32 for two f32 scalars, but "
             "it returns f64"),
    ("branchy", "the combine function `branchy` must be straight-line code without effects"),
    ("2.0", "`reduce`: parameter `combine` must be a function of two elements, such as a `fn` "
            "or `maximum`, found `2.0`"),
])
def test_combine_diagnostics(combine, message):
    assert _errors(BAD.replace("COMBINE", combine)) == [message]


DTYPES = {"i8": np.int8, "u16": np.uint16, "i64": np.int64, "u64": np.uint64, "f16": np.float16,
          "bf16": np.float32, "f64": np.float64, "bool": np.bool_}


@pytest.mark.parametrize("dt", sorted(DTYPES))
def test_every_dtype_reduce_scan(dt):
    """The state keeps the element dtype (no widening): i8 sums wrap, bf16 travels as bf16.
    Values in {-1, 0, 1} (bool: or), so every order of combination gives the same result."""
    from ops_support import from_bf16_bits, to_bf16_bits
    comb = "either" if dt == "bool" else "add"
    src = HEAD + f"""
fn either(a, b) {{ return a or b; }}
@launch(reqntid = (128, 1, 1))
kernel k(x: Array[{dt}, 2], r: Array[{dt}, 1], a: Array[{dt}, 2], s: Array[{dt}, 2]) {{
    let t = load(x, index = (0, 0), shape = (16, 64));
    store(r, index = (0,), tile = reduce(t, {comb}, axis = 1));
    store(a, index = (0, 0), tile = reduce(t, {comb}, keepdims = true));
    store(s, index = (0, 0), tile = scan(t, {comb}, axis = 0, reverse = true));
}}
"""
    res = compile_source(src, "<dtypes>.tile", CompileOptions(target="sm_80"), until="ptx")
    assert res.ok, [str(d) for d in res.diagnostics]
    rng = rng_for("dtypes", dt)
    if dt == "bool":
        x = rng.random((16, 64)) < 0.02
    elif dt.startswith("u"):
        x = rng.integers(0, 2, (16, 64)).astype(DTYPES[dt])
    else:
        x = rng.integers(-1, 2, (16, 64)).astype(DTYPES[dt])
    npdt = DTYPES[dt]
    if dt == "bool":
        want = (x.any(axis=1), x.any().reshape(1, 1),
                np.flip(np.logical_or.accumulate(np.flip(x, 0), axis=0), 0))
    else:
        with np.errstate(over="ignore"):
            want = (x.sum(axis=1, dtype=npdt), x.sum(dtype=npdt).reshape(1, 1),
                    np.flip(np.cumsum(np.flip(x, 0), axis=0, dtype=npdt), 0))
    args = [x, np.zeros(16, npdt), np.zeros((1, 1), npdt), np.zeros((16, 64), npdt)]
    bf = (0, 1, 2, 3) if dt == "bf16" else ()
    emu = [to_bf16_bits(a) if i in bf else a.copy() for i, a in enumerate(args)]
    run_emulated(res.codegen, "k", emu, (1, 1, 1))
    emu = [from_bf16_bits(a) if i in bf else a for i, a in enumerate(emu)]
    ref = [a.copy() for a in args]
    run_kernel(res.ir, ref, (1, 1, 1))
    for out in (emu, ref):
        for got, w in zip(out[1:], want):
            np.testing.assert_array_equal(got, w)


def test_builtin_and_helper_functions_as_combine():
    """A built-in (`maximum`) names the combine directly; a combine may call other fns."""
    body = """    let t = load(x, index = (0, 0), shape = (16, 64));
    store(o, index = (0,), tile = reduce(t, maximum, axis = 1));
    store(p, index = (0,), tile = reduce(t, via_helper, axis = 1));"""
    src_head = "fn twice(v) { return v + v; }\nfn via_helper(a, b) { return twice(a) - a + b; }\n"
    res = compile_source(src_head + HEAD + f"""
@launch(reqntid = (128, 1, 1))
kernel k(x: Array[i32, 2], o: Array[i32, 1], p: Array[i32, 1]) {{
{body}
}}
""", "<fns>.tile", CompileOptions(target="sm_80"), until="ptx")
    assert res.ok, [str(d) for d in res.diagnostics]
    x = rng_for("fns").integers(-100, 100, (16, 64)).astype(np.int32)
    emu, ref, _ = run(res, [x, np.zeros(16, np.int32), np.zeros(16, np.int32)])
    for out in (emu, ref):
        np.testing.assert_array_equal(out[1], x.max(axis=1))
        np.testing.assert_array_equal(out[2], x.sum(axis=1))


def test_an_error_inside_the_combine_is_reported_once():
    """A combine that does not check for the state (a tuple to a scalar `+`) reports its own
    error, not a second one at the `reduce`."""
    src = HEAD + """
kernel k(x: Array[f32, 2], z: Array[i32, 1]) {
    let t = load(x, index = (0, 0), shape = (16, 64));
    let (v, i) = reduce((t, zeros((16, 64), i32)), add, axis = 1);
    store(z, index = (0,), tile = i);
}
"""
    assert _errors(src) == ["the left operand of `+` must be a tile or scalar, found `a` of type "
                            "(f32, i32)"]


def test_a_combine_with_a_scalar_only_op():
    """`cdiv` takes scalars only: the interpreter runs such a body once per element (the other
    bodies run on whole arrays), and both agree with NumPy."""
    src = HEAD + """
fn halves(a, b) { return cdiv(a, 1) + b; }
@launch(reqntid = (128, 1, 1))
kernel k(x: Array[i32, 2], o: Array[i32, 1]) {
    store(o, index = (0,), tile = reduce(load(x, index = (0, 0), shape = (16, 64)), halves,
                                         axis = 1));
}
"""
    res = compile_source(src, "<cdiv>.tile", CompileOptions(target="sm_80"), until="ptx")
    assert res.ok, [str(d) for d in res.diagnostics]
    x = rng_for("cdiv").integers(-50, 50, (16, 64)).astype(np.int32)
    emu, ref, _ = run(res, [x, np.zeros(16, np.int32)])
    for out in (emu, ref):
        np.testing.assert_array_equal(out[1], x.sum(axis=1))
