"""Control flow: bra, ret, exit, trap (the executor does the work; these only classify)."""

from __future__ import annotations

from .decode import op


@op("bra", "brx")
def build_bra(ctx, ins, parts):
    if parts[0] == "brx":
        ctx.error("brx.idx (indirect branch) is not supported")
    return {"run": None, "ctrl": "bra"}


@op("ret")
def build_ret(ctx, ins, parts):
    return {"run": None, "ctrl": "ret"}


@op("exit")
def build_exit(ctx, ins, parts):
    return {"run": None, "ctrl": "exit"}


@op("trap")
def build_trap(ctx, ins, parts):
    return {"run": None, "ctrl": "trap"}
