"""The parsers' limits: how many syntax errors one parse reports, the Python stack they may
use, and the refusal of nesting deeper than that.

The fast parser recurses a few frames per level of nesting. It runs with the recursion limit
raised to `PARSE_FRAMES`, which takes it deeper than any later stage can follow at the
process's own limit: every stage after it recurses at least once per level (docs/frontend.md).
So text it cannot parse within that stack is refused at once (E0112) instead of being parsed
again on the Lark path, which would spend seconds (quadratic time on an unclosed nest) to reach
the same answer. `NestingTooDeep` is a `RecursionError`, so every caller that already maps a
`RecursionError` to E0112 answers it unchanged.
"""

from __future__ import annotations

import contextlib
import sys
import threading

# Syntax errors one parse reports before it stops (both parsers' paths, the language server's)
MAX_ERRORS = 20

# Python frames the fast parser may use: about 1,000 nested `if` blocks or 740 nested
# parentheses, several times what the checker follows at Python's default limit of 1,000 (250
# nested `if`s; the Lark path followed 490 parentheses). Lower would refuse programs the checker
# accepts; higher makes the Lark path's error recovery, quadratic in the nesting depth, slower
# on a broken file nested just below it. Python 3.10 keeps a C frame per Python call: this is
# far below what an 8 MiB thread stack holds.
PARSE_FRAMES = 3000

_LIMIT_LOCK = threading.Lock()
_raised = 0                  # callers inside deep_recursion, in any thread
_saved_limit = 0


class NestingTooDeep(RecursionError):
    """The source nests deeper than the fast parser's stack: refused (E0112), never reparsed."""


@contextlib.contextmanager
def deep_recursion(limit: int):
    """Run with the recursion limit at least `limit`. The limit is the process's: the first
    caller raises it and the last one restores it, so calls in several threads (the language
    server's) never leave it raised or lower it under one another."""
    global _raised, _saved_limit
    with _LIMIT_LOCK:
        if _raised == 0:
            _saved_limit = sys.getrecursionlimit()
            sys.setrecursionlimit(max(_saved_limit, limit))
        elif sys.getrecursionlimit() < limit:
            sys.setrecursionlimit(limit)
        _raised += 1
    try:
        yield
    finally:
        with _LIMIT_LOCK:
            _raised -= 1
            if _raised == 0:
                sys.setrecursionlimit(_saved_limit)
