"""Pygments lexer for the Tile language, and the word lists every editor highlighter shares.

The word lists have one source of truth each:

* keywords: the quoted word terminals of the grammar (``grammar/tile.lark``);
* built-in operations: ``tilelang.sema.builtins.builtin_names()``;
* dtypes: ``tilelang.sema.types.DTYPES`` (they double as strict-constant constructors,
  ``i16(5)``, but are highlighted as types everywhere).

They are read at import time.  Until the grammar or the registry exist (or if reading them
fails), the fallback lists below are used; ``editors/generate.py`` rewrites them, together with
the word lists in the VS Code, Vim and Emacs files, and ``tests/editors/test_names.py`` checks
that every highlighter agrees with the sources of truth.
"""

from __future__ import annotations

import functools
import pathlib
import re

from pygments.lexer import RegexLexer, bygroups, default, words
from pygments.token import (
    Comment,
    Error,
    Keyword,
    Name,
    Number,
    Operator,
    Punctuation,
    String,
    Whitespace,
)

__all__ = [
    "TileLexer",
    "keywords",
    "dtypes",
    "builtins",
    "keyword_groups",
    "grammar_keywords",
    "registry_builtins",
    "registry_dtypes",
    "GRAMMAR_PATH",
]

def _grammar_path() -> pathlib.Path:
    from .frontend.resources import grammar_path
    try:
        return pathlib.Path(grammar_path())
    except FileNotFoundError:  # an incomplete install: the fallback lists below apply
        return pathlib.Path(__file__).resolve().parent / "grammar" / "tile.lark"


GRAMMAR_PATH = _grammar_path()

# BEGIN GENERATED fallback (editors/generate.py rewrites this region; do not edit by hand)
FALLBACK_KEYWORDS = (
    "and", "as", "break", "const", "continue", "else", "false", "fn", "for", "from", "if",
    "import", "in", "kernel", "let", "not", "or", "return", "static", "true", "var", "while",
)
FALLBACK_BUILTINS = (
    "abs", "acos", "acosh", "arange", "argmax", "argmin", "argsort", "asin", "asinh", "assert",
    "astype", "atan", "atan2", "atanh", "atomic_add", "atomic_and", "atomic_cas", "atomic_max",
    "atomic_min", "atomic_or", "atomic_xchg", "atomic_xor", "barrier", "bid", "bitcast", "bits",
    "broadcast_to", "cat", "cbrt", "cdiv", "ceil", "cluster_rank", "cluster_size", "copysign",
    "cos", "cosh", "cumprod", "cumsum", "dim", "div", "erf", "exp", "exp2", "expand_dims",
    "expm1", "extract", "fence", "floor", "floordiv", "fma", "fmod", "full", "gather", "hypot",
    "is_floating", "is_integer", "is_none", "isfinite", "isinf", "isnan", "len", "list_item",
    "load", "log", "log10", "log1p", "log2", "matmul", "max", "maximum", "min", "minimum",
    "mma", "mma_scaled", "multimem_reduce", "multimem_store", "num_blocks", "num_tiles", "ones",
    "pad", "peer", "permute", "pow", "print", "prod", "rand", "randint", "randn", "rank",
    "reduce", "reshape", "rint", "round", "rsqrt", "scan", "scatter", "sigmoid", "sign",
    "signal", "sin", "sinh", "sort", "sqrt", "static_assert", "store", "stride", "sum", "take",
    "tan", "tanh", "topk", "transpose", "trunc", "unpack_f4", "wait_until", "where",
    "world_size", "zeros",
)
FALLBACK_DTYPES = (
    "bool", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "f16", "bf16", "f32", "f64",
    "tf32", "f8e4m3", "f8e5m2", "f4e2m1", "f6e2m3", "f6e3m2", "ue8m0", "f4e2m1x2",
)
# END GENERATED fallback

#: Type constructors: ``Tile[f32, 128, 64]``, ``Array[f16, 2]``, and the kernel parameter
#: wrappers ``Optional[Array[f32, 1]]``, ``List[Array[f16, 2]]``,
#: ``Symmetric[Array[f32, 1]]``.
TYPE_CONSTRUCTORS = ("Tile", "Array", "Optional", "List", "Symmetric")
#: Float literal words.
FLOAT_WORDS = ("inf", "nan")
#: Helpers that only appear inside attribute arguments (``by_target(sm_90a = 168, default = 128)``).
ATTRIBUTE_HELPERS = ("by_target",)
#: Attribute names (``@launch(...)``, ``@host``); any ``@name`` that starts a line is an
#: attribute as well.
ATTRIBUTES = ("launch", "host")

#: How the known keywords are highlighted.  A keyword the grammar adds that is not listed here
#: falls in ``"other"`` and is still highlighted as a keyword.
_KEYWORD_GROUP_OF = {
    "kernel": "declaration", "fn": "declaration",
    "let": "storage", "var": "storage", "const": "storage", "static": "modifier",
    "if": "conditional", "else": "conditional",
    "for": "repeat", "in": "repeat", "while": "repeat",
    "break": "jump", "continue": "jump", "return": "jump",
    "import": "namespace", "from": "namespace", "as": "namespace",
    "and": "operator", "or": "operator", "not": "operator",
    "true": "constant", "false": "constant",
}
KEYWORD_GROUPS = ("declaration", "storage", "modifier", "conditional", "repeat", "jump",
                  "namespace", "operator", "constant", "other")

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _lark_strings(text: str) -> list[str]:
    """The contents of the string literals of a Lark grammar, skipping ``//`` comments and
    ``/regexp/`` literals (which may contain quotes)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "/" and text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif c in "\"/":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            if c == '"':
                out.append(text[i + 1:j])
            i = j + 1
        else:
            i += 1
    return out


def grammar_keywords(path: pathlib.Path | str = GRAMMAR_PATH) -> tuple[str, ...] | None:
    """The keywords of the grammar: every quoted terminal that is a word, minus the dtypes, the
    type constructors and the float words (which the grammar may spell as quoted strings too,
    but which are highlighted as what they are).  ``None`` when the grammar does not exist."""
    path = pathlib.Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return None
    found = {s for s in _lark_strings(text) if _WORD.fullmatch(s)}
    found -= set(dtypes()) | set(TYPE_CONSTRUCTORS) | set(FLOAT_WORDS) | set(ATTRIBUTES)
    found -= set(ATTRIBUTE_HELPERS)
    return tuple(sorted(found))


def registry_builtins() -> tuple[str, ...] | None:
    """The names of ``tilelang.sema.builtins.builtin_names()`` that are not dtypes or keywords
    (strict constructors such as ``i16`` are highlighted as types).  ``None`` when the registry
    does not exist yet."""
    try:
        from tilelang.sema.builtins import builtin_names
    except ImportError:
        return None
    names = {str(n) for n in builtin_names()}
    kws = grammar_keywords() or FALLBACK_KEYWORDS
    names -= set(dtypes()) | set(TYPE_CONSTRUCTORS) | set(FLOAT_WORDS) | set(kws)
    return tuple(sorted(names))


@functools.lru_cache(maxsize=1)
def keywords() -> tuple[str, ...]:
    """The keywords from the grammar, or the fallback list while there is no grammar."""
    kws = grammar_keywords()
    return kws if kws else tuple(sorted(FALLBACK_KEYWORDS))


@functools.lru_cache(maxsize=1)
def builtins() -> tuple[str, ...]:
    """The built-in operation names from the registry, or the fallback list."""
    try:
        names = registry_builtins()
    except Exception:  # a broken registry must not break highlighting
        names = None
    return names if names else tuple(sorted(FALLBACK_BUILTINS))


def registry_dtypes() -> tuple[str, ...] | None:
    """The dtype names of ``tilelang.sema.types.DTYPES``; ``None`` when it does not exist."""
    try:
        from tilelang.sema.types import DTYPES as _dtypes
    except ImportError:
        return None
    return tuple(str(n) for n in _dtypes)


@functools.lru_cache(maxsize=1)
def dtypes() -> tuple[str, ...]:
    """The dtype names from the type system, or the fallback list."""
    try:
        names = registry_dtypes()
    except Exception:  # a broken module must not break highlighting
        names = None
    return names if names else tuple(FALLBACK_DTYPES)


def keyword_groups(kws: tuple[str, ...] | None = None) -> dict[str, tuple[str, ...]]:
    """Split keywords into highlighting groups (see ``KEYWORD_GROUPS``)."""
    groups: dict[str, list[str]] = {g: [] for g in KEYWORD_GROUPS}
    for kw in sorted(keywords() if kws is None else kws):
        groups[_KEYWORD_GROUP_OF.get(kw, "other")].append(kw)
    return {g: tuple(v) for g, v in groups.items()}


# --- number forms (the FLOAT / HEX_INT / BIN_INT / DEC_INT terminals of the grammar) --------
_DEC = r"[0-9](?:_?[0-9])*"
_EXP = r"[eE][+-]?" + _DEC
#: 1.0  2.5e-3  1e9  1_000.5  (the grammar has no `1.` or `.5` forms)
FLOAT_RE = rf"(?:{_DEC}\.{_DEC}(?:{_EXP})?|{_DEC}{_EXP})"
HEX_RE = r"0[xX](?:_?[0-9a-fA-F])+"
BIN_RE = r"0[bB](?:_?[01])+"
INT_RE = _DEC


def _token_rules():
    groups = keyword_groups()
    kw_token = {
        "declaration": Keyword.Declaration,
        "storage": Keyword.Declaration,
        "modifier": Keyword.Declaration,
        "conditional": Keyword,
        "repeat": Keyword,
        "jump": Keyword,
        "namespace": Keyword.Namespace,
        "operator": Operator.Word,
        "constant": Keyword.Constant,
        "other": Keyword,
    }
    word_rules = []
    for group, kws in groups.items():
        if kws:
            word_rules.append((words(kws, suffix=r"\b"), kw_token[group]))
    return word_rules


class TileLexer(RegexLexer):
    """Lexer for Tile, the block/tile GPU language (``*.tile``)."""

    name = "Tile"
    aliases = ["tile"]
    filenames = ["*.tile"]
    mimetypes = ["text/x-tile"]
    url = "https://github.com/tilelang/tilec"
    version_added = ""

    KEYWORDS = keywords()
    BUILTINS = builtins()
    DTYPES = dtypes()

    tokens = {
        "root": [
            # An attribute at the start of a line: @launch(...), @host.
            (r"(?m)^([ \t]*)(@)([A-Za-z_]\w*)", bygroups(Whitespace, Name.Decorator, Name.Decorator)),
            (r"\n", Whitespace),
            (r"[ \t\f\r\v]+", Whitespace),
            (r"//[^\n]*", Comment.Single),
            (r"/\*", Comment.Multiline, "block-comment"),
            (r'"', String.Double, "string"),
            # A known attribute anywhere (e.g. after another attribute on the same line).
            (words(ATTRIBUTES, prefix=r"(@)(", suffix=r")\b"), bygroups(Name.Decorator, Name.Decorator)),
            (FLOAT_RE, Number.Float),
            (HEX_RE, Number.Hex),
            (BIN_RE, Number.Bin),
            (INT_RE, Number.Integer),
            # Declarations name their function / kernel.
            (r"\b(fn|kernel)([ \t]+)(?!(?:" + "|".join(KEYWORDS) + r")\b)([A-Za-z_]\w*)",
             bygroups(Keyword.Declaration, Whitespace, Name.Function)),
            *_token_rules(),
            (words(DTYPES, suffix=r"\b"), Keyword.Type),
            (words(TYPE_CONSTRUCTORS, suffix=r"\b"), Keyword.Type),
            (words(FLOAT_WORDS, suffix=r"\b"), Number.Float),
            (words(ATTRIBUTE_HELPERS, suffix=r"\b"), Name.Builtin.Pseudo),
            (words(BUILTINS, suffix=r"\b"), Name.Builtin),
            # Member access: x.shape, x.astype(f16), math.tanh.
            (r"(\.)([A-Za-z_]\w*)", bygroups(Punctuation, Name.Attribute)),
            (r"[A-Za-z_]\w*", Name),
            # `//` always starts a comment (the grammar has no `//` operator).
            (r"\*\*=|<<=|>>=|->|\*\*|<<|>>|==|!=|<=|>=|[-+*/%&|^@]=", Operator),
            (r"[-+*/%&|^~<>=@]", Operator),
            (r"[.,;:()\[\]{}]", Punctuation),
        ],
        "block-comment": [
            (r"[^*]+", Comment.Multiline),
            (r"\*/", Comment.Multiline, "#pop"),
            (r"\*", Comment.Multiline),
        ],
        "string": [
            (r'\\(?:x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|[0-7]{1,3}|[abfnrtv\\"\'?])', String.Escape),
            (r"\\\n?", Error),  # an unknown escape, or a backslash at the end of a line
            (r'[^"\\\n]+', String.Double),
            (r'"', String.Double, "#pop"),
            (r"\n", Error, "#pop"),  # unterminated string: stop at the end of the line
            default("#pop"),
        ],
    }
