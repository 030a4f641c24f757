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

from tilelang.codegen.emit import nvshmem
from tilelang.codegen.emit.kernel import I1, I32, I64, ArrayVal, KernelEmitter, TileVal
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


def _fence_sys(kern: KernelEmitter) -> None:
    asm = ir.InlineAsm(ir.FunctionType(ir.VoidType(), []), "fence.acq_rel.sys;", "~{memory}",
                       side_effect=True)
    kern.builder.call(asm, [])


# ---------------------------------------------------------------------------------------------
# Under NVSHMEM (docs/distributed.md, "The NVSHMEM lowering"): a pad that is `peer(P, r)` of a
# symmetric P is signalled with NVSHMEM's atomics on P's own heap address and PE r, so that
# it works over any transport NVSHMEM has (NVLink, InfiniBand); a wait on one's own pad is
# NVSHMEM's wait. Before a signal or a barrier's arrival, `fence.acq_rel.sys` orders the
# block's plain stores (the block barrier came first) and `nvshmem_quiet` completes its
# NVSHMEM operations; after a wait, `fence.acq_rel.sys` orders what follows.

def _nvshmem_signal(kern: KernelEmitter, dtype: DType, addr: ir.Value, v: ir.Value,
                    pe: ir.Value, add: bool) -> None:
    b = kern.builder
    _fence_sys(kern)
    nvshmem.call(b, "nvshmem_quiet", [])
    if dtype.name == "u64":
        code = nvshmem.SIGNAL_ADD if add else nvshmem.SIGNAL_SET
        nvshmem.call(b, "nvshmemx_signal_op", [addr, v, ir.Constant(I32, code), pe])
    else:
        name = f"nvshmem_{nvshmem.type_name(dtype)}_atomic_{'add' if add else 'set'}"
        nvshmem.call(b, name, [addr, v, pe])


def _nvshmem_wait(kern: KernelEmitter, dtype: DType, addr: ir.Value, cmp: str,
                  v: ir.Value) -> None:
    code = ir.Constant(I32, nvshmem.CMP[cmp])
    if dtype.name == "u64":
        nvshmem.call(kern.builder, "nvshmem_signal_wait_until", [addr, code, v])
    else:
        nvshmem.call(kern.builder, f"nvshmem_{nvshmem.type_name(dtype)}_wait_until",
                     [addr, code, v])
    _fence_sys(kern)


def _heap_slot(kern: KernelEmitter, pad: ArrayVal, index: ir.Value) -> ir.Value:
    """The i64 address of slot `index` of `pad` in this rank's symmetric heap (`pad` a peer
    under NVSHMEM: its `symmetric` holds the heap address)."""
    b = kern.builder
    index = b.select(b.icmp_unsigned("<", index, pad.extents[0]), index, ir.Constant(I64, 0))
    off = b.mul(b.mul(index, pad.strides[0]), ir.Constant(I64, pad.dtype.itemsize))
    return b.add(pad.symmetric[0], off)


# ---------------------------------------------------------------------------------------------
# The ops

@lowers("signal")
def signal(kern: KernelEmitter, op: BuiltinOp) -> None:
    pad = kern.array(op.arg_map["A"])
    v = kern.scalar_value(op.arg_map["value"], pad.dtype)
    index = kern.index_i64(op.arg_map["index"])
    kern.barrier()
    if kern.nvshmem and pad.symmetric is not None:
        inside, _ = _slot(kern, pad, index)
        addr = _heap_slot(kern, pad, index)
        add = const_str(op.arg_map.get("op"), "set") == "add"
        gated(kern, kern.builder.and_(_first_thread(kern), inside),
              lambda: _nvshmem_signal(kern, pad.dtype, addr, v, pad.symmetric[1], add))
        return
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
    spin = lambda: _spin(kern, pad.dtype, ptr, cmp, v)  # noqa: E731
    if kern.nvshmem and pad.symmetric is not None:
        # NVSHMEM waits on one's own pad; another rank's is polled over NVLink
        b = kern.builder
        addr = _heap_slot(kern, pad, index)
        own = b.icmp_signed("==", pad.symmetric[1], _symmetric(kern).me)
        poll = spin

        def spin():
            with b.if_else(own) as (mine, theirs):
                with mine:
                    _nvshmem_wait(kern, pad.dtype, addr, cmp, v)
                with theirs:
                    poll()
    gated(kern, kern.builder.and_(_first_thread(kern), inside), spin)
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
    if lst.local is not None:
        kern.barrier()
        gated(kern, _first_thread(kern), lambda: _nvshmem_meet(kern, lst, base))
        kern.barrier()
        return
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


def _nvshmem_meet(kern: KernelEmitter, lst: ListVal, base: ir.Value) -> None:
    """barrier's meeting under NVSHMEM (thread 0): the same protocol, every slot operation an
    NVSHMEM atomic or wait on this rank's heap address of the pad (NVSHMEM atomics on one
    location must not mix with plain ones: the take-back is an NVSHMEM add to oneself)."""
    b = kern.builder
    pad = lst.local
    ity = ir.IntType(lst.dtype.bits)
    add = f"nvshmem_{nvshmem.type_name(lst.dtype)}_atomic_add"
    _fence_sys(kern)
    nvshmem.call(b, "nvshmem_quiet", [])

    def arrive(r):
        inside, ptr = _slot(kern, pad, b.add(base, lst.me))
        gated(kern, inside, lambda: nvshmem.call(b, add, [b.ptrtoint(ptr, I64),
                                                          ir.Constant(ity, 1), r]))

    def depart(j):
        inside, ptr = _slot(kern, pad, b.add(base, j))

        def take():
            addr = b.ptrtoint(ptr, I64)
            _nvshmem_wait(kern, lst.dtype, addr, "ge", ir.Constant(ity, 1))
            nvshmem.call(b, add, [addr, ir.Constant(ity, -1), lst.me])
        gated(kern, inside, take)
    _count(kern, lst.length, arrive)
    _count(kern, lst.length, depart)
