"""Rejected programs and their exact diagnostics (golden files).

`golden/rejected/NAME.tile` is checked with the whole driver; `NAME.err` holds everything it
prints (errors, then warnings and notes). Regenerate after a deliberate change with
`TILE_REGEN_GOLDEN=1 pytest tests/sema/test_rejected.py` and read each changed file.
Constant cases follow seed 001_45fa852e188b7288.txt ("Constantness").
"""

import os
import pathlib

import pytest

from tilelang.diagnostics import Severity, render_all
from tilelang.driver import check_source
from tilelang.frontend.imports import stdlib_dir

HERE = pathlib.Path(__file__).parent / "golden" / "rejected"
CASES = sorted(HERE.glob("*.tile"))


def render_case(path: pathlib.Path) -> str:
    r = check_source(path.read_text(), path.name)
    assert any(d.severity is Severity.ERROR for d in r.diagnostics), "accepted"
    # the standard library's folder depends on where the package is installed
    return render_all(r.diagnostics).replace(stdlib_dir(), "<stdlib>") + "\n"


def test_enough_cases():
    assert len(CASES) >= 60


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_rejected(path):
    got = render_case(path)
    golden = path.with_suffix(".err")
    if os.environ.get("TILE_REGEN_GOLDEN"):
        golden.write_text(got)
    assert got == golden.read_text()
