"""`op`: one Tile kernel launch as a PyTorch custom operator, its outputs allocated from
declarations that are also its fake implementation, its mutations derived from the kernel's
ABI (docs/torch.md, "Operators")."""

from __future__ import annotations

import inspect
import typing
from typing import Any, Callable, Mapping, Sequence

from .autograd import BackwardBinding
from .declarations import Output, like
from .support import (TileOpError, describe, import_torch, launch, names, scalar_type,
                      shape_tuple, torch_dtype, with_signature, written_arrays)


class TileOp:
    """A Tile kernel launch registered as the PyTorch operator `name`; call it like a function
    (or as `torch.ops.<namespace>.<name>`)."""

    def __init__(self, name: str, kernel, *, outputs, grid, consts, mutates_args, fake,
                 block, device_types):
        torch = import_torch()
        self.name, self.kernel, self.grid, self.block = name, kernel, grid, block
        self.where = f"Tile operator `{name}`"
        params = {p.name: p for p in kernel.params}
        self.outputs = self._outputs(outputs, fake, params)
        out_names = {o.name for o in self.outputs}
        self.inputs = tuple(p.name for p in kernel.params if p.name not in out_names)
        self._static, self._dynamic = self._split_consts(consts or {})
        self._fake_fn = fake
        self.backend = kernel.module.backend.name
        self._deferred = False               # mutations to check at the first call
        self._unknown = "a const without default"   # what defers them, for the message
        self.mutates = self._mutations(mutates_args, params, out_names)
        impl = with_signature(self._impl, self._signature(params, torch))
        if device_types is None:
            device_types = "cuda" if self.backend == "cuda" else "cpu"
        self.op = torch.library.custom_op(name, impl, mutates_args=self.mutates,
                                          device_types=device_types)
        self.op.register_fake(with_signature(self._fake, self._signature(params, torch)))

    # -- declarations --------------------------------------------------------------------------
    def _outputs(self, outputs, fake, params) -> tuple[Output, ...]:
        if isinstance(outputs, str):
            outputs = (outputs,)
        decls = dict(outputs) if isinstance(outputs, Mapping) else {n: None for n in outputs}
        out = []
        for name, decl in decls.items():
            p = params.get(name)
            if p is None or p.kind != "array":
                raise TileOpError(f"{self.where}: output `{name}` is no array parameter of "
                                  f"kernel `{self.kernel.name}` (its arrays: "
                                  f"{', '.join(q.name for q in params.values() if q.kind == 'array')})")
            # a generic kernel's `Array[T, n]` output takes T's dtype, known per call
            dtype = None if p.type_var else torch_dtype(p.dtype)
            if decl is None:
                if fake is None:
                    raise TileOpError(f"{self.where}: output `{name}` has no shape: declare "
                                      f"it (`like(\"x\")` or a function of meta returning the "
                                      f"shape) or pass `fake=` to allocate the outputs")
                shape = None
            elif isinstance(decl, like):
                src = params.get(decl.name)
                if src is None or src.kind != "array" or decl.name in decls:
                    raise TileOpError(f"{self.where}: `like({decl.name!r})` for output "
                                      f"`{name}` names no input array")
                shape = (lambda meta, n=decl.name: tuple(meta[n].shape))
            elif callable(decl):
                shape = decl
            else:
                raise TileOpError(f"{self.where}: output `{name}` is declared as {decl!r}: "
                                  f"use like(\"input\") or a function of meta returning a shape")
            out.append(Output(name, p.rank, dtype, shape, p.type_var))
        return tuple(out)

    def _split_consts(self, consts):
        names = {p.name for p in self.kernel.info.const_params}
        for k in consts:
            if k not in names:
                raise TileOpError(f"{self.where}: kernel `{self.kernel.name}` has no const "
                                  f"parameter `{k}` (its consts: {', '.join(sorted(names)) or 'none'})")
        static = {k: v for k, v in consts.items() if not callable(v)}
        dynamic = {k: v for k, v in consts.items() if callable(v)}
        return static, dynamic

    def _mutations(self, declared, params, out_names) -> tuple[str, ...]:
        written = self._written()
        arrays = [n for n in self.inputs if params[n].kind in ("array", "list")]
        if written is None:                  # the interpreter compiles nothing: trust the user
            derived = None
        else:
            derived = tuple(n for n in arrays if n in written)
        if declared is None:
            if derived is None:
                why = ("the `interp` back end compiles nothing): pass mutates_args=(...)"
                       if self.backend == "interp" else
                       f"{self._unknown} is computed from the inputs): pass "
                       "mutates_args=(...), checked at the first launch")
                raise TileOpError(f"{self.where}: which arrays kernel `{self.kernel.name}` "
                                  f"writes is not known before a launch ({why}")
            return derived
        declared = (declared,) if isinstance(declared, str) else tuple(declared)
        for n in declared:
            if n not in arrays:
                raise TileOpError(f"{self.where}: mutates_args names `{n}`, which is no input "
                                  f"array of the operator (inputs: {', '.join(arrays)})")
        if derived is not None:
            missing = [n for n in derived if n not in declared]
            extra = [n for n in declared if n not in derived]
            if missing:
                raise TileOpError(f"{self.where}: kernel `{self.kernel.name}` writes "
                                  f"{names(missing)}, which mutates_args leaves out; torch "
                                  f"would assume it unchanged (declare it, or leave "
                                  f"mutates_args out to derive it from the kernel)")
            if extra:
                raise TileOpError(f"{self.where}: mutates_args names {names(extra)}, which "
                                  f"kernel `{self.kernel.name}` never writes (its ABI: "
                                  f"docs/abi.md); remove it")
        return tuple(n for n in arrays if n in declared)

    def _written(self):
        """The kernel's written arrays, from its compiled ABI; None on the interpreter (it
        compiles nothing), and None when a const without default is computed from the inputs:
        it has no value before a call and the kernel cannot be compiled without it, so the
        user's declaration is checked at the first call instead (`_check_written`)."""
        if self.backend == "interp":
            return None
        k = self.kernel.specialize(**self._static)
        if k.open_types:                     # generic: checked again with each call's types
            self._deferred = True
            missing = [p.name for p in k.open_types if p.default is None]
            if missing:
                self._unknown = f"the dtype `{missing[0]}` without default"
                return None
            k = k._defaulted()
        for p in k.info.const_params:
            if p.name not in k.consts and p.default is None and p.name in self._dynamic:
                self._deferred = True
                return None
        return written_arrays(k)

    def _signature(self, params, torch) -> inspect.Signature:
        ps = []
        for n in self.inputs:
            p = params[n]
            ann = torch.Tensor if p.kind == "array" else scalar_type(p.dtype)
            if p.kind == "array" and getattr(p, "optional", False):
                ann = typing.Optional[torch.Tensor]    # schema `Tensor?`: None passes through
            elif p.kind == "list":
                ann = typing.List[torch.Tensor]        # schema `Tensor[]`: a list of arrays
            ps.append(inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                        annotation=ann))
        ret = (None if not self.outputs else torch.Tensor if len(self.outputs) == 1
               else tuple[tuple(torch.Tensor for _ in self.outputs)])
        return inspect.Signature(ps, return_annotation=ret)

    # -- implementations -----------------------------------------------------------------------
    def _types(self, args: Mapping[str, Any]) -> dict[str, str]:
        """A generic kernel's type variables for one call: from the input tensors whose
        parameters name them (they must agree), else the const given or the default."""
        open_types = [p for p in self.kernel.open_types if p.name not in self._static]
        if not open_types:
            return {}
        from tilelang.runtime.dtypes import TORCH_TO_TILE
        got: dict[str, tuple[str, str]] = {}
        for p in self.kernel.params:
            t = args.get(p.name)
            if p.type_var is None or p.kind != "array" or not hasattr(t, "dtype"):
                continue
            d = TORCH_TO_TILE.get(str(t.dtype))
            first = got.setdefault(p.type_var, (p.name, d))
            if first[1] != d:
                raise TileOpError(f"{self.where}: inputs `{first[0]}` and `{p.name}` are both "
                                  f"`Array[{p.type_var}, ...]` of kernel `{self.kernel.name}`,"
                                  f" but `{first[0]}` is {first[1]} and `{p.name}` is {d}")
        out = {}
        for p in open_types:
            d = got.get(p.name, (None, p.default))[1]
            if d is None:
                raise TileOpError(f"{self.where}: no input tells the dtype `{p.name}` of "
                                  f"kernel `{self.kernel.name}`, and it has no default: pass "
                                  f"it in `consts`")
            out[p.name] = d
        return out

    def _meta(self, args: Mapping[str, Any], types: Mapping[str, str] = {}) -> dict:
        """What grid, const and shape functions see: every const value (a type variable's
        dtype name among them), then the inputs."""
        meta = {p.name: p.default for p in self.kernel.info.const_params
                if p.default is not None}
        meta.update(self.kernel.consts)
        meta.update(types)
        meta.update(self._static)
        meta.update(args)
        for k, f in self._dynamic.items():
            meta[k] = f(meta)
        return meta

    def _allocate(self, args: dict, meta: dict, types: Mapping[str, str] = {}) -> dict:
        torch = import_torch()
        device = next((v.device for v in args.values() if isinstance(v, torch.Tensor)), None)
        if any(o.shape is None for o in self.outputs):
            made = self._fake_fn(*(args[n] for n in self.inputs))
            made = (made,) if isinstance(made, torch.Tensor) else tuple(made)
            if len(made) != len(self.outputs):
                raise TileOpError(f"{self.where}: `fake` returned {len(made)} tensors for "
                                  f"{len(self.outputs)} outputs")
            outs = dict(zip((o.name for o in self.outputs), made))
        else:
            outs = {o.name: torch.empty(shape_tuple(o.shape(meta), self.where, o.name),
                                        dtype=self._dtype(o, types), device=device)
                    for o in self.outputs}
        for o in self.outputs:
            t = outs[o.name]
            if not isinstance(t, torch.Tensor) or t.dim() != o.rank:
                raise TileOpError(f"{self.where}: output `{o.name}` must be a tensor of rank "
                                  f"{o.rank}, got {describe(t)}")
        return outs

    def _fake(self, *args, **kwargs):
        bound = self._bind(args, kwargs)
        types = self._types(bound)
        outs = self._allocate(bound, self._meta(bound, types), types)
        return self._result(outs)

    def _impl(self, *args, **kwargs):
        bound = self._bind(args, kwargs)
        types = self._types(bound)
        meta = self._meta(bound, types)
        outs = self._allocate(bound, meta, types)
        meta.update(outs)
        consts = {k: meta[k] for k in (*self._static, *self._dynamic)}
        kernel = self.kernel.specialize(**consts, **types)
        if self._deferred:
            self._check_written(kernel)
        values = [outs[p.name] if p.name in outs else bound[p.name] for p in kernel.params]
        grid = self.grid(meta) if callable(self.grid) else self.grid
        launch(kernel, grid, values, self.where, block=self.block)
        return self._result(outs)

    def _dtype(self, o: Output, types: Mapping[str, str]):
        """The torch dtype of an output: its parameter's, or its type variable's this call."""
        if o.type_var is None:
            return o.dtype
        name = types.get(o.type_var) or self.kernel.specialize(**self._static).consts[o.type_var]
        return torch_dtype(name)

    def _check_written(self, kernel) -> None:
        written = written_arrays(kernel)
        bad = [n for n in self.inputs if n in written and n not in self.mutates]
        if bad:
            raise TileOpError(f"{self.where}: kernel `{self.kernel.name}` writes "
                              f"{names(bad)}, which mutates_args leaves out")
        self._deferred = False

    def _bind(self, args, kwargs) -> dict:
        if len(args) + len(kwargs) != len(self.inputs):
            raise TypeError(f"{self.where} takes {len(self.inputs)} arguments "
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
        BackwardBinding(self, backward, inputs or {}, grads).register()

    def __repr__(self) -> str:
        return f"<tilelang.torch.TileOp {self.name} of kernel {self.kernel.name}>"


def op(name: str, kernel, *, outputs: Mapping[str, Any] | Sequence[str] = (), grid,
       consts: Mapping[str, Any] | None = None, mutates_args: Sequence[str] | None = None,
       fake: Callable | None = None, block=None, device_types=None) -> TileOp:
    """Register a launch of `kernel` as the PyTorch operator `name` ("namespace::op").

    outputs       output array parameters the operator allocates and returns, each declared
                  as `like("input")` (its shape; the dtype is always the parameter's), a
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
