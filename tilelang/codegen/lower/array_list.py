"""Lists of arrays (`List[Array[T, N]]`, docs/language.md "Lists of arrays"): `ws[e]`
(`list_item`) reads entry e of the list's device table and gives an `ArrayVal` that every
memory lowering takes as it takes an array parameter; `len(ws)` is the table's length.

The table (docs/abi.md, "Lists of arrays") holds per array its address, then its extents, then
its strides, each an i64: entry e starts at byte e * 8 * (1 + 2 * rank). An index outside
[0, len) reads entry 0's address but gives zero extents, so every access through it is masked
off (loads read the padding, stores are dropped), as for any access outside an array; the
runtime never passes an empty list, so entry 0 exists.
"""

from __future__ import annotations

import llvmlite.ir as ir

from tilelang.codegen.emit import nvshmem
from tilelang.codegen.emit.kernel import I32, I64, ArrayVal, KernelEmitter, TileVal
from tilelang.codegen.emit.values import ListVal
from tilelang.codegen.lower.table import lowers
from tilelang.ir.ops import BuiltinOp
from tilelang.ir.values import Value

_G64 = ir.PointerType(I64, addrspace=1)


def _list(kern: KernelEmitter, a) -> ListVal:
    v = kern.env[a.id]
    assert isinstance(v, ListVal), a
    return v


@lowers("list_item")
def list_item(kern: KernelEmitter, op: BuiltinOp) -> ArrayVal:
    return entry(kern, _list(kern, op.arg_map["L"]), op.arg_map["index"])


def entry(kern: KernelEmitter, lst: ListVal, idx) -> ArrayVal:
    """Entry `idx` (an integer scalar argument, or an i64 LLVM value) of the list's table;
    also rank r's buffer of a symmetric array (lower/distributed.py)."""
    b = kern.builder
    if isinstance(idx, ir.Value):
        e = idx
    elif isinstance(idx, Value):
        t = kern.tile(idx)
        e = t.value
        e = e if e.type.width == 64 else (b.sext(e, I64) if t.dtype.signed else b.zext(e, I64))
    else:
        e = ir.Constant(I64, int(idx.value))
    inside = b.icmp_unsigned("<", e, lst.length)      # 0 <= e < len, as one unsigned test
    if lst.local is not None:
        return _nvshmem_peer(kern, lst, e, inside)
    e = b.select(inside, e, ir.Constant(I64, 0))
    words = 1 + 2 * lst.rank
    base = b.add(lst.table, b.mul(e, ir.Constant(I64, 8 * words)))
    ptr = b.inttoptr(base, _G64)
    vals = []
    for k in range(words):
        # the table is not written while the kernel runs: an invariant load
        ld = b.load(b.gep(ptr, [ir.Constant(I32, k)]) if k else ptr, align=8)
        ld.set_metadata("invariant.load", kern.fn.module.add_metadata([]))
        vals.append(ld)
    zero = ir.Constant(I64, 0)
    extents = tuple(b.select(inside, v, zero) for v in vals[1:1 + lst.rank])
    strides = list(vals[1 + lst.rank:])
    if lst.facts.contiguous and lst.rank:
        strides[-1] = ir.Constant(I64, 1)           # as for a parameter (docs/abi.md)
    return ArrayVal(lst.dtype, lst.rank, vals[0], extents, tuple(strides), lst.facts,
                    f"{lst.name}[]")


def _nvshmem_peer(kern: KernelEmitter, lst: ListVal, pe: ir.Value, inside: ir.Value) -> ArrayVal:
    """PE `pe`'s buffer of a symmetric array under the NVSHMEM lowering (docs/distributed.md):
    `nvshmem_ptr` maps this rank's heap address to the peer's, for loads and stores over
    NVLink. A PE outside the world gives an empty array (as a table's entry does); a PE in
    the world that load/store cannot reach (nvshmem_ptr gives NULL: another node) traps, since
    no access through it could be made."""
    b = kern.builder
    local = lst.local
    p = nvshmem.call(b, "nvshmem_ptr", [local.address, b.select(inside, pe, lst.me)])
    addr = b.ptrtoint(p, I64)
    with b.if_then(b.and_(inside, b.icmp_unsigned("==", addr, ir.Constant(I64, 0))),
                   likely=False):
        trap = kern.fn.module.globals.get("llvm.trap") or ir.Function(
            kern.fn.module, ir.FunctionType(ir.VoidType(), []), "llvm.trap")
        b.call(trap, [])
    zero = ir.Constant(I64, 0)
    extents = tuple(b.select(inside, v, zero) for v in local.extents)
    return ArrayVal(lst.dtype, lst.rank, addr, extents, local.strides, lst.facts,
                    f"{lst.name}[]", symmetric=(local.address, pe))


@lowers("len")
def list_len(kern: KernelEmitter, op: BuiltinOp) -> TileVal:
    lst = _list(kern, op.arg_map["L"])
    n = kern.builder.trunc(lst.length, I32)
    return TileVal(op.result.type.dtype, kern.scalar_layout, (n,))
