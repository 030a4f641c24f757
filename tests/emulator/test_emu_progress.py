"""Never a hang: spin locks between blocks complete when correct and are reported as "no
progress" when they can never complete; the step limit is the user's to set."""

import json
import pathlib
import time

import numpy as np
import pytest

from emu_support import kernel_ptx
from tilelang.emulator import EmulatorDevice
from tilelang.emulator.errors import EmulatorError, ExecutionError, NoProgress

FIXTURES = pathlib.Path(__file__).parent / "fixtures"

LOCK = """
  ld.param.u64 %rd1, [k_p0];
  ld.param.u64 %rd2, [k_p1];
  mov.u32 %r9, %tid.x;
  setp.ne.u32 %p1, %r9, 0;
  @%p1 bra DONE;
  mov.u32 %r10, %ctaid.x;
SPIN:
  atom.{acquire}global.cas.b32 %r1, [%rd1], 0, 1;
  setp.ne.u32 %p2, %r1, 0;
  @%p2 bra SPIN;
  ld.global.u32 %r2, [%rd2];
  add.s32 %r3, %r2, %r10;
  add.s32 %r3, %r3, 1;
  st.global.u32 [%rd2], %r3;
{release}
DONE:
  ret;
"""


def run_lock(blocks, acquire="acquire.gpu.", release="atom.release.gpu.global.exch.b32 "
             "%r4, [%rd1], 0;", **kw):
    dev = EmulatorDevice(**kw)
    ptx = kernel_ptx(LOCK.replace("{acquire}", acquire).replace("{release}", "  " + release),
                     nparams=2)
    fn = dev.load_module(ptx).get_function("k")
    lock, data = dev.to_device(np.zeros(1, np.uint32)), dev.to_device(np.zeros(1, np.uint32))
    dev.launch(fn, (blocks, 1, 1), (64, 1, 1), [lock, data])
    return int(dev.from_device(data, (1,), np.uint32)[0])


@pytest.mark.parametrize("release", ["atom.release.gpu.global.exch.b32 %r4, [%rd1], 0;",
                                     "st.release.gpu.global.u32 [%rd1], 0;",
                                     "red.release.sys.global.and.b32 [%rd1], 0;"])
@pytest.mark.parametrize("blocks", [2, 16])
def test_correct_lock_completes(blocks, release):
    # min-PC scheduling alone would run the waiting block's loop forever and starve the
    # holder; spinning threads are parked until memory may have changed
    assert run_lock(blocks, release=release) == blocks * (blocks + 1) // 2


def test_lock_never_released_is_no_progress():
    t0 = time.perf_counter()
    with pytest.raises(NoProgress, match=r"no progress: 1 thread\(s\) spin in the loop at PTX "
                       r"lines 24-26, re-reading memory that no running thread changes\. On a "
                       r"GPU this launch hangs") as e:
        run_lock(2, release="")
    assert e.value.line == 26 and e.value.block == (1, 0, 0)
    assert time.perf_counter() - t0 < 5


def test_spin_on_a_flag_nobody_sets_names_the_source_line():
    body = """
  .loc 1 7 3
  ld.param.u64 %rd1, [k_p0];
WAIT:
  .loc 1 9 5
  ld.volatile.global.u32 %r1, [%rd1];
  setp.eq.u32 %p1, %r1, 0;
  @%p1 bra WAIT;
  ret;
"""
    ptx = kernel_ptx(body, nparams=1, prelude='.file 1 "flag.tile"\n')
    dev = EmulatorDevice()
    fn = dev.load_module(ptx).get_function("k")
    flag = dev.to_device(np.zeros(1, np.uint32))
    with pytest.raises(NoProgress, match=r"32 thread\(s\) spin in the loop at PTX lines "
                       r"\d+-\d+ \(source flag.tile:9\)"):
        dev.launch(fn, (1, 1, 1), (32, 1, 1), [flag])
    # another block sets the flag: everyone finishes
    setter = kernel_ptx(body.replace("ret;", "ret;\nSET:\n  mov.u32 %r2, 1;\n"
                                     "  st.global.u32 [%rd1], %r2;\n  ret;").replace(
        "WAIT:", "  mov.u32 %r3, %ctaid.x;\n  setp.eq.u32 %p2, %r3, 1;\n  @%p2 bra SET;\nWAIT:"),
        nparams=1)
    fn = dev.load_module(setter).get_function("k")
    dev.launch(fn, (2, 1, 1), (32, 1, 1), [flag])
    assert dev.from_device(flag, (1,), np.uint32)[0] == 1


def test_a_compute_loop_is_not_mistaken_for_a_spin():
    # 5000 iterations that change only registers (no memory traffic at all)
    body = """
  ld.param.u64 %rd1, [k_p0];
  mov.u32 %r1, 0;
  mov.u32 %r2, 0;
LOOP:
  add.s32 %r2, %r2, %r1;
  add.s32 %r1, %r1, 1;
  setp.lt.u32 %p1, %r1, 5000;
  @%p1 bra LOOP;
  st.global.u32 [%rd1], %r2;
  ret;
"""
    dev = EmulatorDevice()
    fn = dev.load_module(kernel_ptx(body, nparams=1)).get_function("k")
    out = dev.malloc(4)
    dev.launch(fn, (1, 1, 1), (32, 1, 1), [out])
    assert dev.from_device(out, (1,), np.uint32)[0] == sum(range(5000)) % (1 << 32)


def test_mbarrier_wait_that_never_completes_is_no_progress():
    body = """
  mov.u32 %r2, bar;
  mov.u32 %r1, %tid.x;
  setp.ne.u32 %p1, %r1, 0;
  @%p1 bra READY;
  mbarrier.init.shared.b64 [%r2], 2;
READY:
  bar.sync 0;
  mbarrier.arrive.shared.b64 %rd1, [%r2];
WAIT:
  mbarrier.try_wait.parity.shared.b64 %p2, [%r2], 0;
  @!%p2 bra WAIT;
  ret;
"""
    # 32 arrivals each phase; the barrier expects 2 per phase, so phase 0 completes... but
    # with a count of 64 it never does
    ptx = kernel_ptx(body.replace("], 2;", "], 64;"), nparams=0,
                     prelude="").replace("{\n", "{\n  .shared .align 8 .b64 bar;\n", 1)
    dev = EmulatorDevice()
    fn = dev.load_module(ptx).get_function("k")
    with pytest.raises(NoProgress, match="spin in the loop"):
        dev.launch(fn, (1, 1, 1), (32, 1, 1), [])


def test_step_limit_option_and_environment(monkeypatch):
    body = """
  mov.u32 %r1, 0;
LOOP:
  add.s32 %r1, %r1, 1;
  setp.lt.u32 %p1, %r1, 3000;
  @%p1 bra LOOP;
  ret;
"""
    ptx = kernel_ptx(body, nparams=0)
    dev = EmulatorDevice(max_steps=1000)
    fn = dev.load_module(ptx).get_function("k")
    with pytest.raises(ExecutionError, match=r"did not finish in 1000 steps \(PTX line \d+ is "
                       r"where threads were; set max_steps= or TILELANG_EMULATOR_MAX_STEPS"):
        dev.launch(fn, (1, 1, 1), (32, 1, 1), [])
    dev.launch(fn, (1, 1, 1), (32, 1, 1), [], max_steps=20_000)     # per launch
    monkeypatch.setenv("TILELANG_EMULATOR_MAX_STEPS", "2000")
    dev = EmulatorDevice()
    assert dev.max_steps == 2000
    with pytest.raises(ExecutionError, match="did not finish in 2000 steps"):
        dev.launch(dev.load_module(ptx).get_function("k"), (1, 1, 1), (32, 1, 1), [])
    monkeypatch.setenv("TILELANG_EMULATOR_MAX_STEPS", "lots")
    with pytest.raises(EmulatorError, match="TILELANG_EMULATOR_MAX_STEPS='lots' is not an "
                       "integer"):
        EmulatorDevice()
    with pytest.raises(EmulatorError, match="max_steps must be a positive integer"):
        EmulatorDevice(max_steps=0)


def _layernorm_bwd(stem, rows=2, N=50, seed=0):
    ptx = (FIXTURES / f"{stem}.ptx").read_text()
    info = json.loads((FIXTURES / f"{stem}.json").read_text())
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, N)).astype(np.float32)
    dy = rng.standard_normal((rows, N)).astype(np.float32)
    w = rng.standard_normal(N).astype(np.float32)
    mean = x.mean(1).astype(np.float32)
    rstd = (1 / np.sqrt(x.var(1) + 1e-5)).astype(np.float32)
    dev = EmulatorDevice()
    fn = dev.load_module(ptx).get_function(info["kernel"])
    dx, dw, db = dev.malloc(4 * rows * N), dev.to_device(np.zeros(N, np.float32)), \
        dev.to_device(np.zeros(N, np.float32))
    lock = dev.to_device(np.zeros(2, np.int32))          # GROUP = 1: one lock, one count
    args = [dx, dev.to_device(dy), dw, db, dev.to_device(x), dev.to_device(w),
            dev.to_device(mean), dev.to_device(rstd), lock, np.int32(N), np.int32(N), 0, 0]
    dev.launch(fn, (rows, 1, 1), tuple(info["block"]), args, shared_mem=info["shared_bytes"])
    xhat = (x - mean[:, None]) * rstd[:, None]
    return (dev.from_device(dw, (N,), np.float32), dev.from_device(db, (N,), np.float32),
            (dy * xhat).sum(0), dy.sum(0))


@pytest.mark.parametrize("rows", [2, 6])
def test_triton_layernorm_backward_lock_completes(rows):
    dw, db, ref_dw, ref_db = _layernorm_bwd("triton_layernorm_bwd_sm80", rows)
    np.testing.assert_allclose(dw, ref_dw, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(db, ref_db, rtol=1e-5, atol=1e-5)


def test_triton_layernorm_backward_lock_never_released():
    t0 = time.perf_counter()
    with pytest.raises(NoProgress, match=r"no progress: 64 thread\(s\) spin in the loop at PTX "
                       r"lines \d+-\d+"):
        _layernorm_bwd("triton_layernorm_bwd_norelease_sm80", 2)
    assert time.perf_counter() - t0 < 5


@pytest.mark.parametrize("form", [
    "atom.{sem}.{scope}.global.add.u32 %r5, [%rd1], 1;",
    "atom.global.{sem}.{scope}.cas.b32 %r5, [%rd1], 0, 1;",
    "red.{rsem}.{scope}.global.add.u32 [%rd1], 1;",
    "fence.{fsem}.{scope};",
    "ld.{lsem}.{scope}.global.u32 %r5, [%rd1];",
    "st.{ssem}.{scope}.global.u32 [%rd1], %r6;",
])
def test_memory_order_and_scope_qualifiers(form):
    sems = {"sem": ["relaxed", "acquire", "release", "acq_rel"],
            "rsem": ["relaxed", "release"], "fsem": ["sc", "acq_rel"],
            "lsem": ["relaxed", "acquire"], "ssem": ["relaxed", "release"]}
    key = next(k for k in sems if "{" + k + "}" in form)
    for sem in sems[key]:
        for scope in ("cta", "cluster", "gpu", "sys"):
            line = form.replace("{" + key + "}", sem).replace("{scope}", scope)
            body = f"  ld.param.u64 %rd1, [k_p0];\n  mov.u32 %r6, 7;\n  {line}\n  ret;"
            dev = EmulatorDevice()
            fn = dev.load_module(kernel_ptx(body, nparams=1)).get_function("k")
            p = dev.to_device(np.zeros(1, np.uint32))
            dev.launch(fn, (1, 1, 1), (4, 1, 1), [p])
            v = int(dev.from_device(p, (1,), np.uint32)[0])
            want = {"add": 4, "cas": 1, "st.": 7}
            for k, expect in want.items():
                if k in line.split()[0] or (k == "st." and line.startswith("st.")):
                    assert v == expect, line


def test_a_loop_that_changes_memory_is_not_spinning():
    # block 1 waits until block 0's loop has counted to 100, then sets the flag block 0 waits
    # for: block 0's registers repeat, but its red.add changes memory, so it is not parked
    body = """
  ld.param.u64 %rd1, [k_p0];
  ld.param.u64 %rd2, [k_p1];
  mov.u32 %r9, %tid.x;
  setp.ne.u32 %p1, %r9, 0;
  @%p1 bra DONE;
  mov.u32 %r10, %ctaid.x;
  setp.eq.u32 %p2, %r10, 0;
  @%p2 bra COUNTER;
WATCH:
  ld.volatile.global.u32 %r1, [%rd1];
  setp.lt.u32 %p3, %r1, 100;
  @%p3 bra WATCH;
  mov.u32 %r2, 1;
  st.global.u32 [%rd2], %r2;
  bra DONE;
COUNTER:
  red.relaxed.gpu.global.add.u32 [%rd1], 1;
  ld.volatile.global.u32 %r3, [%rd2];
  setp.eq.u32 %p4, %r3, 0;
  @%p4 bra COUNTER;
DONE:
  ret;
"""
    dev = EmulatorDevice()
    fn = dev.load_module(kernel_ptx(body, nparams=2)).get_function("k")
    cnt, flag = dev.to_device(np.zeros(1, np.uint32)), dev.to_device(np.zeros(1, np.uint32))
    dev.launch(fn, (2, 1, 1), (32, 1, 1), [cnt, flag])
    assert dev.from_device(cnt, (1,), np.uint32)[0] >= 100
    assert dev.from_device(flag, (1,), np.uint32)[0] == 1


# -- the memory model: a lock without acquire/release is a data race -----------------------
def _lock_race(acquire, release, fences=False, blocks=4):
    body = LOCK.replace("{acquire}", acquire).replace("{release}", "  " + release)
    if fences:      # relaxed atomics ordered by fences: the classic, correct alternative
        body = body.replace("  @%p2 bra SPIN;\n", "  @%p2 bra SPIN;\n  fence.acq_rel.gpu;\n")
        body = body.replace("  " + release, "  fence.acq_rel.gpu;\n  " + release)
    dev = EmulatorDevice(global_race_check=True)
    fn = dev.load_module(kernel_ptx(body, nparams=2)).get_function("k")
    lock, data = dev.to_device(np.zeros(1, np.uint32)), dev.to_device(np.zeros(1, np.uint32))
    rep = dev.launch(fn, (blocks, 1, 1), (64, 1, 1), [lock, data])
    assert int(dev.from_device(data, (1,), np.uint32)[0]) == blocks * (blocks + 1) // 2
    return rep


def test_lock_with_acquire_release_or_fences_has_no_global_race():
    rep = _lock_race("acquire.gpu.", "atom.release.gpu.global.exch.b32 %r4, [%rd1], 0;")
    assert rep.global_race_check == "checked: no global-memory race between blocks"
    _lock_race("relaxed.gpu.", "atom.relaxed.gpu.global.exch.b32 %r4, [%rd1], 0;", fences=True)
    _lock_race("acq_rel.gpu.", "st.release.gpu.global.u32 [%rd1], 0;")


@pytest.mark.parametrize("acquire,release", [
    ("relaxed.gpu.", "atom.relaxed.gpu.global.exch.b32 %r4, [%rd1], 0;"),   # no order at all
    ("", "st.global.u32 [%rd1], 0;"),                                        # plain atom, store
    ("acquire.gpu.", "atom.relaxed.gpu.global.exch.b32 %r4, [%rd1], 0;"),  # no release
])
def test_lock_without_acquire_release_is_a_global_race(acquire, release):
    from tilelang.emulator.errors import GlobalMemoryRace
    with pytest.raises(GlobalMemoryRace, match=r"global-memory data race: this block reads a "
                       r"word that block \(\d+, 0, 0\) wrote \(PTX line \d+\) with no "
                       r"release/acquire synchronization"):
        _lock_race(acquire, release)


def test_triton_layernorm_backward_lock_memory_model():
    from tilelang.emulator.errors import GlobalMemoryRace
    stem = "triton_layernorm_bwd_sm80"
    ptx = (FIXTURES / f"{stem}.ptx").read_text()
    assert "atom.global.acq_rel.gpu.cas.b32" in ptx
    relaxed = ptx.replace(".acq_rel.", ".relaxed.")

    def run(text, rows=3, N=50):
        info = json.loads((FIXTURES / f"{stem}.json").read_text())
        rng = np.random.default_rng(1)
        x = rng.standard_normal((rows, N)).astype(np.float32)
        dev = EmulatorDevice(global_race_check=True)
        fn = dev.load_module(text).get_function(info["kernel"])
        f = lambda a: dev.to_device(np.ascontiguousarray(a, np.float32))
        args = [dev.malloc(4 * rows * N), f(x), f(np.zeros(N)), f(np.zeros(N)), f(x),
                f(np.ones(N)), f(x.mean(1)), f(np.ones(rows)),
                dev.to_device(np.zeros(2, np.int32)), np.int32(N), np.int32(N), 0, 0]
        return dev.launch(fn, (rows, 1, 1), tuple(info["block"]), args,
                          shared_mem=info["shared_bytes"])
    assert run(ptx).global_race_check == "checked: no global-memory race between blocks"
    with pytest.raises(GlobalMemoryRace, match="global-memory data race"):
        run(relaxed)


def test_no_progress_names_the_source_line_from_loc():
    # the same kernel compiled with Triton's line information: the error names the Python
    # line of `while tl.atomic_cas(Lock, 0, 1) == 1:` in the generator
    src = (pathlib.Path(__file__).parents[2] / "benchmarks" / "triton_ref" /
           "gen_layernorm_bwd_ptx.py").read_text().splitlines()
    line = next(i + 1 for i, t in enumerate(src) if "while tl.atomic_cas(Lock, 0, 1)" in t)
    with pytest.raises(NoProgress, match=r"spin in the loop at PTX lines \d+-\d+ \(source "
                       r"benchmarks/triton_ref/gen_layernorm_bwd_ptx.py:" + str(line) + r"\)"):
        _layernorm_bwd("triton_layernorm_bwd_norelease_lineinfo_sm80", 2)
