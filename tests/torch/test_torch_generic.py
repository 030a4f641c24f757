"""A generic kernel as a PyTorch operator (docs/torch.md, "Generic kernels"): an output
declared `Array[T, n]` is allocated with the dtype the inputs give `T`, one operator serves
every dtype, and inputs that disagree are refused. Runs on CPU tensors through the emulator."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import tilelang  # noqa: E402
import tilelang.torch as tt  # noqa: E402

SRC = """
kernel gscale(x: Array[T, 1], y: Array[T, 1], out: Array[T, 1], s: f32,
              const T: dtype = f32, const TILE: i32 = 128) {
    let t = load(x, index = (bid(0),), shape = (TILE,), padding = 0);
    let u = load(y, index = (bid(0),), shape = (TILE,), padding = 0);
    store(out, index = (bid(0),), tile = astype(astype(t, f32) * s + astype(u, f32), T));
}
"""


@pytest.fixture(scope="module")
def gscale():
    mod = tilelang.compile(SRC, backend="emulator", cache=False)
    return tt.op("tile_generic_test::gscale", mod.gscale, outputs={"out": tt.like("x")},
                 grid=lambda meta: (tilelang.cdiv(meta["x"].shape[0], meta["TILE"]),))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_one_operator_for_every_dtype(gscale, dtype):
    g = torch.Generator().manual_seed(0)
    x, y = (torch.randn(300, generator=g).to(dtype) for _ in range(2))
    out = gscale(x, y, 2.0)
    assert out.dtype == dtype and out.shape == x.shape
    assert torch.equal(out, (x.float() * 2.0 + y.float()).to(dtype))


def test_opcheck_with_bf16(gscale):
    x, y = torch.randn(200, dtype=torch.bfloat16), torch.randn(200, dtype=torch.bfloat16)
    torch.library.opcheck(gscale.op, (x, y, 0.5))


def test_inputs_that_disagree_are_refused(gscale):
    with pytest.raises(tt.TileOpError) as e:
        gscale(torch.zeros(8, dtype=torch.float16), torch.zeros(8), 1.0)
    assert str(e.value) == (
        "Tile operator `tile_generic_test::gscale`: inputs `x` and `y` are both `Array[T, ...]` "
        "of kernel `gscale`, but `x` is f16 and `y` is f32")


def test_wrap_infers_t_inside_a_custom_op():
    mod = tilelang.compile(SRC, backend="emulator", cache=False)

    @tt.custom_op("tile_generic_test::twice_plus", mutates_args=())
    def twice_plus(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        tt.wrap(mod.gscale)[lambda meta: (tilelang.cdiv(meta["x"].shape[0], 128),)](
            x, y, out, 2.0)
        return out

    x, y = torch.randn(130).to(torch.float16), torch.randn(130).to(torch.float16)
    assert torch.equal(twice_plus(x, y), (x.float() * 2.0 + y.float()).to(torch.float16))


def test_a_type_variable_without_default_needs_mutates_args():
    src = SRC.replace("const T: dtype = f32", "const T: dtype")
    mod = tilelang.compile(src, backend="emulator", cache=False)
    with pytest.raises(tt.TileOpError) as e:
        tt.op("tile_generic_test::nodefault", mod.gscale, outputs={"out": tt.like("x")},
              grid=1)
    assert str(e.value) == (
        "Tile operator `tile_generic_test::nodefault`: which arrays kernel `gscale` writes is "
        "not known before a launch (the dtype `T` without default is computed from the "
        "inputs): pass mutates_args=(...), checked at the first launch")
    op = tt.op("tile_generic_test::nodefault2", mod.gscale, outputs={"out": tt.like("x")},
               mutates_args=(), grid=lambda m: (tilelang.cdiv(m["x"].shape[0], 128),))
    x = torch.ones(10, dtype=torch.bfloat16)
    assert torch.equal(op(x, x, 3.0), torch.full((10,), 4.0, dtype=torch.bfloat16))
