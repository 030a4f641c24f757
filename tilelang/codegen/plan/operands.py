"""Operands of tensor-core products that go from global to shared memory without registers
(docs/codegen.md, Matrix products; lower/tensorcore/mma_operands.py emits them).

A `load` whose only use is as operand `a` or `b` of a matrix product in the same region, with
nothing in between that can write memory (loads and ops that only compute; no store, atomic or
print) and zero padding, is *deferred*: the walker binds its result to a `DeferredLoad`
instead of loading it into registers, and the product copies the tile straight into its
shared-memory image. `async_axis` says along which axis such a copy can run (`kern`: the
emitter or a plan.inputs.PlanInputs)."""

from __future__ import annotations

from typing import Mapping

from tilelang.codegen.plan.access import tile_indexed, vectorizable
from tilelang.codegen.plan.inputs import const_ints
from tilelang.ir.ops import Block, BuiltinOp, ConstantOp
from tilelang.ir.values import Value
from tilelang.record import record
from tilelang.sema.constants import ConstValue
from tilelang.sema.types import TileType

PRODUCTS = ("mma", "matmul", "@", "mma_scaled")
PURE_GROUPS = ("math", "dtype", "grid", "operator")
PURE_MEMORY = ("num_tiles", "dim", "stride")
PURE_TILE = PURE_GROUPS + ("creation", "shape", "reduce", "scan", "sort", "matmul", "random")


VIEWS = ("reshape", "transpose", "permute")


@record(frozen=True)
class DeferredLoad:
    """A `load` not emitted yet (see the module docstring), seen through `chain`: the view
    ops from the load's tile to the operand, in order."""

    op: BuiltinOp
    chain: tuple = ()

    @property
    def shape(self) -> tuple[int, ...]:
        """The operand's shape (the last view's)."""
        last = self.chain[-1] if self.chain else self.op
        return tuple(last.result.type.shape)

    def load_axis(self, ax: int) -> int:
        """The axis of the load's tile that the operand's axis `ax` is."""
        for v in reversed(self.chain):
            src = tuple(v.arg_map["x"].type.shape)
            if v.name == "reshape":
                ax += len(src) - len(v.result.type.shape)
            else:
                ax = _view_dims(v, len(src))[ax]
        return ax


def _view_dims(op: BuiltinOp, rank: int) -> tuple[int, ...]:
    """A permute's / transpose's axes: result axis i is the source's axis dims[i]."""
    args = op.arg_map
    if op.name == "permute":
        return tuple(d % rank for d in const_ints(args["dims"]))
    a0 = const_ints(args["axis0"])[0] % rank if "axis0" in args else rank - 2
    a1 = const_ints(args["axis1"])[0] % rank if "axis1" in args else rank - 1
    dims = list(range(rank))
    dims[a0], dims[a1] = dims[a1], dims[a0]
    return tuple(dims)


def _is_view(op) -> bool:
    """A view the copy can absorb: a permutation, or a reshape dropping leading unit axes."""
    if not (isinstance(op, BuiltinOp) and op.name in VIEWS and op.result is not None):
        return False
    x = op.arg_map.get("x")
    if not isinstance(x, Value) or not isinstance(x.type, TileType):
        return False
    if op.name != "reshape":
        return True
    src, dst = tuple(x.type.shape), tuple(op.result.type.shape)
    n = len(src) - len(dst)
    return n >= 0 and src[n:] == dst and all(s == 1 for s in src[:n])


def is_pure_scalar(op) -> bool:
    """A constant or a side-effect-free op with a 0-d result."""
    if isinstance(op, ConstantOp):
        return True
    if not isinstance(op, BuiltinOp) or op.result is None:
        return False
    t = op.result.type
    if not isinstance(t, TileType) or t.shape:
        return False
    return op.builtin.group in PURE_GROUPS or op.name in PURE_MEMORY


def writes_nothing(op) -> bool:
    """An op that cannot change global memory, so a load may move past it: another load, a
    pure scalar op, or a tile op of a group that only computes."""
    if isinstance(op, BuiltinOp) and (op.name == "load" or op.builtin.group in PURE_TILE):
        return True
    return is_pure_scalar(op)


def _zero_padding(op: BuiltinOp) -> bool:
    p = op.arg_map.get("padding")
    if not tile_indexed(op):
        return False        # a masked or offset load stays a plain load
    return p is None or (isinstance(p, ConstValue) and p.value == 0)


def deferrable(uses: Mapping[int, int], block: Block) -> dict[int, DeferredLoad | None]:
    """Result ids in `block` that are deferred: an operand's id -> its DeferredLoad; the
    load and views under a view operand -> None (the product emits them if it must).
    `uses`: how many times each value is used in the kernel (plan/uses.py). A load whose
    views feed several products (attention backward's K tile, both K-major and transposed)
    is deferred for each (`_shared`): one image can serve them all."""
    out: dict[int, DeferredLoad | None] = {}
    ops = block.ops
    pos = {op.result.id: i for i, op in enumerate(ops)
           if isinstance(op, BuiltinOp) and op.result is not None
           and (op.name == "load" or _is_view(op))}
    out.update(_shared(uses, ops, pos))
    for p, op in enumerate(ops):
        if not (isinstance(op, BuiltinOp) and op.name in PRODUCTS):
            continue
        args = op.arg_map
        for key in ("a", "b"):
            v = args.get(key)
            chain = []
            while isinstance(v, Value) and v.id in pos and uses.get(v.id) == 1 and \
                    ops[pos[v.id]].name != "load":
                chain.append(ops[pos[v.id]])
                v = ops[pos[v.id]].arg_map["x"]
            if not isinstance(v, Value) or v.id not in pos or uses.get(v.id) != 1 or \
                    v.id in out:
                continue
            q = pos[v.id]
            if not _zero_padding(ops[q]):
                continue
            inner = {id(o) for o in chain}
            between = ops[q + 1:p]
            if all(writes_nothing(o) or id(o) in inner for o in between):
                d = DeferredLoad(ops[q], tuple(reversed(chain)))
                out[v.id] = None if chain else d
                for o in chain[1:]:
                    out[o.result.id] = None
                out[(chain[0].result.id if chain else v.id)] = d
    return out


def _shared(uses: Mapping[int, int], ops: list, pos: dict[int, int]) -> dict:
    """The loads of `ops` whose every use, through views of them (`pos`: the loads' and
    views' result ids -> index), is operand `a` or `b` of a product, of at least two
    products, with nothing that writes memory between the load and each product: per
    operand its DeferredLoad (the views from the load to it), None for the other values."""
    kids: dict[int, list[int]] = {}          # value id -> the views of it (indices)
    used: dict[int, int] = {}                # value id -> its uses as a product operand
    for i, op in enumerate(ops):
        if not isinstance(op, BuiltinOp):
            continue
        if op.result is not None and op.result.id in pos and op.name != "load":
            x = op.arg_map["x"]
            kids.setdefault(x.id, []).append(i)
        if op.name in PRODUCTS:
            for key in ("a", "b"):
                v = op.arg_map.get(key)
                if isinstance(v, Value):
                    used[v.id] = used.get(v.id, 0) + 1
    out: dict = {}
    for q, load in enumerate(ops):
        if not (isinstance(load, BuiltinOp) and load.name == "load" and
                load.result is not None and _zero_padding(load)):
            continue
        # every value under the load, with its views from the load
        tree, todo = {}, [(load.result, ())]
        while todo:
            v, chain = todo.pop()
            tree[v.id] = chain
            todo.extend((ops[i].result, chain + (ops[i],)) for i in kids.get(v.id, ()))
        if sum(used.get(v, 0) for v in tree) < 2 or any(
                uses.get(v, 0) != len(kids.get(v, ())) + used.get(v, 0) for v in tree):
            continue
        last = max(i for i, op in enumerate(ops) if isinstance(op, BuiltinOp) and
                   op.name in PRODUCTS and any(getattr(op.arg_map.get(k), "id", None) in tree
                                              for k in ("a", "b")))
        if not all(writes_nothing(o) or (getattr(o, "result", None) is not None and
                                         o.result.id in tree) for o in ops[q + 1:last]):
            continue
        for v, chain in tree.items():
            out[v] = DeferredLoad(load, chain) if used.get(v) else None
    return out


def async_axis(kern, d: DeferredLoad, k_axis: int, itemsize: int,
               transposes: bool | None = None) -> int | None:
    """The tile axis that is contiguous in memory if `d` can be copied with 16-byte
    cp.async into a smem image with that axis as rows, else None. `transposes`: the
    instruction reads an image whose rows run along M/N (default: 16-bit types only, as
    ldmatrix.trans and wgmma do; tcgen05 also reads 8-bit ones: tensor_cores.tc5_mn)."""
    args = d.op.arg_map
    arr = kern.array(args["A"])
    rank = arr.rank
    order = kern.const_ints(args["order"]) if "order" in args else None
    axes = order if order is not None else tuple(range(rank))
    if not vectorizable(arr, axes) or kern.threads < 1:
        return None
    lcax = axes.index(rank - 1)
    shape = d.shape
    vr = len(shape)
    # the image is the load tile's: its batch axis (if any) must stay the operand's batch
    lr = len(d.op.result.type.shape)
    if d.chain and (lr > 3 or {d.load_axis(ax) for ax in range(vr - 2, vr)} !=
                    {lr - 2, lr - 1}):
        return None
    cax = next((ax for ax in range(vr) if d.load_axis(ax) == lcax), None)
    if cax not in (vr - 1, vr - 2):
        return None
    if cax != k_axis and not (itemsize == 2 if transposes is None else transposes):
        return None
    if shape[cax] * itemsize < 32:
        return None
    return cax
