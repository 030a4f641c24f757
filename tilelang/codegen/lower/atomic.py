"""Atomics `atomic_add/max/min/and/or/xor/xchg/cas` (builtins_memory.py): element-indexed like
gather/scatter, each element's operation applied once, returning the old values; masked or
out-of-bounds elements do nothing and give 0.

Each element is performed by one thread only: the owner of its register (the layout's
replicated thread bits are 0, the primary copy of a non-power-of-two block) and only for the
registers that are not copies of another (zero register bases). A scalar atomic is therefore
done once per block. When the old values are used and the layout replicates them (a scalar, a
tile smaller than the block), the owners write them to shared memory and every thread reads its
copy after a barrier (exact mode); unused results need no exchange.

Per dtype (PTX `atom`): integer add/and/or/xor/xchg/cas and signed/unsigned max/min are single
instructions; f32/f64 add is `atom.add.f32/.f64`; f16/bf16 add is a compare-and-swap loop on
the 16-bit element (`atom.cas.b16`, so the access never leaves the element; the sum is rounded
once, as the reference does); float xchg works on the bits; float cas compares as floats like
the reference (`-0.0 == 0.0`, NaN never equal) with a loop of bitwise `atom.cas`. Hardware note:
`atom.add.f32` flushes subnormal inputs and results to zero on the GPU (PTX ISA); the emulator
and the reference do not.
"""

from __future__ import annotations

import llvmlite.ir as ir

from tilelang.codegen.layouts.distributed import Layout
from tilelang.codegen.llvm.kernel import I1, I32, I64, ArrayVal, KernelEmitter, TileVal
from tilelang.codegen.llvm.sync import broadcast
from tilelang.codegen.lower.table import lowers
from tilelang.codegen.lower.memory import gated
from tilelang.ir.ops import BuiltinOp, Kernel, walk
from tilelang.ir.values import Value
from tilelang.sema.constants import ConstValue
from tilelang.sema.types import DType

I16 = ir.IntType(16)
ORDER = "monotonic"      # relaxed, like CUDA's atomicAdd
_RMW = {"add": "add", "and": "and", "or": "or", "xor": "xor", "xchg": "xchg"}


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

def _cas16(kern: KernelEmitter, ptr: ir.Value, expected: ir.Value, new: ir.Value) -> ir.Value:
    """`atom.global.cas.b16` (sm_70+), which LLVM would widen to the enclosing 32-bit word."""
    fty = ir.FunctionType(I16, [I64, I16, I16])
    asm = ir.InlineAsm(fty, "atom.global.cas.b16 $0, [$1], $2, $3;", "=h,l,h,h,~{memory}",
                       side_effect=True)
    addr = kern.builder.ptrtoint(ptr, I64)
    return kern.builder.call(asm, [addr, expected, new])


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


def atomic_element(kern: KernelEmitter, kind: str, dtype: DType, ptr: ir.Value,
                   vals: list[ir.Value]) -> ir.Value:
    """Perform one atomic on `ptr` (addrspace 1, the storage type); returns the old value."""
    b = kern.builder
    if kind == "add" and dtype.is_float and dtype.bits == 16:
        v = vals[0]
        ity = I16
        iptr = b.bitcast(ptr, ir.PointerType(ity, addrspace=1))
        first = b.load_atomic(iptr, ORDER, 2)

        def step(cur):
            s = kern.se.emit("+", [b.bitcast(cur, v.type), v], [dtype, dtype], dtype)
            seen = _cas16(kern, iptr, cur, b.bitcast(s, ity))
            return b.icmp_unsigned("==", seen, cur), seen
        return b.bitcast(_loop(kern, first, step), v.type)
    if kind == "add":
        return b.atomic_rmw("fadd" if dtype.is_float else "add", ptr, vals[0], ORDER)
    if kind in ("max", "min"):
        op = kind if dtype.signed else "u" + kind
        return b.atomic_rmw(op, ptr, vals[0], ORDER)
    if kind in ("and", "or", "xor"):
        return b.atomic_rmw(kind, ptr, vals[0], ORDER)
    if kind == "xchg":
        if not dtype.is_float:
            return b.atomic_rmw("xchg", ptr, vals[0], ORDER)
        ity = _float_bits(dtype)
        iptr = b.bitcast(ptr, ir.PointerType(ity, addrspace=1))
        old = b.atomic_rmw("xchg", iptr, b.bitcast(vals[0], ity), ORDER)
        return b.bitcast(old, vals[0].type)
    assert kind == "cas"
    expected, value = vals
    if not dtype.is_float:
        pair = b.cmpxchg(ptr, expected, value, ORDER, ORDER)
        return b.extract_value(pair, 0)
    # Float cas: swap only when the current value equals `expected` as a float.
    ity = _float_bits(dtype)
    iptr = b.bitcast(ptr, ir.PointerType(ity, addrspace=1))
    first = b.load_atomic(iptr, ORDER, dtype.itemsize)
    new_bits = b.bitcast(value, ity)

    def step(cur):
        equal = b.fcmp_ordered("==", b.bitcast(cur, value.type), expected)
        here = b.block
        try_bb = kern.fn.append_basic_block("atomic.cas")
        join = kern.fn.append_basic_block("atomic.cas.end")
        b.cbranch(equal, try_bb, join)
        b.position_at_end(try_bb)
        pair = b.cmpxchg(iptr, cur, new_bits, ORDER, ORDER)
        seen, ok = b.extract_value(pair, 0), b.extract_value(pair, 1)
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
                          dtype: DType, regs: list[ir.Value]) -> list[ir.Value]:
    """Every thread gets the owners' values of its registers (barrier, owners write, barrier,
    all read)."""
    from math import prod

    from tilelang.codegen.llvm.sync import storage_bytes
    b = kern.builder
    stype = kern.storage_type(dtype)
    n = max(prod(layout.shape), 1)
    ptr = kern.smem(n * storage_bytes(kern, dtype), stype)
    kern.stats.exchanges += 1
    base = kern.thread_linear(layout.thread_weights())
    owned = layout.owned_regs()
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
    base_ptr = b.inttoptr(arr.address, ir.PointerType(kern.storage_type(dt), addrspace=1))
    zero = kern.se.constant(0, dt)
    old: list[ir.Value | None] = [None] * layout.num_regs
    for r in layout.owned_regs():
        ok = owner if owner is not None else ir.Constant(I1, 1)
        if mask is not None:
            ok = b.and_(ok, mask[r])
        off = ir.Constant(I64, 0)
        for k in range(arr.rank):
            off = b.add(off, b.mul(idx[k][r], arr.strides[k]))
            ok = b.and_(ok, b.icmp_unsigned("<", idx[k][r], arr.extents[k]))
        before = b.block
        then = kern.fn.append_basic_block("atomic.elem")
        after = kern.fn.append_basic_block("atomic.elem.end")
        b.cbranch(ok, then, after)
        b.position_at_end(then)
        v = atomic_element(kern, kind, dt, b.gep(base_ptr, [off]), [x[r] for x in vals])
        then_end = b.block
        b.branch(after)
        b.position_at_end(after)
        phi = b.phi(v.type)
        phi.add_incoming(v, then_end)
        phi.add_incoming(zero, before)
        old[r] = phi
    # Register copies (zero register bases) take their original's value.
    zero_bits = sum(1 << i for i, bs in enumerate(layout.reg) if not any(bs))
    regs = [old[r & ~zero_bits] for r in range(layout.num_regs)]
    if used and replicated:
        regs = _exchange_from_owners(kern, layout, owner, dt, regs)
    return TileVal(dt, layout, tuple(regs))
