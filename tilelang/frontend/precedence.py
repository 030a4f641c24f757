"""The expression operators by precedence: the one table the fast parser (`descent`) reads.

The grammar (`grammar/tile.lark`) spells the same order as a chain of rules, one per level;
tests/frontend/test_fast_parser.py derives that chain from the grammar and checks it against
this table, so the two cannot drift apart.
"""

from __future__ import annotations

# Lowest first: (the grammar rule of the level, its operators, how they combine).
# "left": left-associative binary; "prefix": a unary operator; "none": no chaining
# (`a < b < c` is an error); "right": `**`, whose right operand is a `factor`.
LEVELS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("or_test", ("or",), "left"),
    ("and_test", ("and",), "left"),
    ("not_test", ("not",), "prefix"),
    ("comparison", ("==", "!=", "<=", ">=", "<", ">"), "none"),
    ("bit_or", ("|",), "left"),
    ("bit_xor", ("^",), "left"),
    ("bit_and", ("&",), "left"),
    ("shift", ("<<", ">>"), "left"),
    ("arith", ("+", "-"), "left"),
    ("term", ("*", "@", "/", "%"), "left"),
    ("factor", ("+", "-", "~"), "prefix"),
    ("power", ("**",), "right"),
)

# Binding power of each infix operator of the left-associative and comparison levels (1 = or).
INFIX: dict[str, int] = {op: n for n, (_, ops, how) in enumerate(LEVELS, 1)
                         if how in ("left", "none") for op in ops}
NOT_LEVEL = next(n for n, (rule, _, _) in enumerate(LEVELS, 1) if rule == "not_test")
COMPARE_LEVEL = next(n for n, (_, _, how) in enumerate(LEVELS, 1) if how == "none")
OR_LEVEL, AND_LEVEL = INFIX["or"], INFIX["and"]
PREFIX: frozenset[str] = frozenset(next(ops for rule, ops, _ in LEVELS if rule == "factor"))
