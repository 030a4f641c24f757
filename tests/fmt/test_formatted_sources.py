"""The repository's own Tile code stays in `tilec fmt`'s layout: the examples, the standard
library and the ```tile blocks of the documentation that parse as a module (the others are
fragments). Run `tilec fmt examples stdlib docs/*.md README.md` after editing them."""

from __future__ import annotations

import pathlib

import pytest

from tilelang.fmt import format_source
from tilelang.fmt.markdown import format_markdown

ROOT = pathlib.Path(__file__).resolve().parents[2]
TILE = sorted(ROOT.glob("examples/*.tile")) + sorted(ROOT.glob("stdlib/**/*.tile"))
MARKDOWN = sorted(ROOT.glob("docs/*.md")) + [ROOT / "README.md", ROOT / "editors" / "README.md"]


@pytest.mark.parametrize("path", TILE, ids=lambda p: str(p.relative_to(ROOT)))
def test_tile_files_are_formatted(path):
    text = path.read_text("utf-8")
    assert format_source(text, str(path)) == text, f"run `tilec fmt {path.relative_to(ROOT)}`"


@pytest.mark.parametrize("path", MARKDOWN, ids=lambda p: str(p.relative_to(ROOT)))
def test_documentation_blocks_are_formatted(path):
    text = path.read_text("utf-8")
    assert format_markdown(text, str(path)) == text, f"run `tilec fmt {path.relative_to(ROOT)}`"
