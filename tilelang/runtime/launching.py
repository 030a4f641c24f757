"""Launching: a launch's arguments → the specialization for their facts → packed values → the
back end's launch call (docs/launch-path.md says what a launch does and does not do).

Two paths give the same verdict for every call (docs/python-api.md, "Verdicts do not depend
on history"):
- the fast path (`Launcher.launch`): a binder generated per bound kernel (args.make_binder)
  reads each array with a reader chosen once per (parameter, Python type), which also checks
  dtype, rank and device, and converts the scalars; then one dict lookup finds the
  specialization, one more the checked launch shape, and the back end packs and launches;
- the general path (`Launcher.launch_slow`): anything unusual — host arrays to stage, an
  argument that fails a check, a type without a fast reader, arrays on another device — is
  read with `args.extract`, diagnosed, staged and launched.
"""

from __future__ import annotations

import struct
from typing import Any, Callable

import numpy as np

from .args import check_array, extract, make_binder, same_driver, shape_links
from .array_lists import TableCache, list_facts, read_list
from .symm_mem import read_symmetric
from .dtypes import ITEMSIZE, SCALAR_CONVERT, accepts, scalar_problem
from .errors import arg_error
from .facts import ABSENT, facts_key
from .signature import KernelInfo, ParamInfo
from .specialize import Specializer


def scalar_converter(kernel: str, p: ParamInfo) -> Callable | None:
    """The check and conversion of one scalar parameter's argument: refuses what
    `scalar_problem` refuses (E0915) and returns what struct packs (NumPy scalars as Python
    numbers, bf16/f8 as their bits, bools as 0/1). Both launch paths use it, so a value's
    verdict does not depend on which path (or which earlier launch) served the call."""
    if p.kind != "scalar":
        return None
    conv = SCALAR_CONVERT.get(p.dtype)
    is_bool = p.dtype == "bool"

    def convert(v, p=p, conv=conv):
        why = scalar_problem(p.dtype, v)
        if why:
            raise scalar_error(kernel, p, why)
        if isinstance(v, np.generic):
            v = v.item()
        if conv is not None:
            return conv(float(v))
        if is_bool:
            return 1 if v else 0
        return v
    return convert


def scalar_error(kernel: str, p: ParamInfo, why: str):
    return arg_error("E0915", f"argument `{p.name}` of kernel `{kernel}` ({p.show()}): {why}",
                     f"pass a value representable as {p.dtype}", p.span)


def count_error(info: KernelInfo, params: tuple[ParamInfo, ...], got: int):
    want = ", ".join(p.name for p in params) or "no arguments"
    return arg_error("E0910", f"kernel `{info.name}` takes {len(params)} argument"
                     f"{'s' if len(params) != 1 else ''} ({want}), got {got}",
                     "const parameters are not passed positionally: give them as keywords "
                     "or with `.specialize(...)`", info.span)


def check_writes(kernel: str, params, arrays, written, views, args) -> None:
    """Refuse arrays the kernel stores into whose stores would be lost (a read-only NumPy
    array is not copied back) or racy (a broadcast view: many elements, one address). An
    empty array stores nothing: it is neither."""
    for (i, v) in zip(arrays, views):
        if i not in written or v is None:     # None: an absent optional array
            continue
        p = params[i]
        where = f"argument `{p.name}` of kernel `{kernel}` ({p.show()})"
        if 0 in v.shape:
            continue
        keep = v.keep
        if isinstance(keep, np.ndarray) and not keep.flags.writeable:
            raise arg_error("E0914", f"{where} is a read-only array, but the kernel writes "
                            "it", "pass a writable array (e.g. `x.copy()`); read-only "
                            "arrays are fine for parameters the kernel only reads", p.span)
        bad = [d for d, (n, st) in enumerate(zip(v.shape, v.strides)) if st == 0 and n > 1]
        if bad:
            raise arg_error("E0914", f"{where} is a broadcast view (stride 0 in dimension "
                            f"{bad[0]}, shape {tuple(v.shape)}), but the kernel writes it: "
                            "its elements share memory", "pass an array with memory of "
                            "its own, e.g. `np.ascontiguousarray(x)` / `x.contiguous()`",
                            p.span)


class Launcher:
    """The launch paths of one bound kernel."""

    __slots__ = ("info", "name", "params", "arrays", "convert", "nparams", "bind", "backend",
                 "stream_handle", "specializer", "specs", "meta", "lists", "tables",
                 "symmetric")

    def __init__(self, info: KernelInfo, params: tuple[ParamInfo, ...], backend,
                 specializer: Specializer, meta: Callable[[tuple], dict[str, Any]]):
        self.info, self.name, self.params = info, info.name, params
        self.arrays = specializer.arrays
        # `List[Array[...]]` and `Symmetric[Array[...]]` (symm_mem.py): the general path only
        self.lists = tuple(i for i in specializer.lists if params[i].kind == "list")
        self.symmetric = tuple(i for i in specializer.lists if params[i].kind == "symmetric")
        self.tables = TableCache()
        self.convert = tuple(scalar_converter(info.name, p) for p in params)
        self.nparams = len(params)
        self.bind = make_binder(params, self.convert, backend)
        self.backend = backend
        self.stream_handle = backend.stream_handle
        self.specializer = specializer
        self.specs = specializer.specs       # the same dict: one lookup on the fast path
        self.meta = meta

    def launch(self, grid, args: tuple, stream, block):
        """The per-call path (see the module docstring)."""
        if len(args) != self.nparams:
            raise count_error(self.info, self.params, len(args))
        if callable(grid):
            grid = grid(self.meta(args))
        if type(grid) is list:
            grid = tuple(grid)
        got = self.bind(args)
        if got is None:
            return self.launch_slow(grid, args, stream, block)
        values, facts, lib = got
        spec = self.specs.get(facts)
        if spec is None:
            spec = self.specializer.build(facts)
        shape = None
        if block is None:
            tg = type(grid)
            if tg is int:
                shape = spec.shapes.get((grid, None))
            elif tg is tuple:
                shape = spec.shapes.get((grid, None))
                if shape is not None:        # (True,) == (1,): only exact ints may hit
                    for x in grid:
                        if type(x) is not int:
                            shape = None
                            break
        if shape is None:                    # other spellings: checked (and remembered if exact)
            shape = spec.shape(grid, block)
        try:
            return spec.launcher.launch(values, shape, self.stream_handle(stream, lib))
        except (struct.error, OverflowError, TypeError) as e:
            self.diagnose_scalars(args)
            raise e

    def launch_slow(self, grid, args: tuple, stream, block):
        params = self.params
        backend = self.backend
        views = []
        staged = None
        for i in self.arrays:
            a = args[i]
            p = params[i]
            if a is None and p.optional:     # absent: no view, zeros in the ABI slots
                views.append(None)
                continue
            v = extract(a)
            if v is None or v.problem is not None or not accepts(p.dtype, v.dtype) or \
                    len(v.shape) != p.rank or v.strides is None or v.where != backend.name or \
                    (v.what == "DeviceArray" and not same_driver(v.keep.backend, backend)):
                if v is not None and v.where == "host" and backend.host_arrays and \
                        v.problem is None and accepts(p.dtype, v.dtype) and \
                        len(v.shape) == p.rank and v.strides is not None:
                    if staged is None:
                        staged = []
                    staged.append((i, v))
                else:
                    check_array(self.name, p, v, a, backend, backend.host_arrays)
            views.append(v)
        # lists of arrays: every entry read and checked; host entries staged like arrays
        entries = {i: read_list(self.name, params[i], args[i], backend) for i in self.lists}
        symm = {i: read_symmetric(self.name, params[i], args[i], backend)
                for i in self.symmetric}
        for i, es in entries.items():
            for j, (q, v, stage) in enumerate(es):
                if stage:
                    staged = (staged or []) + [((i, j), v)]
        where = {i: params[i] for i in self.arrays}
        where.update({(i, j): q for i, es in entries.items() for j, (q, _, _) in enumerate(es)})
        device = _device_of(self.name, where, list(self.arrays) + [
            (i, j) for i, es in entries.items() for j in range(len(es))], views + [
            v for es in entries.values() for (_, v, _) in es], backend)
        values = [None] * len(params)
        convert = self.convert
        for i, p in enumerate(params):       # every scalar checked before anything is staged
            if p.kind == "scalar":
                c = convert[i]
                values[i] = args[i] if c is None else c(args[i])
        finish = None
        originals = views
        lists = {i: [(q, v) for q, v, _ in es] for i, es in entries.items()}
        tables = []                           # tables of this launch only, kept until it ends
        try:
            if staged:
                addrs, finish = device.stage(staged)
                views = [v._replace(ptr=addrs[i]) if i in addrs else v
                         for i, v in zip(self.arrays, views)]
                lists = {i: [(q, v._replace(ptr=addrs[(i, j)]) if (i, j) in addrs else v)
                             for j, (q, v) in enumerate(es)] for i, es in lists.items()}
            # the library of the arrays picks the default stream (torch's current one):
            # lists' tables are uploaded, and capture tested, for that stream
            lib = next((v.what for v in views + [v for es in lists.values() for _, v in es]
                        if v is not None and v.what != "DeviceArray"), None)
            flat: list = []
            facts: list = []
            list_facts_ = []
            it = iter(views)
            for i, p in enumerate(params):
                if p.kind == "symmetric":    # this rank's table of every rank's buffer
                    s = symm[i]
                    handle = device.stream_handle(stream, lib)
                    ptr, table = self.tables.get(
                        device, s.peers(), p.rank, True,
                        lambda: getattr(device, "is_capturing", lambda h: False)(handle))
                    flat += [ptr, s.world_size, s.rank]
                    list_facts_.append(list_facts(s.peers(), p.dtype))
                    continue
                if p.kind == "list":
                    vs = [v for _, v in lists[i]]
                    keep = not any(stage for _, _, stage in entries[i])
                    handle = device.stream_handle(stream, lib)
                    ptr, table = self.tables.get(
                        device, vs, p.rank, keep,
                        lambda: getattr(device, "is_capturing", lambda h: False)(handle))
                    if table is not None:
                        tables.append(table)
                    flat += [ptr, len(vs)]
                    list_facts_.append(list_facts(vs, p.dtype))
                    continue
                if p.kind == "array":
                    v = next(it)
                    if v is None:
                        flat.extend((0,) * (1 + 2 * p.rank))
                        facts.append(ABSENT)
                        continue
                    flat.append(v.ptr)
                    flat.extend(v.shape)
                    flat.extend(v.strides)
                    facts.append(facts_key(v.ptr, v.shape, v.strides, ITEMSIZE[p.dtype]))
                else:
                    flat.append(values[i])
            facts = shape_links(facts, [() if v is None else v.shape for v in views])
            return self.issue(flat, tuple(facts + list_facts_), grid, block, stream, lib, args,
                              originals, device, entries)
        finally:
            if finish is not None:
                finish()
            del tables

    def issue(self, values, facts, grid, block, stream, lib, args, views, device, entries=None):
        spec = self.specializer.get(facts)
        if spec.written:
            check_writes(self.name, self.params, self.arrays, spec.written, views, args)
            for i, es in (entries or {}).items():
                if i in spec.written:         # a list the kernel writes: each of its arrays
                    keys = [(i, j) for j in range(len(es))]
                    check_writes(self.name, {k: q for k, (q, _, _) in zip(keys, es)}, keys,
                                 set(keys), [v for _, v, _ in es], args)
        shape = spec.shape(grid, block, device.limits)
        launcher = spec.launcher_on(device)
        handle = device.stream_handle(stream, lib)
        try:
            return launcher.launch(values, shape, handle)
        except (struct.error, OverflowError, TypeError) as e:
            self.diagnose_scalars(args)
            raise e

    def diagnose_scalars(self, args) -> None:
        for p, a in zip(self.params, args):
            if p.kind == "scalar":
                why = scalar_problem(p.dtype, a)
                if why:
                    raise scalar_error(self.name, p, why)


def _device_of(kernel: str, params, arrays, views, backend):
    """The back end of the device that holds the launch's arrays: `backend` for host arrays
    and arrays on the module's device; another device of the same driver when every device
    array is there; a clear error naming both devices and arguments when they differ."""
    if not hasattr(backend, "for_device"):
        return backend
    first = None
    for i, v in zip(arrays, views):
        if v is None or v.where == "host":
            continue
        if first is None:
            first = (i, v)
        elif v.device_id != first[1].device_id:
            p, q = params[first[0]], params[i]
            raise arg_error("E0913", f"arguments `{p.name}` and `{q.name}` of kernel "
                            f"`{kernel}` are on different devices (`{p.name}` on cuda:"
                            f"{first[1].device_id}, `{q.name}` on cuda:{v.device_id})",
                            "a launch runs on one device: copy the arrays to the same "
                            "device first (e.g. `x.to(y.device)`)", q.span)
    if first is None or first[1].device_id == backend.device_id:
        return backend
    return backend.for_device(first[1].device_id)
