"""The newcomer's documents agree with the project: the README lists every document and names
folders that exist, quoted figures equal the measured ones, and the commands the docs name
exist."""

from __future__ import annotations

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text("utf-8")


def test_readme_lists_every_document():
    linked = set(re.findall(r"\]\((docs/[\w.-]+\.md)\)", README))
    present = {f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md")}
    assert present - linked == set(), "add them to the README's Documentation list"
    assert linked - present == set(), "the README links documents that do not exist"


def test_readme_layout_names_what_exists():
    for path in ("pyproject.toml", "grammar/tile.lark", "grammar/tile.tables.json",
                 "stdlib/std/math.tile", "setup.py", "tilelang/frontend/grammar_tables.py"):
        assert (ROOT / path).exists(), path
    for name in ("`grammar/tile.lark`", "`stdlib/`", "python -m tilelang.frontend.grammar_tables"):
        assert name in README, name
    assert "tilelang/grammar/tile.lark" not in README  # the old place


def test_python_api_quotes_the_measured_launch_overhead():
    (result,) = sorted((ROOT / "benchmarks" / "results").glob("launch-overhead-*-cpu.md"))[-1:]
    rows = dict(re.findall(r"\((`k\d+`)\) \| ([\d.]+) \|", result.read_text("utf-8")))
    api = (ROOT / "docs" / "python-api.md").read_text("utf-8")
    assert f"{rows['`k0`']} µs with 0 arguments" in api
    assert f"{rows['`k8`']} µs with 8 arguments" in api
    assert result.name in api


def test_editors_readme_names_the_real_server_command():
    from tilelang.cli import SUBCOMMANDS
    text = (ROOT / "editors" / "README.md").read_text("utf-8")
    assert "lsp" in SUBCOMMANDS and "`tilec lsp`" in text
    assert "to become" not in text


def test_no_document_points_at_the_old_grammar_or_stdlib_folders():
    docs = [ROOT / "README.md", ROOT / "editors" / "README.md", *(ROOT / "docs").glob("*.md")]
    for doc in docs:
        text = doc.read_text("utf-8")
        assert "tilelang/grammar/tile.lark" not in text, doc.name
        assert "tilelang/stdlib/std" not in text, doc.name
