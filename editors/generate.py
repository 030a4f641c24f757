#!/usr/bin/env python3
"""Rewrite the generated word lists of every Tile highlighter from the sources of truth.

Sources of truth (read through ``tilelang.highlight``):
  * keywords  -- the quoted word terminals of ``grammar/tile.lark``;
  * built-ins -- ``tilelang.sema.builtins.builtin_names()``;
  * dtypes    -- ``tilelang.sema.types.DTYPES``.
While the grammar or the registry does not exist, the fallback lists of ``tilelang/highlight.py``
stand in for them.

Files rewritten (only their marked regions, or for JSON only the generated keys):
  tilelang/highlight.py                         fallback lists
  editors/vscode/syntaxes/tile.tmLanguage.json  repository entries listed in TM_WORD_RULES
  editors/vim/syntax/tile.vim                   between '" BEGIN GENERATED' / '" END GENERATED'
  editors/emacs/tile-mode.el                    between ';; BEGIN GENERATED' / ';; END GENERATED'

Usage: python3 editors/generate.py           # rewrite the files
       python3 editors/generate.py --check   # exit 1 and print a diff when a file is stale
"""

from __future__ import annotations

import argparse
import difflib
import json
import pathlib
import sys
import textwrap

ROOT = pathlib.Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tilelang import highlight as hl  # noqa: E402

HIGHLIGHT_PY = ROOT / "tilelang" / "highlight.py"
TM_GRAMMAR = ROOT / "editors" / "vscode" / "syntaxes" / "tile.tmLanguage.json"
VIM_SYNTAX = ROOT / "editors" / "vim" / "syntax" / "tile.vim"
EMACS_MODE = ROOT / "editors" / "emacs" / "tile-mode.el"

#: tmLanguage repository entry -> (word category, scope).  Categories are keyword groups
#: (``hl.KEYWORD_GROUPS``) or one of dtypes / type-constructors / float-words / builtins /
#: attribute-helpers.
TM_WORD_RULES = {
    "keyword-declaration": ("declaration", "storage.type.function.tile"),
    "keyword-storage": ("storage", "storage.type.tile"),
    "keyword-modifier": ("modifier", "storage.modifier.tile"),
    "keyword-conditional": ("conditional", "keyword.control.conditional.tile"),
    "keyword-repeat": ("repeat", "keyword.control.loop.tile"),
    "keyword-jump": ("jump", "keyword.control.flow.tile"),
    "keyword-namespace": ("namespace", "keyword.control.import.tile"),
    "keyword-operator": ("operator", "keyword.operator.logical.tile"),
    "keyword-constant": ("constant", "constant.language.boolean.tile"),
    "keyword-other": ("other", "keyword.other.tile"),
    "dtypes": ("dtypes", "support.type.primitive.tile"),
    "type-constructors": ("type-constructors", "support.class.tile"),
    "float-words": ("float-words", "constant.numeric.float.tile"),
    "attribute-helpers": ("attribute-helpers", "support.function.attribute.tile"),
    "builtins": ("builtins", "support.function.builtin.tile"),
}

#: Vim syntax group -> word category.
VIM_GROUPS = {
    "tileDeclaration": "declaration",
    "tileStorage": "storage",
    "tileModifier": "modifier",
    "tileConditional": "conditional",
    "tileRepeat": "repeat",
    "tileJump": "jump",
    "tileInclude": "namespace",
    "tileOperatorWord": "operator",
    "tileBoolean": "constant",
    "tileKeyword": "other",
    "tileType": "dtypes",
    "tileTypeConstructor": "type-constructors",
    "tileFloatWord": "float-words",
    "tileAttributeHelper": "attribute-helpers",
    "tileBuiltin": "builtins",
}

#: Options of a Vim `syn keyword` group: after `fn` / `kernel` the next word is the declared
#: name, even when it is also a built-in (`kernel matmul`).
VIM_GROUP_OPTIONS = {"tileDeclaration": "nextgroup=tileFunctionName skipwhite "}

#: Emacs constant -> word category (keyword groups go to one alist, ``tile-keyword-groups``).
EMACS_LISTS = {
    "tile-dtypes": "dtypes",
    "tile-type-constructors": "type-constructors",
    "tile-float-words": "float-words",
    "tile-attribute-helpers": "attribute-helpers",
    "tile-builtins": "builtins",
}


def categories() -> dict[str, tuple[str, ...]]:
    """Every word category, read fresh from the sources of truth (or the fallbacks)."""
    kws = hl.grammar_keywords() or tuple(sorted(hl.FALLBACK_KEYWORDS))
    builtins = hl.registry_builtins() or tuple(sorted(hl.FALLBACK_BUILTINS))
    cats: dict[str, tuple[str, ...]] = dict(hl.keyword_groups(kws))
    cats["keywords"] = tuple(sorted(kws))
    cats["dtypes"] = hl.registry_dtypes() or tuple(hl.FALLBACK_DTYPES)
    cats["type-constructors"] = tuple(hl.TYPE_CONSTRUCTORS)
    cats["float-words"] = tuple(hl.FLOAT_WORDS)
    cats["attribute-helpers"] = tuple(hl.ATTRIBUTE_HELPERS)
    cats["builtins"] = tuple(sorted(builtins))
    return cats


def replace_region(text: str, begin: str, end: str, body: str, path: pathlib.Path) -> str:
    """Replace the lines strictly between the line containing ``begin`` and the line containing
    ``end`` with ``body`` (which ends with a newline)."""
    lines = text.splitlines(keepends=True)
    starts = [i for i, ln in enumerate(lines) if begin in ln]
    ends = [i for i, ln in enumerate(lines) if end in ln]
    if len(starts) != 1 or len(ends) != 1 or ends[0] < starts[0]:
        raise SystemExit(f"{path}: expected exactly one region {begin!r} ... {end!r}")
    return "".join(lines[: starts[0] + 1]) + body + "".join(lines[ends[0]:])


def _wrap_words(items: list[str], indent: str, width: int = 96) -> str:
    return "\n".join(textwrap.wrap(" ".join(items), width=width, initial_indent=indent,
                                   subsequent_indent=indent, break_on_hyphens=False,
                                   break_long_words=False)) + "\n"


# --- the Pygments fallback lists -------------------------------------------------------------
def gen_highlight(text: str, cats: dict[str, tuple[str, ...]]) -> str:
    def tup(name: str, words: tuple[str, ...]) -> str:
        return f"{name} = (\n" + _wrap_words([f'"{w}",' for w in words], "    ") + ")\n"

    body = (tup("FALLBACK_KEYWORDS", cats["keywords"]) + tup("FALLBACK_BUILTINS", cats["builtins"])
            + tup("FALLBACK_DTYPES", cats["dtypes"]))
    return replace_region(text, "# BEGIN GENERATED fallback", "# END GENERATED fallback", body,
                          HIGHLIGHT_PY)


# --- the TextMate grammar --------------------------------------------------------------------
def tm_words_regex(words: tuple[str, ...]) -> str:
    if not words:
        return "(?!x)x"  # matches nothing
    return r"\b(?:" + "|".join(sorted(words, key=lambda w: (-len(w), w))) + r")\b"


def gen_tm(text: str, cats: dict[str, tuple[str, ...]]) -> str:
    grammar = json.loads(text)
    repo = grammar.setdefault("repository", {})
    for key, (cat, scope) in TM_WORD_RULES.items():
        repo[key] = {"name": scope, "match": tm_words_regex(cats[cat])}
    # `fn NAME` / `kernel NAME`: NAME is never a keyword.
    repo["declarations"] = {"patterns": [{
        "match": r"\b(fn|kernel)\s+(?!" + tm_words_regex(cats["keywords"])[2:]
                 + r")([A-Za-z_][A-Za-z0-9_]*)",
        "captures": {"1": {"name": "storage.type.function.tile"},
                     "2": {"name": "entity.name.function.tile"}},
    }]}
    return json.dumps(grammar, indent=2, ensure_ascii=False) + "\n"


# --- Vim -------------------------------------------------------------------------------------
def gen_vim(text: str, cats: dict[str, tuple[str, ...]]) -> str:
    out = []
    for group, cat in VIM_GROUPS.items():
        words = list(cats[cat])
        if not words:
            continue
        # `syn keyword` lines, wrapped with Vim's line continuation.
        chunks = textwrap.wrap(" ".join(words), width=80, break_on_hyphens=False,
                               break_long_words=False)
        out.append(f"syn keyword {group} {VIM_GROUP_OPTIONS.get(group, '')}{chunks[0]}\n")
        out.extend(f"      \\ {c}\n" for c in chunks[1:])
    return replace_region(text, '" BEGIN GENERATED', '" END GENERATED', "".join(out), VIM_SYNTAX)


# --- Emacs -----------------------------------------------------------------------------------
def _elisp_strings(words: tuple[str, ...], indent: str) -> str:
    return _wrap_words([f'"{w}"' for w in words], indent, width=90).rstrip("\n")


def gen_emacs(text: str, cats: dict[str, tuple[str, ...]]) -> str:
    out = ["(defconst tile-keyword-groups\n  '("]
    groups = [g for g in hl.KEYWORD_GROUPS]
    for i, g in enumerate(groups):
        words = " ".join(f'"{w}"' for w in cats[g])
        sep = " " if words else ""
        lead = "" if i == 0 else "    "
        out.append(f"{lead}({g}{sep}{words})" + (")" if i == len(groups) - 1 else "") + "\n")
    out.append('  "Tile keywords by highlighting group (from the grammar).")\n')
    for name, cat in EMACS_LISTS.items():
        out.append(f"(defconst {name}\n  '(\n{_elisp_strings(cats[cat], '    ')})\n"
                   f'  "Tile {cat.replace("-", " ")} (generated).")\n')
    return replace_region(text, ";; BEGIN GENERATED", ";; END GENERATED", "".join(out), EMACS_MODE)


TARGETS = [
    (HIGHLIGHT_PY, gen_highlight),
    (TM_GRAMMAR, gen_tm),
    (VIM_SYNTAX, gen_vim),
    (EMACS_MODE, gen_emacs),
]


def generate() -> dict[pathlib.Path, tuple[str, str]]:
    """``{path: (current text, generated text)}`` for every target file."""
    cats = categories()
    result = {}
    for path, fn in TARGETS:
        old = path.read_text(encoding="utf-8")
        result[path] = (old, fn(old, cats))
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="only report stale files (exit 1)")
    args = ap.parse_args(argv)
    stale = 0
    for path, (old, new) in generate().items():
        if old == new:
            continue
        stale += 1
        rel = path.relative_to(ROOT)
        if args.check:
            sys.stdout.writelines(difflib.unified_diff(
                old.splitlines(keepends=True), new.splitlines(keepends=True),
                f"a/{rel}", f"b/{rel}"))
        else:
            path.write_text(new, encoding="utf-8")
            print(f"rewrote {rel}")
    if args.check and stale:
        print(f"{stale} file(s) out of date: run python3 editors/generate.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
