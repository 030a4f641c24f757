"""Accepted programs with their inferred types (the checker's typing, constants and scopes).

Constant rules follow seed 001_45fa852e188b7288.txt ("Constantness"): loose literals stay loose,
strict constructors make strict constants, strict ⊕ loose → strict, strict ⊕ strict promotes.
"""

import pytest

from sema_helpers import binding_types

K = "kernel k(a: Array[f32, 1], h: Array[f16, 2], n: i32, x: f32) {{\n{}\n}}\n"

CASES = [
    # --- constants (seed 001) ---
    ("loose_int", "let c = 1 + 2 * 3;", {"c": "int literal = 7"}),
    ("loose_float", "let c = 1.5 * 2;", {"c": "float literal = 3.0"}),
    ("loose_unbounded", "let c = 2 ** 100 - 2 ** 100 + 5;", {"c": "int literal = 5"}),
    ("true_division_loose", "let c = 7 / 2;", {"c": "float literal = 3.5"}),
    ("strict_plus_loose", "let c = i16(5) + 2;", {"c": "i16 = i16(7)"}),
    ("strict_plus_strict", "let c = i16(5) + i32(7);", {"c": "i32 = i32(12)"}),
    ("strict_float", "let c = f32(0.5) * 4;", {"c": "f32 = f32(2.0)"}),
    ("strict_bool", "let c = true and not false;", {"c": "bool = true"}),
    ("compare_consts", "let c = 3 < 4;", {"c": "bool = true"}),
    ("annotated_let_materializes", "let c: i8 = -128;", {"c": "i8 = i8(-128)"}),
    ("const_item", "", {}),
    ("cdiv_folds", "let c = cdiv(1000, 128);", {"c": "int literal = 8"}),
    ("shift_consts", "let c = 1 << 10;", {"c": "int literal = 1024"}),
    ("hex_binary", "let c = 0x10 + 0b11;", {"c": "int literal = 19"}),
    ("u8_max", "let c = u8(255);", {"c": "u8 = u8(255)"}),
    # --- run-time scalars ---
    ("bid_is_i32", "let i = bid(0);", {"i": "i32"}),
    ("scalar_param", "let y = x * 2;", {"y": "f32"}),
    ("int_param_float_const", "let y = n * 0.5;", {"y": "f32"}),
    ("int_param_int_const", "let y = n + 1;", {"y": "i32"}),
    ("array_shape", "let s = a.shape[0];", {"s": "i32"}),
    ("array_stride", "let s = h.stride[1];", {"s": "i32"}),
    ("num_blocks", "let g = num_blocks(1);", {"g": "i32"}),
    ("compare_runtime", "let b = n < 10;", {"b": "bool"}),
    ("conditional_expr", "let y = 1.0 if n > 0 else x;", {"y": "f32"}),
    ("astype_scalar", "let y = astype(n, f32);", {"y": "f32"}),
    ("method_astype", "let y = x.astype(f16);", {"y": "f16"}),
    # --- tiles ---
    ("load_1d", "let t = load(a, index = (0,), shape = (128,), padding = 0.0);",
     {"t": "Tile[f32, 128]"}),
    ("load_2d", "let t = load(h, index = (0, 1), shape = (16, 32), padding = 0);",
     {"t": "Tile[f16, 16, 32]"}),
    ("tile_plus_loose", "let t = zeros((64,), f16) + 1;", {"t": "Tile[f16, 64]"}),
    ("tile_times_scalar", "let t = zeros((64,), f32) * x;", {"t": "Tile[f32, 64]"}),
    ("broadcast", "let t = zeros((4, 1), f32) + zeros((8,), f32);", {"t": "Tile[f32, 4, 8]"}),
    ("promotion_f16_f32", "let t = zeros((8,), f16) + zeros((8,), f32);", {"t": "Tile[f32, 8]"}),
    ("promotion_int_float", "let t = arange(8) + zeros((8,), f16);", {"t": "Tile[f16, 8]"}),
    ("promotion_i8_i32", "let t = zeros((8,), i8) + zeros((8,), i32);", {"t": "Tile[i32, 8]"}),
    ("compare_tile", "let m = arange(16) < 5;", {"m": "Tile[bool, 16]"}),
    ("where", "let t = where(arange(16) < 5, zeros((16,), f32), 1.0);", {"t": "Tile[f32, 16]"}),
    ("reduce_all", "let s = sum(zeros((8, 8), f32));", {"s": "f32"}),
    ("reduce_axis", "let s = max(zeros((8, 4), f32), axis = 1);", {"s": "Tile[f32, 8]"}),
    ("reduce_keepdims", "let s = sum(zeros((8, 4), f32), axis = 1, keepdims = true);",
     {"s": "Tile[f32, 8, 1]"}),
    ("argmax", "let s = argmax(zeros((8, 4), f32), axis = 0);", {"s": "Tile[i32, 4]"}),
    ("cumsum", "let s = cumsum(zeros((8, 4), f32), axis = 1);", {"s": "Tile[f32, 8, 4]"}),
    ("reshape", "let r = reshape(zeros((8, 4), f32), (32,));", {"r": "Tile[f32, 32]"}),
    ("permute", "let r = permute(zeros((2, 4, 8), f32), (2, 0, 1));", {"r": "Tile[f32, 8, 2, 4]"}),
    ("transpose", "let r = transpose(zeros((2, 4), f32));", {"r": "Tile[f32, 4, 2]"}),
    ("expand_dims", "let r = expand_dims(zeros((4,), f32), 0);", {"r": "Tile[f32, 1, 4]"}),
    ("broadcast_to", "let r = broadcast_to(zeros((1, 4), f32), (8, 4));", {"r": "Tile[f32, 8, 4]"}),
    ("tile_shape_member", "let s = zeros((8, 4), f32).shape;", {"s": "(int literal, int literal) = (8, 4)"}),
    ("math_exp", "let e = exp(zeros((8,), f32));", {"e": "Tile[f32, 8]"}),
    ("math_on_f16", "let e = sqrt(zeros((8,), f16));", {"e": "Tile[f16, 8]"}),
    ("mma", "let c = mma(zeros((16, 16), f16), zeros((16, 8), f16), zeros((16, 8), f32));",
     {"c": "Tile[f32, 16, 8]"}),
    ("matmul_op", "let c = zeros((16, 16), f32) @ zeros((16, 8), f32);", {"c": "Tile[f32, 16, 8]"}),
    ("full", "let f = full((4, 4), 2.5, f32);", {"f": "Tile[f32, 4, 4]"}),
    ("arange_dtype", "let r = arange(32, dtype = i64);", {"r": "Tile[i64, 32]"}),
    ("annotated_tile", "let t: Tile[f32, 8] = zeros((8,), f32);", {"t": "Tile[f32, 8]"}),
    # --- var, loops, control flow ---
    ("var_loose_int", "var i = 0;\n    i += 1;", {"i": "i32"}),
    ("var_loose_float", "var s = 0.0;\n    s = s + x;", {"s": "f32"}),
    ("loop_carried_acc",
     "var acc = zeros((16,), f32);\n    for k in range(n) { acc = acc + 1.0; }",
     {"acc": "Tile[f32, 16]", "k": "i32"}),
    ("while_loop", "var i = 0;\n    while i < n { i += 2; if i > 100 { break; } }", {"i": "i32"}),
    ("for_step", "var t = 0;\n    for j in range(0, n, 4) { t += j; }", {"t": "i32", "j": "i32"}),
    ("static_for",
     "var acc = 0.0;\n    static for j in range(4) { let w = zeros((1 << j,), f32); acc += sum(w); }",
     {"acc": "f32"}),
    ("shadowing", "let v = 1;\n    let v = zeros((4,), f32);", {"v": "Tile[f32, 4]"}),
    ("block_scope", "{ let inner = 3; let _use = inner; }\n    let inner = 1.5;",
     {"inner": "float literal = 1.5"}),
    ("tuple_pattern", "let (p, q) = (1, 2.0);", {"p": "int literal = 1", "q": "float literal = 2.0"}),
    ("const_if_taken", "let z = 1 if 2 > 1 else 2.5;", {"z": "int literal = 1"}),
]


@pytest.mark.parametrize("name,body,expected", CASES, ids=[c[0] for c in CASES])
def test_accepted(name, body, expected):
    if name == "const_item":
        got = binding_types("const W: i32 = 64;\nconst H = W * 2;\n"
                            "kernel k() { let c = W + H; }\n")
        assert got["W"] == "i32 = i32(64)" and got["H"] == "i32 = i32(128)"
        assert got["c"] == "i32 = i32(192)"
        return
    got = binding_types(K.format("    " + body + "\n    let _all = (a, h, n, x);"))
    for name_, t in expected.items():
        assert got[name_] == t, (name_, got)


def test_enough_cases():
    assert len(CASES) >= 60
