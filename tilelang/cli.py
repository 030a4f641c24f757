"""`tilec`: the command-line compiler.

    tilec check FILE...            parse and check, report diagnostics
    tilec lsp                      the language server (stdio)
    tilec fmt [--check|--diff] FILE...   rewrite files in the canonical layout (tilelang/fmt)
    tilec run / tilec cache        the runtime (tilelang/runtime/cli_run.py)
    tilec tune FILE --kernel K     autotune const parameters (tilelang/tune/cli.py)
    tilec DIR/FILE.tile            compile every kernel to FILE.cubin in the current folder
    tilec --emit ast|typed-ast|tir|plan|llvm|ptx|cubin FILE   print or write one stage's product
    tilec --emit c FILE -o NAME.c  NAME.c + NAME.h for C/C++ hosts (tilelang/aot)
    tilec --report FILE.tile       registers, spills, shared memory and occupancy per kernel

Exit status: 0 success, 1 user errors (diagnostics on stderr), 2 usage errors.
"""

from __future__ import annotations

import gc
import sys
from typing import TYPE_CHECKING

from .version import __version__
from .diagnostics import Diagnostic, Severity, TileError, emit
from .driver import check_file
from .options import DEFAULT_TARGET, DISTRIBUTED_LOWERINGS, CompileOptions

if TYPE_CHECKING:
    import argparse

EMIT_KINDS = ("ast", "typed-ast", "tir", "plan", "llvm", "ptx", "cubin", "c")
SUBCOMMANDS = ("check", "lsp", "run", "cache", "fmt", "tune")


def _Parser(**kwargs) -> argparse.ArgumentParser:
    """argparse's parser, loaded on first use: `tilec check` with plain arguments never needs
    it (importing and building it was a tenth of what the check cost)."""
    import argparse

    class Parser(argparse.ArgumentParser):
        def error(self, message: str):  # usage errors exit 2 with a one-line hint
            self.print_usage(sys.stderr)
            sys.stderr.write(f"tilec: error: {message}\n")
            sys.exit(2)

    return Parser(**kwargs)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("-I", dest="include", action="append", default=[], metavar="DIR",
                   help="also look for imported modules in DIR")
    p.add_argument("-D", dest="defines", action="append", default=[], metavar="NAME=VALUE",
                   help="give the `const` kernel parameter NAME the value VALUE")


def _defines(items: list[str], parser: argparse.ArgumentParser) -> dict[str, str]:
    out = {}
    for item in items:
        name, eq, value = item.partition("=")
        if not eq or not name.isidentifier() or not value.strip():
            parser.error(f"-D expects NAME=VALUE, got `{item}`")
        if name in out:
            parser.error(f"-D {name} is given twice (`{name}={out[name]}` and `{item}`)")
        out[name] = value
    return out


def _includes(items: list[str], parser: argparse.ArgumentParser) -> list[str]:
    import os
    for d in items:
        if not os.path.isdir(d):
            why = "does not exist" if not os.path.exists(d) else "is not a folder"
            parser.error(f"-I {d}: the folder {why}")
    return items


def _knobs(path: str | None, parser: argparse.ArgumentParser) -> str | None:
    """The --ptxas-knobs file, which ptxas opens itself: it must be a readable regular file (a
    FIFO or a device would block ptxas; tilelang/infile.py), and is refused here otherwise."""
    if path is None:
        return None
    from .infile import read_regular
    try:
        read_regular(path, max_bytes=1 << 20)
    except FileNotFoundError:
        parser.error(f"--ptxas-knobs {path}: no such file")
    except OSError as e:       # NotRegularFile, FileTooLarge (a knobs file is a few lines)
        why = f"larger than 1 MiB ({e.size:,} bytes)" if hasattr(e, "size") else e.strerror or e
        parser.error(f"--ptxas-knobs {path}: cannot read it: {why}")
    return path


def _status(diags: list[Diagnostic]) -> int:
    """0, or 1 for errors in the input, or 2 when every error is in the options (-D, -I)."""
    from .driver import USAGE_CODES
    errors = [d for d in diags if d.severity is Severity.ERROR]
    if not errors:
        return 0
    return 2 if all(d.code in USAGE_CODES for d in errors) else 1


def _check_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="tilec check", description="Parse and type-check Tile source files.")
    p.add_argument("files", nargs="+", metavar="FILE")
    _common(p)
    return p


def _main_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="tilec",
        description="The Tile compiler. `tilec dir/FILE.tile` compiles every kernel of FILE "
                    "to FILE.cubin in the current folder (as nvcc -cubin); `tilec check "
                    "FILE...` only checks.",
        epilog="Subcommands: check, run, cache, lsp, fmt. "
               "Run `tilec SUBCOMMAND --help` for theirs.")
    p.add_argument("--version", action="version", version=f"tilec {__version__}")
    p.add_argument("file", metavar="FILE")
    p.add_argument("--emit", choices=EMIT_KINDS, default="cubin",
                   help="what to produce (default: cubin); text forms go to stdout without -o")
    p.add_argument("-o", dest="output", metavar="PATH",
                   help="write the output (or the --report) here (`-` for stdout); default "
                        "for cubin: FILE's name with .cubin, for c: FILE.c (and FILE.h), in "
                        "the current folder")
    p.add_argument("--arch", default=DEFAULT_TARGET, metavar="TARGET",
                   help="target GPU: sm_80 sm_86 sm_89 sm_90 sm_90a sm_100a sm_120 sm_120a "
                        f"(default {DEFAULT_TARGET})")
    p.add_argument("--kernel", action="append", metavar="NAME",
                   help="compile only this kernel (repeatable)")
    p.add_argument("-O", dest="opt", type=int, choices=range(4), default=3, metavar="LEVEL",
                   help="optimization level 0-3 (default 3)")
    p.add_argument("--precision", choices=("ieee", "fast", "approx"), default=None,
                   help="math precision of kernels without @launch(precision=): ieee, fast "
                        "(the default) or approx (docs/numerics.md)")
    p.add_argument("--lineinfo", action="store_true",
                   help="source lines in the PTX (`.file`/`.loc`), as nvcc -lineinfo")
    p.add_argument("--distributed", choices=DISTRIBUTED_LOWERINGS, default="peers",
                   help="how symmetric arrays reach their peers: peers (a table of every "
                        "rank's buffer, the default) or nvshmem (NVSHMEM device calls, "
                        "docs/distributed.md)")
    p.add_argument("--ptxas", metavar="PATH", help="assemble with this ptxas instead of nvJitLink")
    p.add_argument("--ptxas-knobs", metavar="FILE", help="forward --knobs-file=FILE to ptxas")
    p.add_argument("--report", action="store_true",
                   help="print (or -o write) registers, spills, shared memory, directives and "
                        "occupancy per kernel instead of the cubin")
    p.add_argument("--grid", metavar="X[,Y[,Z]]", help="--report: the launch grid (for waves)")
    p.add_argument("--block", metavar="X[,Y[,Z]]",
                   help="--report: the block shape (default: the kernel's)")
    p.add_argument("--sms", type=int, metavar="N", help="--report: SMs of the GPU (for waves)")
    _common(p)
    return p


def _report(results, stream=None) -> int:
    diags: list[Diagnostic] = []
    for r in results:
        diags += r.diagnostics
    emit(diags, stream or sys.stderr)
    return _status(diags)


class _CheckUsage:
    """Stands for the check's parser where the arguments were read without it: an error in
    them builds the parser to report it exactly as argparse's own errors are reported."""

    def error(self, message: str):
        _check_parser().error(message)


def _plain_check_args(argv: list[str]) -> tuple[list[str], list[str], list[str]] | None:
    """(files, -I folders, -D items) when `argv` is only files in one run and `-I X` / `-D X`
    pairs whose values do not start with `-` (which argparse reads the same way); otherwise
    None, and argparse reads them (other spellings, --help, mistakes)."""
    files: list[str] = []
    include: list[str] = []
    defines: list[str] = []
    i, n = 0, len(argv)
    ended = False               # a run of files has ended: argparse refuses a second run
    while i < n:
        a = argv[i]
        if a == "-I" or a == "-D":
            if i + 1 == n or argv[i + 1][:1] == "-":
                return None
            (include if a == "-I" else defines).append(argv[i + 1])
            i += 2
            ended = bool(files)
        elif a[:1] == "-" or ended:
            return None
        else:
            files.append(a)
            i += 1
    return (files, include, defines) if files else None


class _CompileUsage:
    """`_CheckUsage` for `tilec FILE`: a mistake found after a plain read of the arguments is
    reported by the real parser."""

    def error(self, message: str):
        _main_parser().error(message)


# `tilec FILE`'s options that `_plain_compile_args` reads: the attribute each sets, and whether
# it is repeatable (argparse's `append`), or None for a flag (`store_true`).
_PLAIN_COMPILE = {"--arch": ("arch", False), "-o": ("output", False), "--emit": ("emit", False),
                  "--kernel": ("kernel", True), "-O": ("opt", False),
                  "--precision": ("precision", False), "-I": ("include", True),
                  "-D": ("defines", True), "--lineinfo": ("lineinfo", None),
                  "--report": ("report", None), "--distributed": ("distributed", False)}


def _plain_compile_args(argv: list[str]):
    """What `_main_parser().parse_args(argv)` gives (as a namespace with the same attributes),
    when `argv` is one FILE and options of `_PLAIN_COMPILE` written as separate words whose
    values do not start with `-` and are among the choices argparse would accept; otherwise
    None, and argparse reads them. Building and running argparse was ~18 M instructions (5 ms)
    of every `tilec FILE`."""
    from types import SimpleNamespace
    ns = SimpleNamespace(file=None, emit="cubin", output=None, arch=DEFAULT_TARGET, kernel=None,
                         opt=3, precision=None, lineinfo=False, ptxas=None, ptxas_knobs=None,
                         report=False, grid=None, block=None, sms=None, include=[], defines=[],
                         distributed="peers")
    i, n = 0, len(argv)
    while i < n:
        a = argv[i]
        spec = _PLAIN_COMPILE.get(a)
        if spec is None:
            if a[:1] == "-" or ns.file is not None:
                return None
            ns.file = a
            i += 1
            continue
        name, repeated = spec
        if repeated is None:
            setattr(ns, name, True)
            i += 1
            continue
        if i + 1 == n or argv[i + 1][:1] == "-":
            return None
        value = argv[i + 1]
        if name == "opt":
            try:
                value = int(value)        # argparse's `type=int`, then its choices
            except ValueError:
                return None
            if value not in range(4):
                return None
        elif name == "emit" and value not in EMIT_KINDS or \
                name == "precision" and value not in ("ieee", "fast", "approx") or \
                name == "distributed" and value not in DISTRIBUTED_LOWERINGS:
            return None
        if repeated:
            setattr(ns, name, (getattr(ns, name) or []) + [value])
        else:
            setattr(ns, name, value)
        i += 2
    return ns if ns.file is not None else None


def cmd_check(argv: list[str]) -> int:
    plain = _plain_check_args(argv)
    if plain is not None:
        files, include, defines = plain
        p = _CheckUsage()
    else:
        p = _check_parser()
        args = p.parse_args(argv)
        files, include, defines = args.files, args.include, args.defines
    options = CompileOptions(include_dirs=_includes(include, p), defines=_defines(defines, p))
    results = [check_file(f, options) for f in files]
    if len(results) > 1:        # a -D is unknown only when no file takes it: say so once
        def name(d):
            return d.message.split(":", 1)[0]
        def unknown(r):
            return {name(d) for d in r.diagnostics if d.code == "E0272"}
        checked = [r for r in results if r.module is not None]
        common = set.intersection(*map(unknown, checked)) if checked else set()
        for r in results:
            r.diagnostics = [d for d in r.diagnostics if d.code != "E0272"
                             or (name(d) in common and r is checked[0])]
    return _report(results)


def cmd_fmt(argv: list[str]) -> int:
    from .fmt.cli import main as fmt_main
    return fmt_main(argv)


def cmd_lsp(argv: list[str]) -> int:
    """The language server (stdio by default); needs the `lsp` extra (pygls)."""
    try:
        from . import lsp
    except ImportError as e:
        sys.stderr.write(f"tilec lsp: the language server needs pygls: "
                         f"pip install 'tilec[lsp]' ({e})\n")
        return 2
    return lsp.main(argv) or 0


def cmd_run(argv: list[str]) -> int:
    """`tilec run FILE.tile --kernel K --grid ...`: launch on the CUDA or emulator back end."""
    from .runtime.cli_run import cmd_run as run
    return run(argv)


def cmd_cache(argv: list[str]) -> int:
    """`tilec cache list|clear|size`: the on-disk kernel cache."""
    from .runtime.cli_run import cmd_cache as cache
    return cache(argv)


def cmd_tune(argv: list[str]) -> int:
    """`tilec tune FILE.tile --kernel K --grid ... --space NAME=V,...`: autotuning."""
    from .tune.cli import main as tune
    return tune(argv)


def _target(arch: str, parser) -> None:
    from .targets import TARGETS
    if arch not in TARGETS:
        parser.error(f"--arch {arch}: not a supported target; use one of "
                     f"{', '.join(TARGETS)}")


def _dims(text: str | None, what: str, parser) -> tuple[int, ...] | None:
    if text is None:
        return None
    try:
        dims = tuple(int(x) for x in text.split(","))
    except ValueError:
        dims = ()
    if not 1 <= len(dims) <= 3 or any(d <= 0 for d in dims):
        parser.error(f"{what} expects 1 to 3 positive integers such as 128,1,1; got `{text}`")
    return dims


def cmd_compile(argv: list[str]) -> int:
    args = _plain_compile_args(argv)
    if args is not None:
        p = _CompileUsage()
    else:
        p = _main_parser()
        args = p.parse_args(argv)
    if args.sms is not None and args.sms <= 0:
        p.error(f"--sms expects a positive number of SMs, got {args.sms}")
    _target(args.arch, p)
    grid, block = _dims(args.grid, "--grid", p), _dims(args.block, "--block", p)
    if grid is not None and (grid[0] > 2**31 - 1 or any(g > 65535 for g in grid[1:])):
        p.error(f"--grid {args.grid}: a grid has at most 2147483647 blocks along x and 65535 "
                "along y and z")
    if block is not None:
        from math import prod
        from .codegen.occupancy import ARCH_LIMITS
        most = ARCH_LIMITS[args.arch].max_threads_per_block
        if prod(block) > most or block[2:3] > (64,):
            p.error(f"--block {args.block}: a block has at most {most} threads and at most "
                    f"64 along z; got {prod(block)} threads")
    options = CompileOptions(
        target=args.arch, defines=_defines(args.defines, p),
        include_dirs=_includes(args.include, p), opt_level=args.opt, ptxas=args.ptxas,
        knobs_file=_knobs(args.ptxas_knobs, p), precision=args.precision, lineinfo=args.lineinfo,
        distributed=args.distributed)
    if args.emit in ("ast", "typed-ast"):
        result = check_file(args.file, options)
        status = _report([result])
        if status:
            return status
        if args.emit == "ast":
            from .frontend.printer import print_module
            return _write(print_module(result.module), args.output)
        return _write(result.typed.format() if result.typed is not None else "", args.output)
    from .driver import compile_source, read_module_source
    if args.emit == "c" and not args.report:
        return _export_c(args, options, p)
    text = read_module_source(args.file)
    until = "cubin" if args.report else args.emit
    res = compile_source(text, args.file, options, kernels=args.kernel, until=until)
    emit(res.diagnostics)
    if not res.ok:
        return _status(res.diagnostics)
    if args.report:
        from .report import build_report
        return _write(build_report(res, args.arch, grid=grid, block=block, sms=args.sms),
                      args.output)
    out = {"tir": res.tir, "plan": res.plan, "llvm": res.llvm_ir, "ptx": res.ptx,
           "cubin": res.cubin}[args.emit]
    if args.emit == "cubin":
        import os
        path = args.output or os.path.splitext(os.path.basename(args.file))[0] + ".cubin"
        return _write(out, path)
    return _write(out, args.output)


def _export_c(args, options: CompileOptions, parser) -> int:
    """`--emit c`: NAME.c and NAME.h (docs/cli.md, "C export"); both are made before either
    is written."""
    import os
    from .aot.c_text import render
    from .aot.export import c_prefix, export_c
    from .driver import read_module_source
    out = args.output or os.path.splitext(os.path.basename(args.file))[0] + ".c"
    if out == "-" or not out.endswith(".c") or out == ".c" or out.endswith(os.sep + ".c"):
        parser.error(f"--emit c writes NAME.c and NAME.h: -o must name the .c file, got `{out}`")
    stem = os.path.basename(out)[:-2]
    prefix = c_prefix(stem)
    text = read_module_source(args.file)
    header, source = render(export_c(text, args.file, options, prefix, args.kernel),
                            stem + ".h")
    return _write(header, out[:-2] + ".h") or _write(source, out)


def _write(text: str | bytes, path: str | None) -> int:
    if path is None or path == "-":
        if isinstance(text, bytes):
            sys.stdout.flush()
            sys.stdout.buffer.write(text)
        else:
            sys.stdout.write(text)
        return 0
    from .outfile import OutputError, write_output
    try:
        write_output(path, text)
    except OutputError as e:
        sys.stderr.write(f"tilec: error: {e}\n")
        return 1
    return 0


_exit_collection_skipped = False


def _skip_exit_collection() -> None:
    """At exit the interpreter runs the cycle collector over every object it holds (twice:
    once while modules still exist, once as it tears them down), a twentieth of a whole
    `tilec check` for garbage no one will see. Freezing the objects at exit, after the command
    is done, takes them out of both collections. Registered by the one-shot commands only,
    and only ever acts as the interpreter exits, so a caller of `main` in a longer-lived
    process keeps its collector as it was."""
    global _exit_collection_skipped
    if not _exit_collection_skipped:
        import atexit
        atexit.register(gc.freeze)
        _exit_collection_skipped = True


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] == "check" or argv[0] not in SUBCOMMANDS:
        _skip_exit_collection()             # `tilec check`, `tilec FILE`
    try:
        if argv and argv[0] in SUBCOMMANDS:
            return {"check": cmd_check, "lsp": cmd_lsp, "run": cmd_run,
                    "cache": cmd_cache, "fmt": cmd_fmt,
                    "tune": cmd_tune}[argv[0]](argv[1:])
        return cmd_compile(argv)
    except TileError as e:
        emit(e.diagnostics)
        return _status(e.diagnostics) or 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    except RecursionError:
        sys.stderr.write("tilec: error: the input nests too deeply for the compiler\n")
        return 1
    except Exception as e:   # a bug: say so in one diagnostic, never with a traceback
        from .driver import internal_error
        emit(internal_error("tilec", e).diagnostics)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
