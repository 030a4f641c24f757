"""Atomics with a memory order and a scope, `fence`, float atomic_max/min: the PTX qualifiers
(linked by nvJitLink for sm_80 and sm_90a, so the forms are legal), the barriers a scalar
atomic adds for the whole block, the diagnostics, and the patterns of docs/language.md (last
block reduces, spin lock) on the emulator against NumPy."""

from __future__ import annotations

import re

import numpy as np
import pytest

from gen_support import link, run_emulated
from ops_support import rng_for, run_ops
from tilelang.diagnostics import render_all
from tilelang.driver import compile_source
from tilelang.options import CompileOptions
from tilelang.emulator.device import EmulatorDevice
from tilelang.ir.builder import KernelBuilder
from tilelang.sema.types import F32, F64, I32, ArrayType

SEMS = ("relaxed", "acquire", "release", "acq_rel")
SCOPES = {"block": "cta", "cluster": "cluster", "device": "gpu", "system": "sys"}


def compile_text(src: str, target: str = "sm_90a"):
    res = compile_source(src, "<atomic>.tile", CompileOptions(target=target), until="ptx")
    assert res.ok, render_all(res.diagnostics)
    link(res.codegen)
    return res.codegen


def errors(src: str) -> list[str]:
    res = compile_source(src, "<atomic>.tile", CompileOptions(), until="ptx")
    assert not res.ok
    return [f"{d.code}: {d.message}" for d in res.diagnostics]


def tile_atomic(sem: str, scope: str, used: bool) -> str:
    keep = "store(o, index = (0,), tile = old);" if used else ""
    return f"""
kernel k(a: Array[u32, 1], o: Array[u32, 1]) {{
    let old = atomic_add(a, arange(128, i32) % 8, ones((128,), u32), sem = "{sem}",
                         scope = "{scope}");
    {keep}
}}
"""


@pytest.mark.parametrize("target", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("scope", list(SCOPES))
@pytest.mark.parametrize("sem", SEMS)
def test_qualifiers_in_the_ptx(sem, scope, target):
    """`atom.<sem>.<scope>` with the old value used; `red` where it is not and the order does
    not acquire; a cluster scope without clusters (sm_80) is the GPU scope."""
    sc = SCOPES[scope] if scope != "cluster" or target != "sm_80" else "gpu"
    used = compile_text(tile_atomic(sem, scope, True), target).ptx
    assert re.search(rf"@%p\d+ atom\.{sem}\.{sc}\.global\.add\.u32 %r\d+, \[%rd\d+\], %r\d+;",
                     used)
    unused = compile_text(tile_atomic(sem, scope, False), target).ptx
    op = "atom" if sem in ("acquire", "acq_rel") else "red"
    assert re.search(rf"@%p\d+ {op}\.{sem}\.{sc}\.global\.add\.u32 ", unused)
    assert "bar.sync" not in used + unused    # a tile atomic orders per thread: no barrier


def test_defaults_are_acq_rel_at_device_scope():
    src = """
kernel k(a: Array[i32, 1], x: Array[f32, 1]) {
    atomic_xor(a, arange(32, i32), ones((32,), i32));
    atomic_max(x, arange(32, i32), full((32,), 1.5, f32));
}
"""
    ptx = compile_text(src).ptx
    assert re.search(r"atom\.acq_rel\.gpu\.global\.xor\.b32", ptx)
    assert re.search(r"atom\.acq_rel\.gpu\.global\.max\.s32", ptx)
    assert re.search(r"atom\.acq_rel\.gpu\.global\.min\.u32", ptx)


def test_masked_elements_cost_no_branch():
    """Each element is one predicated instruction: a mask and the bounds tests add no `bra`
    (the kernel's branches are the load's and store's uniform inside-or-edge tests)."""
    def branches(mask):
        src = f"""
kernel k(a: Array[i32, 1], i: Array[i32, 1], o: Array[i32, 1]) {{
    let idx = load(i, index = (0,), shape = (256,));
    let old = atomic_add(a, idx, ones((256,), i32){mask}, sem = "relaxed");
    store(o, index = (0,), tile = old);
}}
"""
        ptx = compile_text(src).ptx
        body = ptx[ptx.index(".entry k("):]
        assert len(re.findall(r"@%p\d+ atom\.relaxed\.gpu\.global\.add\.u32", body)) >= 2
        return len(re.findall(r"\bbra(\.uni)?\b", body))
    assert branches(", mask = idx >= 3") == branches("")


@pytest.mark.parametrize("sem,scope", [("acq_rel", "device"), ("sc", "block"),
                                       ("acq_rel", "system"), ("sc", "cluster")])
def test_fence_is_a_block_level_fence(sem, scope):
    src = f"""
kernel k(a: Array[f32, 1]) {{
    store(a, index = (bid(0),), tile = zeros((128,), f32));
    fence(sem = "{sem}", scope = "{scope}");
    store(a, index = (bid(0),), tile = ones((128,), f32));
}}
"""
    ptx = compile_text(src).ptx
    m = re.search(rf"bar\.sync\s+0;\s*(//[^\n]*\s*)*fence\.{sem}\.{SCOPES[scope]};\s*"
                  rf"(//[^\n]*\s*)*bar\.sync\s+0;", ptx)
    assert m, ptx


def test_scalar_atomics_fence_the_block():
    """A scalar release atomic waits for the block's earlier accesses (a barrier before it);
    an acquire one makes the block's later accesses wait (a barrier after); relaxed neither."""
    def ptx(sem):
        return compile_text(f"""
kernel k(c: Array[i32, 1], x: Array[f32, 1]) {{
    store(x, index = (bid(0),), tile = ones((256,), f32));
    atomic_add(c, 0, 1, sem = "{sem}");
    store(x, index = (bid(0),), tile = zeros((256,), f32));
}}
""").ptx
    for sem, before, after in (("relaxed", False, False), ("release", True, False),
                               ("acquire", False, True), ("acq_rel", True, True)):
        text = ptx(sem)
        i = re.search(r"(atom|red)\.\w+\.gpu\.global\.add\.u32", text).start()
        assert ("bar.sync" in text[:i]) == before, sem
        assert ("bar.sync" in text[i:]) == after, sem


@pytest.mark.parametrize("src,want", [
    ('atomic_add(a, 0, 1, sem = "seq_cst");',
     'E0507: `atomic_add`: parameter `sem` must be one of "relaxed", "acquire", "release", '
     '"acq_rel", found "seq_cst"'),
    ('atomic_add(a, 0, 1, scope = "gpu");',
     'E0507: `atomic_add`: parameter `scope` must be one of "block", "cluster", "device", '
     '"system", found "gpu"'),
    ('fence(sem = "relaxed");',
     'E0507: `fence`: parameter `sem` must be one of "acq_rel", "sc", found "relaxed"'),
    ('atomic_add(a, 0, 1, sem = 1);',
     'E0506: `atomic_add`: parameter `sem` must be a string literal, found `1`'),
    ('atomic_and(f, 0, 1.0);',
     'E0508: `atomic_and`: parameter `A` is Array[f32, 1], but atomic_and takes arrays of '
     'i32, u32, i64, u64'),
])
def test_diagnostics(src, want):
    text = f"kernel k(a: Array[i32, 1], f: Array[f32, 1]) {{ {src} }}"
    got = errors(text)
    assert got[0] == want, got


@pytest.mark.parametrize("dt", ["f32", "f64"])
@pytest.mark.parametrize("kind", ["max", "min"])
def test_float_max_min_on_the_emulator(kind, dt):
    """Contended float max/min of mixed signs (zeros of both signs included) on the emulator,
    the interpreter and NumPy; old values are one valid serialization."""
    DT, npdt = (F32, np.float32) if dt == "f32" else (F64, np.float64)
    kb = KernelBuilder("fmax", attributes={"reqntid": (64, 1, 1)})
    A = kb.param("A", ArrayType(DT, 1))
    I_ = kb.param("I", ArrayType(I32, 1))
    V = kb.param("V", ArrayType(DT, 1))
    O = kb.param("O", ArrayType(DT, 1))
    idx = kb.op("load", I_, index=(0,), shape=(256,), padding=-1)
    v = kb.op("load", V, index=(0,), shape=(256,))
    old = kb.op(f"atomic_{kind}", A, idx, v, mask=kb.op("!=", idx, 2))
    kb.op("store", O, index=(0,), tile=old)
    k = kb.finish()
    rng = rng_for(kind, dt)
    A0 = np.array([-3.0, 5.0, 1.0, -0.0, 0.0, -1e30, 1e30, 2.5], npdt)
    I = rng.integers(-1, 9, 256).astype(np.int32)
    V = (rng.standard_normal(256) * 10).astype(npdt)
    V[::17] = 0.0
    run = run_ops(k, [A0, I, V, np.zeros(256, npdt)], (2, 1, 1))
    ok = (I >= 0) & (I < 8) & (I != 2)
    f = np.maximum if kind == "max" else np.minimum
    want = A0.copy()
    for a in range(8):
        sel = ok & (I == a)
        if sel.any():
            want[a] = f(A0[a], f.reduce(V[sel]))
    for Ae, Oe in ((run.emu[0], run.emu[3]), (run.ref[0], run.ref[3])):
        np.testing.assert_array_equal(Ae, want)
        assert np.all(Oe[~ok] == 0)
        for a in np.unique(I[ok]):   # every old value is the start or one of the values
            seen = set(Oe[ok & (I == a)].tolist())
            assert seen <= set(V[ok & (I == a)].tolist()) | {float(A0[a])}


LAST_BLOCK = """
kernel last_block(x: Array[f32, 1], part: Array[f32, 1], count: Array[i32, 1],
                  out: Array[f32, 1]) {
    store(part, index = (bid(0),), tile = expand_dims(sum(load(x, index = (bid(0),),
                                                               shape = (128,))), 0));
    let ticket = atomic_add(count, 0, 1);          // acq_rel: after the block's store
    if ticket == num_blocks(0) - 1 {               // the last block sees every partial sum
        let p = load(part, index = (0,), shape = (16,));
        store(out, index = (0,), tile = expand_dims(sum(p), 0));
    }
}
"""


@pytest.mark.parametrize("target", ["sm_80", "sm_90a"])
def test_last_block_reduces(target):
    r = compile_text(LAST_BLOCK, target)
    x = rng_for("last").integers(-9, 9, 11 * 128).astype(np.float32)
    part, count, out = np.zeros(11, np.float32), np.zeros(1, np.int32), np.zeros(1, np.float32)
    run_emulated(r, "last_block", [x, part, count, out], (11, 1, 1))
    assert count[0] == 11 and out[0] == x.sum()
    np.testing.assert_array_equal(part, x.reshape(11, 128).sum(1))


SPIN_LOCK = """
kernel locked_sum(x: Array[f32, 2], acc: Array[f32, 1], lock: Array[i32, 1]) {
    let t = reshape(load(x, index = (bid(0), 0), shape = (1, 64)), (64,));
    while atomic_cas(lock, 0, 0, 1, sem = "acquire") != 0 {}
    store(acc, index = (0,), tile = load(acc, index = (0,), shape = (64,)) + t);
    atomic_xchg(lock, 0, 0, sem = "release");
}
"""


class _Bounded(EmulatorDevice):
    """A launch that does not finish in a bounded number of steps fails instead of hanging."""

    def launch(self, *args, **kw):
        kw.setdefault("max_steps", 200_000)
        return super().launch(*args, **kw)


def test_spin_lock_ptx():
    ptx = compile_text(SPIN_LOCK).ptx
    assert re.search(r"atom\.acquire\.gpu\.global\.cas\.b32", ptx)
    assert re.search(r"atom\.release\.gpu\.global\.exch\.b32", ptx)
    i = ptx.index("atom.release")
    assert "bar.sync" in ptx[ptx.index("atom.acquire"):i]     # the block waits for the lock


def test_spin_lock_on_the_emulator():
    """Six blocks take turns: a lost compare-and-swap spins until the holder releases."""
    r = compile_text(SPIN_LOCK)
    x = rng_for("lock").integers(-9, 9, (6, 64)).astype(np.float32)
    acc, lock = np.zeros(64, np.float32), np.zeros(1, np.int32)
    run_emulated(r, "locked_sum", [x, acc, lock], (6, 1, 1), dev=_Bounded())
    np.testing.assert_array_equal(acc, x.sum(0))
    assert lock[0] == 0


FENCED = """
kernel fenced(x: Array[f32, 1], part: Array[f32, 1], count: Array[i32, 1],
              out: Array[f32, 1]) {
    store(part, index = (bid(0),), tile = expand_dims(sum(load(x, index = (bid(0),),
                                                               shape = (128,))), 0));
    fence();                                        // CUDA's __threadfence() pattern
    let ticket = atomic_add(count, 0, 1, sem = "relaxed");
    if ticket == num_blocks(0) - 1 {
        fence(sem = "sc", scope = "device");
        store(out, index = (0,), tile = expand_dims(sum(load(part, index = (0,),
                                                                 shape = (16,))), 0));
    }
}
"""


def test_fences_around_a_relaxed_ticket():
    r = compile_text(FENCED)
    assert r.ptx.count("fence.acq_rel.gpu;") == 1 and r.ptx.count("fence.sc.gpu;") == 1
    assert re.search(r"atom\.relaxed\.gpu\.global\.add\.u32", r.ptx)
    x = rng_for("fenced").integers(-9, 9, 13 * 128).astype(np.float32)
    part, count, out = np.zeros(13, np.float32), np.zeros(1, np.int32), np.zeros(1, np.float32)
    run_emulated(r, "fenced", [x, part, count, out], (13, 1, 1))
    assert count[0] == 13 and out[0] == x.sum()
