;;; tile-mode-tests.el --- ERT tests of tile-mode -*- lexical-binding: t; -*-

;; Run: emacs --batch -Q -l editors/emacs/tile-mode.el -l editors/emacs/tile-mode-tests.el \
;;        -f ert-run-tests-batch-and-exit
;; The examples are read from ../../examples and the fixture from
;; ../../tests/editors/fixtures (relative to this file).

;;; Code:

(require 'ert)
(require 'cl-lib)
(require 'imenu)

(defconst tile-test--dir
  (file-name-directory (or load-file-name buffer-file-name default-directory)))

(unless (featurep 'tile-mode)
  (load (expand-file-name "tile-mode.el" tile-test--dir) nil t))

(defconst tile-test--root (expand-file-name "../../" tile-test--dir))

(defun tile-test--file (relative)
  "The absolute name of RELATIVE (to the repository root); skip the test when missing."
  (let ((f (expand-file-name relative tile-test--root)))
    (unless (file-exists-p f) (ert-skip (format "%s not written yet" relative)))
    f))

(defmacro tile-test--with-file (relative &rest body)
  "Run BODY in a `tile-mode' buffer holding RELATIVE, fontified."
  (declare (indent 1))
  `(with-temp-buffer
     (insert-file-contents (tile-test--file ,relative))
     (tile-mode)
     (font-lock-ensure)
     ,@body))

(defmacro tile-test--with-text (text &rest body)
  "Run BODY in a `tile-mode' buffer holding TEXT, fontified."
  (declare (indent 1))
  `(with-temp-buffer
     (insert ,text)
     (tile-mode)
     (font-lock-ensure)
     ,@body))

(defun tile-test--pos (line needle &optional nth)
  "Position of the NTH (default 1) occurrence of NEEDLE on LINE of the current buffer."
  (save-excursion
    (goto-char (point-min))
    (forward-line (1- line))
    (let ((end (line-end-position)))
      (dotimes (_ (or nth 1))
        (unless (search-forward needle end t)
          (error "Line %d: %S (#%d) not found in %S" line needle (or nth 1)
                 (buffer-substring (line-beginning-position) end))))
      (match-beginning 0))))

(defun tile-test--faces (pos)
  "The faces at POS, as a list."
  (let ((f (get-text-property pos 'face)))
    (if (listp f) f (list f))))

(defun tile-test--check (checks)
  "Each of CHECKS is (LINE NEEDLE NTH FACE): FACE (nil: no face) must be at its start."
  (let (bad)
    (dolist (c checks)
      (cl-destructuring-bind (line needle nth face) c
        (let ((faces (tile-test--faces (tile-test--pos line needle nth))))
          (unless (if face (memq face faces) (null (delq nil faces)))
            (push (list line needle :want face :got faces) bad)))))
    (should (equal (nreverse bad) nil))))

;;; Faces in the examples

(ert-deftest tile-mode-faces-vadd ()
  (tile-test--with-file "examples/vadd.tile"
    (tile-test--check
     '((1 "//" 1 font-lock-comment-delimiter-face)
       (1 "element" 1 font-lock-comment-face)
       (7 "@launch" 1 tile-attribute-face)
       (7 "maxntid" 1 nil)
       (7 "128" 1 tile-number-face)
       (8 "kernel" 1 font-lock-keyword-face)
       (8 "vadd" 1 font-lock-function-name-face)
       (8 "Array" 1 font-lock-type-face)
       (8 "f32" 1 font-lock-type-face)
       (8 "const" 1 font-lock-keyword-face)
       (8 "TILE" 1 nil)
       (8 "1024" 1 tile-number-face)
       (9 "let" 1 font-lock-keyword-face)
       (9 "bid" 1 font-lock-builtin-face)
       (10 "load" 1 font-lock-builtin-face)
       (10 "0.0" 1 tile-number-face)
       (12 "store" 1 font-lock-builtin-face)
       (16 "@host" 1 tile-attribute-face)
       (17 "fn" 1 font-lock-keyword-face)
       (17 "vadd_grid" 1 font-lock-function-name-face)
       (17 "i32" 2 font-lock-type-face)
       (18 "return" 1 font-lock-keyword-face)
       (18 "cdiv" 1 font-lock-builtin-face)))))

(ert-deftest tile-mode-faces-softmax ()
  (tile-test--with-file "examples/softmax.tile"
    (tile-test--check
     '((9 "inf" 1 tile-number-face)
       (10 "exp" 1 font-lock-builtin-face)
       (10 "max" 1 font-lock-builtin-face)
       (10 "axis" 1 nil)
       (10 "true" 1 font-lock-constant-face)
       (11 "sum" 1 font-lock-builtin-face)))))

(ert-deftest tile-mode-faces-matmul ()
  (tile-test--with-file "examples/matmul.tile"
    (tile-test--check
     '((11 "@launch" 1 tile-attribute-face)
       (16 "matmul" 1 font-lock-function-name-face)
       (17 "f16" 1 font-lock-type-face)
       (20 "const" 1 font-lock-keyword-face)
       (26 "var" 1 font-lock-keyword-face)
       (26 "zeros" 1 font-lock-builtin-face)
       (27 "for" 1 font-lock-keyword-face)
       (27 "in" 1 font-lock-keyword-face)
       (27 "range" 1 nil)               ; the for statement owns it, no built-in
       (27 "num_tiles" 1 font-lock-builtin-face)
       (30 "mma" 1 font-lock-builtin-face)))))

(ert-deftest tile-mode-faces-layernorm ()
  (tile-test--with-file "examples/layernorm.tile"
    (tile-test--check
     '((7 "layernorm" 1 font-lock-function-name-face)
       (16 "astype" 1 font-lock-builtin-face)
       (19 "arange" 1 font-lock-builtin-face)
       (19 "i32" 1 font-lock-type-face)
       (20 "where" 1 font-lock-builtin-face)
       (24 "rsqrt" 1 font-lock-builtin-face)))))

(ert-deftest tile-mode-faces-sample ()
  (tile-test--with-file "tests/editors/fixtures/sample.tile"
    (tile-test--check
     '((2 "/*" 1 font-lock-comment-delimiter-face)
       (3 "spanning" 1 font-lock-comment-face)
       (4 "import" 1 font-lock-keyword-face)
       (5 "as" 1 font-lock-keyword-face)
       (8 "1_000_000" 1 tile-number-face)
       (9 "0x2A" 1 tile-number-face)
       (10 "0b101" 1 tile-number-face)
       (13 "floor division" 1 font-lock-comment-face)
       (20 "by_target" 1 font-lock-builtin-face)
       (24 "Tile" 1 font-lock-type-face)
       (26 "static" 1 font-lock-keyword-face)
       (31 "while" 1 font-lock-keyword-face)
       (31 "not" 1 font-lock-keyword-face)
       (31 "false" 1 font-lock-constant-face)
       (32 "break" 1 font-lock-keyword-face)
       (36 "2.5e-3" 1 tile-number-face)
       (36 "1e9" 1 tile-number-face)
       (36 "1_000.5" 1 tile-number-face)
       (36 "0x_FF" 1 tile-number-face)
       (36 "nan" 1 tile-number-face)
       (36 "f16" 1 font-lock-type-face)
       (36 "bf16" 1 font-lock-type-face)
       (37 "bad" 1 font-lock-string-face)
       (37 "\\\"" 1 tile-escape-face)
       (37 "\\n" 1 tile-escape-face)
       (38 "\\t" 1 tile-escape-face)
       (38 "{}" 1 font-lock-string-face)))))

(ert-deftest tile-mode-number-extent ()
  "A literal is one face run: 2.5e-3 and 1_000.5 are wholly numbers, i32 holds none."
  (tile-test--with-text "x = 2.5e-3 + 1_000.5 + i32(7) + 1.;"
    (dolist (lit '("2.5e-3" "1_000.5"))
      (let ((p (tile-test--pos 1 lit)))
        (dotimes (i (length lit))
          (should (memq 'tile-number-face (tile-test--faces (+ p i)))))))
    (should-not (memq 'tile-number-face (tile-test--faces (+ 1 (tile-test--pos 1 "i32")))))
    (should (memq 'tile-number-face (tile-test--faces (tile-test--pos 1 "7"))))))

(ert-deftest tile-mode-every-word ()
  "Each keyword, dtype and built-in, alone on a line, gets its category's face."
  (let ((expect '()))
    (dolist (g tile-keyword-groups)
      (dolist (w (cdr g))
        (push (cons w (if (eq (car g) 'constant) 'font-lock-constant-face
                        'font-lock-keyword-face))
              expect)))
    (dolist (w tile-dtypes) (push (cons w 'font-lock-type-face) expect))
    (dolist (w tile-builtins) (push (cons w 'font-lock-builtin-face) expect))
    (tile-test--with-text (mapconcat #'car expect "\n")
      (let ((line 1) bad)
        (dolist (e expect)
          (let ((faces (tile-test--faces (tile-test--pos line (car e)))))
            (unless (memq (cdr e) faces) (push (list (car e) faces) bad)))
          (setq line (1+ line)))
        (should (equal bad nil))))))

(ert-deftest tile-mode-comments-and-strings ()
  (tile-test--with-text "let s = \"a // b /* c\"; // real\n/* x \"y\" */ let t = 1;"
    (tile-test--check
     '((1 "a // b" 1 font-lock-string-face)
       (1 "// b" 1 font-lock-string-face)
       (1 "real" 1 font-lock-comment-face)
       (2 "\"y\"" 1 font-lock-comment-face)
       (2 "let" 1 font-lock-keyword-face)))
    ;; a block comment spans lines
    (should (nth 4 (syntax-ppss (tile-test--pos 2 "x"))))))

;;; Indentation

(defun tile-test--reindent (relative)
  "Flush every line of RELATIVE left, reindent, and compare with the file."
  (let* ((file (tile-test--file relative))
         (orig (with-temp-buffer (insert-file-contents file) (buffer-string))))
    (with-temp-buffer
      (insert orig)
      (tile-mode)
      (goto-char (point-min))
      (while (re-search-forward "^[ \t]+" nil t) (replace-match ""))
      (let ((inhibit-message t))
        (indent-region (point-min) (point-max)))
      (should (equal (buffer-string) orig)))))

(ert-deftest tile-mode-indent-examples ()
  (dolist (f '("examples/vadd.tile" "examples/softmax.tile" "examples/matmul.tile"
               "examples/layernorm.tile"))
    (tile-test--reindent f)))

(ert-deftest tile-mode-indent-sample ()
  (tile-test--reindent "tests/editors/fixtures/sample.tile"))

(ert-deftest tile-mode-indent-rules ()
  (with-temp-buffer
    (tile-mode)
    (insert "fn f(a,\nb) {\nlet x = g(\n1);\nif a {\n}\n}")
    (indent-region (point-min) (point-max))
    (should (equal (buffer-string)
                   "fn f(a,\n     b) {\n    let x = g(\n        1);\n    if a {\n    }\n}"))))

;;; Mode set-up

(ert-deftest tile-mode-setup ()
  (with-temp-buffer
    (tile-mode)
    (should (derived-mode-p 'prog-mode))
    (should (equal comment-start "// "))
    (should (equal comment-end ""))
    (should (eq indent-line-function #'tile-indent-line))
    (should-not indent-tabs-mode))
  (should (eq (assoc-default "/x/kernels.tile" auto-mode-alist #'string-match) 'tile-mode)))

(ert-deftest tile-mode-comment-region ()
  (with-temp-buffer
    (tile-mode)
    (insert "let x = 1;\nlet y = 2;")
    (comment-region (point-min) (point-max))
    (should (equal (buffer-string) "// let x = 1;\n// let y = 2;"))
    (uncomment-region (point-min) (point-max))
    (should (equal (buffer-string) "let x = 1;\nlet y = 2;"))))

(defvar eglot-server-programs)

(ert-deftest tile-mode-eglot-registration ()
  "Once eglot loads, tile-mode buffers use the Tile language server."
  (let ((eglot-server-programs nil))
    (provide 'eglot)  ; runs the with-eval-after-load forms without needing eglot itself
    (should (equal (assq 'tile-mode eglot-server-programs)
                   (cons 'tile-mode #'tile-lsp-contact)))))

(ert-deftest tile-mode-lsp-finds-tilec-on-exec-path ()
  "The server is the `tilec' on `exec-path', not a Python module of some interpreter."
  (let* ((dir (make-temp-file "tile-bin" t))
         (tilec (expand-file-name "tilec" dir)))
    (unwind-protect
        (progn
          (with-temp-file tilec (insert "#!/bin/sh\n"))
          (set-file-modes tilec #o755)
          (let ((exec-path (list dir)))
            (should (equal tile-lsp-command '("tilec" "lsp")))
            (should (equal (tile-lsp-contact nil) (list tilec "lsp"))))
          (let ((exec-path (list (expand-file-name "nothing-here" dir))))
            (should-error (tile-lsp-contact nil) :type 'user-error)))
      (delete-directory dir t))))

(ert-deftest tile-mode-imenu ()
  (tile-test--with-file "tests/editors/fixtures/sample.tile"
    (let ((index (funcall imenu-create-index-function)))
      (should (equal (mapcar #'car (cdr (assoc "Kernels" index))) '("vadd")))
      (should (equal (mapcar #'car (cdr (assoc "Functions" index))) '("ceil_div" "gelu")))
      (should (equal (mapcar #'car (cdr (assoc "Constants" index)))
                     '("WARP_TILE" "BIG" "MASK" "BITS"))))))

(provide 'tile-mode-tests)

;;; tile-mode-tests.el ends here
