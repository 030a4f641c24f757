"""Checks of `tilelang.compile`'s arguments (docs/python-api.md): each wrong one is a clear
E0923/E0925 naming it, before anything is read or compiled."""

from __future__ import annotations

import os
from typing import Mapping

import numpy as np

from tilelang.infile import read_regular

from .errors import usage_error, value_error


def _read_input(path_or_source) -> tuple[str, str]:
    """(text, path): a path-like or a one-line string naming a file, else source text."""
    if isinstance(path_or_source, os.PathLike):
        path = os.fspath(path_or_source)
    elif isinstance(path_or_source, str):
        s = path_or_source
        if "\n" in s or "{" in s or not s.strip():
            return s, "<string>"
        path = s
    else:
        raise usage_error("E0923", f"tilelang.compile takes a path or source text, got "
                          f"{type(path_or_source).__name__}",
                          "pass a .tile file name or the source as a string")
    try:        # never blocks: a FIFO or a device is refused (tilelang/infile.py)
        return read_regular(path).decode("utf-8"), path
    except (OSError, UnicodeDecodeError) as e:
        raise usage_error("E0923", f"cannot read `{path}`: "
                          f"{getattr(e, 'strerror', None) or e}",
                          "pass an existing .tile file, or the source text itself (a string "
                          "with a newline is taken as source)") from None


def _define_text(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _check_arch(arch):
    if arch is None:
        return None
    if not isinstance(arch, str):
        raise value_error(f"`arch` is {type(arch).__name__}, not a target name",
                          "e.g. arch='sm_90a', or leave it out for the device's own")
    from tilelang.targets import get_target
    get_target(arch)             # E0750 with the supported targets
    return arch


def _check_defines(defines) -> tuple[tuple[str, str], ...]:
    if defines is None:
        return ()
    if not isinstance(defines, Mapping):
        raise value_error(f"`defines` is {type(defines).__name__}; it maps const names to "
                          "values", "e.g. defines={'TILE': 256}")
    out = []
    for k, v in defines.items():
        if not isinstance(k, str) or not k.isidentifier():
            raise value_error(f"`defines` key {k!r} is not a const name",
                              "keys are the names of `const` declarations or parameters")
        if isinstance(v, np.generic) and v.shape == ():
            v = v.item()
        if not isinstance(v, (bool, int, float, str)):
            raise value_error(f"`defines[{k!r}]` is {type(v).__name__}; a const value is a "
                              "number, a bool or source text", f"e.g. defines={{'{k}': 256}}")
        out.append((k, _define_text(v)))
    return tuple(sorted(out))


def _check_include_dirs(dirs) -> tuple[str, ...]:
    if isinstance(dirs, (str, os.PathLike)):
        dirs = (dirs,)                 # one folder, not its characters
    try:
        dirs = tuple(dirs)
    except TypeError:
        raise value_error(f"`include_dirs` is {type(dirs).__name__}, not a list of folders",
                          "e.g. include_dirs=['lib']") from None
    out = []
    for d in dirs:
        if not isinstance(d, (str, os.PathLike)):
            raise value_error(f"`include_dirs` holds {type(d).__name__} {d!r}, not a folder",
                              "e.g. include_dirs=['lib']")
        out.append(os.path.abspath(os.fspath(d)))      # the driver checks they exist (E0271)
    return tuple(out)


def _check_opt_level(level) -> int:
    if isinstance(level, bool) or not isinstance(level, (int, np.integer)) or \
            not 0 <= int(level) <= 3:
        raise value_error(f"`opt_level` is {level!r}; it is 0, 1, 2 or 3",
                          "as `tilec -O0` .. `-O3`")
    return int(level)


def _check_precision(mode) -> str | None:
    if mode is None or (isinstance(mode, str) and mode in ("ieee", "fast", "approx")):
        return mode
    raise value_error(f"`precision` is {mode!r}; it is \"ieee\", \"fast\" or \"approx\"",
                      "as `tilec --precision=...` (docs/numerics.md)")


def _check_lineinfo(flag, backend) -> bool:
    if flag is None:
        return getattr(backend, "name", None) == "emulator"
    if isinstance(flag, bool):
        return flag
    raise value_error(f"`lineinfo` is {flag!r}; it is True or False",
                      "as `tilec --lineinfo` (docs/python-api.md)")

