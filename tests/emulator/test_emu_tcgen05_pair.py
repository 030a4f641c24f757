"""tcgen05 on a CTA pair (`.cta_group::2`, sm_100a) on the emulator, judged by Triton 3.9's
Gluon kernel (tests/emulator/fixtures/triton_pair_mma_sm100.ptx, made by
benchmarks/triton_ref/gen_pair_mma_ptx.py): a cluster of two CTAs, each loading half of A's
rows and half of B's columns, the even CTA issuing M = 256 products over both CTAs' shared
memory into both CTAs' tensor memory and committing them to both CTAs' mbarriers
(`multicast::cluster`), against NumPy (docs/emulator.md, "tcgen05 and tensor memory").

Triton reaches the even CTA's mbarrier by clearing bit 24 of a shared address, the bit where
the hardware keeps a CTA's rank in the cluster window; the emulator encodes another CTA's
window as `mapa` does (access.py), so the test gives the kernel that address by `mapa` (to
rank 0, the CTA itself on rank 0): the one line it changes. The launch under the race check
(clocks across the cluster's CTAs) is test_emu_tcgen05_races.py's."""

from __future__ import annotations

import json
import pathlib
import re

import numpy as np
import pytest

from tilelang.emulator import EmulatorDevice
from tilelang.emulator.errors import ExecutionError
from tilelang.emulator.tensormap import encode

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
LEADER = re.compile(r"and\.b32 \t(%r\d+), (%r\d+), -16777232;")   # & ~(1 << 24) & ~15


def _kernel():
    ptx = (FIXTURES / "triton_pair_mma_sm100.ptx").read_text()
    info = json.loads((FIXTURES / "triton_pair_mma_sm100.json").read_text())
    assert len(LEADER.findall(ptx)) == 1
    ptx = LEADER.sub(r"{ .reg .b32 rk; .reg .pred own; mov.u32 rk, %cluster_ctarank; "
                     r"setp.eq.u32 own, rk, 0; mapa.shared::cluster.u32 \1, \2, 0; "
                     r"@own mov.b32 \1, \2; }", ptx)
    return ptx, info


def run(a, b, ptx=None):
    text, info = _kernel()
    ptx = ptx or text
    M, N, K = info["shape"]
    meta = info["tensordesc_meta"]
    dev = EmulatorDevice()
    fn = dev.load_module(ptx).get_function(info["kernel"])
    pa, pb, pc = dev.to_device(a), dev.to_device(b), dev.malloc(4 * M * N)
    dev.memset(pc, 0xFF, 4 * M * N)                   # NaN: every element must be written

    def tmap(ptr, rows, cols, esize, m):
        # dimension 0 is the contiguous one; the box as Triton chose it (one CTA's share)
        box = m["block_size"]
        return encode(m["elem_type"], 2, int(ptr), (cols, rows), (cols * esize,),
                      (box[1], box[0]), (1, 1), 0, m["swizzle"], 2, 0)

    i32, i64 = np.int32, np.int64
    args = [tmap(pa, M, K, 2, meta[0]), i32(M), i32(K), i64(K), i64(1),
            tmap(pb, K, N, 2, meta[1]), i32(K), i32(N), i64(N), i64(1),
            tmap(pc, M, N, 4, meta[2]), i32(M), i32(N), i64(N), i64(1), 0, 0]
    dev.launch(fn, (2, 1, 1), tuple(info["block"]), args, shared_mem=info["shared_bytes"],
               cluster=(2, 1, 1))
    return dev.from_device(pc, (M, N), np.float32)


def _operands(exact, seed=0):
    _, info = _kernel()
    M, N, K = info["shape"]
    rng = np.random.default_rng(seed)
    if exact:                # small integers: every product and partial sum exact in f32
        return (rng.integers(-4, 5, (M, K)).astype(np.float16),
                rng.integers(-4, 5, (K, N)).astype(np.float16))
    return (rng.standard_normal((M, K)).astype(np.float16),
            rng.standard_normal((K, N)).astype(np.float16))


def test_the_fixture_is_a_pair_product():
    ptx, info = _kernel()
    assert ".reqnctapercluster 2" in ptx and info["num_ctas"] == 2
    for form in ("tcgen05.alloc.cta_group::2.sync.aligned.shared::cta.b32",
                 "cp.async.bulk.tensor.2d.cta_group::2.shared::cluster.global.mbarrier",
                 "tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster."
                 "multicast::cluster.b64", "tcgen05.dealloc.cta_group::2"):
        assert form in ptx, form
    # K = 64: four k-steps of 16, issued by the even CTA only
    assert len(re.findall(r"tcgen05\.mma\.cta_group::2\.kind::f16 ", ptx)) == 4


def test_pair_product_matches_numpy_exactly():
    a, b = _operands(exact=True)
    c = run(a, b)
    np.testing.assert_array_equal(c, a.astype(np.float64) @ b.astype(np.float64))


def test_pair_product_random_operands():
    a, b = _operands(exact=False, seed=1)
    c = run(a, b)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    # f32 accumulation of K = 64 products of f16 values: a bound of K ulps of the magnitudes
    bound = 64 * np.finfo(np.float32).eps * (np.abs(a.astype(np.float64)) @
                                             np.abs(b.astype(np.float64)))
    assert (np.abs(c - ref) <= bound).all()


def test_pair_product_needs_m256():
    ptx, _ = _kernel()
    idesc = 0x10210010           # kind::f16, D f32, B MN-major, N = 128, M = 256
    assert f"{idesc};" in ptx
    a, b = _operands(exact=True)
    with pytest.raises(ExecutionError, match=r"M = 128: the emulator runs cta_group::2 with "
                                             r"M = 256"):
        run(a, b, ptx.replace(f"{idesc};", f"{idesc - (8 << 24)};"))
