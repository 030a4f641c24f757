"""TMA stores in the epilogue on sm_90a (issue 16, scope 1): `store(C, index, acc)` of a
tensor-core accumulator into a contiguous, 16-byte aligned array writes the fragments into
a swizzled shared image and `cp.async.bulk.tensor ... .global.shared::cta.bulk_group` copies
it out through a tensor map of its own (a `__grid_constant__` parameter like the loads'),
the TMA unit clipping ragged edges (lower/tensorcore/tma_store.py).

Results are the emulator's (its bulk tensor store, swizzle and async-proxy check follow the
PTX ISA on their own) against NumPy, exact: operands are multiples of 1/8 in [-1, 1], so every
product and partial sum is exact in f32 (and the f16 outputs, multiples of 1/64 below 2^11,
exact in f16). Arrays are passed as views of wider allocations whose padding holds a NaN
sentinel: a box element outside the view must not be written."""

from __future__ import annotations

import re
import shutil
import subprocess

import numpy as np
import pytest

from tilelang.codegen.api import TensorMapSpec

from test_tma import BATCHED_LOOP
from test_wgmma import MATMUL, operands
from wgmma_support import compile_for, compile_tma

needs_ptxas = pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas not on PATH")


def padded(x: np.ndarray, pad_cols: int, fill=np.nan) -> np.ndarray:
    """`x` as a view of an allocation `pad_cols` columns wider, the padding `fill`."""
    full = np.full(x.shape[:-1] + (x.shape[-1] + pad_cols,), fill, x.dtype)
    full[..., :x.shape[-1]] = x
    return full[..., :x.shape[-1]]


def run_views(src: str, kernel: str, arrays: dict, grid, *, race_check: bool = False,
              defines: dict | None = None, target: str = "sm_90a"):
    """Launch on the emulator with each array passed as the view it is (its own address,
    extents and strides inside its base allocation, which is what goes to the device and
    comes back); tensor maps built by the runtime's emulator encoding."""
    from tilelang.emulator import EmulatorDevice
    from tilelang.runtime.tensormap import encode_emulator, map_args
    res = compile_for(src, kernel, arrays, defines=defines, target=target)
    art = res.codegen.kernel(kernel)
    dev = EmulatorDevice(race_check=race_check)
    bases, addr, args = {}, {}, []
    for p in art.params:
        x = arrays[p.name]
        base = x.base if x.base is not None else x
        assert base.flags.c_contiguous
        off = x.__array_interface__["data"][0] - base.__array_interface__["data"][0]
        bases[p.name] = (base, dev.to_device(carrier(base)))
        addr[p.name] = int(bases[p.name][1]) + off
        args += [np.uint64(addr[p.name]), *map(np.int64, x.shape),
                 *(np.int64(s // x.itemsize) for s in x.strides)]
    for spec in art.tensor_maps:
        x = arrays[spec.array]
        args.append(encode_emulator(map_args(spec, addr[spec.array], x.shape,
                                             [s // x.itemsize for s in x.strides])))
    dims = list((tuple(grid) + (1, 1))[:3])
    if art.cluster:                       # the grid is whole clusters (extra blocks: outside)
        dims = [g + -g % c for g, c in zip(dims, tuple(art.cluster) + (1, 1))]
    rep = dev.launch(dev.load_module(res.ptx).get_function(kernel), tuple(dims), art.block,
                     args, cluster=art.cluster, shared_mem=art.dynamic_smem)
    for base, ptr in bases.values():
        base[...] = dev.from_device(ptr, base.shape, carrier(base).dtype).view(base.dtype)
    return res, rep


def carrier(x: np.ndarray) -> np.ndarray:
    """ml_dtypes' bf16 and f8 arrays have no buffer format: move their bits as integers."""
    if type(x.dtype).__module__.startswith("ml_dtypes") or \
            x.dtype.type.__module__.startswith("ml_dtypes"):
        return x.view({1: np.uint8, 2: np.uint16}[x.itemsize])
    return x


def product(a, b):
    return a.astype(np.float64) @ b.astype(np.float64)


def check(c: np.ndarray, want: np.ndarray) -> None:
    """The view holds `want` exactly and the padding around it still holds NaN."""
    assert np.array_equal(c, want)
    full = c.base
    assert np.isnan(full[..., c.shape[-1]:]).all()


def epilogue(ptx: str) -> str:
    return ptx[ptx.rfind("wgmma.wait_group.sync.aligned 0"):]


# ---------------------------------------------------------------------------------------------
# PTX

def test_ptx_structure():
    a, b = operands((256, 256), (256, 256))
    arrays = {"a": a, "b": b, "c": np.zeros((256, 256), np.float32)}
    res = compile_for(MATMUL, "matmul", arrays)
    art = res.codegen.kernel("matmul")
    # c (M, N) f32: panels of 8 columns (32 bytes: conflict-free 8-byte stores) by the
    # tile's 128 rows
    assert art.tensor_maps[-1] == TensorMapSpec("c", art.params[2].dtype, (8, 128), 32)
    assert len(art.tensor_maps) == 3
    assert ".param .align 64 .b8 matmul_param_17[128]" in res.ptx
    epi = epilogue(res.ptx)
    assert "st.global" not in res.ptx and "ld.shared" not in epi
    assert epi.count("st.shared.v2.b32") == 64             # 128 x 128 f32 / 128 threads / 2
    stores = re.findall(r"cp\.async\.bulk\.tensor\.2d\.global\.shared::cta\.bulk_group "
                        r"\[%rd\d+, \{%r\d+, %r\d+\}\], \[%r\d+\];", epi)
    assert len(stores) == 16                                # 16 panels of 8 columns
    order = ["st.shared.v2.b32", "fence.proxy.async.shared::cta", "bar.sync",
             "cp.async.bulk.tensor.2d.global", "cp.async.bulk.commit_group;",
             "cp.async.bulk.wait_group.read 0;"]
    pos = [epi.rfind(s) for s in order]
    assert -1 not in pos and pos == sorted(pos), list(zip(order, pos))


def test_no_tma_store_without_the_facts_or_tma():
    # c's row pitch (130 f32) is not whole 16-byte units: no tensor map for c, the ordinary
    # stores instead; a and b keep theirs
    a, b = operands((128, 64), (64, 128))
    arrays = {"a": a, "b": b, "c": np.zeros((128, 130), np.float32)}
    res = compile_for(MATMUL, "matmul", arrays)
    assert [m.array for m in res.codegen.kernel("matmul").tensor_maps] == ["a", "b"]
    assert "bulk_group" not in res.ptx and "st.global" in res.ptx
    off = compile_tma(MATMUL, "matmul", {**arrays, "c": np.zeros((128, 128), np.float32)},
                      tma=False)
    assert off.codegen.kernel("matmul").tensor_maps == () and "bulk_group" not in off.ptx


def test_not_on_sm_80():
    a, b = operands((128, 64), (64, 128))
    res = compile_for(MATMUL, "matmul", {"a": a, "b": b, "c": np.zeros((128, 128), np.float32)},
                      target="sm_80")
    assert "cp.async.bulk" not in res.ptx and "st.global.v4" in res.ptx


def test_map_args_ignore_the_strides_of_unit_axes():
    # one row of a matrix whose pitch is not whole 16-byte units is still 16-byte aligned for
    # the kernel (a unit axis's stride is never used): its map takes the packed stride there
    from tilelang.runtime.tensormap import TensorMapError, map_args
    spec = TensorMapSpec("c", "f32", (8, 128), 32)
    got = map_args(spec, 0x1000, (1, 100), (37, 1))
    assert got.dims == (100, 1) and got.strides == (400,)
    spec3 = TensorMapSpec("c", "f32", (8, 64, 2), 32)
    assert map_args(spec3, 0x1000, (1, 60, 56), (7, 60, 1)).strides == (240, 240 * 60)
    # an axis that is used keeps its stride, and TMA cannot take a negative one
    with pytest.raises(TensorMapError, match="positive strides"):
        map_args(spec, 0x1000, (2, 100), (-112, 1))


def test_one_row_view_on_the_emulator():
    # c is row 3 of a (5, 132) buffer seen as a (1, 129) array whose unused row stride is
    # 37 elements: the kernel was specialized for aligned facts, its store map still encodes
    a, b = operands((1, 64), (64, 129))
    buf = np.full((5, 132), np.nan, np.float32)
    view = np.ndarray((1, 129), np.float32, buffer=buf, offset=3 * 132 * 4,
                      strides=(37 * 4, 4))
    arrays = {"a": padded(a, 8), "b": padded(b, 7), "c": view}
    run_views(MATMUL, "matmul", arrays, (1, 2))
    assert np.array_equal(buf[3, :129], product(a, b)[0])
    assert np.isnan(np.delete(buf, 3, axis=0)).all() and np.isnan(buf[3, 129:]).all()


@needs_ptxas
def test_ptxas_accepts(tmp_path):
    a, b = operands((256, 256), (256, 256))
    res = compile_for(MATMUL, "matmul", {"a": a, "b": b, "c": np.zeros((256, 256), np.float32)})
    p = tmp_path / "m.ptx"
    p.write_text(res.ptx)
    out = subprocess.run(["ptxas", "-arch=sm_90a", "-v", str(p), "-o", str(tmp_path / "m.o")],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "0 bytes spill stores, 0 bytes spill loads" in out.stderr, out.stderr


# ---------------------------------------------------------------------------------------------
# Results on the emulator

def test_square():
    a, b = operands((256, 256), (256, 256))
    arrays = {"a": padded(a, 8), "b": padded(b, 8), "c": padded(np.zeros((256, 256),
                                                                         np.float32), 4)}
    res, rep = run_views(MATMUL, "matmul", arrays, (2, 2), race_check=True)
    assert "bulk_group" in res.ptx
    check(arrays["c"], product(a, b))
    # the fragment stores into 32-byte panels: one wavefront per half-warp (the loop's
    # operands come by TMA and go to wgmma, so these are the kernel's only shared accesses)
    assert rep.bank_conflicts == 0


@pytest.mark.parametrize("target", ["sm_90a", "sm_90"])
def test_ragged_edges_are_clipped(target):
    # 127 x 129 x 65: every edge ragged; the row pitches are padded to 16 bytes (the facts
    # TMA needs), so the store's box hangs over the view's last row and column. On sm_90
    # (no wgmma) the accumulator is mma.sync's, its loads cp.async, its store TMA all the same
    a, b = operands((127, 65), (65, 129))
    arrays = {"a": padded(a, 7), "b": padded(b, 7),
              "c": padded(np.full((127, 129), np.nan, np.float32), 3)}
    res, _ = run_views(MATMUL, "matmul", arrays, (1, 2), target=target)
    maps = [m.array for m in res.codegen.kernel("matmul").tensor_maps]
    assert maps == (["a", "b", "c"] if target == "sm_90a" else ["c"])
    assert ("mma.sync" in res.ptx) == (target == "sm_90")
    check(arrays["c"], product(a, b))


HALF_OUT = """
@launch(reqntid = (128, 1, 1))
kernel half(a: Array[f16, 2], b: Array[f16, 2], c: Array[f16, 2], const BN: i32 = 128) {
    let m = bid(0);
    let n = bid(1);
    var acc = zeros((64, BN), f32);
    for k in range(num_tiles(a, axis = 1, shape = (64, 64))) {
        let ta = load(a, index = (m, k), shape = (64, 64), padding = 0);
        let tb = load(b, index = (k, n), shape = (64, BN), padding = 0);
        acc = mma(ta, tb, acc);
    }
    store(c, index = (m, n), tile = astype(acc * 0.5, f16));
}
"""


def test_f16_output_two_panels():
    # 16-bit values: 64-column panels (128 bytes), 4-byte pair stores
    a, b = operands((100, 192), (192, 200))
    arrays = {"a": padded(a, 8), "b": padded(b, 8),
              "c": padded(np.full((100, 200), np.nan, np.float16), 8)}
    res, _ = run_views(HALF_OUT, "half", arrays, (2, 2))
    assert res.codegen.kernel("half").tensor_maps[-1].box == (64, 64)
    assert epilogue(res.ptx).count("cp.async.bulk.tensor.2d.global") == 2
    assert "st.shared.v2.b16" in res.ptx
    check(arrays["c"], (product(a, b) * 0.5).astype(np.float16))


@pytest.mark.parametrize("out,bn,span", [("f32", 16, 32), ("f16", 32, 64), ("f16", 16, 32)])
def test_narrow_tiles_64_and_32_byte_swizzle(out, bn, span):
    # f32 rows take 32-byte panels (2 of 16 columns); 32 f16 columns are one 64-byte panel,
    # 16 one 32-byte panel
    src = HALF_OUT if out == "f16" else HALF_OUT.replace(
        "Array[f16, 2], const", "Array[f32, 2], const").replace("astype(acc * 0.5, f16)", "acc")
    dtype = np.float16 if out == "f16" else np.float32
    a, b = operands((64, 64), (64, 40))
    arrays = {"a": padded(a, 8), "b": padded(b, 8),
              "c": padded(np.full((64, 40), np.nan, dtype), 8)}
    res, _ = run_views(src, "half", arrays, (1, -(-40 // bn)), defines={"BN": bn})
    spec = res.codegen.kernel("half").tensor_maps[-1]
    assert (spec.array, spec.box, spec.swizzle) == ("c", (span // dtype().itemsize, 64), span)
    want = product(a, b)
    check(arrays["c"], want if out == "f32" else (want * 0.5).astype(np.float16))


def test_batched_3d_box():
    # 3 batches in tiles of 2: the second tile's second batch lies outside and is clipped
    a, b = operands((3, 60, 128), (3, 128, 56))
    arrays = {"a": padded(a, 8), "b": padded(b, 8),
              "c": padded(np.full((3, 60, 56), np.nan, np.float32), 4)}
    res, _ = run_views(BATCHED_LOOP, "bloop", arrays, (2,))
    assert res.codegen.kernel("bloop").tensor_maps[-1].box == (8, 64, 2)
    assert epilogue(res.ptx).count("cp.async.bulk.tensor.3d.global") == 8
    check(arrays["c"], product(a, b))


@pytest.mark.gpu
def test_ragged_views_on_gpu():
    # examples/matmul.tile through the runtime on an sm_90 GPU: the driver's tensor maps
    # (cuTensorMapEncodeTiled) for the loads and the epilogue's store; the padding of each
    # view must come back untouched
    import tilelang
    from test_wgmma import ROOT
    mod = tilelang.compile(str(ROOT / "examples" / "matmul.tile"), backend="cuda")
    M, N, K = 1001, 999, 520
    a, b = operands((M, K), (K, N))
    da = tilelang.to_device(padded(a, 8).base, backend=mod.backend)[:, :K]
    db = tilelang.to_device(padded(b, 9).base, backend=mod.backend)[:, :N]
    full = np.full((M, N + 5), np.nan, np.float32)
    dfull = tilelang.to_device(full, backend=mod.backend)
    gx = -(-M // 128)
    mod.matmul[(gx + gx % 2, -(-N // 128))](da, db, dfull[:, :N])
    mod.backend.synchronize()
    got = np.asarray(dfull)
    assert np.array_equal(got[:, :N], product(a, b))
    assert np.isnan(got[:, N:]).all()
