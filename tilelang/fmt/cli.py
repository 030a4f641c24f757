"""`tilec fmt [--check] [--diff] FILE|FOLDER|- ...` (docs/cli.md).

Files are rewritten in place only when their layout changes, through a new file in the same
folder renamed over the old one (with the old one's permission bits), so an interrupted run
leaves either the old text or the new (tilelang/atomic_file.py). A symbolic link, anything but
a regular file, or another user's file is never written. Exit status: 0 done (or, with --check,
nothing to change), 1 a file that does not parse, cannot be read or written, or (--check)
would change; 2 usage errors.
"""

from __future__ import annotations

import argparse
import difflib
import os
import stat
import sys

from tilelang.atomic_file import NotAFile, replace_file

from ..infile import read_regular
from . import WIDTH, FormatError, format_source
from .markdown import format_markdown


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):
        self.print_usage(sys.stderr)
        sys.stderr.write(f"tilec fmt: error: {message}\n")
        sys.exit(2)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="tilec fmt", description="Rewrite Tile files in the canonical layout.")
    p.add_argument("paths", nargs="+", metavar="FILE",
                   help="a .tile file, a .md file (its ```tile blocks that parse), a folder "
                        "(its .tile files, recursively), or - for stdin")
    p.add_argument("--check", action="store_true",
                   help="write nothing; exit 1 if a file is not formatted")
    p.add_argument("--diff", action="store_true",
                   help="write nothing; print what would change as a unified diff")
    return p


def _files(paths: list[str]) -> list[str]:
    out = []
    for p in paths:
        if p != "-" and os.path.isdir(p) and not os.path.islink(p):
            for root, dirs, names in os.walk(p):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                out += [os.path.join(root, n) for n in sorted(names) if n.endswith(".tile")
                        and not os.path.islink(os.path.join(root, n))]  # named ones: refused
        else:
            out.append(p)
    return out


def _read(path: str) -> str:
    if path == "-":
        data = sys.stdin.buffer.read()
    else:
        data = read_regular(path)    # never blocks: a FIFO or a device is refused
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise OSError(f"{path}: not UTF-8 text (byte {e.start})") from None


def rewrite(path: str, text: str) -> None:
    """Replace the regular file `path` by `text` atomically, keeping its permission bits;
    refuses links and other files."""
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        raise OSError(f"{path}: a symbolic link is not rewritten (format its target)")
    if not stat.S_ISREG(st.st_mode):
        raise OSError(f"{path}: not a regular file")
    try:
        replace_file(path, text.encode("utf-8"), mode=stat.S_IMODE(st.st_mode),
                     exact_mode=True, fsync=True, owner_only=True)
    except NotAFile as e:            # it changed since the lstat above
        raise OSError(f"{path}: {e.what}") from None


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    from tilelang.diagnostics import TileError, emit

    status = 0
    if args.paths.count("-") > 1:
        _parser().error("`-` (stdin) may be given once")
    for path in _files(args.paths):
        name = "<stdin>" if path == "-" else path
        try:
            text = _read(path)
            if path.endswith(".md"):
                out = format_markdown(text, name, WIDTH)
            else:
                out = format_source(text, name, WIDTH)
        except TileError as e:
            emit(e.diagnostics)
            status = 1
            continue
        except FormatError as e:
            sys.stderr.write(f"tilec fmt: {e}\n")
            status = 1
            continue
        except RecursionError:
            sys.stderr.write(f"tilec fmt: {name}: the input nests too deeply\n")
            status = 1
            continue
        except OSError as e:
            sys.stderr.write(f"tilec fmt: {e.strerror and f'{name}: {e.strerror}' or e}\n")
            status = 1
            continue
        changed = out != text
        if args.diff and changed:
            sys.stdout.writelines(difflib.unified_diff(
                text.splitlines(keepends=True), out.splitlines(keepends=True),
                f"{name} (original)", f"{name} (formatted)"))
        if args.check:
            if changed:
                sys.stderr.write(f"tilec fmt: {name} is not formatted\n")
                status = 1
        elif args.diff:
            pass
        elif path == "-":
            sys.stdout.write(out)
        elif changed:
            try:
                rewrite(path, out)
            except OSError as e:
                sys.stderr.write(f"tilec fmt: {e.strerror and f'{name}: {e.strerror}' or e}\n")
                status = 1
    return status
