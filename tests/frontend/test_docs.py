"""Every ```tile block of docs/*.md and README.md parses (and checks), and the generated tables
of docs/language.md are up to date.

Conventions (also documented at the top of docs/language.md):
- a block whose first line is `// fragment: statements` is wrapped in `fn __doc__() { ... }`;
- a block whose first line is `// fragment: expression` is wrapped in
  `fn __doc__() { let __doc = ...; }`;
- fragments may use names they do not bind, so they are only parsed; any other block is a whole
  module and must also pass `tilelang.driver.check_source` without errors;
- a whole-module block draws no warnings either, except those its `// expect-warning: W0xxx`
  comments name;
- a block holding `// expect-error: E0xxx` comments must fail, with every named code among the
  errors (codes outside E00xx/E01xx need the semantic checker; without it the block is skipped).
"""

from __future__ import annotations

import importlib.util
import os
import re
from dataclasses import dataclass

import pytest

from tilelang.diagnostics import Severity, TileError
from tilelang.driver import check_source
from tilelang.frontend.parser import parse

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOCS = os.path.join(ROOT, "docs")

FENCE = re.compile(r"^```tile[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)
EXPECT = re.compile(r"//\s*expect-error:\s*((?:E\d{4}[\s,]*)+)")
EXPECT_WARNING = re.compile(r"//\s*expect-warning:\s*((?:W\d{4}[\s,]*)+)")
FRAGMENT = re.compile(r"^\s*//\s*fragment:\s*(\w+)\s*$")
SYNTAX_CODES = re.compile(r"^[EW]0[01]\d\d$")


@dataclass
class Block:
    file: str   # relative to the repository root
    line: int   # line of the first line of code (after the fence)
    code: str
    kind: str   # "module", "statements" or "expression"
    expect: tuple[str, ...]
    warnings: tuple[str, ...] = ()

    @property
    def id(self) -> str:
        return f"{self.file}:{self.line}"

    def source(self) -> str:
        """The text handed to the parser (fragments wrapped in a function)."""
        if self.kind == "statements":
            return "fn __doc__() {\n" + self.code + "\n}\n"
        if self.kind == "expression":
            return "fn __doc__() {\nlet __doc =\n" + self.code + "\n;\n}\n"
        return self.code

    def shift(self) -> int:
        """Lines added before the block's text by `source` (for error positions)."""
        return {"statements": 1, "expression": 2}.get(self.kind, 0)


def doc_files() -> list[str]:
    files = [os.path.join(DOCS, f) for f in sorted(os.listdir(DOCS)) if f.endswith(".md")]
    readme = os.path.join(ROOT, "README.md")
    if os.path.exists(readme):
        files.append(readme)
    return files


def extract(path: str) -> list[Block]:
    text = open(path, encoding="utf-8").read()
    rel = os.path.relpath(path, ROOT)
    blocks = []
    for m in FENCE.finditer(text):
        code = m.group(1)
        line = text.count("\n", 0, m.start(1)) + 1
        first = code.split("\n", 1)[0]
        fm = FRAGMENT.match(first)
        kind = fm.group(1) if fm else "module"
        if kind not in ("module", "statements", "expression"):
            raise ValueError(f"{rel}:{line - 1}: unknown fragment kind `{kind}`")
        expect = tuple(c for em in EXPECT.finditer(code)
                       for c in re.findall(r"[EW]\d{4}", em.group(1)))
        warns = tuple(c for em in EXPECT_WARNING.finditer(code)
                      for c in re.findall(r"W\d{4}", em.group(1)))
        blocks.append(Block(rel, line, code, kind, expect, warns))
    return blocks


BLOCKS = [b for f in doc_files() for b in extract(f)]


def _checker_available() -> bool:
    return importlib.util.find_spec("tilelang.sema.checker") is not None


def _render(diags, block: Block) -> str:
    out = []
    for d in diags:
        where = f"{block.file}:{d.span.line - block.shift() + block.line - 1}" if d.span else \
            block.file
        out.append(f"{where}: {d.severity.value}[{d.code}] {d.message}")
    return "\n".join(out)


def test_blocks_were_found():
    files = {b.file for b in BLOCKS}
    assert os.path.join("docs", "language.md") in files
    assert len([b for b in BLOCKS if b.file.endswith("language.md")]) >= 30


@pytest.mark.parametrize("block", [b for b in BLOCKS if not b.expect], ids=lambda b: b.id)
def test_block_parses_and_checks(block: Block):
    src = block.source()
    name = f"<{block.id}>"
    try:
        parse(src, name)
    except TileError as e:
        pytest.fail(f"{block.id}: the block does not parse:\n{_render(e.diagnostics, block)}")
    if block.kind != "module":
        return
    result = check_source(src, name)
    errors = [d for d in result.diagnostics if d.severity is Severity.ERROR]
    assert not errors, f"{block.id}: the block does not check:\n{_render(errors, block)}"
    warnings = [d for d in result.diagnostics if d.severity is Severity.WARNING
                and d.code not in block.warnings]
    assert not warnings, (f"{block.id}: the block draws warnings (fix the example, or mark it "
                          f"`// expect-warning: W0xxx`):\n{_render(warnings, block)}")


@pytest.mark.parametrize("block", [b for b in BLOCKS if b.expect], ids=lambda b: b.id)
def test_block_fails_as_expected(block: Block):
    src = block.source()
    name = f"<{block.id}>"
    syntax = all(SYNTAX_CODES.match(c) for c in block.expect)
    if not syntax and not _checker_available():
        pytest.skip("needs the semantic checker (tilelang.sema.checker)")
    result = check_source(src, name)
    codes = {d.code for d in result.diagnostics if d.severity is Severity.ERROR}
    missing = [c for c in block.expect if c not in codes]
    assert not missing, (f"{block.id}: expected error(s) {', '.join(missing)}; got:\n"
                         f"{_render(result.diagnostics, block) or '(no diagnostics)'}")


def _gen():
    spec = importlib.util.spec_from_file_location("gen_builtins",
                                                  os.path.join(DOCS, "gen_builtins.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("table", ["builtins", "codes", "dtypes", "promotion"])
def test_generated_table_is_up_to_date(table):
    gen = _gen()
    assert table in gen.TABLES
    with open(gen.DOC, encoding="utf-8") as f:
        text = f.read()
    assert table not in gen.stale(text), (
        f"the `{table}` table of docs/language.md is stale: run `python3 docs/gen_builtins.py`")


def test_every_builtin_is_in_the_table():
    gen = _gen()
    named, ops, _ = gen.registry()
    with open(gen.DOC, encoding="utf-8") as f:
        text = f.read()
    table = re.search(r"<!-- builtins:begin -->(.*?)<!-- builtins:end -->", text, re.S).group(1)
    for name in named:
        assert f"`{name}(" in table, f"built-in `{name}` is missing from the table"


def test_every_keyword_is_listed():
    from tilelang.frontend.parser import keywords
    with open(os.path.join(DOCS, "language.md"), encoding="utf-8") as f:
        text = f.read()
    listed = re.search(r"following words are reserved.*?```\n(.*?)```", text, re.S).group(1)
    assert set(listed.split()) == set(keywords())


def test_every_code_named_in_the_text_exists():
    """A code quoted in the prose of language.md (outside the generated tables) is registered."""
    gen = _gen()
    gen.codes_table()  # imports every stage that registers codes
    from tilelang.diagnostics import known_codes
    codes = known_codes()
    with open(gen.DOC, encoding="utf-8") as f:
        text = f.read()
    prose = re.sub(r"<!-- (\w+):begin -->.*?<!-- \1:end -->", "", text, flags=re.S)
    named = set(re.findall(r"\b[EWN]\d{4}\b", prose))
    unknown = sorted(c for c in named if c not in codes)
    assert not unknown, f"docs/language.md names unregistered codes: {', '.join(unknown)}"
