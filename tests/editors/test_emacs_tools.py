"""Emacs with tilec: `M-x compile' reads `tilec check`'s real diagnostics through tile-mode's
`compilation-error-regexp-alist' entry (file, line, column, error or warning), in
`emacs --batch`; the ERT suite (test_emacs.py) checks that eglot finds `tilec' on
`exec-path'."""

from __future__ import annotations

import json
import subprocess

from editor_helpers import EDITORS, emacs_binary

PARSE = """
(progn
  (require 'compile)
  (with-temp-buffer
    (insert-file-contents LOG)
    (compilation-mode)
    (setq-local compilation-error-regexp-alist '(tilec))  ; tile-mode's entry alone
    (compilation--ensure-parse (point-max))
    (let ((out nil) (pos (point-min)))
      (while pos
        (let ((msg (get-text-property pos 'compilation-message)))
          (when msg
            (let ((loc (compilation--message->loc msg)))
              (push (list (caar (compilation--loc->file-struct loc))
                          (compilation--loc->line loc) (compilation--loc->col loc)
                          (compilation--message->type msg))
                    out))))
        (setq pos (next-single-property-change pos 'compilation-message)))
      (dolist (m (reverse out))
        (princ (format "%s|%d|%d|%d\n" (nth 0 m) (nth 1 m) (nth 2 m) (nth 3 m)))))))
"""


def test_compile_reads_tilec_diagnostics(tmp_path, capsys):
    from tilelang.cli import main

    bad = tmp_path / "bad.tile"
    bad.write_text("kernel k(a: Array[f32, 1]) {\n    let t = lod(a);\n    let u = 1;\n}\n")
    assert main(["check", str(bad)]) == 1
    log = tmp_path / "tilec.out"
    log.write_text(capsys.readouterr().err)
    proc = subprocess.run(
        [emacs_binary(), "--batch", "-Q", "-l", str(EDITORS / "emacs" / "tile-mode.el"),
         "--eval", PARSE.replace("LOG", json.dumps(str(log)))], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    got = [[f, int(ln), int(col), int(t)] for f, ln, col, t in
           (row.split("|") for row in proc.stdout.splitlines())]
    # compilation types: 2 error, 1 warning
    assert got == [[str(bad), 2, 13, 2], [str(bad), 3, 9, 1]]
