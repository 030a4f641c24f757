"""Control-flow pieces shared by the pipelined products' rings (lower/tensorcore/mma_pipeline.py,
lower/tensorcore/wgmma_product.py, lower/tensorcore/mma_prefetch.py): the loop header over the iterations and
a block only thread 0 runs."""
from __future__ import annotations

import llvmlite.ir as ir

from tilelang.codegen.emit.kernel import KernelEmitter


def on_thread0(kern: KernelEmitter, name: str, fn) -> None:
    """Emits `fn()` in a block that thread 0 alone runs (blocks `name`, `name`.end); the
    builder continues after it. Thread 0, not a replica: one issue per CTA."""
    b = kern.builder
    then = kern.fn.append_basic_block(name)
    after = kern.fn.append_basic_block(f"{name}.end")
    b.cbranch(b.icmp_unsigned("==", kern.tid, ir.Constant(ir.IntType(32), 0)), then, after)
    b.position_at_end(then)
    fn()
    b.branch(after)
    b.position_at_end(after)


def loop_header(kern: KernelEmitter, header_name: str, body_name: str, exit_, start, stop,
                ivt, positive, *, named=(), carried=()):
    """Opens a loop `for iv in start, start+step, ... while positive and iv < stop` from the
    current block: a header block with the phis (`iv`, then one named phi per (name, type,
    initial) of `named`, then an unnamed one per initial value of `carried`) and the test.
    `exit_` is the exit block, or its name for a new one. Leaves the builder in the body;
    returns (iv, named phis, carried phis, header, exit block). The caller's latch adds the
    phis' incoming values and branches back to the header."""
    b = kern.builder
    pre = b.block
    header = kern.fn.append_basic_block(header_name)
    body = kern.fn.append_basic_block(body_name)
    if isinstance(exit_, str):
        exit_ = kern.fn.append_basic_block(exit_)
    b.branch(header)
    b.position_at_end(header)
    iv = b.phi(start.type, "iv")
    iv.add_incoming(start, pre)
    names = []
    for name, ty, init in named:
        p = b.phi(ty, name)
        p.add_incoming(init, pre)
        names.append(p)
    phis = []
    for v in carried:
        p = b.phi(v.type)
        p.add_incoming(v, pre)
        phis.append(p)
    if ivt.signed:
        go = b.and_(positive, b.icmp_signed("<", iv, stop))
    else:
        go = b.and_(positive, b.icmp_unsigned("<", iv, stop))
    b.cbranch(go, body, exit_)
    b.position_at_end(body)
    return iv, names, phis, header, exit_
