"""Kernels across devices on an emulated world (docs/distributed.md).

    import tilelang.distributed as td
    w = td.world(4)                                   # four emulated devices, in process
    x = w.symmetric((1000,), "f32")                   # one buffer per rank, same shape
    pad = w.symmetric((64,), "u32")                   # a signal pad (zeros)
    for r in range(4):
        x.write(r, data[r])
    k = w.kernel("all_reduce.tile", "all_reduce")
    ys = [w.empty(r, (1000,), "f32") for r in range(4)]
    w.launch_all(k, grid, lambda r: (x, pad, ys[r]))  # or a list of per-rank argument tuples
    ys[2].numpy()

A symmetric parameter passes, on rank r, the address of rank r's copy of the array's table
(every rank's buffer: address, extents, strides), the world size and r (docs/distributed.md,
"ABI"). Plain arrays are `RankArray`s of the launching rank, or NumPy arrays (copied to that
rank's memory for the launch and back afterwards when the kernel writes them). Lists of arrays
are not taken yet (E0919). Emulator errors (a fault, a race, no progress) propagate as the
emulator's exceptions, naming the rank.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import numpy as np

from tilelang.codegen.api import AbiParam, ArrayFacts, scalar_storage
from tilelang.emulator.world import EmulatedWorld
from tilelang.options import CompileOptions
from tilelang.sema.types import DTYPES as _DTYPES

from .dtypes import ITEMSIZE
from .errors import arg_error, usage_error

DEFAULT_ARCH = "sm_90"


def world(n: int, *, race_check: bool = False, global_race_check: bool = True) -> "World":
    """An emulated world of `n` devices (2 to 8) in this process."""
    return World(n, race_check=race_check, global_race_check=global_race_check)


def _np_dtype(dtype: str) -> np.dtype:
    if dtype not in ITEMSIZE or dtype in ("bf16", "tf32") or dtype.startswith("f8"):
        raise usage_error("E0919", f"dtype {dtype!r} is not supported on an emulated world",
                          "use a NumPy dtype's Tile name: f16, f32, f64, i8..i64, u8..u64")
    return np.dtype(scalar_storage(_DTYPES[dtype]))


class RankArray:
    """An array in one rank's device memory."""

    def __init__(self, w: "World", rank: int, shape: tuple, dtype: str, ptr=None):
        self.world, self.rank, self.shape, self.dtype = w, rank, tuple(shape), dtype
        self.np_dtype = _np_dtype(dtype)
        n = int(np.prod(self.shape, dtype=np.int64)) * self.np_dtype.itemsize
        if ptr is None:
            ptr = w.emu.malloc(rank, n, f"{dtype}{list(self.shape)}")
        else:                   # another process's buffer (torchrun.py): reachable from here
            w.emu.register(rank, int(ptr), n, f"{dtype}{list(self.shape)}")
        self.ptr = ptr
        self.strides = tuple(int(s) // self.np_dtype.itemsize for s in
                             np.empty(self.shape, self.np_dtype).strides) if self.shape else ()

    def numpy(self) -> np.ndarray:
        out = np.empty(self.shape, self.np_dtype)
        if out.size == 0:
            return out
        return self.world.emu.device.memcpy_dtoh(out, self.ptr)

    def write(self, host) -> None:
        self.world._local(self.rank)
        a = np.ascontiguousarray(host, self.np_dtype)
        if a.shape != self.shape:
            raise usage_error("E0919", f"rank {self.rank}: writing an array of shape {a.shape} "
                              f"into one of shape {self.shape}", "give an array of its shape")
        if a.size:
            self.world.emu.device.memcpy_htod(self.ptr, a)


class SymmetricArray:
    """One array per rank, of one shape and dtype: `Symmetric[Array[dtype, rank]]`."""

    def __init__(self, w: "World", shape: tuple, dtype: str):
        self.world, self.shape, self.dtype = w, tuple(shape), dtype
        self.parts = w._symmetric_parts(self.shape, dtype)
        words = 1 + 2 * len(self.shape)
        # every rank holds its own copy of the table (a kernel reads only its device's memory
        # for it), entries in rank order: docs/abi.md "Lists of arrays" gives the layout
        table = np.array([[int(p.ptr), *self.shape, *p.strides] for p in self.parts], np.int64)
        self.tables = {}                       # rank -> its table, for the ranks driven here
        for r in w.ranks:
            t = w.emu.malloc(r, table.nbytes, "symmetric table")
            w.emu.device.memcpy_htod(t, table.reshape(-1))
            self.tables[r] = t
        assert table.shape == (w.size, words)

    def multicast_address(self) -> int:
        """The array's multicast address (made on first use): what multimem_store and
        multimem_reduce reach every rank's buffer through (docs/distributed.md, "Multimem")."""
        if getattr(self, "_mc", None) is None:
            n = int(np.prod(self.shape, dtype=np.int64)) * _np_dtype(self.dtype).itemsize
            self._mc = self.world.emu.multicast([p.ptr for p in self.parts], n)
        return int(self._mc)

    def on(self, rank: int) -> np.ndarray:
        """A copy of rank `rank`'s buffer."""
        return self.parts[rank].numpy()

    def write(self, rank: int, host) -> None:
        self.parts[self.world._rank(rank)].write(host)

    @property
    def local(self) -> RankArray:
        """This process's rank's buffer (under torchrun; in one process, rank 0's)."""
        return self.parts[self.world.ranks[0]]


class WorldKernel:
    """A kernel of a source, compiled per specialization for the world's launches."""

    def __init__(self, w: "World", text: str, path: str, name: str, consts, arch: str):
        self.world, self.text, self.path, self.name = w, text, path, name
        # with line info, so that the emulator's errors name source lines
        self.consts = dict(consts)
        self.options = CompileOptions(target=arch, lineinfo=True)
        self._built: dict[tuple, Any] = {}
        self._params: tuple | None = None

    def params(self) -> tuple:
        """The run-time parameters, as the ABI passes them (`written` comes with a build)."""
        if self._params is None:
            import tilelang.driver as driver
            sig = driver.inspect_source(self.text, self.path, self.options)
            k = sig.kernels.get(self.name)
            if k is None:
                raise usage_error("E0922", f"the module has no kernel named `{self.name}`",
                                  "kernels: " + (", ".join(sig.kernels) or "none"))
            self._params = tuple(AbiParam(p.name, p.kind, p.dtype, p.rank) for p in k.params
                                 if p.kind != "const")
        return self._params

    def build(self, facts: Mapping[str, ArrayFacts]):
        import tilelang.driver as driver
        key = tuple(sorted((k, v.key()) for k, v in facts.items()))
        got = self._built.get(key)
        if got is None:
            ck = driver.compile_kernel(self.text, self.path, self.name, self.consts, facts,
                                       self.options, link=False)
            mod = self.world.emu.load_module(ck.ptx)
            got = self._built[key] = (ck.artifact, mod.get_function(self.name))
        return got


class World:
    """An emulated world of devices (tilelang/emulator/world.py) with symmetric allocations."""

    def __init__(self, n: int, *, race_check: bool = False, global_race_check: bool = True):
        if not isinstance(n, int) or not 2 <= n <= 8:
            raise usage_error("E0919", f"an emulated world has 2 to 8 ranks, not {n!r}",
                              "call tilelang.distributed.world(n) with 2 <= n <= 8")
        self.size = n
        self.ranks = tuple(range(n))           # the ranks this process drives: all of them
        self.emu = EmulatedWorld(n, race_check=race_check, global_race_check=global_race_check)

    @property
    def rank(self):
        """This process's rank under torchrun (torchrun.py); None: one process drives all."""
        return None

    def barrier(self) -> None:
        """A host barrier of the ranks' processes (nothing to wait for in one process)."""

    def _symmetric_parts(self, shape: tuple, dtype: str) -> list:
        return [RankArray(self, r, shape, dtype) for r in range(self.size)]

    def _local(self, rank: int) -> int:
        """`rank`, if this process may write that rank's memory from the host."""
        return self._rank(rank)

    # -- memory ---------------------------------------------------------------------------
    def symmetric(self, shape, dtype: str) -> SymmetricArray:
        """An array of `shape` on every rank, zeros."""
        return SymmetricArray(self, _shape(shape), dtype)

    def empty(self, rank: int, shape, dtype: str) -> RankArray:
        """An array of rank `rank`, zeros."""
        return RankArray(self, self._local(rank), _shape(shape), dtype)

    def to_rank(self, rank: int, host) -> RankArray:
        a = np.asarray(host)
        out = RankArray(self, self._local(rank), a.shape, _tile_dtype(a.dtype))
        out.write(a)
        return out

    def _rank(self, rank) -> int:
        if not isinstance(rank, (int, np.integer)) or not 0 <= rank < self.size:
            raise usage_error("E0919", f"rank {rank!r} is not in [0, {self.size})",
                              f"ranks are 0 to {self.size - 1}")
        return int(rank)

    # -- kernels --------------------------------------------------------------------------
    def kernel(self, source_or_path: str, name: str, *, arch: str = DEFAULT_ARCH,
               **consts) -> WorldKernel:
        """Kernel `name` of a .tile file (a path) or of a source text."""
        if "\n" not in source_or_path and source_or_path.endswith(".tile"):
            from tilelang.frontend.source import read_source
            return WorldKernel(self, read_source(source_or_path), source_or_path, name,
                               consts, arch)
        return WorldKernel(self, source_or_path, "<world>", name, consts, arch)

    def launch_all(self, kernel: WorldKernel, grid, per_rank_args: Sequence | Callable,
                   *, max_steps: int | None = None):
        """Launch `kernel` on every rank together over `grid` (per device); rank r gets
        `per_rank_args[r]` (or `per_rank_args(r)`). Returns the emulator's LaunchReport."""
        if callable(per_rank_args):
            args = {r: tuple(per_rank_args(r)) for r in self.ranks}
        else:
            lists = [tuple(a) for a in per_rank_args]
            if len(lists) != self.size:
                raise arg_error("E0919", f"{len(lists)} argument lists for a world of "
                                f"{self.size} ranks", "give one tuple of arguments per rank")
            args = {r: lists[r] for r in self.ranks}
        abi = kernel.params()
        for r, a in args.items():
            if len(a) != len(abi):
                raise arg_error("E0910", f"rank {r}: kernel `{kernel.name}` takes {len(abi)} "
                                f"arguments, {len(a)} given", "pass one per parameter")
        staged = {r: [self._stage(kernel.name, r, p, v) for p, v in zip(abi, a)]
                  for r, a in args.items()}
        facts = {p.name: _common_facts([row[i] for row in staged.values()])
                 for i, p in enumerate(abi) if p.kind in ("array", "symmetric")}
        art, fn = kernel.build(facts)
        packed = {r: [w for p, s in zip(art.params, row) for w in s.words(r) + _multicast(p, s)]
                  for r, row in staged.items()}
        g = (grid,) if isinstance(grid, int) else tuple(grid)
        try:
            rep = self._launch(fn, g, art.block, packed, max_steps)
            for row in staged.values():
                for p, s in zip(art.params, row):
                    if p.written:
                        s.copy_back()
        finally:
            for row in staged.values():      # the launch's copies of NumPy arrays
                for s in row:
                    s.release()
        return rep

    def _launch(self, fn, grid, block, packed: dict, max_steps):
        return self.emu.launch(fn, grid, block, [packed[r] for r in range(self.size)],
                               max_steps=max_steps)

    def _stage(self, kname: str, r: int, p, v) -> "_Staged":
        if p.kind == "symmetric":
            if not isinstance(v, SymmetricArray) or v.world is not self:
                raise arg_error("E0914", f"rank {r}: `{p.name}` of kernel `{kname}` is a "
                                f"symmetric array; got {type(v).__name__}",
                                "pass an array made by this world's symmetric(...)")
            _check_array(kname, r, p, v.dtype, len(v.shape))
            st = _Staged(v.parts[r], (int(v.tables[r]), self.size, r), parts=v.parts)
            st.symmetric = v
            return st
        if p.kind == "array":
            if isinstance(v, np.ndarray):
                ra = self.to_rank(r, v)
                _check_array(kname, r, p, ra.dtype, len(ra.shape))
                return _Staged(ra, _array_words(ra), host=v)
            if not isinstance(v, RankArray) or v.world is not self:
                raise arg_error("E0914", f"rank {r}: `{p.name}` of kernel `{kname}` is an "
                                f"array; got {type(v).__name__}",
                                "pass a NumPy array or an array of this world (empty, to_rank)")
            if v.rank != r:
                raise arg_error("E0913", f"rank {r}: `{p.name}` of kernel `{kname}` is an array "
                                f"of rank {v.rank}", "a plain array lives on the rank that "
                                "launches; share buffers across ranks with symmetric(...)")
            _check_array(kname, r, p, v.dtype, len(v.shape))
            return _Staged(v, _array_words(v))
        if p.kind == "scalar":
            dt = np.dtype(p.ptx_params()[0][1])
            if dt.kind in "iu" and (isinstance(v, bool) or not isinstance(v, (int, np.integer))
                                    or not np.iinfo(dt).min <= int(v) <= np.iinfo(dt).max):
                raise arg_error("E0915", f"rank {r}: `{p.name}` of kernel `{kname}` is "
                                f"{p.dtype}; got {v!r}", f"pass an integer that fits {p.dtype}")
            return _Staged(None, (dt.type(v),))
        raise arg_error("E0919", f"`{p.name}` of kernel `{kname}` is a list of arrays, which "
                        "an emulated world does not pass yet", "pass the arrays one by one, "
                        "or a symmetric array")


def _multicast(p, s: "_Staged") -> tuple:
    """The multicast address word after a symmetric array's three (AbiParam.multicast: the
    kernel uses multimem on it; docs/distributed.md, "Multimem")."""
    return (s.symmetric.multicast_address(),) if p.multicast else ()


class _Staged:
    """One argument of one rank: its PTX parameter values and what to copy back."""

    def __init__(self, arr, values, host=None, parts=None):
        self.arr, self.values, self.host, self.parts = arr, values, host, parts

    def words(self, rank: int):
        return self.values

    def copy_back(self) -> None:
        if self.host is not None:
            self.host[...] = self.arr.numpy()

    def release(self) -> None:
        """Free the device copy of a NumPy array (made for this launch only)."""
        if self.host is not None and self.arr.ptr is not None:
            self.arr.world.emu.device.free(self.arr.ptr)
            self.arr.ptr = None

    def facts_key(self) -> str:
        from .facts import facts_key
        arrs = self.parts or [self.arr]
        keys = {facts_key(int(a.ptr), a.shape, a.strides, a.np_dtype.itemsize) for a in arrs}
        return min(keys)


def _common_facts(staged) -> ArrayFacts:
    keys = [s.facts_key() for s in staged]
    f = [ArrayFacts.from_key(k) for k in keys]
    # what holds for every rank; never a TMA operand (a world launch passes no tensor maps)
    return ArrayFacts(contiguous=all(x.contiguous for x in f),
                      aligned16=all(x.aligned16 for x in f),
                      extent16=all(x.extent16 for x in f), small=all(x.small for x in f),
                      tensor_map=False)


def _array_words(a: RankArray) -> tuple:
    return (int(a.ptr), *a.shape, *a.strides)


def _check_array(kname: str, r: int, p, dtype: str, rank: int) -> None:
    if dtype != p.dtype.name:
        raise arg_error("E0911", f"rank {r}: `{p.name}` of kernel `{kname}` holds "
                        f"{p.dtype.name}; got {dtype}", f"pass an array of {p.dtype.name}")
    if rank != p.rank:
        raise arg_error("E0912", f"rank {r}: `{p.name}` of kernel `{kname}` has rank {p.rank};"
                        f" got {rank}", f"pass an array of {p.rank} axes")


def _shape(shape) -> tuple:
    s = (shape,) if isinstance(shape, int) else tuple(int(x) for x in shape)
    if not s or any(x < 0 for x in s):
        raise usage_error("E0919", f"bad shape {shape!r}", "give non-negative extents")
    return s


def _tile_dtype(dt: np.dtype) -> str:
    for name, t in _DTYPES.items():
        if name not in ("bf16", "tf32", "bool") and not name.startswith("f8") and \
                np.dtype(scalar_storage(t)) == dt:
            return name
    raise usage_error("E0919", f"NumPy dtype {dt} has no Tile dtype on an emulated world",
                      "use float16/32/64 or an integer dtype")

