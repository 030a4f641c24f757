"""NVSHMEM's device library for the NVSHMEM lowering (docs/distributed.md, "The NVSHMEM
lowering"): found, trimmed to what Tile calls, and linked into the kernel's LLVM module
before the PTX is emitted.

Why before the PTX: nvJitLink links PTX, cubins, fatbins, host libraries and LTO-IR, but not
plain LLVM bitcode (an `NVJITLINK_INPUT_LTOIR` input that is NVSHMEM's `.bc` is refused with
ERROR_INCORRECT_INPUT_TYPE, measured with nvJitLink 13.5), and `libnvshmem_device.a` holds the
transport code only: the device API (`nvshmem_my_pe`, `nvshmem_ptr`, the atomics and waits) is
in the bitcode alone. So the bitcode's definitions are linked into our module with llvmlite,
the PTX then has no external function left, and nvJitLink links it as it links every kernel.

Where it is found: `$NVSHMEM_HOME/lib`, then the `nvidia-nvshmem-cu13` (or -cu12) wheel's
`nvidia/nvshmem/lib` (`pip install tilelang[nvshmem]`). NVSHMEM 3.5 and later ship one file per
architecture (`libnvshmem_device_sm_90.bc`); the newest one not above the target is used
(older releases ship one `libnvshmem_device.bc`).

Cost: reading the 54 MB bitcode takes ~10 s and 1.4 GB; it is done once per process and
trimmed (every function but the entry points Tile calls made internal, then dead ones
dropped: ~170 KB), so later compiles link the trimmed module only. The trimmed functions lose
their `target-cpu`/`target-features` attributes: they are compiled for the kernel's target.
"""

from __future__ import annotations

import os
import re
import threading
from functools import lru_cache

from tilelang.diagnostics import TileUsageError, register_codes

register_codes({
    "E0764": "NVSHMEM's device bitcode was not found",
    "E0765": "NVSHMEM's device bitcode could not be read",
})

_ATTRS = re.compile(r'\s*"target-(cpu|features)"="[^"]*"')
_lock = threading.Lock()


def _folders() -> list[str]:
    out = []
    home = os.environ.get("NVSHMEM_HOME")
    if home:
        out.append(os.path.join(home, "lib"))
    try:
        import importlib.util
        spec = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError):
        spec = None
    for root in (spec.submodule_search_locations or []) if spec else []:
        out.append(os.path.join(root, "nvshmem", "lib"))
    return out


def _sm(target_name: str) -> int:
    return int(re.match(r"sm_(\d+)", target_name).group(1))


def find(target_name: str) -> str:
    """The bitcode file for `target_name` ("sm_90a"), or TileUsageError E0764."""
    want = _sm(target_name)
    looked = []
    for folder in _folders():
        looked.append(folder)
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        per_arch = {}
        for n in names:
            m = re.fullmatch(r"libnvshmem_device_sm_(\d+)\.bc", n)
            if m:
                per_arch[int(m.group(1))] = n
        fit = [a for a in per_arch if a <= want]
        if fit:
            return os.path.join(folder, per_arch[max(fit)])
        if "libnvshmem_device.bc" in names:
            return os.path.join(folder, "libnvshmem_device.bc")
        if per_arch:
            raise TileUsageError.at(
                "E0764", f"NVSHMEM's device bitcode in {folder} has no file for {target_name} "
                f"or older (it has sm_{', sm_'.join(map(str, sorted(per_arch)))})", None,
                help="compile for one of those targets")
    raise TileUsageError.at(
        "E0764", "the NVSHMEM lowering needs NVSHMEM's device bitcode "
        f"(libnvshmem_device*.bc), found in none of: {', '.join(looked) or 'no folder'}", None,
        help="pip install 'tilelang[nvshmem]' (the nvidia-nvshmem-cu13 wheel), set "
             "NVSHMEM_HOME, or compile with --distributed peers")


def library(target_name: str, keep) -> str:
    """The trimmed device library for `target_name` as LLVM IR text (once per file and
    process): the functions named in `keep` (emit/nvshmem.py's table, which generate.py hands
    in: this layer imports nothing above it) keep external linkage, the globals NVSHMEM's host
    library fills (`nvshmemi_device_state_d`, ...) stay external."""
    return _trimmed(find(target_name), frozenset(keep))


@lru_cache(maxsize=None)
def _trimmed(path: str, keep: frozenset) -> str:
    with _lock:
        import llvmlite.binding as llvm
        try:
            with open(path, "rb") as f:
                data = f.read()
            ctx = llvm.create_context()
            mod = llvm.parse_bitcode(data, context=ctx)
        except (OSError, RuntimeError) as e:
            raise TileUsageError.at("E0765", f"cannot read NVSHMEM's device bitcode {path}: "
                                    f"{e}", None, help="reinstall nvidia-nvshmem-cu13") from None
        del data
        for fn in mod.functions:
            if not fn.is_declaration and fn.name not in keep:
                fn.linkage = llvm.Linkage.internal
        pm = llvm.create_new_module_pass_manager()
        pm.add_global_dead_code_eliminate_pass()
        pm.add_strip_dead_prototype_pass()
        tm = llvm.Target.from_triple(mod.triple).create_target_machine(opt=0)
        pm.run(mod, llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(0)))
        return _ATTRS.sub("", str(mod))
