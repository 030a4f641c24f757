"""Lists of arrays (docs/language.md, "Lists of arrays"): `List[Array[T, N]]` parameters,
`ws[e]` and `len(ws)`, their IR, and the exact diagnostics of their misuse."""

from sema_helpers import binding_types, errors_of, run_check

from tilelang.diagnostics import render_all
from tilelang.driver import compile_source
from tilelang.options import CompileOptions

SRC = """kernel k(ws: List[Array[f16, 2]], out: Array[f32, 1]) {
    let e = bid(0);
    let w = ws[e];
    let n = len(ws);
    let rows = w.shape[0];
    let t = load(ws[e + 1], index = (0, 0), shape = (16, 16), padding = 0.0);
    store(out, index = (e,), tile = full((1,), n + rows, f32) + sum(astype(t, f32)));
}
"""


def only_error(src: str):
    errs = errors_of(run_check(src))
    assert len(errs) == 1, render_all(errs)
    return errs[0]


def test_types():
    got = binding_types(SRC)
    assert got["ws"] == "List[Array[f16, 2]]"
    assert got["w"] == "Array[f16, 2]"
    assert got["n"] == "i32"
    assert got["t"] == "Tile[f16, 16, 16]"


def test_ir_reads_entries_with_list_item():
    res = compile_source(SRC, "t.tile", CompileOptions(), until="tir")
    assert res.ok, render_all(res.diagnostics)
    assert "kernel @k(%ws: List[Array[f16, 2]], %out: Array[f32, 1])" in res.tir
    assert res.tir.count("list_item(%ws, index=") == 2
    assert "len(%ws) : i32" in res.tir


def test_two_indices():
    d = only_error(SRC.replace("ws[e + 1]", "ws[e, 1]"))
    assert (d.code, d.message) == ("E0247", "a list of arrays takes one index, found 2")
    assert d.help == "`ws[e]` is array `e` of the list; index it with `load(ws[e], ...)`"
    assert (d.span.line, d.span.col) == (6, 18)


def test_a_list_is_not_an_array():
    d = only_error(SRC.replace("load(ws[e + 1],", "load(ws,"))
    assert (d.code, d.message) == (
        "E0506", "`load`: parameter `A` must be an array (a kernel parameter of type "
        "`Array[...]`), found `ws` of type List[Array[f16, 2]]")


def test_len_of_an_array_and_index_of_a_float():
    d = only_error(SRC.replace("len(ws)", "len(out)"))
    assert (d.code, d.message) == (
        "E0506", "`len`: parameter `L` must be a list of arrays (a kernel parameter of type "
        "`List[Array[...]]`), found `out` of type Array[f32, 1]")
    d = only_error(SRC.replace("ws[e]", "ws[1.5]"))
    assert d.code == "E0506" and d.message.startswith("`list_item`: parameter `index`")


def test_list_of_a_scalar_and_in_a_function():
    d = only_error("kernel k(ws: List[f32]) { }")
    assert (d.code, d.message) == ("E0320", "`List[...]` takes one `Array[...]` type")
    assert d.help == "write `List[Array[f32, 1]]`: only an array parameter holds several arrays"
    d = only_error("fn f(ws: List[Array[f32, 1]]) -> i32 { return len(ws); }\n"
                   "kernel k(ws: List[Array[f32, 1]]) { let n = f(ws); }")
    assert (d.code, d.message) == ("E0240", "`List[...]` is a type of kernel parameters only")
    assert d.help == ("a function takes an `Array[f32, 1]`; the kernel tests `is_none` or picks "
                      "the list's element (`ws[e]`) before the call")


def test_an_entry_passes_to_a_function():
    src = ("fn rows(a: Array[f16, 2]) -> i32 { return a.shape[0]; }\n" +
           SRC.replace("let rows = w.shape[0];", "let rows = rows(ws[e]);"))
    assert binding_types(src)["rows"] == "i32"
