"""The TMA tensor-map parameters of a kernel, added to its LLVM function as the lowering asks
for them.

Which maps a kernel needs is known only while its loads and stores are lowered
(lower/tensorcore/tma_load.py, lower/tensorcore/tma_store.py), but they are parameters, which llvmlite fixes when
the function is created. Emitting the kernel once to learn them and again with them doubled
the Python time of every TMA kernel (the wgmma matmul: ~10 ms of ~25, plus its garbage); here
each map becomes a parameter at its first lookup instead, appended after the source parameters
in the order of first use (docs/abi.md: `.param .align 64 .b8 [128]`, grid constants).
"""

from __future__ import annotations

import llvmlite.ir as ir

_MAP_TYPE = ir.PointerType(ir.ArrayType(ir.IntType(8), 128))


class MapParams(dict):
    """spec -> its parameter (an ir.Argument of `fn`); every spec is available: looking one up
    the first time adds the parameter. Iteration order is parameter order."""

    def __init__(self, module: ir.Module, fn: ir.Function):
        super().__init__()
        self.module, self.fn = module, fn

    def __contains__(self, spec) -> bool:
        return True

    def get(self, spec, default=None):
        return self[spec]

    def __missing__(self, spec) -> ir.Argument:
        fn, m = self.fn, self.module
        index = len(fn.args)
        arg = ir.Argument(fn, _MAP_TYPE, name=f"{spec.array}_tmap{len(self)}")
        # llvmlite keeps the prototype in three places; the function is printed only later
        fn.args = fn.args + (arg,)
        fn.ftype = ir.FunctionType(fn.ftype.return_type, list(fn.ftype.args) + [_MAP_TYPE])
        fn.type = fn.ftype.as_pointer()
        arg.add_attribute("byval")
        arg.attributes.align = 64
        md = m.add_named_metadata("nvvm.annotations")
        md.add(m.add_metadata([fn, ir.MetaDataString(m, "grid_constant"),
                               m.add_metadata([ir.Constant(ir.IntType(32), index + 1)])]))
        self[spec] = arg
        return arg
