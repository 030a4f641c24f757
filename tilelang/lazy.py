"""A module imported on first attribute access.

`np = lazy_module("numpy")` lets a checker or a printer name NumPy at module level while a
process that never folds a constant (`tilec check` of most files) never pays NumPy's import.
"""

from __future__ import annotations

import importlib


class LazyModule:
    def __init__(self, name: str):
        self._lazy_name = name

    def __getattr__(self, attr: str):
        # Only called for names not yet cached: each is looked up once, then kept here.
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)    # copy/pickle probes must not trigger the import
        value = getattr(importlib.import_module(self._lazy_name), attr)
        self.__dict__[attr] = value
        return value

    def __repr__(self) -> str:
        return f"<lazy module {self._lazy_name!r}>"


def lazy_module(name: str) -> LazyModule:
    return LazyModule(name)


def deferred(module: LazyModule, attr: str):
    """A function calling `module.attr`: a table can name it without importing the module."""
    def call(*args, **kwargs):
        return getattr(module, attr)(*args, **kwargs)
    call.__name__ = call.__qualname__ = attr
    return call
