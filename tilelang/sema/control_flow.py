"""Returns from inside a run-time `if`: which `if`s of a function body return on every path, so
that the checker accepts them and the IR builder (tilelang/ir/build.py) inlines each as one
`if` that yields the returned value. Pure functions of the syntax tree.
"""

from __future__ import annotations

from ..frontend import ast


def returns_on_every_path(node) -> bool:
    """Whether every path through `node` (a statement or block) ends in `return`."""
    if isinstance(node, ast.Return):
        return True
    if isinstance(node, ast.Block):
        return any(returns_on_every_path(s) for s in node.stmts)
    if isinstance(node, ast.If):
        return node.orelse is not None and returns_on_every_path(node.then) and \
            returns_on_every_path(node.orelse)
    return False


def returning_else(s: ast.If, rest) -> tuple:
    """The statements the lowering puts in the else branch of a returning `if` followed by
    `rest`: its own else (an `else if` as one statement), then `rest` if that may fall out."""
    if s.orelse is None:
        return tuple(rest)
    if isinstance(s.orelse, ast.If):
        return (s.orelse,) + tuple(rest)
    return tuple(s.orelse.stmts) + (() if returns_on_every_path(s.orelse) else tuple(rest))


def liftable_ifs(stmts) -> frozenset:
    """The ids of the `if`s of a fn body that ir/build.py lowers as returning `if`s (its
    then-branch and its else branch with the rest of the body both return on every path),
    walking the statement lists as the lowering does."""
    out: set[int] = set()

    def walk(seq) -> None:
        seq = list(seq)
        for i, s in enumerate(seq):
            if isinstance(s, ast.If):
                other = returning_else(s, seq[i + 1:])
                if returns_on_every_path(s.then) and \
                        returns_on_every_path(ast.Block(other, s.span)):
                    out.add(id(s))
                    walk(s.then.stmts)
                    walk(other)
                    return
                walk(s.then.stmts)
                if isinstance(s.orelse, ast.If):
                    walk([s.orelse])
                elif s.orelse is not None:
                    walk(s.orelse.stmts)
            elif isinstance(s, ast.Block):
                walk(s.stmts)
            else:
                body = getattr(s, "body", None)
                if isinstance(body, ast.Block):
                    walk(body.stmts)
    walk(stmts)
    return frozenset(out)
