"""Lists of arrays at launch (docs/python-api.md "Lists of arrays", docs/abi.md): each entry
checked as an array, the facts every entry has, the device table's bytes, its reuse for the
same list (and refusal of a new one during CUDA graph capture), and results equal to NumPy on
the emulator, the interpreter and the CUDA back end (the emulated driver under
TILELANG_TEST_EMULATED_GPU=1)."""

from __future__ import annotations

import struct

import numpy as np
import pytest

import tilelang
from rt_support import fresh_runtime, use_emulated_driver  # noqa: F401 (autouse fixture)
from tilelang.runtime.array_lists import list_facts, table_bytes
from tilelang.runtime.errors import KernelArgumentError

# y_e = x_e * s + e (rows of 64); the kernel reads len(xs) too: y_e[0] gets len at e == 0
SRC = """
kernel scale_rows(xs: List[Array[f32, 2]], ys: List[Array[f32, 2]], s: f32) {
    let r = bid(0);
    let e = bid(1);
    let x = xs[e];
    let t = load(x, index = (r, 0), shape = (1, 64), padding = 0.0);
    store(ys[e], index = (r, 0), tile = t * s + astype(e, f32));
}
kernel count(xs: List[Array[f32, 2]], out: Array[i32, 1]) {
    store(out, index = (0,), tile = full((1,), len(xs) * 1000 + xs[bid(0)].shape[0], i32));
}
kernel read_only(xs: List[Array[f32, 2]], out: Array[f32, 2]) {
    store(out, index = (0, 0), tile = load(xs[0], index = (0, 0), shape = (1, 64)));
}
"""
RNG = np.random.default_rng(6)
ROWS = (5, 0, 9, 1)                           # ragged, one empty


@pytest.fixture(autouse=True)
def cache_in_tmp(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "cache"))


def lists(cols=64):
    xs = [RNG.standard_normal((m, cols)).astype(np.float32) for m in ROWS]
    return xs, [np.full((m, cols), np.nan, np.float32) for m in ROWS]


def want(xs, s):
    return [(x.astype(np.float64) * s + e).astype(np.float32) for e, x in enumerate(xs)]


@pytest.mark.parametrize("backend", ["emulator", "interp"])
def test_ragged_lists_match_numpy(backend):
    mod = tilelang.compile(SRC, backend=backend)
    xs, ys = lists()
    mod.scale_rows[(max(ROWS), len(ROWS))](xs, ys, 1.5)
    for got, w in zip(ys, want(xs, 1.5)):
        np.testing.assert_allclose(got, w, rtol=1e-6, atol=1e-6)
    # tuples too, and a grid past the list: the extra experts' blocks touch nothing
    xs2, ys2 = lists()
    tilelang.launch(None, (max(ROWS), len(ROWS) + 3), mod.scale_rows, (tuple(xs2), ys2, -2.0))
    for got, w in zip(ys2, want(xs2, -2.0)):
        np.testing.assert_allclose(got, w, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("backend", ["emulator", "interp"])
def test_len_and_entry_extents(backend):
    mod = tilelang.compile(SRC, backend=backend)
    xs, _ = lists()
    for e, m in enumerate(ROWS):
        out = np.zeros(1, np.int32)
        mod.count[(1,)]([xs[e]] + xs, out)                  # block 0 reads entry 0
        assert out[0] == (1 + len(xs)) * 1000 + m


def test_table_bytes_and_upload_are_the_abi():
    mod = tilelang.compile(SRC, backend="emulator")
    xs = [mod.to_device(np.zeros((m, 64), np.float32)) for m in ROWS]
    view = mod.to_device(np.zeros((10, 128), np.float32))[::2, ::2]      # strided entry
    entries = xs + [view]
    ys = [mod.to_device(np.zeros(a.shape, np.float32)) for a in entries]
    mod.scale_rows[(9, 5)](entries, ys, 1.0)
    launcher = mod.scale_rows._launcher
    assert len(launcher.tables.tables) == 2                # xs and ys, kept
    from tilelang.runtime.args import extract
    views = [extract(a) for a in entries]
    raw = table_bytes(views, 2)
    assert len(raw) == 5 * 8 * 5
    for j, a in enumerate(entries):
        got = struct.unpack_from("<Qqqqq", raw, 40 * j)
        assert got == (a.ptr, *a.shape, *a.strides)
    assert views[-1].strides == (256, 2)
    # the uploaded table holds exactly those bytes
    (xs_table,) = [t for k, t in launcher.tables.tables.items()
                   if [p for p, _, _ in k[3]] == [a.ptr for a in entries]]
    assert xs_table.numpy().tobytes() == raw
    # the same list again: no new table; another list: one more
    mod.scale_rows[(9, 5)](entries, ys, 1.0)
    assert len(launcher.tables.tables) == 2
    mod.scale_rows[(9, 4)](xs, ys[:4], 1.0)              # two other lists: two more tables
    assert len(launcher.tables.tables) == 4
    np.testing.assert_array_equal(ys[1].numpy(), np.zeros((0, 64), np.float32))


def test_facts_hold_for_every_entry():
    mod = tilelang.compile(SRC, backend="emulator")
    dense = [mod.to_device(np.ones((4, 64), np.float32)) for _ in range(2)]
    strided = mod.to_device(np.ones((4, 128), np.float32))[:, ::2]
    out = [mod.to_device(np.zeros((4, 64), np.float32)) for _ in range(3)]
    mod.scale_rows[(4, 2)](dense, out[:2], 2.0)
    mod.scale_rows[(4, 3)](dense + [strided], out, 2.0)
    keys = sorted(mod.scale_rows._specs)
    assert keys == sorted([("caes", "caes"), ("-aes", "caes")])
    # an entry of a rank-2 list is 40 bytes (address, 2 extents, 2 strides): the contiguous
    # specialization never reads the last stride (bytes 32-39), the other does
    specs = mod.scale_rows._specs
    assert "+32];" not in specs[("caes", "caes")].ptx
    assert "+32];" in specs[("-aes", "caes")].ptx
    for o in out:
        np.testing.assert_array_equal(o.numpy(), np.full((4, 64), 2.0, np.float32) +
                                      np.float32(out.index(o)))


def test_list_facts_key():
    from tilelang.runtime.args import ArrayView
    v = lambda ptr, shape, strides: ArrayView(ptr, shape, strides, "f32", "host", 0, None, "x")
    assert list_facts([v(4096, (4, 64), (64, 1)), v(8192, (2, 64), (64, 1))], "f32") == "caes"
    assert list_facts([v(4096, (4, 64), (64, 1)), v(8196, (2, 64), (64, 1))], "f32") == "c-es"
    assert list_facts([v(4096, (4, 64), (64, 1)), v(4096, (4, 64), (0, 1))], "f32") == "caesn"


def test_errors_name_the_list_or_the_entry():
    mod = tilelang.compile(SRC, backend="emulator")
    xs, ys = lists()

    def err(*args):
        with pytest.raises(KernelArgumentError) as e:
            mod.scale_rows[(9, 4)](*args)
        d = e.value.diagnostics[0]
        return d.code, d.message, d.help

    assert err([], ys, 1.0)[:2] == (
        "E0914", "argument `xs` of kernel `scale_rows` (xs: List[Array[f32, 2]]) is an empty "
        "list")
    assert err(xs[0], ys, 1.0)[:2] == (
        "E0914", "argument `xs` of kernel `scale_rows` (xs: List[Array[f32, 2]]) is a "
        "numpy.ndarray, not a list of arrays")
    assert err(None, ys, 1.0)[0] == "E0914"
    assert err([xs[0], xs[1].astype(np.float16)], ys, 1.0)[:2] == (
        "E0911", "argument `xs[1]` of kernel `scale_rows` (xs[1]: Array[f32, 2]) has dtype "
        "f16, expected f32")
    assert err([xs[0], xs[2].reshape(-1)], ys, 1.0)[:2] == (
        "E0912", "argument `xs[1]` of kernel `scale_rows` (xs[1]: Array[f32, 2]) has rank 1 "
        "(shape (576,)), expected rank 2")
    ro = np.zeros((5, 64), np.float32)
    ro.flags.writeable = False
    assert err(xs, [ro] + ys[1:], 1.0)[:2] == (
        "E0914", "argument `ys[0]` of kernel `scale_rows` (ys[0]: Array[f32, 2]) is a read-only "
        "array, but the kernel writes it")
    # a list only read takes read-only arrays
    mod.read_only[(1,)]([ro], np.zeros((1, 64), np.float32))


def test_written_flag_of_lists():
    mod = tilelang.compile(SRC, backend="emulator")
    spec = mod.scale_rows.compile()
    assert [(p.name, p.kind, p.written) for p in spec.artifact.params] == [
        ("xs", "list", False), ("ys", "list", True), ("s", "scalar", True)]
    assert [p.ptx_params() for p in spec.artifact.params[:1]] == [
        (("xs", "uint64"), ("xs_len", "int64"))]


@pytest.mark.gpu
def test_lists_on_the_cuda_back_end(tmp_path, monkeypatch):
    mod = tilelang.compile(SRC, backend="cuda")
    xs, _ = lists()
    dx = [mod.to_device(x) for x in xs]
    dy = [mod.to_device(np.zeros(x.shape, np.float32)) for x in xs]
    mod.scale_rows[(max(ROWS), len(ROWS))](dx, dy, 3.0)
    mod.backend.synchronize()
    for got, w in zip(dy, want(xs, 3.0)):
        np.testing.assert_allclose(got.numpy(), w, rtol=1e-6, atol=1e-6)


def test_capture_reuses_the_table_and_refuses_a_new_one(monkeypatch):
    pytest.importorskip("cuda.bindings.driver")
    emu = use_emulated_driver(monkeypatch)
    mod = tilelang.compile(SRC, backend="cuda")
    xs, _ = lists()
    dx = [mod.to_device(x) for x in xs]
    dy = [mod.to_device(np.zeros(x.shape, np.float32)) for x in xs]
    err, s = emu.cuStreamCreate(0)
    grid = (max(ROWS), len(ROWS))
    mod.scale_rows[grid](dx, dy, 1.0, stream=s)              # warm-up: loads, uploads tables
    mod.backend.synchronize()
    assert int(emu.cuStreamBeginCapture(s, emu.CUstreamCaptureMode(0))[0]) == 0
    start = len(emu.calls)
    mod.scale_rows[grid](dx, dy, 2.0, stream=s)              # same lists: no copy
    made = emu.calls[start:]
    assert "cuMemcpyHtoD" not in made and "cuMemAlloc" not in made, made
    with pytest.raises(KernelArgumentError) as e:             # a new list: refused, not copied
        mod.scale_rows[grid](dx[::-1], dy, 2.0, stream=s)
    d = e.value.diagnostics[0]
    assert d.code == "E0918"
    assert d.help.startswith("launch once with the same list of arrays before capturing")
    err, graph = emu.cuStreamEndCapture(s)
    assert int(err) == 0                                      # the capture is still valid
    err, exe = emu.cuGraphInstantiate(graph, 0)
    assert int(emu.cuGraphLaunch(exe, s)[0]) == 0
    mod.backend.synchronize()
    for got, w in zip(dy, want(xs, 2.0)):
        np.testing.assert_allclose(got.numpy(), w, rtol=1e-6, atol=1e-6)


def test_tilec_run_refuses_a_list(tmp_path, capsys):
    from tilelang.cli import main
    f = tmp_path / "l.tile"
    f.write_text(SRC)
    with pytest.raises(SystemExit) as e:
        main(["run", str(f), "--kernel", "count", "--grid", "1", "--backend", "emulator",
              "--shape", "4"])
    assert e.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "tilec run: error: kernel `count` takes `xs: List[Array[f32, 2]]`, a list of arrays, "
        "which tilec run cannot make: launch it from Python (docs/python-api.md)")
