"""Where the grammar and the standard library are.

They live at the top of the source tree (`grammar/`, `stdlib/`) and a wheel ships them inside
the package as `tilelang/grammar` and `tilelang/stdlib` (see setup.py). An installed wheel finds
them next to this package; a source checkout or an editable install (whose `tilelang` is the
checkout's) finds them one folder up. Nothing else is searched, so no other file can stand in.
"""

from __future__ import annotations

import os

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _find(name: str, probe: str) -> str:
    for base in (_PACKAGE, os.path.dirname(_PACKAGE)):
        folder = os.path.join(base, name)
        if os.path.isfile(os.path.join(folder, probe)):
            return folder
    raise FileNotFoundError(  # an incomplete installation, not a user mistake
        f"the Tile {name} folder is missing from this installation (looked in {_PACKAGE} "
        f"and {os.path.dirname(_PACKAGE)}); reinstall the tilec package")


def grammar_dir() -> str:
    return _find("grammar", "tile.lark")


def stdlib_dir() -> str:
    return _find("stdlib", os.path.join("std", "math.tile"))


def grammar_path() -> str:
    return os.path.join(grammar_dir(), "tile.lark")
