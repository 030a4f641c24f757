"""Kernels across devices (docs/distributed.md): `peer`, `rank`, `world_size`, `signal`,
`wait_until` and `barrier` (sema/builtins_distributed.py).

A symmetric array is a list (lower/array_list.py) whose entry r is rank r's buffer, plus the
launching rank as a third parameter (`ListVal.me`): `peer(x, r)` is entry r, `world_size()` the
list's length and `rank()` its `me`, both read from the kernel's first symmetric parameter.

Order across devices goes through system scope (PTX ISA, "Memory Consistency Model"):
- `signal` is performed once for the block by thread 0 after a block barrier: the barrier
  orders every thread's earlier accesses before thread 0's, and a release is cumulative, so the
  block's writes happen before `st.release.sys` (`set`) or `red.release.sys.add` (`add`).
- `wait_until`: thread 0 polls with `ld.acquire.sys`, sleeping (`nanosleep`) between looks,
  then a block barrier lets the other threads go on after its acquire.
- `barrier(pad, channel)`: after a block barrier thread 0 adds 1 with `red.release.sys` to
  slot `channel * W + rank` of every rank's pad, then for each rank j waits (acquire) until its
  own slot `channel * W + j` is at least 1 and takes 1 back (`red.relaxed.sys`, the acquire
  already happened); a block barrier ends it.
Slots outside the pad are skipped (a signal is dropped, a wait returns at once), as an access
outside an array is masked off.
"""

from __future__ import annotations

import llvmlite.ir as ir

from tilelang.codegen.emit.kernel import I1, I64, ArrayVal, KernelEmitter, TileVal
from tilelang.codegen.emit.values import ListVal
from tilelang.codegen.lower.array_list import entry
from tilelang.codegen.lower.atomic import Order, atomic_element, const_str
from tilelang.codegen.lower.memory import gated
from tilelang.codegen.lower.table import lowers
from tilelang.diagnostics import InternalCompilerError
from tilelang.ir.ops import BuiltinOp
from tilelang.sema.types import DType

# polling interval of a waiting thread (ns): short, since a signal usually comes soon
SLEEP_NS = 64
_CMP = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}


def _symmetric(kern: KernelEmitter) -> ListVal:
    """The kernel's first symmetric parameter (sema refuses rank()/world_size() without)."""
    for p in kern.kernel.params:
        v = kern.env.get(p.id)
        if isinstance(v, ListVal) and v.me is not None:
            return v
    raise InternalCompilerError.at("E0781", "rank()/world_size() without a symmetric "
                                   "parameter", None)


def _list(kern: KernelEmitter, a) -> ListVal:
    v = kern.env[a.id]
    assert isinstance(v, ListVal) and v.me is not None, a
    return v


def _i32_scalar(kern: KernelEmitter, op: BuiltinOp, v: ir.Value) -> TileVal:
    v = kern.builder.trunc(v, ir.IntType(32))
    return TileVal(op.result.type.dtype, kern.scalar_layout, (v,))


@lowers("peer")
def peer(kern: KernelEmitter, op: BuiltinOp) -> ArrayVal:
    return entry(kern, _list(kern, op.arg_map["x"]), op.arg_map["rank"])


@lowers("rank")
def rank(kern: KernelEmitter, op: BuiltinOp) -> TileVal:
    return _i32_scalar(kern, op, _symmetric(kern).me)


@lowers("world_size")
def world_size(kern: KernelEmitter, op: BuiltinOp) -> TileVal:
    return _i32_scalar(kern, op, _symmetric(kern).length)


# ---------------------------------------------------------------------------------------------
# Slots of a pad

def _slot(kern: KernelEmitter, pad: ArrayVal, index: ir.Value) -> tuple[ir.Value, ir.Value]:
    """(inside i1, pointer) of pad[index] (index an i64): 0 <= index < extent."""
    b = kern.builder
    inside = b.icmp_unsigned("<", index, pad.extents[0])
    off = b.mul(b.select(inside, index, ir.Constant(I64, 0)), pad.strides[0])
    addr = b.add(pad.address, b.mul(off, ir.Constant(I64, pad.dtype.itemsize)))
    ptr = b.inttoptr(addr, ir.PointerType(kern.storage_type(pad.dtype), addrspace=1))
    return inside, ptr


def _store_release(kern: KernelEmitter, dtype: DType, pred: ir.Value, ptr: ir.Value,
                   v: ir.Value) -> None:
    b = kern.builder
    r = "l" if dtype.bits == 64 else "r"
    fty = ir.FunctionType(ir.VoidType(), [I1, I64, v.type])
    asm = ir.InlineAsm(fty, f"@$0 st.release.sys.global.b{dtype.bits} [$1], $2;",
                       f"b,l,{r},~{{memory}}", side_effect=True)
    b.call(asm, [pred, b.ptrtoint(ptr, I64), v])


def _load_acquire(kern: KernelEmitter, dtype: DType, ptr: ir.Value) -> ir.Value:
    b = kern.builder
    ity = ir.IntType(dtype.bits)
    r = "l" if dtype.bits == 64 else "r"
    asm = ir.InlineAsm(ir.FunctionType(ity, [I64]),
                       f"ld.acquire.sys.global.b{dtype.bits} $0, [$1];",
                       f"={r},l,~{{memory}}", side_effect=True)
    return b.call(asm, [b.ptrtoint(ptr, I64)])


def _sleep(kern: KernelEmitter) -> None:
    asm = ir.InlineAsm(ir.FunctionType(ir.VoidType(), []), f"nanosleep.u32 {SLEEP_NS};",
                       "~{memory}", side_effect=True)
    kern.builder.call(asm, [])


def _spin(kern: KernelEmitter, dtype: DType, ptr: ir.Value, cmp: str, value: ir.Value) -> None:
    """Poll `*ptr cmp value` with acquire loads until it holds."""
    b = kern.builder
    head = kern.fn.append_basic_block("wait.poll")
    nap = kern.fn.append_basic_block("wait.sleep")
    out = kern.fn.append_basic_block("wait.done")
    b.branch(head)
    b.position_at_end(head)
    cur = _load_acquire(kern, dtype, ptr)
    op = _CMP[cmp]
    ok = b.icmp_signed(op, cur, value) if dtype.signed else b.icmp_unsigned(op, cur, value)
    b.cbranch(ok, out, nap)
    b.position_at_end(nap)
    _sleep(kern)
    b.branch(head)
    b.position_at_end(out)


def _count(kern: KernelEmitter, n: ir.Value, body) -> None:
    """for (k = 0; k < n; k++) body(k), k an i64."""
    b = kern.builder
    pre = b.block
    head = kern.fn.append_basic_block("ranks")
    loop = kern.fn.append_basic_block("ranks.body")
    out = kern.fn.append_basic_block("ranks.end")
    b.branch(head)
    b.position_at_end(head)
    k = b.phi(I64)
    k.add_incoming(ir.Constant(I64, 0), pre)
    b.cbranch(b.icmp_signed("<", k, n), loop, out)
    b.position_at_end(loop)
    body(k)
    k.add_incoming(b.add(k, ir.Constant(I64, 1)), b.block)
    b.branch(head)
    b.position_at_end(out)


def _first_thread(kern: KernelEmitter) -> ir.Value:
    return kern.builder.icmp_unsigned("==", kern.tid, ir.Constant(ir.IntType(32), 0))


# ---------------------------------------------------------------------------------------------
# The ops

@lowers("signal")
def signal(kern: KernelEmitter, op: BuiltinOp) -> None:
    pad = kern.array(op.arg_map["A"])
    v = kern.scalar_value(op.arg_map["value"], pad.dtype)
    index = kern.index_i64(op.arg_map["index"])
    kern.barrier()
    inside, ptr = _slot(kern, pad, index)
    pred = kern.builder.and_(_first_thread(kern), inside)
    if const_str(op.arg_map.get("op"), "set") == "add":
        atomic_element(kern, "add", pad.dtype, ptr, [v], pred, Order(kern, "release", "system"),
                       want_old=False)
    else:
        _store_release(kern, pad.dtype, pred, ptr, v)


@lowers("wait_until")
def wait_until(kern: KernelEmitter, op: BuiltinOp) -> None:
    pad = kern.array(op.arg_map["A"])
    v = kern.scalar_value(op.arg_map["value"], pad.dtype)
    index = kern.index_i64(op.arg_map["index"])
    cmp = const_str(op.arg_map["cmp"], "eq")
    inside, ptr = _slot(kern, pad, index)
    gated(kern, kern.builder.and_(_first_thread(kern), inside),
          lambda: _spin(kern, pad.dtype, ptr, cmp, v))
    kern.barrier()


@lowers("barrier")
def barrier(kern: KernelEmitter, op: BuiltinOp) -> None:
    lst = _list(kern, op.arg_map["A"])
    b = kern.builder
    ch = op.arg_map.get("channel")
    channel = ir.Constant(I64, 0) if ch is None else kern.index_i64(ch)
    n = lst.length
    base = b.mul(channel, n)
    ity = ir.IntType(lst.dtype.bits)
    own = entry(kern, lst, lst.me)
    kern.barrier()

    def meet():
        def arrive(r):
            pad = entry(kern, lst, r)
            inside, ptr = _slot(kern, pad, b.add(base, lst.me))
            atomic_element(kern, "add", lst.dtype, ptr, [ir.Constant(ity, 1)], inside,
                           Order(kern, "release", "system"), want_old=False)

        def depart(j):
            inside, ptr = _slot(kern, own, b.add(base, j))

            def take():
                _spin(kern, lst.dtype, ptr, "ge", ir.Constant(ity, 1))
                atomic_element(kern, "add", lst.dtype, ptr, [ir.Constant(ity, -1)],
                               ir.Constant(I1, 1), Order(kern, "relaxed", "system"),
                               want_old=False)
            gated(kern, inside, take)
        _count(kern, n, arrive)
        _count(kern, n, depart)
    gated(kern, _first_thread(kern), meet)
    kern.barrier()
