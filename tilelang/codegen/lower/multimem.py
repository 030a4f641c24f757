"""multimem_store and multimem_reduce (docs/distributed.md, "Multimem"): element-indexed
accesses of a symmetric array through its multicast address (NVLink SHARP, sm_90+), which
maps to every rank's buffer at once.

`multimem_store(x, indices, value, mask)` is one `multimem.st` per element: the value lands
in every rank's x. `multimem_reduce(x, indices, op, mask)` is one `multimem.ld_reduce` per
element: the reduction of every rank's x there, read in one access. Both are `.relaxed.sys`:
the kernel orders them with signals or barriers (system scope) like any peer access. The
multicast address has the offsets and strides of the rank's own buffer: under peer tables it
is the `<x>_mc` parameter (plan/distributed.py decides which symmetric arrays get one), under
NVSHMEM `nvshmemx_mc_ptr(NVSHMEM_TEAM_WORLD, x)` (NULL, a world without multicast, traps).

Element types and reductions (measured with ptxas 13): st takes u32 s32 u64 s64 f32 f64;
ld_reduce has add for u32 s32 u64 f32 f64 (an i64 add is the .u64 one, the same bits) and
min/max for the four integer types only (sema/builtins_distributed.py refuses the rest).
"""

from __future__ import annotations

import llvmlite.ir as ir

from tilelang.codegen.emit import nvshmem
from tilelang.codegen.emit.kernel import I1, I64, KernelEmitter, TileVal
from tilelang.codegen.emit.values import ListVal
from tilelang.codegen.lower.array_list import entry
from tilelang.codegen.lower.atomic import _index_regs, _layout, _regs, const_str
from tilelang.codegen.lower.table import lowers
from tilelang.ir.ops import BuiltinOp
from tilelang.ir.values import Value
from tilelang.sema.types import DType, TileType

_REG = {"i32": "r", "u32": "r", "i64": "l", "u64": "l", "f32": "f", "f64": "d"}
_PTX = {"i32": "s32", "u32": "u32", "i64": "s64", "u64": "u64", "f32": "f32", "f64": "f64"}


def _ptx_type(dtype: DType, op: str | None) -> str:
    if op == "add" and dtype.name == "i64":
        return "u64"          # no .s64 add: the same bits as .u64
    return _PTX[dtype.name]


def _multicast(kern: KernelEmitter, lst: ListVal):
    """(multicast address i64, extents, strides) of symmetric array `lst`."""
    b = kern.builder
    if lst.local is not None:                        # NVSHMEM
        p = nvshmem.call(b, "nvshmemx_mc_ptr", [ir.Constant(ir.IntType(32), nvshmem.TEAM_WORLD),
                                                lst.local.address])
        mc = b.ptrtoint(p, I64)
        with b.if_then(b.icmp_unsigned("==", mc, ir.Constant(I64, 0)), likely=False):
            trap = kern.fn.module.globals.get("llvm.trap") or ir.Function(
                kern.fn.module, ir.FunctionType(ir.VoidType(), []), "llvm.trap")
            b.call(trap, [])
        return mc, lst.local.extents, lst.local.strides
    assert lst.mc is not None, "plan/distributed.py gives every multimem array a multicast"
    own = entry(kern, lst, lst.me)                   # the offsets of one's own buffer
    return lst.mc, own.extents, own.strides


def _shape(op: BuiltinOp) -> tuple[int, ...]:
    shapes = []
    for _, a in op.args:
        items = a.items if hasattr(a, "items") else (a,)
        for v in items:
            if isinstance(v, Value) and isinstance(v.type, TileType):
                shapes.append(tuple(v.type.shape))
    # broadcast as NumPy does (sema checked the shapes agree); not NumPy itself, which
    # compiling never imports (tests/codegen/test_compile_imports.py)
    rank = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(rank):
        dims = {s[i - rank + len(s)] for s in shapes if i - rank + len(s) >= 0} - {1}
        out.append(dims.pop() if dims else 1)
    return tuple(out)


def _store_asm(kern: KernelEmitter, dtype: DType, pred, addr, v) -> None:
    fty = ir.FunctionType(ir.VoidType(), [I1, I64, v.type])
    asm = ir.InlineAsm(fty, f"@$0 multimem.st.relaxed.sys.global.{_ptx_type(dtype, None)} "
                            f"[$1], $2;", f"b,l,{_REG[dtype.name]},~{{memory}}",
                       side_effect=True)
    kern.builder.call(asm, [pred, addr, v])


def _reduce_asm(kern: KernelEmitter, dtype: DType, op: str, pred, addr) -> ir.Value:
    ty = kern.llvm_type(dtype)
    fty = ir.FunctionType(ty, [I1, I64])
    asm = ir.InlineAsm(fty, f"mov.b{dtype.bits} $0, 0;\n\t@$1 multimem.ld_reduce.relaxed.sys."
                            f"global.{op}.{_ptx_type(dtype, op)} $0, [$2];",
                       f"={_REG[dtype.name]},b,l,~{{memory}}", side_effect=True)
    return kern.builder.call(asm, [pred, addr])


@lowers("multimem_store", "multimem_reduce")
def multimem(kern: KernelEmitter, op: BuiltinOp):
    args = op.arg_map
    lst = kern.env[args["x"].id]
    assert isinstance(lst, ListVal) and lst.me is not None, args["x"]
    dt = lst.dtype
    kern.stats.features.add("multimem")
    reduce = op.name == "multimem_reduce"
    shape = tuple(op.result.type.shape) if reduce else _shape(op)
    layout = _layout(kern, op, shape, dt)
    b = kern.builder
    idx = [_index_regs(kern, a, layout) for a in kern.tuple_items(args["indices"])]
    mask = _regs(kern, args["mask"], layout, None) if args.get("mask") is not None else None
    mc, extents, strides = _multicast(kern, lst)
    size = ir.Constant(I64, dt.itemsize)

    def element(r, owner):
        ok = owner if owner is not None else ir.Constant(I1, 1)
        if mask is not None:
            ok = b.and_(ok, mask[r])
        off = ir.Constant(I64, 0)
        for k in range(lst.rank):
            off = b.add(off, b.mul(idx[k][r], strides[k]))
            ok = b.and_(ok, b.icmp_unsigned("<", idx[k][r], extents[k]))
        return ok, b.add(mc, b.mul(off, size))

    if reduce:
        # a load: every thread reads its registers, replicas included
        red = const_str(args.get("op"), "add")
        regs = []
        for r in range(layout.num_regs):
            ok, addr = element(r, None)
            regs.append(_reduce_asm(kern, dt, red, ok, addr))
        return TileVal(dt, layout, tuple(regs))
    vals = _regs(kern, args["value"], layout, dt)
    owner = kern.owner(layout)
    for r in layout.owned_regs():
        ok, addr = element(r, owner)
        _store_asm(kern, dt, ok, addr, vals[r])
    return None
