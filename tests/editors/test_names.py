"""One source of truth: every highlighter (Pygments, the TextMate grammar, the Vim syntax, the
Emacs mode) highlights exactly the grammar's keywords, the type system's dtypes and the
registry's built-ins -- none missing, none invented -- and the generated regions of the editor
files are what editors/generate.py writes.

The word lists are read back from each file by parsing it here, independently of the generator.
"""

from __future__ import annotations

import json
import re

import pytest
from pygments.token import Keyword, Name, Operator

from editor_helpers import EDITORS, ROOT, load_generator
from tilelang import highlight as hl

TM = EDITORS / "vscode" / "syntaxes" / "tile.tmLanguage.json"
VIM = EDITORS / "vim" / "syntax" / "tile.vim"
EMACS = EDITORS / "emacs" / "tile-mode.el"


# --- the sources of truth ------------------------------------------------------------------
def truth_keywords() -> set[str]:
    kws = hl.grammar_keywords()
    if kws is None:
        pytest.skip("grammar not written yet")
    return set(kws)


def truth_builtins() -> set[str]:
    try:
        from tilelang.sema.builtins import builtin_names
    except ImportError as e:
        if getattr(e, "name", "") == "tilelang.sema.builtins":
            pytest.skip("builtin registry (tilelang.sema.builtins) not written yet")
        raise
    # dtypes double as strict constructors (i16(5)) and are highlighted as types.
    return set(builtin_names()) - truth_dtypes() - set(hl.TYPE_CONSTRUCTORS) - set(hl.FLOAT_WORDS)


def truth_dtypes() -> set[str]:
    from tilelang.sema.types import DTYPES

    return set(DTYPES)


# --- what each highlighter highlights, parsed from its files -------------------------------
def tm_words() -> dict[str, set[str]]:
    """{category: words} from the TextMate grammar's `\\b(?:a|b|c)\\b` rules, by scope."""
    repo = json.loads(TM.read_text(encoding="utf-8"))["repository"]
    by_scope: dict[str, set[str]] = {}

    def collect(rule):
        m = re.fullmatch(r"\\b\(\?:([A-Za-z0-9_|]+)\)\\b", rule.get("match", ""))
        if m:
            by_scope.setdefault(rule["name"], set()).update(m.group(1).split("|"))
        for sub in rule.get("patterns", []):
            collect(sub)

    for rule in repo.values():
        collect(rule)
    cats = {"keywords": set(), "dtypes": set(), "builtins": set()}
    for scope, words in by_scope.items():
        if scope == "keyword.other.todo.tile":  # TODO/FIXME markers inside comments
            continue
        if scope.startswith(("keyword.", "storage.", "constant.language.boolean")):
            cats["keywords"] |= words
        elif scope == "support.type.primitive.tile":
            cats["dtypes"] |= words
        elif scope == "support.function.builtin.tile":
            cats["builtins"] |= words
    return cats


def vim_words() -> dict[str, set[str]]:
    """{category: words} from the `syn keyword` lines of the Vim syntax file."""
    text = VIM.read_text(encoding="utf-8")
    text = re.sub(r"\n\s*\\", " ", text)  # join continuation lines
    groups: dict[str, set[str]] = {}
    for m in re.finditer(r"^syn(?:tax)? keyword (\w+) (.*)$", text, re.M):
        words = [w for w in m.group(2).split()
                 if "=" not in w and w not in {"contained", "skipwhite", "skipnl", "skipempty",
                                               "transparent"}]
        groups.setdefault(m.group(1), set()).update(words)
    keyword_groups = {"tileDeclaration", "tileStorage", "tileModifier", "tileConditional",
                      "tileRepeat", "tileJump", "tileInclude", "tileOperatorWord",
                      "tileBoolean", "tileKeyword"}
    return {
        "keywords": set().union(*(groups.get(g, set()) for g in keyword_groups)),
        "dtypes": groups.get("tileType", set()),
        "builtins": groups.get("tileBuiltin", set()),
    }


def emacs_words() -> dict[str, set[str]]:
    """{category: words} from the constants of the Emacs mode."""
    text = EMACS.read_text(encoding="utf-8")

    def defconst(name: str) -> str:
        m = re.search(r"\(defconst " + re.escape(name) + r"\s+'(\((?:[^()]|\([^()]*\))*\))",
                      text)
        assert m, f"{name} not in tile-mode.el"
        return m.group(1)

    return {
        "keywords": set(re.findall(r'"([^"]+)"', defconst("tile-keyword-groups"))),
        "dtypes": set(re.findall(r'"([^"]+)"', defconst("tile-dtypes"))),
        "builtins": set(re.findall(r'"([^"]+)"', defconst("tile-builtins"))),
    }


def pygments_words() -> dict[str, set[str]]:
    from tilelang.highlight import TileLexer

    return {"keywords": set(TileLexer.KEYWORDS), "dtypes": set(TileLexer.DTYPES),
            "builtins": set(TileLexer.BUILTINS)}


HIGHLIGHTERS = {"pygments": pygments_words, "textmate": tm_words, "vim": vim_words,
                "emacs": emacs_words}
TRUTH = {"keywords": truth_keywords, "dtypes": truth_dtypes, "builtins": truth_builtins}


@pytest.mark.parametrize("category", sorted(TRUTH))
@pytest.mark.parametrize("highlighter", sorted(HIGHLIGHTERS))
def test_highlighter_matches_source_of_truth(highlighter, category):
    truth = TRUTH[category]()
    got = HIGHLIGHTERS[highlighter]()[category]
    assert not truth - got, f"{highlighter} misses {category}: {sorted(truth - got)}"
    assert not got - truth, f"{highlighter} invents {category}: {sorted(got - truth)}"


@pytest.mark.parametrize("category", sorted(TRUTH))
def test_fallback_lists_match_source_of_truth(category):
    """The fallback lists used while a source is missing are kept equal to the source."""
    truth = TRUTH[category]()
    fallback = {"keywords": hl.FALLBACK_KEYWORDS, "dtypes": hl.FALLBACK_DTYPES,
                "builtins": hl.FALLBACK_BUILTINS}[category]
    assert set(fallback) == truth


def test_pygments_classifies_each_word():
    """Each keyword, dtype and built-in lexes alone as one token of its category."""
    lexer = hl.TileLexer(stripnl=False, ensurenl=False)

    def only(word):
        toks = list(lexer.get_tokens(word))
        assert len(toks) == 1 and toks[0][1] == word, toks
        return toks[0][0]

    for w in truth_keywords():
        assert only(w) in Keyword or only(w) is Operator.Word, w
    for w in truth_dtypes():
        assert only(w) is Keyword.Type, w
    for w in truth_builtins():
        assert only(w) is Name.Builtin, w
    for w in ("kernels", "fn_", "f33", "sums", "_load"):
        assert only(w) is Name, w


def test_grammar_keywords_are_parsed_from_the_grammar():
    """The keyword reader takes exactly the quoted word terminals of the grammar."""
    text = hl.GRAMMAR_PATH.read_text(encoding="utf-8") if hl.GRAMMAR_PATH.exists() else None
    if text is None:
        pytest.skip("grammar not written yet")
    kws = truth_keywords()
    for kw in kws:
        assert f'"{kw}"' in text
    # the keywords of the language reference (§2) are all there
    assert {"kernel", "fn", "let", "var", "const", "if", "else", "for", "in", "while", "break",
            "continue", "return", "import", "from", "as", "and", "or", "not", "true", "false",
            "static"} <= kws


def test_grammar_reader_handles_comments_and_regexps(tmp_path):
    g = tmp_path / "g.lark"
    g.write_text('// "commented" out\nstart: "alpha" NAME "+" "beta"i  // "gamma"\n'
                 'NAME: /[a-z"]+/ | "delta"\nX: "f32" | "inf"\n', encoding="utf-8")
    assert hl.grammar_keywords(g) == ("alpha", "beta", "delta")
    assert hl.grammar_keywords(tmp_path / "missing.lark") is None


def test_generated_files_are_up_to_date():
    """Running editors/generate.py yields no diff."""
    gen = load_generator()
    stale = [str(p.relative_to(ROOT)) for p, (old, new) in gen.generate().items() if old != new]
    assert not stale, f"stale generated regions in {stale}: run python3 editors/generate.py"


def test_generator_rewrites_a_stale_region(tmp_path):
    """The generator replaces a region's content wholesale (a removed word comes back, an
    invented one goes)."""
    gen = load_generator()
    cats = gen.categories()
    vim = VIM.read_text(encoding="utf-8")
    broken = vim.replace("syn keyword tileRepeat for in while", "syn keyword tileRepeat for bogus")
    assert broken != vim
    assert gen.gen_vim(broken, cats) == vim
    el = EMACS.read_text(encoding="utf-8")
    broken = el.replace('(repeat "for" "in" "while")', '(repeat "for" "bogus")')
    assert broken != el
    assert gen.gen_emacs(broken, cats) == el
    tm = json.loads(TM.read_text(encoding="utf-8"))
    tm["repository"]["builtins"]["match"] = r"\b(?:bogus)\b"
    assert gen.gen_tm(json.dumps(tm), cats) == TM.read_text(encoding="utf-8")
