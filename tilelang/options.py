"""The options of one compile: one frozen record, shared by the driver, `tilec`, the language
server, the tuner and the runtime, with the target resolved once into its `Target` record.

Every stage takes the whole record (or its `target`), never a target name to look up again:
the checker resolves `@launch(... by_target ...)` against `options.target`, the IR builder
checks with the same record, code generation plans the PTX for it and the linker assembles for
it. docs/python-api.md and docs/cli.md list how users spell each field.

The record is hashable and its cache key (`key()`) is computed from its fields, so a field
added here is part of every cache key without anyone writing it down a second time.
"""

from __future__ import annotations

from tilelang.record import record
from tilelang.targets import TARGETS, Target, get_target

__all__ = ["DEFAULT_TARGET", "DISTRIBUTED_LOWERINGS", "CompileOptions"]

#: The target of a compile that names none (`tilec` without `--arch`, the language server).
#: The runtime's back ends choose their device's own (each back end's `default_target()`).
DEFAULT_TARGET = "sm_90a"

#: How kernels across devices reach their peers (docs/distributed.md): "peers" passes a table
#: of every rank's buffer per symmetric array (NVLink peers of one node); "nvshmem" lowers the
#: same operations to NVSHMEM device calls, linked from NVSHMEM's device bitcode.
DISTRIBUTED_LOWERINGS = ("peers", "nvshmem")


@record(frozen=True)
class CompileOptions:
    """What a compile depends on besides the source and the kernel's specialization.

    `target` may be given as a name ("sm_80"); it is resolved here, once, into the table's
    `Target` (E0750 for a name the table lacks). `defines` may be given as a mapping and
    `include_dirs` as any sequence; both are kept as tuples, so the record can be hashed.
    """

    target: Target = TARGETS[DEFAULT_TARGET]
    defines: tuple[tuple[str, str], ...] = ()     # -D NAME=VALUE, in the order given
    include_dirs: tuple[str, ...] = ()            # -I DIR
    opt_level: int = 3                            # -O0 .. -O3
    ptxas: str | None = None         # assemble with this ptxas binary instead of nvJitLink
    knobs_file: str | None = None    # --ptxas-knobs FILE (docs/cli.md)
    precision: str | None = None     # --precision: the module's math mode (docs/numerics.md)
    lineinfo: bool = False           # --lineinfo: `.file`/`.loc` source lines in the PTX
    distributed: str = "peers"       # --distributed: one of DISTRIBUTED_LOWERINGS

    def __post_init__(self) -> None:
        put = object.__setattr__         # the record is frozen; these are its own values
        if not isinstance(self.target, Target):
            put(self, "target", get_target(self.target))
        if not isinstance(self.defines, tuple):
            items = self.defines.items() if hasattr(self.defines, "items") else self.defines
            put(self, "defines", tuple((k, v) for k, v in items))
        if not isinstance(self.include_dirs, tuple):
            put(self, "include_dirs", tuple(self.include_dirs))
        if self.distributed not in DISTRIBUTED_LOWERINGS:
            raise ValueError(f"distributed={self.distributed!r}: one of "
                             f"{', '.join(map(repr, DISTRIBUTED_LOWERINGS))}")

    @property
    def target_name(self) -> str:
        """What the user writes for the target: "sm_90a"."""
        return self.target.name

    def define_map(self) -> dict[str, str]:
        """The defines as a mapping from name to value text."""
        return dict(self.defines)

    def key(self) -> dict:
        """The options as JSON-able data for cache keys: every field by its name (the target
        by its name, tuples as lists). The kernel cache and the tuning records put this
        beside the compiler's id (docs/python-api.md, "Caching")."""
        return {name: _json(getattr(self, name)) for name in self._fields}


def _json(v):
    if isinstance(v, Target):
        return v.name
    if isinstance(v, tuple):
        return [_json(x) for x in v]
    return v
