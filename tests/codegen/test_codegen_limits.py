"""Code generation refuses, early and with a diagnostic, what it cannot build (issue 12,
item 8): a tile that gives each thread more elements than MAX_ELEMENTS_PER_THREAD (E0783),
before LLVM spends minutes and gigabytes on it; and every optimization level links."""

from __future__ import annotations

import time

import pytest

from tilelang.codegen.generate import MAX_ELEMENTS_PER_THREAD, check_elements_per_thread
from tilelang.diagnostics import render_all
from tilelang.driver import compile_source
from tilelang.options import CompileOptions

COPY = """\
@launch(maxntid = (THREADS, 1, 1))
kernel k(a: Array[f32, 1], b: Array[f32, 1]) {
    let t = load(a, index = (0,), shape = (SIZE,), padding = 0.0);
    store(b, index = (0,), tile = t);
}
"""


def copy_kernel(threads: int, size: int) -> str:
    return COPY.replace("THREADS", str(threads)).replace("SIZE", str(size))


def test_a_million_element_load_is_refused_at_once():
    t0 = time.perf_counter()
    res = compile_source(copy_kernel(128, 1 << 20), "big.tile", until="ptx")
    took = time.perf_counter() - t0
    assert render_all(res.diagnostics) == """\
error[E0783]: `load` makes a Tile[f32, 1048576]: 8192 elements for each of the 128 threads \
of kernel `k`, more than the 128 a thread can hold
 --> big.tile:3:13
  |
3 |     let t = load(a, index = (0,), shape = (1048576,), padding = 0.0);
  |             ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  |
  = help: use smaller tiles (and more blocks in the grid), or more threads \
(`@launch(maxntid = ...)`, up to 1024)"""
    assert res.ptx == "" and took < 10


@pytest.mark.parametrize("threads", [32, 96, 128, 1024])
def test_the_limit_counts_the_threads_layouts_use(threads):
    """Layouts use the largest power of two of threads: 96 threads spread a tile over 64."""
    used = 1 << (threads.bit_length() - 1)
    ok = compile_source(copy_kernel(threads, used * MAX_ELEMENTS_PER_THREAD), "k.tile",
                        until="tir")
    assert ok.ok, render_all(ok.diagnostics)
    check_elements_per_thread(ok.ir.kernels[0], (threads, 1, 1))  # exactly the limit: fine
    # one element per thread more than the limit, rounded to a power of two: twice the limit
    res = compile_source(copy_kernel(threads, used * MAX_ELEMENTS_PER_THREAD * 2), "k.tile",
                         until="ptx")
    assert [d.code for d in res.diagnostics] == ["E0783"]
    assert f"{2 * MAX_ELEMENTS_PER_THREAD} elements for each of the {used} threads" in \
        res.diagnostics[0].message


def test_matmul_accumulator_of_128_per_thread_is_accepted():
    """The example's 128 x 128 f32 accumulator over 128 threads (128 per thread, exactly the
    limit) stays."""
    src = """\
@launch(reqntid = (128, 1, 1))
kernel mm(a: Array[f16, 2], b: Array[f16, 2], c: Array[f32, 2]) {
    var acc = zeros((128, 128), f32);
    acc = mma(load(a, index = (0, 0), shape = (128, 32)),
              load(b, index = (0, 0), shape = (32, 128)), acc);
    store(c, index = (0, 0), tile = acc);
}
"""
    res = compile_source(src, "mm.tile", until="tir")
    assert res.ok, render_all(res.diagnostics)
    check_elements_per_thread(res.ir.kernels[0], (128, 1, 1))  # raises nothing


def test_assigning_a_builtin_is_a_check_error_not_an_internal_one():
    res = compile_source("kernel k(a: Array[f32, 1]) { store = 1.0; }", "s.tile", until="ptx")
    assert [d.code for d in res.diagnostics] == ["E0203"]
    assert res.diagnostics[0].message == "cannot assign to the built-in `store`"


def _nvjitlink() -> bool:
    try:
        from cuda.bindings import nvjitlink  # noqa: F401
    except Exception:
        return False
    return True


@pytest.mark.skipif(not _nvjitlink(), reason="nvJitLink is not installed")
@pytest.mark.parametrize("opt", [0, 1, 2, 3])
def test_every_optimization_level_links(opt):
    """nvJitLink accepts only -O0/-O3 itself; -O1/-O2 reach ptxas through -Xptxas."""
    res = compile_source(copy_kernel(128, 1024), "k.tile", CompileOptions(opt_level=opt),
                         until="cubin")
    assert res.ok, render_all(res.diagnostics)
    assert res.cubin[:4] == b"\x7fELF"
    assert (f"-O{opt}" if opt in (0, 3) else f"-Xptxas=-O{opt}") in res.link.options


F8_SRC = """\
kernel k(a: Array[f32, 1], d: Array[f8e5m2, 1], e: Array[f8e4m3, 1]) {
    let x = load(a, index = (0,), shape = (64,), padding = 0.0);
    store(d, index = (0,), tile = x.astype(f8e5m2));
    store(e, index = (0,), tile = (load(e, index = (0,), shape = (64,)).astype(f32) + x)
                                 .astype(f8e4m3));
}
"""


@pytest.mark.parametrize("target, cvts", [("sm_89", 0), ("sm_90", 3), ("sm_80", 0)])
def test_f8_conversions_compile_on_every_target(target, cvts):
    """sm_89 has the f8 `cvt`s only from PTX 8.1, its kernels are PTX 7.8, and LLVM aborted
    the whole process ("Cannot select: intrinsic llvm.nvvm.ff.to.e4m3x2.rn"): sm_89 uses the
    integer code. Compiled in a child so that an abort fails this test, not pytest."""
    import subprocess
    import sys
    code = ("import sys\nfrom tilelang.driver import compile_source\n"
            "from tilelang.options import CompileOptions\n"
            f"r = compile_source({F8_SRC!r}, 'f8.tile', CompileOptions(target={target!r}), "
            "until='ptx')\nassert r.ok, r.diagnostics\n"
            "print(sum(l.lstrip().startswith('cvt.rn') and 'x2' in l "
            "for l in r.ptx.splitlines() if 'e4m3x2' in l or 'e5m2x2' in l))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    assert (int(p.stdout.split()[-1]) > 0) == (cvts > 0)


def test_too_much_unrolled_work_is_refused_before_llvm():
    """100 unrolled iterations of three 128-per-thread operations (`x - f32(i)` differs per
    iteration, so nothing is shared): 38,656 element operations per thread, past
    MAX_ELEMENT_OPS_PER_THREAD; LLVM would take most of a minute on it."""
    from tilelang.codegen.generate import MAX_ELEMENT_OPS_PER_THREAD
    src = """\
kernel k(a: Array[f32, 1], b: Array[f32, 1]) {
    let x = load(a, index = (0,), shape = (16384,), padding = 0.0);
    var acc = zeros((16384,), f32);
    static for i in range(100) {
        acc = acc * 0.5 + (x - f32(i));
    }
    store(b, index = (0,), tile = acc);
}
"""
    t0 = time.process_time()
    res = compile_source(src, "unrolled.tile", until="ptx")
    assert time.process_time() - t0 < 10
    assert [d.code for d in res.diagnostics] == ["E0784"]
    d = res.diagnostics[0]
    total = 16384 // 128 * (2 + 3 * 100)   # load and zeros, then `*`, `-`, `+` per iteration
    assert d.message == (f"kernel `k` computes {total} tile elements per thread in all (every "
                         f"operation, `static for` unrolled and calls inlined), more than the "
                         f"{MAX_ELEMENT_OPS_PER_THREAD} code generation takes")
    assert (d.span.line, d.span.col) == (1, 8) and res.ptx == ""
