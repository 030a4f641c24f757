"""`tilec`: the command-line compiler.

    tilec check FILE...            parse and check, report diagnostics
    tilec lsp                      the language server (stdio)
    tilec --emit ast FILE          print the parsed module as canonical source
    tilec FILE.tile                compile (code generation is a later stage)

Exit status: 0 success, 1 user errors (diagnostics on stderr), 2 usage errors.
"""

from __future__ import annotations

import argparse
import sys

from . import __version__
from .diagnostics import Diagnostic, Severity, TileError, emit
from .driver import Options, check_file

EMIT_KINDS = ("ast", "typed-ast", "tir", "llvm", "ptx", "cubin")
SUBCOMMANDS = ("check", "lsp", "run", "cache")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # usage errors exit 2 with a one-line hint
        self.print_usage(sys.stderr)
        sys.stderr.write(f"tilec: error: {message}\n")
        sys.exit(2)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("-I", dest="include", action="append", default=[], metavar="DIR",
                   help="also look for imported modules in DIR")
    p.add_argument("-D", dest="defines", action="append", default=[], metavar="NAME=VALUE",
                   help="give the `const` kernel parameter NAME the value VALUE")


def _defines(items: list[str], parser: argparse.ArgumentParser) -> dict[str, str]:
    out = {}
    for item in items:
        name, eq, value = item.partition("=")
        if not eq or not name.isidentifier() or not value:
            parser.error(f"-D expects NAME=VALUE, got `{item}`")
        out[name] = value
    return out


def _check_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="tilec check", description="Parse and type-check Tile source files.")
    p.add_argument("files", nargs="+", metavar="FILE")
    _common(p)
    return p


def _main_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="tilec",
        description="The Tile compiler. `tilec check FILE...` checks files; "
                    "`tilec FILE.tile` compiles one.",
        epilog="Subcommands: check, lsp. Run `tilec check --help` for its options.")
    p.add_argument("--version", action="version", version=f"tilec {__version__}")
    p.add_argument("file", metavar="FILE")
    p.add_argument("--emit", choices=EMIT_KINDS, default="cubin",
                   help="what to produce (default: cubin)")
    p.add_argument("-o", dest="output", metavar="PATH", help="write the output here")
    p.add_argument("--arch", default="sm_90a", help="target GPU architecture (default sm_90a)")
    p.add_argument("--kernel", help="compile only this kernel")
    p.add_argument("-O", dest="opt", type=int, choices=range(4), default=3, metavar="LEVEL",
                   help="optimization level 0-3 (default 3)")
    _common(p)
    return p


def _report(results, stream=None) -> int:
    diags: list[Diagnostic] = []
    for r in results:
        diags += r.diagnostics
    emit(diags, stream or sys.stderr)
    return 1 if any(d.severity is Severity.ERROR for d in diags) else 0


def cmd_check(argv: list[str]) -> int:
    p = _check_parser()
    args = p.parse_args(argv)
    options = Options(args.include, _defines(args.defines, p))
    return _report([check_file(f, options) for f in args.files])


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


def cmd_compile(argv: list[str]) -> int:
    p = _main_parser()
    args = p.parse_args(argv)
    options = Options(args.include, _defines(args.defines, p))
    result = check_file(args.file, options)
    status = _report([result])
    if status:
        return status
    if args.emit == "ast":
        from .frontend.printer import print_module
        _write(print_module(result.module), args.output)
        return 0
    if args.emit == "typed-ast" and result.typed is not None:
        _write(result.typed.format(), args.output)
        return 0
    sys.stderr.write(f"tilec: `--emit {args.emit}` is not available yet: this build stops after "
                     "checking; use `tilec check` or `--emit ast`\n")
    return 2


def _write(text: str, path: str | None) -> None:
    if path is None:
        sys.stdout.write(text)
        return
    import os
    import tempfile
    # Write to a temporary file and rename, so a failure never leaves half a file.
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".tilec-")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv and argv[0] in SUBCOMMANDS:
            return {"check": cmd_check, "lsp": cmd_lsp, "run": cmd_run,
                    "cache": cmd_cache}[argv[0]](argv[1:])
        return cmd_compile(argv)
    except TileError as e:
        emit(e.diagnostics)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
