"""The emulator as a device: the interface the runtime uses for every back end.

    dev = EmulatorDevice()
    a = dev.malloc(n * 4)                       # -> DevicePtr
    dev.memcpy_htod(a, host_array)              # host → device (bytes or NumPy array)
    dev.memcpy_dtoh(host_array, a)              # device → host, fills host_array in place
    mod = dev.load_module(ptx_text)             # -> Module (parsed; globals allocated)
    fn = mod.get_function("kernel")             # -> Function (decoded on first use)
    rep = dev.launch(fn, grid=(g, 1, 1), block=(128, 1, 1), args=[a, b, c, np.int32(n)],
                     cluster=None, shared_mem=0)   # -> LaunchReport (counters, printf output)
    dev.free(a)
    dev.synchronize()                           # no-op: everything completes before returning
    dev.attributes                              # limits used for the launch checks

`args` is either the packed parameter buffer (bytes, laid out as the kernel's `.param` list
with natural alignment) or a list of values: a `DevicePtr` or int for pointer/`.u64` params,
NumPy scalars (their exact type), Python ints/floats (converted to the declared `.param`
type), or bytes for `.b8` array parameters. `pack_args(fn, values)` gives the packed form.

Launches are checked like the driver checks them (`LaunchRefused`), and kernels run with the
extra checks described in docs/emulator.md (`MemoryFault`, `BarrierDivergence`,
`WarpDivergence`, `DeviceAssertion`), all subclasses of `EmulatorError`.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass

import numpy as np

from . import (ops_alu, ops_call, ops_cp, ops_ctrl, ops_mem, ops_multimem,  # noqa: F401
               ops_tcgen05, ops_tensor, ops_tensormap, ops_warp, ops_wgmma)  # (importing registers the builders)
from .completion import finish_stores
from .tmem import check_released
from .counters import Counters, LaunchReport, make_report
from .errors import EmulatorError, LaunchRefused, PTXParseError
from .executor import MAX_STEPS, run_batch
from .memory import GlobalMemory
from .parser import parse_int, parse_ptx
from .program import Program
from .globalrace import MAX_BLOCKS as GLOBAL_RACE_MAX_BLOCKS, GlobalRaceChecker
from .proxy import ProxyTracker
from .races import RaceChecker, state_bytes as race_state_bytes, unchecked_reason
from .ptx_types import f32_to_bf16, type_info
from .state import LaunchGeometry, State

MAX_THREADS_PER_BLOCK = 1024
MAX_BLOCK_DIM = (1024, 1024, 64)
MAX_GRID_DIM = (2**31 - 1, 65535, 65535)
MAX_SHARED_PER_BLOCK = 227 * 1024
MAX_CLUSTER_SIZE = 16          # non-portable maximum on sm_90 (8 is the portable one)
BATCH_THREADS = 65536          # threads emulated together; bounds memory, amortizes Python
BATCH_BYTES = 128 << 20


@dataclass(frozen=True)
class DevicePtr:
    """A device address (what cuMemAlloc returns). Supports `int(p)` and `p + offset`."""
    addr: int
    nbytes: int = 0

    def __int__(self):
        return self.addr

    def __index__(self):
        return self.addr

    def __add__(self, off: int) -> "DevicePtr":
        return DevicePtr(self.addr + int(off), max(self.nbytes - int(off), 0))


class Function:
    """A kernel of a loaded module."""

    def __init__(self, module: "Module", name: str):
        self.module, self.name = module, name
        self._program = None
        f = module.ptx.functions[name]
        self.params = list(f.params)
        self.directives = dict(f.directives)

    @property
    def program(self) -> Program:
        if self._program is None:
            self._program = Program(self.module.ptx, self.name, self.module.global_addrs)
        return self._program


class Module:
    """A loaded PTX module: its kernels and its global/const variables on the device."""

    def __init__(self, device: "EmulatorDevice", text: str):
        self.device = device
        self.ptx = parse_ptx(text)
        self.global_addrs, self.global_sizes = {}, {}
        for v in self.ptx.variables:
            if v.space not in ("global", "const"):
                continue
            if v.extern:
                raise PTXParseError(f"external variable {v.name} cannot be resolved", v.line)
            addr = device.mem.alloc(v.nbytes, f"{v.space} variable {v.name}")
            self.global_addrs[v.name] = addr
            self.global_sizes[v.name] = v.nbytes
            if v.init:
                device.mem.write(addr, _init_bytes(v))
        self._functions = {}

    def kernels(self) -> list:
        return self.ptx.kernels()

    def get_function(self, name: str) -> Function:
        f = self._functions.get(name)
        if f is None:
            g = self.ptx.functions.get(name)
            if g is None or g.kind != "entry":
                raise EmulatorError(f"module has no kernel named {name!r} "
                                    f"(kernels: {', '.join(self.kernels()) or 'none'})")
            f = self._functions[name] = Function(self, name)
            f.program                      # decode now so PTX errors surface at load time
        return f

    def get_global(self, name: str) -> DevicePtr:
        if name not in self.global_addrs:
            raise EmulatorError(f"module has no .global/.const variable {name!r}")
        return DevicePtr(self.global_addrs[name], self.global_sizes[name])


def _init_bytes(v) -> bytes:
    ti = type_info(v.type)
    out = bytearray()
    for text in v.init:
        if ti.is_float:
            from .ptx_types import parse_imm
            val = parse_imm(text, ti)
            out += np.asarray(val).tobytes()
        else:
            out += (parse_int(text) & ((1 << (8 * ti.size)) - 1)).to_bytes(ti.size, "little")
    total = v.nbytes
    if len(out) > total:
        raise PTXParseError(f"initializer of {v.name} is larger than the variable", v.line)
    return bytes(out) + bytes(total - len(out))


def _dim3(x, what) -> tuple:
    if isinstance(x, (int, np.integer)):
        x = (int(x),)
    x = tuple(int(v) for v in x)
    if not 1 <= len(x) <= 3:
        raise LaunchRefused(f"{what} must have 1 to 3 dimensions, got {x}")
    return x + (1,) * (3 - len(x))


def _max_steps(value) -> int:
    if value is None:
        env = os.environ.get("TILELANG_EMULATOR_MAX_STEPS", "").strip()
        if not env:
            return MAX_STEPS
        try:
            value = int(env.replace("_", ""))
        except ValueError:
            raise EmulatorError(f"TILELANG_EMULATOR_MAX_STEPS={env!r} is not an integer") \
                from None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise EmulatorError(f"max_steps must be a positive integer, not {value!r}")
    return int(value)


class EmulatorDevice:
    """A CPU device that runs PTX kernels (see the module docstring)."""

    name = "Tile PTX emulator (CPU)"

    def __init__(self, *, counters: bool = True, printf_stream=None,
                 race_check: bool | str = False,
                 max_steps: int | None = None, global_race_check: bool = False):
        self.mem = GlobalMemory()
        # the scheduling-step limit of one batch of blocks: the argument, else the
        # TILELANG_EMULATOR_MAX_STEPS environment variable, else 50 million
        self.max_steps = _max_steps(max_steps)
        self.detailed_counters = counters
        if race_check not in (False, True, "strict"):
            raise ValueError(f"race_check must be False, True or 'strict', not {race_check!r}")
        self.race_check = race_check
        self.global_race_check = global_race_check
        self.printf_stream = printf_stream if printf_stream is not None else sys.stdout
        self._launches = 0

    # -- device -----------------------------------------------------------------------------
    def synchronize(self) -> None:
        """Launches and copies complete before they return; kept for API parity."""

    @property
    def attributes(self) -> dict:
        """The limits launches are checked against (the driver back end reports its own)."""
        return {"max_threads_per_block": MAX_THREADS_PER_BLOCK,
                "max_block_dim": MAX_BLOCK_DIM, "max_grid_dim": MAX_GRID_DIM,
                "max_shared_memory_per_block": MAX_SHARED_PER_BLOCK,
                "max_cluster_size": MAX_CLUSTER_SIZE, "warp_size": 32}

    # -- memory ---------------------------------------------------------------------------
    def malloc(self, nbytes: int) -> DevicePtr:
        return DevicePtr(self.mem.alloc(int(nbytes), f"malloc({nbytes})"), int(nbytes))

    def free(self, ptr) -> None:
        self.mem.free(int(ptr))

    def memcpy_htod(self, dst, src) -> None:
        self.mem.write(int(dst), src if isinstance(src, (bytes, bytearray)) else
                       np.ascontiguousarray(src))

    def memcpy_dtoh(self, dst, src, nbytes: int | None = None):
        """Copy to host. `dst` is a writable NumPy array (filled), or None to get bytes."""
        if dst is None:
            return self.mem.read(int(src), int(nbytes))
        flat = np.ascontiguousarray(dst).reshape(-1).view(np.uint8)
        n = flat.size if nbytes is None else int(nbytes)
        data = np.frombuffer(self.mem.read(int(src), n), np.uint8)
        dst.reshape(-1).view(np.uint8)[:n] = data
        return dst

    def memset(self, dst, value: int, nbytes: int) -> None:
        self.mem.write(int(dst), bytes([value & 0xFF]) * int(nbytes))

    def to_device(self, array) -> DevicePtr:
        a = np.ascontiguousarray(array)
        p = self.malloc(a.nbytes)
        self.memcpy_htod(p, a)
        return p

    def from_device(self, ptr, shape, dtype) -> np.ndarray:
        out = np.empty(shape, dtype)
        return self.memcpy_dtoh(out, ptr)

    # -- modules --------------------------------------------------------------------------
    def load_module(self, ptx: str) -> Module:
        return Module(self, ptx)

    # -- launch ---------------------------------------------------------------------------
    def launch(self, fn: Function, grid, block, args=(), cluster=None, shared_mem: int = 0,
               *, max_steps: int | None = None) -> LaunchReport:
        if not isinstance(fn, Function) or fn.module.device is not self:
            raise EmulatorError("launch needs a Function from a module loaded on this device")
        prog = fn.program
        grid, block = _dim3(grid, "grid"), _dim3(block, "block")
        explicit = cluster is not None
        d = prog.directives
        if cluster is None and ".reqnctapercluster" in d:
            cluster = d[".reqnctapercluster"]
            explicit = True
        cluster = _dim3(cluster if cluster is not None else (1, 1, 1), "cluster")
        if ".blocksareclusters" in d:
            # the launch grid counts clusters; each runs .reqnctapercluster blocks
            if ".reqnctapercluster" not in d:
                raise LaunchRefused(f"launch of {fn.name}: .blocksareclusters needs "
                                    f".reqnctapercluster")
            grid = tuple(g * c for g, c in zip(grid, cluster))
        self._check_launch(fn, prog, grid, block, cluster, explicit, int(shared_mem))
        packed = self.pack_args(fn, args)
        kparams = np.zeros((len(packed) + 15) // 16 * 16 + 16, np.uint8)   # viewable, aligned
        kparams[:len(packed)] = np.frombuffer(packed, np.uint8)
        self._launches += 1
        shared_size = prog.dyn_shared_offset + int(shared_mem) if shared_mem else \
            prog.static_shared
        geom = LaunchGeometry(grid, block, cluster, explicit, int(shared_mem),
                              prog.static_shared, self._launches)
        counters = Counters(len(prog.code), self.detailed_counters)
        tpb = geom.tpb
        per_thread = prog.local_size + prog.pslot_size + 8 * len(prog.reg_dtypes) + 64
        per_block = tpb * per_thread + shared_size
        unchecked = unchecked_reason(prog) if self.race_check else "race_check is off"
        if unchecked is None:              # the race check's state grows with the batch too
            per_block += race_state_bytes(prog, tpb, shared_size,
                                          cluster[0] * cluster[1] * cluster[2])
        nb = max(1, min(geom.nblocks, BATCH_THREADS // tpb, BATCH_BYTES // max(per_block, 1)))
        csize = cluster[0] * cluster[1] * cluster[2]
        if csize > 1:                      # batches hold whole clusters
            nb = max(nb - nb % csize, csize)
        out, printed = [], []
        grace, grace_note = None, "global_race_check is off"
        if self.global_race_check:
            if geom.nblocks <= GLOBAL_RACE_MAX_BLOCKS:
                grace = GlobalRaceChecker(geom.nblocks, self.mem.data.size)
                grace_note = "checked: no global-memory race between blocks"
            else:
                grace_note = f"not checked: more than {GLOBAL_RACE_MAX_BLOCKS} blocks"
        t0 = time.perf_counter()
        with np.errstate(all="ignore"):
            order = geom.cluster_order() if csize > 1 else np.arange(geom.nblocks)
            for b0 in range(0, geom.nblocks, nb):
                n = min(nb, geom.nblocks - b0)
                st = State(prog, geom, order[b0:b0 + n], n, self.mem, kparams, counters,
                           shared_size, out)
                if unchecked is None:
                    st.races = RaceChecker(st, strict=self.race_check == "strict")
                if prog.async_proxy:
                    st.proxy = ProxyTracker(st)
                st.grace = grace
                try:
                    run_batch(st, self.max_steps if max_steps is None else
                              _max_steps(max_steps))
                    finish_stores(st)            # bulk stores never waited for still land
                    check_released(st)           # tensor memory freed before the CTA exits
                finally:
                    if out:                      # printf output, flushed per batch
                        text = "".join(out)
                        out.clear()
                        self.printf_stream.write(text)
                        printed.append(text)
        seconds = time.perf_counter() - t0
        rep = make_report(prog, counters, geom, seconds, "".join(printed))
        rep.race_check = "checked: no shared-memory race" if unchecked is None else \
            f"not checked: {unchecked}"
        rep.global_race_check = grace_note
        return rep

    def _check_launch(self, fn, prog, grid, block, cluster, explicit, shared_mem):
        name = fn.name
        if any(v < 1 for v in grid + block + cluster):
            raise LaunchRefused(f"launch of {name}: grid {grid}, block {block} and cluster "
                                f"{cluster} must be positive")
        tpb = block[0] * block[1] * block[2]
        if tpb > MAX_THREADS_PER_BLOCK or any(b > m for b, m in zip(block, MAX_BLOCK_DIM)):
            raise LaunchRefused(f"launch of {name}: block {block} exceeds the device limits "
                                f"({MAX_THREADS_PER_BLOCK} threads, dims {MAX_BLOCK_DIM})")
        if any(g > m for g, m in zip(grid, MAX_GRID_DIM)):
            raise LaunchRefused(f"launch of {name}: grid {grid} exceeds {MAX_GRID_DIM}")
        d = prog.directives
        if ".reqntid" in d:
            req = _dim3(d[".reqntid"], ".reqntid")
            if req != block:
                raise LaunchRefused(f"launch of {name}: block {block} differs from the "
                                    f".reqntid {req} the kernel was compiled for")
        if ".maxntid" in d:
            mx = _dim3(d[".maxntid"], ".maxntid")
            lim = mx[0] * mx[1] * mx[2]
            if tpb > lim:
                raise LaunchRefused(f"launch of {name}: block {block} has {tpb} threads, more "
                                    f"than .maxntid {mx} allows ({lim})")
        csize = cluster[0] * cluster[1] * cluster[2]
        if csize % 2 and any(i.root == "tcgen05" and "cta_group::2" in i.opcode
                             for i in prog.code):
            raise LaunchRefused(f"launch of {name}: its tcgen05 instructions with "
                                f".cta_group::2 run on CTA pairs, but the cluster {cluster} "
                                f"has an odd number of CTAs")
        if ".reqnctapercluster" in d:
            req = _dim3(d[".reqnctapercluster"], ".reqnctapercluster")
            if req != cluster:
                raise LaunchRefused(f"launch of {name}: cluster {cluster} differs from the "
                                    f".reqnctapercluster {req} the kernel was compiled for")
        if ".explicitcluster" in d and not explicit:
            raise LaunchRefused(f"launch of {name}: the kernel requires a cluster launch "
                                f"(.explicitcluster) but no cluster shape was given")
        csize = cluster[0] * cluster[1] * cluster[2]
        if csize > MAX_CLUSTER_SIZE:
            raise LaunchRefused(f"launch of {name}: cluster {cluster} has {csize} blocks; the "
                                f"maximum is {MAX_CLUSTER_SIZE}")
        if ".maxclusterrank" in d and csize > d[".maxclusterrank"][0]:
            raise LaunchRefused(f"launch of {name}: cluster {cluster} has {csize} blocks, more "
                                f"than .maxclusterrank {d['.maxclusterrank'][0]}")
        if any(g % c for g, c in zip(grid, cluster)):
            raise LaunchRefused(f"launch of {name}: grid {grid} is not divisible by the "
                                f"cluster shape {cluster}")
        if csize > 1:
            target = self._target_sm(fn)
            if target is not None and target < 90:
                raise LaunchRefused(f"launch of {name}: clusters need sm_90 or newer; the "
                                    f"module targets sm_{target}")
        total_shared = prog.dyn_shared_offset + shared_mem if shared_mem else prog.static_shared
        if total_shared > MAX_SHARED_PER_BLOCK:
            raise LaunchRefused(f"launch of {name}: {total_shared} bytes of shared memory per "
                                f"block exceed the {MAX_SHARED_PER_BLOCK}-byte limit")
        if shared_mem < 0:
            raise LaunchRefused(f"launch of {name}: negative dynamic shared memory size")

    @staticmethod
    def _target_sm(fn):
        for t in fn.module.ptx.target:
            if t.startswith("sm_"):
                digits = "".join(ch for ch in t[3:] if ch.isdigit())
                return int(digits) if digits else None
        return None

    # -- arguments ------------------------------------------------------------------------
    def pack_args(self, fn: Function, args) -> bytes:
        prog = fn.program
        if isinstance(args, (bytes, bytearray, memoryview)):
            b = bytes(args)
            if len(b) != prog.kparam_size:
                raise LaunchRefused(f"launch of {fn.name}: packed arguments are {len(b)} bytes; "
                                    f"the kernel's parameters take {prog.kparam_size}")
            return b
        args = list(args)
        params = fn.params
        if len(args) != len(params):
            raise LaunchRefused(f"launch of {fn.name}: {len(args)} arguments given, the kernel "
                                f"takes {len(params)}")
        buf = bytearray(prog.kparam_size)
        for v, p in zip(args, params):
            off, size, _ = prog.kparams[p.name]
            buf[off:off + size] = _pack_one(fn.name, p, v, size)
        return bytes(buf)


def _pack_one(kname, p, v, size) -> bytes:
    if isinstance(v, (bytes, bytearray)):
        if len(v) != size:
            raise LaunchRefused(f"launch of {kname}: argument {p.name} needs {size} bytes, got "
                                f"{len(v)}")
        return bytes(v)
    if isinstance(v, DevicePtr):
        v = v.addr
    if isinstance(v, np.generic):
        b = v.tobytes()
        if len(b) != size:
            raise LaunchRefused(f"launch of {kname}: argument {p.name} is .{p.type} ({size} "
                                f"bytes); got a {v.dtype} value")
        return b
    ti = type_info(p.type) if p.count is None else None
    if ti is None:
        raise LaunchRefused(f"launch of {kname}: argument {p.name} is a byte array; pass bytes")
    if isinstance(v, bool):
        v = int(v)
    if isinstance(v, float) or ti.is_float:
        if not ti.is_float:
            raise LaunchRefused(f"launch of {kname}: argument {p.name} is .{p.type}; got a float")
        if ti.kind == "bf16":
            return f32_to_bf16(np.float32(v)).tobytes()
        return np.asarray(v, ti.dtype).tobytes()
    if isinstance(v, (int, np.integer)):
        v = int(v)
        lo = -(1 << (8 * size - 1))
        if not lo <= v < (1 << (8 * size)):
            raise LaunchRefused(f"launch of {kname}: argument {p.name} value {v} does not fit "
                                f".{p.type}")
        return (v & ((1 << (8 * size)) - 1)).to_bytes(size, "little")
    raise LaunchRefused(f"launch of {kname}: cannot pass {type(v).__name__} as {p.name}")
