"""The `cp` opcode family: plain `cp.async` copies and their groups, the mbarrier arrive that
lands them, and the bulk / tensor copies (TMA), each built by its own module."""

from __future__ import annotations

from .decode import op
from .ops_async import build_cp_async, build_cp_async_group
from .ops_bulk import build_bulk
from .ops_mbarrier import build_cp_async_arrive


@op("cp")
def build_cp(ctx, ins, parts):
    if len(parts) < 3 or parts[1] != "async":
        ctx.error(f"unsupported instruction {ins.opcode}")
    rest = parts[2:]
    if rest[0] in ("commit_group", "wait_group", "wait_all"):
        return build_cp_async_group(ctx, ins, parts)
    if rest[0] == "mbarrier":
        return build_cp_async_arrive(ctx, ins, parts)
    if rest[0] == "bulk":
        return build_bulk(ctx, ins, parts)
    return build_cp_async(ctx, ins, parts)
