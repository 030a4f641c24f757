"""PTX -> cubin: nvJitLink in process by default, or a ptxas binary when asked (`--ptxas PATH`).

Resource usage (registers, spills, static shared memory) comes from ptxas's verbose report:
nvJitLink returns it in its info log when given `-Xptxas=-v` (measured with nvJitLink 13.5;
`-verbose` gives the same lines), a ptxas binary prints it for `-v`.

Registers: nvJitLink compiles PTX input as relocatable device code (`ptxas -c`), which can
need more registers than a whole-program ptxas on the same PTX: ptxas's IEEE div/sqrt/rcp
slow-path subroutines are called under the ABI, and a kernel with `.maxntid`/`.reqntid` but
no `.minnctapersm` loses whole-program mode's occupancy target. No nvJitLink option changes
either (measured: -O level, -lineinfo, PTX version, arch string, -maxrregcount, which launch
bounds override); tests/codegen/target/test_link_registers.py pins the facts, and the driver links
again with `.maxnreg` where that costs an occupancy step (codegen/target/register_fit.py).

Time: nvJitLink is the largest stage of the matmul's cold compile (~110-150 ms, one link: its
contract already has `.maxnreg`). `-Xptxas=-O2` and `-Xptxas=--allow-expensive-optimizations=false`
give the same SASS for it and the same instruction count (667 M, within 0.1 %);
`-Xptxas=-split-compile=2` the same SASS and no measurable time. The default options stay.

ptxas knobs (docs/cli.md, `--ptxas-knobs`): when both MLIR_ENABLE_EVO and PTX_KNOBS_PATH are set, or `knobs_file` is
given, `--knobs-file=<path>` is forwarded to ptxas unchecked; ptxas owns the grammar and every
diagnostic, which come back inside ours. (The public ptxas of CUDA 13.0 and nvJitLink 13.5
answer "Unknown option '-knobs-file'": the option exists only in ptxas builds that have it.)
"""

from __future__ import annotations

import os
import re
import time
from typing import TYPE_CHECKING, Mapping, NamedTuple, Sequence

from tilelang.diagnostics import InternalCompilerError, TileUsageError, register_codes

if TYPE_CHECKING:
    from tilelang.targets import Target

register_codes({
    "E0760": "internal: PTX did not link (bug in the compiler)",
    "E0761": "the ptxas binary could not be run",
    "E0762": "nvJitLink is not available",
    "E0763": "ptxas failed with a user-supplied knobs file",
})


# NamedTuples: cheaper to create at import than frozen dataclasses (~0.2 against ~1.5 ms)
class KernelResources(NamedTuple):
    name: str
    registers: int = 0
    spill_stores: int = 0      # bytes
    spill_loads: int = 0       # bytes
    stack_frame: int = 0       # bytes
    smem_static: int = 0       # bytes of static shared memory
    barriers: int = 0


class LinkResult(NamedTuple):
    cubin: bytes
    arch: str
    backend: str                          # "nvjitlink" or "ptxas"
    info_log: str
    resources: Mapping[str, KernelResources]
    seconds: float
    options: tuple[str, ...]              # nvJitLink options, or the ptxas argv


def knobs_file_from_env(env: Mapping[str, str] | None = None) -> str | None:
    """The knobs gate (docs/cli.md): both MLIR_ENABLE_EVO and PTX_KNOBS_PATH set (non-empty)."""
    env = os.environ if env is None else env
    if env.get("MLIR_ENABLE_EVO") and env.get("PTX_KNOBS_PATH"):
        return env["PTX_KNOBS_PATH"]
    return None


_COMPILING = re.compile(r"Compiling entry function '([^']+)'")
_PROPS = re.compile(r"Function properties for (\S+)")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers(.*)")
_SMEM = re.compile(r"(\d+) bytes smem")
_BARS = re.compile(r"used (\d+) barriers")


def parse_resource_usage(log: str) -> dict[str, KernelResources]:
    """Per-kernel resources from ptxas `-v` output (also nvJitLink's info log)."""
    out: dict[str, dict] = {}
    current = None
    for line in log.splitlines():
        m = _COMPILING.search(line) or _PROPS.search(line)
        if m:
            current = m.group(1)
            out.setdefault(current, {"name": current})
            continue
        if current is None:
            continue
        if (m := _FRAME.search(line)):
            out[current].update(stack_frame=int(m.group(1)), spill_stores=int(m.group(2)),
                                spill_loads=int(m.group(3)))
        if (m := _USED.search(line)):
            rest = m.group(2)
            out[current]["registers"] = int(m.group(1))
            if (s := _SMEM.search(rest)):
                out[current]["smem_static"] = int(s.group(1))
            if (b := _BARS.search(rest)):
                out[current]["barriers"] = int(b.group(1))
    return {k: KernelResources(**v) for k, v in out.items()}


def _save_ptx(ptx: str, save_dir: str | None) -> str:
    import tempfile
    d = save_dir or tempfile.gettempdir()
    os.makedirs(d, exist_ok=True)
    fd, path = tempfile.mkstemp(prefix="tilec-bug-", suffix=".ptx", dir=d)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(ptx)
    return path


def _fail(ptx: str, arch: str, tool: str, log: str, knobs: str | None,
          save_dir: str | None):
    path = _save_ptx(ptx, save_dir)
    notes = [f"{tool}: {ln}" for ln in log.strip().splitlines()] or [f"{tool} gave no message"]
    if knobs:
        # The knobs file is the user's; ptxas judged it (docs/cli.md: no preflight).
        return TileUsageError.at(
            "E0763", f"ptxas failed for {arch} with knobs file `{knobs}`; the PTX is saved "
            f"in {path}", None, notes=notes,
            help="check the knobs file, or unset MLIR_ENABLE_EVO / PTX_KNOBS_PATH")
    return InternalCompilerError.at(
        "E0760", f"the generated PTX for {arch} did not link; it is saved in {path}", None,
        notes=notes, help=f"this is a compiler bug: please report it with {path} attached")


def link_ptx(ptx: str, target: Target, *, ptxas: str | None = None,
             knobs_file: str | None = None, env: Mapping[str, str] | None = None,
             opt_level: int = 3, verbose: bool = True, extra_options: Sequence[str] = (),
             save_dir: str | None = None) -> LinkResult:
    """Assemble PTX into a cubin for `target` (the compile's resolved target record).

    `knobs_file` (the CLI's `--ptxas-knobs FILE`) or the MLIR_ENABLE_EVO + PTX_KNOBS_PATH
    environment gate forwards `--knobs-file=<path>` to ptxas. A failure raises
    InternalCompilerError (E0760) naming the file the PTX was saved to.
    """
    knobs = knobs_file or knobs_file_from_env(env)
    arch = target.name
    if ptxas:
        return _link_ptxas(ptx, arch, ptxas, knobs, opt_level, verbose, extra_options, save_dir)
    return _link_nvjitlink(ptx, arch, knobs, opt_level, verbose, extra_options, save_dir)


def _link_nvjitlink(ptx, arch, knobs, opt_level, verbose, extra, save_dir) -> LinkResult:
    from tilelang import nvjitlink
    try:
        nvjitlink.library()
    except nvjitlink.NvJitLinkUnavailable as e:
        raise TileUsageError.at("E0762", f"nvJitLink is not available ({e})", None,
                                help="pip install cuda-python nvidia-nvjitlink, or pass "
                                "`--ptxas PATH`") from None
    opts = nvjitlink_options(arch, opt_level, verbose, knobs, extra)
    start = time.perf_counter()
    try:
        cubin, info = nvjitlink.link_ptx(ptx.encode(), opts)
    except nvjitlink.LinkFailed as e:
        if e.stage == "options":
            raise _fail(ptx, arch, "nvJitLink", f"rejected options {opts}: {e.error}", knobs,
                        save_dir) from None
        raise _fail(ptx, arch, "ptxas", e.log or str(e.error), knobs, save_dir) from None
    seconds = time.perf_counter() - start
    return LinkResult(cubin, arch, "nvjitlink", info, parse_resource_usage(info), seconds,
                      tuple(opts))


def nvjitlink_options(arch: str, opt_level: int, verbose: bool = True, knobs: str | None = None,
                      extra: Sequence[str] = ()) -> list[str]:
    """The options nvJitLink is created with.

    nvJitLink itself takes only -O0 and -O3 (ERROR_UNRECOGNIZED_OPTION otherwise); ptxas
    takes every level, so -O1/-O2 go to it. No -lineinfo or -g (they cost registers), no
    -maxrregcount (the kernel's own directives decide).
    """
    opts = [f"-arch={arch}", f"-O{opt_level}" if opt_level in (0, 3) else
            f"-Xptxas=-O{opt_level}"]
    if verbose:
        opts.append("-Xptxas=-v")
    if knobs:
        opts.append(f"-Xptxas=--knobs-file={knobs}")
    return opts + list(extra)


def _link_ptxas(ptx, arch, ptxas, knobs, opt_level, verbose, extra, save_dir) -> LinkResult:
    import subprocess      # only this path runs a program: the default link imports neither
    import tempfile
    with tempfile.TemporaryDirectory(prefix="tilec-ptxas-") as tmp:
        src, dst = os.path.join(tmp, "tile.ptx"), os.path.join(tmp, "tile.cubin")
        with open(src, "w", encoding="utf-8") as f:
            f.write(ptx)
        argv = [ptxas, f"-arch={arch}", f"-O{opt_level}"]
        if verbose:
            argv.append("-v")
        if knobs:
            argv.append(f"--knobs-file={knobs}")
        argv += [*extra, "-o", dst, src]
        start = time.perf_counter()
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=600)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise TileUsageError.at("E0761", f"cannot run ptxas `{ptxas}`: {e}", None,
                                    help="check the path given to --ptxas") from None
        log = (proc.stdout or "") + (proc.stderr or "")
        if proc.returncode != 0 or not os.path.exists(dst):
            raise _fail(ptx, arch, "ptxas", log or f"exit status {proc.returncode}", knobs,
                        save_dir)
        with open(dst, "rb") as f:
            cubin = f.read()
        seconds = time.perf_counter() - start
    return LinkResult(cubin, arch, "ptxas", log, parse_resource_usage(log), seconds,
                      tuple(argv))
