"""Operators over kernels with an optional array (the schema says `Tensor?`, None reaches the
kernel as an absent array, its own specialization) and with a list of arrays (`Tensor[]`):
opcheck, torch.compile and eager agree with torch (docs/torch.md)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import tilelang  # noqa: E402
import tilelang.torch as tt  # noqa: E402

SRC = """
kernel bias_gelu(x: Array[f32, 2], bias: Optional[Array[f32, 1]], y: Array[f32, 2]) {
    let m = bid(0);
    var t = load(x, index = (m, 0), shape = (8, 64));
    if not is_none(bias) {
        t = t + load(bias, index = (0,), shape = (64,)).reshape((1, 64));
    }
    store(y, index = (m, 0), tile = t * sigmoid(1.702 * t));
}
"""


@pytest.fixture(scope="module")
def op(tmp_path_factory):
    import os
    os.environ.setdefault("TILELANG_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    mod = tilelang.compile(SRC, backend="emulator")
    return tt.op("g4test::bias_gelu", mod.bias_gelu, outputs={"y": tt.like("x")},
                 grid=lambda meta: (tilelang.cdiv(meta["x"].shape[0], 8),))


def reference(x, bias):
    t = x.double() + (bias.double() if bias is not None else 0)
    return (t * torch.sigmoid(1.702 * t)).float()


def test_schema_has_an_optional_tensor(op):
    assert str(torch.ops.g4test.bias_gelu.default._schema) == \
        "g4test::bias_gelu(Tensor x, Tensor? bias) -> Tensor"


def test_eager_with_and_without_bias(op):
    g = torch.Generator().manual_seed(4)
    x = torch.randn(20, 64, generator=g)
    b = torch.randn(64, generator=g)
    torch.testing.assert_close(op(x, b), reference(x, b), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(op(x, None), reference(x, None), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(torch.ops.g4test.bias_gelu(x, bias=None), reference(x, None),
                               rtol=1e-5, atol=1e-5)


def test_opcheck_both_patterns(op):
    x = torch.randn(16, 64)
    torch.library.opcheck(torch.ops.g4test.bias_gelu.default, (x, None))
    torch.library.opcheck(torch.ops.g4test.bias_gelu.default, (x, torch.randn(64)))


def test_compiled_function_with_none(op):
    x = torch.randn(16, 64)

    @torch.compile(backend="aot_eager", fullgraph=True)
    def f(x):
        return op(x, None) + 1

    torch.testing.assert_close(f(x), reference(x, None) + 1, rtol=1e-5, atol=1e-5)


# A list of arrays as an operator argument: `Tensor[]` in the schema.
LIST_SRC = """
kernel grouped_scale(xs: List[Array[f32, 1]], out: Array[f32, 1]) {
    let e = bid(0);
    let t = load(xs[e], index = (0,), shape = (32,), padding = 0.0);
    store(out, index = (e,), tile = full((1,), sum(t), f32));
}
"""


def test_list_of_tensors_operator(tmp_path_factory):
    import os
    os.environ.setdefault("TILELANG_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    mod = tilelang.compile(LIST_SRC, backend="emulator")
    op = tt.op("g4test::grouped_sum", mod.grouped_scale, outputs=["out"],
               fake=lambda xs: xs[0].new_empty(len(xs)),
               grid=lambda meta: (len(meta["xs"]),))
    assert str(torch.ops.g4test.grouped_sum.default._schema) == \
        "g4test::grouped_sum(Tensor[] xs) -> Tensor"
    g = torch.Generator().manual_seed(9)
    xs = [torch.randn(n, generator=g) for n in (32, 5, 0, 20)]
    got = op(xs)
    want = torch.stack([x.double().sum() for x in xs]).float()
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    torch.library.opcheck(torch.ops.g4test.grouped_sum.default, (xs,))
