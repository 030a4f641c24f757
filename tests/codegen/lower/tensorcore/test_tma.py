"""TMA on sm_90a (issue 16, item 3): with `generate(tma=True)` the operands of a pipelined
warp-group MMA loop that are contiguous, 16-byte aligned arrays are copied by
`cp.async.bulk.tensor` into the swizzled images, completing on one mbarrier per ring slot
with transaction counts; each such array gets a 128-byte `__grid_constant__` tensor-map
parameter after the source parameters (docs/abi.md), built on the host by
tilelang/runtime/tensormap.py (the emulator's encoding here; cuTensorMapEncodeTiled through
a recording stand-in for the CUDA driver).

Results are the emulator's (its TMA and mbarriers follow the PTX ISA on their own) against
NumPy: square, ragged, bf16, both operand majors, batched, two warp groups, a 64-byte
swizzle."""

from __future__ import annotations

import enum
import re
import shutil
import subprocess

import numpy as np
import pytest

from tilelang.codegen.api import TensorMapSpec
from tilelang.runtime import tensormap as rt_tm
from tilelang.runtime.packing import ParamLayout
from tilelang.runtime.validate import LaunchShape

from test_wgmma import MAJORS, MATMUL, matmul_arrays, operands
from wgmma_support import compile_tma, run

needs_ptxas = pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas not on PATH")


def exact(arrays, a="a", b="b", c="c", ta=False, tb=False):
    x = arrays[a].astype(np.float64)
    y = arrays[b].astype(np.float64)
    x = np.swapaxes(x, -1, -2) if ta else x
    y = np.swapaxes(y, -1, -2) if tb else y
    assert np.array_equal(arrays[c], x @ y)


def test_ptx_structure():
    arrays = matmul_arrays(256, 256, 256)
    cg = compile_tma(MATMUL, "matmul", arrays).codegen
    ptx = cg.ptx
    art = cg.kernel("matmul")
    # a (M, K): one 64-wide panel of 128 rows; b (K, N): panels of 64 columns x 64 rows;
    # then the epilogue's map for c (test_tma_store.py)
    assert art.tensor_maps[:2] == (TensorMapSpec("a", art.params[0].dtype, (64, 128), 128),
                                   TensorMapSpec("b", art.params[1].dtype, (64, 64), 128))
    assert [m.array for m in art.tensor_maps] == ["a", "b", "c"]
    # 3 arrays x 5 ABI parameters, then the maps
    assert ".param .align 64 .b8 matmul_param_15[128]" in ptx
    assert ".param .align 64 .b8 matmul_param_16[128]" in ptx
    assert ptx.count("cvta.param.u64") == 3
    # 3 stages; the example's clusters of 2 add 3 "empty" mbarriers for the multicast of B
    # (test_tma_multicast.py)
    assert ptx.count("mbarrier.init.shared::cta.b64") == 3 + 3
    assert ptx.count("mbarrier.inval.shared::cta.b64") == 3 + 3
    assert "mbarrier.try_wait.parity.shared::cta.b64" in ptx
    # 128 x 64 + 64 x 128 f16 per stage
    assert "mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r" in ptx and ", 32768;" in ptx
    copies = re.findall(r"cp\.async\.bulk\.tensor\.2d\.shared::cluster\.global\."
                        r"mbarrier::complete_tx::bytes", ptx)
    assert len(copies) == 3 * 3      # 1 box of a + 2 of b, at 3 places (prologue x2, loop)
    assert "cp.async.cg" not in ptx and "wgmma.wait_group.sync.aligned 1" in ptx


def test_cp_async_without_tma_or_facts():
    # TMA off, or on with a ragged row pitch (no aligned16): cp.async
    from wgmma_support import compile_for
    assert "cp.async.bulk" not in compile_for(MATMUL, "matmul", matmul_arrays(128, 128, 64),
                                              tma=False).ptx
    arrays = matmul_arrays(128, 128, 66)
    cg = compile_tma(MATMUL, "matmul", arrays).codegen
    # (c keeps the epilogue's store map, test_tma_store.py); the loop is then no ring of
    # both operands: a goes through registers and b, aligned, is copied a K-step ahead by
    # TMA (lower/tensorcore/mma_prefetch.py, test_prefetch.py)
    assert [m.array for m in cg.kernel("matmul").tensor_maps] == ["b", "c"]


@needs_ptxas
def test_ptxas_accepts(tmp_path):
    p = tmp_path / "m.ptx"
    p.write_text(compile_tma(MATMUL, "matmul", matmul_arrays(256, 256, 256)).ptx)
    out = subprocess.run(["ptxas", "-arch=sm_90a", "-v", str(p), "-o", str(tmp_path / "m.o")],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "0 bytes spill stores, 0 bytes spill loads" in out.stderr, out.stderr


@pytest.mark.parametrize("M,N,K", [(256, 256, 256), (200, 136, 200), (64, 8, 16)])
def test_matmul_matches_numpy(M, N, K):
    arrays = matmul_arrays(M, N, K)
    res, rep = run(MATMUL, "matmul", arrays, (-(-M // 128), -(-N // 128)), tma=True,
                   race_check=True)
    assert rep.race_check == "checked: no shared-memory race"    # mbarriers followed
    assert res.codegen.kernel("matmul").tensor_maps
    exact(arrays)


def test_bf16_and_two_warp_groups():
    src = MATMUL.replace("f16", "bf16").replace(
        "reqntid = (128, 1, 1), maxnreg = by_target(sm_90a = 168)", "reqntid = (256, 1, 1)")
    a, b = operands((256, 320), (320, 128), "bf16")
    arrays = {"a": a, "b": b, "c": np.full((256, 128), np.nan, np.float32)}
    res, rep = run(src, "matmul", arrays, (2, 1), tma=True, race_check=True)
    assert rep.race_check == "checked: no shared-memory race"
    assert "m64n128k16.f32.bf16.bf16" in res.ptx and "cp.async.bulk.tensor" in res.ptx
    exact(arrays)


def test_transposed_majors():
    a, b = operands((64, 160), (160, 128))
    arrays = {"at": np.ascontiguousarray(a.T), "bt": np.ascontiguousarray(b.T),
              "c": np.full((64, 128), np.nan, np.float32)}
    res, _ = run(MAJORS, "majors", arrays, (1, 1), tma=True)
    assert [m.array for m in res.codegen.kernel("majors").tensor_maps] == ["at", "bt", "c"]
    assert np.array_equal(arrays["c"], a.astype(np.float64) @ b.astype(np.float64))


BATCHED_LOOP = """
@launch(reqntid = (128, 1, 1))
kernel bloop(a: Array[f16, 3], b: Array[f16, 3], c: Array[f32, 3]) {
    let z = bid(0);
    var acc = zeros((2, 64, 64), f32);
    for k in range(num_tiles(a, axis = 2, shape = (2, 64, 64))) {
        let ta = load(a, index = (z, 0, k), shape = (2, 64, 64), padding = 0);
        let tb = load(b, index = (z, k, 0), shape = (2, 64, 64), padding = 0);
        acc = mma(ta, tb, acc);
    }
    store(c, index = (z, 0, 0), tile = acc);
}
"""


def test_batched_3d_boxes():
    a, b = operands((4, 64, 192), (4, 192, 64))
    arrays = {"a": a, "b": b, "c": np.full((4, 64, 64), np.nan, np.float32)}
    res, rep = run(BATCHED_LOOP, "bloop", arrays, (2,), tma=True, race_check=True)
    assert rep.race_check == "checked: no shared-memory race"
    maps = res.codegen.kernel("bloop").tensor_maps
    assert [m.box for m in maps] == [(64, 64, 2), (64, 64, 2), (8, 64, 2)]    # a, b, c
    assert "cp.async.bulk.tensor.3d" in res.ptx
    exact(arrays)


def test_narrow_k_64_byte_swizzle():
    src = MATMUL.replace("BK: i32 = 64", "BK: i32 = 32")
    arrays = matmul_arrays(128, 128, 96)
    res, _ = run(src, "matmul", arrays, (1, 1), tma=True)
    assert res.codegen.kernel("matmul").tensor_maps[0].swizzle == 64
    exact(arrays)


# ---------------------------------------------------------------------------------------------
# Host side: the encoding arguments, the parameter layout, the CUDA driver call

def spec(box=(64, 128), swizzle=128, array="a"):
    return TensorMapSpec(array, "f16", box, swizzle)


def test_map_args_are_innermost_first():
    got = rt_tm.map_args(spec(), 0x1000, (300, 200), (208, 1))
    assert (got.dtype, got.rank, got.address) == (6, 2, 0x1000)
    assert got.dims == (200, 300) and got.strides == (416,) and got.box == (64, 128)
    assert got.swizzle == 3
    three = rt_tm.map_args(spec((64, 64, 2)), 0, (4, 64, 192), (64 * 192, 192, 1))
    assert three.dims == (192, 64, 4) and three.strides == (384, 64 * 192 * 2)


@pytest.mark.parametrize("address,strides", [(0x1008, (208, 1)), (0x1000, (100, 1)),
                                             (0x1000, (0, 1))])
def test_map_args_refuse_what_tma_cannot_read(address, strides):
    with pytest.raises(rt_tm.TensorMapError, match="16-byte aligned"):
        rt_tm.map_args(spec(), address, (300, 200), strides)


def test_emulator_encoding_round_trips():
    from tilelang.emulator import tensormap as emu
    raw = rt_tm.encode_emulator(rt_tm.map_args(spec(), 0x2000, (300, 200), (208, 1)))
    tm = emu.decode(raw)
    assert len(raw) == 128 and tm.global_dims == (200, 300) and tm.box_dims == (64, 128)
    assert tm.global_strides == (416,) and tm.swizzle_bytes == 128 and tm.global_address == 0x2000


def test_layout_appends_64_byte_aligned_maps():
    base = ParamLayout("<Qqq", (0, 8, 16), (8, 8, 8), 24)
    lay = rt_tm.layout_with_maps(base, 2)
    assert lay.offsets == (0, 8, 16, 64, 192) and lay.sizes[-2:] == (128, 128)
    assert lay.size == 320
    import struct
    assert struct.calcsize(lay.fmt) == 320


class FakeDriver:
    """Records cuTensorMapEncodeTiled's arguments; the map's words are a known pattern."""

    class CUresult(enum.IntEnum):
        CUDA_SUCCESS = 0
        CUDA_ERROR_INVALID_VALUE = 1

    CUtensorMapDataType = enum.IntEnum("DT", {f"T{i}": i for i in range(13)})
    CUtensorMapSwizzle = enum.IntEnum("SW", {"NONE": 0, "S32": 1, "S64": 2, "S128": 3})
    CUtensorMapL2promotion = enum.IntEnum("L2", {"NONE": 0, "L64": 1, "L128": 2, "L256": 3})

    class CUtensorMapInterleave(enum.IntEnum):
        CU_TENSOR_MAP_INTERLEAVE_NONE = 0

    class CUtensorMapFloatOOBfill(enum.IntEnum):
        CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE = 0

    def __init__(self, fail=False):
        self.calls, self.fail = [], fail

    def cuTensorMapEncodeTiled(self, *args):
        self.calls.append(args)
        if self.fail:
            return self.CUresult.CUDA_ERROR_INVALID_VALUE, None

        class Map:
            opaque = list(range(100, 116))
        return self.CUresult.CUDA_SUCCESS, Map()


def test_cuda_encoding_calls_the_driver():
    drv = FakeDriver()
    raw = rt_tm.encode_cuda(drv, rt_tm.map_args(spec(), 0x4000, (300, 200), (208, 1)))
    (dt, rank, addr, dims, strides, box, est, inter, sw, l2, oob), = drv.calls
    assert (int(dt), rank, addr, dims, strides, box, est) == \
        (6, 2, 0x4000, [200, 300], [416], [64, 128], [1, 1])
    assert (int(inter), int(sw), int(l2), int(oob)) == (0, 3, 2, 0)
    assert raw == b"".join(int.to_bytes(w, 8, "little") for w in range(100, 116))
    with pytest.raises(rt_tm.TensorMapError, match="cuTensorMapEncodeTiled failed"):
        rt_tm.encode_cuda(FakeDriver(fail=True), rt_tm.map_args(spec(), 0, (8, 64), (64, 1)))


def test_launcher_appends_the_maps_of_each_launch():
    class P:
        def __init__(self, name, kind, rank=0):
            self.name, self.kind, self.rank = name, kind, rank

    got = []

    class Inner:
        def launch(self, values, shape, stream=None):
            got.append(values)

        def nothing(self, shape):
            got.append("nothing")

    encoded = []

    def encode(args):
        encoded.append(args)
        return bytes([args.dims[0] % 256]) * 128

    params = [P("x", "scalar"), P("a", "array", 2), P("b", "array", 2)]
    lau = rt_tm.TensorMapLauncher(Inner(), params, [spec(array="b")], encode)
    values = [7, 0x100, 8, 64, 64, 1, 0x200, 16, 96, 96, 1]
    lau.launch(values, LaunchShape((1, 1, 1), (128, 1, 1), None, 0))
    assert got[0][:len(values)] == values and got[0][-1] == bytes([96]) * 128
    assert len(encoded) == 1
    # an empty grid runs no block: no map is encoded, the inner launcher launches nothing
    lau.launch([7, 0x100, 8, 64, 64, 1, 0x400, 16, 96, 96, 1],
               LaunchShape((0, 1, 1), (128, 1, 1), None, 0))
    assert got[1] == "nothing" and len(encoded) == 1
