"""The type of a combine function handed to `reduce`/`scan` (docs/language.md, "Reductions and
scans with a combine function").

The checker instantiates the user's `fn` (or a built-in such as `maximum`) on scalars of the
operand's element dtypes, once, and the built-in's typing rule sees only this record: the
dtypes of one state (`state`, one per operand tile) and of what the function returns for two
states (`results`, which must be the same for the reduction to be well typed). The IR carries
the inlined body beside it (tilelang/ir/args.py, `FnArg`).
"""

from __future__ import annotations

from tilelang.record import record


@record(frozen=True)
class CombineType:
    name: str                       # the function's name, for messages
    state: tuple                    # DType of each operand's element
    results: tuple                  # Type of each returned value (as the checker found them)

    def __str__(self) -> str:
        inner = ", ".join(str(d) for d in self.state)
        return f"fn {self.name}(({inner}), ({inner}))"
