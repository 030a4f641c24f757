"""Writing a product to a path the user named (`tilec -o PATH`, `tilec run --save PATH`).

What is at PATH decides what happens (docs/cli.md):
- nothing, or a regular file of this user: the data goes to a new file in the same folder,
  created with mode 0666 less the umask (like cc), which is then renamed over PATH
  (tilelang/atomic_file.py); a failure leaves PATH as it was and no temporary file behind;
- another user's regular file: refused (renaming over it would silently make it ours);
- a FIFO or a character device (`/dev/null`, a terminal): it is opened and written into, never
  replaced; so is one reached through symbolic links;
- `/dev/stdout`, `/dev/stderr`, `/dev/fd/N`: that descriptor of this process, as it is open
  (a terminal, a pipe, or a file the shell opened);
- a symbolic link to anything else: refused, since renaming over it would silently turn it into
  a regular file and writing through it would write wherever it points;
- a folder, a socket, a block device: refused.
The data is complete before PATH is touched, so nothing is ever written half-way.
"""

from __future__ import annotations

import os
import stat

from .atomic_file import NotAFile, replace_file


class OutputError(Exception):
    """PATH cannot take the output; the message says why (for `tilec: error: ...`)."""


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "is a folder"
    if stat.S_ISSOCK(mode):
        return "is a socket"
    if stat.S_ISBLK(mode):
        return "is a block device"
    return "is not a regular file"


def write_output(path: str, data: bytes | str) -> None:
    """Write `data` to `path` as the module docstring says; raises OutputError."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    if not path or path.endswith(os.sep):
        raise OutputError(f"cannot write `{path}`: not a file name")
    fd = _std_fd(path)
    if fd is not None:
        return _into_fd(fd, path, data)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise OutputError(f"cannot write `{path}`: {e.strerror}") from None
    if st is not None and stat.S_ISLNK(st.st_mode):
        try:
            target = os.stat(path)
        except OSError:
            target = None
        if target is not None and (stat.S_ISFIFO(target.st_mode)
                                   or stat.S_ISCHR(target.st_mode)):
            return _into(path, data)
        raise OutputError(f"`{path}` is a symbolic link; refusing to replace it (name its "
                          f"target, `{os.path.realpath(path)}`, to write there)")
    if st is None or stat.S_ISREG(st.st_mode):
        return _replace(path, data)
    if stat.S_ISFIFO(st.st_mode) or stat.S_ISCHR(st.st_mode):
        return _into(path, data)
    raise OutputError(f"cannot write `{path}`: it {_kind(st.st_mode)}")


def _std_fd(path: str) -> int | None:
    """The descriptor `/dev/stdout`, `/dev/stderr`, `/dev/fd/N` or `/proc/self/fd/N` names:
    written as it is open (whatever it is: a terminal, a pipe, a file the shell opened)."""
    p = os.path.normpath(path)
    named = {"/dev/stdout": 1, "/dev/stderr": 2}
    if p in named:
        return named[p]
    for prefix in ("/dev/fd/", "/proc/self/fd/"):
        if p.startswith(prefix) and p[len(prefix):].isdigit():
            return int(p[len(prefix):])
    return None


def _into_fd(fd: int, path: str, data: bytes) -> None:
    import sys
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    except OSError as e:
        raise OutputError(f"cannot write `{path}`: {e.strerror}") from None


def _into(path: str, data: bytes) -> None:
    """Write into an existing FIFO or character device, without creating or truncating."""
    try:
        fd = os.open(path, os.O_WRONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise OutputError(f"cannot write `{path}`: {e.strerror}") from None
    try:
        st = os.fstat(fd)
        if not (stat.S_ISFIFO(st.st_mode) or stat.S_ISCHR(st.st_mode)):
            raise OutputError(f"cannot write `{path}`: it changed while being opened")
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    except OSError as e:
        raise OutputError(f"cannot write `{path}`: {e.strerror}") from None
    finally:
        os.close(fd)


def _replace(path: str, data: bytes) -> None:
    try:   # 0666 less the umask, as for any new file
        replace_file(path, data, mode=0o666, owner_only=True)
    except NotAFile as e:            # something else appeared at PATH since it was examined
        raise OutputError(f"cannot write `{path}`: it {e.what}") from None
    except OSError as e:
        raise OutputError(f"cannot write `{path}`: {e.strerror}") from None
