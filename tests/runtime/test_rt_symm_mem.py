"""Symmetric arrays at a module's launch (docs/distributed.md, "PyTorch symmetric memory"):
the rank's table built from a rendezvous handle's buffer pointers (fake handles here), passed
with the world size and rank, run on the emulator back end against NumPy; cached tables; the
argument checks; and, on machines with two or more GPUs, the examples on PyTorch's symmetric
memory under torchrun with NCCL (benchmarks/distributed.py --check)."""

from __future__ import annotations

import os
import pathlib
import struct
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest

import tilelang
from tilelang.diagnostics import TileError
from tilelang.runtime.array_lists import table_bytes
from tilelang.runtime.symm_mem import SymmetricBuffer, from_handle, signal_pad

ROOT = pathlib.Path(__file__).resolve().parents[2]

SRC = """kernel peersum(x: Symmetric[Array[f32, 1]], y: Array[f32, 1]) {
    let i = bid(0);
    var acc = zeros((128,), f32);
    for r in range(world_size()) {
        acc = acc * 2.0 + load(peer(x, r), index = (i,), shape = (128,), padding = 0.0);
    }
    store(y, index = (i,), tile = acc + astype(rank(), f32));
}
kernel grid2(x: Symmetric[Array[i32, 2]], y: Array[i32, 2]) {
    // rank r's y = rank (r + 1) % W's x, through a two-axis table entry
    let t = load(peer(x, (rank() + 1) % world_size()), index = (0, 0), shape = (8, 16),
                 padding = -1);
    store(y, index = (0, 0), tile = t);
}
"""


@pytest.fixture(scope="module")
def mod():
    return tilelang.compile(SRC, backend="emulator")


@pytest.mark.parametrize("world", [2, 3])
def test_a_launch_reads_every_rank_through_its_table(mod, world):
    n = 300
    data = [np.random.default_rng(r).standard_normal(n).astype(np.float32)
            for r in range(world)]
    bufs = [mod.to_device(d) for d in data]
    want = np.zeros(n, np.float32)
    for d in data:                                   # the kernel's order, in f32
        want = want * np.float32(2) + d
    for me in range(world):
        s = SymmetricBuffer(tuple(b.ptr for b in bufs), me, "f32", (n,), (1,),
                            where="emulator")
        y = mod.empty(n, "f32")
        mod.peersum[3](s, y)
        assert np.array_equal(y.numpy(), want + np.float32(me))


def test_an_offset_and_two_axes(mod):
    # three "ranks", each buffer holding a prefix and then a 6 x 10 array (strides 10, 1)
    bufs, arrays = [], []
    for r in range(3):
        a = np.arange(60, dtype=np.int32).reshape(6, 10) + 100 * r
        arrays.append(a)
        bufs.append(mod.to_device(np.concatenate([np.full(4, -7, np.int32), a.ravel()])))
    for me in range(3):
        s = SymmetricBuffer(tuple(b.ptr for b in bufs), me, "i32", (6, 10), (10, 1), 16, 256,
                            where="emulator")
        y = mod.empty((8, 16), "i32")
        mod.grid2[1](s, y)
        want = np.full((8, 16), -1, np.int32)
        want[:6, :10] = arrays[(me + 1) % 3]
        assert np.array_equal(y.numpy(), want)


def test_the_table_is_cached_by_contents(mod):
    bufs = [mod.to_device(np.ones(128, np.float32)) for _ in range(2)]
    k = mod.peersum
    cache = k._launcher.tables.tables
    before = len(cache)
    s = SymmetricBuffer(tuple(b.ptr for b in bufs), 0, "f32", (128,), (1,), where="emulator")
    for _ in range(3):
        k[1](s, mod.empty(128, "f32"))
    assert len(cache) == before + 1                  # one upload for three launches
    other = SymmetricBuffer(tuple(b.ptr for b in bufs[::-1]), 0, "f32", (128,), (1,),
                            where="emulator")       # a new handle: other pointers
    k[1](other, mod.empty(128, "f32"))
    assert len(cache) == before + 2


def test_table_from_a_rendezvous_handle():
    torch = pytest.importorskip("torch")
    base = torch.zeros(64, dtype=torch.float16)
    t = base[8:40].view(4, 8)                        # 16 bytes into the local buffer
    ptrs = [0x7F0000000000, base.data_ptr(), 0x7F0000100000]
    h = SimpleNamespace(buffer_ptrs=ptrs, rank=1, world_size=3, buffer_size=128)
    s = from_handle(h, t)
    assert (s.rank, s.world_size, s.dtype, s.shape, s.strides, s.offset) == \
        (1, 3, "f16", (4, 8), (8, 1), 16)
    want = b"".join(struct.pack("<Qqqqq", p + 16, 4, 8, 8, 1) for p in ptrs)
    assert table_bytes(s.peers(), 2) == want
    assert s.problem() is None
    h.buffer_size = 70                               # 16 + 64 bytes do not fit 70
    assert from_handle(h, t).problem() == \
        "the array (64 bytes at offset 16) does not fit the 70-byte buffers"
    h.world_size = 4
    with pytest.raises(TileError, match="the symmetric-memory handle has 3 buffer pointers "
                                        "for a world of 4"):
        from_handle(h, t)


def test_signal_pads_as_a_symmetric_array():
    h = SimpleNamespace(signal_pad_ptrs=[0x1000, 0x9000], rank=0, world_size=2,
                        signal_pad_size=2048, device=None)
    s = signal_pad(h)
    assert (s.dtype, s.shape, s.strides, s.buffer_ptrs, s.rank) == \
        ("u32", (512,), (1,), (0x1000, 0x9000), 0)
    assert signal_pad(h, "u64").shape == (256,)
    with pytest.raises(TileError, match=r"a signal pad holds u32, i32, u64 or i64 slots, "
                                        r"not 'f32'"):
        signal_pad(h, "f32")


def _diag(fn):
    with pytest.raises(TileError) as e:
        fn()
    d = e.value.diagnostics[0]
    return d.code, d.message


def test_argument_checks(mod):
    bufs = [mod.to_device(np.zeros(128, np.float32)) for _ in range(2)]
    y = mod.empty(128, "f32")
    ptrs = tuple(b.ptr for b in bufs)
    k = mod.peersum[1]
    assert _diag(lambda: k(None, y)) == (
        "E0919", "kernel `peersum` takes the symmetric array `x`, which needs a world of "
                 "devices (got None)")
    assert _diag(lambda: k(np.zeros(128, np.float32), y)) == (
        "E0919", "kernel `peersum` takes the symmetric array `x`, which needs a world of "
                 "devices (got a numpy.ndarray)")
    where = "argument `x` of kernel `peersum` (x: Symmetric[Array[f32, 1]])"
    assert _diag(lambda: k(SymmetricBuffer(ptrs, 0, "i32", (128,), (1,), where="emulator"),
                           y)) == ("E0911", f"{where} holds i32")
    assert _diag(lambda: k(SymmetricBuffer(ptrs, 0, "f32", (8, 16), (16, 1),
                                           where="emulator"), y)) == \
        ("E0912", f"{where} has rank 2")
    assert _diag(lambda: k(SymmetricBuffer(ptrs, 2, "f32", (128,), (1,), where="emulator"),
                           y)) == ("E0919", f"{where}: rank 2 is not in a world of 2")
    assert _diag(lambda: k(SymmetricBuffer(ptrs, 0, "f32", (128,), (1,), 8, 512,
                                           where="emulator"), y)) == \
        ("E0919", f"{where}: the array (512 bytes at offset 8) does not fit the 512-byte "
                  f"buffers")
    assert _diag(lambda: k(SymmetricBuffer(ptrs, 0, "f32", (128,), (1,)), y)) == \
        ("E0913", f"{where} is in cuda memory; the module runs on emulator")


def test_the_interpreter_refuses_symmetric_arrays():
    m = tilelang.compile(SRC, backend="interp")
    assert _diag(lambda: m.peersum[1](None, np.zeros(128, np.float32))) == (
        "E0919", "kernel `peersum` takes the symmetric array `x`, which needs a world of "
                 "devices")


def _gpus() -> int:
    try:
        import torch
    except ImportError:
        return 0
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


@pytest.mark.gpu
@pytest.mark.slow
def test_examples_on_pytorch_symmetric_memory():
    n = min(_gpus(), 4)
    if n < 2:
        pytest.skip("needs two or more GPUs (and torch with CUDA)")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                        f"--nproc-per-node={n}", str(ROOT / "benchmarks" / "distributed.py"),
                        "--check"], env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert r.stdout.count("all_reduce: ok") == n and r.stdout.count("all_gather: ok") == n
