"""Control flow: bra, ret, exit, trap (the executor does the work; these only classify)."""

from __future__ import annotations

from .decode import op


@op("bra")
def build_bra(ctx, ins, parts):
    return {"run": None, "ctrl": "bra"}


@op("brx")
def build_brx(ctx, ins, parts):
    from .ptx_ast import Sym
    from .ptx_types import type_info
    if len(ins.operands) != 2 or not isinstance(ins.operands[1], Sym):
        ctx.error("brx.idx takes an index and a .branchtargets label")
    table = ctx.fn.branchtargets.get(ins.operands[1].name)
    if table is None:
        ctx.error(f"{ins.operands[1].name} is not a .branchtargets list")
    base = ctx.prog.entry[ctx.fn.name]
    for lab in table:
        if lab not in ctx.fn.labels:
            ctx.error(f"undefined label {lab}")
    targets = tuple(base + ctx.fn.labels[lab] for lab in table)
    return {"run": None, "ctrl": "brx", "targets": targets,
            "index": ctx.src(ins.operands[0], type_info("u32"))}


@op("ret")
def build_ret(ctx, ins, parts):
    return {"run": None, "ctrl": "ret"}


@op("exit")
def build_exit(ctx, ins, parts):
    return {"run": None, "ctrl": "exit"}


@op("trap")
def build_trap(ctx, ins, parts):
    return {"run": None, "ctrl": "trap"}
