;;; tile-mode.el --- Major mode for the Tile block/tile GPU language -*- lexical-binding: t; -*-

;; Version: 0.1.0
;; Package-Requires: ((emacs "26.1"))
;; Keywords: languages
;; URL: https://github.com/tilelang/tilec

;; This file is part of tilec and is distributed under the MIT license.

;;; Commentary:

;; `tile-mode' edits `.tile' files: font-lock for keywords, dtypes, built-in operations,
;; attributes (`@launch', `@host'), numbers, strings with escapes and both comment forms; a
;; syntax table for `//' and `/* */' comments; and indentation by bracket depth.
;;
;; The word lists between the GENERATED markers come from the grammar and the built-in
;; registry: run `python3 editors/generate.py' after changing either.
;;
;; Install: put this file on `load-path' and `(require 'tile-mode)'.

;;; Code:

(require 'rx)

(defgroup tile nil
  "Major mode for the Tile language."
  :group 'languages
  :prefix "tile-")

(defcustom tile-indent-offset 4
  "Indentation step of `tile-mode'."
  :type 'integer
  :safe #'integerp)

(defface tile-number-face
  '((t :inherit font-lock-constant-face))
  "Face for Tile numeric literals.")

(defface tile-escape-face
  '((t :inherit font-lock-regexp-grouping-backslash))
  "Face for escape sequences in Tile strings.")

(defface tile-attribute-face
  '((t :inherit font-lock-preprocessor-face))
  "Face for Tile attributes such as `@launch'.")

;; BEGIN GENERATED (editors/generate.py rewrites this region; do not edit by hand)
(defconst tile-keyword-groups
  '((declaration "fn" "kernel")
    (storage "const" "let" "var")
    (modifier "static")
    (conditional "else" "if")
    (repeat "for" "in" "while")
    (jump "break" "continue" "return")
    (namespace "as" "from" "import")
    (operator "and" "not" "or")
    (constant "false" "true")
    (other))
  "Tile keywords by highlighting group (from the grammar).")
(defconst tile-dtypes
  '(
    "bool" "i8" "i16" "i32" "i64" "u8" "u16" "u32" "u64" "f16" "bf16" "f32" "f64" "tf32"
    "f8e4m3" "f8e5m2" "f4e2m1" "f6e2m3" "f6e3m2" "ue8m0" "f4e2m1x2")
  "Tile dtypes (generated).")
(defconst tile-type-constructors
  '(
    "Tile" "Array" "Optional" "List" "Symmetric")
  "Tile type constructors (generated).")
(defconst tile-float-words
  '(
    "inf" "nan")
  "Tile float words (generated).")
(defconst tile-attribute-helpers
  '(
    "by_target")
  "Tile attribute helpers (generated).")
(defconst tile-builtins
  '(
    "abs" "acos" "acosh" "arange" "argmax" "argmin" "argsort" "asin" "asinh" "assert"
    "astype" "atan" "atan2" "atanh" "atomic_add" "atomic_and" "atomic_cas" "atomic_max"
    "atomic_min" "atomic_or" "atomic_xchg" "atomic_xor" "barrier" "bid" "bitcast" "bits"
    "broadcast_to" "cat" "cbrt" "cdiv" "ceil" "cluster_rank" "cluster_size" "copysign"
    "cos" "cosh" "cumprod" "cumsum" "dim" "div" "erf" "exp" "exp2" "expand_dims" "expm1"
    "extract" "fence" "floor" "floordiv" "fma" "fmod" "full" "gather" "hypot"
    "is_floating" "is_integer" "is_none" "isfinite" "isinf" "isnan" "len" "list_item"
    "load" "log" "log10" "log1p" "log2" "matmul" "max" "maximum" "min" "minimum" "mma"
    "mma_scaled" "multimem_reduce" "multimem_store" "num_blocks" "num_tiles" "ones" "pad"
    "peer" "permute" "pow" "print" "prod" "rand" "randint" "randn" "rank" "reduce"
    "reshape" "rint" "round" "rsqrt" "scan" "scatter" "sigmoid" "sign" "signal" "sin"
    "sinh" "sort" "sqrt" "static_assert" "store" "stride" "sum" "take" "tan" "tanh" "topk"
    "transpose" "trunc" "unpack_f4" "wait_until" "where" "world_size" "zeros")
  "Tile builtins (generated).")
;; END GENERATED

(defconst tile-attributes '("launch" "host")
  "Attribute names highlighted wherever they follow `@'.")

(defun tile--keywords (&rest groups)
  "The keywords of GROUPS (symbols of `tile-keyword-groups')."
  (apply #'append (mapcar (lambda (g) (cdr (assq g tile-keyword-groups))) groups)))

(defconst tile--number-rx
  (let* ((dec "[0-9]\\(?:_?[0-9]\\)*")
         (exp (concat "[eE][+-]?" dec)))
    (concat "\\_<\\(?:"
            dec "\\." dec "\\(?:" exp "\\)?"     ; 1.0  2.5e-3  1_000.5
            "\\|" dec exp                          ; 1e9
            "\\|0[xX]\\(?:_?[0-9a-fA-F]\\)+"       ; 0x2A
            "\\|0[bB]\\(?:_?[01]\\)+"             ; 0b101
            "\\|" dec                              ; 42  1_000_000
            "\\)"))
  "Regexp matching a Tile numeric literal.
The grammar's FLOAT, HEX_INT, BIN_INT and DEC_INT terminals.")

(defun tile--match-escape (limit)
  "Font-lock matcher: the next escape sequence inside a string before LIMIT."
  (let (found)
    (while (and (not found) (re-search-forward "\\\\\\(?:x[0-9a-fA-F]\\{2\\}\\|u[0-9a-fA-F]\\{4\\}\\|U[0-9a-fA-F]\\{8\\}\\|[0-7]\\{1,3\\}\\|[abfnrtv\\\\\"'?]\\)" limit t))
      (when (nth 3 (syntax-ppss (match-beginning 0)))
        (setq found t)))
    found))

(defun tile--font-lock-keywords ()
  "Build the font-lock keywords of `tile-mode' from the word lists."
  (let ((words (lambda (ws) (concat "\\_<" (regexp-opt ws t) "\\_>"))))
    `(;; Attributes: @name at the start of a line, or a known attribute anywhere.
      ("^[ \t]*\\(@[A-Za-z_][A-Za-z0-9_]*\\)" 1 'tile-attribute-face)
      (,(concat "@" (regexp-opt tile-attributes) "\\_>") 0 'tile-attribute-face)
      ;; The name declared by fn / kernel.
      ("\\_<\\(?:fn\\|kernel\\)[ \t]+\\([A-Za-z_][A-Za-z0-9_]*\\)"
       1 (unless (member (match-string 1) (tile--keywords 'declaration 'storage 'modifier
                                                          'conditional 'repeat 'jump
                                                          'namespace 'operator 'constant
                                                          'other))
           font-lock-function-name-face))
      (,(funcall words (tile--keywords 'constant)) 0 font-lock-constant-face)
      (,(funcall words (tile--keywords 'declaration 'storage 'modifier 'conditional 'repeat
                                       'jump 'namespace 'operator 'other))
       0 font-lock-keyword-face)
      (,(funcall words (append tile-dtypes tile-type-constructors)) 0 font-lock-type-face)
      (,(funcall words tile-float-words) 0 'tile-number-face)
      (,(funcall words tile-attribute-helpers) 0 font-lock-builtin-face)
      (,(funcall words tile-builtins) 0 font-lock-builtin-face)
      (,tile--number-rx 0 'tile-number-face)
      (tile--match-escape 0 'tile-escape-face prepend))))

(defvar tile-mode-syntax-table
  (let ((table (make-syntax-table)))
    ;; `/* */' block comments (style a) and `//' line comments (style b), as in C.
    (modify-syntax-entry ?/ ". 124b" table)
    (modify-syntax-entry ?* ". 23" table)
    (modify-syntax-entry ?\n "> b" table)
    (modify-syntax-entry ?\" "\"" table)
    (modify-syntax-entry ?\\ "\\" table)
    (modify-syntax-entry ?_ "_" table)
    (modify-syntax-entry ?' "." table)
    (dolist (c '(?+ ?- ?% ?& ?| ?^ ?~ ?< ?> ?= ?! ?@ ?. ?, ?\; ?:))
      (modify-syntax-entry c "." table))
    table)
  "Syntax table of `tile-mode'.")

;;; Indentation

(defun tile--statement-indentation (pos)
  "Indentation of the statement holding the bracket at POS.
Walks out of the parentheses open at the start of the bracket's line, so that a
signature split over several lines indents its body from its first line."
  (save-excursion
    (goto-char pos)
    (let ((done nil))
      (while (not done)
        (let* ((ppss (syntax-ppss (line-beginning-position)))
               (open (nth 1 ppss)))
          (if (and open (memq (char-after open) '(?\( ?\[)))
              (goto-char open)
            (setq done t)))))
    (current-indentation)))

(defun tile-calculate-indentation ()
  "The indentation column of the current line."
  (save-excursion
    (back-to-indentation)
    (let* ((ppss (syntax-ppss))
           (open (nth 1 ppss))
           (closes (looking-at-p "[])}]")))
      (cond
       ;; Inside a block comment: a ` * ' line goes under the star of its `/*'; other
       ;; lines keep their indentation.
       ((nth 4 ppss)
        (if (looking-at-p "\\*")
            (save-excursion (goto-char (nth 8 ppss)) (1+ (current-column)))
          (current-indentation)))
       ((nth 3 ppss) (current-indentation))
       ((null open) 0)
       ((or (eq (char-after open) ?{)
            (save-excursion
              (goto-char (1+ open))
              (looking-at-p "[ \t]*\\(?://.*\\)?$")))
        (+ (tile--statement-indentation open) (if closes 0 tile-indent-offset)))
       (closes (tile--statement-indentation open))
       ;; A `(' or `[' followed by text: align just after it.
       (t (save-excursion (goto-char (1+ open)) (current-column)))))))

(defun tile-indent-line ()
  "Indent the current line as Tile code."
  (interactive)
  (let ((col (tile-calculate-indentation))
        (offset (- (current-column) (current-indentation))))
    (indent-line-to (max col 0))
    (when (> offset 0) (move-to-column (+ col offset)))))

(defconst tile-imenu-generic-expression
  '(("Kernels" "^[ \t]*\\(?:@.*[ \t]\\)?kernel[ \t]+\\([A-Za-z_][A-Za-z0-9_]*\\)" 1)
    ("Functions" "^[ \t]*\\(?:@.*[ \t]\\)?fn[ \t]+\\([A-Za-z_][A-Za-z0-9_]*\\)" 1)
    ("Constants" "^const[ \t]+\\([A-Za-z_][A-Za-z0-9_]*\\)" 1))
  "Imenu index of `tile-mode': kernels, functions and module constants.")

;;;###autoload
(define-derived-mode tile-mode prog-mode "Tile"
  "Major mode for editing Tile (block/tile GPU language) source."
  :syntax-table tile-mode-syntax-table
  :group 'tile
  (setq-local comment-start "// ")
  (setq-local comment-end "")
  (setq-local comment-start-skip "\\(?://+\\|/\\*+\\)[ \t]*")
  (setq-local comment-end-skip "[ \t]*\\(?:\n\\|\\*+/\\)")
  (setq-local comment-multi-line t)
  (setq-local indent-line-function #'tile-indent-line)
  (setq-local indent-tabs-mode nil)
  (setq-local tab-width tile-indent-offset)
  (setq-local electric-indent-chars (append "{}()[]" electric-indent-chars))
  (setq-local font-lock-defaults (list (tile--font-lock-keywords) nil nil))
  (setq-local imenu-generic-expression tile-imenu-generic-expression))

(defcustom tile-lsp-command '("tilec" "lsp")
  "Command that starts the Tile language server (for eglot).
Its program is looked up on `exec-path' when eglot connects: the `tilec'
installed with the compiler (`pip install \='tilec[lsp]\='')."
  :type '(repeat string))

(defun tile-lsp-contact (&optional _interactive)
  "The command eglot runs for a Tile buffer.
It is `tile-lsp-command' with its program found on `exec-path'."
  (let ((program (executable-find (car tile-lsp-command))))
    (unless program
      (user-error "Tile: `%s' is not on exec-path; install tilec with the lsp extra \
(pip install 'tilec[lsp]') or set `tile-lsp-command'" (car tile-lsp-command)))
    (cons program (cdr tile-lsp-command))))

(defvar eglot-server-programs)
(with-eval-after-load 'eglot
  (add-to-list 'eglot-server-programs (cons 'tile-mode #'tile-lsp-contact)))

;; `M-x compile' with `tilec check FILE' (or `tilec FILE'): its diagnostics are
;;     error[E0201]: cannot find `lod' in this scope
;;      --> kernels/softmax.tile:12:13
;; an error, warning or note on one line and the place on the next.
(defconst tile-compilation-error-regexp
  '(tilec "^\\(?:error\\|\\(warning\\)\\|\\(note\\)\\)\\[[A-Z0-9]+\\]: .*\n *--> \\(.+\\):\\([0-9]+\\):\\([0-9]+\\)$"
          3 4 5 (1 . 2))
  "The `compilation-error-regexp-alist-alist' entry for tilec's diagnostics.")

(defvar compilation-error-regexp-alist)
(defvar compilation-error-regexp-alist-alist)
(with-eval-after-load 'compile
  (add-to-list 'compilation-error-regexp-alist-alist tile-compilation-error-regexp)
  (add-to-list 'compilation-error-regexp-alist 'tilec))

;;;###autoload
(add-to-list 'auto-mode-alist '("\\.tile\\'" . tile-mode))

(provide 'tile-mode)

;;; tile-mode.el ends here
