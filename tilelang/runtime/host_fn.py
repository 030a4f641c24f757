"""`@host fn`s called from Python: `mod.vadd_grid(5000)` (docs/language.md §9.2).

The function is evaluated by the reference interpreter, so Python gets exactly what tile code
gets for the same arguments (integer wrap-around, rounding, `cdiv`). A one-block kernel made
for the call passes the arguments in as scalars of the parameters' types and stores the result
into a one-element array; it is lowered once per function.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .errors import arg_error, device_error

_PREFIX = "__tilelang_host_"


def functions(text: str, path: str) -> tuple[dict[str, Any], set[str]]:
    """The module's own `@host fn`s by name (their AST nodes), and its other `fn`s' names."""
    from tilelang.frontend import ast
    from tilelang.frontend.parser import parse
    fns = [item for item in parse(text, path).items if isinstance(item, ast.FnDef)]
    host = {f.name: f for f in fns if any(a.name == "host" for a in f.attrs)}
    return host, {f.name for f in fns} - set(host)


class HostFunction:
    """A `@host fn` of a compiled module, callable with Python numbers."""

    def __init__(self, module, fn):
        self.module, self.fn = module, fn
        self.name = fn.name
        self.param_names = tuple(p.name for p in fn.params)
        self._kernel = None

    def __repr__(self) -> str:
        return f"<tilelang.HostFunction {self.name}({', '.join(self.param_names)})>"

    def _lowered(self):
        if self._kernel is not None:
            return self._kernel
        from tilelang.diagnostics import TileError
        from tilelang.driver import compile_source
        from tilelang.frontend.printer import type_expr
        fn = self.fn
        wrapper = _PREFIX + fn.name
        params = "".join(f", __tilelang_arg{i}: {type_expr(p.type)}"
                         for i, p in enumerate(fn.params))
        ret = type_expr(fn.ret)
        call = f"{fn.name}(" + ", ".join(f"__tilelang_arg{i}" for i in range(len(fn.params))) \
            + ")"
        text = (self.module.text + f"\n\nkernel {wrapper}(__tilelang_out: Array[{ret}, 1]"
                f"{params}) {{\n    store(__tilelang_out, index = (0,), tile = full((1,), "
                f"{call}, {ret}));\n}}\n")
        mod = self.module
        res = compile_source(text, mod.path, mod.options,
                             kernels=[wrapper], until="tir")
        if not res.ok:
            raise TileError([d for d in res.diagnostics])
        from tilelang.interp.interpreter import Interpreter
        self._kernel = res.ir.kernel(wrapper)
        self._interp = Interpreter(self._kernel)
        return self._kernel

    def __call__(self, *args, **kwargs):
        from .dtypes import scalar_problem
        names = self.param_names
        sig = f"{self.name}({', '.join(names)})"
        if len(args) > len(names):
            raise arg_error("E0910", f"host function `{sig}` takes {len(names)} argument"
                            f"{'s' if len(names) != 1 else ''}, got {len(args)}",
                            "pass one value per parameter", self.fn.name_span)
        given = dict(zip(names, args))
        for k, v in kwargs.items():
            if k not in names:
                raise arg_error("E0910", f"host function `{sig}` has no parameter `{k}`",
                                "pass one value per parameter", self.fn.name_span)
            if k in given:
                raise arg_error("E0910", f"host function `{sig}`: `{k}` is given twice",
                                "pass one value per parameter", self.fn.name_span)
            given[k] = v
        missing = [n for n in names if n not in given]
        if missing:
            raise arg_error("E0910", f"host function `{sig}` is missing the argument "
                            f"`{missing[0]}`", "pass one value per parameter",
                            self.fn.name_span)
        k = self._lowered()
        out_param, *value_params = k.params
        values = []
        for n, p, fp in zip(names, value_params, self.fn.params):
            v = given[n]
            dtype = p.type.dtype.name
            why = scalar_problem(dtype, v)
            if why:
                raise arg_error("E0915", f"argument `{n}` of host function `{sig}` "
                                f"({n}: {dtype}): {why}", f"pass a value representable as "
                                f"{dtype}", fp.span)
            values.append(v.item() if isinstance(v, np.generic) else v)
        out = np.zeros(1, out_param.type.dtype.storage_np_dtype)
        from tilelang.interp import InterpreterError
        try:
            self._interp.run([out, *values], (1, 1, 1))
        except InterpreterError as e:
            raise device_error("E0931", f"host function `{self.name}` failed in the "
                               f"interpreter: {e}", "the same call fails in tile code") from None
        return out[0].item()
