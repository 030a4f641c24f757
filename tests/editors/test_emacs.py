"""The Emacs mode (editors/emacs/tile-mode.el): its ERT suite, run in `emacs --batch`, checks
faces at chosen positions of the examples, indentation and comment handling; the mode also
byte-compiles without a warning."""

from __future__ import annotations

import re
import shutil
import subprocess

from editor_helpers import EDITORS, emacs_binary

EMACS_DIR = EDITORS / "emacs"


def test_ert_suite():
    emacs = emacs_binary()
    proc = subprocess.run(
        [emacs, "--batch", "-Q", "-l", str(EMACS_DIR / "tile-mode.el"),
         "-l", str(EMACS_DIR / "tile-mode-tests.el"), "-f", "ert-run-tests-batch-and-exit"],
        capture_output=True, text=True, timeout=120,
    )
    out = proc.stdout + proc.stderr
    m = re.search(r"Ran (\d+) tests, (\d+) results as expected, (\d+) unexpected(?:, (\d+) skipped)?", out)
    assert m, out[-3000:]
    ran, ok, unexpected, skipped = (int(g or 0) for g in m.groups())
    assert unexpected == 0 and proc.returncode == 0, out[-6000:]
    assert ran >= 13 and ok == ran, out[-3000:]
    assert skipped == 0, "ERT skipped tests (examples missing?):\n" + out[-3000:]


def test_byte_compiles_without_warnings(tmp_path):
    emacs = emacs_binary()
    shutil.copy(EMACS_DIR / "tile-mode.el", tmp_path)
    proc = subprocess.run(
        [emacs, "--batch", "-Q", "--eval", "(setq byte-compile-error-on-warn t)",
         "-f", "batch-byte-compile", str(tmp_path / "tile-mode.el")],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / "tile-mode.elc").exists()
