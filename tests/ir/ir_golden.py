"""Golden-file comparison for IR dumps; TILE_UPDATE_GOLDEN=1 rewrites the files."""

from __future__ import annotations

import os
import pathlib

GOLDEN = pathlib.Path(__file__).parent / "golden"


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("TILE_UPDATE_GOLDEN") == "1" or not path.exists():
        path.write_text(text)
    assert text == path.read_text(), f"IR dump differs from {path}"
