"""The oldest architecture each tensor-core, async-copy and cluster instruction needs.

A GPU's ptxas refuses an instruction newer than the module's `.target`; the emulator would
run it anyway, so a lowering that emits, say, an e4m3 `mma` into an sm_80 module would pass
every emulator test. Decoding checks the instruction against this table instead. Only the
families below are checked (the rest of the PTX the compiler emits is sm_80 or older).
"""

from __future__ import annotations

import re


def _mma(parts) -> int:
    types = set(parts)
    if types & {"e4m3", "e5m2"}:
        return 89
    if "m16n8k16" in types and "f16" in types and not types & {"s8", "u8", "bf16"}:
        return 80
    if "m16n8k8" in types and "f16" in types and "bf16" not in types:
        return 75
    return 80                                  # bf16, tf32, m16n8k32 integers, m16n8k16 s8


def required_sm(parts: list) -> tuple[int, bool]:
    """(minimum sm, needs the arch-specific `a` target) of an instruction, or (0, False)."""
    root = parts[0]
    if root == "cp" and len(parts) > 1 and parts[1] == "async":
        return (90, False) if "bulk" in parts else (80, False)
    if root == "ldmatrix":
        return 75, False
    if root == "stmatrix":
        return 90, False
    if "f32x2" in parts:
        return 100, False                      # packed f32 add/sub/mul/fma (sm_100+)
    if root == "mma" and "block_scale" in parts:
        return 120, True                       # sm_120a, sm_121a
    if root == "mma":
        return _mma(parts), False
    if root == "wgmma":
        return 90, True
    if root == "setmaxnreg":
        return 90, True
    if root == "cvt" and any(p in ("e2m1x2", "e2m3x2", "e3m2x2", "ue8m0x2") for p in parts):
        return 100, True                       # sm_100a, sm_101a/110a, sm_120a
    if root == "cvt" and any(p in ("e4m3x2", "e5m2x2") for p in parts):
        return 89, False
    if root == "cvt" and "tf32" in parts and ("rn" in parts or "rz" in parts):
        return 90, False
    if root == "mbarrier" and ("try_wait" in parts or "expect_tx" in parts):
        return 90, False
    if root in ("elect", "mapa", "getctarank", "griddepcontrol", "multimem") or \
            (root == "barrier" and "cluster" in parts):
        return 90, False
    if root == "fence" and (("proxy" in parts and any(p.startswith(("async", "tensormap"))
                                                      for p in parts))
                            or "mbarrier_init" in parts):
        return 90, False
    if root == "prefetch" and "tensormap" in parts:
        return 90, False
    if root in ("ld", "st", "atom", "red") and "shared::cluster" in parts:
        return 90, False
    if root == "redux":
        return 80, False
    if root in ("atom", "red") and set(parts) & {"bf16", "bf16x2"}:
        return 90, False                       # bf16 atomics (f16 ones are sm_70 / sm_60)
    if root == "tensormap":
        return 90, True                        # tensormap.replace
    if root == "tcgen05":
        return 100, True
    return 0, False


_TARGET = re.compile(r"sm_(\d+)([a-z]?)$")


def check(target: tuple, opcode: str) -> str | None:
    """Why `opcode` cannot appear in a module with this `.target`, or None."""
    arch = next((t for t in target if _TARGET.match(t)), None)
    if arch is None:
        return None
    m = _TARGET.match(arch)
    have, suffix = int(m.group(1)), m.group(2)
    need, arch_specific = required_sm(opcode.split("."))
    if opcode.startswith("tcgen05.") and have >= 120:
        return f"{opcode} needs sm_100a, sm_101a/sm_110a or sm_103a (sm_12x has no tcgen05); " \
               f"the module's .target is {arch}"
    if have < need:
        return f"{opcode} needs sm_{need} or newer; the module's .target is {arch}"
    if arch_specific and not suffix:
        return f"{opcode} needs the arch-specific target sm_{need}a; the module's .target " \
               f"is {arch}"
    return None
