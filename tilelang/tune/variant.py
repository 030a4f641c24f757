"""One configuration of a tuned kernel as a kernel: its const values, and its math mode.

A configuration is a dict of const values, plus `precision` when it names a math mode
(docs/numerics.md) rather than a const parameter of that name; a mode other than the module's
compiles the module again in that mode. Both the tuner and its compile workers
(tune/parallel.py) turn configurations into kernels here, so a worker's kernel lands in the
disk cache under the key the tuner looks up.
"""

from __future__ import annotations

from typing import Any, Mapping

from tilelang.runtime.errors import value_error
from tilelang.runtime.module import Kernel, compile as compile_module

from .space import config_text

PRECISIONS = ("ieee", "fast", "approx")


def split_precision(kernel: Kernel, config: Mapping[str, Any]) -> tuple[dict, str | None]:
    """(const values, precision mode or None): `precision` is a math mode (docs/numerics.md),
    a compile option of the module, unless the kernel has a const parameter of that name."""
    consts = dict(config)
    if "precision" not in consts or any(p.name == "precision"
                                        for p in kernel.info.const_params):
        return consts, None
    mode = consts.pop("precision")
    if mode not in PRECISIONS:
        raise value_error(f"configuration {config_text(config)}: `precision` is {mode!r}; it "
                          "is \"ieee\", \"fast\" or \"approx\"", "the math modes of "
                          "docs/numerics.md")
    return consts, mode


def kernel_for(kernel: Kernel, config: Mapping[str, Any], modules: dict) -> Kernel:
    """The kernel of `config`; `modules` keeps the module compiled per other math mode."""
    consts, mode = split_precision(kernel, config)
    mod = kernel.module
    if mode is not None and mode != mod.options.precision:
        other = modules.get(mode)
        if other is None:
            o = mod.options
            other = modules[mode] = compile_module(
                mod.text if mod.path == "<string>" else mod.path, arch=o.target.name,
                defines=dict(o.defines) or None, include_dirs=o.include_dirs,
                opt_level=o.opt_level, backend=mod.backend, cache=mod.disk is not None,
                cache_dir=mod.disk.root if mod.disk is not None else None, precision=mode,
                lineinfo=o.lineinfo)        # the module's record with only the mode changed
        base = getattr(other, kernel.name)
        consts = {**kernel.consts, **consts}
        return base.specialize(**consts) if consts else base
    return kernel.specialize(**consts)
