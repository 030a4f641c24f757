"""Address operands of memory instructions: the state space an opcode names and a decoded
`[base+offset]` operand (a symbol's constant address, a parameter slot, or a per-thread
getter), shared by every instruction family that touches memory."""

from __future__ import annotations

import numpy as np

from .access import locate

SPACE_NAMES = {"global": "global", "shared": "shared", "shared::cta": "shared",
                "shared::cluster": "shared_cluster", "local": "local", "param": "param",
                "param::entry": "param", "param::func": "param", "const": "const"}


def space_of(parts):
    for p in parts[1:]:
        if p in SPACE_NAMES:
            return SPACE_NAMES[p]
    return "generic"


class Address:
    """Decoded address operand: a constant (symbol) or a per-thread getter, plus its space."""

    def __init__(self, ctx, operand, space):
        kind, val = ctx.address(operand)
        self.param = None
        if kind == "sym":
            name, off = val
            sp, base, size = ctx.prog.symbol(ctx.fn, name, ctx.ins.line)
            if sp in ("kparam", "pslot"):
                if off < 0 or (size is not None and off > size):
                    ctx.error(f"access outside parameter {name}")
                self.param = (sp, base + off, size - off, name)
                self.space = "param"
                return
            if space not in ("generic", sp) and not (space == "const" and sp == "global") \
                    and not (space == "shared_cluster" and sp == "shared"):
                ctx.error(f"{name} is a .{sp} variable, accessed as .{space}")
            self.space = sp
            const = np.uint64(base + off)
            self.get = lambda st: const
        else:
            # kernel parameters through a pointer (byval structs): the param window
            self.space = "kparam" if space == "param" else space
            self.get = val

    def groups(self, st, idx, size, align):
        a = self.get(st)
        a = a if np.ndim(a) == 0 else a[idx]
        return locate(st, self.space, a, idx, size, align)
