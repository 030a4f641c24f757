"""Every construct and literal of the grammar parses to the expected AST."""

import math

import pytest

from tilelang.diagnostics import TileSyntaxError
from tilelang.frontend import ast as A
from tilelang.frontend.parser import keywords, parse, parse_expr


def body(src: str) -> tuple:
    """Statements of `fn f() { src }`."""
    m = parse("fn f() {\n" + src + "\n}\n")
    return m.items[0].body.stmts


@pytest.mark.parametrize("text,value", [
    ("42", 42), ("0", 0), ("0x2A", 42), ("0X2a", 42), ("0b101", 5), ("0B1_0", 2),
    ("1_000_000", 1_000_000), ("0xFF_FF", 0xFFFF), ("123456789012345678901234567890",
                                                     123456789012345678901234567890),
])
def test_integer_literals(text, value):
    e = parse_expr(text)
    assert isinstance(e, A.IntLit) and e.value == value and e.text == text


@pytest.mark.parametrize("text,value", [
    ("1.0", 1.0), ("2.5e-3", 2.5e-3), ("1e9", 1e9), ("1E+2", 100.0), ("3.141_592", 3.141592),
    ("0.0", 0.0), ("6.02e2_3", 6.02e23),
])
def test_float_literals(text, value):
    e = parse_expr(text)
    assert isinstance(e, A.FloatLit) and e.value == value


def test_inf_nan_true_false():
    assert parse_expr("inf").value == math.inf
    assert math.isnan(parse_expr("nan").value)
    assert parse_expr("-inf") == A.UnaryOp("-", A.FloatLit(math.inf))
    assert parse_expr("true") == A.BoolLit(True)
    assert parse_expr("false") == A.BoolLit(False)


def test_string_escapes():
    e = parse_expr(r'"a\tb\n\\ \"q\" \x41\0"')
    assert e == A.StrLit('a\tb\n\\ "q" A\0')


def test_comments_both_forms():
    m = parse("// line\n/* block\n spanning lines */ const X = 1; /* after */ // end\n")
    assert m.items == (A.ConstDef("X", None, A.IntLit(1)),)


def test_imports():
    m = parse("import std.math;\nimport a.b.c as d;\nfrom std.nn import x, y as z;\n")
    assert m.items == (
        A.Import(("std", "math")),
        A.Import(("a", "b", "c"), "d"),
        A.FromImport(("std", "nn"), (A.ImportName("x"), A.ImportName("y", "z"))),
    )


def test_const_item_with_and_without_type():
    m = parse("const A: i32 = 64;\nconst B = 1.5;")
    assert m.items[0] == A.ConstDef("A", A.TypeExpr("i32"), A.IntLit(64))
    assert m.items[1] == A.ConstDef("B", None, A.FloatLit(1.5))


def test_fn_and_kernel_with_attributes():
    m = parse("""
@launch(maxntid = (256, 1, 1), maxnreg = by_target(sm_90a = 168, default = 128))
kernel k(a: Array[f32, 1], n: i32, const T: i32 = 1024) { }
@host
fn g(x, y: f32) -> f32 { return x; }
@host()
fn h() -> (i32, f32) { }
""")
    k, g, h = m.items
    assert isinstance(k, A.KernelDef) and k.name == "k"
    assert k.attrs[0].name == "launch"
    assert k.attrs[0].args[1] == A.Arg(A.Call(A.Name("by_target"), (
        A.Arg(A.IntLit(168), "sm_90a"), A.Arg(A.IntLit(128), "default"))), "maxnreg")
    assert k.params == (
        A.Param("a", A.TypeExpr("Array", (A.Name("f32"), A.IntLit(1)))),
        A.Param("n", A.TypeExpr("i32")),
        A.Param("T", A.TypeExpr("i32"), A.IntLit(1024), True),
    )
    assert g.attrs == (A.Attribute("host", None),)
    assert g.params == (A.Param("x", None), A.Param("y", A.TypeExpr("f32")))
    assert g.ret == A.TypeExpr("f32")
    assert h.attrs == (A.Attribute("host", ()),)
    assert h.ret == A.TupleTypeExpr((A.TypeExpr("i32"), A.TypeExpr("f32")))


def test_types():
    m = parse("fn f(a: Tile[f32, 128, 64], b: Array[f16, 2], c: bf16, d: (i32,), "
              "e: Tile[f8e4m3, N, 2 * N]) { }")
    ps = m.items[0].params
    assert ps[0].type == A.TypeExpr("Tile", (A.Name("f32"), A.IntLit(128), A.IntLit(64)))
    assert ps[2].type == A.TypeExpr("bf16")
    assert ps[3].type == A.TupleTypeExpr((A.TypeExpr("i32"),))
    assert ps[4].type.args[2] == A.BinOp("*", A.IntLit(2), A.Name("N"))


def test_let_var_and_patterns():
    s = body("let x = 1; var y: f32 = 2.0; let (a, b) = t; var (c,) = u;")
    assert s[0] == A.Let(False, ("x",), False, None, A.IntLit(1))
    assert s[1] == A.Let(True, ("y",), False, A.TypeExpr("f32"), A.FloatLit(2.0))
    assert s[2] == A.Let(False, ("a", "b"), True, None, A.Name("t"))
    assert s[3] == A.Let(True, ("c",), True, None, A.Name("u"))


@pytest.mark.parametrize("op", ["+", "-", "*", "/", "%", "**", "&", "|", "^", "<<", ">>", "@"])
def test_augmented_assignment(op):
    (s,) = body(f"x {op}= y;")
    assert s == A.AugAssign(A.Name("x"), op, A.Name("y"))


def test_assignment_targets():
    s = body("x = 1; a.b = 2; a[i, j] = 3;")
    assert [type(x.target) for x in s] == [A.Name, A.Member, A.Index]


def test_control_flow():
    s = body("""
if a { x = 1; } else if b { x = 2; } else { x = 3; }
while i < n { i += 1; break; }
for k in range(0, n, 2) { continue; }
static for j in range(4) { }
{ let scoped = 1; }
return;
""")
    assert isinstance(s[0], A.If) and isinstance(s[0].orelse, A.If)
    assert isinstance(s[0].orelse.orelse, A.Block)
    assert s[1] == A.While(A.Compare("<", A.Name("i"), A.Name("n")), A.Block((
        A.AugAssign(A.Name("i"), "+", A.IntLit(1)), A.Break())))
    assert s[2].var == "k" and not s[2].is_static
    assert s[2].iter == A.Call(A.Name("range"), tuple(A.Arg(v) for v in (
        A.IntLit(0), A.Name("n"), A.IntLit(2))))
    assert s[3].is_static
    assert isinstance(s[4], A.Block)
    assert s[5] == A.Return(None)


def test_return_tuple_and_value():
    s = body("return a, b; return (a,); return x;")
    assert s[0] == A.Return(A.TupleExpr((A.Name("a"), A.Name("b"))))
    assert s[1] == A.Return(A.TupleExpr((A.Name("a"),)))
    assert s[2] == A.Return(A.Name("x"))


def test_calls_keywords_members_index():
    e = parse_expr("load(a, index = (i, 0), shape = (1, N), padding = -inf).astype(f16)")
    assert isinstance(e, A.Call) and isinstance(e.func, A.Member) and e.func.attr == "astype"
    inner = e.func.value
    assert [a.name for a in inner.args] == [None, "index", "shape", "padding"]
    assert parse_expr("A.shape[0]") == A.Index(A.Member(A.Name("A"), "shape"), (A.IntLit(0),))
    assert parse_expr("f()") == A.Call(A.Name("f"), ())
    assert parse_expr("f(x,)") == A.Call(A.Name("f"), (A.Arg(A.Name("x")),))


def test_tuples():
    assert parse_expr("()") == A.TupleExpr(())
    assert parse_expr("(1,)") == A.TupleExpr((A.IntLit(1),))
    assert parse_expr("(1, 2, 3,)") == A.TupleExpr((A.IntLit(1), A.IntLit(2), A.IntLit(3)))
    assert parse_expr("(1)") == A.IntLit(1)


def test_conditional_expression():
    assert parse_expr("a if c else b") == A.IfExpr(A.Name("c"), A.Name("a"), A.Name("b"))


def test_spans_are_positions_in_the_file():
    m = parse("kernel k() {\n    let x = foo(1, 2);\n}\n", "f.tile")
    let = m.items[0].body.stmts[0]
    call = let.value
    assert (call.span.file, call.span.line, call.span.col, call.span.end_col) == ("f.tile", 2, 13, 22)
    assert (let.span.line, let.span.col, let.span.end_line, let.span.end_col) == (2, 5, 2, 23)
    assert m.items[0].name_span.col == 8
    for node in m.walk():
        if hasattr(node, "span") and not isinstance(node, A.Module):
            assert node.span.line >= 1 and node.span.file == "f.tile"


def test_keywords_come_from_the_grammar():
    assert {"kernel", "fn", "let", "var", "const", "if", "else", "for", "in", "while", "break",
            "continue", "return", "import", "from", "as", "and", "or", "not", "true", "false",
            "static", "inf", "nan"} == set(keywords())


@pytest.mark.parametrize("kw", ["let", "fn", "kernel", "while", "true", "static"])
def test_keywords_are_reserved(kw):
    with pytest.raises(TileSyntaxError):
        parse(f"const {kw} = 1;")


def test_empty_module_and_comment_only():
    assert parse("").items == ()
    assert parse("// nothing here\n/* or here */").items == ()
