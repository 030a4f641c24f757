"""What a launch accepts does not depend on what launched before (docs/python-api.md,
"Scalars" and "`const` values"): const values and scalars are judged by their type and value
on every path — the fast path of a warm kernel, the general path that stages host arrays, the
interpreter — and empty arrays are fine outputs (they have no elements to share)."""

from __future__ import annotations

import numpy as np
import pytest

import tilelang
from rt_support import FakeCompiler, fresh_runtime, source  # noqa: F401 (autouse fixture)
from tilelang.diagnostics import TileError

N = 64
A = np.arange(N, dtype=np.float32)
B = np.full(N, 2.0, np.float32)


@pytest.fixture
def mod(tmp_path):
    return tilelang.compile(source("vadd", "scalars", "copy2d"), backend="emulator",
                            compiler=FakeCompiler(), cache_dir=str(tmp_path))


@pytest.fixture
def interp(tmp_path):
    return tilelang.compile(
        "kernel vadd(a: Array[f32, 1], c: Array[f32, 1], n: i32, x: f32, "
        "const TILE: i32 = 64) {\n"
        "    let v = load(a, index = (bid(0),), shape = (TILE,), padding = 0.0);\n"
        "    store(c, index = (bid(0),), tile = v + astype(n, f32) + x);\n}\n",
        backend="interp", cache_dir=str(tmp_path / "i"))


def code_of(call) -> str | None:
    try:
        call()
    except TileError as e:
        return e.code
    return None


def message(call) -> str:
    with pytest.raises(TileError) as info:
        call()
    return info.value.diagnostics[0].message


def vadd(mod, **consts):
    c = np.zeros(N, np.float32)
    mod.vadd[1](A, B, c, **consts)
    return c


@pytest.mark.parametrize("first", [1, 64])
@pytest.mark.parametrize("spelling", [True, False, 64.0, 1.0, np.float64(64), 64 + 0j,
                                      np.bool_(True), "64"])
def test_refused_const_spellings_stay_refused_after_equal_values(mod, tmp_path, first,
                                                                 spelling):
    fresh = tilelang.compile(source("vadd"), backend="emulator", compiler=FakeCompiler(),
                             cache_dir=str(tmp_path / "fresh"))
    assert code_of(lambda: vadd(fresh, TILE=spelling)) == "E0916"
    vadd(mod, TILE=first)
    assert code_of(lambda: vadd(mod, TILE=spelling)) == "E0916"
    assert code_of(lambda: mod.vadd.specialize(TILE=spelling)) == "E0916"


def test_const_message_names_the_spelling(mod):
    vadd(mod, TILE=1)
    assert message(lambda: vadd(mod, TILE=True)) == \
        "const parameter `TILE` of kernel `vadd` is i32; True is not a valid value"


def test_numpy_integer_consts_of_any_width_share_the_kernel(mod):
    """np.int8(64), np.uint16(64) and 64 are the same value of an i32 const: accepted in
    any order, one bound kernel, one specialization."""
    want = vadd(mod, TILE=64)
    for v in (np.int8(64), np.uint16(64), np.int64(64), 64):
        np.testing.assert_array_equal(vadd(mod, TILE=v), want)
    assert mod.vadd.specialize(TILE=np.int8(64)) is mod.vadd.specialize(TILE=64)
    assert code_of(lambda: vadd(mod, TILE=np.int64(2**40))) == "E0916"


SCALAR_ARGS = dict(a=1, b=2, c=3, d=4, e=0.5, f=1.5, g=7.0, h=True, k=1.0, m=3)


def scalars(mod, device: bool, **over):
    out = np.zeros(10, np.uint64)
    arg = mod.to_device(out) if device else out
    mod.scalars[1](arg, *{**SCALAR_ARGS, **over}.values())
    return arg.numpy() if device else out


@pytest.mark.parametrize("device", [False, True], ids=["staged", "fast"])
def test_bools_are_refused_for_integer_and_float_scalars(mod, device):
    scalars(mod, device, c=1, f=1.0)                     # equal values, warm caches
    assert message(lambda: scalars(mod, device, c=True)) == (
        "argument `c` of kernel `scalars` (c: i32): expected an integer, got bool True "
        "(a bool is refused for i32: pass `int(x)`)")
    assert message(lambda: scalars(mod, device, f=np.bool_(True))) == (
        "argument `f` of kernel `scalars` (f: f32): expected a number, got bool True "
        "(a bool is refused for f32: pass `float(x)`)")
    assert code_of(lambda: scalars(mod, device, h=True)) is None   # a bool parameter


@pytest.mark.parametrize("device", [False, True], ids=["staged", "fast"])
def test_numpy_scalars_of_other_widths(mod, device):
    """NumPy integers of any width are integers (range checked by value); NumPy floats are
    numbers for float parameters and refused for integer ones."""
    got = scalars(mod, device, c=np.uint8(200), d=np.int8(-5), f=np.float64(0.25),
                  g=np.int16(-3), m=np.uint32(7))
    assert [int(v) for v in got[2:4]] == [200, (-5) % 2**64]
    assert got[5:7].view(np.float64).tolist() == [0.25, -3.0]
    assert int(got[9]) == 7
    assert code_of(lambda: scalars(mod, device, c=np.int64(2**31))) == "E0915"
    assert code_of(lambda: scalars(mod, device, c=np.float32(3))) == "E0915"
    assert code_of(lambda: scalars(mod, device, m=np.int8(-1))) == "E0915"


@pytest.mark.parametrize("device", [False, True], ids=["staged", "fast"])
def test_f32_overflow_is_rounding_to_infinity(mod, device):
    """The largest f32 and values that round to it are accepted; one that rounds to
    infinity is refused, on both paths (the fast path packs with struct, the general path
    checks first)."""
    big = float(np.finfo(np.float32).max)
    near = big * (1 + 2.0**-26)                      # rounds down to the largest f32
    for v in (big, near, -near):
        got = scalars(mod, device, f=v)
        assert abs(got[5:6].view(np.float64)[0]) == big
    assert message(lambda: scalars(mod, device, f=big * (1 + 2.0**-23))).endswith(
        "overflows f32 (largest finite 3.4028235e+38)")
    assert code_of(lambda: scalars(mod, device, g=10**400)) == "E0915"


def test_interpreter_applies_the_same_rules(interp):
    c = np.zeros(N, np.float32)
    interp.vadd[1](A, c, 1, 0.5)
    np.testing.assert_array_equal(c, A + 1.5)
    assert code_of(lambda: interp.vadd[1](A, c, True, 0.5)) == "E0915"
    assert code_of(lambda: interp.vadd[1](A, c, 1, False)) == "E0915"
    interp.vadd[1](A, c, np.int8(2), np.float32(0.5))
    np.testing.assert_array_equal(c, A + 2.5)
    assert code_of(lambda: interp.vadd[1](A, c, 1, 0.5, TILE=True)) == "E0916"


# -- empty outputs --------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(5, 0), (0, 5), (0, 0)])
def test_empty_numpy_output_is_not_a_broadcast_view(mod, shape):
    src = np.ones(shape, np.float32)
    dst = np.zeros(shape, np.float32)
    assert 0 in dst.strides or dst.size == 0            # NumPy gives empty arrays zero strides
    mod.copy2d[max(shape[0], 1)](src, dst)
    assert dst.shape == shape
    read_only = np.zeros(shape, np.float32)
    read_only.setflags(write=False)
    mod.copy2d[1](src, read_only)                       # nothing to copy back


def test_empty_outputs_beside_real_ones(mod):
    """A launch with an empty output leaves the memory around it alone (the copy-in of the
    non-empty source and the staging of the empty destination)."""
    big = np.full((4, 6), 7.0, np.float32)
    src = np.arange(24, dtype=np.float32).reshape(4, 6)
    mod.copy2d[4](src, big[:, 3:3])                     # a (4, 0) view into `big`
    np.testing.assert_array_equal(big, np.full((4, 6), 7.0, np.float32))
    mod.copy2d[4](src, big)                             # and the kernel still works
    np.testing.assert_array_equal(big, src)


def test_empty_device_array_output(mod):
    d = tilelang.DeviceArray(mod.backend, mod.empty(1, "f32").ptr, (5, 0), "f32", (0, 0),
                             mod.empty(1, "f32"))
    mod.copy2d[5](np.ones((5, 0), np.float32), d)
    assert d.numpy().shape == (5, 0)
    bcast = tilelang.DeviceArray(mod.backend, d.ptr, (5, 2), "f32", (0, 1), d)
    assert code_of(lambda: mod.copy2d[5](np.ones((5, 2), np.float32), bcast)) == "E0914"


def test_empty_torch_output(mod):
    torch = pytest.importorskip("torch")
    dst = torch.zeros(5, 0).expand(5, 0)
    mod.copy2d[5](torch.ones(5, 0), dst)
    assert code_of(lambda: mod.copy2d[5](torch.ones(5, 3), torch.zeros(1, 3).expand(5, 3))) \
        == "E0914"
