"""tilelang.torch autograd: a forward and a backward Tile kernel as one differentiable
operator (docs/torch.md, "Autograd"). gradcheck compares the backward kernel's gradients with
finite differences of the forward kernel, in f64, on the emulator."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import tilelang  # noqa: E402
import tilelang.torch as tt  # noqa: E402

# y[r, c] = silu(x[r, c]) * w[c]; the backward walks the rows in tiles of M to sum dw.
SRC = """
kernel silu_mul(x: Array[f64, 2], w: Array[f64, 1], y: Array[f64, 2], const N: i32 = 16) {
    let r = bid(0);
    let t = load(x, index = (r, 0), shape = (1, N), padding = 0.0);
    let s = expand_dims(load(w, index = (0,), shape = (N,), padding = 0.0), 0);
    store(y, index = (r, 0), tile = t * sigmoid(t) * s);
}

kernel silu_mul_bwd(x: Array[f64, 2], w: Array[f64, 1], dy: Array[f64, 2],
                    dx: Array[f64, 2], dw: Array[f64, 1], const N: i32 = 16, const M: i32 = 4) {
    let s = expand_dims(load(w, index = (0,), shape = (N,), padding = 0.0), 0);
    var acc = zeros((N,), f64);
    for i in range(num_tiles(x, axis = 0, shape = (M, N))) {
        let t = load(x, index = (i, 0), shape = (M, N), padding = 0.0);
        let g = load(dy, index = (i, 0), shape = (M, N), padding = 0.0);
        let sg = sigmoid(t);
        store(dx, index = (i, 0), tile = g * s * (sg + t * sg * (1.0 - sg)));
        acc = acc + sum(g * t * sg, axis = 0);
    }
    store(dw, index = (0,), tile = acc);
}
"""


@pytest.fixture(scope="module")
def silu_mul():
    # ieee: sigmoid's exp correctly rounded, so finite differences of the forward kernel are
    # accurate to what gradcheck's default tolerances assume
    mod = tilelang.compile(SRC, backend="emulator", precision="ieee")
    fwd = tt.op("tile_grad::silu_mul", mod.silu_mul, outputs={"y": tt.like("x")},
                grid=lambda meta: (meta["x"].shape[0],))
    bwd = tt.op("tile_grad::silu_mul_bwd", mod.silu_mul_bwd,
                outputs={"dx": tt.like("x"), "dw": tt.like("w")}, grid=1)
    fwd.register_backward(bwd)      # x, w by name; dy = grad("y"); dx, dw the gradients
    return fwd, bwd


def _inputs(rows=6, cols=13, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, cols, dtype=torch.float64, generator=g, requires_grad=True)
    w = torch.randn(cols, dtype=torch.float64, generator=g, requires_grad=True)
    return x, w


def test_gradcheck_f64(silu_mul):
    fwd, _ = silu_mul
    x, w = _inputs(5, 4)       # 2 x 24 forward launches for the finite differences
    assert torch.autograd.gradcheck(fwd, (x, w))


def test_gradients_match_eager_pytorch(silu_mul):
    fwd, _ = silu_mul
    x, w = _inputs(9, 16, seed=1)
    g = torch.randn(9, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    fwd(x, w).backward(g)
    x2, w2 = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
    (torch.nn.functional.silu(x2) * w2).backward(g)
    torch.testing.assert_close(x.grad, x2.grad, rtol=1e-13, atol=1e-14)
    torch.testing.assert_close(w.grad, w2.grad, rtol=1e-13, atol=1e-14)


def test_opcheck_with_autograd(silu_mul):
    fwd, bwd = silu_mul
    x, w = _inputs(5, 7)
    torch.library.opcheck(fwd.op, (x, w))
    torch.library.opcheck(bwd.op, (x.detach(), w.detach(), torch.ones(5, 7, dtype=torch.float64)))


def test_backward_under_compile(silu_mul):
    fwd, _ = silu_mul
    x, w = _inputs(4, 10, seed=3)

    def loss(x, w):
        return (fwd(x, w) ** 2).sum()
    got = torch.compile(loss, fullgraph=True, backend="aot_eager")(x, w)
    got.backward()
    x2, w2 = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
    want = ((torch.nn.functional.silu(x2) * w2) ** 2).sum()
    want.backward()
    torch.testing.assert_close(got, want, rtol=1e-13, atol=0)
    torch.testing.assert_close(x.grad, x2.grad, rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(w.grad, w2.grad, rtol=1e-12, atol=1e-14)


def test_binding_mistakes(silu_mul):
    fwd, bwd = silu_mul
    with pytest.raises(tt.TileOpError) as e:
        fwd.register_backward(bwd, inputs={"dy": tt.grad("z")})
    assert str(e.value) == ("Tile operator `tile_grad::silu_mul_bwd`: `dy` is bound to "
                            "grad(name='z'), which is no input or output of Tile operator "
                            "`tile_grad::silu_mul`")
    with pytest.raises(tt.TileOpError) as e:
        fwd.register_backward(bwd, grads={"x": "dq"})
    assert str(e.value) == ("Tile operator `tile_grad::silu_mul_bwd`: grads maps `x` to `dq`: "
                            "need an input of Tile operator `tile_grad::silu_mul` and an "
                            "output of Tile operator `tile_grad::silu_mul_bwd`")
