"""SASS inspection: what ptxas made of a kernel.

Disassembles a cubin with `cuobjdump` from NVIDIA's `nvidia-cuda-cuobjdump` wheel (the
`nvidia-cuda-nvdisasm` wheel provides the disassembler it runs; either tool is also taken from
PATH when the wheels are absent) and parses the listing into instructions, so tests and
benchmarks can ask: are there tensor-core instructions (HMMA), local memory (LDL/STL), how
wide are the global loads, and how many instructions does the main loop run per K-step.

The main loop is found from the branches: a branch to a lower address closes a loop, and the
loop with the most multiply-adds is the main loop. `ptx_loop_lines` does the same on PTX text
(label ... backward `bra`) for the emulator's per-line counters.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections import Counter
from dataclasses import dataclass, field


class ToolUnavailable(RuntimeError):
    """cuobjdump / nvdisasm are not installed (pip install nvidia-cuda-cuobjdump
    nvidia-cuda-nvdisasm)."""


def find_tool(name: str) -> str | None:
    """The path of `name` from NVIDIA's pip wheels (nvidia/<pkg>/bin/), else from PATH."""
    try:
        import nvidia                                  # a namespace package of the wheels
        roots = list(nvidia.__path__)
    except ImportError:
        roots = []
    for root in roots:
        try:
            subdirs = sorted(os.listdir(root))
        except OSError:
            continue
        for sub in subdirs:
            path = os.path.join(root, sub, "bin", name)
            if os.path.isfile(path) and os.access(path, os.X_OK):
                return path
    return shutil.which(name)


def tools_available() -> bool:
    return find_tool("cuobjdump") is not None and find_tool("nvdisasm") is not None


def _run_on_cubin(args: list[str], cubin: bytes) -> str:
    tool = find_tool(args[0])
    if tool is None:
        raise ToolUnavailable(f"{args[0]} not found: pip install nvidia-cuda-cuobjdump "
                              "nvidia-cuda-nvdisasm")
    env = dict(os.environ)
    # cuobjdump -sass runs nvdisasm: let it find the wheel's copy
    nvd = find_tool("nvdisasm")
    if nvd:
        env["PATH"] = os.path.dirname(nvd) + os.pathsep + env.get("PATH", "")
    with tempfile.TemporaryDirectory(prefix="tile-sass-") as d:
        path = os.path.join(d, "kernel.cubin")
        with open(path, "wb") as f:
            f.write(cubin)
        proc = subprocess.run([tool, *args[1:], path], capture_output=True, text=True,
                              timeout=120, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"{args[0]} failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc.stdout


@dataclass(frozen=True)
class Instr:
    addr: int
    opcode: str                  # with modifiers: "HMMA.16816.F32", "LDG.E.128.CONSTANT"
    operands: str
    pred: str = ""               # "@P0", "@!P1" or ""
    target: int | None = None    # branch target address

    @property
    def op(self) -> str:
        """The opcode without modifiers: "HMMA", "LDG"."""
        return self.opcode.split(".", 1)[0]

    @property
    def mods(self) -> tuple[str, ...]:
        return tuple(self.opcode.split(".")[1:])


_LINE = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+\s+)?([A-Z][\w.]*)\s*([^;]*);")
_FUNC = re.compile(r"Function : (\S+)")
_TARGET = re.compile(r"(?:^|\s)(?:`\()?(0x[0-9a-f]+)")


def parse_sass(text: str) -> dict[str, list[Instr]]:
    """Instructions per function of a `cuobjdump -sass` listing."""
    out: dict[str, list[Instr]] = {}
    cur: list[Instr] | None = None
    for line in text.splitlines():
        m = _FUNC.search(line)
        if m:
            cur = out.setdefault(m.group(1), [])
            continue
        m = _LINE.search(line)
        if m is None or cur is None:
            continue
        addr, pred, opcode, ops = int(m.group(1), 16), (m.group(2) or "").strip(), \
            m.group(3), m.group(4).strip()
        target = None
        if opcode.split(".")[0] in ("BRA", "BRX", "JMP", "CALL", "BSSY", "SSY", "PBK"):
            t = _TARGET.search(ops)
            target = int(t.group(1), 16) if t else None
        cur.append(Instr(addr, opcode, ops, pred, target))
    return out


def disassemble(cubin: bytes) -> dict[str, list[Instr]]:
    """The SASS of every function of a cubin."""
    return parse_sass(_run_on_cubin(["cuobjdump", "-sass"], cubin))


_RES = re.compile(r"Function (\S+):\s*\n\s*(.*)")


def resource_usage(cubin: bytes) -> dict[str, dict[str, int]]:
    """cuobjdump -res-usage: per function REG, STACK, SHARED, LOCAL (bytes) and the rest."""
    text = _run_on_cubin(["cuobjdump", "-res-usage"], cubin)
    out = {}
    for m in _RES.finditer(text):
        out[m.group(1)] = {k: int(v) for k, v in re.findall(r"(\w+(?:\[\d+\])?):(\d+)",
                                                            m.group(2))}
    return out


TENSOR_OPS = ("HMMA", "IMMA", "QMMA", "DMMA", "HGMMA", "IGMMA", "QGMMA")


# Multiply-adds per warp instruction, to find the main loop and count its K-steps.
def macs(ins: Instr) -> int:
    """Multiply-adds one warp's instruction performs (a warpgroup's HGMMA: a quarter)."""
    op, mods = ins.op, ins.mods
    if op in ("HGMMA", "IGMMA", "QGMMA"):
        for m in mods:
            dims = m.split("x")
            if len(dims) == 3 and all(d.isdigit() for d in dims):
                return int(dims[0]) * int(dims[1]) * int(dims[2]) // 4
        return 0
    if op in ("HMMA", "IMMA", "QMMA", "DMMA"):
        shape = next((m for m in mods if m.isdigit() and len(m) >= 3), None)
        if shape is None:
            return 0
        # 16816 -> m16 n8 k16; 1688 -> m16 n8 k8; 16832 -> m16 n8 k32; 884 -> m8 n8 k4
        for mlen in (2, 1):
            for nlen in (1, 2):
                m_, n_, k_ = shape[:mlen], shape[mlen:mlen + nlen], shape[mlen + nlen:]
                if k_ and int(m_) in (8, 16) and int(n_) in (8, 16) and \
                        int(k_) in (4, 8, 16, 32, 64):
                    return int(m_) * int(n_) * int(k_)
        return 0
    if op in ("FFMA", "DFMA"):
        return 32
    if op == "HFMA2":
        return 64
    return 0


@dataclass
class Loop:
    start: int                   # index of the first instruction (the branch target)
    end: int                     # index of the backward branch
    instrs: list[Instr] = field(default_factory=list)

    @property
    def macs(self) -> int:
        return sum(macs(i) for i in self.instrs)


def loops(instrs: list[Instr]) -> list[Loop]:
    """Every backward branch's range, outermost included.

    A range that holds an unpredicated EXIT is no loop: ptxas places the retry loop of an
    mbarrier wait out of line after the function's EXIT, and its jump back into the loop body
    would otherwise look like a loop spanning the rest of the function."""
    index = {i.addr: k for k, i in enumerate(instrs)}
    exits = [k for k, i in enumerate(instrs) if i.op == "EXIT" and not i.pred]
    out = []
    for k, i in enumerate(instrs):
        if i.op == "BRA" and i.target is not None and i.target <= i.addr and i.target in index:
            s = index[i.target]
            if s == k:                      # `BRA self` after EXIT: padding, not a loop
                continue
            if any(s <= e < k for e in exits):
                continue
            out.append(Loop(s, k, instrs[s:k + 1]))
    return out


def main_loop(instrs: list[Instr]) -> Loop | None:
    """The loop with the most multiply-adds (ties: the innermost, i.e. the shortest)."""
    cands = [lp for lp in loops(instrs) if lp.macs > 0]
    if not cands:
        return None
    return max(cands, key=lambda lp: (lp.macs, -len(lp.instrs)))


def access_width(ins: Instr) -> int:
    """Bits moved per thread by a load/store (LDG, STG, LDS, STS, LDL, STL, LDGSTS, ...)."""
    for m in ins.mods:
        if m in ("128", "64", "32", "16", "8"):
            return int(m)
        if m in ("U8", "S8"):
            return 8
        if m in ("U16", "S16"):
            return 16
    return 32


@dataclass
class SassSummary:
    """What the checks and the static benchmark read from a kernel's SASS."""
    total: int
    ops: Counter
    hmma: int
    local: int                       # LDL + STL instructions
    ldg_widths: Counter              # bits -> count of LDG (and LDGSTS, cp.async) instructions
    stg_widths: Counter
    loop_instrs: int | None = None   # instructions in the main loop body
    loop_macs: int = 0
    loop_ops: Counter = field(default_factory=Counter)

    def per_k_step(self, k_step_macs: int) -> tuple[float, float] | None:
        """(instructions, tensor-core instructions) per K-step of the main loop, where one
        K-step is `k_step_macs` multiply-adds per warp (BM * BN * BK / warps)."""
        if not self.loop_instrs or not self.loop_macs:
            return None
        steps = self.loop_macs / k_step_macs
        mma = sum(self.loop_ops.get(op, 0) for op in TENSOR_OPS)
        return self.loop_instrs / steps, mma / steps


def summarize(instrs: list[Instr]) -> SassSummary:
    ops = Counter(i.op for i in instrs)
    ldg, stg = Counter(), Counter()
    for i in instrs:
        if i.op in ("LDG", "LDGSTS"):
            ldg[access_width(i)] += 1
        elif i.op == "STG":
            stg[access_width(i)] += 1
    s = SassSummary(len(instrs), ops, ops.get("HMMA", 0), ops.get("LDL", 0) + ops.get("STL", 0),
                    ldg, stg)
    lp = main_loop(instrs)
    if lp is not None:
        s.loop_instrs = len(lp.instrs)
        s.loop_macs = lp.macs
        s.loop_ops = Counter(i.op for i in lp.instrs)
    return s


# -- PTX ---------------------------------------------------------------------------------------
_PTX_LABEL = re.compile(r"^\s*([$%\w]+):")
_PTX_BRA = re.compile(r"^\s*(?:@!?%\w+\s+)?bra(?:\.uni)?\s+([$%\w]+)\s*;")
_PTX_TENSOR = re.compile(r"^\s*(?:@!?%\w+\s+)?(?:mma\.sync|wgmma\.mma_async)")
_PTX_RET = re.compile(r"^\s*ret\s*;")
_PTX_MATH = re.compile(r"^\s*(?:@!?%\w+\s+)?(?:mma|wgmma|fma|mad)\b")


def ptx_loop_lines(ptx: str) -> list[int]:
    """1-based line numbers of the PTX loop (a label up to a `bra` back to it) with the most
    mma/fma/mad instructions; [] when there is none."""
    lines = ptx.splitlines()
    labels = {}
    best: tuple[int, int, int] | None = None
    for n, text in enumerate(lines, 1):
        m = _PTX_LABEL.match(text)
        if m:
            labels[m.group(1)] = n
            continue
        m = _PTX_BRA.match(text)
        if m and m.group(1) in labels:
            start = labels[m.group(1)]
            body = lines[start - 1:n]
            if any(_PTX_RET.match(t) for t in body):
                continue            # an out-of-line block after `ret` jumping back: no loop
            math = sum(1 for t in body if _PTX_MATH.match(t))
            # tensor-core instructions first: a backward branch that is no loop (a block
            # LLVM placed after the loop jumping back before it) spans the loop and some
            # integer `mad`s more, and must not win over the loop it contains
            tensor = sum(1 for t in body if _PTX_TENSOR.match(t))
            key = (tensor, 0 if tensor else math, start - n)
            if math and (best is None or key > best[0]):
                best = (key, start, n)
    return list(range(best[1], best[2] + 1)) if best else []


# -- SASS issued, from the emulator's PTX line counts --------------------------------------------
# A static SASS listing says what ptxas made, not how often each instruction runs. To count SASS
# instructions issued without a GPU, the PTX is given a line table that names, for every
# instruction, its own PTX line (`.loc 1 <line>`), the cubin is assembled with `-lineinfo` (the
# line table changes no instruction: tests/tools/test_sass.py checks the listing against the
# plain link), and nvdisasm reports, per SASS instruction, the PTX line it came from. The
# emulator counts how often each PTX line was issued per warp (LaunchReport.issued_lines); a
# SASS basic block is issued as often as most of its instructions' PTX lines were (ptxas moves
# a few instructions across blocks, hoisting or if-converting them; the majority keeps the
# block's own count), and predicated-off instructions in it issue with it, as on the GPU.

_PTX_INSTR = re.compile(r"^\s*(?:@!?%\w+\s+)?[a-z][\w.]*[\s;{]")


def ptx_with_line_table(ptx: str, file_name: str = "kernel.ptx") -> str:
    """`ptx` with a `.loc 1 N 1` before every instruction, N its line in `ptx`, and the
    `.file 1` it refers to; the text's own `.file`/`.loc` lines (if any) become blank lines so
    the numbering is the input's. Link with `-lineinfo` to carry the table into the cubin."""
    out = []
    for n, line in enumerate(ptx.splitlines(), 1):
        s = line.strip()
        if s.startswith((".loc", ".file")):
            out.append("")
            continue
        if _PTX_INSTR.match(line) and not s.startswith((".", "//")):
            out.append(f"\t.loc 1 {n} 1")
        out.append(line)
        if s.startswith(".address_size"):
            out.append(f'.file 1 "{file_name}"')
    return "\n".join(out) + "\n"


@dataclass(frozen=True)
class LinedInstr:
    """A SASS instruction and the PTX line ptxas's line table gives it (0: none yet)."""
    instr: Instr
    line: int


_NVD_SECTION = re.compile(r"^\s*\.section\s+\.text\.([\w$.]+),")
_NVD_LINE = re.compile(r'//## File ".*", line (\d+)')
_NVD_LABEL = re.compile(r"^\s*(\.L\w+):")
_NVD_TARGET = re.compile(r"`\((\.L\w+)\)")


def parse_nvdisasm(text: str) -> dict[str, list[LinedInstr]]:
    """Instructions per function of an `nvdisasm -g -c` listing, each with its PTX line;
    branch targets (`.L_x_N` labels) resolved to addresses."""
    funcs: dict[str, list[tuple[Instr, int, str | None]]] = {}
    labels: dict[str, int] = {}
    pending: list[str] = []
    cur, line = None, 0
    for raw in text.splitlines():
        m = _NVD_SECTION.match(raw)
        if m:
            cur, line = funcs.setdefault(m.group(1), []), 0
            continue
        m = _NVD_LINE.search(raw)
        if m:
            line = int(m.group(1))
            continue
        m = _NVD_LABEL.match(raw)
        if m:
            pending.append(m.group(1))
            continue
        m = _LINE.search(raw)
        if m is None or cur is None:
            continue
        addr = int(m.group(1), 16)
        for lab in pending:
            labels[lab] = addr
        pending = []
        t = _NVD_TARGET.search(m.group(4))
        ins = Instr(addr, m.group(3), m.group(4).strip(), (m.group(2) or "").strip())
        cur.append((ins, line, t.group(1) if t else None))
    out = {}
    for name, items in funcs.items():
        out[name] = [LinedInstr(Instr(i.addr, i.opcode, i.operands, i.pred,
                                      labels.get(lab) if lab else None), ln)
                     for i, ln, lab in items]
    return out


def disassemble_with_lines(cubin: bytes) -> dict[str, list[LinedInstr]]:
    """SASS of every function with the PTX line of each instruction (the cubin must carry a
    line table: `ptx_with_line_table` linked with -lineinfo)."""
    return parse_nvdisasm(_run_on_cubin(["nvdisasm", "-g", "-c"], cubin))


_ENDS_BLOCK = ("BRA", "BRX", "JMP", "EXIT", "RET", "CALL", "BSYNC", "WARPSYNC")


def basic_blocks(instrs: list[LinedInstr]) -> list[list[LinedInstr]]:
    """Straight-line runs: a block starts at a branch target and after a branch or exit."""
    targets = {li.instr.target for li in instrs if li.instr.target is not None}
    blocks: list[list[LinedInstr]] = []
    for li in instrs:
        if not blocks or li.instr.addr in targets or blocks[-1][-1].instr.op in _ENDS_BLOCK:
            blocks.append([])
        blocks[-1].append(li)
    return blocks


@dataclass(frozen=True)
class IssuedEstimate:
    """SASS warp-instructions issued, and whether each basic block's count is its own."""
    count: int
    exact: bool      # False: ptxas copied loop lines into several executed blocks (unrolling)


def _block_count(block: list[LinedInstr], issued_lines: dict[int, int]) -> int:
    first = block[0].instr
    if first.op == "BRA" and first.target == first.addr or \
            all(li.instr.op == "NOP" for li in block):
        return 0                       # the `BRA self` padding after the last EXIT
    counts = Counter(issued_lines.get(li.line, 0) for li in block if li.line)
    return max(counts.items(), key=lambda kv: (kv[1], kv[0]))[0] if counts else 0


def sass_issued(instrs: list[LinedInstr], issued_lines: dict[int, int]) -> IssuedEstimate:
    """Warp-level SASS instructions issued, given the warp-level issue count of every PTX line
    (the emulator's `LaunchReport.issued_lines`): each basic block issues as often as the most
    common count among its instructions' lines (ties: the larger).

    A loop ptxas unrolled breaks that rule: its copies (the unrolled body, the remainder, the
    guards) all carry the loop's PTX lines, but run fewer times than the lines did. When an
    executed block inside a SASS loop shares a PTX line with another executed block, the
    estimate is `exact = False` and counts each executed PTX line's instructions once per
    execution instead, with the fewest SASS instructions any copy of it has (the not-unrolled
    copy's; predicated-off instructions of lines that never ran are then left out)."""
    blocks = basic_blocks(instrs)
    counts = [_block_count(b, issued_lines) for b in blocks]
    index = {li.instr.addr: k for k, li in enumerate(instrs)}
    in_loop: set[int] = set()
    for lp in loops([li.instr for li in instrs]):
        in_loop.update(range(lp.start, lp.end + 1))
    homes: dict[int, set[int]] = {}
    for n, (b, c) in enumerate(zip(blocks, counts)):
        if c:
            for li in b:
                if li.line:
                    homes.setdefault(li.line, set()).add(n)
    shared = any(c and index[b[0].instr.addr] in in_loop and
                 any(len(homes.get(li.line, ())) > 1 for li in b)
                 for b, c in zip(blocks, counts))
    if not shared:
        return IssuedEstimate(sum(c * len(b) for b, c in zip(blocks, counts)), True)
    fewest: dict[int, int] = {}
    for b, c in zip(blocks, counts):
        per = Counter(li.line for li in b if li.line)
        for line, k in per.items():
            fewest[line] = min(fewest.get(line, k), k)
    return IssuedEstimate(sum(issued_lines.get(line, 0) * k for line, k in fewest.items()),
                          False)
