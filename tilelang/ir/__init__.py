"""Tile IR: typed SSA values, registry-backed operations, structured control flow; the
builder, printer, verifier and passes. See docs/ir.md."""

from tilelang.ir.args import TupleArg
from tilelang.ir.builder import Builder, IRBuildError, KernelBuilder, module
from tilelang.ir.ops import (Block, BreakOp, BuiltinOp, ConditionOp, ConstantOp, ContinueOp,
                             ForOp, IfOp, IRModule, Kernel, Op, OpVisitor, ReturnOp, WhileOp,
                             YieldOp, walk)
from tilelang.ir.printer import format_kernel, format_module
from tilelang.ir.values import Value
from tilelang.ir.verifier import IRVerificationError, verify

__all__ = ["Block", "BreakOp", "Builder", "BuiltinOp", "ConditionOp", "ConstantOp",
           "ContinueOp", "ForOp", "IRBuildError", "IRModule", "IRVerificationError", "IfOp", "Kernel", "KernelBuilder",
           "Op", "OpVisitor", "ReturnOp", "TupleArg", "Value", "WhileOp", "YieldOp",
           "format_kernel", "format_module", "module", "verify", "walk"]
