"""Runtime-misuse fuzzer (issue 12): seeded random misuse of the Python API — wrong argument
counts, kinds, dtypes, ranks, strides, byte orders, read-only and broadcast outputs, bad grids,
blocks and streams, bad dtypes and shapes for arrays, bad facts, consts and defines, NaN/inf
for integer scalars, huge grids — each must raise the documented TileError (the right E09xx
code, a message and a help line), never a KeyError/TypeError/ValueError from the internals and
never a silent success; nothing is written on a refused launch, and launches still work after
any number of refusals.

The default run draws `QUICK` cases; `-m slow` draws `FULL` (every family many times).
"""

from __future__ import annotations

import math
import struct

import ml_dtypes
import numpy as np
import pytest

import tilelang
from rt_support import FakeCompiler, fresh_runtime, source  # noqa: F401 (autouse fixture)
from tilelang.diagnostics import TileError
from tilelang.runtime.device_array import DeviceArray

QUICK, FULL = 60, 600
N = 64                       # vadd's array length in the cases


class Env:
    """The modules the cases misuse: fake kernels on the emulator, a real kernel on the
    interpreter (the two launch paths), and fresh output arrays per case."""

    def __init__(self, tmp):
        comp = FakeCompiler()
        self.emu = tilelang.compile(source("vadd", "scalars", "copy2d", "fixed"),
                                    backend="emulator", compiler=comp, cache_dir=str(tmp))
        self.interp = tilelang.compile(
            "@launch(maxntid = (128, 1, 1))\n"
            "kernel vadd(a: Array[f32, 1], b: Array[f32, 1], c: Array[f32, 1], "
            "n: i32, const TILE: i32 = 64) {\n"
            "    let x = load(a, index = (bid(0),), shape = (TILE,), padding = 0.0);\n"
            "    let y = load(b, index = (bid(0),), shape = (TILE,), padding = 0.0);\n"
            "    store(c, index = (bid(0),), tile = x + y + astype(n, f32));\n}\n",
            backend="interp", cache_dir=str(tmp / "i"))
        self.a = np.arange(N, dtype=np.float32)
        self.b = np.full(N, 2.0, np.float32)

    def launcher(self, rng):
        """(kernel launch callable taking a, b, c, and the extra scalar args) on a random
        path: Triton's shape, cuTile's shape, the method, on the emulator or interpreter."""
        if rng.random() < 0.5:
            k, extra = self.emu.vadd, ()
        else:
            k, extra = self.interp.vadd, (0,)
        form = rng.integers(3)

        def run(args, grid=1, **kw):
            if form == 0:
                return k[grid](*args, **kw)
            if form == 1:
                return tilelang.launch(kw.get("stream"), grid, k, args, block=kw.get("block"))
            return k.launch(grid, args, stream=kw.get("stream"), block=kw.get("block"))
        return run, extra


BAD_DTYPES = [np.float16, np.float64, np.int32, np.int64, np.uint8, np.bool_, np.complex64,
              ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn]
NOT_ARRAYS = [None, 1, 2.5, "abc", b"xy", [1.0, 2.0], (1.0,), {"a": 1}, object(), np.float32(1),
              slice(3), range(4)]
BAD_GRIDS = [-1, (), (1, 2, 3, 4), (0, -1), 2.5, "8", None, True, (1, -1), (2**31, 1, 1),
             (1, 70000), (1, 1, 70000), [1, 2.0], (np.int64(-3),), 2**64, {"x": 1}]
BAD_BLOCKS = [(2048, 1, 1), 0, (0,), -1, 1.5, (1, 1, 1, 1), (256, 1, 1), (1, 1, 128), "64",
              (33, 33, 1)]
BAD_STREAMS = ["stream", 1.5, object(), [0], -1, True]


def family_count(env, rng):
    run, extra = env.launcher(rng)
    n = 3 + len(extra)
    got = int(rng.choice([k for k in range(0, 7) if k != n]))
    args = [env.a] * got
    return "E0910", lambda: run(args)


def family_not_array(env, rng):
    run, extra = env.launcher(rng)
    bad = NOT_ARRAYS[rng.integers(len(NOT_ARRAYS))]
    slot = int(rng.integers(3))
    args = [env.a, env.b, np.zeros(N, np.float32)]
    args[slot] = bad
    return "E0914", lambda: run((*args, *extra))


def family_dtype(env, rng):
    run, extra = env.launcher(rng)
    dt = BAD_DTYPES[rng.integers(len(BAD_DTYPES))]
    slot = int(rng.integers(3))
    args = [env.a, env.b, np.zeros(N, np.float32)]
    args[slot] = np.zeros(N, dt)
    return "E0911", lambda: run((*args, *extra))


def family_rank(env, rng):
    run, extra = env.launcher(rng)
    shape = [(), (8, 8), (2, 4, 8), (1, 64)][rng.integers(4)]
    slot = int(rng.integers(3))
    args = [env.a, env.b, np.zeros(N, np.float32)]
    args[slot] = np.zeros(shape, np.float32)
    return "E0912", lambda: run((*args, *extra))


def family_layout(env, rng):
    """Strides that are not whole elements, byte order, records, objects, misalignment."""
    run, extra = env.launcher(rng)
    raw = np.zeros(4 * N + 64, np.uint8)
    kind = int(rng.integers(5))
    if kind == 0:
        bad = np.lib.stride_tricks.as_strided(raw.view(np.float32), (N // 2,), (6,))
        code = "E0914"
    elif kind == 1:
        bad = np.zeros(N, ">f4")
        code = "E0911"
    elif kind == 2:
        bad = np.zeros(N, [("x", "<f4")])
        code = "E0911"
    elif kind == 3:
        bad = np.zeros(N, object)
        code = "E0911"
    else:
        off = (-raw.ctypes.data % 4) + int(rng.integers(1, 4))
        bad = raw[off:off + 4 * N].view(np.float32)
        code = "E0914"
    slot = int(rng.integers(3))
    args = [env.a, env.b, np.zeros(N, np.float32)]
    args[slot] = bad
    return code, lambda: run((*args, *extra))


def family_unwritable(env, rng):
    run, extra = env.launcher(rng)
    c = np.zeros(N, np.float32)
    if rng.random() < 0.5:
        c.setflags(write=False)
    else:
        c = np.lib.stride_tricks.as_strided(np.zeros(1, np.float32), (N,), (0,))
    return "E0914", lambda: run((env.a, env.b, c, *extra))


def family_grid(env, rng):
    run, extra = env.launcher(rng)
    g = BAD_GRIDS[rng.integers(len(BAD_GRIDS))]
    return "E0903", lambda: run((env.a, env.b, np.zeros(N, np.float32), *extra), grid=g)


def family_grid_function(env, rng):
    run, extra = env.launcher(rng)
    g = BAD_GRIDS[rng.integers(len(BAD_GRIDS))]
    return "E0903", lambda: run((env.a, env.b, np.zeros(N, np.float32), *extra),
                                grid=lambda meta: g)


def family_block(env, rng):
    run, extra = env.launcher(rng)
    b = BAD_BLOCKS[rng.integers(len(BAD_BLOCKS))]
    return "E0901", lambda: run((env.a, env.b, np.zeros(N, np.float32), *extra), block=b)


def family_stream(env, rng):
    run, extra = env.launcher(rng)
    s = BAD_STREAMS[rng.integers(len(BAD_STREAMS))]
    return "E0917", lambda: run((env.a, env.b, np.zeros(N, np.float32), *extra), stream=s)


def family_scalar(env, rng):
    """Integer, bool and float scalars out of range or of the wrong kind (NaN/inf for ints)."""
    if rng.random() < 0.3:
        value = [math.nan, math.inf, -math.inf, 1.5, "3", None, 2**31, -2**31 - 1,
                 np.float64(2.0)][rng.integers(9)]
        return "E0915", lambda: env.interp.vadd[1](env.a, env.b, np.zeros(N, np.float32),
                                                   value)
    out = np.zeros(10, np.uint64)
    good = [0, 0, 0, 0, 0.0, 0.0, 0.0, False, 0.0, 0]
    names = ["a", "b", "c", "d", "e", "f", "g", "h", "k", "m"]
    bad = {"a": [128, -129, 1.0, math.nan, "1"], "b": [-1, 65536, math.inf],
           "c": [2**31, math.nan, 1.5], "d": [2**63, -2**63 - 1, math.inf],
           "e": [70000.0, -1e6, "x", None], "f": [1e39, -1e39, "0.5", [1.0]],
           "g": [None, "1.0", object()], "h": [2, -1, 0.5, "true", None],
           "k": [None, "x", [0.5]], "m": [-1, 2**64, math.nan]}
    name = names[rng.integers(len(names))]
    choices = bad[name]
    args = list(good)
    args[names.index(name)] = choices[rng.integers(len(choices))]
    return "E0915", lambda: env.emu.scalars[1](out, *args)


def family_const(env, rng):
    k = env.emu.vadd if rng.random() < 0.5 else env.interp.vadd
    extra = () if k is env.emu.vadd else (0,)
    bad = [{"TILE": "abc"}, {"TILE": 2**40}, {"TILE": 1.5}, {"TILE": None}, {"TILE": True},
           {"NOPE": 3}, {"tile": 4}][rng.integers(7)]
    if rng.random() < 0.5:
        return "E0916", lambda: k.specialize(**bad)
    return "E0916", lambda: k[1](env.a, env.b, np.zeros(N, np.float32), *extra, **bad)


def family_arrays_api(env, rng):
    """empty / to_device / copy_from given nonsense."""
    be = "emulator" if rng.random() < 0.5 else "interp"
    case = int(rng.integers(8))
    if case == 0:
        dt = ["f33", "float", "int", None, 3, "complex64", "<U1", "F32"][rng.integers(8)]
        return "E0925", lambda: tilelang.empty((4,), dt, backend=be)
    if case == 1:
        shape = [(-5,), (2, -1), "ab", (1.5,), (True,), None, (2**62, 2**62),
                 tuple([2] * 40)][rng.integers(8)]
        return "E0925", lambda: tilelang.empty(shape, "f32", backend=be)
    if case == 2:
        host = [np.zeros(3, "i4,f4"), np.array(["x"]), np.zeros(3, object), [1, [2]],
                np.zeros(2, np.complex128), "text"][rng.integers(6)]
        return "E0925", lambda: tilelang.to_device(host, backend=be)
    if case == 3:
        d = tilelang.empty((4,), "f32", backend=be)
        return "E0925", lambda: d.copy_from(np.zeros(int(rng.integers(5, 9)), np.float32))
    if case == 4:
        return "E0925", lambda: tilelang.empty(4, "f32", backend=be).copy_from(
            np.array(["a", "b", "c", "d"]))
    if case == 5:
        return "E0921", lambda: tilelang.empty(4, "f32", backend=["cuda"][0] + "x")
    if case == 6:
        d = tilelang.empty((N,), "f32", backend="interp" if be == "emulator" else "emulator")
        run = env.emu.vadd if be == "emulator" else env.interp.vadd
        extra = () if be == "emulator" else (0,)
        return "E0913", lambda: run[1](env.a, env.b, d, *extra)
    return "E0925", lambda: tilelang.empty((4,), "f32", backend=be)[::2].copy_from(
        np.zeros(2, np.float32))


def family_facts(env, rng):
    bad = [{"a": "zz"}, {"a": 3}, {"a": None}, {"a": "cax"}, ["a"], "ca", {"q": "ca"},
           {"n": "ca"}][rng.integers(8)]
    k = env.emu.vadd
    code = "E0910" if isinstance(bad, dict) and ("q" in bad or "n" in bad) else "E0925"
    return code, lambda: k.compile(facts=bad)


def family_compile(env, rng):
    src = source("vadd")
    comp = FakeCompiler()
    bad = [{"opt_level": 9}, {"opt_level": "3"}, {"defines": [("TILE", 4)]},
           {"defines": {"TILE": [4]}}, {"defines": {"2x": 1}}, {"include_dirs": 5},
           {"include_dirs": ["/no/such/folder/anywhere"]}, {"arch": 90},
           {"backend": "rocm"}, {"backend": 3.5}, {"cache_dir": 12},
           {"defines": {"TILES": 4}}][rng.integers(12)]
    code = "E0921" if "backend" in bad else "E0925"
    kw = {"backend": "emulator", "compiler": comp, "cache": False}
    if bad in ({"include_dirs": ["/no/such/folder/anywhere"]}, {"defines": {"TILES": 4}}):
        # the driver's own checks (as for tilec -I / -D): the real compiler, a real module
        code = "E0271" if "include_dirs" in bad else "E0272"
        src = "kernel k(a: Array[f32, 1], const TILE: i32 = 4) { }\n"
        del kw["compiler"]
    kw.update(bad)
    return code, lambda: tilelang.compile(src, **kw)


def family_args_container(env, rng):
    k = env.emu.vadd if rng.random() < 0.5 else env.interp.vadd
    bad = [env.a, 5, None, "abc", {"a": env.a}, iter([env.a])][rng.integers(6)]
    if rng.random() < 0.5:
        return "E0910", lambda: tilelang.launch(None, 1, k, bad)
    return "E0910", lambda: k.launch(1, bad)


def family_names(env, rng):
    case = int(rng.integers(4))
    if case == 0:
        return "E0922", lambda: getattr(env.emu, "vad" + "d" * int(rng.integers(2, 4)))
    if case == 1:
        return "E0922", lambda: tilelang.launch(None, 1, "vadd", ())
    if case == 2:
        return "E0923", lambda: tilelang.compile(12345, backend="emulator")
    return "E0923", lambda: tilelang.compile("no/such/file.tile", backend="emulator")


FAMILIES = [family_count, family_not_array, family_dtype, family_rank, family_layout,
            family_unwritable, family_grid, family_grid_function, family_block, family_stream,
            family_scalar, family_const, family_arrays_api, family_facts, family_compile,
            family_args_container, family_names]

LEAKS = (KeyError, IndexError, AttributeError, TypeError, ValueError, OverflowError,
         ZeroDivisionError, struct.error)


def run_cases(env, seed: int, count: int) -> dict:
    rng = np.random.default_rng(seed)
    seen: dict[str, int] = {}
    for i in range(count):
        fam = FAMILIES[i % len(FAMILIES)] if i < len(FAMILIES) else \
            FAMILIES[rng.integers(len(FAMILIES))]
        code, case = fam(env, rng)
        where = f"case {i} ({fam.__name__}, seed {seed})"
        try:
            case()
        except TileError as e:
            assert e.code == code, f"{where}: {e.code} instead of {code}: {e}"
            d = e.diagnostics[0]
            assert d.message and d.help, f"{where}: no message or help: {e!r}"
            assert str(e).startswith(f"error[{code}]: {d.message}"), where
        except LEAKS as e:                                   # an internal error escaped
            raise AssertionError(f"{where}: {type(e).__name__} leaked: {e}") from e
        else:
            raise AssertionError(f"{where}: accepted silently (expected {code})")
        seen[fam.__name__] = seen.get(fam.__name__, 0) + 1
        if i % 16 == 15:                 # the runtime still works after refusals
            c = np.zeros(N, np.float32)
            env.emu.vadd[1](env.a, env.b, c)
            np.testing.assert_array_equal(c, env.a + env.b)
            c[:] = 0
            env.interp.vadd[1](env.a, env.b, c, 1)
            np.testing.assert_array_equal(c, env.a + env.b + 1)
    return seen


def test_misuse_quick(tmp_path):
    seen = run_cases(Env(tmp_path), seed=12, count=QUICK)
    assert set(seen) == {f.__name__ for f in FAMILIES}


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2])
def test_misuse_full(tmp_path, seed):
    seen = run_cases(Env(tmp_path), seed=seed, count=FULL)
    assert sum(seen.values()) == FULL and min(seen.values()) >= 10


def test_refused_launches_write_nothing(tmp_path):
    env = Env(tmp_path)
    c = np.full(N, 7.0, np.float32)
    for bad in ((env.a, env.b.astype(">f4"), c), (env.a, env.b, c, 1)):
        with pytest.raises(TileError):
            env.emu.vadd[1](*bad)
    with pytest.raises(TileError):
        env.emu.vadd[(1, 70000)](env.a, env.b, c)
    assert (c == 7.0).all()
    one = env.emu.empty(1, "f32")
    d = DeviceArray(env.emu.backend, one.ptr, (N,), "f32", (0,), one)
    with pytest.raises(TileError):
        env.emu.vadd[1](env.a, env.b, d)


# ---------------------------------------------------------------------------------------------
# Verdicts that must not depend on launch history: each launch gets the same answer (the same
# error code, or the same result) on a fresh module as on one that has served a history of
# other launches, whose caches (bound const values, specializations, launch shapes, readers)
# are warm with values that compare equal to the new ones (True == 1 == 1.0 == np.int8(1)).

CONSTS = [1, 2, 64, True, False, 64.0, 2.0, np.float64(64), np.int8(64), np.int64(2),
          np.uint16(64), 64 + 0j, np.bool_(True), np.float32(2)]
INT_SCALARS = [3, -3, True, False, np.int8(3), np.int64(-3), np.uint8(3), 3.0, np.float32(3),
               np.bool_(True), 2**31, "3", 1 + 0j]
FLOAT_SCALARS = [1.5, 1, True, np.float32(1.5), np.float64(-2.5), np.int16(2), 1e39,
                 3.4028235e38, np.bool_(False), 1 + 0j, "1.5"]
BOOL_SCALARS = [True, False, 1, 0, 2, np.bool_(True), 0.0, np.int8(1), None]
GRIDS = [1, 1, 1, (1,), (1, 1), 2, [1], np.int64(1), (np.int32(1),), True, 1.0, (True, 1)]


def _verdict(call):
    """'ok' and the outputs, or the error code."""
    try:
        outs = call()
    except TileError as e:
        return e.code
    except LEAKS as e:                                   # an internal error escaped
        raise AssertionError(f"{type(e).__name__} leaked: {e}") from e
    return ("ok",) + tuple(o.tobytes() for o in outs)


def _history_case(rng):
    """A launch as a function of a module pair (emulator, interpreter): it returns the arrays
    the launch wrote, for comparison."""
    kind = int(rng.integers(4))
    if kind == 0:                                        # const values on both paths
        tile = CONSTS[rng.integers(len(CONSTS))]
        interp = bool(rng.integers(2))
        grid = GRIDS[rng.integers(len(GRIDS))]

        def call(emu, itp):
            c = np.zeros(N, np.float32)
            a, b = np.arange(N, dtype=np.float32), np.full(N, 2.0, np.float32)
            if interp:
                itp.vadd[grid](a, b, c, 1, TILE=tile)
            else:
                emu.vadd[grid](a, b, c, TILE=tile)
            return (c,)
        return f"vadd TILE={tile!r} grid={grid!r} interp={interp}", call
    if kind == 1:                                        # scalar spellings, fast and slow path
        c = INT_SCALARS[rng.integers(len(INT_SCALARS))]
        f = FLOAT_SCALARS[rng.integers(len(FLOAT_SCALARS))]
        h = BOOL_SCALARS[rng.integers(len(BOOL_SCALARS))]
        device = bool(rng.integers(2))

        def call(emu, itp):
            out = np.zeros(10, np.uint64)
            arg = emu.to_device(out) if device else out
            emu.scalars[1](arg, 1, 2, c, 4, 0.5, f, 7.0, h, 1.0, 3)
            return (arg.numpy() if device else out,)
        return f"scalars c={c!r} f={f!r} h={h!r} device={device}", call
    if kind == 2:                                        # empty outputs of every layout
        shape = [(5, 0), (0, 5), (0, 0), (3, 4)][rng.integers(4)]
        how = int(rng.integers(3))

        def call(emu, itp):
            src = np.ones(shape, np.float32)
            dst = np.zeros(shape, np.float32)
            if how == 1:
                dst = np.broadcast_to(np.zeros(shape[1:], np.float32), shape)
            elif how == 2:
                dst = emu.to_device(dst)
            emu.copy2d[max(shape[0], 1)](src, dst)
            return (dst.numpy() if how == 2 else np.ascontiguousarray(dst),)
        return f"copy2d shape={shape} how={how}", call
    n = [N, 0][rng.integers(2)]                          # the interpreter's scalar checks

    def call(emu, itp):
        c = np.zeros(n, np.float32)
        itp.vadd[1](np.zeros(n, np.float32), np.zeros(n, np.float32), c,
                    INT_SCALARS[kind_value])
        return (c,)
    kind_value = int(rng.integers(len(INT_SCALARS)))
    return f"interp vadd n={n} n-arg={INT_SCALARS[kind_value]!r}", call


def _modules(tmp):
    env = Env(tmp)
    return env.emu, env.interp


def _primer(emu, itp):
    """Valid launches whose cached values equal the spellings the cases try."""
    a = np.arange(N, dtype=np.float32)
    for tile in (1, 2, 64):
        emu.vadd[1](a, a, np.zeros(N, np.float32), TILE=tile)
        itp.vadd[1](a, a, np.zeros(N, np.float32), 1, TILE=tile)
    out = np.zeros(10, np.uint64)
    for arg in (out, emu.to_device(out)):
        emu.scalars[1](arg, 1, 2, 3, 4, 0.5, 1.5, 7.0, True, 1.0, 3)
        emu.scalars[1](arg, 1, 2, 1, 4, 0.5, 2.0, 7.0, 1, 1.0, 3)
    emu.copy2d[5](np.ones((5, 4), np.float32), np.zeros((5, 4), np.float32))


def run_history(tmp, seed: int, count: int) -> int:
    rng = np.random.default_rng(seed)
    warm = _modules(tmp)
    _primer(*warm)
    refused = 0
    for i in range(count):
        what, call = _history_case(rng)
        fresh = _verdict(lambda: call(*_modules(tmp)))
        after = _verdict(lambda: call(*warm))
        assert fresh == after, (f"case {i} ({what}, seed {seed}): "
                                f"{fresh if isinstance(fresh, str) else 'ok'} on a fresh module,"
                                f" {after if isinstance(after, str) else 'ok'} after a history")
        refused += isinstance(fresh, str)
    return refused


def test_verdicts_do_not_depend_on_history(tmp_path):
    refused = run_history(tmp_path, seed=26, count=QUICK)
    assert 0 < refused < QUICK                  # both verdicts occur


@pytest.mark.slow
def test_verdicts_do_not_depend_on_history_full(tmp_path):
    run_history(tmp_path, seed=8, count=FULL)
