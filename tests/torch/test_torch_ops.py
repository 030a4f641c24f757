"""tilelang.torch: Tile kernel launches as PyTorch operators, on CPU tensors through the
emulator (docs/torch.md). Every operator passes all of torch.library.opcheck's checks, traces
under torch.compile(fullgraph=True) on aot_eager and inductor, and is recorded by
torch.export; results are compared with the same computation in eager PyTorch."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

import tilelang  # noqa: E402
import tilelang.torch as tt  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# An in-place kernel: the kernel's ABI says it writes `x`, and nothing else.
SCALE_SRC = """
kernel scale_(x: Array[f32, 1], s: f32, const TILE: i32 = 256) {
    let t = load(x, index = (bid(0),), shape = (TILE,), padding = 0.0);
    store(x, index = (bid(0),), tile = t * s);
}
kernel axpy(x: Array[f32, 1], y: Array[f32, 1], out: Array[f32, 1], a: f32,
            const TILE: i32 = 256) {
    let t = load(x, index = (bid(0),), shape = (TILE,), padding = 0.0);
    let u = load(y, index = (bid(0),), shape = (TILE,), padding = 0.0);
    store(out, index = (bid(0),), tile = t * a + u);
}
"""


def _grid(meta):
    return (tilelang.cdiv(meta["x"].shape[0], meta["TILE"]),)


@pytest.fixture(scope="module")
def vadd():
    mod = tilelang.compile(os.path.join(ROOT, "examples", "vadd.tile"), backend="emulator")
    return tt.op("tile_test::vadd", mod.vadd, outputs={"c": tt.like("a")}, consts={"TILE": 256},
                 grid=lambda meta: (tilelang.cdiv(meta["a"].shape[0], meta["TILE"]),))


@pytest.fixture(scope="module")
def scale_mod():
    return tilelang.compile(SCALE_SRC, backend="emulator")


@pytest.fixture(scope="module")
def scale_(scale_mod):
    return tt.op("tile_test::scale_", scale_mod.scale_, grid=_grid)


@pytest.fixture(scope="module")
def rmsnorm():
    mod = tilelang.compile(os.path.join(ROOT, "examples", "rmsnorm.tile"), backend="emulator")
    # N, the tile width, is a power of two at least the row length: a const from the inputs.
    return tt.op("tile_test::rmsnorm", mod.rmsnorm, outputs={"y": tt.like("x")},
                 consts={"N": lambda meta: 1 << (meta["x"].shape[1] - 1).bit_length()},
                 grid=lambda meta: (meta["x"].shape[0],))


def _rand(*shape):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(sum(shape)))


def test_vadd_operator_schema_and_value(vadd):
    a, b = _rand(1000), _rand(1000) * 3
    assert str(torch.ops.tile_test.vadd.default._schema) == \
        "tile_test::vadd(Tensor a, Tensor b) -> Tensor"
    assert vadd.inputs == ("a", "b") and vadd.mutates == ()
    assert torch.equal(vadd(a, b), a + b)
    assert torch.equal(torch.ops.tile_test.vadd(a, b), a + b)


def test_vadd_opcheck(vadd):
    torch.library.opcheck(vadd.op, (_rand(1000), _rand(1000)))
    torch.library.opcheck(vadd.op, (_rand(37), _rand(37)))


def test_fake_implementation_from_like(vadd):
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        a = torch.empty(300)
        c = vadd(a, torch.empty(300))
    assert c.shape == (300,) and c.dtype == torch.float32


def test_compile_fullgraph_aot_eager(vadd, scale_):
    def f(a, b):
        c = vadd(a, b)
        scale_(c, 0.5)
        return c * 2
    a, b = _rand(700), _rand(700)
    got = torch.compile(f, fullgraph=True, backend="aot_eager")(a, b)
    assert torch.equal(got, a + b)          # (a + b) * 0.5 * 2 is exact in f32


def test_compile_fullgraph_inductor(vadd, scale_):
    # Only custom operators in the graph: inductor calls them as extern kernels and has no
    # C++ kernel of its own to build (which takes a minute on a small CPU).
    def f(a, b):
        c = vadd(a, b)
        scale_(c, 2.0)
        return c
    a, b = _rand(513), _rand(513)
    torch._dynamo.reset()
    got = torch.compile(f, fullgraph=True, backend="inductor")(a, b)
    assert torch.equal(got, (a + b) * 2)


def test_export_records_the_operator(vadd):
    class M(torch.nn.Module):
        def forward(self, a, b):
            return vadd(a, b)
    a, b = _rand(64), _rand(64)
    ep = torch.export.export(M(), (a, b))
    targets = [n.target for n in ep.graph.nodes if n.op == "call_function"]
    assert targets == [torch.ops.tile_test.vadd.default]
    assert torch.equal(ep.module()(a, b), a + b)
    # the saved program names the operator; loading finds it registered again
    import io
    buf = io.BytesIO()
    torch.export.save(ep, buf)
    buf.seek(0)
    loaded = torch.export.load(buf)
    assert torch.equal(loaded.module()(b, a), a + b)


def test_mutation_derived_from_the_abi(scale_):
    assert scale_.mutates == ("x",) and scale_.outputs == ()
    assert str(torch.ops.tile_test.scale_.default._schema) == \
        "tile_test::scale_(Tensor(a0!) x, float s) -> ()"
    x = _rand(600)
    want = x * 1.5
    assert scale_(x, 1.5) is None
    assert torch.equal(x, want)
    torch.library.opcheck(scale_.op, (_rand(600), 1.5))


def test_mutation_under_compile_is_honoured(scale_):
    # Functionalization must keep the write to the input visible after the graph.
    def f(x):
        scale_(x, 3.0)
        return x + 1
    x = _rand(300)
    orig = x.clone()
    out = torch.compile(f, fullgraph=True, backend="aot_eager")(x)
    assert torch.equal(x, orig * 3) and torch.equal(out, orig * 3 + 1)


def test_declared_mutation_checked_against_the_abi(scale_mod):
    with pytest.raises(tt.TileOpError) as e:
        tt.op("tile_test::bad1", scale_mod.scale_, grid=_grid, mutates_args=())
    assert str(e.value) == (
        "Tile operator `tile_test::bad1`: kernel `scale_` writes `x`, which mutates_args "
        "leaves out; torch would assume it unchanged (declare it, or leave mutates_args out "
        "to derive it from the kernel)")
    with pytest.raises(tt.TileOpError) as e:
        tt.op("tile_test::bad2", scale_mod.axpy, outputs={"out": tt.like("x")}, grid=_grid,
              mutates_args=("y",))
    assert str(e.value) == (
        "Tile operator `tile_test::bad2`: mutates_args names `y`, which kernel `axpy` never "
        "writes (its ABI: docs/abi.md); remove it")
    with pytest.raises(tt.TileOpError) as e:
        tt.op("tile_test::bad3", scale_mod.axpy, outputs={"out": tt.like("x")}, grid=_grid,
              mutates_args=("a",))
    assert str(e.value) == (
        "Tile operator `tile_test::bad3`: mutates_args names `a`, which is no input array "
        "of the operator (inputs: x, y)")
    ok = tt.op("tile_test::scale_declared", scale_mod.scale_, grid=_grid, mutates_args=("x",))
    assert ok.mutates == ("x",)


def test_output_declaration_mistakes(scale_mod):
    k = scale_mod.axpy
    cases = [
        ({"z": tt.like("x")}, None,
         "Tile operator `tile_test::o`: output `z` is no array parameter of kernel `axpy` "
         "(its arrays: x, y, out)"),
        ({"out": tt.like("q")}, None,
         "Tile operator `tile_test::o`: `like('q')` for output `out` names no input array"),
        ({"out": 3}, None,
         "Tile operator `tile_test::o`: output `out` is declared as 3: use like(\"input\") "
         "or a function of meta returning a shape"),
        (("out",), None,
         "Tile operator `tile_test::o`: output `out` has no shape: declare it (`like(\"x\")` "
         "or a function of meta returning the shape) or pass `fake=` to allocate the outputs"),
    ]
    for outputs, fake, msg in cases:
        with pytest.raises(tt.TileOpError) as e:
            tt.op("tile_test::o", k, outputs=outputs, grid=_grid, fake=fake)
        assert str(e.value) == msg
    with pytest.raises(tt.TileOpError) as e:
        tt.op("tile_test::o", k, outputs={"out": tt.like("x")}, grid=_grid, consts={"T": 1})
    assert str(e.value) == ("Tile operator `tile_test::o`: kernel `axpy` has no const "
                            "parameter `T` (its consts: TILE)")


ROWS_SRC = """
kernel scale_rows_(x: Array[f32, 2], s: f32, const N: i32) {
    let t = load(x, index = (bid(0), 0), shape = (1, N), padding = 0.0);
    store(x, index = (bid(0), 0), tile = t * s);
}
"""


def test_mutation_of_a_kernel_with_a_const_from_the_inputs():
    # N has no default and comes from the row length: nothing can be compiled before a call,
    # so the declaration is required, and checked at the first call.
    k = tilelang.compile(ROWS_SRC, backend="emulator").scale_rows_
    n_of = {"N": lambda meta: 1 << (meta["x"].shape[1] - 1).bit_length()}
    with pytest.raises(tt.TileOpError) as e:
        tt.op("tile_test::rows_a", k, consts=n_of, grid=lambda m: (m["x"].shape[0],))
    assert str(e.value) == (
        "Tile operator `tile_test::rows_a`: which arrays kernel `scale_rows_` writes is not "
        "known before a launch (a const without default is computed from the inputs): pass "
        "mutates_args=(...), checked at the first launch")
    bad = tt.op("tile_test::rows_b", k, consts=n_of, grid=lambda m: (m["x"].shape[0],),
                mutates_args=())
    with pytest.raises(tt.TileOpError) as e:
        bad(_rand(3, 20), 2.0)
    assert str(e.value) == ("Tile operator `tile_test::rows_b`: kernel `scale_rows_` writes "
                            "`x`, which mutates_args leaves out")
    good = tt.op("tile_test::rows_c", k, consts=n_of, grid=lambda m: (m["x"].shape[0],),
                 mutates_args=("x",))
    x = _rand(3, 20)
    want = x * 2
    good(x, 2.0)
    assert torch.equal(x, want)


def test_shape_function_and_scalar_argument(scale_mod):
    axpy = tt.op("tile_test::axpy", scale_mod.axpy, grid=_grid,
                 outputs={"out": lambda meta: (meta["x"].shape[0],)})
    assert str(torch.ops.tile_test.axpy.default._schema) == \
        "tile_test::axpy(Tensor x, Tensor y, float a) -> Tensor"
    x, y = _rand(900), _rand(900)
    torch.testing.assert_close(axpy(x, y, 0.25), x * 0.25 + y, rtol=0, atol=1e-6)
    torch.library.opcheck(axpy.op, (x, y, 0.25))


def test_user_fake_allocates_outputs(scale_mod):
    axpy = tt.op("tile_test::axpy_fake", scale_mod.axpy, grid=_grid, outputs=("out",),
                 fake=lambda x, y, a: torch.empty_like(y))
    x, y = _rand(300), _rand(300)
    torch.testing.assert_close(axpy(x, y, -2.0), -2.0 * x + y, rtol=0, atol=1e-6)
    torch.library.opcheck(axpy.op, (x, y, -2.0))
    bad = tt.op("tile_test::axpy_badfake", scale_mod.axpy, grid=_grid, outputs=("out",),
                fake=lambda x, y, a: (torch.empty_like(y), torch.empty_like(y)))
    with pytest.raises(tt.TileOpError, match="`fake` returned 2 tensors for 1 outputs"):
        bad(x, y, 1.0)


def test_const_from_the_inputs(rmsnorm):
    x, w = _rand(6, 100), _rand(100)
    y = rmsnorm(x, w, 1e-5)
    want = x * torch.rsqrt((x * x).mean(dim=1, keepdim=True) + 1e-5) * w
    torch.testing.assert_close(y, want, rtol=1e-5, atol=1e-5)
    torch.library.opcheck(rmsnorm.op, (x, w, 1e-5))
    f = torch.compile(lambda x, w: rmsnorm(x, w, 1e-5) * 1.0, fullgraph=True,
                      backend="aot_eager", dynamic=True)
    torch.testing.assert_close(f(x, w), want, rtol=1e-5, atol=1e-5)
    x2, w2 = _rand(3, 40), _rand(40)      # another shape, another N: no recompile of the graph
    want2 = x2 * torch.rsqrt((x2 * x2).mean(dim=1, keepdim=True) + 1e-5) * w2
    torch.testing.assert_close(f(x2, w2), want2, rtol=1e-5, atol=1e-5)


def test_empty_tensors_launch_nothing(vadd, scale_):
    e = torch.empty(0)
    c = vadd(e, e)
    assert c.shape == (0,) and c.dtype == torch.float32
    scale_(e, 2.0)


def test_argument_count(vadd):
    # the dispatcher checks calls against the schema, so the message is torch's own
    with pytest.raises(RuntimeError, match="missing value for argument 'b'"):
        vadd(_rand(4))


def test_interp_back_end_needs_a_declaration():
    mod = tilelang.compile(SCALE_SRC, backend="interp")
    with pytest.raises(tt.TileOpError) as e:
        tt.op("tile_test::scale_interp", mod.scale_, grid=_grid)
    assert str(e.value) == (
        "Tile operator `tile_test::scale_interp`: which arrays kernel `scale_` writes is not "
        "known before a launch (the `interp` back end compiles nothing): pass "
        "mutates_args=(...)")
    op = tt.op("tile_test::scale_interp", mod.scale_, grid=_grid, mutates_args=("x",))
    x = _rand(300)
    want = x * 0.5
    op(x, 0.5)
    assert torch.equal(x, want)
    torch.library.opcheck(op.op, (_rand(300), 0.5))


def test_import_without_torch_is_a_clear_error():
    code = ("import sys; sys.modules['torch'] = None\n"
            "import tilelang.torch as tt\n"
            "try:\n"
            "    tt.op('x::y', None, grid=1)\n"
            "except ImportError as e:\n"
            "    print(e)\n")
    env = dict(os.environ, PYTHONPATH=ROOT)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ("tilelang.torch needs PyTorch, which is not installed: "
                                  "pip install 'tilec[torch]' (or any torch >= 2.4)")


# -- operators written as functions: tt.custom_op + tt.wrap (as triton_op + wrap_triton) ----

@pytest.fixture(scope="module")
def fn_ops(scale_mod):
    @tt.custom_op("tile_test::axpy_then_scale", mutates_args=())
    def axpy_then_scale(x: torch.Tensor, y: torch.Tensor, a: float) -> torch.Tensor:
        out = torch.empty_like(x)
        tt.wrap(scale_mod.axpy)[_grid](x, y, out, a, TILE=128)
        tt.wrap(scale_mod.scale_)[_grid](out, 2.0)      # writes `out`, not an input
        return out

    @tt.custom_op("tile_test::scale_in_place", mutates_args=("x",))
    def scale_in_place(x: torch.Tensor, s: float) -> None:
        tt.wrap(scale_mod.scale_)[_grid](x, s)

    @tt.custom_op("tile_test::scale_undeclared", mutates_args=())
    def scale_undeclared(x: torch.Tensor, s: float) -> torch.Tensor:
        tt.wrap(scale_mod.scale_)[_grid](x[1:], s)      # a view of the input: its memory
        return x.clone()
    return axpy_then_scale, scale_in_place, scale_undeclared


def test_function_operator(fn_ops):
    axpy_then_scale, scale_in_place, _ = fn_ops
    x, y = _rand(500), _rand(500)
    torch.testing.assert_close(axpy_then_scale(x, y, 3.0), (x * 3 + y) * 2, rtol=0, atol=2e-6)
    torch.library.opcheck(axpy_then_scale, (x, y, 3.0))
    z = x.clone()
    scale_in_place(z, 0.5)
    assert torch.equal(z, x * 0.5)
    torch.library.opcheck(scale_in_place, (x.clone(), 0.5))
    f = torch.compile(lambda x, y: axpy_then_scale(x, y, 1.0) + 1, fullgraph=True,
                      backend="aot_eager")
    torch.testing.assert_close(f(x, y), (x + y) * 2 + 1, rtol=0, atol=2e-6)


def test_function_operator_fake_runs_no_kernel(fn_ops):
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        out = fn_ops[0](torch.empty(64), torch.empty(64), 1.0)
    assert out.shape == (64,)


def test_function_operator_undeclared_write(fn_ops):
    with pytest.raises(tt.TileOpError) as e:
        fn_ops[2](_rand(300), 2.0)
    assert str(e.value) == (
        "Tile operator `tile_test::scale_undeclared`: kernel `scale_` writes `x`, which is "
        "the memory of input `x`, and mutates_args leaves `x` out; declare it")


def test_written_arrays(scale_mod):
    assert tt.written_arrays(scale_mod.scale_) == {"x"}
    assert tt.written_arrays(scale_mod.axpy) == {"out"}


DTYPES_SRC = """
kernel to_bf16(x: Array[f16, 1], y: Array[bf16, 1], k: i32, neg: bool, const TILE: i32 = 128) {
    let t = astype(load(x, index = (bid(0),), shape = (TILE,), padding = 0.0), f32);
    let s = astype(k, f32) * (-1.0 if neg else 1.0);
    store(y, index = (bid(0),), tile = astype(t * s, bf16));
}
"""


def test_dtypes_and_scalar_types():
    mod = tilelang.compile(DTYPES_SRC, backend="emulator")
    op = tt.op("tile_test::to_bf16", mod.to_bf16, outputs={"y": tt.like("x")}, grid=_grid)
    assert str(torch.ops.tile_test.to_bf16.default._schema) == \
        "tile_test::to_bf16(Tensor x, SymInt k, bool neg) -> Tensor"
    x = _rand(300).to(torch.float16)
    y = op(x=x, k=3, neg=True)                          # by keyword, as any torch operator
    assert y.dtype == torch.bfloat16
    # f16 -> f32 is exact, * -3 rounds once in f32, then once to bf16: as torch does it
    assert torch.equal(y, (x.float() * -3.0).to(torch.bfloat16))
    torch.library.opcheck(op.op, (x, 2, False))
