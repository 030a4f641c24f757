"""The region walker and the op dispatch: structured control flow of the Tile IR as LLVM
basic blocks, and each op handed to the lowering that emits it.

The kernel state (emit/kernel.py) never imports the lowerings: `emit_kernel_body` hands it
this module's `emit_builtin` (`KernelEmitter.dispatch`), through which the walker and the
tensor-core families that emit a loop body of their own emit every op. The dispatch asks the
stream plan first (lower/stream.py: a store or reduction emitted one vector at a time, and the
ops it leaves to them), then the fusion plan (lower/fused.py: a reduction that computes its
input one register at a time, and the ops it leaves to it), then the lowering table (lower/table.py), and marks results that can be
computed again in another layout (emit/remat.py). docs/codegen.md, "Layers", has the picture.

`if`/`for`/`while` become branches with phi nodes, one phi per register of every carried or
yielded tile. Carried values keep the layout of their initial value (a yield in another layout
is converted before the back edge); an `if`'s results take the layout of the first branch that
yields. Conditions are scalars, which every thread computes identically, so all threads of a
block always take the same path: barriers inside branches and loops stay convergent.
`break`/`continue` branch to the innermost loop's exit/header; `return` branches to the kernel's
return target (the end of the block's work, or the next virtual thread).
"""

from __future__ import annotations

import llvmlite.ir as ir

from tilelang.codegen.emit import block_test, remat
from tilelang.codegen.emit.kernel import KernelEmitter, TileVal
from tilelang.codegen.emit.sync import convert
from tilelang.codegen.layouts.distributed import Layout
from tilelang.codegen.lower import fused, stream
from tilelang.codegen.lower.table import LOWERINGS, PRODUCTS, lookup
from tilelang.diagnostics import InternalCompilerError
from tilelang.ir.ops import (Block, BreakOp, BuiltinOp, ConditionOp, ConstantOp, ContinueOp,
                             ForOp, IfOp, ReturnOp, WhileOp, YieldOp, walk)
from tilelang.record import field, record, replace
from tilelang.sema.types import DType

YIELD, CONDITION, ESCAPED = "yield", "condition", "escaped"


@record
class LoopFrame:
    header: ir.Block
    exit: ir.Block
    dtypes: list[DType]
    layouts: list[Layout]
    phis: list[list[ir.PhiInstr]]
    iv: ir.PhiInstr | None = None
    step: ir.Value | None = None
    breaks: list[tuple[ir.Block, list[TileVal]]] = field(default_factory=list)


def products(kern: KernelEmitter) -> bool:
    """Whether the kernel has a matrix product (its plan's products pass): the tensor-core
    lowerings (lower/tensorcore/; ~16 ms of CPU to import) are imported and consulted only
    then."""
    return kern.plan.products.has_products


def lowering_of(op: BuiltinOp):
    """The op's entry in the lowering table; the matrix products' family (lower/tensorcore/
    matmul.py, which pulls in the tensor-core modules: ~16 ms of CPU to import) is imported
    on the first product."""
    if op.name in PRODUCTS and op.name not in LOWERINGS:
        from tilelang.codegen.lower.tensorcore import matmul  # noqa: F401  (registers them)
    return lookup(op.name, op.builtin.group)


def emit_builtin(kern: KernelEmitter, op: BuiltinOp) -> None:
    """Emit one op and bind its result (the dispatch `KernelEmitter.emit_builtin` calls): a
    stream's consumer emits its stream, an op a stream computes leaves a placeholder, any other
    op goes to its lowering (module docstring); a fused reduction (lower/fused.py) computes its
    input itself and the members leave placeholders."""
    s = stream.streams(kern, op)
    g = fused.group(kern, op) if s is None else None
    if s is not None:
        result = stream.emit(kern, s)              # its loads come vector by vector
    elif g is not None:
        result = fused.emit(kern, g)               # its input computed register by register
    else:
        result = stream.deferred(kern, op) or fused.deferred(kern, op)
    if s is None and g is None and result is None and op.result is not None and \
            products(kern) and kern.plan.loops.resident_rescale(op.result.id) is not None:
        # attention's `O * f` on an output kept in tensor memory: the product does it there
        # (plan/loops.py R11, lower/tensorcore/tcgen05_attention.py)
        result = kern.env[kern.plan.loops.resident_rescale(op.result.id).carried]
    if s is None and g is None and result is None:
        fn = lowering_of(op)
        if fn is None:
            raise InternalCompilerError.at(
                "E0780", f"`{op.name}` has no code generation yet", op.span,
                help="this operation runs in the reference interpreter only for now")
        result = fn(kern, op)
    if op.result is not None:
        if result is None:
            raise InternalCompilerError.at("E0781", f"`{op.name}` produced no value", op.span)
        if isinstance(result, TileVal) and remat.pure(kern, op):
            result = replace(result, origin=op)
        kern.env[op.result.id] = result


def emit_region(kern: KernelEmitter, block: Block) -> tuple[str, list]:
    """Emit a region's ops. Returns (YIELD, tiles) or (CONDITION, [cond]) with the builder at
    the region's end, or (ESCAPED, []) when it ended in break/continue/return (branch done)."""
    deferred: dict = {}
    mma_epilogue = None
    if products(kern):
        from tilelang.codegen.lower.tensorcore import mma_epilogue
        if any(isinstance(o, BuiltinOp) and o.name in PRODUCTS for o in block.ops):
            deferred = kern.plan.products.deferred
    lines = kern.lineinfo
    outer = kern.builder.debug_metadata
    for op in block.ops:
        if lines is not None and op.span is not None:
            # every instruction of the op carries its line; the region's end (a loop's latch,
            # an if's merge) goes back to the enclosing op's (below, at yield and condition)
            kern.builder.debug_metadata = lines.loc(op.span)
        if isinstance(op, BuiltinOp) and op.result is not None and op.result.id in deferred:
            if deferred[op.result.id] is not None:      # the product copies it (cp.async)
                kern.env[op.result.id] = deferred[op.result.id]
        elif isinstance(op, BuiltinOp) and op.name == "store" and mma_epilogue is not None \
                and mma_epilogue.applies(kern, op):
            mma_epilogue.store(kern, op)                # an accumulator: 16-byte stores
        elif isinstance(op, BuiltinOp):
            kern.emit_builtin(op)
        elif isinstance(op, ConstantOp):
            kern.emit_constant(op)
        elif isinstance(op, IfOp):
            emit_if(kern, op)
        elif isinstance(op, ForOp):
            emit_for(kern, op)
        elif isinstance(op, WhileOp):
            emit_while(kern, op)
        elif isinstance(op, YieldOp):
            vals = [kern.tile(v) for v in op.values]
            kern.builder.debug_metadata = outer
            return YIELD, vals
        elif isinstance(op, ConditionOp):
            cond = [kern.tile(op.values[0])]
            kern.builder.debug_metadata = outer
            return CONDITION, cond
        elif isinstance(op, BreakOp):
            frame = kern.loops[-1]
            vals = _to_layouts(kern, [kern.tile(v) for v in op.values], frame.layouts)
            frame.breaks.append((kern.builder.block, vals))
            kern.builder.branch(frame.exit)
            return ESCAPED, []
        elif isinstance(op, ContinueOp):
            _next_iteration(kern, kern.loops[-1], [kern.tile(v) for v in op.values])
            return ESCAPED, []
        elif isinstance(op, ReturnOp):
            kern.builder.branch(kern.return_target)
            return ESCAPED, []
        else:
            raise TypeError(f"unknown op {op!r}")
    raise AssertionError("region without terminator")


def _to_layouts(kern: KernelEmitter, vals: list[TileVal], layouts: list[Layout]) -> list[TileVal]:
    return [convert(kern, v, lay) for v, lay in zip(vals, layouts)]


def _phis(kern: KernelEmitter, vals_by_pred: list[tuple[ir.Block, list[TileVal]]],
          dtypes: list[DType], layouts: list[Layout]) -> list[TileVal]:
    """Phis at the current (merge) block joining one tile list per predecessor."""
    b = kern.builder
    out = []
    for i, (dt, lay) in enumerate(zip(dtypes, layouts)):
        regs = []
        for r in range(lay.num_regs):
            ty = kern.llvm_type(dt)
            if not vals_by_pred:
                regs.append(ir.Constant(ty, ir.Undefined))
                continue
            first = vals_by_pred[0][1][i].regs[r]
            if all(v[i].regs[r] is first for _, v in vals_by_pred):
                regs.append(first)
                continue
            phi = b.phi(ty)
            for blk, vals in vals_by_pred:
                phi.add_incoming(vals[i].regs[r], blk)
            regs.append(phi)
        out.append(TileVal(dt, lay, tuple(regs)))
    return out


def emit_if(kern: KernelEmitter, op: IfOp) -> None:
    b = kern.builder
    cond = kern.tile(op.cond).value
    then_bb = kern.fn.append_basic_block("if.then")
    else_bb = kern.fn.append_basic_block("if.else")
    merge = kern.fn.append_basic_block("if.end")
    b.cbranch(cond, then_bb, else_bb)
    arrivals: list[tuple[ir.Block, list[TileVal]]] = []
    layouts = None
    for bb, region in ((then_bb, op.then), (else_bb, op.else_)):
        b.position_at_end(bb)
        kind, vals = emit_region(kern, region)
        if kind != YIELD:
            continue
        if layouts is None:
            layouts = [v.layout for v in vals]
        vals = _to_layouts(kern, vals, layouts)
        arrivals.append((b.block, vals))
        b.branch(merge)
    b.position_at_end(merge)
    res = op.results
    if res:
        dtypes = [r.type.dtype for r in res]
        lays = layouts or [kern.layout_for(r.type) for r in res]
        for r, t in zip(res, _phis(kern, arrivals, dtypes, lays)):
            kern.env[r.id] = t


def _header_phis(kern: KernelEmitter, init: list[TileVal], pre: ir.Block):
    b = kern.builder
    phis = []
    for t in init:
        row = []
        for reg in t.regs:
            phi = b.phi(reg.type)
            phi.add_incoming(reg, pre)
            row.append(phi)
        phis.append(row)
    return phis


def _next_iteration(kern: KernelEmitter, frame: LoopFrame, vals: list[TileVal]) -> None:
    b = kern.builder
    vals = _to_layouts(kern, vals, frame.layouts)
    if frame.iv is not None:
        nxt = b.add(frame.iv, frame.step)
        frame.iv.add_incoming(nxt, b.block)
    blk = b.block
    for row, t in zip(frame.phis, vals):
        for phi, reg in zip(row, t.regs):
            phi.add_incoming(reg, blk)
    b.branch(frame.header)


def _loop_results(kern: KernelEmitter, frame: LoopFrame, normal_exit: ir.Block,
                  carried: list[TileVal], results) -> None:
    b = kern.builder
    b.position_at_end(frame.exit)
    arrivals = [(normal_exit, carried)] + frame.breaks
    vals = _phis(kern, arrivals, frame.dtypes, frame.layouts)
    for r, t in zip(results, vals):
        kern.env[r.id] = t


def carried_layouts(kern: KernelEmitter, op: ForOp, init: list[TileVal]) -> list[TileVal]:
    """The loop-carried values in the layouts the loop's plan carries them in (plan/loops.py
    R6: a product's accumulator layout, a running max or sum's reduction layout), converted
    once before the loop instead of on every iteration. An output kept in tensor memory
    (R11) is stored there and carried as a token instead."""
    d = kern.plan.loops.by_iv.get(op.iv.id) if products(kern) else None
    if d is None or not any(d.carried):
        return init
    from tilelang.codegen.lower.tensorcore.mma_plan import to_layout
    out = [t if c is None or (d.resident is not None and i == d.resident.index)
           else to_layout(kern, t, c.layout) for i, (t, c) in enumerate(zip(init, d.carried))]
    if d.resident is not None:
        from tilelang.codegen.lower.tensorcore import tcgen05_attention
        out = tcgen05_attention.enter(kern, d.resident, out)
    return out


def emit_for(kern: KernelEmitter, op: ForOp) -> None:
    if products(kern) and kern.plan.loops.acc_pipeline(op):
        # a persistent loop over tiles run by producer, MMA and epilogue warps (plan/loops.py
        # R13); the epilogue warps run it as written, through _emit_loop
        from tilelang.codegen.lower.tensorcore import tcgen05_persistent
        tcgen05_persistent.emit_outer(kern, op, _emit_loop)
        return
    _emit_loop(kern, op)


def _emit_loop(kern: KernelEmitter, op: ForOp) -> None:
    pf = None
    if products(kern):
        from tilelang.codegen.lower.tensorcore import mma_prefetch
        from tilelang.codegen.lower.tensorcore.mma_pipeline import emit_pipelined, loop_plan
        lp = loop_plan(kern, op)
        if lp is not None:      # loads -> mma: a cp.async ring, software-pipelined
            emit_pipelined(kern, op, lp)
            return
    b = kern.builder
    start, stop, step = (kern.tile(v).value for v in (op.start, op.stop, op.step))
    ivt = kern.tile(op.start).dtype
    init = carried_layouts(kern, op, [kern.tile(v) for v in op.init])
    res = None
    if products(kern):
        pf = mma_prefetch.plan(kern, op)    # product operands copied an iteration ahead
        d = kern.plan.loops.by_iv.get(op.iv.id)
        res = d.resident if d is not None else None
    if res is not None:                     # R11: the output stays in tensor memory
        from tilelang.codegen.lower.tensorcore import tcgen05_attention
    if pf is not None:
        pf.begin(kern, start, stop, step, ivt)
    pre = b.block
    header = kern.fn.append_basic_block("for.header")
    body = kern.fn.append_basic_block("for.body")
    exit_ = kern.fn.append_basic_block("for.exit")
    b.branch(header)
    b.position_at_end(header)
    iv = b.phi(start.type)
    iv.add_incoming(start, pre)
    phis = _header_phis(kern, init, pre)
    if pf is not None:
        pf.header(kern, pre)
    zero = ir.Constant(step.type, 0)
    if ivt.signed:
        go = b.and_(b.icmp_signed(">", step, zero), b.icmp_signed("<", iv, stop))
    else:
        go = b.and_(b.icmp_unsigned(">", step, zero), b.icmp_unsigned("<", iv, stop))
    b.cbranch(go, body, exit_)
    carried = [TileVal(t.dtype, t.layout, tuple(row)) for t, row in zip(init, phis)]
    frame = LoopFrame(header, exit_, [t.dtype for t in init], [t.layout for t in init], phis,
                      iv, step)
    b.position_at_end(body)
    kern.env[op.iv.id] = TileVal(ivt, kern.scalar_layout, (iv,))
    for a, t in zip(op.carried, carried):
        kern.env[a.id] = t
    kern.loops.append(frame)
    if pf is not None:
        pf.enter(kern, iv)
    kind, vals = emit_region(kern, op.body)
    if kind == YIELD:
        if pf is not None:
            pf.latch(kern)
        _next_iteration(kern, frame, vals)
    kern.loops.pop()
    _loop_results(kern, frame, header, carried, op.results)
    if res is not None:
        tcgen05_attention.leave(kern, res, op.results)
    if pf is not None:
        pf.finish(kern)


def emit_while(kern: KernelEmitter, op: WhileOp) -> None:
    b = kern.builder
    init = [kern.tile(v) for v in op.init]
    pre = b.block
    header = kern.fn.append_basic_block("while.cond")
    body = kern.fn.append_basic_block("while.body")
    exit_ = kern.fn.append_basic_block("while.exit")
    b.branch(header)
    b.position_at_end(header)
    phis = _header_phis(kern, init, pre)
    carried = [TileVal(t.dtype, t.layout, tuple(row)) for t, row in zip(init, phis)]
    for a, t in zip(op.cond.args, carried):
        kern.env[a.id] = t
    kind, vals = emit_region(kern, op.cond)
    assert kind == CONDITION
    cond_end = b.block
    b.cbranch(vals[0].value, body, exit_)
    frame = LoopFrame(header, exit_, [t.dtype for t in init], [t.layout for t in init], phis)
    b.position_at_end(body)
    for a, t in zip(op.body.args, carried):
        kern.env[a.id] = t
    kern.loops.append(frame)
    kind, vals = emit_region(kern, op.body)
    if kind == YIELD:
        _next_iteration(kern, frame, vals)
    kern.loops.pop()
    _loop_results(kern, frame, cond_end, carried, op.results)


def emit_kernel_body(kern: KernelEmitter) -> None:
    """The kernel: thread setup, then the body once per block (exact mode) or once per
    virtual thread (virtual mode), then `ret`."""
    b = kern.builder
    kern.dispatch = emit_builtin
    kern.setup_threads()
    done = kern.fn.append_basic_block("exit")
    if kern.exact:
        kern.return_target = done
        if kern.plan.products.tmem_columns:
            # tensor memory for tcgen05 products; imported only then, as every tensor-core
            # lowering is (tests/codegen/test_llvm_shape.py)
            from tilelang.codegen.lower.tensorcore import tcgen05_tmem
            tcgen05_tmem.setup(kern)
        emit_region(kern, kern.kernel.body)
    else:
        _virtual_threads(kern, done)
    b.position_at_end(done)
    if kern.tmem is not None:
        from tilelang.codegen.lower.tensorcore import tcgen05_tmem
        tcgen05_tmem.teardown(kern)
    b.ret_void()
    kern.finish_smem()


# A body of at most this many LLVM instructions, without loops, is emitted twice: once for
# the full launch, straight through to `ret`, and once in the virtual-thread loop. The full
# launch then needs no test after its body (one branch per thread less); a larger body, or one
# with loops, would grow the code for a saving it does not notice.
VERSION_LIMIT = 512


def _loop_free(kern: KernelEmitter) -> bool:
    return not any(isinstance(o, (ForOp, WhileOp)) for o in walk(kern.kernel.body))


def _emitted_since(kern: KernelEmitter, first: int) -> int:
    return sum(len(bb.instructions) for bb in kern.fn.blocks[first:])


def _virtual_threads(kern: KernelEmitter, done: ir.Block) -> None:
    """The body once per virtual thread, laid out for the launch the runtime makes: the
    declared threads (docs/launch.md), which pass one uniform test of ntid in the entry block
    and run the body for v = tid; a smaller block goes round for v + ntid, v + 2 ntid, ...
    below `threads`. The full launch falls through every test of the way (NVPTX cannot
    invert a branch: the tests ask for the rare case, and the blocks are placed so that
    LLVM's instruction selection keeps them so)."""
    b = kern.builder
    i32 = ir.IntType(32)
    short = b.icmp_unsigned("<", kern.nthreads, ir.Constant(i32, kern.threads))
    fast = kern.fn.append_basic_block("vthread.full")
    loop = kern.fn.append_basic_block("vthread.short")
    body = kern.fn.append_basic_block("vthread.body")
    latch = kern.fn.append_basic_block("vthread.next")
    again = kern.fn.append_basic_block("vthread.again")
    entry_test = b.cbranch(short, loop, fast)
    entry_test.set_weights([1, 1024])
    b.position_at_end(loop)
    one_d = kern.block[1] == kern.block[2] == 1
    if one_d:
        # Declared 1-D, but `.maxntid` bounds only the product of the extents, so a block
        # may be (64, 2, 1). A full launch has ntid.x >= threads > declared / 2, hence
        # tid.y = tid.z = 0 and tid.x is the linear index; a short one takes the linear
        # index, at no cost to the full launch.
        ty, tz, ny = kern.sreg("tid.y"), kern.sreg("tid.z"), kern.sreg("ntid.y")
        lin = b.add(kern.tid, b.mul(kern.nthreads, b.add(ty, b.mul(ny, tz))), name="tidl")
    else:
        lin = kern.tid
    b.cbranch(b.icmp_unsigned("<", lin, ir.Constant(i32, kern.threads)), body, done)
    b.position_at_end(body)
    v = b.phi(i32, name="v")
    v.add_incoming(lin, loop)
    kern.vtid = v
    kern.return_target = latch
    first = len(kern.fn.blocks)
    emit_region(kern, kern.kernel.body)
    looped = kern.fn.blocks[first:]
    # Versioned: the full launch runs a copy of the body of its own, straight to `ret` (LLVM
    # keeps the copies apart: their ends go to different blocks), with no test after it and
    # nothing hoisted out of the loop on its way; else it joins the loop and leaves after
    # one turn by a second test of ntid.
    versioned = _loop_free(kern) and \
        len(body.instructions) + _emitted_since(kern, first) <= VERSION_LIMIT
    b.position_at_end(latch)
    if versioned:
        b.branch(again)
    else:
        b.cbranch(short, again, done).set_weights([1, 1024])
    b.position_at_end(again)
    # the block's size, read on this rare path (an asm with side effects, so that LLVM does
    # not hoist it into the full launch's path)
    size = block_test.block_size_read(b, x_only=False) if one_d else kern.nthreads
    # the next virtual thread through an opaque add: LLVM's loop strength reduction would
    # otherwise turn every address into a 64-bit induction variable set up before the loop,
    # which costs more than the one iteration a full-size launch runs
    nxt = b.asm(ir.FunctionType(i32, [i32, i32]), "add.u32 $0, $1, $2;", "=r,r,r",
                [v, size], False, name="vnext")
    v.add_incoming(nxt, again)
    b.cbranch(b.icmp_unsigned("<", nxt, ir.Constant(i32, kern.threads)), body, done)
    b.position_at_end(fast)
    head = [fast]
    if kern.declared_threads != kern.threads:
        # a block of up to `declared_threads` (not a power of two) does the work of the
        # power of two below it: the real threads past it have none
        head.append(kern.fn.append_basic_block("vthread.first"))
        b.cbranch(b.icmp_unsigned("<", kern.tid, ir.Constant(i32, kern.threads)), head[-1],
                  done)
        b.position_at_end(head[-1])
    # Block order: each path's blocks in the order they run, the full launch's first (LLVM's
    # instruction selection turns a branch whose true side is the next block into a branch
    # on the opposite condition, which the later block placement cannot do: the
    # inside-tests' `@p bra edge` would become `@p bra next; bra.uni edge`).
    if not versioned:
        b.branch(body)
        v.add_incoming(kern.tid, head[-1])
        _place(kern, [kern.entry] + head + [body] + looped + [latch, done, loop, again])
        return
    # the body again: its ops' values are made anew (kern.env), and what lowerings keep in
    # the emitter's once-per-kernel values must dominate both copies (they are made in the
    # entry block)
    kern.vtid = kern.tid
    kern.return_target = done
    first = len(kern.fn.blocks)
    if emit_region(kern, kern.kernel.body)[0] != ESCAPED:
        b.branch(done)
    full = kern.fn.blocks[first:]
    # one test for the full launch where the body starts with an edge guard
    # (emit/block_test.py): the rare block goes right before the guard's rare side
    folded = block_test.fold(b, kern.fn, entry_test, fast, short, kern.threads, one_d) \
        if head == [fast] else None
    if folded is not None:
        full.insert(full.index(folded.edge), folded.rare)
    _place(kern, [kern.entry] + head + full + [done, loop, body] + looped + [latch, again])


def _place(kern: KernelEmitter, order: list) -> None:
    """Reorder the function's blocks (every block once: a lost one would be a broken IR)."""
    assert sorted(map(id, order)) == sorted(map(id, kern.fn.blocks)), "block order"
    kern.fn.blocks[:] = order
