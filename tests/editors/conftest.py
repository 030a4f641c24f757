"""Fixtures of the editor tests (helpers live in editor_helpers.py)."""

from __future__ import annotations

import pathlib
import shutil
import subprocess

import pytest

from editor_helpers import TEXTMATE_DIR, run_textmate, tile_files


@pytest.fixture(scope="session")
def textmate_engine() -> pathlib.Path:
    """The directory of scopes.js with vscode-textmate and vscode-oniguruma installed from the
    lock file (`npm ci` runs once when node_modules is missing)."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if not node or not npm:
        pytest.skip("node/npm not available: cannot run the VS Code TextMate engine")
    modules = TEXTMATE_DIR / "node_modules"
    if not (modules / "vscode-textmate").is_dir() or not (modules / "vscode-oniguruma").is_dir():
        proc = subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"],
            cwd=TEXTMATE_DIR, capture_output=True, text=True, timeout=600,
        )
        if proc.returncode != 0:
            pytest.skip(f"npm ci failed in {TEXTMATE_DIR} (no registry access?): "
                        f"{proc.stderr.strip()[-500:]}")
    return TEXTMATE_DIR


@pytest.fixture(scope="session")
def tm_scopes(textmate_engine) -> dict[pathlib.Path, list]:
    """Tokens of every file of `tile_files()` in the real TextMate engine, tokenized in one
    Node process: {path: [[{start, end, text, scopes}, ...] per line]}."""
    files = tile_files()
    raw = run_textmate(textmate_engine, files)
    return {pathlib.Path(k): v for k, v in raw.items()}
