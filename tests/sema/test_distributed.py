"""Kernels across devices (docs/distributed.md): `Symmetric[Array[T, N]]` parameters, `peer`,
`rank`, `world_size`, `signal`, `wait_until` and `barrier`: their types, their IR, and the
exact diagnostics of their misuse."""

import pytest
from sema_helpers import binding_types, errors_of, run_check

from tilelang.diagnostics import render_all
from tilelang.driver import compile_source
from tilelang.options import CompileOptions
from tilelang.sema.builtins import BUILTINS

SRC = """kernel k(x: Symmetric[Array[f32, 1]], pad: Symmetric[Array[u32, 1]], y: Array[f32, 1]) {
    let me = rank();
    let n = world_size();
    let p = peer(x, (me + 1) % n);
    let t = load(p, index = (bid(0),), shape = (128,), padding = 0.0);
    store(y, index = (bid(0),), tile = t);
    signal(peer(pad, 0), me, 1, op = "add");
    wait_until(peer(pad, me), 0, "ge", 2);
    barrier(pad, channel = bid(0));
    barrier(pad);
}
"""


def only_error(src: str):
    errs = errors_of(run_check(src))
    assert len(errs) == 1, render_all(errs)
    return errs[0]


def test_types():
    got = binding_types(SRC)
    assert got["x"] == "Symmetric[Array[f32, 1]]"
    assert got["me"] == "i32" and got["n"] == "i32"
    assert got["p"] == "Array[f32, 1]"


def test_ir():
    res = compile_source(SRC, "t.tile", CompileOptions(), until="tir")
    assert res.ok, render_all(res.diagnostics)
    assert "kernel @k(%x: Symmetric[Array[f32, 1]], %pad: Symmetric[Array[u32, 1]]" in res.tir
    assert res.tir.count("peer(%x, ") == 1 and res.tir.count("peer(%pad, ") == 2
    assert res.tir.count("barrier(%pad") == 2
    assert "rank() : i32" in res.tir and "world_size() : i32" in res.tir


def test_peer_of_a_plain_array():
    d = only_error(SRC.replace("peer(x, (me + 1) % n)", "peer(y, 0)"))
    assert (d.code, d.message) == (
        "E0506", "`peer`: parameter `x` must be a symmetric array (a kernel parameter of type "
        "`Symmetric[Array[...]]`), found `y` of type Array[f32, 1]")
    assert (d.span.line, d.span.col) == (4, 18)


def test_a_symmetric_array_is_not_an_array():
    d = only_error(SRC.replace("load(p,", "load(x,"))
    assert (d.code, d.message) == (
        "E0506", "`load`: parameter `A` must be an array (a kernel parameter of type "
        "`Array[...]`), found `x` of type Symmetric[Array[f32, 1]]")


def test_rank_without_a_symmetric_parameter():
    d = only_error("kernel k(y: Array[i32, 1]) {\n"
                   "    store(y, index = (0,), tile = full((1,), rank(), i32));\n}\n")
    assert (d.code, d.message) == (
        "E0248", "`rank()` needs a `Symmetric[Array[...]]` parameter, and kernel `k` has none")
    assert (d.span.line, d.span.col) == (2, 46)


def test_signal_names_a_peer():
    d = only_error(SRC.replace("signal(peer(pad, 0),", "signal(pad,"))
    assert (d.code, d.message) == (
        "E0506", "`signal`: parameter `A` is a symmetric array: say whose pad is signalled "
        "with `peer(A, r)`")


def test_pad_dtype():
    d = only_error(SRC.replace("signal(peer(pad, 0), me, 1,", "signal(peer(x, 0), me, 1.0,"))
    assert (d.code, d.message) == (
        "E0508", "`signal`: parameter `A` is Array[f32, 1], but a signal pad is an `Array` of "
        "one axis of i32, u32, i64, u64")


@pytest.mark.parametrize("edit,code,message", [
    ('"ge", 2', "E0507", '`wait_until`: parameter `cmp` must be one of "eq", "ne", "lt", "le", '
     '"gt", "ge", found "gte"'),
    ('op = "add"', "E0507", '`signal`: parameter `op` must be one of "set", "add", found '
     '"max"'),
])
def test_choices(edit, code, message):
    bad = edit.replace('"ge"', '"gte"') if "ge" in edit else edit.replace("add", "max")
    d = only_error(SRC.replace(edit, bad))
    assert (d.code, d.message) == (code, message)


def test_value_must_fit_the_pad():
    d = only_error(SRC.replace('"ge", 2', '"ge", -1'))
    assert (d.code, d.message) == ("E0401", "integer constant -1 does not fit in u32")
    assert (d.span.line, d.span.col) == (8, 40)


def test_function_parameter():
    d = only_error("fn f(x: Symmetric[Array[f32, 1]]) -> i32 { return 0; }\n"
                   "kernel k(x: Symmetric[Array[f32, 1]]) { let z = f(x); }\n")
    assert (d.code, d.message) == ("E0240", "`Symmetric[...]` is a type of kernel parameters "
                                            "only")


def test_malformed():
    d = only_error("kernel k(x: Symmetric[f32]) { }\n")
    assert (d.code, d.message) == ("E0320", "`Symmetric[...]` takes one `Array[...]` type")
    assert d.help == "write `Symmetric[Array[f32, 1]]`: only an array parameter is allocated " \
                     "on every rank"


def test_references_say_where_to_run():
    from tilelang.diagnostics import TileError
    with pytest.raises(TileError, match=r"`rank` needs a world of devices: the reference "
                       r"interpreter runs one device"):
        BUILTINS["rank"].ref()
