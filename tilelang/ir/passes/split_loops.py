"""Loop splitting: a `for` whose body masks with `where(cond, x, y)`, where `cond` is true for
every element while the induction variable is below a bound the loop can compute (or from such
a bound on), becomes two loops: one runs the iterations where `cond` holds with `x` in place of
the `where` (no comparisons, no selects), the other runs the rest with the body as written. The attention
kernels' key mask (`cols < seq`, and `cols <= rows` when causal) is the case it is for: only
the ragged last key tile and the tiles on the causal diagonal need the mask
(docs/ir.md, Passes).

The rules, cited where the code applies them:

- (S1) the loop steps by the constant 1, its induction variable is a signed integer and its
  body has no `break` or `continue` (the second loop starts where the first ended, with the
  first loop's carried values);
- (S2) `cond` is a conjunction (`&`) of comparisons `lhs < rhs`, `lhs <= rhs` (or `>`, `>=`
  with the sides swapped) of one kind: a prefix comparison's `lhs` increases with the
  induction variable `j` and its `rhs` does not depend on it (true below a bound: the key
  mask `cols < seq`, `cols <= rows`); a suffix comparison's `lhs` is invariant and its `rhs`
  increases (true from a bound on: `keys <= rows` when the loop walks the queries). Both
  sides are integer tiles or scalars of the affine form `base + c * j + arange(n)` (through
  `+`, `-` of an invariant, `* constant` of `j`, `expand_dims`, `reshape`): every element lies
  in [base + c * j, base + c * j + n - 1];
- (S3) all of `lhs < rhs` holds when max(lhs) < min(rhs). Prefix: c * j + base_l + n_l - 1 <
  base_r, so for j < S = floordiv(base_r - base_l - n_l, c) + 1 (`<=`: one more under the
  floor); a conjunction holds below the smallest bound, and the unmasked loop comes first.
  Suffix: base_l + n_l - 1 < base_r + c * j, so for j >= S = floordiv(base_l + n_l - 1 -
  base_r, c) + 1 (`<=`: one less under the floor); a conjunction holds from the largest
  bound, and the unmasked loop comes second;
- (S4) the split point is clamped into [start, stop], so both loops together run exactly the
  original iterations in order, and a loop with no iteration stays one with none;
- (S5) in the unmasked loop a `where` whose `cond` holds is replaced by its `x` only when `x` is a
  value of the `where`'s own type (no broadcast or conversion is lost). Comparisons that become
  unused are removed by dead code elimination, which runs after this pass.
"""

from __future__ import annotations

import itertools
from typing import Iterator

from tilelang.ir.builder import Builder
from tilelang.ir.ops import (Block, BreakOp, BuiltinOp, ConstantOp, ContinueOp, ForOp, IfOp,
                             Kernel, Op, WhileOp, walk)
from tilelang.ir.passes.rewrite import remap_operands, with_ops, with_regions
from tilelang.ir.values import Value
from tilelang.record import record, replace
from tilelang.sema.constants import ConstValue
from tilelang.sema.types import TileType

_SWAP = {">": "<", ">=": "<="}


@record(frozen=True)
class Affine:
    """Elements in [base + coeff * j, base + coeff * j + extent]: `base` a sum of invariant
    terms (values or ints), `coeff` the constant factor of the induction variable."""

    base: tuple[Value | int, ...]
    coeff: int
    extent: int

    def plus(self, other: "Affine") -> "Affine":
        return Affine(self.base + other.base, self.coeff + other.coeff,
                      self.extent + other.extent)


class _Analysis:
    """Recognizes the affine integer tiles of one loop body (S2)."""

    def __init__(self, iv: Value, defs: dict[Value, Op], consts: dict[Value, int],
                 inside: set[Value]):
        self.iv, self.defs, self.consts, self.inside = iv, defs, consts, inside

    def int_of(self, a) -> int | None:
        if isinstance(a, ConstValue) and isinstance(a.value, int) \
                and not isinstance(a.value, bool):
            return a.value
        if isinstance(a, Value):
            return self.consts.get(a)
        return None

    def affine(self, a) -> Affine | None:
        n = self.int_of(a)
        if n is not None:
            return Affine((n,), 0, 0)
        if not isinstance(a, Value) or not _is_int(a):
            return None
        if a == self.iv:
            return Affine((), 1, 0)
        op = self.defs.get(a)
        if a not in self.inside:
            # defined outside the loop: invariant; arange's range is still known
            if isinstance(op, BuiltinOp) and op.name == "arange":
                return self._arange(op)
            return Affine((a,), 0, 0) if _is_scalar(a) else self._through(op)
        return self._through(op)

    def _arange(self, op: BuiltinOp) -> Affine | None:
        m = op.arg_map
        n = self.int_of(m.get("n"))
        return Affine((), 0, n - 1) if n is not None and n > 0 and len(m) <= 2 else None

    def _through(self, op: Op | None) -> Affine | None:
        if not isinstance(op, BuiltinOp):
            return None
        m = op.arg_map
        if op.name == "arange":
            return self._arange(op)
        if op.name in ("expand_dims", "reshape"):
            return self.affine(m.get("x"))
        if op.name == "+":
            a, b = self.affine(m.get("a")), self.affine(m.get("b"))
            return a.plus(b) if a and b else None
        if op.name == "-":
            a, b = self.affine(m.get("a")), self.affine(m.get("b"))
            if a and b and b.coeff == 0 and b.extent == 0 and all(isinstance(t, int)
                                                                 for t in b.base):
                return Affine(a.base + (-sum(b.base),), a.coeff, a.extent)
            return None
        if op.name == "*":
            a, b = m.get("a"), m.get("b")
            for x, c in ((a, self.int_of(b)), (b, self.int_of(a))):
                if c is not None and c > 0 and x == self.iv:
                    return Affine((), c, 0)
        return None

    def bound(self, cond: Value) -> list[tuple[str, str, Affine, Affine]] | None:
        """The comparisons of `cond` as (kind, op, lhs, rhs), or None (S2). Kind "prefix":
        lhs increases with the induction variable and rhs is invariant (true below a bound);
        "suffix": lhs is invariant and rhs increases (true from a bound on)."""
        op = self.defs.get(cond)
        if not isinstance(op, BuiltinOp) or cond not in self.inside:
            return None
        m = op.arg_map
        if op.name == "&":
            a, b = self.bound(m.get("a")), self.bound(m.get("b"))
            return a + b if a is not None and b is not None else None
        name, lhs, rhs = op.name, m.get("a"), m.get("b")
        if name in _SWAP:
            name, lhs, rhs = _SWAP[name], rhs, lhs
        if name not in ("<", "<="):
            return None
        la, ra = self.affine(lhs), self.affine(rhs)
        if la is None or ra is None:
            return None
        if la.coeff > 0 and ra.coeff == 0:
            return [("prefix", name, la, ra)]
        if la.coeff == 0 and ra.coeff > 0:
            return [("suffix", name, la, ra)]
        return None


def _is_int(v: Value) -> bool:
    """A signed integer value (unsigned bounds could wrap below zero in S3's subtraction)."""
    return isinstance(v.type, TileType) and v.type.dtype.is_int and v.type.dtype.signed


def _is_scalar(v: Value) -> bool:
    return isinstance(v.type, TileType) and v.type.shape == ()


def _defs(k: Kernel) -> tuple[dict[Value, Op], dict[Value, int]]:
    defs: dict[Value, Op] = {}
    consts: dict[Value, int] = {}
    for op in walk(k.body):
        for r in op.results:
            defs[r] = op
        if isinstance(op, ConstantOp) and isinstance(op.value.value, int) \
                and not isinstance(op.value.value, bool):
            consts[op.result] = op.value.value
    return defs, consts


def _inside(loop: ForOp) -> set[Value]:
    inside = set(loop.body.args)
    for op in walk(loop.body):
        inside.update(op.results)
        for r in op.regions:
            inside.update(r.args)
    return inside


# -- cloning a region with fresh values ------------------------------------------------------

def _clone_block(block: Block, subst: dict[Value, Value], fresh: Iterator[int]) -> Block:
    args = tuple(_fresh(v, subst, fresh) for v in block.args)
    return Block(args, tuple(_clone_op(op, subst, fresh) for op in block.ops))


def _fresh(v: Value, subst: dict[Value, Value], fresh: Iterator[int]) -> Value:
    new = Value(next(fresh), v.type, v.hint)
    subst[v] = new
    return new


def _clone_op(op: Op, subst: dict[Value, Value], fresh: Iterator[int]) -> Op:
    op = remap_operands(op, lambda v: subst.get(v, v))
    if isinstance(op, (IfOp, ForOp, WhileOp)):
        regions = [_clone_block(r, subst, fresh) for r in op.regions]
        results = tuple(_fresh(v, subst, fresh) for v in op.results_)
        if isinstance(op, IfOp):
            return replace(op, then=regions[0], else_=regions[1], results_=results)
        if isinstance(op, ForOp):
            return replace(op, body=regions[0], results_=results)
        return replace(op, cond=regions[0], body=regions[1], results_=results)
    if isinstance(op, BuiltinOp) and op.result is not None:
        return replace(op, result=_fresh(op.result, subst, fresh))
    if isinstance(op, ConstantOp):
        return replace(op, result=_fresh(op.result, subst, fresh))
    return op


# -- the transformation ---------------------------------------------------------------------

class _Splitter:
    def __init__(self, k: Kernel):
        self.defs, self.consts = _defs(k)
        top = max((v.id for op in walk(k.body) for v in (*op.results, *(
            a for r in op.regions for a in r.args))), default=0)
        top = max([top, *(p.id for p in k.params)])
        self.fresh = itertools.count(top + 1)

    def block(self, block: Block) -> Block:
        out: list[Op] = []
        for op in block.ops:
            if isinstance(op, (IfOp, ForOp, WhileOp)):
                op = with_regions(op, [self.block(r) for r in op.regions])
            if isinstance(op, ForOp):
                out.extend(self.split(op))
            else:
                out.append(op)
        return with_ops(block, out)

    def split(self, loop: ForOp) -> list[Op]:
        if self.consts.get(loop.step) != 1 or not _is_int(loop.iv) or any(
                isinstance(o, (BreakOp, ContinueOp)) for o in walk(loop.body)):
            return [loop]                                               # (S1)
        an = _Analysis(loop.iv, self.defs, self.consts, _inside(loop))
        masks: dict[Value, list] = {}
        for op in loop.body.ops:
            if isinstance(op, BuiltinOp) and op.name == "where":
                m = op.arg_map
                x, cond = m.get("x"), m.get("cond")
                if isinstance(x, Value) and x.type == op.result.type \
                        and isinstance(cond, Value):                      # (S5)
                    b = an.bound(cond)
                    if b:
                        masks[op.result] = b
        if not masks:
            return [loop]
        # one split point for all masks the loop can drop together: those of the first
        # where's comparisons (the attention kernels have one masked where per loop), all of
        # one kind (a prefix and a suffix together would leave a window: not split)
        first = next(iter(masks.values()))
        kinds = {c[0] for c in first}
        if len(kinds) != 1:
            return [loop]
        keep = {r for r, b in masks.items() if b == first}
        b = Builder(ids=self.fresh)
        point = self.point(b, first, loop)
        subst: dict[Value, Value] = {}
        clear = _clone_block(loop.body, subst, self.fresh)
        clear = Block(clear.args, tuple(_unmask(clear.ops, keep, subst)))
        mid = tuple(Value(next(self.fresh), v.type, v.hint) for v in loop.results_)
        if kinds == {"prefix"}:
            head = replace(loop, stop=point, body=clear, results_=mid)
            tail = replace(loop, start=point, init=mid)
        else:
            head = replace(loop, stop=point, results_=mid)
            tail = replace(loop, start=point, init=mid, body=clear)
        return [*b._stack[0], head, tail]

    def point(self, b: Builder, comps, loop: ForOp) -> Value:
        """The first iteration where every comparison holds from then on (suffix: the largest
        of their bounds) or where one can fail (prefix: the smallest), clamped into
        [start, stop] (S3, S4)."""
        dtype = loop.iv.type.dtype
        bounds = []
        for kind, name, lhs, rhs in comps:
            if kind == "prefix":
                # c*j + base_l + ext < base_r  <=>  j <= floordiv(base_r - base_l - ext - 1, c)
                inc, inv = lhs, rhs
                const = sum(t for t in rhs.base if isinstance(t, int)) \
                    - sum(t for t in lhs.base if isinstance(t, int)) \
                    - lhs.extent - (1 if name == "<" else 0)
            else:
                # base_l + ext < base_r + c*j  <=>  j >= floordiv(base_l + ext - base_r, c) + 1;
                # with <=: j >= floordiv(base_l + ext - base_r - 1, c) + 1
                inc, inv = rhs, lhs
                const = sum(t for t in lhs.base if isinstance(t, int)) + lhs.extent \
                    - sum(t for t in rhs.base if isinstance(t, int)) \
                    - (1 if name == "<=" else 0)
            pos = [t for t in inv.base if isinstance(t, Value)]
            neg = [t for t in inc.base if isinstance(t, Value)]
            x = self.linear(b, pos, neg, const, dtype)
            bounds.append(b.op("+", b.op("floordiv", x, inc.coeff), 1))
        s = bounds[0]
        for o in bounds[1:]:
            s = b.op("minimum" if comps[0][0] == "prefix" else "maximum", s, o)
        if s.type.dtype != dtype:
            s = b.op("astype", s, dtype=dtype)
        return b.op("minimum", b.op("maximum", s, loop.start), loop.stop)

    @staticmethod
    def linear(b: Builder, pos, neg, const: int, dtype) -> Value:
        """sum(pos) - sum(neg) + const as ops (pos, neg: invariant scalar values)."""
        acc: Value | None = None
        for t in pos:
            acc = t if acc is None else b.op("+", acc, t)
        for t in neg:
            acc = b.op("-", acc if acc is not None else b.constant(0, dtype), t)
        if acc is None:
            return b.constant(const, dtype)
        if const:
            acc = b.op("+" if const > 0 else "-", acc, abs(const))
        return acc


def _unmask(ops, keep: set[Value], subst: dict[Value, Value]) -> Iterator[Op]:
    """The cloned body with each kept `where` (by its original result) forwarding its x."""
    cloned = {subst[r]: r for r in keep}
    forward: dict[Value, Value] = {}
    for op in ops:
        op = remap_operands(op, lambda v: forward.get(v, v))
        if isinstance(op, BuiltinOp) and op.result in cloned:
            forward[op.result] = op.arg_map["x"]
            continue
        if op.regions:
            op = with_regions(op, [_forward_block(r, forward) for r in op.regions])
        yield op


def _forward_block(block: Block, forward: dict[Value, Value]) -> Block:
    ops = []
    for op in block.ops:
        op = remap_operands(op, lambda v: forward.get(v, v))
        if op.regions:
            op = with_regions(op, [_forward_block(r, forward) for r in op.regions])
        ops.append(op)
    return with_ops(block, ops)


def split_masked_loops(k: Kernel) -> Kernel:
    return replace(k, body=_Splitter(k).block(k.body))
