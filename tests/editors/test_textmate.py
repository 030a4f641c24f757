"""The VS Code TextMate grammar, run in the real engine (vscode-textmate + vscode-oniguruma from
npm, pinned by tests/editors/textmate/package-lock.json); the .vsix: test_vscode_client.py."""

from __future__ import annotations

import json
import pathlib

import pytest

from editor_helpers import (EDITORS, SAMPLE, example, load_generator, locate, run_textmate,
                            tile_files)
from tilelang import highlight as hl

VSCODE = EDITORS / "vscode"


def scope_at(tm_scopes, path: pathlib.Path, line: int, col: int) -> list[str]:
    """The scope stack of the character at (line, col), 1-based."""
    for tok in tm_scopes[path][line - 1]:
        if tok["start"] <= col - 1 < tok["end"]:
            return tok["scopes"]
    raise AssertionError(f"no token at {path.name}:{line}:{col}")


# (file, line, text on that line, occurrence, innermost scope expected at its first character)
POSITIONS = [
    ("vadd.tile", 1, "//", 1, "punctuation.definition.comment.tile"),
    ("vadd.tile", 1, "vadd.tile", 1, "comment.line.double-slash.tile"),
    ("vadd.tile", 7, "@", 1, "punctuation.definition.decorator.tile"),
    ("vadd.tile", 7, "launch", 1, "entity.name.function.decorator.tile"),
    ("vadd.tile", 7, "128", 1, "constant.numeric.integer.decimal.tile"),
    ("vadd.tile", 8, "kernel", 1, "storage.type.function.tile"),
    ("vadd.tile", 8, "vadd", 1, "entity.name.function.tile"),
    ("vadd.tile", 8, "Array", 1, "support.class.tile"),
    ("vadd.tile", 8, "f32", 1, "support.type.primitive.tile"),
    ("vadd.tile", 8, "const", 1, "storage.type.tile"),
    ("vadd.tile", 8, "=", 1, "keyword.operator.assignment.tile"),
    ("vadd.tile", 9, "let", 1, "storage.type.tile"),
    ("vadd.tile", 9, "bid", 1, "support.function.builtin.tile"),
    ("vadd.tile", 10, "load", 1, "support.function.builtin.tile"),
    ("vadd.tile", 10, "0.0", 1, "constant.numeric.float.tile"),
    ("vadd.tile", 12, "store", 1, "support.function.builtin.tile"),
    ("vadd.tile", 12, "+", 1, "keyword.operator.arithmetic.tile"),
    ("vadd.tile", 16, "@", 1, "punctuation.definition.decorator.tile"),
    ("vadd.tile", 16, "host", 1, "entity.name.function.decorator.tile"),
    ("vadd.tile", 17, "fn", 1, "storage.type.function.tile"),
    ("vadd.tile", 17, "vadd_grid", 1, "entity.name.function.tile"),
    ("vadd.tile", 17, "->", 1, "keyword.operator.arrow.tile"),
    ("vadd.tile", 18, "return", 1, "keyword.control.flow.tile"),
    ("vadd.tile", 18, "cdiv", 1, "support.function.builtin.tile"),
    ("softmax.tile", 9, "-", 1, "keyword.operator.arithmetic.tile"),
    ("softmax.tile", 9, "inf", 1, "constant.numeric.float.tile"),
    ("softmax.tile", 10, "exp", 1, "support.function.builtin.tile"),
    ("softmax.tile", 10, "max", 1, "support.function.builtin.tile"),
    ("softmax.tile", 10, "true", 1, "constant.language.boolean.tile"),
    ("softmax.tile", 11, "sum", 1, "support.function.builtin.tile"),
    ("softmax.tile", 11, "/", 1, "keyword.operator.arithmetic.tile"),
    ("matmul.tile", 12, "reqntid", 1, "variable.other.tile"),
    ("matmul.tile", 20, "BM", 1, "variable.other.tile"),
    ("matmul.tile", 26, "var", 1, "storage.type.tile"),
    ("matmul.tile", 26, "zeros", 1, "support.function.builtin.tile"),
    ("matmul.tile", 27, "for", 1, "keyword.control.loop.tile"),
    ("matmul.tile", 27, "in", 1, "keyword.control.loop.tile"),
    # `range` is no registry built-in: the for statement owns it
    ("matmul.tile", 27, "range", 1, "entity.name.function.call.tile"),
    # a kernel named like a built-in is still the declared name
    ("matmul.tile", 16, "matmul", 1, "entity.name.function.tile"),
    ("matmul.tile", 27, "num_tiles", 1, "support.function.builtin.tile"),
    ("matmul.tile", 27, "{", 1, "punctuation.section.braces.begin.tile"),
    ("matmul.tile", 30, "mma", 1, "support.function.builtin.tile"),
    ("layernorm.tile", 16, "astype", 1, "support.function.builtin.tile"),
    ("layernorm.tile", 16, ".", 1, "punctuation.accessor.tile"),
    ("layernorm.tile", 16, "shape", 1, "variable.other.member.tile"),
    ("layernorm.tile", 19, "arange", 1, "support.function.builtin.tile"),
    ("layernorm.tile", 19, "i32", 1, "support.type.primitive.tile"),
    ("layernorm.tile", 19, "<", 1, "keyword.operator.comparison.tile"),
    ("layernorm.tile", 20, "where", 1, "support.function.builtin.tile"),
    ("layernorm.tile", 24, "rsqrt", 1, "support.function.builtin.tile"),
    ("layernorm.tile", 24, "*", 1, "keyword.operator.arithmetic.tile"),
]

# Positions in the fixture that covers every construct.
SAMPLE_POSITIONS = [
    (2, "/*", 1, "punctuation.definition.comment.begin.tile"),
    (3, "spanning", 1, "comment.block.tile"),
    (3, "*/", 1, "punctuation.definition.comment.end.tile"),
    (4, "import", 1, "keyword.control.import.tile"),
    (5, "from", 1, "keyword.control.import.tile"),
    (5, "as", 1, "keyword.control.import.tile"),
    (8, "1_000_000", 1, "constant.numeric.integer.decimal.tile"),
    (9, "0x2A", 1, "constant.numeric.integer.hexadecimal.tile"),
    (10, "0b101", 1, "constant.numeric.integer.binary.tile"),
    (13, "floordiv", 1, "support.function.builtin.tile"),
    (17, "tanh", 1, "entity.name.function.member.tile"),
    (20, "by_target", 1, "support.function.attribute.tile"),
    (24, "Tile", 1, "support.class.tile"),
    (26, "static", 1, "storage.modifier.tile"),
    (27, "+=", 1, "keyword.operator.assignment.compound.tile"),
    (27, "**", 1, "keyword.operator.arithmetic.tile"),
    (27, "%", 1, "keyword.operator.arithmetic.tile"),
    (28, "**=", 1, "keyword.operator.assignment.compound.tile"),
    (28, "<<=", 1, "keyword.operator.assignment.compound.tile"),
    (28, "@=", 1, "keyword.operator.assignment.compound.tile"),
    (31, "while", 1, "keyword.control.loop.tile"),
    (31, "not", 1, "keyword.operator.logical.tile"),
    (31, ">=", 1, "keyword.operator.comparison.tile"),
    (31, "and", 1, "keyword.operator.logical.tile"),
    (31, "false", 1, "constant.language.boolean.tile"),
    (32, "if", 1, "keyword.control.conditional.tile"),
    (32, "!=", 1, "keyword.operator.comparison.tile"),
    (32, "break", 1, "keyword.control.flow.tile"),
    (32, "else", 1, "keyword.control.conditional.tile"),
    (32, "continue", 1, "keyword.control.flow.tile"),
    (32, "<<", 1, "keyword.operator.bitwise.shift.tile"),
    (32, ">>", 1, "keyword.operator.bitwise.shift.tile"),
    (34, "@", 1, "keyword.operator.matrix.tile"),
    (35, "&", 1, "keyword.operator.bitwise.tile"),
    (35, "~", 1, "keyword.operator.bitwise.tile"),
    (36, "2.5e-3", 1, "constant.numeric.float.tile"),
    (36, "1e9", 1, "constant.numeric.float.tile"),
    (36, "1_000.5", 1, "constant.numeric.float.tile"),
    (36, "0x_FF", 1, "constant.numeric.integer.hexadecimal.tile"),
    (36, "nan", 1, "constant.numeric.float.tile"),
    (36, "f16", 1, "support.type.primitive.tile"),
    (36, "astype", 1, "entity.name.function.member.tile"),
    (37, '"', 1, "punctuation.definition.string.begin.tile"),
    (37, "bad", 1, "string.quoted.double.tile"),
    (37, '\\"', 1, "constant.character.escape.tile"),
    (37, "\\n", 1, "constant.character.escape.tile"),
    (37, '"', 4, "punctuation.definition.string.end.tile"),
    (38, "\\t", 1, "constant.character.escape.tile"),
]


@pytest.mark.parametrize("name,line,needle,nth,scope", POSITIONS,
                         ids=[f"{p[0]}:{p[1]}:{p[2]}" for p in POSITIONS])
def test_example_scopes(tm_scopes, name, line, needle, nth, scope):
    path = example(name)
    ln, col = locate(path, line, needle, nth)
    stack = scope_at(tm_scopes, path, ln, col)
    assert stack[0] == "source.tile"
    assert stack[-1] == scope, stack


@pytest.mark.parametrize("line,needle,nth,scope", SAMPLE_POSITIONS,
                         ids=[f"sample:{p[0]}:{p[1]}" for p in SAMPLE_POSITIONS])
def test_sample_scopes(tm_scopes, line, needle, nth, scope):
    ln, col = locate(SAMPLE, line, needle, nth)
    stack = scope_at(tm_scopes, SAMPLE, ln, col)
    assert stack[-1] == scope, stack
    # the token covers the whole needle
    tok = next(t for t in tm_scopes[SAMPLE][ln - 1] if t["start"] <= col - 1 < t["end"])
    assert needle in tok["text"] or tok["text"] in needle


@pytest.mark.parametrize("path", tile_files(), ids=lambda p: p.name)
def test_no_invalid_scopes_and_everything_classified(tm_scopes, path):
    """No shipped file has an invalid.* scope, and every non-blank character gets a scope
    beyond source.tile."""
    lines = tm_scopes[path]
    assert len(lines) == len(path.read_text(encoding="utf-8").split("\n"))
    for n, toks in enumerate(lines, 1):
        for t in toks:
            assert not any(s.startswith("invalid") for s in t["scopes"]), (n, t)
            if t["text"].strip():
                assert len(t["scopes"]) > 1, (path.name, n, t)


def test_every_word_in_the_engine(textmate_engine, tmp_path):
    """Each keyword, dtype and built-in, alone on a line, gets its category's scope."""
    words = {}
    for group, kws in hl.keyword_groups().items():
        for w in kws:
            words[w] = group
    for w in hl.dtypes():
        words[w] = "dtypes"
    for w in hl.builtins():
        words[w] = "builtins"
    src = tmp_path / "words.tile"
    order = sorted(words)
    src.write_text("\n".join(order) + "\n", encoding="utf-8")
    lines = run_textmate(textmate_engine, [src])[str(src)]
    grammar = json.loads((VSCODE / "syntaxes" / "tile.tmLanguage.json").read_text())
    expected_scope = {cat: grammar["repository"][key]["name"]
                      for key, (cat, _) in load_generator().TM_WORD_RULES.items()}
    for word, toks in zip(order, lines):
        assert [t["text"] for t in toks] == [word]
        assert toks[0]["scopes"][-1] == expected_scope[words[word]], (word, toks[0]["scopes"])


def test_unterminated_string_stops_at_end_of_line(textmate_engine, tmp_path):
    src = tmp_path / "s.tile"
    src.write_text('print("abc\nlet x = 1;\n', encoding="utf-8")
    lines = run_textmate(textmate_engine, [src])[str(src)]
    assert lines[1][0]["scopes"][-1] == "storage.type.tile"


def test_comment_markers_inside_strings(textmate_engine, tmp_path):
    src = tmp_path / "c.tile"
    src.write_text('let s = "a // b /* c"; // real\n/* x "y" */ let t = 1;\n', encoding="utf-8")
    lines = run_textmate(textmate_engine, [src])[str(src)]

    def at(line, col):
        return next(t["scopes"][-1] for t in lines[line] if t["start"] <= col < t["end"])

    assert at(0, 11) == "string.quoted.double.tile"
    assert at(0, 16) == "string.quoted.double.tile"
    assert at(0, 26) == "comment.line.double-slash.tile"
    assert at(1, 5) == "comment.block.tile"
    assert at(1, 12) == "storage.type.tile"


def test_package_json_wires_grammar_snippets_and_configuration():
    pkg = json.loads((VSCODE / "package.json").read_text())
    (lang,) = pkg["contributes"]["languages"]
    assert lang["id"] == "tile" and lang["extensions"] == [".tile"]
    (gram,) = pkg["contributes"]["grammars"]
    assert gram["scopeName"] == "source.tile"
    assert json.loads((VSCODE / gram["path"]).read_text())["scopeName"] == "source.tile"
    (snip,) = pkg["contributes"]["snippets"]
    snippets = json.loads((VSCODE / snip["path"]).read_text())
    prefixes = {s["prefix"] for s in snippets.values()}
    assert {"kernel", "fn", "for", "@launch"} <= prefixes
    conf = json.loads((VSCODE / lang["configuration"]).read_text())
    assert conf["comments"] == {"lineComment": "//", "blockComment": ["/*", "*/"]}
    assert ["{", "}"] in conf["brackets"]
    assert {"open": "\"", "close": "\"", "notIn": ["string", "comment"]} in conf["autoClosingPairs"]
    assert ["(", ")"] in conf["surroundingPairs"]
    assert "folding" in conf and "indentationRules" in conf
    assert "@vscode/vsce" in pkg["devDependencies"]
    assert (VSCODE / "package-lock.json").exists()


def test_indentation_rules_match_examples():
    """The language configuration's indentation rules agree with the shipped files: a line
    that leaves a bracket open increases the indent, a line with balanced brackets does not,
    and a line starting with a closing bracket decreases it."""
    import re

    conf = json.loads((VSCODE / "language-configuration.json").read_text())
    inc = re.compile(conf["indentationRules"]["increaseIndentPattern"])
    dec = re.compile(conf["indentationRules"]["decreaseIndentPattern"])
    checked = 0
    for path in tile_files():
        for line in path.read_text(encoding="utf-8").splitlines():
            code = line.split("//")[0].rstrip()
            if not code.strip() or '"' in code:
                continue
            stack = []  # brackets opened on this line and still open at its end
            for ch in code:
                if ch in "([{":
                    stack.append(ch)
                elif ch in ")]}" and stack:
                    stack.pop()
            opens = bool(stack)
            assert bool(inc.match(line)) == opens, line
            assert bool(dec.match(line)) == code.lstrip().startswith(("}", ")", "]")), line
            checked += 1
    assert checked > 50
