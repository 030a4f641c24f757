"""SSA values of the Tile IR.

A value is defined exactly once (an op result, a block argument or a kernel parameter) and
typed with the checker's types: `TileType` (a scalar is a 0-d tile) or `ArrayType` (kernel
parameters only). Loose constants never become values: they stay inline in the operation that
uses them (see `args.py`), exactly as the checker saw them.
"""

from __future__ import annotations

from tilelang.record import field, record
from tilelang.sema.types import Type


@record(frozen=True)
class Value:
    """An SSA value. `id` is unique within a module (the builder's counter); `hint` is the
    source name (`acc`, a parameter's name), kept for the printer and ignored by equality."""

    id: int
    type: Type
    hint: str = field(default="", compare=False)

    def __hash__(self) -> int:
        # equal values have the same id: hashing it alone spares hashing the type (values key
        # the verifier's, the passes' and code generation's tables)
        return hash(self.id)

    def __repr__(self) -> str:
        return f"%v{self.id}:{self.type}"
