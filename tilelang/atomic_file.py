"""Replacing a file all at once: readers see the old contents or the new, never half.

The one way Tile writes a file that someone may read meanwhile or that a crash must not leave
half-written (`tilec -o`, `tilec fmt`, the kernel cache's records and key, tuning results):

- what is at the path must be nothing or a regular file (and, with `owner_only`, one owned by
  this user); a symbolic link, a FIFO, a device, a socket or a folder is never written through
  nor replaced: `NotAFile` says what it is, and the caller decides (refuse, or remove its own
  damaged entry and try again);
- the data goes to a new temporary file in the same folder (so the rename stays on one file
  system), created with O_EXCL and without following links, with the mode asked for: `mode`
  less the umask like any new file (`tilec -o`, as cc), or exactly `mode` (`exact_mode`: the
  cache's 0600, the permission bits of the file `tilec fmt` rewrites);
- it is flushed to disk first when `fsync` (what must survive a crash: the cache's key, a
  tuning result, a formatted source);
- then renamed over the path (`replace`), or linked to it only if nothing is there yet
  (`replace=False`: the first writer wins, as for a secret that others may already use).
A failure leaves the path as it was and no temporary file behind.
"""

from __future__ import annotations

import errno
import os
import stat

_O_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) \
    | getattr(os, "O_CLOEXEC", 0)


class NotAFile(OSError):
    """The path holds something other than a regular file of ours; `what` says what
    ("is a symbolic link", "is a folder", ...)."""

    def __init__(self, path: str, what: str):
        super().__init__(errno.EEXIST, f"`{path}` {what}", path)
        self.what = what


def what_is(st: os.stat_result) -> str:
    """A non-regular file's kind, as `is a ...`."""
    m = st.st_mode
    for test, text in ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISDIR, "a folder"),
                       (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(m):
            return "is " + text
    return "is not a regular file"


def check_target(path: str, owner_only: bool = False) -> os.stat_result | None:
    """The lstat of `path` when it is a regular file (of ours, with `owner_only`), None when
    nothing is there; NotAFile otherwise."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(st.st_mode):
        raise NotAFile(path, what_is(st))
    if owner_only and hasattr(os, "geteuid") and st.st_uid != os.geteuid():
        raise NotAFile(path, f"is owned by uid {st.st_uid}, not by you")
    return st


def replace_file(path: str, data: bytes, *, mode: int = 0o666, exact_mode: bool = False,
                 fsync: bool = False, owner_only: bool = False, replace: bool = True) -> bool:
    """Write `data` as the file `path` (see the module docstring). True when written; False
    only with `replace=False` when something is at `path` already. Raises NotAFile, or the
    OSError of a failed write."""
    if replace:
        check_target(path, owner_only)
    folder = os.path.dirname(os.path.abspath(path))
    base = os.path.basename(path)
    fd, tmp = _new_temporary(folder, base, mode)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            if exact_mode:
                os.fchmod(fd, mode)
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        if replace:
            os.replace(tmp, path)        # a link or file that appeared meanwhile is replaced,
            tmp = None                   # never written through
            return True
        try:
            os.link(tmp, path)
        except FileExistsError:          # another writer was first: theirs stays
            return False
        return True
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def _new_temporary(folder: str, base: str, mode: int) -> tuple[int, str]:
    for _ in range(100):
        # os.urandom is what `secrets` draws from; importing `secrets` costs ~5 ms (hashlib)
        tmp = os.path.join(folder, f".{base}.{os.urandom(4).hex()}.tmp")
        try:
            return os.open(tmp, _O_NEW, mode), tmp
        except FileExistsError:
            continue
    raise OSError(errno.EEXIST, f"no free temporary name in `{folder}`")
