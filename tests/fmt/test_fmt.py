"""`tilec fmt`: one canonical layout that never changes the program.

Every .tile file of the repository and the mutated files of the front end's fuzz corpus and of
the pre-stop hook are formatted: the result parses to the same AST (spans aside) and formatting
it again changes nothing; inputs that do not parse get the parser's diagnostics. Golden files
fix the wrapping, comment and spacing rules; the layout must not depend on the input's line
breaks."""

from __future__ import annotations

import glob
import importlib.util
import os
import pathlib
import random
import re

import pytest

from tilelang.diagnostics import TileError
from tilelang.fmt import WIDTH, FormatError, format_source
from tilelang.fmt.tokens import KEYWORDS, tokenize
from tilelang.frontend.parser import keywords, parse

ROOT = pathlib.Path(__file__).resolve().parents[2]
GOLDEN = pathlib.Path(__file__).resolve().parent / "golden"
REPO_TILE = sorted(p for p in ROOT.rglob("*.tile")
                   if "node_modules" not in p.parts and not any(s.startswith(".") for s in
                                                                 p.relative_to(ROOT).parts))


def _parses(p: pathlib.Path) -> bool:
    try:
        parse(p.read_text("utf-8"))
    except TileError:
        return False
    return True


PARSED = [p for p in REPO_TILE if _parses(p)]


def _fuzz_module():
    spec = importlib.util.spec_from_file_location(
        "frontend_fuzz", ROOT / "tests" / "frontend" / "test_fuzz.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def check_formats(src: str, name: str = "case.tile") -> str | None:
    """The formatted text of `src` after checking it keeps the program and is idempotent;
    None when `src` does not parse (and the formatter said so with diagnostics)."""
    try:
        out = format_source(src, name)
    except TileError as e:
        assert e.diagnostics, name
        return None
    except FormatError as e:
        assert "nests too deeply" in str(e), f"{name}: {e}"
        return None
    assert parse(out) == parse(src), name
    assert format_source(out, name) == out, f"{name}: not idempotent"
    return out


def test_keywords_are_the_grammars():
    assert KEYWORDS == keywords()


@pytest.mark.parametrize("path", REPO_TILE, ids=lambda p: str(p.relative_to(ROOT)))
def test_repository_files(path):
    """Files that parse keep their program; the syntax-error goldens get diagnostics."""
    out = check_formats(path.read_text("utf-8"), str(path))
    if path.relative_to(ROOT).parts[0] in ("examples", "stdlib"):
        assert out is not None, f"{path} does not parse"


def test_front_end_fuzz_corpus():
    fuzz = _fuzz_module()
    formatted = 0
    for i in range(300):  # the front end's default fuzz run
        formatted += check_formats(fuzz.make(1, i), f"fuzz-1-{i}") is not None
    assert formatted > 20  # enough of the mutants parse to test something


def test_pre_stop_hook_corpus():
    """The mutations the pre-stop hook runs `tilec check` on (seed 7, 24 files), and more."""
    files = sorted(glob.glob(str(ROOT / "examples" / "*.tile")))
    for seed in (7, 8, 9):
        random.seed(seed)
        for n in range(24):
            src = open(random.choice(files), encoding="utf-8").read()
            i, j = sorted(random.sample(range(len(src) + 1), 2))
            kind = n % 3
            if kind == 0:
                src = src[:i] + src[j:]
            elif kind == 1:
                src = src[:i] + src[i:j][::-1] + src[j:]
            else:
                src = src[:i] + random.choice(["(", "}", "@", "let", "\x00", "9" * 40, "Tile[",
                                               ";;"]) + src[i:]
            check_formats(src, f"hook-{seed}-{n}")


_WS = re.compile(r"[ \t]*(\n[ \t]*)?")


def _respace(rng: random.Random, src: str) -> str:
    """`src` with the spaces and single line breaks between tokens changed at random (never
    next to a comment, never a blank line added or removed)."""
    out, pos = [], 0
    toks = [(m.start(), m.end()) for m in re.finditer(
        r'//[^\n]*|/\*(?:.|\n)*?\*/|"(?:[^"\\\n]|\\[^\n])*"|'
        r'[0-9][0-9_]*(?:\.[0-9_]+)?[eE][+-]?[0-9_]+|[A-Za-z0-9_.]+|\*\*=?|<<=?|>>=?|'
        r'->|[=!<>+\-*/%&|^@]=|\S', src)]
    for k, (a, b) in enumerate(toks):
        gap = src[pos:a]
        near_comment = src[a:a + 2] in ("//", "/*") or (k and src[toks[k - 1][0]:][:2] in
                                                        ("//", "/*"))
        if k and not near_comment and gap.count("\n") <= 1:
            gap = rng.choice([" ", "  ", "\n", " \n    ", "\t"]) if gap or rng.random() < 0.3 \
                else gap
            if "\n" in src[pos:a] and "\n" not in gap:
                gap += "\n"
        out.append(gap + src[a:b])
        pos = b
    return "".join(out) + src[pos:]


@pytest.mark.parametrize("path", PARSED, ids=lambda p: p.name)
def test_layout_ignores_line_breaks(path):
    src = path.read_text("utf-8")
    want = format_source(src)
    rng = random.Random(path.name)
    for _ in range(3):
        mangled = _respace(rng, src)
        assert parse(mangled) == parse(src)
        assert format_source(mangled) == want


@pytest.mark.parametrize("case", ["wrap", "comments", "spacing"])
def test_golden(case):
    src = (GOLDEN / f"{case}.in").read_text("utf-8")
    want = (GOLDEN / f"{case}.out").read_text("utf-8")
    assert format_source(src) == want
    assert format_source(want) == want


def test_width_is_one_hundred_columns():
    assert WIDTH == 100
    out = (GOLDEN / "wrap.out").read_text("utf-8")
    lines = out.splitlines()
    fits = next(ln for ln in lines if "exactly_one_hundred" in ln)
    assert len(fits) == 100
    assert max(len(ln) for ln in lines if "aaaa" not in ln) <= WIDTH
    narrow = format_source("fn f() { return g(a, b); }\n", width=16)
    assert narrow == "fn f() {\n    return g(\n        a,\n        b,\n    );\n}\n"


def test_trailing_commas_that_matter_stay():
    assert format_source("const t = (1,);") == "const t = (1,);\n"
    assert format_source("const t = (1, 2,);") == "const t = (1, 2);\n"
    assert format_source("fn f() -> (i32,) { let (a,) = g(); }") == \
        "fn f() -> (i32,) {\n    let (a,) = g();\n}\n"


def test_literals_keep_their_spelling():
    src = 'const A = 0x1F + 0b1_0 + 1_000 + 1.5e-3 + 2E8;\nconst S = "a\\tb";\n'
    assert format_source(src) == src


def test_empty_and_comment_only_files():
    assert format_source("") == ""
    assert format_source("\n\n  \n") == ""
    assert format_source("// only\n\n\n/* a */\n") == "// only\n\n/* a */\n"


def test_tokenizer_keeps_comments_and_line_breaks():
    toks = tokenize("let a = 1; // x\n\n/* y */ b")
    assert [(t.kind, t.text, t.newlines) for t in toks] == [
        ("keyword", "let", 0), ("name", "a", 0), ("op", "=", 0), ("number", "1", 0),
        ("op", ";", 0), ("comment", "// x", 0), ("comment", "/* y */", 2), ("name", "b", 0)]
    assert toks[5].breaks and not toks[6].breaks


def test_a_syntax_error_is_a_diagnostic():
    with pytest.raises(TileError) as e:
        format_source("fn f( {", "bad.tile")
    assert e.value.diagnostics[0].span.file == "bad.tile"


def test_a_layout_that_changes_the_program_is_refused(monkeypatch):
    import tilelang.fmt as fmt

    monkeypatch.setattr(fmt, "layout", lambda toks, width: "const A = 2;\n")
    with pytest.raises(FormatError, match="would change the program"):
        fmt.format_source("const A = 1;\n", "a.tile")
    monkeypatch.setattr(fmt, "layout", lambda toks, width: "const A = ;\n")
    with pytest.raises(FormatError, match="does not parse"):
        fmt.format_source("const A = 1;\n", "a.tile")


def test_deep_nesting_is_an_error_not_a_crash():
    src = "const A = " + "(" * 5000 + "1" + ")" * 5000 + ";\n"
    try:
        out = format_source(src)
    except (TileError, FormatError):
        return
    assert parse(out) == parse(src)


def test_keeps_crlf_input_parsing_the_same():
    src = "fn f() {\r\n    return 1;\r\n}\r\n"
    assert format_source(src) == "fn f() {\n    return 1;\n}\n"


def test_no_line_has_trailing_spaces():
    for path in PARSED:
        out = format_source(path.read_text("utf-8"))
        assert not any(ln != ln.rstrip() for ln in out.splitlines()), path
        assert os.linesep not in out or os.linesep == "\n"


@pytest.mark.parametrize("width", [30, 100])
def test_comments_anywhere_stay_idempotent(width):
    """Comments put between random tokens of the repository's files (line comments, inline
    and multi-line block comments, blank lines), laid out at two widths."""
    rng = random.Random(width)
    for n in range(60):
        src = rng.choice(PARSED).read_text("utf-8")
        ends = [m.end() for m in re.finditer(r"[A-Za-z_0-9.]+|[^\sA-Za-z_0-9]", src)]
        for _ in range(rng.choice([1, 2, 4])):
            at = rng.choice(ends)
            cand = src[:at] + rng.choice([f" // c{n}\n", f" /* b{n} */ ", "\n/* m\n l */\n",
                                          "\n// own\n", "\n\n"]) + src[at:]
            try:
                parse(cand)
            except TileError:
                continue
            src = cand
        out = format_source(src, width=width)
        assert parse(out) == parse(src)
        assert format_source(out, width=width) == out, f"case {n}"
