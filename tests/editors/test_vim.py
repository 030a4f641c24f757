"""The Vim runtime files (editors/vim), run in a headless `vim -Es`: filetype detection,
syntax groups at chosen positions, the ftplugin options and the indent expression."""

from __future__ import annotations

import json
import pathlib
import subprocess

import pytest

from editor_helpers import (EDITORS, SAMPLE, example, load_generator, locate, tile_files,
                            vim_binary)
from tilelang import highlight as hl

VIM_RTP = EDITORS / "vim"


def run_vim(tmp_path: pathlib.Path, body: str) -> object:
    """Run a Vim script with only editors/vim on the runtime path; the script stores its
    result in `g:result`, which comes back decoded from JSON."""
    out = tmp_path / "vim-result.json"
    script = tmp_path / "test.vim"
    script.write_text(
        "set nocompatible\n"
        f"set runtimepath^={VIM_RTP}\n"
        "filetype plugin indent on\n"
        "syntax on\n"
        "let g:result = v:null\n"
        "try\n"
        f"{body}\n"
        "catch\n"
        "  let g:result = {'error': v:exception . ' at ' . v:throwpoint}\n"
        "endtry\n"
        f"call writefile([json_encode(g:result)], '{out}')\n"
        "qa!\n",
        encoding="utf-8",
    )
    proc = subprocess.run([vim_binary(), "-Es", "-u", "NONE", "-i", "NONE", "-N", "-S", str(script)],
                          capture_output=True, text=True, timeout=60)
    assert out.exists(), f"vim wrote no result (rc={proc.returncode}): {proc.stdout}{proc.stderr}"
    result = json.loads(out.read_text())
    assert not (isinstance(result, dict) and "error" in result), result
    return result


def syntax_groups(tmp_path, path: pathlib.Path, positions: list[tuple[int, int]]) -> list[str]:
    pos = json.dumps([list(p) for p in positions])
    return run_vim(tmp_path, f"""
  edit {path}
  let g:result = {{'ft': &filetype, 'syn': b:current_syntax, 'groups': []}}
  for [l, c] in {pos}
    call add(g:result.groups, synIDattr(synID(l, c, 1), 'name'))
  endfor
""")


# (file, line, text on that line, occurrence, syntax group at its first character)
POSITIONS = [
    ("vadd.tile", 1, "//", 1, "tileComment"),
    ("vadd.tile", 1, "element", 1, "tileComment"),
    ("vadd.tile", 7, "@launch", 1, "tileAttribute"),
    ("vadd.tile", 7, "launch", 1, "tileAttribute"),
    ("vadd.tile", 7, "maxntid", 1, ""),
    ("vadd.tile", 7, "=", 1, "tileOperator"),
    ("vadd.tile", 7, "128", 1, "tileNumber"),
    ("vadd.tile", 8, "kernel", 1, "tileDeclaration"),
    ("vadd.tile", 8, "vadd", 1, "tileFunctionName"),
    ("vadd.tile", 8, "Array", 1, "tileTypeConstructor"),
    ("vadd.tile", 8, "f32", 1, "tileType"),
    ("vadd.tile", 8, "const", 1, "tileStorage"),
    ("vadd.tile", 8, "1024", 1, "tileNumber"),
    ("vadd.tile", 9, "let", 1, "tileStorage"),
    ("vadd.tile", 9, "bid", 1, "tileBuiltin"),
    ("vadd.tile", 10, "load", 1, "tileBuiltin"),
    ("vadd.tile", 10, "0.0", 1, "tileFloat"),
    ("vadd.tile", 10, ".0", 1, "tileFloat"),
    ("vadd.tile", 12, "store", 1, "tileBuiltin"),
    ("vadd.tile", 16, "@host", 1, "tileAttribute"),
    ("vadd.tile", 17, "fn", 1, "tileDeclaration"),
    ("vadd.tile", 17, "vadd_grid", 1, "tileFunctionName"),
    ("vadd.tile", 17, "->", 1, "tileOperator"),
    ("vadd.tile", 18, "return", 1, "tileJump"),
    ("vadd.tile", 18, "cdiv", 1, "tileBuiltin"),
    ("softmax.tile", 9, "inf", 1, "tileFloatWord"),
    ("softmax.tile", 10, "exp", 1, "tileBuiltin"),
    ("softmax.tile", 10, "max", 1, "tileBuiltin"),
    ("softmax.tile", 10, "true", 1, "tileBoolean"),
    ("matmul.tile", 26, "var", 1, "tileStorage"),
    ("matmul.tile", 27, "for", 1, "tileRepeat"),
    ("matmul.tile", 27, "in", 1, "tileRepeat"),
    ("matmul.tile", 27, "range", 1, ""),  # no registry built-in: the for statement owns it
    ("matmul.tile", 16, "matmul", 1, "tileFunctionName"),  # a declared name beats a built-in
    ("matmul.tile", 30, "mma", 1, "tileBuiltin"),
    ("layernorm.tile", 19, "arange", 1, "tileBuiltin"),
    ("layernorm.tile", 19, "i32", 1, "tileType"),
    ("layernorm.tile", 19, "<", 1, "tileOperator"),
]

SAMPLE_POSITIONS = [
    (2, "/*", 1, "tileComment"),
    (3, "spanning", 1, "tileComment"),
    (4, "import", 1, "tileInclude"),
    (5, "as", 1, "tileInclude"),
    (8, "1_000_000", 1, "tileNumber"),
    (8, "000", 2, "tileNumber"),
    (9, "0x2A", 1, "tileNumber"),
    (9, "A", 2, "tileNumber"),
    (10, "0b101", 1, "tileNumber"),
    (20, "by_target", 1, "tileAttributeHelper"),
    (24, "Tile", 1, "tileTypeConstructor"),
    (26, "static", 1, "tileModifier"),
    (27, "+=", 1, "tileOperator"),
    (31, "while", 1, "tileRepeat"),
    (31, "not", 1, "tileOperatorWord"),
    (31, "false", 1, "tileBoolean"),
    (32, "if", 1, "tileConditional"),
    (32, "break", 1, "tileJump"),
    (32, "else", 1, "tileConditional"),
    (34, "@", 1, "tileOperator"),
    (36, "2.5e-3", 1, "tileFloat"),
    (36, "-3", 1, "tileFloat"),
    (36, "1e9", 1, "tileFloat"),
    (36, "e9", 1, "tileFloat"),
    (36, "1_000.5", 1, "tileFloat"),
    (36, ".5", 1, "tileFloat"),
    (36, "0x_FF", 1, "tileNumber"),
    (36, "nan", 1, "tileFloatWord"),
    (36, "f16", 1, "tileType"),
    (36, "bf16", 1, "tileType"),
    (37, "bad", 1, "tileString"),
    (37, '\\"', 1, "tileEscape"),
    (37, "\\n", 1, "tileEscape"),
    (38, "\\t", 1, "tileEscape"),
    (38, "{}", 1, "tileString"),
]


def test_example_highlight_groups(tmp_path):
    vim_binary()
    by_file: dict[str, list] = {}
    for name, line, needle, nth, group in POSITIONS:
        by_file.setdefault(name, []).append((line, needle, nth, group))
    for name, checks in by_file.items():
        path = example(name)
        got = syntax_groups(tmp_path, path, [locate(path, ln, nd, k) for ln, nd, k, _ in checks])
        assert got["ft"] == "tile" and got["syn"] == "tile"
        expected = [g for *_, g in checks]
        assert got["groups"] == expected, [
            (c[:3], g, e) for c, g, e in zip(checks, got["groups"], expected) if g != e]


def test_sample_highlight_groups(tmp_path):
    vim_binary()
    got = syntax_groups(tmp_path, SAMPLE, [locate(SAMPLE, ln, nd, k)
                                           for ln, nd, k, _ in SAMPLE_POSITIONS])
    expected = [g for *_, g in SAMPLE_POSITIONS]
    assert got["groups"] == expected, [
        (c[:3], g, e) for c, g, e in zip(SAMPLE_POSITIONS, got["groups"], expected) if g != e]


def test_every_word(tmp_path):
    """Each keyword, dtype and built-in, alone on a line, gets its category's group."""
    gen = load_generator()
    group_of_cat = {cat: grp for grp, cat in gen.VIM_GROUPS.items()}
    words = {}
    for cat, kws in hl.keyword_groups().items():
        for w in kws:
            words[w] = group_of_cat[cat]
    for w in hl.dtypes():
        words[w] = "tileType"
    for w in hl.builtins():
        words[w] = "tileBuiltin"
    order = sorted(words)
    src = tmp_path / "words.tile"
    src.write_text("\n".join(order) + "\n", encoding="utf-8")
    got = syntax_groups(tmp_path, src, [(i + 1, 1) for i in range(len(order))])
    assert dict(zip(order, got["groups"])) == words


@pytest.mark.parametrize("path", tile_files(), ids=lambda p: p.name)
def test_reindent_reproduces_file(tmp_path, path):
    """`gg=G` on a file whose lines were all flushed left gives back the file's indentation."""
    vim_binary()
    flat = tmp_path / path.name
    flat.write_text("\n".join(ln.lstrip() for ln in path.read_text(encoding="utf-8").split("\n")),
                    encoding="utf-8")
    lines = run_vim(tmp_path, f"""
  edit {flat}
  normal! gg=G
  let g:result = getline(1, '$')
""")
    assert lines == path.read_text(encoding="utf-8").split("\n")[: len(lines)]


def test_ftplugin_options(tmp_path):
    got = run_vim(tmp_path, f"""
  edit {SAMPLE}
  let g:result = {{'cms': &commentstring, 'sw': &shiftwidth, 'et': &expandtab,
        \\ 'ie': &indentexpr, 'com': &comments, 'ft': &filetype}}
""")
    assert got == {"cms": "// %s", "sw": 4, "et": 1, "ie": "GetTileIndent(v:lnum)",
                   "com": "s1:/*,mb:*,ex:*/,://", "ft": "tile"}


def test_unterminated_string_stops_at_end_of_line(tmp_path):
    src = tmp_path / "s.tile"
    src.write_text('print("abc\nlet x = 1;\n', encoding="utf-8")
    got = syntax_groups(tmp_path, src, [(1, 8), (2, 1)])
    assert got["groups"] == ["tileString", "tileStorage"]


def test_comment_markers_inside_strings(tmp_path):
    src = tmp_path / "c.tile"
    src.write_text('let s = "a // b /* c"; // real\n/* x "y" */ let t = 1;\n', encoding="utf-8")
    got = syntax_groups(tmp_path, src, [(1, 12), (1, 17), (1, 24), (2, 6), (2, 13)])
    assert got["groups"] == ["tileString", "tileString", "tileComment", "tileComment",
                             "tileStorage"]
