"""Configurations of `const` values and their pruning before anything runs.

A configuration binds some of a kernel's `const` parameters: tile sizes, and through
`@launch(reqntid = (NT, 1, 1), num_stages = S)` the warp and stage counts too. Pruning needs
only the compiled specialization: its shared memory against the target's per-block budget, and
the occupancy model (codegen/occupancy.py) with its threads, shared memory and registers (from
the driver on a GPU; unknown, so left out, on the emulator).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Mapping

from tilelang.codegen.occupancy import ARCH_LIMITS, occupancy

from tilelang.runtime.errors import value_error


def config_text(cfg: Mapping[str, Any]) -> str:
    return " ".join(f"{k}={_value_text(v)}" for k, v in cfg.items()) or "(defaults)"


def _value_text(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def expand(configs=None, space=None) -> list[dict]:
    """The configurations: a list of dicts, or the product of `space` (name -> values), or
    both (the list first). Duplicates are dropped, order kept."""
    out: list[dict] = []
    if configs is not None:
        if isinstance(configs, Mapping) or isinstance(configs, (str, bytes)):
            raise value_error("`configs` is one mapping; it is a list of them",
                              "e.g. configs=[{'BM': 64}, {'BM': 128}]")
        try:
            items = list(configs)
        except TypeError:
            raise value_error(f"`configs` is {type(configs).__name__}, not a list of "
                              "mappings", "e.g. configs=[{'BM': 64}, {'BM': 128}]") from None
        for c in items:
            if not isinstance(c, Mapping):
                raise value_error(f"a configuration is {type(c).__name__} {c!r}, not a "
                                  "mapping of const names to values", "e.g. {'BM': 64}")
            out.append(dict(c))
    if space is not None:
        if not isinstance(space, Mapping):
            raise value_error(f"`space` is {type(space).__name__}; it maps const names to "
                              "lists of values", "e.g. space={'BM': [64, 128], 'BN': [64]}")
        names = list(space)
        values = []
        for n in names:
            v = space[n]
            if isinstance(v, (str, bytes)) or not hasattr(v, "__iter__"):
                raise value_error(f"`space[{n!r}]` is {v!r}, not a list of values",
                                  f"e.g. space={{'{n}': [64, 128]}}")
            v = list(v)
            if not v:
                raise value_error(f"`space[{n!r}]` is empty", "give at least one value")
            values.append(v)
        out.extend(dict(zip(names, combo)) for combo in itertools.product(*values))
    if not out:
        raise value_error("autotuning needs at least one configuration",
                          "pass configs=[{...}, ...] or space={'NAME': [values]}")
    seen, unique = set(), []
    for c in out:
        k = tuple(sorted((n, repr(v)) for n, v in c.items()))
        if k not in seen:
            seen.add(k)
            unique.append(c)
    return unique


@dataclass
class Fit:
    """What the resource model says about one compiled configuration."""

    ok: bool
    reason: str = ""
    occupancy: float | None = None           # fraction of the SM's warp slots
    limiter: str = ""
    details: dict = field(default_factory=dict)


def _kib(n: int) -> str:
    return f"{n / 1024:.1f} KiB" if n % 1024 else f"{n // 1024} KiB"


def fit(artifact, target: str, registers: int = 0, max_shared: int | None = None) -> Fit:
    """Whether a compiled kernel can run at all on `target`: shared memory within the
    per-block budget (`max_shared` when the device reports it) and at least one block per SM
    by the occupancy model."""
    lim = ARCH_LIMITS.get(target)
    smem = int(artifact.static_smem) + int(artifact.dynamic_smem)
    budget = max_shared if max_shared is not None else (lim.smem_per_block if lim else None)
    details = {"shared_bytes": smem, "registers": registers,
               "threads": _prod(artifact.block)}
    if budget is not None and smem > budget:
        return Fit(False, f"needs {_kib(smem)} of shared memory per block; {target} allows "
                          f"{_kib(budget)}", details=details)
    if lim is None:
        return Fit(True, details=details)
    try:
        occ = occupancy(lim, tuple(artifact.block), min(registers, lim.max_regs_per_thread),
                        int(artifact.static_smem), int(artifact.dynamic_smem))
    except ValueError as e:
        return Fit(False, str(e), details=details)
    if occ.blocks_per_sm == 0:
        return Fit(False, f"no block fits on an SM (limited by {occ.limiter})",
                   0.0, occ.limiter, details)
    return Fit(True, "", occ.fraction, occ.limiter, details)


def _prod(dims) -> int:
    n = 1
    for d in dims:
        n *= int(d)
    return n
