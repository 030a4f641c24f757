"""Helpers of the editor tests: the files every highlighter must handle, positions in them,
and the real engines (Node's vscode-textmate, Vim, Emacs) located or skipped with a reason."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
HERE = pathlib.Path(__file__).resolve().parent
EDITORS = ROOT / "editors"
SAMPLE = HERE / "fixtures" / "sample.tile"
TEXTMATE_DIR = HERE / "textmate"
TM_GRAMMAR = EDITORS / "vscode" / "syntaxes" / "tile.tmLanguage.json"


def tile_files() -> list[pathlib.Path]:
    """Every .tile file the highlighters must handle: the examples, the standard library and
    the fixture that covers every construct."""
    files = sorted((ROOT / "examples").glob("*.tile"))
    files += sorted((ROOT / "stdlib").rglob("*.tile"))
    files.append(SAMPLE)
    return files


def example(name: str) -> pathlib.Path:
    """An example file, or a skip when it has not been written."""
    path = ROOT / "examples" / name
    if not path.exists():
        pytest.skip(f"examples/{name} not written yet")
    return path


def locate(path: pathlib.Path, line: int, needle: str, nth: int = 1) -> tuple[int, int]:
    """(line, column), both 1-based, of the nth occurrence of `needle` on `line` (1-based) of
    `path`; fails loudly when the text is not there, so positions never drift silently."""
    text = path.read_text(encoding="utf-8").splitlines()[line - 1]
    col = -1
    for _ in range(nth):
        col = text.find(needle, col + 1)
        if col < 0:
            raise AssertionError(f"{path.name}:{line}: {needle!r} (#{nth}) not in {text!r}")
    return line, col + 1


def run_textmate(engine: pathlib.Path, files: list[pathlib.Path]) -> dict[str, list]:
    proc = subprocess.run(
        ["node", str(engine / "scopes.js"), str(TM_GRAMMAR), *map(str, files)],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def vim_binary() -> str:
    vim = shutil.which("vim")
    if not vim:
        pytest.skip("vim is not installed")
    return vim


def emacs_binary() -> str:
    emacs = os.environ.get("EMACS") or shutil.which("emacs")
    if not emacs:
        pytest.skip("emacs is not installed (apt-get install emacs-nox)")
    return emacs


_GENERATOR = None


def load_generator():
    """editors/generate.py as a module (it is a script, not part of the package)."""
    global _GENERATOR
    if _GENERATOR is None:
        import importlib.util
        import sys

        spec = importlib.util.spec_from_file_location("tile_editors_generate",
                                                      EDITORS / "generate.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        _GENERATOR = module
    return _GENERATOR
