"""A forward and a backward Tile operator as one differentiable operator: the binding of the
backward's arguments to the forward's inputs, outputs and output gradients, registered with
torch.library.register_autograd (docs/torch.md, "Autograd")."""

from __future__ import annotations

from typing import Any, Mapping

from .declarations import grad
from .support import TileOpError, import_torch, names

class BackwardBinding:
    """The binding of a backward TileOp to a forward one, as setup_context and backward."""

    def __init__(self, fwd, bwd, inputs: Mapping[str, Any], grads):
        if fwd.mutates:
            raise TileOpError(f"{fwd.where}: an operator that mutates its inputs "
                              f"({names(fwd.mutates)}) cannot have a backward")
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
                    raise TileOpError(f"{bwd.where}: argument `{n}` is bound to nothing of "
                                      f"{fwd.where}: pass inputs={{{n!r}: ...}}")
            if isinstance(src, grad) and src.name not in outs or \
                    isinstance(src, str) and src not in known:
                raise TileOpError(f"{bwd.where}: `{n}` is bound to {src!r}, which is no "
                                  f"input or output of {fwd.where}")
            self.binding[n] = src
        bouts = [o.name for o in bwd.outputs]
        if grads is None:
            grads = {n: f"d{n}" for n in fwd.inputs if f"d{n}" in bouts}
        for i, o in grads.items():
            if i not in fwd.inputs or o not in bouts:
                raise TileOpError(f"{bwd.where}: grads maps `{i}` to `{o}`: need an input "
                                  f"of {fwd.where} and an output of {bwd.where}")
        self.grads = dict(grads)
        self.saved = [s for s in dict.fromkeys(self.binding.values()) if isinstance(s, str)]

    def register(self) -> None:
        self.fwd.op.register_autograd(self.backward, setup_context=self.setup_context)

    def setup_context(self, ctx, inputs, output) -> None:
        torch = import_torch()
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
