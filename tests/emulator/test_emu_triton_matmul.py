"""The emulator judges PTX it did not see being written: Triton 3.9's matmul for sm_80.

`fixtures/triton_matmul_sm80.ptx` is what Triton produced for a tutorial-style kernel
(benchmarks/triton_ref/gen_matmul_ptx.py; parameters in the JSON beside it): 128 x 128 x 64
tiles, f16 inputs, f32 accumulator and output, 4 warps, 3 stages, `mma.sync`, `ldmatrix`
(also `.trans`), `cp.async` with zero fill into swizzled shared memory. If our tensor-core
lowering and our emulator shared a misreading of the PTX ISA (a fragment layout, ldmatrix's
lane-to-row rule, cp.async's src-size), this kernel would disagree with NumPy.
"""

import json
import math
import pathlib
import re

import numpy as np
import pytest

from tilelang.emulator import EmulatorDevice
from tilelang.tools.sass import ptx_loop_lines

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
PTX = (FIXTURES / "triton_matmul_sm80.ptx").read_text()
INFO = json.loads((FIXTURES / "triton_matmul_sm80.json").read_text())


def test_fixture_is_a_tensor_core_kernel():
    assert INFO["target"] == "sm_80" and re.search(r"^\.target sm_80$", PTX, re.M)
    assert "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in PTX
    assert "ldmatrix.sync.aligned.m8n8.x4.shared.b16" in PTX
    assert "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16" in PTX
    assert re.search(r"cp\.async\.cg\.shared\.global \[.*\], \[.*\], 0x10, %r\d+;", PTX)
    assert "cp.async.wait_group" in PTX and "cp.async.commit_group" in PTX


def run(M, N, K, seed=0):
    """C = A @ B on the emulator; row strides padded to 16 elements (the kernel was
    specialized for strides, N and K divisible by 16: see the JSON)."""
    assert N % 16 == 0 and K % 16 == 0
    BM, BN = INFO["constexprs"]["BM"], INFO["constexprs"]["BN"]
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((M, K)).astype(np.float16)
    B = rng.standard_normal((K, N)).astype(np.float16)
    dev = EmulatorDevice(race_check=True)
    fn = dev.load_module(PTX).get_function(INFO["kernel"])
    pa, pb = dev.to_device(A), dev.to_device(B)
    pc = dev.malloc(4 * M * N)
    dev.memset(pc, 0xFF, 4 * M * N)                    # NaN: every element must be written
    grid = (math.ceil(M / BM) * math.ceil(N / BN), 1, 1)
    args = [pa, pb, pc, np.int32(M), np.int32(N), np.int32(K), np.int32(K), np.int32(N),
            np.int32(N), 0, 0]                          # + Triton's two scratch pointers
    rep = dev.launch(fn, grid, tuple(INFO["block"]), args, shared_mem=INFO["shared_bytes"])
    C = dev.from_device(pc, (M, N), np.float32)
    # a real 3-stage pipeline (cp.async ring, barriers) passes the race check: no false alarm
    assert rep.race_check == "checked: no shared-memory race"
    return A, B, C, rep


def check(A, B, C):
    a, b = A.astype(np.float64), B.astype(np.float64)
    # f16 x f16 products are exact in f32; each mma.sync step rounds the running f32 sum once
    # (the emulator; the hardware truncates, at most 2^-23 relative per step as well), so
    # after ceil(K/16) steps |C - A @ B| <= ceil(K/16) * 2^-23 * (|A| @ |B|).
    bound = math.ceil(A.shape[1] / 16) * 2.0 ** -23 * (np.abs(a) @ np.abs(b))
    err = np.abs(C.astype(np.float64) - a @ b)
    assert np.all(err <= bound), float((err / bound).max())


def test_square_against_numpy_and_counters():
    A, B, C, rep = run(256, 256, 192)
    check(A, B, C)
    # 4 blocks x (128 x 128 / (16 x 8) fragments) x 192 / 16 steps, 32 lanes each
    assert rep.instructions["mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"] == \
        4 * 128 * 12 * 32
    # Triton's XOR-swizzled shared layouts read and write conflict-free under our model, and
    # its 16-byte copies are fully coalesced: the main loop especially
    loop = ptx_loop_lines(PTX)
    assert sum(n in rep.shared_lines for n in loop) >= 40       # ldmatrix and cp.async
    assert sum(n in rep.global_lines for n in loop) >= 8        # the copies' global side
    assert rep.bank_conflicts == 0 and rep.bank_conflicts_in(loop) == 0, str(rep)
    assert rep.coalescing_in(loop) == 1.0 and rep.coalescing_efficiency == 1.0


def test_ragged_against_numpy():
    # M arbitrary, N and K ragged at the specialization's 16-element granularity:
    # a partial tile in every dimension (127 = 128 - 1, 208 = 128 + 80, 80 = 64 + 16)
    A, B, C, _ = run(127, 208, 80, seed=1)
    check(A, B, C)


@pytest.mark.slow
def test_larger_ragged_against_numpy():
    A, B, C, _ = run(300, 400, 336, seed=2)
    check(A, B, C)


# Triton's PTX for the other input types (64 x 64 tiles, 4 warps, 3 stages; same generator):
# bf16 and tf32 (m16n8k16 / m16n8k8), int8 with .satfinite (m16n8k32, 8-byte cp.async) and
# e4m3 (m16n8k32, sm_89). Their fragment layouts differ from f16's.
OTHERS = {"bf16": "triton_matmul_bf16_sm80", "tf32": "triton_matmul_tf32_sm80",
          "i8": "triton_matmul_i8_sm80", "e4m3": "triton_matmul_e4m3_sm89"}
MMA_FORM = {"bf16": "m16n8k16.row.col.f32.bf16.bf16.f32",
            "tf32": "m16n8k8.row.col.f32.tf32.tf32.f32",
            "i8": "m16n8k32.row.col.satfinite.s32.s8.s8.s32",
            "e4m3": "m16n8k32.row.col.f32.e4m3.e4m3.f32"}


def operands(dtype, rng, M, N, K):
    """(A, B as stored, A, B as the products see them in float64/int64)."""
    import ml_dtypes
    if dtype == "bf16":
        A = rng.standard_normal((M, K)).astype(ml_dtypes.bfloat16)
        B = rng.standard_normal((K, N)).astype(ml_dtypes.bfloat16)
        return A, B, A.astype(np.float64), B.astype(np.float64)
    if dtype == "tf32":
        A = rng.standard_normal((M, K)).astype(np.float32)
        B = rng.standard_normal((K, N)).astype(np.float32)
        # an f32 operand the kernel did not round: the tensor core ignores its low 13 bits
        trunc = lambda m: (m.view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)
        return A, B, trunc(A).astype(np.float64), trunc(B).astype(np.float64)
    if dtype == "i8":
        A = rng.integers(-128, 128, (M, K)).astype(np.int8)
        B = rng.integers(-128, 128, (K, N)).astype(np.int8)
        return A, B, A.astype(np.int64), B.astype(np.int64)
    A = (rng.integers(-8, 9, (M, K)) / 2).astype(ml_dtypes.float8_e4m3fn)   # exact in e4m3
    B = rng.integers(-8, 9, (K, N)).astype(ml_dtypes.float8_e4m3fn)
    return A, B, A.astype(np.float64), B.astype(np.float64)


@pytest.mark.parametrize("shape", [(128, 128, 128), (100, 80, 80)], ids=["square", "ragged"])
@pytest.mark.parametrize("dtype", sorted(OTHERS))
def test_other_input_types_against_numpy(dtype, shape):
    stem = OTHERS[dtype]
    ptx = (FIXTURES / f"{stem}.ptx").read_text()
    info = json.loads((FIXTURES / f"{stem}.json").read_text())
    assert info["dtype"] == dtype and f"mma.sync.aligned.{MMA_FORM[dtype]}" in ptx
    assert "ldmatrix.sync.aligned" in ptx and "cp.async" in ptx
    M, N, K = shape
    A, B, a, b = operands(dtype, np.random.default_rng(sum(shape)), M, N, K)
    dev = EmulatorDevice(race_check=True)
    fn = dev.load_module(ptx).get_function(info["kernel"])
    raw = lambda m: m.view(f"u{m.dtype.itemsize}")          # ml_dtypes arrays as their bits
    pa, pb, pc = dev.to_device(raw(A)), dev.to_device(raw(B)), dev.malloc(4 * M * N)
    dev.memset(pc, 0xFF, 4 * M * N)
    BM, BN = info["constexprs"]["BM"], info["constexprs"]["BN"]
    grid = (math.ceil(M / BM) * math.ceil(N / BN), 1, 1)
    args = [pa, pb, pc] + [np.int32(v) for v in (M, N, K, K, N, N)] + [0, 0]
    rep = dev.launch(fn, grid, tuple(info["block"]), args, shared_mem=info["shared_bytes"])
    assert rep.race_check == "checked: no shared-memory race"
    if dtype == "i8":           # exact: |sum| <= 80 * 2^14, no saturation
        C = dev.from_device(pc, (M, N), np.int32)
        assert np.array_equal(C, a @ b)
        return
    C = dev.from_device(pc, (M, N), np.float32).astype(np.float64)
    if dtype == "e4m3":         # small multiples of 1/2: products and sums exact in f32
        assert np.array_equal(C, a @ b)
        return
    # bf16: exact products (8-bit significands); tf32: 11-bit significands, exact in f32.
    # One f32 rounding per mma step (16 or 8 deep): the bound of `check` above.
    step = 16 if dtype == "bf16" else 8
    bound = math.ceil(K / step) * 2.0 ** -23 * (np.abs(a) @ np.abs(b))
    assert np.all(np.abs(C - a @ b) <= bound)
