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

An operator of more than one launch is a function registered with `custom_op` that launches
through `wrap(kernel)[grid](...)`, as with torch.library.triton_op and wrap_triton.

The parts: ops.py (`op`, `TileOp`), autograd.py (`register_backward`'s binding), functions.py
(`custom_op`, `wrap`), declarations.py (`like`, `grad`), support.py (what they share). torch
is imported on first use only: importing this package never needs it, and using it without
torch is an ImportError that says how to install it.
"""

from __future__ import annotations

from .declarations import grad, like
from .functions import custom_op, wrap
from .ops import TileOp, op
from .support import TileOpError, torch_dtype, written_arrays

__all__ = ["op", "like", "grad", "TileOp", "TileOpError", "custom_op", "wrap", "written_arrays",
           "torch_dtype"]
