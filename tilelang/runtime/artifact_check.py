"""Whether a kernel artifact read back from the disk cache is one the compiler could have
produced, field by field.

An entry is sealed with the cache's key (runtime/cache.py), so only someone who can read that
key can forge one; but a forged or corrupted entry the runtime trusted would fail every launch
(a block of 2^40 threads is E0901 forever) or, worse, pass values the driver never checks.
So every field is held to what code generation emits (docs/launch.md, docs/abi.md): a block
of at most 1024 threads within (1024, 1024, 64) and inside its own `maxntid`/`reqntid`,
clusters only on targets that have them and of at most 8 blocks (16 non-portable), shared
memory within the target's per-block limit, attributes that pass the same verification as a
kernel's `@launch` contract, arrays of rank 1 to 8, a parameter block within CUDA's 32,764
bytes, tensor maps of 1 to 5 dimensions with boxes of at most 256 elements and a valid swizzle.
Anything else is a cache miss: the kernel is rebuilt and the entry replaced.
"""

from __future__ import annotations

import dataclasses
from math import prod

from tilelang.codegen.api import KernelArtifact

#: CUDA's limit on a kernel's parameter block (bytes; sm_70+ since CUDA 12.1).
PARAM_BYTES = 32764
#: A tensor map parameter's size and alignment (docs/abi.md).
TENSOR_MAP_BYTES = 128
MAX_RANK = 8
MAX_BOX = 256
SWIZZLES = (0, 32, 64, 128)


def _int(v, least: int = 0) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= least


def _dims_ok(v) -> bool:
    return isinstance(v, tuple) and len(v) == 3 and all(_int(x, 1) for x in v)


def artifact_problem(a: KernelArtifact, target: str) -> str | None:
    """Why `a`, built for `target`, is not what the compiler produces (a short phrase for the
    warning: "a bad ..."), or None."""
    from tilelang.codegen.occupancy import ARCH_LIMITS
    from tilelang.sema.launch_verify import MAX_CTA_THREADS, MAX_DIM
    from tilelang.targets import TARGETS

    t = TARGETS.get(target) if isinstance(target, str) else None
    if t is None or target not in ARCH_LIMITS:
        return "target"
    if not isinstance(a.name, str) or not a.name.isidentifier():
        return "name"
    if not _dims_ok(a.block) or any(d > m for d, m in zip(a.block, MAX_DIM)) or \
            prod(a.block) > MAX_CTA_THREADS:
        return "block shape"
    if not isinstance(a.nonportable_cluster, bool):
        return "cluster shape"
    if a.cluster is not None:
        from tilelang.sema.launch_verify import NONPORTABLE_CLUSTER, PORTABLE_CLUSTER
        most = NONPORTABLE_CLUSTER if a.nonportable_cluster else PORTABLE_CLUSTER
        if not t.clusters or not _dims_ok(a.cluster) or prod(a.cluster) > most:
            return "cluster shape"
    if not _int(a.static_smem) or not _int(a.dynamic_smem) or \
            a.static_smem + a.dynamic_smem > ARCH_LIMITS[target].smem_per_block:
        return "shared memory size"
    why = _params_problem(a)
    if why:
        return why
    if a.attrs is not None and _attrs_problem(a):
        return "launch attributes"
    return None


def _params_problem(a: KernelArtifact) -> str | None:
    names = set()
    arrays = set()
    lists = set()
    size = 0
    for p in a.params:
        if not isinstance(p.name, str) or not p.name.isidentifier() or p.name in names:
            return "parameters"
        names.add(p.name)
        if p.kind == "array":
            if not _int(p.rank, 1) or p.rank > MAX_RANK or not isinstance(p.written, bool):
                return "parameters"
            arrays.add(p.name)
            size += 8 * (1 + 2 * p.rank)
        elif p.kind == "list":             # a table's address and length (docs/abi.md)
            if not _int(p.rank, 1) or p.rank > MAX_RANK or not isinstance(p.written, bool):
                return "parameters"
            lists.add(p.name)
            size += 16
        elif p.kind == "symmetric":        # a table's address, world size, rank (24 bytes)
            if not _int(p.rank, 1) or p.rank > MAX_RANK or not isinstance(p.written, bool):
                return "parameters"
            lists.add(p.name)
            size += 24
        elif p.kind == "scalar":
            if p.rank != 0:
                return "parameters"
            size += 8
        else:
            return "parameters"
    if not all(isinstance(k, str) and (k in arrays or k in lists) for k in a.facts):
        return "array facts"
    for m in a.tensor_maps:
        if m.array not in arrays or not isinstance(m.box, tuple) or \
                not 1 <= len(m.box) <= 5 or not all(_int(b, 1) and b <= MAX_BOX for b in m.box) \
                or m.swizzle not in SWIZZLES or isinstance(m.swizzle, bool):
            return "tensor maps"
        size = -(-size // TENSOR_MAP_BYTES) * TENSOR_MAP_BYTES + TENSOR_MAP_BYTES
    if size > PARAM_BYTES:
        return "parameters"
    return None


def _attrs_problem(a: KernelArtifact) -> bool:
    """The attributes are of the wrong types, fail `@launch`'s verification, or do not admit
    the block the runtime launches with."""
    from tilelang.diagnostics import TileError
    from tilelang.sema.launch_verify import NvvmAttrs, verify_attrs

    attrs = a.attrs
    if not isinstance(attrs, NvvmAttrs):
        return True
    for f in dataclasses.fields(attrs):
        v = getattr(attrs, f.name)
        if not (v is None or isinstance(v, bool) or _int(v) or
                (isinstance(v, tuple) and all(_int(x) for x in v))):
            return True
    try:
        verify_attrs(attrs, nonportable_cluster=a.nonportable_cluster)
    except TileError:
        return True
    pad = lambda d: tuple(d) + (1,) * (3 - len(d))  # noqa: E731
    if attrs.maxntid is not None and any(b > m for b, m in zip(a.block, pad(attrs.maxntid))):
        return True
    return attrs.reqntid is not None and a.block != pad(attrs.reqntid)
