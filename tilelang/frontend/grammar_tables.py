"""The parser's LALR tables as plain JSON data, shipped next to the grammar.

Building the tables from `grammar/tile.lark` takes a noticeable part of a second, so they are
generated once (`python -m tilelang.frontend.grammar_tables`) into `grammar/tile.tables.json`
and loaded from there. The file holds only strings, numbers, lists and dicts: loading it can
run no code, unlike a pickle cache, and nothing is ever read from or written to a cache folder.
Its key is a hash of the grammar text and the Lark version; when either differs (an edited
grammar, another Lark) the file is ignored and the parser is built from the grammar in memory.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

import lark
from lark.grammar import Rule
from lark.lexer import TerminalDef

from .resources import grammar_dir, grammar_path

TABLES_FILE = "tile.tables.json"
FORMAT = 1
# The options the parser is built with; part of the key, since they shape the tables.
OPTIONS = dict(parser="lalr", lexer="basic", propagate_positions=True, maybe_placeholders=False)

# JSON has no tuples and only string keys; Lark's tables have both. Tag them so that loading
# gives back exactly what was saved.
_TUPLE, _INT_KEYS = "\x00tuple", "\x00int-keys"


def key(grammar: str) -> str:
    h = hashlib.sha256()
    for part in (str(FORMAT), lark.__version__, json.dumps(OPTIONS, sort_keys=True), grammar):
        h.update(part.encode("utf-8") + b"\x00")
    return h.hexdigest()


def grammar_sha256(grammar: str) -> str:
    return hashlib.sha256(grammar.encode("utf-8")).hexdigest()


def _encode(x: object) -> object:
    if isinstance(x, tuple):
        return {_TUPLE: [_encode(v) for v in x]}
    if isinstance(x, list):
        return [_encode(v) for v in x]
    if isinstance(x, dict):
        if all(isinstance(k, str) for k in x):
            return {k: _encode(v) for k, v in x.items()}
        if all(isinstance(k, int) and not isinstance(k, bool) for k in x):
            return {_INT_KEYS: [[k, _encode(v)] for k, v in x.items()]}
        raise TypeError("a table with mixed keys")
    if x is None or isinstance(x, (str, int, float, bool)):
        return x
    raise TypeError(f"cannot store a {type(x).__name__} in the parser tables")


def _decode(d: dict) -> object:
    if len(d) == 1:
        if _TUPLE in d:
            return tuple(d[_TUPLE])
        if _INT_KEYS in d:
            return {k: v for k, v in d[_INT_KEYS]}
    return d


def build(grammar: str) -> lark.Lark:
    """The parser built from the grammar text (no cache of any kind)."""
    return lark.Lark(grammar, **OPTIONS)


def dump(parser: lark.Lark, grammar: str) -> str:
    """The JSON text of the tables file for `parser`, built from `grammar`."""
    data, memo = parser.memo_serialize([TerminalDef, Rule])
    doc = {"key": key(grammar), "lark": lark.__version__, "data": _encode(data),
           "memo": _encode(memo), "grammar_sha256": grammar_sha256(grammar)}
    return json.dumps(doc, separators=(",", ":"), sort_keys=True) + "\n"


def load(text: str, grammar: str) -> lark.Lark | None:
    """The parser from a tables file's text, or None when it was made for another grammar,
    another Lark or is damaged."""
    try:
        doc = json.loads(text, object_hook=_decode)
        if not isinstance(doc, dict) or doc.get("key") != key(grammar):
            return None
        return lark.Lark._load_from_dict(doc["data"], doc["memo"])
    except Exception:  # noqa: BLE001 - a damaged file only costs the build from the grammar
        return None


def tables_path() -> str:
    return os.path.join(grammar_dir(), TABLES_FILE)


def parser_for(grammar: str) -> lark.Lark:
    """The shipped tables when they match `grammar`; otherwise built from it in memory."""
    try:
        with open(tables_path(), encoding="utf-8") as f:
            text = f.read()
    except OSError:  # not shipped: build it
        text = ""
    return (load(text, grammar) if text else None) or build(grammar)


def fingerprint(parser: lark.Lark) -> str:
    """A hash of what the parser does, independent of how Lark happened to number its states
    (which varies from run to run): the terminals, the ignored ones, and the LALR automaton with
    its states numbered in the order a walk from the start states reaches them."""
    table = parser.parser.parser._parse_table
    starts = sorted(table.start_states.items())
    order = {state: n for n, (_, state) in enumerate(starts)}
    queue = [state for _, state in starts]
    states = []
    while queue:
        state = queue.pop(0)
        row = []
        for tok, (action, arg) in sorted(table.states[state].items()):
            if isinstance(arg, Rule):
                o = arg.options
                row.append((tok, "reduce", arg.origin.name, [x.name for x in arg.expansion],
                            arg.alias, arg.order, o.keep_all_tokens, o.expand1, o.priority,
                            list(o.empty_indices)))
            else:
                if arg not in order:
                    order[arg] = len(order)
                    queue.append(arg)
                row.append((tok, "shift", order[arg]))
        states.append(row)
    terms = sorted((t.name, t.pattern.type, t.pattern.value, sorted(t.pattern.flags), t.priority)
                   for t in parser.terminals)
    doc = {"starts": [(name, order[s]) for name, s in starts],
           "ends": sorted((name, order.get(s, -1)) for name, s in table.end_states.items()),
           "states": states, "terminals": terms, "ignore": sorted(parser.lexer_conf.ignore),
           "options": OPTIONS}
    return hashlib.sha256(json.dumps(doc, default=str).encode()).hexdigest()


def main(argv: list[str] | None = None) -> int:
    """Regenerate (or with --check, verify) the tables file from the grammar."""
    args = sys.argv[1:] if argv is None else argv
    if os.environ.get("PYTHONHASHSEED") != "0":
        # Lark numbers the states in set order: a fixed hash seed makes the file reproducible.
        env = {**os.environ, "PYTHONHASHSEED": "0"}
        return subprocess.call([sys.executable, "-m", "tilelang.frontend.grammar_tables", *args],
                               env=env)
    with open(grammar_path(), encoding="utf-8") as f:
        grammar = f.read()
    built = build(grammar)
    path = tables_path()
    if "--check" in args:
        try:
            with open(path, encoding="utf-8") as f:
                shipped = load(f.read(), grammar)
        except OSError:
            shipped = None
        same = shipped is not None and fingerprint(shipped) == fingerprint(built)
        print(f"{path}: " + ("up to date" if same else
                             "STALE: run python -m tilelang.frontend.grammar_tables"))
        return 0 if same else 1
    text = dump(built, grammar)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"wrote {path} ({len(text)} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
