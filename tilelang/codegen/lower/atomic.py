"""Atomics `atomic_add/max/min/and/or/xor/xchg/cas` (builtins_memory.py): element-indexed like
gather/scatter, each element's operation applied once, returning the old values; masked or
out-of-bounds elements do nothing and give 0.

Each element is performed by one thread only: the owner of its register (the layout's
replicated thread bits are 0, the primary copy of a non-power-of-two block) and only for the
registers that are not copies of another (zero register bases). A scalar atomic is therefore
done once per block. When the old values are used and the layout replicates them (a scalar, a
tile smaller than the block), the owners write them to shared memory and every thread reads its
copy after a barrier (exact mode); unused results need no exchange.

Each element is one predicated PTX instruction (inline asm, `@p atom.acq_rel.gpu.global.add.u32`
with the old value preset to 0), so masked and out-of-bounds elements cost no branch; with the
old value unused and a `relaxed`/`release` order the instruction is `red`. `sem` and `scope` are
the PTX memory model's (.relaxed .acquire .release .acq_rel; .cta .cluster .gpu .sys; a cluster
scope on a target without clusters is .gpu, which contains it). A scalar atomic (one element,
done by one thread for the block) orders the whole block's accesses: a barrier precedes it when
`sem` releases and follows it when `sem` acquires, so the lock and "last block" patterns work
with every thread's loads and stores (docs/language.md). A tile atomic orders, per element, the
accesses of the thread that performs it (as in PTX and Triton).

Per dtype: integer add/and/or/xor/xchg/cas and signed/unsigned max/min are single
instructions; f32/f64 add is `atom.add.f32/.f64`; f32/f64 max/min (no float `atom.max` in PTX)
are a signed integer max/min on the bits where the value's sign bit is clear and an unsigned
min/max where it is set (two predicated instructions, the float order with -0.0 < +0.0);
f16/bf16 add is a compare-and-swap loop on the 16-bit element (`atom.cas.b16`, so the access
never leaves the element; the sum is rounded once, as the reference does); float xchg works on
the bits; float cas compares as floats like the reference (`-0.0 == 0.0`, NaN never equal) with
a loop of bitwise `atom.cas`. Hardware note: `atom.add.f32` flushes subnormal inputs and results
to zero on the GPU (PTX ISA); the emulator and the reference do not.
"""

from __future__ import annotations

from math import prod

import llvmlite.ir as ir

from tilelang.codegen.layouts.distributed import Layout
from tilelang.codegen.emit.kernel import I1, I32, I64, ArrayVal, KernelEmitter, TileVal
from tilelang.codegen.emit.sync import broadcast, storage_bytes
from tilelang.codegen.lower.table import lowers
from tilelang.codegen.lower.memory import gated
from tilelang.ir.ops import BuiltinOp, Kernel, walk
from tilelang.ir.values import Value
from tilelang.sema.builtins_memory import DEFAULT_SCOPE, DEFAULT_SEM
from tilelang.sema.constants import ConstStr, ConstValue
from tilelang.sema.types import DType

ORDER = "monotonic"      # the first read of a compare-and-swap loop (the cas carries the order)


def result_used(kernel: Kernel, value: Value) -> bool:
    """Some op of the kernel reads `value`."""
    for op in walk(kernel.body):
        if any(v.id == value.id for v in op.operands):
            return True
    return False


# ---------------------------------------------------------------------------------------------
# Operands

def _layout(kern: KernelEmitter, op: BuiltinOp, shape: tuple[int, ...], dtype: DType) -> Layout:
    """The layout of the first operand tile of the result's shape, else the default one."""
    for _, a in op.args:
        for item in kern.tuple_items(a):
            if isinstance(item, Value) and item.id in kern.env:
                t = kern.env[item.id]
                if isinstance(t, TileVal) and t.shape == shape:
                    return t.layout
    return kern.layout_for_shape(shape, dtype)


def _regs(kern: KernelEmitter, a, layout: Layout, dtype: DType | None) -> tuple[ir.Value, ...]:
    """An operand (tile, scalar value or constant) as one register per register of layout,
    converted to `dtype` (None: kept as is)."""
    n = layout.num_regs
    if isinstance(a, ConstValue):
        if dtype is None:
            return (ir.Constant(I1, int(bool(a.value))),) * n
        return (kern.se.constant(a.value, dtype),) * n
    t = kern.tile(a)
    regs = broadcast(kern, t, layout)
    if dtype is not None and t.dtype != dtype:
        regs = tuple(kern.se.cast(r, t.dtype, dtype) for r in regs)
    return regs


def _index_regs(kern: KernelEmitter, a, layout: Layout) -> tuple[ir.Value, ...]:
    """An index operand widened to i64 by its signedness."""
    if isinstance(a, ConstValue):
        return (ir.Constant(I64, int(a.value)),) * layout.num_regs
    t = kern.tile(a)
    b = kern.builder
    out = []
    for r in broadcast(kern, t, layout):
        if r.type.width < 64:
            r = b.sext(r, I64) if t.dtype.signed and not t.dtype.is_bool else b.zext(r, I64)
        out.append(r)
    return tuple(out)


# ---------------------------------------------------------------------------------------------
# One element

def _loop(kern: KernelEmitter, first: ir.Value, step):
    """A retry loop: `step(cur)` emits one attempt and returns (done i1, next cur); the loop
    ends with the `cur` of the successful attempt. Returns it."""
    b = kern.builder
    pre = b.block
    head = kern.fn.append_basic_block("atomic.retry")
    out = kern.fn.append_basic_block("atomic.done")
    b.branch(head)
    b.position_at_end(head)
    cur = b.phi(first.type)
    cur.add_incoming(first, pre)
    done, nxt = step(cur)
    cur.add_incoming(nxt, b.block)
    b.cbranch(done, out, head)
    b.position_at_end(out)
    return cur


def _float_bits(dtype: DType) -> ir.IntType:
    return ir.IntType(dtype.bits)


_SEM = {"relaxed": ".relaxed", "acquire": ".acquire", "release": ".release",
        "acq_rel": ".acq_rel"}
_SCOPE = {"block": ".cta", "cluster": ".cluster", "device": ".gpu", "system": ".sys"}
_RED_OPS = ("add", "and", "or", "xor", "max", "min")


def const_str(a, default: str) -> str:
    """A string argument's value (a ConstStr, or a plain str), else `default`."""
    if isinstance(a, ConstStr):
        return a.value
    return a if isinstance(a, str) else default


class Order:
    """The PTX qualifiers of one atomic: `.acq_rel.gpu`."""

    def __init__(self, kern: KernelEmitter, sem: str, scope: str):
        self.sem, self.scope = sem, scope
        if scope == "cluster" and not getattr(kern.target, "clusters", False):
            scope = "device"        # no clusters: the GPU scope contains the block's
        self.text = _SEM[sem] + _SCOPE[scope]

    @property
    def acquires(self) -> bool:
        return self.sem in ("acquire", "acq_rel")

    @property
    def releases(self) -> bool:
        return self.sem in ("release", "acq_rel")


def _ptx_type(kind: str, dtype: DType) -> str:
    n = dtype.bits
    if kind == "add":
        return f".f{n}" if dtype.is_float else f".u{n}"
    if kind in ("max", "min"):
        return f".s{n}" if dtype.signed else f".u{n}"
    return f".b{n}"


def _reg(bits: int) -> str:
    return {16: "h", 32: "r", 64: "l"}[bits]


def _atom(kern: KernelEmitter, order: Order, op: str, ptype: str, pred: ir.Value,
          ptr: ir.Value, vals: list[ir.Value], want_old: bool) -> ir.Value | None:
    """One `@pred atom` (or `red` when the old value is not wanted and the order allows) on
    integer registers; returns the old value, 0 where pred is false."""
    b = kern.builder
    ity = vals[0].type
    r = _reg(ity.width)
    addr = b.ptrtoint(ptr, I64)
    use_red = not want_old and op in _RED_OPS and not order.acquires
    if use_red:
        text = f"@$0 red{order.text}.global.{op}{ptype} [$1], $2;"
        fty = ir.FunctionType(ir.VoidType(), [I1, I64, ity])
        b.call(ir.InlineAsm(fty, text, f"b,l,{r},~{{memory}}", side_effect=True),
               [pred, addr, vals[0]])
        return None
    srcs = ", ".join(f"${k + 3}" for k in range(len(vals)))
    text = f"@$1 atom{order.text}.global.{op}{ptype} $0, [$2], {srcs};"
    cons = f"={r},b,l," + ",".join([r] * len(vals)) + ",0,~{memory}"
    fty = ir.FunctionType(ity, [I1, I64] + [ity] * len(vals) + [ity])
    return b.call(ir.InlineAsm(fty, text, cons, side_effect=True),
                  [pred, addr] + list(vals) + [ir.Constant(ity, 0)])


def atomic_element(kern: KernelEmitter, kind: str, dtype: DType, ptr: ir.Value,
                   vals: list[ir.Value], pred: ir.Value, order: Order,
                   want_old: bool = True) -> ir.Value:
    """Perform one atomic on `ptr` (addrspace 1, the storage type) where `pred` (i1) holds;
    returns the old value (0 where pred is false)."""
    b = kern.builder
    if (kind == "add" and dtype.is_float and dtype.bits == 16) or \
            (kind == "cas" and dtype.is_float):
        return _guarded_loop(kern, kind, dtype, ptr, vals, pred, order)
    zero = kern.se.constant(0, dtype)
    if dtype.is_float and kind in ("max", "min"):
        ity = _float_bits(dtype)
        bits = b.bitcast(vals[0], ity)
        plus = b.icmp_signed(">=", bits, ir.Constant(ity, 0))
        other = "min" if kind == "max" else "max"
        n = dtype.bits
        pos = _atom(kern, order, kind, f".s{n}", b.and_(pred, plus), ptr, [bits], want_old)
        neg = _atom(kern, order, other, f".u{n}", b.and_(pred, b.not_(plus)), ptr, [bits],
                    want_old)
        if not want_old:
            return zero
        return b.bitcast(b.select(plus, pos, neg), vals[0].type)
    ops = {"add": "add", "max": "max", "min": "min", "and": "and", "or": "or", "xor": "xor",
           "xchg": "exch", "cas": "cas"}
    ints = [b.bitcast(v, _float_bits(dtype)) if dtype.is_float else v for v in vals]
    old = _atom(kern, order, ops[kind], _ptx_type(kind, dtype), pred, ptr, ints, want_old)
    if old is None:
        return zero
    return b.bitcast(old, vals[0].type) if dtype.is_float else old


def _cas_asm(kern: KernelEmitter, order: Order, ptr: ir.Value, cur: ir.Value,
             new: ir.Value) -> ir.Value:
    """`atom.cas.bN` (b16 included: LLVM would widen it to the enclosing 32-bit word)."""
    ity = cur.type
    r = _reg(ity.width)
    fty = ir.FunctionType(ity, [I64, ity, ity])
    asm = ir.InlineAsm(fty, f"atom{order.text}.global.cas.b{ity.width} $0, [$1], $2, $3;",
                       f"={r},l,{r},{r},~{{memory}}", side_effect=True)
    return kern.builder.call(asm, [kern.builder.ptrtoint(ptr, I64), cur, new])


def _guarded_loop(kern: KernelEmitter, kind: str, dtype: DType, ptr: ir.Value,
                  vals: list[ir.Value], pred: ir.Value, order: Order) -> ir.Value:
    """f16/bf16 add and float cas: a compare-and-swap loop, branched around where pred is
    false."""
    b = kern.builder
    before = b.block
    then = kern.fn.append_basic_block("atomic.elem")
    after = kern.fn.append_basic_block("atomic.elem.end")
    b.cbranch(pred, then, after)
    b.position_at_end(then)
    v = _cas_loop(kern, kind, dtype, ptr, vals, order)
    then_end = b.block
    b.branch(after)
    b.position_at_end(after)
    phi = b.phi(v.type)
    phi.add_incoming(v, then_end)
    phi.add_incoming(kern.se.constant(0, dtype), before)
    return phi


def _cas_loop(kern: KernelEmitter, kind: str, dtype: DType, ptr: ir.Value,
              vals: list[ir.Value], order: Order) -> ir.Value:
    b = kern.builder
    ity = _float_bits(dtype)
    iptr = b.bitcast(ptr, ir.PointerType(ity, addrspace=1))
    first = b.load_atomic(iptr, ORDER, dtype.itemsize)
    if kind == "add":
        v = vals[0]

        def step(cur):
            s = kern.se.emit("+", [b.bitcast(cur, v.type), v], [dtype, dtype], dtype)
            seen = _cas_asm(kern, order, iptr, cur, b.bitcast(s, ity))
            return b.icmp_unsigned("==", seen, cur), seen
        return b.bitcast(_loop(kern, first, step), v.type)
    # Float cas: swap only when the current value equals `expected` as a float.
    expected, value = vals
    new_bits = b.bitcast(value, ity)

    def step(cur):
        equal = b.fcmp_ordered("==", b.bitcast(cur, value.type), expected)
        here = b.block
        try_bb = kern.fn.append_basic_block("atomic.cas")
        join = kern.fn.append_basic_block("atomic.cas.end")
        b.cbranch(equal, try_bb, join)
        b.position_at_end(try_bb)
        seen = _cas_asm(kern, order, iptr, cur, new_bits)
        ok = b.icmp_unsigned("==", seen, cur)
        try_end = b.block
        b.branch(join)
        b.position_at_end(join)
        done = b.phi(I1)
        done.add_incoming(ir.Constant(I1, 1), here)       # not equal: no swap, old = cur
        done.add_incoming(ok, try_end)
        nxt = b.phi(ity)
        nxt.add_incoming(cur, here)
        nxt.add_incoming(seen, try_end)
        return done, nxt
    return b.bitcast(_loop(kern, first, step), value.type)


# ---------------------------------------------------------------------------------------------
# The op

def _exchange_from_owners(kern: KernelEmitter, layout: Layout, owner: ir.Value | None,
                          dtype: DType, regs: list[ir.Value],
                          fenced: bool = False) -> list[ir.Value]:
    """Every thread gets the owners' values of its registers (barrier, owners write, barrier,
    all read). `fenced`: a barrier since the last shared-memory access already keeps the
    scratch buffer's earlier readers before the owners' writes."""
    b = kern.builder
    stype = kern.storage_type(dtype)
    n = max(prod(layout.shape), 1)
    ptr = kern.smem(n * storage_bytes(kern, dtype), stype)
    kern.stats.exchanges += 1
    base = kern.thread_linear(layout.thread_weights())
    owned = layout.owned_regs()
    if not fenced:
        kern.barrier()

    def write():
        for r in owned:
            i = b.add(base, ir.Constant(I32, layout.reg_linear(r)))
            b.store(kern.to_storage(regs[r], dtype), b.gep(ptr, [i]))
    gated(kern, owner, write)
    kern.barrier()
    out = []
    for r in range(layout.num_regs):
        i = b.add(base, ir.Constant(I32, layout.reg_linear(r)))
        out.append(kern.from_storage(b.load(b.gep(ptr, [i])), dtype))
    return out


@lowers("atomic_add", "atomic_max", "atomic_min", "atomic_and", "atomic_or", "atomic_xor",
        "atomic_xchg", "atomic_cas")
def atomic(kern: KernelEmitter, op: BuiltinOp) -> TileVal:
    kind = op.name[len("atomic_"):]
    args = op.arg_map
    arr: ArrayVal = kern.array(args["A"])
    dt = arr.dtype
    rt = op.result.type
    shape = tuple(rt.shape)
    layout = _layout(kern, op, shape, dt)
    used = result_used(kern.kernel, op.result)
    replicated = bool(layout.replicated_thread_mask()) or kern.primary is not None
    if used and replicated:
        kern.require_exact()
    b = kern.builder
    idx = [_index_regs(kern, a, layout) for a in kern.tuple_items(args["indices"])]
    mask = _regs(kern, args["mask"], layout, None) if args.get("mask") is not None else None
    names = ("expected", "value") if kind == "cas" else ("value",)
    vals = [_regs(kern, args[n], layout, dt) for n in names]
    owner = kern.owner(layout)
    order = Order(kern, const_str(args.get("sem"), DEFAULT_SEM),
                  const_str(args.get("scope"), DEFAULT_SCOPE))
    block_level = owner is not None and all(d == 1 for d in shape)    # a scalar atomic
    if block_level and order.releases:
        kern.barrier()      # the block's earlier accesses precede the owner's release
    base_ptr = b.inttoptr(arr.address, ir.PointerType(kern.storage_type(dt), addrspace=1))
    old: list[ir.Value | None] = [None] * layout.num_regs
    for r in layout.owned_regs():
        ok = owner if owner is not None else ir.Constant(I1, 1)
        if mask is not None:
            ok = b.and_(ok, mask[r])
        off = ir.Constant(I64, 0)
        for k in range(arr.rank):
            off = b.add(off, b.mul(idx[k][r], arr.strides[k]))
            ok = b.and_(ok, b.icmp_unsigned("<", idx[k][r], arr.extents[k]))
        old[r] = atomic_element(kern, kind, dt, b.gep(base_ptr, [off]), [x[r] for x in vals],
                                ok, order, used)
    # Register copies (zero register bases) take their original's value.
    zero_bits = sum(1 << i for i, bs in enumerate(layout.reg) if not any(bs))
    regs = [old[r & ~zero_bits] for r in range(layout.num_regs)]
    if used and replicated:
        regs = _exchange_from_owners(kern, layout, owner, dt, regs,  # ends with a barrier
                                     fenced=block_level and order.releases)
    elif block_level and order.acquires:
        kern.barrier()      # the block's later accesses follow the owner's acquire
    return TileVal(dt, layout, tuple(regs))


@lowers("fence")
def fence(kern: KernelEmitter, op: BuiltinOp) -> None:
    """Block-level: barrier, `fence.<sem>.<scope>` in every thread, barrier, so the accesses
    of all the block's threads before it are ordered with those of all its threads after."""
    sem = const_str(op.arg_map.get("sem"), "acq_rel")
    order = Order(kern, "relaxed", const_str(op.arg_map.get("scope"), DEFAULT_SCOPE))
    text = f"fence.{sem}{order.text[len('.relaxed'):]};"
    kern.barrier()
    asm = ir.InlineAsm(ir.FunctionType(ir.VoidType(), []), text, "~{memory}", side_effect=True)
    kern.builder.call(asm, [])
    kern.barrier()
