"""Rule R11 of the loops pass (plan/loops.py): a key loop whose carried output stays in tensor
memory, FlashAttention-4's forward on sm_100a (docs/codegen.md, "Attention with S, P and O in
tensor memory"; the lowering is lower/tensorcore/tcgen05_attention.py).

A loop that is not pipelined keeps its carried value O in TMEM when
  - O is carried in the accumulator layout of a tcgen05 product P of M = 128 (R6), and the
    loop yields P's result itself;
  - P's accumulator is O, or `O * f` with f a (128, 1) row value, and neither O nor the
    product `O * f` has another use in the body;
  - P's A operand is a 16-bit register value (`astype(p, T)`: P packed into TMEM over the
    first K / 2 columns, which the kernel's other products use only inside their own
    lowering) and its B a value the product stages in shared memory;
  - the block is the four warps whose lane quarters cover the 128 rows, the body has no
    break or continue nor a loop with tcgen05 products, and O's columns (after the widest
    product's, at least 32) fit the 512 of an SM's tensor memory.
Loops that follow one another hand O on in TMEM: a resident loop whose result is used only as
the initial value of the next resident loop's O — later in the same block, with no resident
loop between them (not a loop run again by an outer one, which must start from the same
value each time) — leaves it there (`result_in_tmem`), and that loop does not store it again
(`init_in_tmem`).
"""

from __future__ import annotations

from tilelang.codegen.plan.products import ProductsPlan
from tilelang.ir.ops import BreakOp, BuiltinOp, ContinueOp, ForOp, WhileOp, YieldOp, walk
from tilelang.record import record, replace
from tilelang.sema.constants import ConstValue
from tilelang.targets import FEATURES

TMEM_COLUMNS = 512          # an SM's tensor memory: 128 lanes x 512 columns of 32 bits


@record(frozen=True)
class TmemResident:
    """One loop's output kept in tensor memory (R11)."""

    index: int                  # which carried value (and result) is O
    result: int                 # the loop's result for O
    carried: int                # O's value id inside the body
    product: int                # result id of P (O += A @ B, A = P through TMEM)
    rescale: int | None         # result id of `O * f` (P's accumulator), None: O itself
    factor: int | None          # value id of f
    o_column: int               # O's first TMEM column
    d: int                      # O's columns (its N)
    columns: int                # the kernel's TMEM allocation (a power of two)
    scores: tuple[int, ...] = ()    # the body's other tcgen05 products of M = 128 whose
                                    # accumulator is zeros (S): no store of the zeros, the
                                    # first k-step does not read the accumulator
    p_source: int | None = None     # P = astype(x, T) used by the product alone: x's id
                                    # (packed straight from f32, two to a cvt)
    p_cast: int | None = None       # ... and the astype's result, never materialized
    init_in_tmem: bool = False  # O's initial value is the previous resident loop's result
    result_in_tmem: bool = False    # the result only starts the next resident loop

    @property
    def values(self) -> frozenset:
        """The values that never live in registers (O inside the loop, its rescale and
        product, the loop's result when the next loop takes it over, a P packed from f32)."""
        ids = {self.carried, self.product} | {x for x in (self.rescale, self.p_cast)
                                              if x is not None}
        if self.result_in_tmem:
            ids.add(self.result)
        return frozenset(ids)

    def describe(self, name) -> str:
        how = "" if self.rescale is None else \
            f", {name(self.rescale)} rescaled on TMEM (skipped where the factor is 1)"
        hand = (" from the previous loop" if self.init_in_tmem else "") + \
            ("; left there for the next loop" if self.result_in_tmem else "")
        s = "".join(f"; S {name(x)} in columns 0.., not stored first (enable-input-d off)"
                    for x in self.scores)
        return (f"O resident in TMEM: carries {name(self.carried)} in columns "
                f"{self.o_column}..{self.o_column + self.d - 1} of {self.columns}{hand}; "
                f"{name(self.product)} takes A from TMEM (ts){how}{s} (R11)")


def _uses(ops, vid: int) -> list:
    return [o for o in ops if any(getattr(v, "id", None) == vid for v in o.operands)]


def resident(inputs, products: ProductsPlan, op: ForOp, carried: tuple) -> tuple:
    """(TmemResident or None, why not: "" when the rule does not concern the loop)."""
    if inputs.target.name not in FEATURES["tcgen05"].arch_targets or not carried:
        return None, ""
    # (imported here: plan/tensor_cores.py loads the wgmma layouts, which a kernel without
    # products never needs)
    from tilelang.codegen.plan.tensor_cores import TC5_THREADS
    if inputs.declared_threads != TC5_THREADS:
        # a producer and an MMA warp beside the four would replicate warps 0 and 1's lanes
        # outside their ring: their rescale of O would run twice
        return None, f"O not resident in TMEM: {inputs.declared_threads} threads (it takes " \
                     f"{TC5_THREADS})"
    term = op.body.terminator
    if not isinstance(term, YieldOp):
        return None, ""
    body = list(walk(op.body))
    if any(isinstance(o, (BreakOp, ContinueOp)) for o in body):
        return None, "O not resident in TMEM: the body breaks or continues"
    if any(isinstance(o, (ForOp, WhileOp)) and any(
            isinstance(x, BuiltinOp) and x.result is not None and
            x.result.id in products.by_result and products.by_result[x.result.id].plan
            is not None and products.by_result[x.result.id].plan.tc5 is not None
            for r in o.regions for x in walk(r)) for o in body):
        # an inner loop's products (or its own O) would share the tensor memory
        return None, "O not resident in TMEM: a loop in the body has tcgen05 products"
    defs = {o.result.id: o for o in body if isinstance(o, BuiltinOp) and o.result is not None}
    for i, (arg, c, yv) in enumerate(zip(op.carried, carried, term.values)):
        if c is None or c.product is None:
            continue
        p = defs.get(getattr(yv, "id", None))
        plan = products.by_result[p.result.id].plan if p is not None and \
            p.result.id in products.by_result else None
        if p is None or p.name != "mma" or plan is None or plan.tc5 is None:
            continue
        if plan.tc5.m != 128 or plan.scaled is not None:
            return None, f"O not resident in TMEM: M = {plan.tc5.m} (the ts form takes 128)"
        acc = p.arg_map["acc"]
        rescale = factor = None
        if getattr(acc, "id", None) != arg.id:
            m = defs.get(getattr(acc, "id", None))
            if m is None or m.name != "*":
                return None, "O not resident in TMEM: the accumulator is not O or O * f"
            xs = [m.arg_map["a"], m.arg_map["b"]]
            if getattr(xs[1], "id", None) == arg.id:
                xs.reverse()
            f = xs[1]
            if getattr(xs[0], "id", None) != arg.id or \
                    tuple(getattr(f.type, "shape", ()) or ()) != (128, 1) or \
                    getattr(f.type, "dtype", None) != m.result.type.dtype:
                return None, "O not resident in TMEM: the accumulator is not O * (a row value)"
            if len(_uses(body, m.result.id)) != 1:
                return None, "O not resident in TMEM: O * f has another use"
            rescale, factor = m.result.id, f.id
        if len(_uses(body, arg.id)) != 1:
            return None, "O not resident in TMEM: O has another use in the body"
        a = p.arg_map["a"]
        d = products.by_result[p.result.id]
        if d.deferred[0] or getattr(a.type, "dtype", None) is None or \
                a.type.dtype.name not in ("f16", "bf16"):
            return None, "O not resident in TMEM: A is not a 16-bit register value"
        k = a.type.shape[-1]
        o_col = max(32, products.tmem_columns, k // 2)
        n = plan.tc5.n
        cols = 32
        while cols < o_col + n:
            cols *= 2
        if cols > TMEM_COLUMNS:
            return None, f"O not resident in TMEM: {o_col + n} columns (of {TMEM_COLUMNS})"
        cast = defs.get(a.id)
        src = cast.arg_map["x"] if cast is not None and cast.name == "astype" else None
        p_src = src.id if src is not None and len(_uses(body, a.id)) == 1 and \
            getattr(src.type, "dtype", None) is not None and src.type.dtype.name == "f32" \
            else None
        return TmemResident(i, op.results[i].id, arg.id, p.result.id, rescale, factor,
                            o_col, n, cols, _scores(inputs, products, body, p), p_src,
                            a.id if p_src is not None else None), ""
    return None, ""


def _scores(inputs, products: ProductsPlan, body, p: BuiltinOp) -> tuple[int, ...]:
    """The products of `body` other than `p` on tcgen05 with M = 128 whose accumulator is
    a tile of zeros (`zeros` or `full` of 0): S = Q K^T."""
    defs = {o.result.id: o for o in walk(inputs.kernel.body)
            if isinstance(o, BuiltinOp) and o.result is not None}
    out = []
    for o in body:
        if not (isinstance(o, BuiltinOp) and o.name == "mma" and o is not p):
            continue
        d = products.by_result.get(o.result.id)
        plan = d.plan if d is not None else None
        if plan is None or plan.tc5 is None or plan.tc5.m != 128 or plan.scaled is not None:
            continue
        z = defs.get(getattr(o.arg_map["acc"], "id", None))
        if z is not None and (z.name == "zeros" or z.name == "full" and _zero(
                z.arg_map.get("value"))):
            out.append(o.result.id)
    return tuple(out)


def _zero(v) -> bool:
    return isinstance(v, ConstValue) and isinstance(v.value, (int, float)) and v.value == 0


def link(kernel_body, decisions: list) -> list:
    """Hand O from one resident loop to the next in TMEM (module docstring): `decisions` are
    (ForOp, LoopDecision) in program order; returns the decisions with the flags set."""
    uses: dict[int, list] = {}
    for o in walk(kernel_body):
        for v in getattr(o, "operands", ()):
            uses.setdefault(v.id, []).append(o)
    out = {id(op): d for op, d in decisions}
    resident = {id(op) for op, d in decisions if d.resident is not None}
    for op, d in decisions:
        r = d.resident
        if r is None:
            continue
        res = op.results[r.index].id
        users = uses.get(res, [])
        nxt = users[0] if len(users) == 1 and isinstance(users[0], ForOp) else None
        nd = out.get(id(nxt)) if nxt is not None else None
        if nd is None or nd.resident is None or not _straight(kernel_body, op, nxt, resident) \
                or \
                [v.id for v in nxt.init].count(res) != 1 or \
                nxt.init[nd.resident.index].id != res or \
                nd.resident.o_column != r.o_column or nd.resident.columns != r.columns:
            continue
        out[id(op)] = replace(out[id(op)], resident=replace(r, result_in_tmem=True))
        out[id(nxt)] = replace(nd, resident=replace(nd.resident, init_in_tmem=True))
    return [out[id(op)] for op, _ in decisions]


def _straight(kernel_body, first: ForOp, second: ForOp, resident: set) -> bool:
    """`second` follows `first` in the same block (it runs once each time `first` does, right
    after it) and no resident loop runs between them (its O would take the same columns)."""
    for blk in _blocks(kernel_body):
        ops = list(blk.ops)
        if any(o is first for o in ops):
            i = next(k for k, o in enumerate(ops) if o is first)
            j = next((k for k, o in enumerate(ops) if o is second), None)
            if j is None or j < i:
                return False
            between = [x for o in ops[i + 1:j] for x in _walk_op(o)]
            return not any(isinstance(x, ForOp) and id(x) in resident for x in between)
    return False


def _blocks(block):
    yield block
    for o in block.ops:
        for r in o.regions:
            yield from _blocks(r)


def _walk_op(op):
    """`op` and every op nested in its regions."""
    yield op
    for r in op.regions:
        yield from walk(r)
