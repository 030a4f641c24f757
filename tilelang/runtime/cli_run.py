"""`tilec run` and `tilec cache`: kernels from the shell (docs/python-api.md).

    tilec run examples/vadd.tile --kernel vadd --grid 4 --arg a=rand:4096 --arg b=rand:4096 \\
        --arg c=zeros:4096 [--backend emulator] [-D TILE=1024] [--repeat 10] [--save out.npz]
    tilec cache list | size | clear [--dir DIR]

Array arguments: `NAME=KIND:SHAPE` with KIND rand (uniform in [-1, 1); integers in [0, 100)),
randn, zeros, ones or arange and SHAPE like `4096` or `64x32`; `NAME=FILE.npy` loads a file;
`NAME=SHAPE` means rand. `--shape SHAPE` gives every array not named its shape (rand).
`NAME=None` passes None to an `Optional[Array[...]]` parameter.
Scalar arguments: `NAME=VALUE` (`3`, `-1.5`, `true`).
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import os
import sys
import time

import numpy as np

from tilelang.diagnostics import Diagnostic, Severity, TileError, emit
from tilelang.infile import NotRegularFile, read_regular
from tilelang.runtime.dtypes import CODE_BYTES

KINDS = ("rand", "randn", "zeros", "ones", "arange")
MAX_ELEMENTS = 2**31 - 1        # generated arrays are made as float64 first: 16 GiB


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):        # usage errors exit 2, like the rest of tilec
        self.print_usage(sys.stderr)
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        sys.exit(2)


class _Usage(Exception):
    pass


def _run_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="tilec run", description="Launch one kernel of a .tile file on random or "
                "given inputs and print a summary.")
    p.add_argument("file", metavar="FILE.tile")
    p.add_argument("--kernel", required=True, metavar="NAME")
    p.add_argument("--grid", required=True, metavar="X[,Y[,Z]]",
                   help="blocks per grid dimension (also 8x4)")
    p.add_argument("--block", metavar="X[,Y[,Z]]", help="block shape (default: the kernel's)")
    p.add_argument("--arg", action="append", default=[], metavar="NAME=VALUE",
                   help="an argument: KIND:SHAPE (rand randn zeros ones arange), FILE.npy, "
                        "SHAPE, None (an optional array), or a scalar value")
    p.add_argument("--shape", metavar="SHAPE", help="shape of every array not given by --arg")
    p.add_argument("--backend", choices=("cuda", "emulator"),
                   help="default: TILELANG_BACKEND, else cuda")
    p.add_argument("--arch", metavar="TARGET", help="default: the device's")
    p.add_argument("-D", dest="defines", action="append", default=[], metavar="NAME=VALUE",
                   help="value of a `const` kernel parameter")
    p.add_argument("-I", dest="include", action="append", default=[], metavar="DIR")
    p.add_argument("-O", dest="opt", type=int, choices=range(4), default=3, metavar="LEVEL")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--repeat", type=int, default=1, metavar="N",
                   help="launch N times and report the mean time per launch")
    p.add_argument("--save", metavar="FILE.npz", help="save every array after the launch")
    p.add_argument("--print", dest="show", action="store_true",
                   help="print the arrays after the launch")
    p.add_argument("--no-cache", action="store_true", help="do not use the disk cache")
    return p


#: The Python API's spelling of an option in a help line, and the command line's.
_SHELL_SPELLING = (("pass backend='emulator' or set", "pass --backend emulator or set"),
                   ("pass arch=... to choose one", "pass --arch TARGET to choose one"))


def for_the_shell(d: Diagnostic) -> Diagnostic:
    """`d` with its help in the command line's terms (the runtime's help names the Python
    API's keyword arguments)."""
    help = d.help
    for python, shell in _SHELL_SPELLING:
        help = help.replace(python, shell) if help else help
    return dataclasses.replace(d, help=help) if help != d.help else d


def report(e: TileError) -> int:
    """Print a TileError for `tilec run`/`tilec tune`; the exit status (2: a usage error)."""
    emit([for_the_shell(d) for d in e.diagnostics], sys.stderr)
    errors = [d for d in e.diagnostics if d.severity is Severity.ERROR]
    from tilelang.driver import USAGE_CODES
    return (2 if all(d.code in USAGE_CODES for d in errors) else 1) if errors else 0


def _dims(text: str, what: str, minimum: int = 1) -> tuple[int, ...]:
    parts = text.replace("x", ",").split(",")
    try:
        out = tuple(int(x) for x in parts if x.strip())
    except ValueError:
        raise _Usage(f"{what} expects integers like `8` or `8,4`, got `{text}`") from None
    if not 1 <= len(out) <= 3:
        raise _Usage(f"{what} takes 1 to 3 dimensions, got `{text}`")
    if any(d < minimum for d in out):
        least = "positive" if minimum == 1 else "non-negative"
        raise _Usage(f"{what} expects {least} sizes, got `{text}`")
    return out


def _arg_specs(items: list[str]) -> dict[str, str]:
    """--arg NAME=VALUE options (also `tilec tune`'s)."""
    specs = {}
    for item in items:
        name, eq, value = item.partition("=")
        if not eq or not name.isidentifier() or not value:
            raise _Usage(f"--arg expects NAME=VALUE, got `{item}`")
        specs[name] = value
    return specs


def _defines(items: list[str]) -> dict[str, str]:
    """-D NAME=VALUE options (also `tilec tune`'s)."""
    defines = {}
    for item in items:
        name, eq, value = item.partition("=")
        if not eq or not name.isidentifier() or not value.strip():
            raise _Usage(f"-D expects NAME=VALUE, got `{item}`")
        if name in defines:
            raise _Usage(f"-D {name} is given twice (`{name}={defines[name]}` and `{item}`)")
        defines[name] = value
    return defines


def _load_npy(path: str, name: str) -> np.ndarray:
    """A `.npy` file's array; never unpickles (a file can hold code)."""
    try:        # read once, without blocking on a FIFO or a device (tilelang/infile.py)
        data = read_regular(path)
        if data[:6] != b"\x93NUMPY":
            raise _Usage(f"--arg {name}: cannot load `{path}`: it is not a .npy array file "
                         "(no NUMPY header)")
        host = np.load(io.BytesIO(data), allow_pickle=False)
    except FileNotFoundError:
        raise _Usage(f"--arg {name}: no file `{path}`") from None
    except IsADirectoryError:
        raise _Usage(f"--arg {name}: `{path}` is a folder, not a .npy file") from None
    except NotRegularFile as e:
        raise _Usage(f"--arg {name}: cannot load `{path}`: {e.strerror}") from None
    except OSError as e:
        raise _Usage(f"--arg {name}: cannot read `{path}`: {e.strerror or e}") from None
    except (ValueError, EOFError) as e:
        why = "it holds Python objects (pickled data), which are never loaded" \
            if "allow_pickle" in str(e) else f"it is not a .npy array file ({e})"
        raise _Usage(f"--arg {name}: cannot load `{path}`: {why}") from None
    if not isinstance(host, np.ndarray):
        raise _Usage(f"--arg {name}: `{path}` holds several arrays; give a .npy file")
    return host


def _host_data(kind: str, shape, dtype: str, rng) -> np.ndarray:
    """Values as float64/int64/bool on the host; converted to the dtype's bits later."""
    n = int(np.prod(shape)) if shape else 1
    if kind == "zeros":
        v = np.zeros(n)
    elif kind == "ones":
        v = np.ones(n)
    elif kind == "arange":
        v = np.arange(n)
    elif kind == "randn":
        v = rng.standard_normal(n)
    elif dtype == "bool":
        v = rng.integers(0, 2, n)
    elif dtype[0] in "iu":
        v = rng.integers(0, 100, n)
    else:
        v = rng.uniform(-1.0, 1.0, n)
    return v.reshape(shape)


def _to_bits(values: np.ndarray, dtype: str) -> np.ndarray:
    """Host array holding `dtype`'s exact bytes (bf16 and f8 as raw bits)."""
    from tilelang.sema.types import round_to_bf16
    if dtype == "bf16":
        return (round_to_bf16(values).view(np.uint32) >> 16).astype(np.uint16)
    if dtype in ("f8e4m3", "f8e5m2"):
        from tilelang.emulator.fp8 import encode
        return encode(values, dtype[2:])
    if dtype in CODE_BYTES:
        from tilelang.sema.builtins_dtype import to_bits
        from tilelang.sema.types import DTYPES, round_to_dtype
        return to_bits(round_to_dtype(values, DTYPES[dtype]), DTYPES[dtype])
    from .dtypes import numpy_dtype
    return values.astype(numpy_dtype(dtype))


def _from_bits(raw: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "bf16":
        return (raw.astype(np.uint32) << 16).view(np.float32)
    if dtype in ("f8e4m3", "f8e5m2"):
        from tilelang.emulator.fp8 import decode
        return decode(raw, dtype[2:])
    if dtype in CODE_BYTES:
        from tilelang.sema.builtins_dtype import from_bits
        from tilelang.sema.types import DTYPES
        return from_bits(raw, DTYPES[dtype])
    return raw


def _raw_numpy(dev_array) -> np.ndarray:
    """A device array's contents as host values (bf16/f8 decoded to floats)."""
    from .device_array import DeviceArray
    d = dev_array
    if d.dtype == "bf16" or d.dtype in CODE_BYTES:
        carrier = "u16" if d.dtype == "bf16" else "u8"
        raw = DeviceArray(d.backend, d.ptr, d.shape, carrier, d.strides, d).numpy()
        return _from_bits(raw, d.dtype)
    return d.numpy()


def _make_args(kernel, specs: dict[str, str], default_shape, backend, rng):
    from .device_array import DeviceArray
    out = []
    for p in kernel.params:
        text = specs.pop(p.name, None)
        if p.kind == "scalar":
            if text is None:
                raise _Usage(f"kernel `{kernel.name}` needs a value for scalar `{p.name}: "
                             f"{p.dtype}`: add --arg {p.name}=VALUE")
            out.append(_scalar(text, p))
            continue
        if p.kind == "list":
            raise _Usage(f"kernel `{kernel.name}` takes `{p.show()}`, a list of arrays, which "
                         "tilec run cannot make: launch it from Python (docs/python-api.md)")
        if p.kind == "symmetric":
            raise _Usage(f"kernel `{kernel.name}` takes `{p.show()}`, a symmetric array, which "
                         "needs a world of devices: launch it with tilelang.distributed "
                         "(docs/distributed.md)")
        if text is not None and text.strip() == "None":
            if not p.optional:
                raise _Usage(f"--arg {p.name}=None: `{p.name}: Array[{p.dtype}, {p.rank}]` is "
                             "not optional (only `Optional[Array[...]]` parameters take None)")
            out.append(None)
            continue
        if text is None:
            if default_shape is None:
                raise _Usage(f"kernel `{kernel.name}` needs array `{p.name}: Array[{p.dtype}, "
                             f"{p.rank}]`: add --arg {p.name}=rand:SHAPE or --shape SHAPE")
            kind, shape = "rand", default_shape
        elif text.endswith(".npy"):
            host = _load_npy(text, p.name)
            out.append(DeviceArray.from_host(backend, host))
            continue
        else:
            kind, _, shape_text = text.rpartition(":")
            kind = kind or "rand"
            if kind not in KINDS:
                raise _Usage(f"--arg {p.name}: unknown kind `{kind}` (use {', '.join(KINDS)})")
            shape = _dims(shape_text, f"--arg {p.name}", 0) if shape_text else ()
        try:
            if int(np.prod(shape, dtype=object)) > MAX_ELEMENTS:
                raise MemoryError
            values = _host_data(kind, shape, p.dtype, rng)
        except (MemoryError, ValueError, OverflowError):
            raise _Usage(f"--arg {p.name}: shape {'x'.join(map(str, shape))} is too large "
                         "for this machine's memory") from None
        out.append(DeviceArray.from_host(backend, _to_bits(values, p.dtype), p.dtype))
    if specs:
        raise _Usage(f"kernel `{kernel.name}` has no parameter `{next(iter(specs))}`")
    return out


def _scalar(text: str, p):
    t = text.strip().lower()
    if p.dtype == "bool":
        if t in ("true", "1"):
            return True
        if t in ("false", "0"):
            return False
        raise _Usage(f"--arg {p.name}: expected true or false, got `{text}`")
    try:
        return int(t, 0) if p.dtype[0] in "iu" else float(t)
    except ValueError:
        raise _Usage(f"--arg {p.name}: `{text}` is not a {p.dtype} value") from None


def _stats(a: np.ndarray) -> str:
    if a.size == 0:
        return "empty"
    v = a.astype(np.float64)
    return f"min {v.min():.6g}  max {v.max():.6g}  mean {v.mean():.6g}  sum {v.sum():.6g}"


def cmd_run(argv: list[str]) -> int:
    p = _run_parser()
    args = p.parse_args(argv)
    from .backends import get_backend
    from .module import compile as compile_module
    try:
        grid = _dims(args.grid, "--grid", 0)       # a zero extent: an empty launch
        block = _dims(args.block, "--block") if args.block else None
        default_shape = _dims(args.shape, "--shape", 0) if args.shape else None
        specs = _arg_specs(args.arg)
        defines = _defines(args.defines)
        for d in args.include:
            if not os.path.isdir(d):
                why = "does not exist" if not os.path.exists(d) else "is not a folder"
                raise _Usage(f"-I {d}: the folder {why}")
        if args.repeat < 1:
            raise _Usage("--repeat must be at least 1")
        if args.seed < 0:            # NumPy's generators take non-negative seeds only
            raise _Usage(f"--seed must be a non-negative integer, got {args.seed}")
        from tilelang.targets import TARGETS
        if args.arch is not None and args.arch not in TARGETS:
            raise _Usage(f"--arch {args.arch}: not a supported target; use one of "
                         f"{', '.join(TARGETS)}")
        if args.save:
            folder = os.path.dirname(os.path.abspath(args.save))
            if not os.path.isdir(folder):
                raise _Usage(f"--save {args.save}: the folder `{folder}` does not exist")
    except _Usage as e:
        p.error(str(e))
    out = sys.stdout
    try:
        backend = get_backend(args.backend)
        t0 = time.perf_counter()
        mod = compile_module(args.file, arch=args.arch, defines=defines,
                               include_dirs=args.include, opt_level=args.opt, backend=backend,
                               cache=not args.no_cache)
        kernel = getattr(mod, args.kernel)
        if kernel.open_types:        # a generic kernel: -D T=bf16 (or T's default) fixes T
            kernel = kernel._defaulted()
        rng = np.random.default_rng(args.seed)
        try:
            kargs = _make_args(kernel, specs, default_shape, backend, rng)
        except _Usage as e:
            p.error(str(e))
        facts = {}
        spec = None
        t1 = time.perf_counter()
        result = kernel.launch(grid, kargs, block=block)
        backend.synchronize()
        t2 = time.perf_counter()
        for _ in range(args.repeat - 1):
            kernel.launch(grid, kargs, block=block)
        backend.synchronize()
        t3 = time.perf_counter()
        for s in kernel._specs.values():
            spec = s
        if spec is not None:
            names = [q.name for q in kernel.params if q.kind == "array"]
            facts = dict(zip(names, spec.facts))
    except TileError as e:
        return report(e)

    shape = spec.shape(grid, block) if spec else None
    out.write(f"kernel    {kernel.info.show()}\n")
    consts = kernel._const_values()
    if consts:
        out.write("consts    " + ", ".join(f"{k}={v}" for k, v in consts.items()) + "\n")
    device = f" ({backend.limits.name})" if backend.name == "cuda" else ""
    out.write(f"backend   {backend.name}{device}, target {mod.target}\n")
    if shape is not None:
        out.write(f"launch    grid {shape.grid}, block {shape.block}"
                  + (f", cluster {shape.cluster}" if shape.cluster else "")
                  + (f", dynamic shared {shape.shared_mem} B" if shape.shared_mem else "")
                  + (" (empty: no block ran)" if shape.empty else "") + "\n")
    if facts:
        out.write("facts     " + ", ".join(f"{k}={v}" for k, v in facts.items())
                  + "  (c: contiguous, a: 16-byte aligned, e: last extent a multiple of 16 B, "
                  "s: offsets below 2^31 elements"
                  + (", n: no tensor map" if any("n" in v for v in facts.values()
                                                 if v != "None") else "")
                  + (", None: an optional array not given" if "None" in facts.values()
                     else "")
                  + (", =k: the shape of array k" if any("=" in v for v in facts.values())
                     else "") + ")\n")
    out.write(f"time      prepare {1e3 * (t1 - t0):.1f} ms, first launch {1e3 * (t2 - t1):.1f} ms"
              " (compiles on a cache miss)")
    if args.repeat > 1:
        out.write(f", then {1e6 * (t3 - t2) / (args.repeat - 1):.1f} us per launch")
    out.write("\n")
    if result is not None and hasattr(result, "total_instructions"):
        out.write(f"emulator  {result.total_instructions} thread-instructions executed, "
                  f"{result.total_issued} warp-instructions issued\n")
    saved = {}
    for q, a in zip(kernel.params, kargs):
        if q.kind != "array" or a is None:     # a scalar, or an optional array given None
            out.write(f"  {q.name:<8} = {a!r}\n")
            continue
        host = _raw_numpy(a)
        saved[q.name] = host
        out.write(f"  {q.name:<8} {q.dtype}{list(host.shape)}  {_stats(host)}\n")
        if args.show:
            out.write(np.array2string(host, threshold=64, prefix="    ") + "\n")
    if args.save:
        import io
        from tilelang.outfile import OutputError, write_output
        buf = io.BytesIO()
        np.savez(buf, **saved)
        try:
            write_output(args.save, buf.getvalue())
        except OutputError as e:
            sys.stderr.write(f"tilec run: error: {e}\n")
            return 1
        out.write(f"saved     {args.save}\n")
    return 0


# ---------------------------------------------------------------------------------------------

def _human(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def cmd_cache(argv: list[str]) -> int:
    p = _Parser(prog="tilec cache", description="The on-disk kernel cache "
                "(TILELANG_CACHE_DIR, else ~/.cache/tilelang).")
    p.add_argument("action", choices=("list", "size", "clear"))
    p.add_argument("--dir", metavar="DIR", help="the cache folder (default: TILELANG_CACHE_DIR "
                   "or ~/.cache/tilelang)")
    args = p.parse_args(argv)
    from .cache import DiskCache
    cache = DiskCache(args.dir)
    out = sys.stdout
    why = cache.problem()
    if why is not None:
        sys.stderr.write(f"tilec cache: error: not using the cache folder {cache.root}: it "
                         f"{why}\n")
        return 1
    if args.action == "list":
        entries = cache.entries()
        if not entries:
            out.write(f"no cached kernels in {cache.root}\n")
            return 0
        out.write(f"{'key':<14}{'kernel':<16}{'target':<9}{'size':>10}  consts / facts / source\n")
        good = [e for e in entries if e["ok"]]
        for e in entries:
            if not e["ok"]:
                out.write(f"{e['key'][:12]:<14}{'(damaged)':<16}{'?':<9}"
                          f"{_human(e['bytes']):>10}  {e['problem']}\n")
                continue
            consts = ",".join(f"{k}={v}" for k, v in e["consts"].items()) or "-"
            facts = ",".join(f"{k}={v}" for k, v in e["facts"].items()) or "-"
            out.write(f"{e['key'][:12]:<14}{e['kernel']:<16}{e['target']:<9}"
                      f"{_human(e['bytes']):>10}  {consts} / {facts} / {e['source']}\n")
        out.write(f"{len(good)} kernel{'s' if len(good) != 1 else ''} in {cache.root}")
        bad = len(entries) - len(good)
        if bad:
            out.write(f", {bad} damaged (rebuilt when used; `tilec cache clear` removes "
                      f"{'them' if bad != 1 else 'it'})")
        out.write("\n")
    elif args.action == "size":
        n = sum(e["ok"] for e in cache.entries())
        out.write(f"{_human(cache.size())} in {n} kernel{'s' if n != 1 else ''} "
                  f"({cache.root})\n")
    else:
        n = cache.clear()
        out.write(f"removed {n} kernel{'s' if n != 1 else ''} from {cache.root}\n")
    return 0
