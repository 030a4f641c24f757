"""The warp-group MMA instructions (sm_90a) as inline asm — LLVM has no intrinsics for them —
and the shared-memory matrix descriptors they read their operands through.

Protocol (PTX ISA, "Asynchronous Warpgroup Level Matrix Multiply-Accumulate"): operands
written to shared memory by ordinary stores or `cp.async` must be made visible to the async
proxy (`fence.proxy.async.shared::cta`, after the barrier that publishes them); then
`wgmma.fence` orders the accumulator registers' earlier writes before the MMAs that read them;
the `wgmma.mma_async` of one step are closed by `wgmma.commit_group`; `wgmma.wait_group n`
waits until at most n groups are pending. Until that wait the accumulator registers belong
to the tensor core: the wait's asm takes and returns every one of them (tied operands), so
LLVM cannot read or copy one before the MMA that writes it has finished.

Descriptors (64-bit; all byte quantities in units of 16 bytes): bits 0-13 the start address,
16-29 the leading-dimension byte offset (LBO), 32-45 the stride-dimension byte offset (SBO),
49-51 the base offset (0: every image starts 1024-byte aligned), 62-63 the swizzle mode
(1 = 128-byte, 2 = 64-byte, 3 = 32-byte). The images are layouts/shared.wgmma_image: rows of
`span` bytes (one panel row; span = 128, 64 or 32, the widest that divides the contiguous
extent), address bits 4.. XORed with bits 7.. (the 16-byte chunk c of row r at
c ^ (r / (128 / span) mod span / 16)), panels of all rows along the contiguous axis.

* K-major operand (its contiguous axis is K: A as stored (M, K), B stored as (N, K) rows):
  8-row core-matrix groups are SBO = 8 * span bytes apart; K steps of 16 elements move the
  start address by 32 bytes inside the row (the hardware applies the swizzle to the full
  address), and by a panel every span / itemsize elements. LBO is unused for swizzled
  K-major layouts (1).
* MN-major operand (contiguous along M or N; transposed by the instruction's imm-trans bit,
  16-bit types only): rows are K, 8-row groups SBO = 8 * span bytes apart, and the panels
  along M/N are LBO = panel bytes apart; a K step of 16 moves 16 rows.
"""

from __future__ import annotations

import llvmlite.ir as ir

from tilelang.codegen.emit.kernel import I32, I64, KernelEmitter

F32 = ir.FloatType()
I1 = ir.IntType(1)
# scale-d (D = A * B + D) as a predicate operand: a `setp` inside each MMA's asm would write a
# register between the MMAs of a group, and ptxas then waits for each before the next
SCALE_D = ir.Constant(I1, 1)
# scale-d false (D = A * B): the first MMA of an accumulator that is all zeros (a product
# started from `zeros`) reads no accumulator, so its registers need no zeroing moves (ptxas
# kept 8-16 `MOV R, RZ` per product in attention's backward loops otherwise)
NO_SCALE_D = ir.Constant(I1, 0)


def _is_zero(v: ir.Value) -> bool:
    return isinstance(v, ir.Constant) and isinstance(v.type, ir.FloatType) and \
        isinstance(v.constant, float) and v.constant == 0.0


def zero_starts(mmas: list, regs: list[ir.Value]) -> list[bool]:
    """Per entry of `mmas` (indices into `regs` first), whether it is the first to touch its
    accumulator registers and they are all constant zeros: it then runs with scale-d false
    and those registers go in undefined."""
    seen: set[int] = set()
    out = []
    for idx, *_ in mmas:
        out.append(not any(i in seen for i in idx) and all(_is_zero(regs[i]) for i in idx))
        seen.update(idx)
    return out


def _started(regs: list[ir.Value], used, mmas: list, zero: list[bool]) -> list[ir.Value]:
    """`regs[i]` for i in `used`, undefined where an MMA with scale-d false starts them (no
    move materializes a value it does not read)."""
    fresh = {i for (idx, *_), z in zip(mmas, zero) if z for i in idx}
    return [ir.Constant(F32, ir.Undefined) if i in fresh else regs[i] for i in used]
SWIZZLE_MODE = {128: 1, 64: 2, 32: 3}   # the descriptor's layout type per swizzle span


def descriptor_const(lbo: int, sbo: int, span: int = 128) -> int:
    """The descriptor bits other than the start address, for a `span`-byte swizzle."""
    return ((lbo >> 4) & 0x3FFF) << 16 | ((sbo >> 4) & 0x3FFF) << 32 | \
        SWIZZLE_MODE[span] << 62


def descriptor(kern: KernelEmitter, addr: ir.Value, const: int) -> ir.Value:
    """A descriptor (i64) for the 32-bit shared address `addr` (i32) and the other fields
    `const` (descriptor_const)."""
    b = kern.builder
    start = b.and_(b.lshr(addr, ir.Constant(I32, 4)), ir.Constant(I32, 0x3FFF))
    return b.or_(b.zext(start, I64), ir.Constant(I64, const))


def _void_asm(kern: KernelEmitter, text: str) -> None:
    asm = ir.InlineAsm(ir.FunctionType(ir.VoidType(), []), text, "~{memory}",
                       side_effect=True)
    kern.builder.call(asm, [])


def fence_proxy_async(kern: KernelEmitter) -> None:
    """Make this thread's generic-proxy writes to shared memory visible to the async proxy."""
    _void_asm(kern, "fence.proxy.async.shared::cta;")


def _f32s(kern: KernelEmitter, n: int) -> ir.Type:
    """The return type of an asm giving `n` f32 registers: one named struct per module, since a
    literal `{float, ...}` is spelled out in full at each of its extractvalues (64 of them per
    m64n128 MMA), text that llvmlite formats and LLVM parses again."""
    if n == 1:
        return F32
    ty = kern.module.context.get_identified_type(f"f32x{n}")
    if ty.is_opaque:
        ty.set_body(*[F32] * n)
    return ty


def _through(kern: KernelEmitter, text: str, regs: list[ir.Value]) -> list[ir.Value]:
    """`text` as an asm that takes and returns `regs` (f32), so they are ordered by it."""
    if not regs:
        _void_asm(kern, text)
        return []
    b = kern.builder
    n = len(regs)
    ret = _f32s(kern, n)
    cons = ",".join(["=f"] * n + [str(i) for i in range(n)] + ["~{memory}"])
    asm = ir.InlineAsm(ir.FunctionType(ret, [F32] * n), text, cons, side_effect=True)
    r = b.call(asm, list(regs))
    return [b.extract_value(r, i) for i in range(n)] if n > 1 else [r]


def fence(kern: KernelEmitter, regs: list[ir.Value]) -> list[ir.Value]:
    """`wgmma.fence`: earlier writes of the accumulator registers before the next MMAs."""
    return _through(kern, "wgmma.fence.sync.aligned;", regs)


def commit_group(kern: KernelEmitter) -> None:
    _void_asm(kern, "wgmma.commit_group.sync.aligned;")


def wait_group(kern: KernelEmitter, n: int, regs: list[ir.Value]) -> list[ir.Value]:
    """`wgmma.wait_group n`; returns `regs` as they are after it."""
    return _through(kern, f"wgmma.wait_group.sync.aligned {n};", regs)


def mma_async(kern: KernelEmitter, n: int, ab: str, k: int, mmas: list, regs: list[ir.Value],
              trans_a: bool, trans_b: bool, *, bt: str | None = None, fence: bool = False,
              commit: bool = False, wait: int | None = None) -> list[ir.Value]:
    """`wgmma.mma_async.sync.aligned.m64n{n}k{k}.f32.{ab}.{bt}` (bt: B's type, `ab` when None;
    the 8-bit floats mix, k32) with both operands in shared memory, one per entry of `mmas`
    in order: (indices into `regs` of its n / 2 f32 accumulator registers, desc_a, desc_b).
    Returns `regs` with the new registers (valid only after a wait_group that covers these
    MMAs). Only 16-bit types take the transpose immediates: 8-bit operands are K-major.

    All of them are one asm that takes and returns each register once: an asm per MMA would
    return every register once per MMA, and those extractvalues (512 per K-step of the
    128 x 128 matmul instead of 128) were most of LLVM's work on a wgmma kernel. The PTX
    instructions are the same, one per line (`\\0A\\09`: LLVM's newline and tab). With `fence`
    the asm starts with `wgmma.fence` and with `commit` it ends with `commit_group` (what
    fence() and commit_group() would emit around it, without another asm through every
    register). With `wait` (after `commit`) it ends with `wgmma.wait_group wait` and takes
    every register of `regs` through, as wait_group() after it would: that second asm cost
    128 more extractvalues per K-step of the matmul and another 256-operand call for LLVM to
    compare and coalesce."""
    b = kern.builder
    bt = bt or ab
    trans = f"{int(trans_a)}, {int(trans_b)}" if ab in ("f16", "bf16") else None
    assert trans is not None or not (trans_a or trans_b), "8-bit wgmma operands are K-major"
    tail = f", 1, 1, {trans}" if trans is not None else ", 1, 1"
    assert wait is None or commit, "wgmma.wait_group without commit_group"
    used = list(dict.fromkeys(i for idx, _, _ in mmas for i in idx))
    if wait is not None:   # the wait orders every register, not only this group's
        seen = set(used)
        used += [i for i in range(len(regs)) if i not in seen]
    slot = {r: j for j, r in enumerate(used)}
    cnt, scale = len(used), len(used) + 2 * len(mmas)
    zero = zero_starts(mmas, regs)
    preds = [SCALE_D, NO_SCALE_D] if any(zero) else [SCALE_D]
    lines = []
    for m, (idx, _, _) in enumerate(mmas):
        assert len(idx) == n // 2
        acc = ",".join(f"${slot[i]}" for i in idx)
        lines.append(f"wgmma.mma_async.sync.aligned.m64n{n}k{k}.f32.{ab}.{bt} "
                     f"{{{acc}}}, ${cnt + 2 * m}, ${cnt + 2 * m + 1}, "
                     f"${scale + zero[m]}{tail};")
    cons = ",".join(["=f"] * cnt + ["l", "l"] * len(mmas) + ["b"] * len(preds) +
                    [str(i) for i in range(cnt)] + ["~{memory}"])
    lines = (["wgmma.fence.sync.aligned;"] if fence else []) + lines + \
        (["wgmma.commit_group.sync.aligned;"] if commit else []) + \
        ([f"wgmma.wait_group.sync.aligned {wait};"] if wait is not None else [])
    fnty = ir.FunctionType(_f32s(kern, cnt), [I64] * (2 * len(mmas)) + [I1] * len(preds) +
                           [F32] * cnt)
    asm = ir.InlineAsm(fnty, "\\0A\\09".join(lines), cons, side_effect=True)
    r = b.call(asm, [d for _, da, db in mmas for d in (da, db)] + preds +
               _started(regs, used, mmas, zero))
    regs = list(regs)
    for j, i in enumerate(used):
        regs[i] = b.extract_value(r, j) if cnt > 1 else r
    return regs


def mma_async_rs_group(kern: KernelEmitter, n: int, ab: str, mmas: list, regs: list[ir.Value],
                       trans_b: bool, wait: int) -> list[ir.Value]:
    """wgmma.fence; per entry of `mmas` a `wgmma.mma_async.m64n{n}k16` with A from registers
    and B through its descriptor: (indices into `regs` of its n / 2 accumulator registers, its
    A fragment: four i32 of two 16-bit elements each, the mma.sync m16n8k16 A fragment of the
    warp's 16 rows, desc_b); commit_group; wait_group `wait`. All one asm that takes and
    returns every register of `regs` once: an asm per MMA, plus the fence's and the wait's,
    returned them again each time (192 extractvalues per m64n64 k64 product instead of 32)."""
    b = kern.builder
    cnt, scale = len(regs), len(regs) + 5 * len(mmas)
    zero = zero_starts(mmas, regs)
    preds = [SCALE_D, NO_SCALE_D] if any(zero) else [SCALE_D]
    lines = ["wgmma.fence.sync.aligned;"]
    for m, (idx, _, _) in enumerate(mmas):
        assert len(idx) == n // 2
        acc = ",".join(f"${i}" for i in idx)
        o = cnt + 5 * m
        lines.append(f"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{ab}.{ab} "
                     f"{{{acc}}}, {{${o}, ${o + 1}, ${o + 2}, ${o + 3}}}, ${o + 4}, "
                     f"${scale + zero[m]}, 1, 1, {int(trans_b)};")
    lines += ["wgmma.commit_group.sync.aligned;", f"wgmma.wait_group.sync.aligned {wait};"]
    cons = ",".join(["=f"] * cnt + ["r", "r", "r", "r", "l"] * len(mmas) + ["b"] * len(preds) +
                    [str(i) for i in range(cnt)] + ["~{memory}"])
    fnty = ir.FunctionType(_f32s(kern, cnt), [I32, I32, I32, I32, I64] * len(mmas) +
                           [I1] * len(preds) + [F32] * cnt)
    asm = ir.InlineAsm(fnty, "\\0A\\09".join(lines), cons, side_effect=True)
    r = b.call(asm, [v for _, frag, db in mmas for v in (*frag, db)] + preds +
               _started(regs, range(cnt), mmas, zero))
    return [b.extract_value(r, i) for i in range(cnt)] if cnt > 1 else [r]
