"""Launch checks made before any driver call, so a bad launch is a diagnostic naming the kernel
and the rule rather than a bare driver status (docs/launch.md: the grid must be divisible by
the cluster shape, .reqntid is exact and .maxntid a bound, clusters need sm_90)."""

from __future__ import annotations

import operator
from dataclasses import dataclass
from math import prod

from tilelang.codegen.api import KernelArtifact

from .errors import arg_error, launch_error

Dims = tuple[int, int, int]
PORTABLE_CLUSTER = 8


@dataclass(frozen=True)
class DeviceLimits:
    name: str
    capability: tuple[int, int]
    max_threads_per_block: int = 1024
    max_block_dim: Dims = (1024, 1024, 64)
    max_grid_dim: Dims = (2**31 - 1, 65535, 65535)
    max_shared_per_block: int = 227 * 1024      # with the opt-in attribute
    max_cluster_size: int = 16                  # non-portable maximum (8 is portable)

    @property
    def sm(self) -> int:
        return self.capability[0] * 10 + self.capability[1]


@dataclass(frozen=True)
class LaunchShape:
    grid: Dims
    block: Dims
    cluster: Dims | None
    shared_mem: int          # dynamic bytes to launch with

    @property
    def empty(self) -> bool:
        """A grid with a zero extent: the launch runs no block (docs/python-api.md)."""
        return 0 in self.grid


def dims(value, what: str, kernel: str) -> Dims:
    """An int or a tuple of 1 to 3 ints, padded with 1s."""
    try:
        t = () if isinstance(value, bool) else (operator.index(value),)
    except TypeError:
        try:
            t = tuple(operator.index(v) for v in value)
        except TypeError:
            t = ()
    if any(isinstance(v, bool) for v in (value if isinstance(value, (tuple, list)) else ())):
        t = ()
    if not 1 <= len(t) <= 3:
        code = "E0903" if what == "grid" else "E0901"
        raise launch_error(code, f"launch of `{kernel}`: the {what} must be an int or a tuple of "
                           f"1 to 3 ints, got {value!r}", f"e.g. `{what}=(8,)` or "
                           f"`{what}=(8, 4, 1)`")
    return t + (1,) * (3 - len(t))


def _show(d) -> str:
    return "(" + ", ".join(str(x) for x in d) + ")"


def check_launch(kernel: str, art: KernelArtifact, dev: DeviceLimits, grid: Dims,
                 block: Dims | None) -> LaunchShape:
    attrs = art.attrs
    reqntid = _pad(getattr(attrs, "reqntid", None))
    maxntid = _pad(getattr(attrs, "maxntid", None))

    # -- grid ---------------------------------------------------------------------------------
    # A zero extent is an empty launch (docs/python-api.md "Launching"): everything else is
    # still checked, and the launchers then return without running a block.
    if any(g < 0 for g in grid):
        raise launch_error("E0903", f"launch of `{kernel}`: grid {_show(grid)} has a negative "
                           "dimension", "every grid dimension must be at least 0 (0 launches "
                           "nothing)")
    cluster = tuple(art.cluster) if art.cluster else None
    blocks_are_clusters = bool(getattr(attrs, "blocksareclusters", False))
    eff_grid = tuple(g * c for g, c in zip(grid, cluster)) if cluster and blocks_are_clusters \
        else grid
    for axis, (g, lim) in enumerate(zip(eff_grid, dev.max_grid_dim)):
        if g > lim:
            raise launch_error("E0903", f"launch of `{kernel}`: grid {_show(grid)} exceeds the "
                               f"device limit {_show(dev.max_grid_dim)} in dimension "
                               f"{'xyz'[axis]}", "use fewer, larger tiles, or move work to "
                               "another grid dimension (x allows 2^31 - 1 blocks)")

    # -- block --------------------------------------------------------------------------------
    if block is None:
        block = tuple(art.block)
    threads = prod(block)
    if reqntid and block != reqntid:
        raise launch_error("E0901", f"launch of `{kernel}`: block {_show(block)} differs from "
                           f"the kernel's .reqntid {_show(reqntid)}",
                           "the kernel's code depends on that exact thread count; launch "
                           "without `block=` to use it")
    if maxntid and threads > prod(maxntid):
        raise launch_error("E0901", f"launch of `{kernel}`: block {_show(block)} has {threads} "
                           f"threads, more than the kernel's .maxntid {_show(maxntid)} allows "
                           f"({prod(maxntid)})", "launch with at most that many threads, or "
                           "without `block=`")
    if threads > dev.max_threads_per_block or \
            any(b > m for b, m in zip(block, dev.max_block_dim)) or min(block) < 1:
        raise launch_error("E0901", f"launch of `{kernel}`: block {_show(block)} exceeds the "
                           f"device limits ({dev.max_threads_per_block} threads, dimensions "
                           f"{_show(dev.max_block_dim)})", "use a smaller block")

    # -- cluster ------------------------------------------------------------------------------
    if cluster is not None:
        size = prod(cluster)
        if dev.sm < 90:
            raise launch_error("E0904", f"launch of `{kernel}`: the kernel uses thread-block "
                               f"clusters {_show(cluster)}, but {dev.name} is "
                               f"sm_{dev.sm}; clusters need sm_90 or newer",
                               "compile without `@launch(cluster = ...)` for this device")
        if not blocks_are_clusters:
            bad = [("xyz"[i], g, c) for i, (g, c) in enumerate(zip(grid, cluster)) if g % c]
            if bad:
                ax, g, c = bad[0]
                raise launch_error("E0902", f"launch of `{kernel}`: grid {_show(grid)} is not "
                                   f"divisible by the cluster shape {_show(cluster)} (in "
                                   f"{ax}: {g} % {c} = {g % c})",
                                   f"round the grid up to a multiple of the cluster shape; "
                                   f"the kernel's bounds checks skip the extra blocks' work")
        limit = dev.max_cluster_size if art.nonportable_cluster else \
            min(PORTABLE_CLUSTER, dev.max_cluster_size)
        if size > limit:
            raise launch_error("E0906", f"launch of `{kernel}`: cluster {_show(cluster)} has "
                               f"{size} blocks; {dev.name} allows {limit}"
                               + ("" if art.nonportable_cluster else " (portable limit)"),
                               "use a smaller cluster shape")

    # -- shared memory ------------------------------------------------------------------------
    smem = art.static_smem + art.dynamic_smem
    if smem > dev.max_shared_per_block:
        raise launch_error("E0905", f"launch of `{kernel}`: the kernel needs {smem} bytes of "
                           f"shared memory per block ({art.static_smem} static + "
                           f"{art.dynamic_smem} dynamic); {dev.name} allows "
                           f"{dev.max_shared_per_block}", "use smaller tiles or fewer "
                           "pipeline stages")
    return LaunchShape(grid, block, cluster, art.dynamic_smem)


def _pad(d) -> Dims | None:
    if not d:
        return None
    d = tuple(int(x) for x in d)
    return d + (1,) * (3 - len(d))


def check_stream(stream) -> None:
    """Back ends without streams (the emulator, the interpreter) still refuse what is no
    stream on any back end, so a script that runs there runs on a GPU too."""
    if stream is None or (isinstance(stream, int) and not isinstance(stream, bool)
                          and stream >= 0):
        return
    if hasattr(stream, "__cuda_stream__") or any(
            isinstance(getattr(stream, a, None), int) for a in ("cuda_stream", "ptr", "handle")):
        return
    if type(stream).__name__ == "CUstream":
        return
    raise arg_error("E0917", f"cannot use {type(stream).__name__} {stream!r} as a CUDA stream",
                    "pass a torch.cuda.Stream, a cupy.cuda.Stream, a CUstream, an int handle "
                    "or None (the current stream)")
