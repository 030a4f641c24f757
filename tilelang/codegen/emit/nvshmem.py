"""NVSHMEM's device functions as the kernel emitter declares and calls them (docs/distributed.md,
"The NVSHMEM lowering").

The signatures are those of NVSHMEM's device bitcode (`libnvshmem_device_sm_XX.bc` of the
`nvidia-nvshmem-cu13` wheel, read with llvmlite; tests/codegen/target/test_nvshmem_link.py
checks this table against the bitcode when the wheel is installed). Pointers are generic
(address space 0), PEs and comparison/operation codes `i32`. The definitions come from the
bitcode, linked into the module before the PTX is emitted (codegen/target/nvshmem_bitcode.py).

The typed atomics and waits are named by NVSHMEM's type names: `int32` and `uint32` for
32-bit slots, `long` (no `int64_atomic_add` exists) and `uint64` for 64-bit ones.
"""

from __future__ import annotations

import llvmlite.ir as ir

from tilelang.sema.types import DType

_P = ir.PointerType(ir.IntType(8))     # LLVM reads `i8*` as its opaque `ptr`
_I32, _I64, _V = ir.IntType(32), ir.IntType(64), ir.VoidType()

# name -> (return type, parameter types), as defined in the device bitcode
SIGNATURES: dict[str, tuple[ir.Type, tuple[ir.Type, ...]]] = {
    "nvshmem_my_pe": (_I32, ()),
    "nvshmem_n_pes": (_I32, ()),
    "nvshmem_ptr": (_P, (_P, _I32)),
    "nvshmemx_mc_ptr": (_P, (_I32, _P)),
    "nvshmem_quiet": (_V, ()),
    "nvshmemx_signal_op": (_V, (_P, _I64, _I32, _I32)),
    "nvshmem_signal_wait_until": (_I64, (_P, _I32, _I64)),
}
for _t, _ty in (("int32", _I32), ("uint32", _I32), ("long", _I64), ("uint64", _I64)):
    SIGNATURES[f"nvshmem_{_t}_atomic_add"] = (_V, (_P, _ty, _I32))
    SIGNATURES[f"nvshmem_{_t}_atomic_set"] = (_V, (_P, _ty, _I32))
    SIGNATURES[f"nvshmem_{_t}_wait_until"] = (_V, (_P, _I32, _ty))

# nvshmemx_signal_op_t and nvshmem_cmp_type (NVSHMEM's headers), NVSHMEM_TEAM_WORLD
SIGNAL_SET, SIGNAL_ADD = 9, 10
CMP = {"eq": 0, "ne": 1, "gt": 2, "le": 3, "lt": 4, "ge": 5}
TEAM_WORLD = 0
# the global NVSHMEM's host library fills through nvshmemx_cumodule_init (kept visible)
DEVICE_STATE = "nvshmemi_device_state_d"

_TYPE_NAMES = {"i32": "int32", "u32": "uint32", "i64": "long", "u64": "uint64"}


def type_name(dtype: DType) -> str:
    """NVSHMEM's name of a signal pad's slot type (sema allows only these four)."""
    return _TYPE_NAMES[dtype.name]


def function(module: ir.Module, name: str) -> ir.Function:
    """The module's declaration of NVSHMEM function `name` (declared on first use)."""
    fn = module.globals.get(name)
    if fn is None:
        ret, params = SIGNATURES[name]
        fn = ir.Function(module, ir.FunctionType(ret, params), name)
    return fn


def call(builder: ir.IRBuilder, name: str, args) -> ir.Value:
    """Call NVSHMEM's `name`; integer/pointer arguments are converted to its parameter types
    (i64 addresses become generic pointers, wider or narrower integers are truncated or
    sign-extended)."""
    fn = function(builder.module, name)
    conv = []
    for a, ty in zip(args, fn.function_type.args):
        if isinstance(ty, ir.PointerType) and isinstance(a.type, ir.IntType):
            a = builder.inttoptr(a, ty)
        elif isinstance(ty, ir.IntType) and isinstance(a.type, ir.IntType):
            if a.type.width > ty.width:
                a = builder.trunc(a, ty)
            elif a.type.width < ty.width:
                a = builder.sext(a, ty)
        conv.append(a)
    return builder.call(fn, conv)
