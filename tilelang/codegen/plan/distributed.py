"""How a kernel's symmetric arrays reach their peers (docs/distributed.md, "The NVSHMEM
lowering"): the compile's choice, recorded per kernel so that the emitter binds the
parameters by it and `tilec --emit plan` shows it.

- "peers": a symmetric parameter is a table of every rank's buffer plus the world size and the
  launching rank (three PTX parameters); the operations are plain loads, stores and
  system-scope atomics over the NVLink peer mapping.
- "nvshmem": a symmetric parameter is one array (its address in the NVSHMEM symmetric heap,
  extents, strides: the ABI of an `Array`); rank and world size come from `nvshmem_my_pe` and
  `nvshmem_n_pes`, a peer's buffer from `nvshmem_ptr`, signals, waits and barriers are NVSHMEM
  atomics and waits, and NVSHMEM's device bitcode is linked into the module.
"""

from __future__ import annotations

from tilelang.ir.ops import BuiltinOp, Kernel, walk
from tilelang.record import record
from tilelang.sema.types import SymmetricArrayType

# the distributed built-ins (sema/builtins_distributed.py) and what each becomes under NVSHMEM
# (codegen/lower/distributed.py); `multimem_*` reach the multicast object of NVLink SHARP
NVSHMEM_CALLS = {
    "peer": ("nvshmem_ptr",),
    "rank": ("nvshmem_my_pe",),
    "world_size": ("nvshmem_n_pes",),
    "signal": ("nvshmem_quiet", "nvshmemx_signal_op | nvshmem_<T>_atomic_set/add"),
    "wait_until": ("nvshmem_<T>_wait_until",),
    "barrier": ("nvshmem_quiet", "nvshmem_<T>_atomic_add", "nvshmem_<T>_wait_until"),
    "multimem_store": ("nvshmemx_mc_ptr", "multimem.st"),
    "multimem_reduce": ("nvshmemx_mc_ptr", "multimem.ld_reduce"),
}
MULTIMEM = ("multimem_store", "multimem_reduce")


@record(frozen=True)
class DistributedPlan:
    lowering: str                       # "peers" or "nvshmem" (options.DISTRIBUTED_LOWERINGS)
    symmetric: tuple[str, ...]          # the kernel's symmetric parameters, in order
    ops: tuple[str, ...]                # the distributed built-ins it calls, first use first
    # the symmetric parameters multimem_* reach through their multicast address (NVLink
    # SHARP): under peer tables each gets a fourth PTX parameter, `<name>_mc`
    multicast: tuple[str, ...] = ()

    @property
    def nvshmem(self) -> bool:
        """Whether the kernel calls NVSHMEM (only a kernel with a symmetric parameter does)."""
        return self.lowering == "nvshmem" and bool(self.symmetric)


def plan_distributed(kernel: Kernel, lowering: str) -> DistributedPlan:
    symmetric = tuple(p.hint or f"p{p.id}" for p in kernel.params
                      if isinstance(p.type, SymmetricArrayType))
    ops: dict[str, None] = {}
    mc: set[int] = set()
    if symmetric:
        for op in walk(kernel.body):
            if isinstance(op, BuiltinOp) and op.builtin.name in NVSHMEM_CALLS:
                ops.setdefault(op.builtin.name)
                if op.builtin.name in MULTIMEM:
                    mc.add(op.arg_map["x"].id)
    multicast = tuple(p.hint or f"p{p.id}" for p in kernel.params if p.id in mc)
    return DistributedPlan(lowering, symmetric, tuple(ops), multicast)


# the uses of a peer's buffer NVSHMEM performs itself (any transport); every other use loads
# or stores through nvshmem_ptr, which maps NVLink peers only
_NVSHMEM_USES = ("signal", "wait_until")


def peer_accesses(kernel: Kernel) -> list[BuiltinOp]:
    """The `peer` ops whose buffer the kernel loads, stores or updates (not only signals or
    waits on): under NVSHMEM these reach PEs of this node's NVLink domain only."""
    ops = [op for op in walk(kernel.body) if isinstance(op, BuiltinOp)]
    mine = {op.result.id for op in ops if op.builtin.name == "rank"}
    # `peer(x, rank())` is the PE's own buffer, which nvshmem_ptr always maps
    peers = {op.result.id: op for op in ops if op.builtin.name == "peer"
             and getattr(op.arg_map["rank"], "id", None) not in mine}
    out: dict[int, BuiltinOp] = {}
    for op in walk(kernel.body):
        if isinstance(op, BuiltinOp) and op.builtin.name in _NVSHMEM_USES:
            continue
        for v in getattr(op, "operands", ()):
            if v.id in peers:
                out.setdefault(v.id, peers[v.id])
    return list(out.values())


def describe(plan: DistributedPlan) -> list[str]:
    """The plan's lines for `tilec --emit plan` (none for a kernel without symmetric arrays)."""
    if not plan.symmetric:
        return []
    names = ", ".join(plan.symmetric)
    if not plan.nvshmem:
        out = [f"  distributed: peer tables ({names}: table of every rank's buffer, world "
               f"size, rank)"]
        if plan.multicast:
            out.append(f"    multicast address passed for: {', '.join(plan.multicast)}")
        return out
    out = [f"  distributed: nvshmem ({names}: one address in the NVSHMEM symmetric heap, "
           f"extents, strides)"]
    for name in plan.ops:
        out.append(f"    {name}: {', '.join(NVSHMEM_CALLS[name])}")
    return out
