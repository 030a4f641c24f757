"""Optional array parameters (docs/language.md, "Optional arrays"): `Optional[Array[T, N]]`,
`is_none`, one specialization per presence pattern (`-D NAME=None`), and the exact diagnostics
of their misuse."""

from sema_helpers import binding_types, errors_of, run_check

from tilelang.diagnostics import render_all
from tilelang.driver import compile_source
from tilelang.options import CompileOptions

BIAS = """kernel add_bias(x: Array[f32, 1], bias: Optional[Array[f32, 1]], y: Array[f32, 1]) {
    let i = bid(0);
    var t = load(x, index = (i,), shape = (128,));
    if not is_none(bias) {
        t = t + load(bias, index = (i,), shape = (128,));
    }
    let absent = is_none(bias);
    store(y, index = (i,), tile = t);
}
"""


def only_error(src: str, **options):
    errs = errors_of(run_check(src, **options))
    assert len(errs) == 1, render_all(errs)
    return errs[0]


def test_present_by_default_absent_with_define():
    assert binding_types(BIAS)["absent"] == "bool = false"
    assert binding_types(BIAS)["bias"] == "Array[f32, 1]"
    got = binding_types(BIAS, defines={"bias": "None"})
    assert got["absent"] == "bool = true"
    assert got["bias"] == "None (an absent Optional[Array[f32, 1]])"


def test_is_none_of_an_ordinary_array_is_false():
    src = BIAS.replace("let absent = is_none(bias);", "let absent = is_none(x);")
    assert binding_types(src, defines={"bias": "None"})["absent"] == "bool = false"


def test_each_presence_pattern_compiles_its_own_code():
    def tir(**defines):
        res = compile_source(BIAS, "t.tile", CompileOptions(defines=defines), until="tir")
        assert res.ok, render_all(res.diagnostics)
        return res.tir
    present, absent = tir(), tir(bias="None")
    # the parameter keeps its ABI type either way; only the present one reads it
    assert "%bias: Array[f32, 1]" in present and "%bias: Array[f32, 1]" in absent
    assert "load(%bias" in present and "load(%bias" not in absent
    assert present.count(" + ") == 1 and absent.count(" + ") == 0


def test_use_outside_the_guard_is_an_error_with_its_span():
    src = BIAS.replace("    if not is_none(bias) {\n", "    {\n")
    d = only_error(src, defines={"bias": "None"})
    assert d.code == "E0246"
    assert d.message == "`bias` is `None` in this specialization, so it cannot be used here"
    assert (d.span.line, d.span.col, d.span.end_col) == (5, 22, 26)
    assert d.help == ("use `bias` only where `is_none(bias)` is false: inside "
                      "`if not is_none(bias) { ... }`")
    assert [r.message for r in d.related] == ["`bias` is declared Optional[Array[f32, 1]]"]
    assert (d.related[0].span.line, d.related[0].span.col) == (1, 35)


def test_a_check_also_checks_the_absent_patterns():
    """Without -D the module is compiled with every optional array present, but a check also
    checks where they are None: an unguarded use is reported with its pattern, once."""
    src = BIAS.replace("    if not is_none(bias) {\n", "    {\n")
    d = only_error(src)
    assert d.code == "E0246" and (d.span.line, d.span.col) == (5, 22)
    assert d.notes == ("in the specialization where `bias` is None (-D bias=None)",)
    assert errors_of(run_check(BIAS)) == []          # guarded: every pattern is fine


def test_every_pattern_of_three_optional_arrays_is_checked():
    # `c` is read only where `a` is present and `b` absent: one pattern of eight is wrong
    src = """kernel k(a: Optional[Array[f32, 1]], b: Optional[Array[f32, 1]],
             c: Optional[Array[f32, 1]], y: Array[f32, 1]) {
    if not is_none(a) and is_none(b) {
        store(y, index = (0,), tile = load(c, index = (0,), shape = (16,)));
    }
}
"""
    d = only_error(src)
    assert d.code == "E0246" and d.span.line == 4
    assert d.notes == ("in the specialization where `b`, `c` are None "
                       "(-D b=None -D c=None)",)


def test_the_wrong_branch_of_the_guard_is_an_error():
    src = BIAS.replace("if not is_none(bias)", "if is_none(bias)")
    d = only_error(src)
    assert d.code == "E0246"
    assert only_error(src, defines={"bias": "None"}).code == "E0246"


def test_passing_an_absent_array_to_a_function_is_an_error():
    src = "fn f(a: Array[f32, 1]) -> i32 { return dim(a, 0); }\n" + BIAS.replace(
        "let absent = is_none(bias);", "let n = f(bias);")
    d = only_error(src, defines={"bias": "None"})
    assert d.code == "E0246" and d.span.line == 8


def test_define_other_than_none():
    d = only_error(BIAS, defines={"bias": "3"})
    assert (d.code, d.message) == ("E0243", "-D bias=3: an optional array takes only `None`")
    assert d.help == ("`-D bias=None` compiles the specialization where `bias` is `None`; "
                      "without it, the one where an array is passed")


def test_optional_of_a_scalar_or_tile_is_refused():
    d = only_error("kernel k(x: Optional[f32]) { }")
    assert (d.code, d.message) == ("E0320", "`Optional[...]` takes one `Array[...]` type")
    assert d.help == "write `Optional[Array[f32, 1]]`: only an array parameter may be `None`"
    d = only_error("kernel k(x: Optional[Array[f32, 1], 2]) { }")
    assert d.code == "E0320"


def test_optional_only_for_kernel_parameters():
    d = only_error("fn f(x: Optional[Array[f32, 1]]) -> i32 { return 1; }\n"
                   "kernel k(a: Array[f32, 1]) { let y = f(a); }")
    assert (d.code, d.message) == ("E0240", "`Optional[...]` is a type of kernel parameters "
                                            "only")
    assert (d.span.line, d.span.col) == (1, 9)
    assert d.help == ("a function takes an `Array[f32, 1]`; the kernel tests `is_none` before "
                      "the call")


def test_is_none_of_a_tile_is_refused():
    d = only_error("kernel k(a: Array[f32, 1]) { let t = zeros((4,), f32); "
                   "let b = is_none(t); }")
    assert d.code == "E0506"
    assert d.message == ("`is_none`: parameter `A` must be an array parameter "
                         "(`Optional[Array[...]]` or `Array[...]`), found `t` of type Tile[f32, 4]")


def test_define_for_an_optional_array_is_not_a_stray_define():
    # `-D NAME=None` names an optional array, not a `const`: no E0272
    codes = [d.code for d in errors_of(run_check(BIAS, defines={"bias": "None"}))]
    assert codes == []
    codes = [d.code for d in errors_of(run_check(BIAS, defines={"x": "None"}))]
    assert codes == ["E0272"]
