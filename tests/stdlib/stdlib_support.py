"""Shared by the stdlib tests: the e2e helpers (compile, run on the emulator and interpreter)."""

from __future__ import annotations

import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "e2e"))

from e2e_support import compile_text, run_emulator, run_interp  # noqa: E402

__all__ = ["HERE", "compile_text", "run_emulator", "run_interp"]
