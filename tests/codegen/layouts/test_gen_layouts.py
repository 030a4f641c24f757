"""layouts/distributed.py on its own: blocked layouts cover every element once with 16-byte vectors and
coalesced lanes, relabellings stay valid, sliced layouts broadcast back without data
movement, register_map finds renamings and refuses cross-thread needs; and the diagnostic for
an op without code generation."""

from __future__ import annotations

import numpy as np
import pytest

from gen_support import compile_kernel
from tilelang.codegen.layouts import distributed as L
from tilelang.diagnostics import TileError
from tilelang.ir.builder import KernelBuilder
from tilelang.sema.types import F32, ArrayType


@pytest.mark.parametrize("shape,item,threads", [((1024,), 4, 256), ((64, 64), 4, 128),
                                                ((1, 1024), 4, 128), ((16,), 4, 128),
                                                ((8, 8, 8), 2, 64), ((2,), 8, 1),
                                                ((32, 16), 1, 32)])
def test_blocked_covers_every_element_once(shape, item, threads):
    lay = L.blocked(shape, item, threads)
    assert lay.is_valid() and lay.threads == threads
    owners = lay.table.reshape(-1)
    mask = lay.replicated_thread_mask()
    owned = lay.table[[t for t in range(threads) if t & mask == 0]].reshape(-1)
    assert sorted(owned.tolist()) == list(range(int(np.prod(shape))))
    assert set(owners.tolist()) == set(range(int(np.prod(shape))))


def test_blocked_vectors_and_coalesced_lanes():
    lay = L.blocked((64, 64), 4, 128)
    assert L.vector_width(lay) == 4
    # lane l's first element: 4 * l along the row for the first 16 lanes (one 256-byte row)
    assert [lay.table[t, 0] for t in range(16)] == [4 * t for t in range(16)]
    assert L.vector_width(L.blocked((8, 64), 2, 128)) == 8       # 8 x f16 = 16 bytes
    assert L.vector_width(L.blocked((8, 2), 4, 128)) == 2        # the row is only 2 wide


def test_transposed_fast_axis():
    lay = L.blocked((64, 16), 4, 128, fast_axis=0)
    assert L.vector_width(lay, 0) == 4 and lay.is_valid()
    assert [lay.table[t, 0] for t in range(4)] == [0, 4 * 16, 8 * 16, 12 * 16]


def test_relabellings_are_valid_and_move_nothing():
    lay = L.blocked((16, 32), 4, 128)
    r = L.reshape(lay, (512,))
    assert r.is_valid() and (r.table == lay.table).all()
    p = L.permute(lay, (1, 0))
    assert p.is_valid()
    t, c = 5, 3
    i, j = divmod(int(lay.table[t, c]), 32)
    assert p.table[t, c] == j * 16 + i
    e = L.expand_dims(lay, 0)
    assert e.shape == (1, 16, 32) and (e.table == lay.table).all()


def test_sliced_layout_broadcasts_back_for_free():
    lay = L.blocked((8, 256), 4, 128)
    s = L.drop_axes(lay, (1,), keepdims=True)
    assert s.shape == (8, 1) and s.is_valid()
    assert all(not b[1] for b in s.reg + s.lane + s.warp)
    need = L.broadcast_table(lay, s.shape)
    m = L.register_map(s, need)
    assert m is not None and len(m) == lay.num_regs
    flat = L.drop_axes(lay, (0, 1), keepdims=False)
    assert flat.shape == () and flat.num_regs == 1
    assert L.register_map(flat, L.broadcast_table(lay, ())) == [0] * lay.num_regs


def test_register_map_refuses_cross_thread_needs():
    a = L.blocked((32, 32), 4, 128)
    b = L.permute(L.blocked((32, 32), 4, 128), (1, 0))
    assert L.register_map(a, b.table) is None
    assert L.register_map(a, a.table) == list(range(a.num_regs))


def test_op_without_codegen_is_a_diagnostic(monkeypatch):
    from tilelang.codegen.lower import table as lower_table
    monkeypatch.delitem(lower_table.LOWERINGS, "cumsum")
    kb = KernelBuilder("scan")
    x, y = kb.param("x", ArrayType(F32, 1)), kb.param("y", ArrayType(F32, 1))
    t = kb.op("load", x, index=(0,), shape=(64,), padding=0.0)
    kb.op("store", y, index=(0,), tile=kb.op("cumsum", t, 0))
    with pytest.raises(TileError) as e:
        compile_kernel(kb.finish())
    d = e.value.diagnostics[0]
    assert (d.code, d.message) == ("E0780", "`cumsum` has no code generation yet")
    assert d.help == "this operation runs in the reference interpreter only for now"


def test_unknown_target_and_bad_opt_level():
    kb = KernelBuilder("k")
    kb.param("x", ArrayType(F32, 1))
    k = kb.finish()
    with pytest.raises(TileError) as e:
        compile_kernel(k, "sm_75")
    assert e.value.code == "E0750"
    with pytest.raises(TileError) as e:
        compile_kernel(k, "sm_90a", 4)
    assert (e.value.code, e.value.diagnostics[0].message) == \
        ("E0782", "optimization level 4 is not 0-3")
