#!/usr/bin/env python3
"""Regenerate the generated tables (built-ins, dtypes, promotion, diagnostic codes) of docs/language.md from the compiler itself.

    python3 docs/gen_builtins.py            rewrite docs/language.md in place
    python3 docs/gen_builtins.py --check    exit 1 (and say which table) if a table is stale

Four tables are generated, each between a pair of HTML-comment markers:

- `<!-- builtins:begin -->` ... `<!-- builtins:end -->`: every named built-in operation of the
  registry (`tilelang.sema.builtins.BUILTINS`), grouped in `GROUPS` order, with its signature
  and the one-line `doc` of its entry, followed by the operator entries (`OPERATORS`);
- `<!-- dtypes:begin -->` ... `<!-- dtypes:end -->`: the dtypes of `tilelang.sema.types`;
- `<!-- promotion:begin -->` ... `<!-- promotion:end -->`: `promotion.promote` for every pair
  of non-restricted dtypes and `promote_loose` against loose constants;
- `<!-- codes:begin -->` ... `<!-- codes:end -->`: every registered diagnostic code with its
  one-line meaning (`tilelang.diagnostics.known_codes()`), after importing every stage that
  registers codes.

tests/frontend/test_docs.py fails when any table differs from what this script generates.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DOC = os.path.join(HERE, "language.md")

# Fallback group order (the registry's GROUPS wins); unlisted groups follow alphabetically.
GROUP_ORDER = ["grid", "memory", "creation", "shape", "dtype", "math", "reduce", "scan",
               "matmul", "debug"]
GROUP_TITLE = {"grid": "grid", "memory": "memory", "creation": "creation", "shape": "shape",
               "dtype": "dtype", "math": "element-wise math", "reduce": "reduction",
               "scan": "scan", "matmul": "matrix product", "debug": "debug"}

# Packages whose modules register diagnostic codes at import time.
CODE_PACKAGES = ["tilelang.frontend", "tilelang.sema", "tilelang.ir", "tilelang.codegen",
                 "tilelang.runtime", "tilelang.aot"]


def _import_all(package: str, prefix: str = "") -> None:
    try:
        pkg = importlib.import_module(package)
    except ImportError:
        return
    # sub-packages too: codes registered in e.g. tilelang/codegen/target/link.py count
    for info in pkgutil.walk_packages(pkg.__path__, prefix=f"{package}."):
        if info.name.rpartition(".")[2].startswith(prefix):
            try:
                importlib.import_module(info.name)
            except ImportError:
                pass


def registry():
    """(named built-ins, operator table, group order) from `tilelang.sema.builtins`, the
    registry's public face (`BUILTINS`, `OPERATORS`, `GROUPS`)."""
    reg = importlib.import_module("tilelang.sema.builtins")
    _import_all("tilelang.sema", "builtins_")  # a group module not yet wired into the face
    core = importlib.import_module("tilelang.sema.builtins_core")
    named = dict(reg.BUILTINS)
    named.update({k: v for k, v in core.REGISTRY.items() if k not in named})
    order = list(getattr(reg, "GROUPS", GROUP_ORDER))
    return named, dict(reg.OPERATORS), order


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _grammar_operators() -> set[str]:
    """The operator spellings the grammar can produce (quoted punctuation of tile.lark)."""
    from tilelang.frontend.parser import grammar_text
    text = re.sub(r"^\s*//.*$", "", grammar_text(), flags=re.M)
    found = {m for m in re.findall(r'"([^"\w\s]+)"', text)}
    if {"[", "]"} <= found:
        found.add("[]")         # the subscript `A[i, j]` (the `[]` entry)
    return found


def builtins_table() -> str:
    named, ops, group_order = registry()
    groups: dict[str, list] = {}
    for b in named.values():
        groups.setdefault(b.group, []).append(b)
    order = [g for g in group_order if g in groups] + sorted(g for g in groups
                                                            if g not in group_order)
    lines = ["| group | signature | meaning |", "|---|---|---|"]
    for g in order:
        entries = groups[g]
        ctors = [b for b in entries if "dtype" in b.extra and b.params
                 and [p.name for p in b.params] == ["x"]]
        for b in entries:
            if b in ctors:
                continue
            lines.append(f"| {GROUP_TITLE.get(g, g)} | `{_cell(b.signature())}` | "
                         f"{_cell(b.doc)} |")
        if ctors:
            names = ", ".join(f"`{b.name}(x)`" for b in ctors)
            lines.append(f"| {GROUP_TITLE.get(g, g)} | {names} | strict constructors: the "
                         f"strictly typed constant of that dtype with the value `x` |")
    lines.append("")
    lines.append("Operators are entries of the same registry (`OPERATOR_TABLE`), typed like "
                 "calls of two parameters `a`, `b` (unary: `x`):")
    lines.append("")
    lines.append("| operator | entry | meaning |")
    lines.append("|---|---|---|")
    spellable = _grammar_operators()
    for key, b in ops.items():
        spelled = b.symbol or key
        shown = ("unary " if key.startswith("u") and len(key) > 1 else "") + spelled
        meaning = _cell(b.doc)
        if spelled not in spellable and not spelled.isidentifier():
            meaning += " — no source syntax: `//` starts a comment"
        lines.append(f"| `{_cell(shown)}` | `{b.name}` | {meaning} |")
    return "\n".join(lines)


def codes_table() -> str:
    for p in CODE_PACKAGES:
        _import_all(p)
    importlib.import_module("tilelang.driver")
    from tilelang.diagnostics import known_codes
    codes = known_codes()
    lines = ["| code | meaning |", "|---|---|"]
    for code in sorted(codes):
        lines.append(f"| {code} | {_cell(codes[code])} |")
    return "\n".join(lines)


def _fmt_num(v) -> str:
    if isinstance(v, float):
        return f"{v:.6g}" if v < 1e6 else f"{v:.4g}"
    return str(v)


def dtypes_table() -> str:
    from tilelang.sema import types as T
    lines = ["| dtype | kind | bits | range | notes |", "|---|---|---|---|---|"]
    for d in T.ALL_DTYPES:
        if d.is_bool:
            rng, note = "`false`, `true`", "stored as one byte"
        elif d.name == "f4e2m1x2":       # packed FP4: a byte of two codes
            rng, note = "two ±6", ("packed FP4: two f4e2m1 a byte, the even element in bits "
                                   "0-3 (§3.1.1)")
        elif d.is_int:
            rng, note = f"{d.min} … {d.max}", "signed" if d.signed else "unsigned"
        elif not d.signed:              # ue8m0, the MX scale
            rng, note = "2^-127 … 2^127", "a power of two 2^(c - 127) per byte, code 255 is NaN"
        else:
            rng = f"±{_fmt_num(d.max_finite)}"
            note = f"{d.exponent_bits}-bit exponent, {d.mantissa_bits}-bit fraction"
            if not d.has_inf:
                note += ", no infinity"
            if d.bits != d.itemsize * 8:
                note += f", stored in {d.itemsize * 8} bits"
        kind = {"bool": "bool", "int": "integer", "float": "float"}[d.category]
        if d.restricted:
            kind = "packed bytes" if d.name == "f4e2m1x2" else "restricted float"
        if d.name == "tf32":
            note += ", 32 bits in memory"
        lines.append(f"| `{d.name}` | {kind} | {d.bits} | {rng} | {note} |")
    return "\n".join(lines)


def promotion_table() -> str:
    from tilelang.diagnostics import TileError
    from tilelang.sema import types as T
    from tilelang.sema.promotion import promote, promote_loose
    ds = [d for d in T.ALL_DTYPES if not d.restricted]
    lines = ["| ⊕ | " + " | ".join(f"`{d}`" for d in ds) + " | loose int | loose float |",
             "|---|" + "---|" * (len(ds) + 2)]
    for a in ds:
        cells = []
        for b in ds:
            try:
                cells.append(f"`{promote(a, b, None)}`")
            except TileError as e:
                cells.append(e.code)
        cells.append(f"`{promote_loose(a, 'int')}`")
        cells.append(f"`{promote_loose(a, 'float')}`")
        lines.append(f"| `{a}` | " + " | ".join(cells) + " |")
    return "\n".join(lines)


TABLES = {"builtins": builtins_table, "codes": codes_table, "dtypes": dtypes_table,
          "promotion": promotion_table}


def _region(name: str) -> re.Pattern:
    return re.compile(rf"(<!-- {name}:begin -->\n)(.*?)(<!-- {name}:end -->)", re.S)


def render(text: str) -> str:
    """`text` with every generated table replaced by a fresh one."""
    for name, make in TABLES.items():
        pat = _region(name)
        if not pat.search(text):
            raise SystemExit(f"gen_builtins: markers for `{name}` not found in {DOC}")
        body = make()
        text = pat.sub(lambda m: m.group(1) + body + "\n" + m.group(3), text, count=1)
    return text


def stale(text: str) -> list[str]:
    """Names of the tables of `text` that differ from a fresh rendering."""
    fresh = render(text)
    return [n for n in TABLES
            if _region(n).search(text).group(2) != _region(n).search(fresh).group(2)]


def main(argv: list[str]) -> int:
    sys.path.insert(0, os.path.dirname(HERE))
    with open(DOC, encoding="utf-8") as f:
        text = f.read()
    if "--check" in argv:
        bad = stale(text)
        if bad:
            print(f"docs/language.md: stale table(s): {', '.join(bad)}; "
                  f"run `python3 docs/gen_builtins.py`", file=sys.stderr)
            return 1
        return 0
    new = render(text)
    if new != text:
        with open(DOC, "w", encoding="utf-8") as f:
            f.write(new)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
