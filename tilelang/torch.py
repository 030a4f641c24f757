"""Tile kernels as PyTorch operators (docs/torch.md).

`op(name, kernel, outputs=..., grid=...)` registers a launch of a Tile kernel as a custom
operator through `torch.library.custom_op`, so that `torch.compile(fullgraph=True)` (any back
end), `torch.export` and `torch.library.opcheck` see one opaque operator with a schema, a fake
implementation and declared mutations, as they see `torch.library.triton_op`:

    import tilelang, tilelang.torch as tt
    mod = tilelang.compile("examples/vadd.tile", backend="emulator")
    vadd = tt.op("demo::vadd", mod.vadd, outputs={"c": tt.like("a")},
                 grid=lambda meta: (tilelang.cdiv(meta["a"].shape[0], meta["TILE"]),))
    c = vadd(a, b)                   # also torch.ops.demo.vadd(a, b)

The model, and why it is shaped this way:
- The operator's arguments are the kernel's array and scalar parameters that are not outputs,
  in the kernel's order; `const` parameters are bound when the operator is made (a value, or a
  function of the launch's `meta` as the grid is). Outputs are allocated by the operator,
  from declarations (`like(...)` or a shape function), so the same declaration is the fake
  (meta) implementation: what torch.compile traces is what the real launch allocates.
- Which arrays a kernel writes is a fact of its compiled code (`AbiParam.written`, docs/abi.md),
  so the mutated arguments are derived from it and a user's `mutates_args` is checked against
  it: a wrong declaration would let torch.compile reorder or drop a kernel's writes.
- On CUDA tensors a launch runs on the tensors' device and that device's current torch stream,
  so it is ordered with the torch work around it and can be captured into a CUDA graph.

torch is imported on first use only: importing this module never needs it, and using it
without torch is an ImportError that says how to install it.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

__all__ = ["op", "like", "grad", "TileOp", "TileOpError", "custom_op", "wrap", "written_arrays",
           "torch_dtype"]

# Tile dtype -> torch dtype attribute name (tf32 arrays are float32 tensors, docs/python-api.md).
_TORCH_DTYPE = {
    "bool": "bool", "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64",
    "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64",
    "f16": "float16", "bf16": "bfloat16", "f32": "float32", "tf32": "float32",
    "f64": "float64", "f8e4m3": "float8_e4m3fn", "f8e5m2": "float8_e5m2",
}


def _torch():
    try:
        import torch
    except ImportError:
        raise ImportError("tilelang.torch needs PyTorch, which is not installed: "
                          "pip install 'tilec[torch]' (or any torch >= 2.4)") from None
    return torch


def torch_dtype(tile_dtype: str):
    """The torch dtype of arrays passed for a Tile dtype."""
    return getattr(_torch(), _TORCH_DTYPE[tile_dtype])


# -- declarations ---------------------------------------------------------------------------

@dataclass(frozen=True)
class like:
    """An output with the shape of the input `name` (and the output parameter's dtype, unless
    `dtype` says otherwise)."""
    name: str
    dtype: Any = None


@dataclass(frozen=True)
class grad:
    """In a backward binding: the gradient of the forward output `name`."""
    name: str


@dataclass(frozen=True)
class _Output:
    name: str
    rank: int
    dtype: Any                       # torch dtype
    shape: Callable | None           # meta -> shape; None: the user's fake allocates


class TileOpError(ValueError):
    """A mistake in making a Tile operator (the message names the operator and the fix)."""


# -- the operator ---------------------------------------------------------------------------

class TileOp:
    """A Tile kernel launch registered as the PyTorch operator `name`; call it like a function
    (or as `torch.ops.<namespace>.<name>`)."""

    def __init__(self, name: str, kernel, *, outputs, grid, consts, mutates_args, fake,
                 block, device_types):
        torch = _torch()
        self.name, self.kernel, self.grid, self.block = name, kernel, grid, block
        self._where = f"Tile operator `{name}`"
        params = {p.name: p for p in kernel.params}
        self._params = params
        self.outputs = self._outputs(outputs, fake, params)
        out_names = {o.name for o in self.outputs}
        self.inputs = tuple(p.name for p in kernel.params if p.name not in out_names)
        self._static, self._dynamic = self._split_consts(consts or {})
        self._fake_fn = fake
        self.backend = kernel.module.backend.name
        self.mutates = self._mutations(mutates_args, params, out_names)
        impl = _with_signature(self._impl, self._signature(params, torch))
        if device_types is None:
            device_types = "cuda" if self.backend == "cuda" else "cpu"
        self.op = torch.library.custom_op(name, impl, mutates_args=self.mutates,
                                          device_types=device_types)
        self.op.register_fake(_with_signature(self._fake, self._signature(params, torch)))

    # -- declarations --------------------------------------------------------------------------
    def _outputs(self, outputs, fake, params) -> tuple[_Output, ...]:
        if isinstance(outputs, str):
            outputs = (outputs,)
        decls = dict(outputs) if isinstance(outputs, Mapping) else {n: None for n in outputs}
        out = []
        for name, decl in decls.items():
            p = params.get(name)
            if p is None or p.kind != "array":
                raise TileOpError(f"{self._where}: output `{name}` is no array parameter of "
                                  f"kernel `{self.kernel.name}` (its arrays: "
                                  f"{', '.join(q.name for q in params.values() if q.kind == 'array')})")
            dtype = torch_dtype(p.dtype)
            if decl is None:
                if fake is None:
                    raise TileOpError(f"{self._where}: output `{name}` has no shape: declare "
                                      f"it (`like(\"x\")` or a function of meta returning the "
                                      f"shape) or pass `fake=` to allocate the outputs")
                shape = None
            elif isinstance(decl, like):
                src = params.get(decl.name)
                if src is None or src.kind != "array" or decl.name in decls:
                    raise TileOpError(f"{self._where}: `like({decl.name!r})` for output "
                                      f"`{name}` names no input array")
                if decl.dtype is not None:
                    dtype = decl.dtype
                shape = (lambda meta, n=decl.name: tuple(meta[n].shape))
            elif callable(decl):
                shape = decl
            else:
                raise TileOpError(f"{self._where}: output `{name}` is declared as {decl!r}: "
                                  f"use like(\"input\") or a function of meta returning a shape")
            out.append(_Output(name, p.rank, dtype, shape))
        return tuple(out)

    def _split_consts(self, consts):
        names = {p.name for p in self.kernel.info.const_params}
        for k in consts:
            if k not in names:
                raise TileOpError(f"{self._where}: kernel `{self.kernel.name}` has no const "
                                  f"parameter `{k}` (its consts: {', '.join(sorted(names)) or 'none'})")
        static = {k: v for k, v in consts.items() if not callable(v)}
        dynamic = {k: v for k, v in consts.items() if callable(v)}
        return static, dynamic

    def _mutations(self, declared, params, out_names) -> tuple[str, ...]:
        written = self._written()
        arrays = [n for n in self.inputs if params[n].kind == "array"]
        if written is None:                  # the interpreter compiles nothing: trust the user
            derived = None
        else:
            derived = tuple(n for n in arrays if n in written)
        if declared is None:
            if derived is None:
                why = ("the `interp` back end compiles nothing): pass mutates_args=(...)"
                       if self.backend == "interp" else
                       "a const without default is computed from the inputs): pass "
                       "mutates_args=(...), checked at the first launch")
                raise TileOpError(f"{self._where}: which arrays kernel `{self.kernel.name}` "
                                  f"writes is not known before a launch ({why}")
            return derived
        declared = (declared,) if isinstance(declared, str) else tuple(declared)
        for n in declared:
            if n not in arrays:
                raise TileOpError(f"{self._where}: mutates_args names `{n}`, which is no input "
                                  f"array of the operator (inputs: {', '.join(arrays)})")
        if derived is not None:
            missing = [n for n in derived if n not in declared]
            extra = [n for n in declared if n not in derived]
            if missing:
                raise TileOpError(f"{self._where}: kernel `{self.kernel.name}` writes "
                                  f"{_names(missing)}, which mutates_args leaves out; torch "
                                  f"would assume it unchanged (declare it, or leave "
                                  f"mutates_args out to derive it from the kernel)")
            if extra:
                raise TileOpError(f"{self._where}: mutates_args names {_names(extra)}, which "
                                  f"kernel `{self.kernel.name}` never writes (its ABI: "
                                  f"docs/abi.md); remove it")
        return tuple(n for n in arrays if n in declared)

    def _written(self):
        """The kernel's written arrays, from its compiled ABI (None on the interpreter)."""
        if self.backend == "interp":
            return None
        k = self.kernel.specialize(**self._static)
        for p in k.info.const_params:
            if p.name not in k.consts and p.default is None:
                if p.name in self._dynamic:
                    return self._written_probe(k)
        return written_arrays(k)

    def _written_probe(self, k):
        # A const without default computed from the inputs has no value before a call, and
        # the kernel cannot be compiled without it: the user's declaration is checked at the
        # first call instead (`_check_written`).
        self._deferred = True
        return None

    def _signature(self, params, torch) -> inspect.Signature:
        ps = []
        for n in self.inputs:
            p = params[n]
            ann = torch.Tensor if p.kind == "array" else _scalar_type(p.dtype)
            ps.append(inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                        annotation=ann))
        ret = (None if not self.outputs else torch.Tensor if len(self.outputs) == 1
               else tuple[tuple(torch.Tensor for _ in self.outputs)])
        return inspect.Signature(ps, return_annotation=ret)

    # -- implementations -----------------------------------------------------------------------
    def _meta(self, args: Mapping[str, Any], outs: Mapping[str, Any] | None = None) -> dict:
        meta = {p.name: p.default for p in self.kernel.info.const_params
                if p.default is not None}
        meta.update(self.kernel.consts)
        meta.update(self._static)
        meta.update(args)
        for k, f in self._dynamic.items():
            meta[k] = f(meta)
        if outs:
            meta.update(outs)
        return meta

    def _allocate(self, args: dict, meta: dict) -> dict:
        torch = _torch()
        device = next((v.device for v in args.values() if isinstance(v, torch.Tensor)), None)
        if any(o.shape is None for o in self.outputs):
            made = self._fake_fn(*(args[n] for n in self.inputs))
            made = (made,) if isinstance(made, torch.Tensor) else tuple(made)
            if len(made) != len(self.outputs):
                raise TileOpError(f"{self._where}: `fake` returned {len(made)} tensors for "
                                  f"{len(self.outputs)} outputs")
            outs = dict(zip((o.name for o in self.outputs), made))
        else:
            outs = {o.name: torch.empty(_shape(o.shape(meta), self._where, o.name),
                                        dtype=o.dtype, device=device) for o in self.outputs}
        for o in self.outputs:
            t = outs[o.name]
            if not isinstance(t, torch.Tensor) or t.dim() != o.rank:
                raise TileOpError(f"{self._where}: output `{o.name}` must be a tensor of rank "
                                  f"{o.rank}, got {_describe(t)}")
        return outs

    def _fake(self, *args, **kwargs):
        bound = self._bind(args, kwargs)
        outs = self._allocate(bound, self._meta(bound))
        return self._result(outs)

    def _impl(self, *args, **kwargs):
        torch = _torch()
        bound = self._bind(args, kwargs)
        meta = self._meta(bound)
        outs = self._allocate(bound, meta)
        meta.update(outs)
        consts = {k: meta[k] for k in (*self._static, *self._dynamic)}
        kernel = self.kernel.specialize(**consts)
        if getattr(self, "_deferred", False):
            self._check_written(kernel)
        values = [outs[p.name] if p.name in outs else bound[p.name] for p in kernel.params]
        grid = self.grid(meta) if callable(self.grid) else self.grid
        device = _device_of(values, self._where, torch)
        if _empty_grid(grid):
            # no block to run: an operator on empty tensors returns its (empty) outputs, as
            # torch's own do, where a launch of zero blocks would be E0903 (as in Triton)
            return self._result(outs)
        if device is not None and device.type == "cuda":
            with torch.cuda.device(device):
                kernel.launch(grid, values, stream=torch.cuda.current_stream(device),
                              block=self.block)
        else:
            kernel.launch(grid, values, block=self.block)
        return self._result(outs)

    def _check_written(self, kernel) -> None:
        written = written_arrays(kernel)
        bad = [n for n in self.inputs if n in written and n not in self.mutates]
        if bad:
            raise TileOpError(f"{self._where}: kernel `{self.kernel.name}` writes "
                              f"{_names(bad)}, which mutates_args leaves out")
        self._deferred = False

    def _bind(self, args, kwargs) -> dict:
        if len(args) + len(kwargs) != len(self.inputs):
            raise TypeError(f"{self._where} takes {len(self.inputs)} arguments "
                            f"({', '.join(self.inputs)}), got {len(args) + len(kwargs)}")
        bound = dict(zip(self.inputs, args))
        bound.update(kwargs)
        return bound

    def _result(self, outs):
        if not self.outputs:
            return None
        if len(self.outputs) == 1:
            return outs[self.outputs[0].name]
        return tuple(outs[o.name] for o in self.outputs)

    # -- the torch side --------------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        return self.op(*args, **kwargs)

    def register_autograd(self, backward, *, setup_context=None) -> None:
        """`torch.library.register_autograd` for this operator (a Python backward)."""
        self.op.register_autograd(backward, setup_context=setup_context)

    def register_backward(self, backward: "TileOp", *, inputs: Mapping[str, Any] | None = None,
                          grads: Mapping[str, str] | None = None) -> None:
        """Make this operator differentiable with the Tile operator `backward`.

        `inputs` binds each argument of `backward` to a forward input or output (by name) or
        to `grad("out")`, the gradient of a forward output; by default an argument named like a
        forward input or output takes it, and one named `d<out>` takes `grad("<out>")`.
        `grads` names, for each differentiable forward input, the `backward` output that is its
        gradient; by default `d<input>`. Inputs without a gradient get None."""
        _Backward(self, backward, inputs or {}, grads).register()

    def __repr__(self) -> str:
        return f"<tilelang.torch.TileOp {self.name} of kernel {self.kernel.name}>"


class _Backward:
    """The binding of a backward TileOp to a forward one, as setup_context and backward."""

    def __init__(self, fwd: TileOp, bwd: TileOp, inputs: Mapping[str, Any], grads):
        if fwd.mutates:
            raise TileOpError(f"{fwd._where}: an operator that mutates its inputs "
                              f"({_names(fwd.mutates)}) cannot have a backward")
        self.fwd, self.bwd = fwd, bwd
        outs = {o.name for o in fwd.outputs}
        known = set(fwd.inputs) | outs
        self.binding = {}
        for n in bwd.inputs:
            src = inputs.get(n)
            if src is None:
                if n in known:
                    src = n
                elif n.startswith("d") and n[1:] in outs:
                    src = grad(n[1:])
                else:
                    raise TileOpError(f"{bwd._where}: argument `{n}` is bound to nothing of "
                                      f"{fwd._where}: pass inputs={{{n!r}: ...}}")
            if isinstance(src, grad) and src.name not in outs or \
                    isinstance(src, str) and src not in known:
                raise TileOpError(f"{bwd._where}: `{n}` is bound to {src!r}, which is no "
                                  f"input or output of {fwd._where}")
            self.binding[n] = src
        bouts = [o.name for o in bwd.outputs]
        if grads is None:
            grads = {n: f"d{n}" for n in fwd.inputs if f"d{n}" in bouts}
        for i, o in grads.items():
            if i not in fwd.inputs or o not in bouts:
                raise TileOpError(f"{bwd._where}: grads maps `{i}` to `{o}`: need an input "
                                  f"of {fwd._where} and an output of {bwd._where}")
        self.grads = dict(grads)
        self.saved = [s for s in dict.fromkeys(self.binding.values()) if isinstance(s, str)]

    def register(self) -> None:
        self.fwd.op.register_autograd(self.backward, setup_context=self.setup_context)

    def setup_context(self, ctx, inputs, output) -> None:
        torch = _torch()
        outs = (output,) if len(self.fwd.outputs) == 1 else tuple(output)
        values = dict(zip(self.fwd.inputs, inputs))
        values.update(zip((o.name for o in self.fwd.outputs), outs))
        tensors = [n for n in self.saved if isinstance(values[n], torch.Tensor)]
        ctx.save_for_backward(*(values[n] for n in tensors))
        ctx.tile_tensors = tuple(tensors)
        ctx.tile_scalars = {n: values[n] for n in self.saved if n not in tensors}

    def backward(self, ctx, *grads):
        values = dict(zip(ctx.tile_tensors, ctx.saved_tensors))
        values.update(ctx.tile_scalars)
        gout = dict(zip((o.name for o in self.fwd.outputs), grads))
        args = [gout[s.name].contiguous() if isinstance(s, grad) else values[s]
                for s in (self.binding[n] for n in self.bwd.inputs)]
        res = self.bwd(*args)
        res = (res,) if len(self.bwd.outputs) == 1 else tuple(res)
        by_name = dict(zip((o.name for o in self.bwd.outputs), res))
        return tuple(by_name[self.grads[n]] if n in self.grads else None
                     for n in self.fwd.inputs)


# -- operators written as functions (the shape of torch.library.triton_op / wrap_triton) ----

_CURRENT = None          # contextvars.ContextVar of the _Call running now (made on first use)


@dataclass(frozen=True)
class _Call:
    """The operator a real call is running: its name and its input tensors by name, with
    which of them it declared mutated (what `wrap`'s launches are checked against)."""
    name: str
    tensors: tuple
    mutates: frozenset


def _current():
    global _CURRENT
    if _CURRENT is None:
        import contextvars
        _CURRENT = contextvars.ContextVar("tilelang_torch_call", default=None)
    return _CURRENT


def custom_op(name: str, fn: Callable | None = None, /, *, mutates_args, device_types=None,
              schema: str | None = None):
    """`torch.library.custom_op` for a function that allocates its outputs and launches Tile
    kernels through `wrap(kernel)[grid](...)`: as `torch.library.triton_op`, the function is
    also the fake implementation (under fake tensors the launches do nothing), and each launch
    checks that the inputs its kernel writes are in `mutates_args` (a `TileOpError` if not)."""
    torch = _torch()
    declared = frozenset((mutates_args,) if isinstance(mutates_args, str) else mutates_args)

    def decorate(f):
        try:                      # string annotations (`from __future__ import annotations`)
            sig = inspect.signature(f, eval_str=True)         # are resolved in f's module
        except (NameError, TypeError, SyntaxError):
            sig = inspect.signature(f)
        params = list(sig.parameters)

        def real(*args, **kwargs):
            bound = dict(zip(params, args), **kwargs)
            tensors = tuple((n, v) for n, v in bound.items() if isinstance(v, torch.Tensor))
            token = _current().set(_Call(name, tensors, declared))
            try:
                return f(*args, **kwargs)
            finally:
                _current().reset(token)
        real.__signature__ = sig
        real.__name__ = f.__name__
        result = torch.library.custom_op(name, real, mutates_args=mutates_args,
                                         device_types=device_types, schema=schema)
        result.register_fake(f)
        return result
    return decorate if fn is None else decorate(fn)


class wrap:
    """`wrap(kernel)[grid](*args, **consts)`: a launch inside a `custom_op` function (as
    `torch.library.wrap_triton`). On fake or meta tensors it does nothing; on CUDA tensors it
    runs on their device and current stream; its writes are checked against the operator's
    `mutates_args`."""

    def __init__(self, kernel):
        self.kernel = kernel

    def __getitem__(self, grid):
        return lambda *args, stream=None, block=None, **consts: \
            self._launch(grid, args, stream, block, consts)

    def _launch(self, grid, args, stream, block, consts):
        torch = _torch()
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        if any(_is_fake(t) for t in tensors):
            return None
        kernel = self.kernel.specialize(**consts)
        call = _current().get()
        if call is not None:
            _check_launch_writes(call, kernel, args, torch)
        if callable(grid):
            grid = grid(_launch_meta(kernel, args))
        if _empty_grid(grid):
            return None
        where = f"Tile operator `{call.name}`" if call else f"kernel `{kernel.name}`"
        device = _device_of(args, where, torch)
        if device is not None and device.type == "cuda":
            with torch.cuda.device(device):
                return kernel.launch(grid, args, block=block,
                                     stream=stream or torch.cuda.current_stream(device))
        return kernel.launch(grid, args, stream=stream, block=block)


def _is_fake(t) -> bool:
    from torch._subclasses.fake_tensor import is_fake
    return t.device.type == "meta" or is_fake(t)


def _launch_meta(kernel, args) -> dict:
    meta = {p.name: p.default for p in kernel.info.const_params if p.default is not None}
    meta.update(kernel.consts)
    meta.update(zip((p.name for p in kernel.params), args))
    return meta


_WRITTEN: dict = {}


def written_arrays(kernel) -> frozenset:
    """The names of the arrays `kernel` (with its consts bound) writes, from its compiled ABI
    (docs/abi.md, `AbiParam.written`); compiled once per bound kernel."""
    key = (id(kernel.module), kernel.name, tuple(sorted(kernel.consts.items())))
    got = _WRITTEN.get(key)
    if got is None:
        art = kernel.compile().artifact
        got = _WRITTEN[key] = frozenset(p.name for p in art.params
                                        if p.kind == "array" and p.written)
    return got


def _check_launch_writes(call: _Call, kernel, args, torch) -> None:
    if kernel.module.backend.name == "interp":
        return                                   # nothing compiled to read the writes from
    written = written_arrays(kernel)
    for p, a in zip(kernel.params, args):
        if p.name not in written or not isinstance(a, torch.Tensor):
            continue
        ptr = a.untyped_storage().data_ptr()
        for n, t in call.tensors:
            if n not in call.mutates and t.untyped_storage().data_ptr() == ptr and ptr:
                raise TileOpError(f"Tile operator `{call.name}`: kernel `{kernel.name}` "
                                  f"writes `{p.name}`, which is the memory of input `{n}`, "
                                  f"and mutates_args leaves `{n}` out; declare it")


def op(name: str, kernel, *, outputs: Mapping[str, Any] | Sequence[str] = (), grid,
       consts: Mapping[str, Any] | None = None, mutates_args: Sequence[str] | None = None,
       fake: Callable | None = None, block=None, device_types=None) -> TileOp:
    """Register a launch of `kernel` as the PyTorch operator `name` ("namespace::op").

    outputs       output array parameters the operator allocates and returns, each declared
                  as `like("input")` (its shape; the parameter's dtype unless `dtype=`), a
                  function of `meta` returning the shape, or None with `fake=`
    grid          as for `kernel[grid]`: an int, a tuple, or a function of `meta` (the inputs
                  and outputs by name and the const values)
    consts        const values: a value, or a function of `meta` (the inputs by name)
    mutates_args  input arrays the kernel writes; by default derived from the kernel's ABI,
                  and checked against it when given
    fake          a function of the inputs returning the outputs (allocated, not computed):
                  the fake implementation, and the allocator of the real one, for outputs
                  whose shape no declaration says
    """
    return TileOp(name, kernel, outputs=outputs, grid=grid, consts=consts,
                  mutates_args=mutates_args, fake=fake, block=block, device_types=device_types)


# -- helpers ---------------------------------------------------------------------------------

def _with_signature(fn, sig: inspect.Signature):
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs)
    wrapper.__signature__ = sig
    wrapper.__name__ = getattr(fn, "__name__", "tile_op")
    return wrapper


def _scalar_type(dtype: str):
    if dtype == "bool":
        return bool
    return float if dtype.startswith(("f", "bf", "tf")) else int


def _shape(shape, where: str, name: str) -> tuple:
    if isinstance(shape, int) or hasattr(shape, "node"):       # an int or a SymInt
        return (shape,)
    try:
        return tuple(shape)
    except TypeError:
        raise TileOpError(f"{where}: the shape function of output `{name}` returned "
                          f"{shape!r}, not a tuple of ints") from None


def _device_of(values, where: str, torch):
    devices = {v.device for v in values if isinstance(v, torch.Tensor)}
    if len(devices) > 1:
        raise TileOpError(f"{where}: tensors on different devices "
                          f"({', '.join(sorted(map(str, devices)))}); move them to one")
    return next(iter(devices), None)


def _empty_grid(grid) -> bool:
    dims = grid if isinstance(grid, (tuple, list)) else (grid,)
    return any(type(d) is int and d == 0 for d in dims)


def _describe(v) -> str:
    dim = getattr(v, "dim", None)
    return f"a tensor of rank {dim()}" if callable(dim) else type(v).__name__


def _names(names) -> str:
    return ", ".join(f"`{n}`" for n in names)
