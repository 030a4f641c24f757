"""The tile-level reference interpreter: runs Tile IR with NumPy, one block of the grid at a
time, every operation through the registry's reference semantics (`Builtin.evaluate`).

    run_kernel(kernel, [a, b, c], grid=(cdiv(n, 1024),))   # arrays are mutated in place

Model: blocks run sequentially in grid order (x fastest, then y, then z), so atomics and
stores from earlier blocks are visible to later ones; this is one valid schedule of the
device's unordered blocks. Tiles are NumPy arrays, scalars 0-d arrays, arrays the caller's
`np.ndarray`s (bf16/tf32/f8 data as float32 holding representable values). `print` writes to
`out` (default stdout) prefixed with the block index; a failed `assert` raises
`InterpreterAssertionError` naming kernel, block and message. Each result is checked against
its IR type (shape and NumPy dtype), which catches registry/IR disagreements early.
"""

from __future__ import annotations

import inspect
import io
import sys
from typing import Any, Mapping, Sequence, TextIO

import numpy as np

from tilelang.sema.builtins import GridContext
from tilelang.sema.builtins_core import BoundArgs, Builtin, DTypeType
from tilelang.sema.builtins_debug import TileAssertionError
from tilelang.sema.constants import ConstStr, ConstTuple, ConstValue
from tilelang.sema.types import ArrayListType, ArrayType, DType, TileType, round_to_dtype

from tilelang.ir.args import Arg, FnArg, TupleArg
from tilelang.ir.op_typing import bound_of
from tilelang.ir.ops import (Block, BreakOp, BuiltinOp, ConditionOp, ConstantOp, ContinueOp,
                             ForOp, IfOp, IRModule, Kernel, Op, ReturnOp, WhileOp, YieldOp,
                             walk)
from tilelang.ir.printer import Namer, format_kernel, format_op
from tilelang.ir.values import Value
from tilelang.interp.errors import InterpreterAssertionError, InterpreterError

# The scalar-only logical operators as they apply to whole arrays (a combine function's body
# runs on whole tiles: Interpreter._combine).
_LOGIC = {"and": np.logical_and, "or": np.logical_or, "not": np.logical_not}

# How a block ended (the terminator's kind).
_YIELD, _BREAK, _CONTINUE, _COND, _RETURN = range(5)
_KIND = {YieldOp: _YIELD, BreakOp: _BREAK, ContinueOp: _CONTINUE, ConditionOp: _COND,
         ReturnOp: _RETURN}


def _const_value(c: ConstValue) -> Any:
    """A constant as a reference takes it: loose stays a Python number, strict becomes a
    0-d array of its dtype (so NumPy does not re-promote it)."""
    if c.dtype is None:
        return c.value
    return round_to_dtype(np.asarray(c.value), c.dtype)


def _wants_ctx(b: Builtin) -> bool:
    try:
        return "ctx" in inspect.signature(b.ref).parameters
    except (TypeError, ValueError):
        return False


def _default_value(info) -> Any:
    """A parameter's default as the reference takes it (None for an absent optional)."""
    if info is None:
        return None
    if isinstance(info.type, DTypeType):
        return info.type.dtype                     # a dtype parameter (`dtype=i32`)
    c = info.const
    if isinstance(c, ConstValue):
        return _const_value(c)
    if isinstance(c, ConstTuple):
        return tuple(_const_value(i) if isinstance(i, ConstValue) else i for i in c.items)
    if isinstance(c, ConstStr):
        return c.value
    return None


class _Prepared:
    """Per-op data computed once per kernel: bound arguments, whether it needs the grid."""

    __slots__ = ("builtin", "bound", "ctx")

    def __init__(self, builtin: Builtin, bound: BoundArgs, ctx: bool):
        self.builtin, self.bound, self.ctx = builtin, bound, ctx


class Interpreter:
    def __init__(self, kernel: Kernel, out: TextIO | None = None):
        self.kernel = kernel
        self.out = out
        consts = {op.result: op.value for op in walk(kernel.body) if isinstance(op, ConstantOp)}
        self.prepared: dict[int, _Prepared] = {}
        for op in walk(kernel.body):
            if isinstance(op, BuiltinOp):
                b = op.builtin
                self.prepared[id(op)] = _Prepared(b, bound_of(op, consts.get), _wants_ctx(b))
        self.grid_ctx = GridContext()

    # -- arguments -----------------------------------------------------------------------------
    def bind_params(self, args: Sequence[Any] | Mapping[str, Any]) -> dict[Value, Any]:
        params = self.kernel.params
        if isinstance(args, Mapping):
            missing = [p.hint for p in params if p.hint not in args]
            if missing:
                raise InterpreterError(f"kernel `{self.kernel.name}`: missing argument "
                                       f"`{missing[0]}`")
            values = [args[p.hint] for p in params]
        else:
            if len(args) != len(params):
                raise InterpreterError(f"kernel `{self.kernel.name}` takes {len(params)} "
                                       f"arguments, got {len(args)}")
            values = list(args)
        env: dict[Value, Any] = {}
        for p, x in zip(params, values):
            env[p] = self._param_value(p, x)
        return env

    def _param_value(self, p: Value, x: Any) -> Any:
        t = p.type
        if isinstance(t, ArrayType):
            want = t.dtype.storage_np_dtype
            if not isinstance(x, np.ndarray) or x.ndim != t.rank or x.dtype != want:
                got = (f"an array of {x.dtype} with {x.ndim} dimensions"
                       if isinstance(x, np.ndarray) else type(x).__name__)
                raise InterpreterError(f"kernel `{self.kernel.name}`: parameter `{p.hint}` is "
                                       f"{t} (NumPy {want}, {t.rank}-d), got {got}")
            return x
        if isinstance(t, ArrayListType):      # a list of arrays: each checked as an array
            if not isinstance(x, (list, tuple)) or not x:
                raise InterpreterError(f"kernel `{self.kernel.name}`: parameter `{p.hint}` is "
                                       f"{t}, got {type(x).__name__ if x else 'an empty list'}")
            item = Value(p.id, t.array, f"{p.hint}[]")
            return [self._param_value(item, a) for a in x]
        assert isinstance(t, TileType)
        return round_to_dtype(np.asarray(x), t.dtype)

    # -- execution -----------------------------------------------------------------------------
    def run(self, args, grid: Sequence[int], cluster: Sequence[int] = (1, 1, 1)) -> None:
        g = _dims("grid", grid)
        c = _dims("cluster", cluster)
        if 0 in c:
            raise InterpreterError(f"the cluster shape {c} has a zero dimension")
        env0 = self.bind_params(args)
        for z in range(g[2]):
            for y in range(g[1]):
                for x in range(g[0]):
                    self.grid_ctx = GridContext((x, y, z), g, c)  # type: ignore[arg-type]
                    self.block(self.kernel.body, dict(env0))

    def block(self, block: Block, env: dict[Value, Any]) -> tuple[int, list[Any]]:
        for op in block.ops:
            t = type(op)
            if t is BuiltinOp:
                self.builtin(op, env)
            elif t is ConstantOp:
                env[op.result] = _const_value(op.value)
            elif t is IfOp:
                r = self.if_(op, env)
                if r is not None:
                    return r
            elif t is ForOp:
                r = self.for_(op, env)
                if r is not None:
                    return r
            elif t is WhileOp:
                r = self.while_(op, env)
                if r is not None:
                    return r
            else:
                return _KIND[t], [env[v] for v in op.operands]
        raise InterpreterError("a block without a terminator (run the verifier)")

    def if_(self, op: IfOp, env) -> tuple[int, list[Any]] | None:
        kind, vals = self.block(op.then if bool(env[op.cond]) else op.else_, env)
        if kind != _YIELD:
            return kind, vals          # break / continue / return leave the if
        env.update(zip(op.results, vals))
        return None

    def _finish_loop(self, op, kind, vals, env):
        """After a loop ends: bind results, or pass a return on."""
        if kind == _RETURN:
            return kind, vals
        env.update(zip(op.results, vals))
        return None

    def for_(self, op: ForOp, env) -> tuple[int, list[Any]] | None:
        i, stop, step = int(env[op.start]), int(env[op.stop]), int(env[op.step])
        carried = [env[v] for v in op.init]
        iv_dtype = op.iv.type.dtype.storage_np_dtype
        body = op.body
        while step > 0 and i < stop:
            env[body.args[0]] = iv_dtype.type(i)
            env.update(zip(body.args[1:], carried))
            kind, vals = self.block(body, env)
            if kind == _BREAK or kind == _RETURN:
                return self._finish_loop(op, kind, vals, env)
            carried = vals
            i += step
        return self._finish_loop(op, _YIELD, carried, env)

    def while_(self, op: WhileOp, env) -> tuple[int, list[Any]] | None:
        carried = [env[v] for v in op.init]
        while True:
            env.update(zip(op.cond.args, carried))
            kind, vals = self.block(op.cond, env)
            if kind == _RETURN:
                return kind, vals
            if not bool(vals[0]):
                return self._finish_loop(op, _YIELD, carried, env)
            env.update(zip(op.body.args, carried))
            kind, vals = self.block(op.body, env)
            if kind == _BREAK or kind == _RETURN:
                return self._finish_loop(op, kind, vals, env)
            carried = vals

    def _arg(self, a: Arg, env) -> Any:
        if isinstance(a, Value):
            return env[a]
        if isinstance(a, ConstValue):
            return _const_value(a)
        if isinstance(a, ConstTuple):
            return tuple(self._arg(i, env) if not isinstance(i, ConstValue) else i.value
                         for i in a.items)
        if isinstance(a, TupleArg):
            return tuple(self._arg(i, env) for i in a.items)
        if isinstance(a, ConstStr):
            return a.value
        if isinstance(a, FnArg):
            return self._combine(a)
        assert isinstance(a, DType)
        return a

    def _combine(self, a: FnArg):
        """A function argument as the reference takes it: `f(left, right)` on two tuples of
        arrays (one per operand tile). The body's ops are scalar ops whose references also
        implement them on tiles, so the body runs once on whole arrays; the scalar-only ones
        (`and`, `or`, `not` on bools) run as NumPy's logical functions, and a body with any
        other scalar-only op (`cdiv`, a strict constructor) runs once per element."""
        body = a.body
        consts = {op.result: op.value for op in body.ops if isinstance(op, ConstantOp)}
        ops = [op for op in body.ops if isinstance(op, BuiltinOp)]
        bounds = {id(op): bound_of(op, consts.get) for op in ops}
        whole = all(op.name in _LOGIC or not op.builtin.scalar_only for op in ops)
        out_types = [np.dtype(v.type.dtype.storage_np_dtype) for v in body.ops[-1].operands]

        def run(values: list, arrays: bool) -> list:
            env = dict(zip(body.args, values))
            for op in body.ops:
                if isinstance(op, ConstantOp):
                    env[op.result] = _const_value(op.value)
                elif isinstance(op, BuiltinOp):
                    args = {name: self._arg(x, env) for name, x in op.args}
                    if arrays and op.name in _LOGIC:
                        env[op.result] = _LOGIC[op.name](*args.values())
                        continue
                    bound = bounds[id(op)]
                    for param in op.builtin.params:
                        if param.name not in args:
                            args[param.name] = _default_value(bound.args.get(param.name))
                    env[op.result] = op.builtin.evaluate(bound, args)
                else:
                    return [np.asarray(env[v]) for v in op.operands]
            raise InterpreterError("a combine function without a yield")

        def f(left, right):
            ins = np.broadcast_arrays(*[np.asarray(v) for v in tuple(left) + tuple(right)])
            shape = ins[0].shape
            if whole:
                return tuple(np.broadcast_to(r, shape).astype(t)
                             for r, t in zip(run(list(ins), True), out_types))
            outs = [np.empty(shape, t) for t in out_types]
            for idx in np.ndindex(shape):
                for o, r in zip(outs, run([np.asarray(v[idx]) for v in ins], False)):
                    o[idx] = r
            return tuple(outs)
        return f

    def builtin(self, op: BuiltinOp, env) -> None:
        p = self.prepared[id(op)]
        values = {name: self._arg(a, env) for name, a in op.args}
        x = op.arg_map.get("x")
        if p.builtin.group == "shape" and isinstance(x, ConstValue) and x.dtype is None:
            # a loose constant where a shape op takes a tile (`expand_dims(64, 0)`): the
            # checker typed it as a rank-0 tile of the result's dtype, as the code generator does
            values["x"] = round_to_dtype(np.asarray(x.value), op.result.type.dtype)
        for param in p.builtin.params:
            if param.name not in values:   # left out of the op: the registry's default
                values[param.name] = _default_value(p.bound.args.get(param.name))
        if p.ctx:
            values["ctx"] = self.grid_ctx
        varargs = [self._arg(a, env) for a in op.varargs]
        is_print = p.builtin.name == "print"
        if is_print:
            values["file"] = io.StringIO()
        try:
            r = p.builtin.evaluate(p.bound, values, varargs)
        except TileAssertionError as e:
            raise InterpreterAssertionError(self.kernel.name, self.grid_ctx.block, str(e),
                                            str(op.span) if op.span else "") from None
        except Exception as e:
            raise InterpreterError(self._where(op) + f"{type(e).__name__}: {e}") from e
        if is_print:
            out = self.out if self.out is not None else sys.stdout
            print(f"[block {self.grid_ctx.block}] {r}", file=out)
        if op.result is not None:
            env[op.result] = self._check(op, r)

    def _where(self, op: Op) -> str:
        name = Namer(self.kernel.params)
        format_kernel(self.kernel, name)
        return (f"kernel `{self.kernel.name}`, block {self.grid_ctx.block}: "
                f"`{format_op(op, name)}`: ")

    def _check(self, op: BuiltinOp, r: Any) -> Any:
        t = op.result.type
        if isinstance(t, ArrayType):          # `list_item`: one of the list's arrays
            return r
        assert isinstance(t, TileType)
        shape = np.shape(r)
        dt = getattr(r, "dtype", None)
        if shape != tuple(t.shape) or dt != t.dtype.storage_np_dtype:
            raise InterpreterError(self._where(op) + f"the reference gave shape {shape} and "
                                   f"dtype {dt}, but the op's type is {t}")
        return r


def _dims(what: str, dims: Any) -> tuple[int, int, int]:
    """A grid or cluster shape padded to 3 dimensions; anything else is an InterpreterError
    (not a TypeError from deep inside the loop)."""
    try:
        d = tuple(dims)
    except TypeError:
        d = None
    if d is None or not 1 <= len(d) <= 3 or any(
            isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, np.integer)) or x < 0
            for x in d):
        raise InterpreterError(f"the {what} must be 1 to 3 non-negative integers, got {dims!r}")
    return tuple(int(x) for x in d) + (1,) * (3 - len(d))  # type: ignore[return-value]


def run_kernel(kernel: Kernel | IRModule, args: Sequence[Any] | Mapping[str, Any],
               grid: Sequence[int], *, name: str | None = None,
               cluster: Sequence[int] = (1, 1, 1), out: TextIO | None = None) -> None:
    """Run `kernel` (or the kernel `name` of a module, or its only kernel) over `grid`."""
    if isinstance(kernel, IRModule):
        if name is None:
            if len(kernel.kernels) != 1:
                raise InterpreterError("the module has several kernels: pass `name`")
            kernel = kernel.kernels[0]
        else:
            kernel = kernel.kernel(name)
    Interpreter(kernel, out).run(args, grid, cluster)
