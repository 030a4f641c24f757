"""A kernel's tensor memory (TMEM) for its tcgen05 products (docs/codegen.md, "sm_100a"):
allocated once when the kernel starts and freed when it ends, so that a product in a loop
does not allocate again after the CTA gave up its allocation permit (an allocation after
`tcgen05.relinquish_alloc_permit` is an error).

    start: thread 0 initializes the products' completion mbarrier; warp 0:
           tcgen05.alloc of the plan's columns (the widest product's), the address into a
           shared word, relinquish_alloc_permit; a barrier between tcgen05's thread-sync
           fences; every thread reads the address
    end:   tcgen05.fence::before_thread_sync; barrier; warp 0: tcgen05.dealloc; thread 0:
           mbarrier.inval
A kernel whose ring runs on a CTA pair (plan/loops.py R8) allocates the pair's tensor memory
(cta_group::2), after a cluster barrier, and frees it after another.

The mbarrier completes one phase per product; the parity to wait for is kept in a variable
of the entry block (promoted to registers) and flips after each wait.
"""

from __future__ import annotations

import llvmlite.ir as ir

from tilelang.codegen.emit.kernel import I32, KernelEmitter
from tilelang.codegen.lower.tensorcore import mma_sync, pipe_loop, tma_load
from tilelang.record import record


@record
class Tmem:
    columns: int
    address: ir.Value          # the allocation's TMEM address (lane 0, column 0)
    bar: ir.Value              # 32-bit shared address of the completion mbarrier
    parity: ir.Value           # i32 variable: the phase the next product waits for
    pipe: object = None        # a persistent kernel's accumulator pipeline
                               # (tcgen05_persistent.AccPipe)


def _c(v: int) -> ir.Constant:
    return ir.Constant(I32, v)


def void(kern: KernelEmitter, text: str, args=(), cons: str = "") -> None:
    cons = ",".join(c for c in (cons, "~{memory}") if c)
    tma_load._asm(kern, text, list(args), cons)


def on_warp0(kern: KernelEmitter, name: str, fn) -> None:
    """`fn()` in a block warp 0 alone runs (the .sync.aligned allocation instructions)."""
    b = kern.builder
    then = kern.fn.append_basic_block(name)
    after = kern.fn.append_basic_block(f"{name}.end")
    b.cbranch(b.icmp_unsigned("<", kern.tid, _c(32)), then, after)
    b.position_at_end(then)
    fn()
    b.branch(after)
    b.position_at_end(after)


def _group(kern: KernelEmitter) -> str:
    """The allocation's CTA group: the pair's when a ring runs on it (plan/loops.py R8)."""
    return "cta_group::2" if kern.plan.loops.tc5_pair else "cta_group::1"


def cluster_sync(kern: KernelEmitter) -> None:
    """A barrier of the whole cluster that orders tcgen05 operations across its CTAs (and
    publishes shared-memory writes and mbarrier initializations to the other CTA)."""
    void(kern, "tcgen05.fence::before_thread_sync;")
    void(kern, "barrier.cluster.arrive.release.aligned;")
    void(kern, "barrier.cluster.wait.acquire.aligned;")
    void(kern, "tcgen05.fence::after_thread_sync;")


def thread_sync(kern: KernelEmitter) -> None:
    """A barrier that orders tcgen05 operations across threads (the fence pair around it)."""
    void(kern, "tcgen05.fence::before_thread_sync;")
    kern.barrier()
    void(kern, "tcgen05.fence::after_thread_sync;")


def setup(kern: KernelEmitter) -> None:
    # the widest product's columns (twice for two accumulators: plan/loops.py R13), or S's
    # and the output's (R11)
    cols = max(kern.plan.products.tmem_columns * kern.plan.loops.tc5_acc_buffers,
               kern.plan.loops.tmem_columns)
    if not cols:
        return
    b = kern.builder
    words = mma_sync.shared_address(kern, kern.kept_smem(16, 8))
    bar, slot = words, b.add(words, _c(8))
    here = b.block
    b.position_at_start(kern.entry)
    parity = b.alloca(I32, name="tc5.parity")
    b.store(_c(0), parity)
    b.position_at_end(here)
    pipe_loop.on_thread0(kern, "tc5.init", lambda: tma_load.mbarrier_init(kern, bar, 1))
    g = _group(kern)
    if kern.plan.loops.tc5_pair:
        cluster_sync(kern)              # both CTAs of the pair run before it allocates
    on_warp0(kern, "tc5.alloc", lambda: (
        void(kern, f"tcgen05.alloc.{g}.sync.aligned.shared::cta.b32 [$0], {cols};",
             [slot], "r"),
        void(kern, f"tcgen05.relinquish_alloc_permit.{g}.sync.aligned;")))
    thread_sync(kern)
    addr = tma_load._asm(kern, "ld.shared.b32 $0, [$1];", [slot], "=r,r,~{memory}", I32)
    kern.tmem = Tmem(cols, addr, bar, parity)


def teardown(kern: KernelEmitter) -> None:
    t = kern.tmem
    if t is None:
        return
    if kern.barrier_threads:
        # a warp-specialized ring's producer and MMA warps are done (tcgen05_ws.py): the
        # epilogue warps free the columns, the others pass by the named barrier (and, on a
        # CTA pair, meet every thread of the cluster at its barrier first)
        pair = kern.plan.loops.tc5_pair
        _on_epilogue(kern, "tc5.teardown",
                     thread_sync if pair else lambda k: _free(k, t))
        if pair:
            cluster_sync(kern)      # the pair's columns: freed once both CTAs are done
            _on_epilogue(kern, "tc5.teardown.free", lambda k: _dealloc(k, t))
        return
    _free(kern, t)


def _on_epilogue(kern: KernelEmitter, name: str, fn) -> None:
    """`fn(kern)` by the first `kern.barrier_threads` threads (a specialized ring's epilogue
    warps)."""
    b = kern.builder
    then = kern.fn.append_basic_block(name)
    after = kern.fn.append_basic_block(f"{name}.end")
    b.cbranch(b.icmp_unsigned("<", kern.tid, _c(kern.barrier_threads)), then, after)
    b.position_at_end(then)
    fn(kern)
    b.branch(after)
    b.position_at_end(after)


def _free(kern: KernelEmitter, t: Tmem) -> None:
    thread_sync(kern)
    if kern.plan.loops.tc5_pair:
        # the pair's columns: freed once both CTAs are done with them
        cluster_sync(kern)
    _dealloc(kern, t)


def _dealloc(kern: KernelEmitter, t: Tmem) -> None:
    on_warp0(kern, "tc5.dealloc", lambda: void(
        kern, f"tcgen05.dealloc.{_group(kern)}.sync.aligned.b32 $0, {t.columns};",
        [t.address], "r"))
    pipe_loop.on_thread0(kern, "tc5.inval", lambda: tma_load.mbarrier_inval(kern, t.bar))


def wait(kern: KernelEmitter) -> None:
    """Wait for the mbarrier's next phase (the products' tcgen05.commit) and flip the
    parity."""
    b = kern.builder
    t = kern.tmem
    par = b.load(t.parity)
    tma_load.wait_parity(kern, t.bar, par)
    b.store(b.xor(par, _c(1)), t.parity)
