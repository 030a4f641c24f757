"""Reading a source file, with a clear diagnostic for every way that can go wrong."""

from __future__ import annotations

import os

from ..diagnostics import TileUsageError, register_codes, remember_source
from ..infile import FileTooLarge, NotRegularFile, read_regular

CODES = {
    "E0001": "the source file cannot be read",
    "E0002": "the source file is not valid UTF-8",
    "E0003": "the source file is too large",
    "W0001": "the source file is empty",
}
register_codes(CODES)

MAX_SOURCE_BYTES = 8 * 1024 * 1024


def read_source(path: str) -> str:
    """The text of `path`; raises TileUsageError (code E0001–E0003) with a helpful message."""
    if os.path.isdir(path):
        raise TileUsageError.at("E0001", f"`{path}` is a directory, not a .tile file", None,
                                help=f"to check every file in it, run `tilec check {path.rstrip('/')}/*.tile`")
    try:
        data = read_regular(path, MAX_SOURCE_BYTES)
    except FileNotFoundError:
        raise TileUsageError.at("E0001", f"cannot read `{path}`: no such file", None,
                                help="check the path; it is taken relative to the current folder")
    except FileTooLarge as e:
        raise TileUsageError.at(
            "E0003", f"`{path}` is {e.size / 1e6:.1f} MB; a Tile source file may be at most "
            f"{MAX_SOURCE_BYTES // (1024 * 1024)} MiB", None,
            help="split it into modules and `import` them")
    except NotRegularFile as e:     # a FIFO or a device would block or never end: not read
        raise TileUsageError.at("E0001", f"cannot read `{path}`: {e.strerror}", None,
                                help="a Tile source is a regular .tile file")
    except OSError as e:
        raise TileUsageError.at("E0001", f"cannot read `{path}`: {e.strerror or e}", None)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        col = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        raise TileUsageError.at(
            "E0002", f"`{path}` is not valid UTF-8: byte 0x{data[e.start]:02x} at line {line}, "
            f"column {col}", None,
            help="save the file as UTF-8")
    if text.startswith("\ufeff"):  # a byte-order mark is harmless; drop it
        text = text[1:]
    remember_source(path, text)
    return text
