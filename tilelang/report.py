"""`tilec --report FILE.tile`: resources and occupancy of each compiled kernel.

Registers, spills and static shared memory come from the linker's log (nvJitLink or ptxas
with -v), the directives from the final PTX, and occupancy and waves from the limits table of
seed `004_c6dc5fc6aab2fa35.txt` (codegen/occupancy.py).
"""

from __future__ import annotations

import re
from math import prod
from typing import Sequence

from tilelang.codegen.occupancy import format_report, kernel_report
from tilelang.codegen.target.ptx_header import DIRECTIVES

# SM counts assumed when --sms is not given: the flagship part of each architecture.
DEFAULT_SMS = {"sm_80": 108, "sm_86": 84, "sm_89": 128, "sm_90": 132, "sm_90a": 132,
               "sm_100a": 148, "sm_120": 170, "sm_120a": 170}


def entry_directives(ptx: str, name: str) -> tuple[str, ...]:
    """The directive lines between `.entry NAME(...)` and its body's `{`."""
    m = re.search(rf"\.entry\s+{re.escape(name)}\s*\(", ptx)
    if not m:
        return ()
    close = ptx.index(")", m.end())
    body = ptx.index("{", close)
    out = []
    for line in ptx[close + 1:body].splitlines():
        line = line.strip()
        if line.split(" ")[0] in DIRECTIVES:
            out.append(line)
    return tuple(out)


def build_report(res, target: str, *, grid: Sequence[int] | None = None,
                 block: Sequence[int] | None = None, sms: int | None = None) -> str:
    """The report text for a `driver.CompileResult` compiled up to the cubin."""
    rows = []
    num_sms = sms if sms is not None else DEFAULT_SMS.get(target)
    for k in res.codegen.kernels:
        r = res.link.resources.get(k.name) if res.link is not None else None
        rows.append(kernel_report(
            k.name, target, tuple(block) if block else k.block,
            registers=r.registers if r else 0, spill_stores=r.spill_stores if r else 0,
            spill_loads=r.spill_loads if r else 0,
            smem_static=r.smem_static if r else k.static_smem, smem_dynamic=k.dynamic_smem,
            directives=entry_directives(res.ptx, k.name),
            grid_blocks=prod(grid) if grid else None, num_sms=num_sms if grid else None))
    text = format_report(rows)
    text += "" if text.endswith("\n") else "\n"
    if grid and sms is None and num_sms is not None:
        text += f"(waves assume {num_sms} SMs, a full {target} part; pass --sms N for yours)\n"
    return text
