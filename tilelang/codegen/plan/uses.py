"""Use counts: how many times each value of a kernel is an operand (nested regions
included). A value used once can move to its one use (a deferred product operand, a
streamed tile); the streams and products passes ask."""

from __future__ import annotations

from typing import Mapping

from tilelang.ir.ops import Kernel, walk
from tilelang.record import record


@record(frozen=True)
class UseCounts:
    counts: Mapping[int, int]

    def get(self, vid: int, default: int = 0) -> int:
        return self.counts.get(vid, default)


def count_uses(kernel: Kernel) -> UseCounts:
    got: dict[int, int] = {}
    for op in walk(kernel.body):
        for v in op.operands:
            got[v.id] = got.get(v.id, 0) + 1
    return UseCounts(got)
