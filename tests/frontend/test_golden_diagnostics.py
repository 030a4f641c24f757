"""Golden diagnostics: the exact rendered text for malformed inputs.

Each `golden/syntax/NAME.tile` has its expected output in `NAME.err`. To regenerate after a
deliberate change: `TILE_REGEN_GOLDEN=1 pytest tests/frontend/test_golden_diagnostics.py`,
then read every changed .err file before committing it.
"""

import os
import pathlib

import pytest

from tilelang.diagnostics import TileError, render_all
from tilelang.frontend.parser import parse

HERE = pathlib.Path(__file__).parent / "golden" / "syntax"
CASES = sorted(HERE.glob("*.tile"))


def render_case(path: pathlib.Path) -> str:
    text = path.read_text(encoding="utf-8")
    try:
        parse(text, path.name)
    except TileError as e:
        return render_all(e.diagnostics) + "\n"
    return "<no error>\n"


def test_enough_cases():
    assert len(CASES) >= 30


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_golden(path):
    got = render_case(path)
    golden = path.with_suffix(".err")
    if os.environ.get("TILE_REGEN_GOLDEN"):
        golden.write_text(got, encoding="utf-8")
    assert got != "<no error>\n", "a malformed input was accepted"
    assert got == golden.read_text(encoding="utf-8")
