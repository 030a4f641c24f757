"""Reading a file a user named, without ever blocking on it.

`open()` on a FIFO waits for a writer, forever if none comes, and a device may never end; a
path checked with `stat` first can be replaced between the check and the `open`. So a file is
opened with O_NONBLOCK (which a FIFO honours by opening at once and a regular file ignores),
and what was opened is judged with `fstat`: anything but a regular file (a FIFO, a device, a
socket, a directory) is refused before a byte is read. Every reader of sources, modules,
arrays and knobs files goes through `read_regular` (docs/cli.md, "Input files").
"""

from __future__ import annotations

import errno
import os
import stat

_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


class NotRegularFile(OSError):
    """The path names something other than a regular file; `strerror` says what it is."""


class FileTooLarge(OSError):
    """The file is larger than the reader's limit; `size` is its size in bytes."""

    def __init__(self, size: int):
        super().__init__(f"{size} bytes")
        self.size = size


def kind_of(mode: int) -> str:
    """What a non-regular file is, in words."""
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a special file"


def read_regular(path: str, max_bytes: int | None = None) -> bytes:
    """The bytes of the regular file `path`. Raises NotRegularFile for anything else,
    FileTooLarge above `max_bytes`, and OSError (FileNotFoundError, PermissionError, ...) when
    it cannot be opened; never blocks."""
    try:
        fd = os.open(path, _FLAGS)
    except OSError as e:            # a socket cannot be opened at all (ENXIO): say what it is
        if e.errno == errno.ENXIO:
            mode = os.stat(path).st_mode
            if not stat.S_ISREG(mode):
                raise NotRegularFile(0, f"it is {kind_of(mode)}, not a regular file") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularFile(0, f"it is {kind_of(st.st_mode)}, not a regular file")
        if max_bytes is not None and st.st_size > max_bytes:
            raise FileTooLarge(st.st_size)
        data = bytearray()
        while True:                 # the file may grow while it is read: stop at the limit
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return bytes(data)
            data += chunk
            if max_bytes is not None and len(data) > max_bytes:
                raise FileTooLarge(len(data))
    finally:
        os.close(fd)
