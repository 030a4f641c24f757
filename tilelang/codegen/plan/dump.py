"""The kernel plan as text: what `tilec --emit plan` prints (docs/cli.md, docs/codegen.md
Plans). One section per pass, every decision with why; values are named as `--emit tir`
names them (`%9`) with their source line, so the text is stable for a given source and can
be read beside the IR."""

from __future__ import annotations

from tilelang.codegen.plan.distributed import describe as describe_distributed
from tilelang.codegen.plan.kernel_plan import KernelPlan
from tilelang.codegen.plan.loops import LoopDecision
from tilelang.codegen.plan.streams import Stream
from tilelang.ir.ops import Kernel, walk
from tilelang.ir.printer import Namer, format_kernel

KB = 1024


class _Names:
    """Value id -> its `--emit tir` name (`%9`) and source line (`%9 (line 22)`)."""

    def __init__(self, kernel: Kernel):
        namer = Namer(kernel.params)
        format_kernel(kernel, namer)              # numbers the values in print order
        self.tir = {v.id: n for v, n in namer.names.items()}
        self.ops = {}
        for op in walk(kernel.body):
            for r in op.results:
                self.ops[r.id] = op
            for region in op.regions:
                for a in region.args:
                    self.ops.setdefault(a.id, op)

    def __call__(self, vid: int) -> str:
        name = self.tir.get(vid, f"%v{vid}")
        span = getattr(self.ops.get(vid), "span", None)
        return f"{name} (line {span.line})" if span is not None else name


def _kb(n: int) -> str:
    return f"{n / KB:g} KB"


def format_plan(plan: KernelPlan, kernel: Kernel) -> str:
    name = _Names(kernel)
    mode = "exact" if plan.exact else "virtual"
    threads = f"{plan.threads} threads" if plan.threads == plan.declared_threads else \
        f"{plan.threads} of {plan.declared_threads} threads"
    out = [f"kernel {plan.kernel}: {plan.target}, {threads} ({mode}), precision "
           f"{plan.precision}"]
    if kernel.const_choices:          # per-target const defaults (docs/language.md)
        out.append("  consts: " + ", ".join(c.show() for c in kernel.const_choices))
    out += _products(plan, name)
    out += _loops(plan, name)
    out += _streams(plan, name)
    out += _reloads(plan, name)
    out += _fusion(plan, name)
    out += describe_distributed(plan.distributed)
    return "\n".join(out) + "\n"


def _products(plan: KernelPlan, name) -> list[str]:
    ds = plan.products.decisions
    if not ds:
        return ["  products: none"]
    out = ["  products:"]
    for d in ds:
        shape = "x".join(map(str, d.shape))
        out.append(f"    {d.name} {name(d.result)} {shape}: {d.why}")
        if d.scaled is not None and d.scaled.form is None:
            out.append(f"      mma_scaled: {d.scaled.why}")
        op = name.ops.get(d.result)
        for k, deferred in zip(("a", "b"), d.deferred):
            v = op.arg_map.get(k) if op is not None else None
            what = "deferred: copied straight to shared memory" if deferred else "registers"
            if v is not None and hasattr(v, "id"):
                out.append(f"      {k} {name(v.id)}: {what}")
    return out


def _loops(plan: KernelPlan, name) -> list[str]:
    ls = plan.loops.loops
    if not ls:
        return ["  loops: none with a product"]
    out = ["  loops:"]
    for d in ls:
        out += _loop(d, name)
    return out


def _loop(d: LoopDecision, name) -> list[str]:
    head = f"    for {name(d.iv)}: "
    lp, pf = d.pipelined, d.prefetch
    if lp is not None:
        wg = lp.plan.wg is not None
        kind = "tcgen05" if lp.plan.tc5 is not None else "wgmma" if wg else "mma.sync"
        copies = "TMA" if lp.tma else "cp.async"
        stage = sum(lp.image_bytes) + lp.scale_bytes
        out = [head + f"pipelined ({kind}), {copies} ring of {lp.stages} stages x "
                      f"{_kb(stage)}: {lp.stages_why}"]
        for k, op, cax, nbytes in zip(("a", "b"), lp.operands, lp.axes, lp.image_bytes):
            out.append(f"      {k} {name(op.op.result.id)}: {_kb(nbytes)} image, rows along "
                       f"axis {cax}")
        for k, o in zip(("a_scale", "b_scale"), lp.scales):
            out.append(f"      {k} {name(o.result.id)}: staged by the producer warp's lanes, "
                       f"tcgen05.cp into tensor memory (R12)")
        mc = "none" if lp.multicast is None else \
            f"cluster {'x'.join(map(str, lp.multicast.cluster))}, shared " + ", ".join(
                "-" if g is None else "axes " + "".join("xyz"[a] for a in sorted(g))
                for g in lp.multicast.groups)
        out.append(f"      multicast: {mc}; warp-specialized: "
                   f"{'yes' if lp.warp_specialized else 'no'}"
                   + ("; inside another run-time loop" if lp.nested else "")
                   + ("; CTA pair (cta_group::2, M = 256)" if lp.pair else "")
                   + (f"; {lp.acc_buffers} TMEM accumulators" if lp.acc_buffers > 1 else "")
                   + (f"; not a CTA pair: {lp.no_pair}" if lp.no_pair else ""))
        return out
    if pf is not None:
        copies = "TMA" if pf.tma else "cp.async"
        where = " in dynamic shared memory" if pf.dynamic else ""
        out = [head + f"prefetched, {copies} ring of {pf.stages} stages x "
                      f"{_kb(pf.stage_bytes)}{where} ({d.why})"]
        for f in pf.fetches:
            out.append(f"      {name(f.d.op.result.id)}: image at +{f.offset} bytes, "
                       f"{f.span}-byte swizzle, rows along axis {f.cax}")
        for sf in pf.sides:
            out.append(f"      {name(sf.d.op.result.id)}: tile at +{sf.offset} bytes, "
                       f"copied beside the operands (not a product operand)")
        out.append(f"      warp-specialized: {'yes' if pf.warp_specialized else 'no'}"
                   + ("; copies spread over the warps, one each" if pf.spread else ""))
        return out + _carried(d, name)
    if d.acc_pipeline:
        return [head + "the tcgen05 accumulator pipeline: the producer, MMA and epilogue warps "
                       "each run this loop over output tiles (R13)"]
    return [head + d.why] + _carried(d, name) + \
        ([f"      {d.resident.describe(name)}"] if d.resident is not None else [])


def _carried(d: LoopDecision, name) -> list[str]:
    out = []
    for vid, c in zip(d.carried_ids, d.carried):
        if c is None:
            continue
        if c.product is not None:
            out.append(f"      carries {name(vid)} in the accumulator layout of "
                       f"{name(c.product)}")
        else:
            out.append(f"      carries {name(vid)} in the layout of reduction "
                       f"{name(c.reduction)}")
    return out


def _streams(plan: KernelPlan, name) -> list[str]:
    sp = plan.streams
    if not sp.streams:
        return ["  streams: none" + (f" ({sp.why_none})" if sp.why_none else "")]
    out = ["  streams:"]
    for s in sp.streams:
        out += _stream(s, plan, name)
    return out


def _stream(s: Stream, plan: KernelPlan, name) -> list[str]:
    c = s.store
    line = f" (line {c.span.line})" if c.span is not None else ""
    if s.reduces:
        axis = c.arg_map.get("axis")
        over = f" over axis {axis.value}" if hasattr(axis, "value") else ""
        head = f"    `{c.name}`{line}{over}: feeds only the reduction, one vector at a time"
    else:
        head = f"    `store`{line}: stored one vector at a time"
    out = [head]
    again = plan.reloads.values
    for o in s.ops:
        kind = "load" if o.name == "load" else o.name
        why = "reloaded: computed again here" if o.result.id in again else \
            "streamed: its one use is here"
        out.append(f"      {kind} {name(o.result.id)}: {why}")
    return out


def _reloads(plan: KernelPlan, name) -> list[str]:
    rp = plan.reloads
    if not rp.reasons and not rp.kept:
        return ["  reloads: none"]
    out = ["  reloads:"]
    streamed = plan.streams.deferred
    for r in rp.reasons:
        math = " (repeats approximated math)" if r.math else ""
        what = "reloaded" if r.value in streamed else \
            "kept (no stream computes it again: a use needs it in registers)"
        out.append(f"    {name(r.value)}: {what}: live across block reduction `{r.reduction}` "
                   f"{name(r.reduction_result)}, {r.registers} regs > budget {r.budget}{math}")
    for k in rp.kept:
        out.append(f"    {name(k.value)}: kept: live across block reduction `{k.reduction}` "
                   f"{name(k.reduction_result)} but computing it again repeats exact math")
    return out


def _fusion(plan: KernelPlan, name) -> list[str]:
    fp = plan.fusion
    if not fp.groups and not fp.declined:
        return ["  fusion: none" + (f" ({fp.why_none})" if fp.why_none else "")]
    out = ["  fusion:"]
    for g in fp.groups:
        c = g.consumer
        line = f" (line {c.span.line})" if c.span is not None else ""
        shape = "x".join(map(str, g.shape))
        if g.stores:
            out.append(f"    `store`{line}: computes its {shape} tile one vector at a time, "
                       f"never held whole")
        else:
            over = ", ".join(map(str, g.axes))
            out.append(f"    `{c.name}`{line} over axis {over}: computes its {shape} input one "
                       f"register at a time, never held whole")
        for o in g.ops:
            out.append(f"      {o.name} {name(o.result.id)}: fused: its one use is here")
        out.append("      operands held: " + ", ".join(name(v) for v in g.leaves))
        if g.layout is not None and not g.stores:
            out.append(f"      layout (R5): {_extents(g.layout.reg)} in registers, "
                       f"{_extents(g.layout.lane + g.layout.warp)} threads")
    for d in fp.declined:
        c = d.consumer
        line = f" (line {c.span.line})" if c.span is not None else ""
        out.append(f"    `{c.name}`{line}: not fused: {d.why}")
    return out


def _extents(bases) -> str:
    """The extent along each axis that bases spanning one bit each cover: `32x8`."""
    rank = len(bases[0]) if bases else 0
    return "x".join(str(1 << sum(1 for b in bases if b[d])) for d in range(rank))
