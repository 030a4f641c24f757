"""Reloads pass: which tiles are computed again from a second read of global memory after a
block reduction instead of being kept in registers across it (docs/codegen.md, Plans;
lower/reload.py explains why and why the results stay bit-identical).

Rules:
  R1 only top-level ops of the kernel body take part, and only plain tile loads are re-read;
  R2 at each top-level reduction whose reduced axes span several warps (it has a barrier),
     the tiles defined before it and used after it cost each thread about
     ceil(elements x words / threads) registers (scalars and a row's statistics, a register
     each, are not counted);
  R3 when that sum exceeds the budget — BUDGET (16: half the 32 registers a thread has at
     full occupancy) when one of the tiles has a math function to compute again, else
     CHEAP_BUDGET (8: a second read is a few instructions per vector) — those tiles are
     candidates, except one whose definition has an exact math function (`exp` in precision
     "ieee": computing it twice nearly doubles the kernel's instructions);
  R4 with every value their element-wise definition is computed from (plan/streams.py keeps
     whatever is still used outside its consumers).
"""

from __future__ import annotations

from math import ceil, prod

from tilelang.codegen.plan.inputs import PlanInputs
from tilelang.codegen.scalar.emitter import FLOAT_MATH
from tilelang.ir.ops import BuiltinOp, walk
from tilelang.ir.values import Value
from tilelang.record import record
from tilelang.sema.builtins_math import APPROXIMATED, PRECISIONS
from tilelang.sema.constants import ConstStr

BUDGET = 16                 # registers per thread live across a block reduction, see above
CHEAP_BUDGET = 8            # ... when none of those tiles has a math function to compute again
REDUCTIONS = ("sum", "prod", "max", "min", "argmax", "argmin")


@record(frozen=True)
class ReloadReason:
    """Why tile `value` is reloaded: it is live across block reduction `reduction` (the
    op's name and result id), where the live tiles cost `registers` per thread over
    `budget`."""

    value: int
    reduction: str
    reduction_result: int
    registers: int
    budget: int
    math: str | None            # "approx": computing it again repeats approximated math


@record(frozen=True)
class KeptReason:
    """A tile live across a reduction over budget that stays in registers: its definition
    has exact math (R3)."""

    value: int
    reduction: str
    reduction_result: int


@record(frozen=True)
class ReloadPlan:
    values: frozenset[int] = frozenset()    # the candidates and what they are computed from
    reasons: tuple[ReloadReason, ...] = ()  # the candidates themselves (R3)
    kept: tuple[KeptReason, ...] = ()


def plan_reloads(inputs: PlanInputs) -> ReloadPlan:
    ops = inputs.kernel.body.ops
    defined: dict[int, int] = {}
    last: dict[int, int] = {}
    for i, op in enumerate(ops):
        if getattr(op, "result", None) is not None:
            defined[op.result.id] = i
        for inner in [op, *(o for r in op.regions for o in walk(r))]:
            for v in inner.operands:
                last[v.id] = i              # a use in a nested region counts where it is
    out: set[int] = set()
    reasons: list[ReloadReason] = []
    kept: list[KeptReason] = []
    for i, op in enumerate(ops):
        if not (isinstance(op, BuiltinOp) and op.name in REDUCTIONS and
                _across_warps(inputs, op)):
            continue
        live = [vid for vid, p in defined.items() if p < i < last.get(vid, -1)]
        # tiles only: scalars and a row's statistics are a register each, held anyway (R2)
        cost = {vid: c for vid in live
                for c in [_registers(inputs, ops[defined[vid]].result)] if c > 1}
        math = {vid: _math(inputs, ops, defined, vid) for vid in cost}
        # a re-read alone is cheap; recomputing a math function costs its instructions again
        budget = BUDGET if any(math.values()) else CHEAP_BUDGET
        total = sum(cost.values())
        if total > budget:
            for vid in cost:
                if math[vid] == "exact":
                    kept.append(KeptReason(vid, op.name, op.result.id))
                    continue
                out.add(vid)
                reasons.append(ReloadReason(vid, op.name, op.result.id, total, budget,
                                            math[vid]))
    if not out:
        return ReloadPlan(frozenset(), (), tuple(kept))
    # with what they are computed from (R4): element-wise chains of loads
    todo, seen = list(out), set(out)
    while todo:
        op = ops[defined[todo.pop()]]
        for v in op.operands:
            if isinstance(v, Value) and v.id in defined and v.id not in seen and \
                    getattr(v.type, "shape", None):
                seen.add(v.id)
                todo.append(v.id)
    return ReloadPlan(frozenset(seen), tuple(reasons), tuple(kept))


def _approximates(inputs: PlanInputs, op_name: str, dtype, params) -> bool:
    """ScalarEmitter.approximates: whether the op runs a hardware approximation in its
    precision (its own `precision=`, else the kernel's)."""
    if not (dtype.is_float and 0 < dtype.bits <= 32):
        return False
    p = params.get("precision")
    if isinstance(p, ConstStr):
        p = p.value
    mode = p if p in PRECISIONS else inputs.precision
    return ("/" if op_name == "div" else op_name) in APPROXIMATED[mode]


def _math(inputs: PlanInputs, ops, defined: dict, vid: int) -> str | None:
    """The math functions computing v again would repeat per element: "exact" when one runs
    in an exact mode (`exp` in precision "ieee": a polynomial of some 25 instructions, where
    "fast" has `ex2.approx`), "approx" when there are only approximated ones, else None."""
    todo, seen, got = [vid], {vid}, None
    while todo:
        v = todo.pop()
        op = ops[defined[v]]
        if not isinstance(op, BuiltinOp):
            continue
        dt = getattr(op.result.type, "dtype", None)
        if op.name in FLOAT_MATH and dt is not None:
            if not _approximates(inputs, op.name, dt,
                                 {n: a for n, a in op.args if isinstance(a, ConstStr)}):
                return "exact"
            got = "approx"
        for a in op.operands:
            if a.id in defined and a.id not in seen and getattr(a.type, "shape", None):
                seen.add(a.id)
                todo.append(a.id)
    return got


def _registers(inputs: PlanInputs, v: Value) -> int:
    """Registers a thread holds for tile v, about: its share of the elements in 32-bit words."""
    shape = getattr(v.type, "shape", None)
    if not shape:
        return 1
    words = max(1, v.type.dtype.bits // 32)
    return ceil(prod(shape) * words / inputs.threads)


def _across_warps(inputs: PlanInputs, op: BuiltinOp) -> bool:
    """The reduction's reduced axes span warps in its input's default layout (a barrier)."""
    x = op.arg_map.get("x")
    shape = tuple(getattr(getattr(x, "type", None), "shape", ()) or ())
    if not shape:
        return False
    lay = inputs.layout_for(x.type)
    a = op.arg_map.get("axis")
    axes = range(len(shape)) if a is None else [inputs.const_ints(a)[0] % len(shape)]
    return any(basis[d] for basis in lay.warp for d in axes)
