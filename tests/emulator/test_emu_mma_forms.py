"""Every mma.sync form the tensor-core lowering may emit, against NumPy.

Operands are packed into per-lane registers by the per-lane position functions of
test_emu_tensor.py (the PTX ISA's fragment tables written out case by case). The inputs are
small integers (or multiples of 1/4) that every input format represents exactly and whose
products and sums are exact in the accumulator, so the results are compared bit for bit:
a wrong fragment position cannot hide behind a tolerance. 8-bit floats are encoded by
ml_dtypes, not by the emulator.
"""

import ml_dtypes
import numpy as np
import pytest

from emu_support import kernel_ptx
from test_emu_float import bf16_bits_ref
from test_emu_tensor import (a_pos_f16, a_pos_s8, a_pos_tf32, b_pos_f16, b_pos_s8, b_pos_tf32,
                             c_pos, fragments)

BODY = """
  mov.u32 %r1, %tid.x;
  ld.param.u64 %rd1, [k_p0];
  ld.param.u64 %rd2, [k_p1];
  ld.param.u64 %rd3, [k_p2];
  ld.param.u64 %rd4, [k_p3];
{loads}
{pre}
  {mma}
{stores}
  ret;
"""


def a_pos_f16_k8(lane, i):      # m16n8k8 .f16/.bf16 A, element i of 4
    g, t = lane >> 2, lane % 4
    return (g if i < 2 else g + 8), t * 2 + (i & 1)


def b_pos_f16_k8(lane, i):      # m16n8k8 .f16/.bf16 B, element i of 2
    g, t = lane >> 2, lane % 4
    return t * 2 + i, g


def run(hw, mma, na, nb, nc, A_words, B_words, C_words, pre="", target=None):
    """One warp: loads na/nb/nc words per lane into %r10../%r20../%r30.., runs `mma` (with
    {d} {a} {b} {c}; `pre` may rewrite the operand registers first), stores nc words."""
    loads = []
    for ptr, n, base in (("%rd2", na, 10), ("%rd3", nb, 20), ("%rd4", nc, 30)):
        loads.append(f"  mul.wide.u32 %rd{base}, %r1, {4 * n};\n"
                     f"  add.s64 %rd{base + 1}, {ptr}, %rd{base};")
        loads += [f"  ld.global.b32 %r{base + i}, [%rd{base + 1}+{4 * i}];" for i in range(n)]
    stores = [f"  mul.wide.u32 %rd40, %r1, {4 * nc};\n  add.s64 %rd41, %rd1, %rd40;"]
    stores += [f"  st.global.b32 [%rd41+{4 * i}], %r{40 + i};" for i in range(nc)]
    regs = lambda base, n: "{" + ",".join(f"%r{base + i}" for i in range(n)) + "}"
    text = mma.format(d=regs(40, nc), a=regs(10, na), b=regs(20, nb), c=regs(30, nc))
    body = BODY.format(loads="\n".join(loads), pre=pre, mma=text, stores="\n".join(stores))
    d = hw.dev
    pa, pb, pc = d.to_device(A_words), d.to_device(B_words), d.to_device(C_words)
    po = d.malloc(4 * nc * 32)
    ptx = kernel_ptx(body, nparams=4)
    if target is not None:
        ptx = ptx.replace(".version 8.0\n.target sm_90", f".version 8.7\n.target {target}")
    hw.run(ptx, (1,), (32,), [po, pa, pb, pc])
    return d.from_device(po, (32, nc), np.uint32)


def unfrag(words, bits):
    """16x8 accumulator from per-lane words of `bits`-wide elements."""
    per = 32 // bits
    out = np.zeros((16, 8), np.uint64)
    for lane in range(32):
        for i in range(4):
            w = int(words[lane, i // per]) >> (bits * (i % per))
            out[c_pos(lane, i)] = w & ((1 << bits) - 1)
    return out


def f16_bits(m):
    return m.astype(np.float16).view(np.uint16)


def bf16_bits(m):
    return bf16_bits_ref(m.astype(np.float32).ravel()).reshape(m.shape)


def quarters(rng, shape, lo=-8, hi=8):
    return rng.integers(lo, hi, shape).astype(np.float64) / 4


def test_m16n8k16_f16_with_f16_accumulator(hw, rng):
    A, B, C = quarters(rng, (16, 16)), quarters(rng, (16, 8)), quarters(rng, (16, 8))
    out = run(hw, "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 {d}, {a}, {b}, {c};",
              4, 2, 2, fragments(f16_bits(A), a_pos_f16, 8, 16),
              fragments(f16_bits(B), b_pos_f16, 4, 16), fragments(f16_bits(C), c_pos, 4, 16))
    D = unfrag(out, 16).astype(np.uint16).view(np.float16)
    assert np.array_equal(D, (A @ B + C).astype(np.float16))


def test_m16n8k16_f16_accumulator_rounds_once(hw):
    # 2049 is not an f16 (spacing 2 there): the exact sum 2048 + 1 rounds to even, 2048
    A = np.zeros((16, 16))
    A[:, 0], A[:, 1] = 32, 1
    B = np.zeros((16, 8))
    B[0, :], B[1, :] = 64, 1
    C = np.zeros((16, 8))
    out = run(hw, "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 {d}, {a}, {b}, {c};",
              4, 2, 2, fragments(f16_bits(A), a_pos_f16, 8, 16),
              fragments(f16_bits(B), b_pos_f16, 4, 16), fragments(f16_bits(C), c_pos, 4, 16))
    D = unfrag(out, 16).astype(np.uint16).view(np.float16)
    assert (D == 2048).all()


def test_m16n8k16_bf16(hw, rng):      # bf16 inputs take only f32 accumulators (PTX ISA)
    A, B = quarters(rng, (16, 16), -64, 64), quarters(rng, (16, 8), -64, 64)
    C = rng.integers(-1000, 1000, (16, 8)).astype(np.float32)
    out = run(hw, "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {d}, {a}, {b}, {c};",
              4, 2, 4, fragments(bf16_bits(A), a_pos_f16, 8, 16),
              fragments(bf16_bits(B), b_pos_f16, 4, 16), fragments(C.view(np.uint32), c_pos, 4, 32))
    D = unfrag(out, 32).astype(np.uint32).view(np.float32)
    assert np.array_equal(D, (A @ B + C).astype(np.float32))


@pytest.mark.parametrize("kind", ["f16", "bf16"])
def test_m16n8k8_half_inputs(hw, rng, kind):
    A, B = quarters(rng, (16, 8)), quarters(rng, (8, 8))
    enc = f16_bits if kind == "f16" else bf16_bits
    C = np.zeros((16, 8), np.float32)
    out = run(hw, f"mma.sync.aligned.m16n8k8.row.col.f32.{kind}.{kind}.f32 {{d}}, {{a}}, {{b}}, "
              "{c};", 2, 1, 4, fragments(enc(A), a_pos_f16_k8, 4, 16),
              fragments(enc(B), b_pos_f16_k8, 2, 16), fragments(C.view(np.uint32), c_pos, 4, 32))
    D = unfrag(out, 32).astype(np.uint32).view(np.float32)
    assert np.array_equal(D, (A @ B).astype(np.float32))


def tf32_rna_ref(x):
    """Round f32 to 10 mantissa bits, ties away from zero, by decimal-free integer steps on
    the magnitude (independent of the emulator's bit trick)."""
    x = x.astype(np.float32)
    mant, exp = np.frexp(x.astype(np.float64))              # |mant| in [0.5, 1)
    scaled = np.abs(mant) * 2 ** 11                           # 11 significant bits
    r = np.floor(scaled + 0.5)                                # ties away from zero
    return (np.sign(mant) * r * 2.0 ** (exp - 11)).astype(np.float32)


@pytest.mark.parametrize("rounded", [True, False])
def test_m16n8k8_tf32_with_and_without_cvt_rna(hw, rng, rounded):
    # values with 20 significant bits: their low 13 bits matter
    A = (rng.integers(-2**19, 2**19, (16, 8)) * 2.0 ** -18).astype(np.float32)
    B = (rng.integers(-2**19, 2**19, (8, 8)) * 2.0 ** -18).astype(np.float32)
    A[0, :4] = [1 + 2**-11, -(1 + 2**-11), 1 + 3 * 2**-11, 1 + 2**-12]   # ties and near-ties
    pre = ""
    if rounded:
        pre = "\n".join(f"  cvt.rna.tf32.f32 %r{r}, %r{r};" for r in (10, 11, 12, 13, 20, 21))
    out = run(hw, "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {d}, {a}, {b}, {c};",
              4, 2, 4, fragments(A.view(np.uint32), a_pos_tf32, 4, 32),
              fragments(B.view(np.uint32), b_pos_tf32, 2, 32),
              fragments(np.zeros((16, 8), np.uint32), c_pos, 4, 32), pre=pre)
    D = unfrag(out, 32).astype(np.uint32).view(np.float32)
    if rounded:
        a, b = tf32_rna_ref(A), tf32_rna_ref(B)
    else:   # the tensor core ignores the low 13 bits of an unconverted f32
        trunc = lambda m: (m.view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)
        a, b = trunc(A), trunc(B)
    # 11-bit by 11-bit products summed over 8 terms are exact in float64; one rounding to f32
    assert np.array_equal(D, (a.astype(np.float64) @ b).astype(np.float32))


@pytest.mark.parametrize("mode", ["rna", "rn", "rz"])
def test_cvt_tf32_rounding_modes(hw, mode):
    base = np.float32(1.0).view(np.uint32)
    low = np.array([0, 0x0FFF, 0x1000, 0x1001, 0x2FFF, 0x3000, 0x1FFF, 0x2000], np.uint32)
    x = np.concatenate([(base + low).view(np.float32), -(base + low).view(np.float32)])
    got = hw.elementwise(f"cvt.{mode}.tf32.f32 {{d}}, {{a}};", [np.tile(x, 4)], np.uint32)[:16]
    step = 2.0 ** -10
    ulps = (np.abs(x.astype(np.float64)) - 1) / step          # in units of the kept lsb
    if mode == "rz":
        r = np.floor(ulps)
    elif mode == "rna":
        r = np.floor(ulps + 0.5)
    else:
        r = np.round(ulps)                                    # NumPy rounds half to even
    exp = (np.sign(x) * (1 + r * step)).astype(np.float32).view(np.uint32)
    assert np.array_equal(got, exp), (mode, got, exp)


INT8 = {"s8": (np.int8, -128, 128), "u8": (np.uint8, 0, 256)}


@pytest.mark.parametrize("atype,btype", [("u8", "u8"), ("u8", "s8"), ("s8", "u8")])
def test_m16n8k32_integer_signedness(hw, rng, atype, btype):
    (adt, alo, ahi), (bdt, blo, bhi) = INT8[atype], INT8[btype]
    A = rng.integers(alo, ahi, (16, 32)).astype(adt)
    B = rng.integers(blo, bhi, (32, 8)).astype(bdt)
    C = rng.integers(-10**6, 10**6, (16, 8)).astype(np.int32)
    out = run(hw, f"mma.sync.aligned.m16n8k32.row.col.s32.{atype}.{btype}.s32 {{d}}, {{a}}, "
              "{b}, {c};", 4, 2, 4, fragments(A.view(np.uint8), a_pos_s8, 16, 8),
              fragments(B.view(np.uint8), b_pos_s8, 8, 8),
              fragments(C.view(np.uint32), c_pos, 4, 32))
    D = unfrag(out, 32).astype(np.uint32).view(np.int32)
    assert np.array_equal(D, A.astype(np.int64) @ B.astype(np.int64) + C)


@pytest.mark.parametrize("sat", [True, False])
def test_m16n8k32_s32_overflow_wraps_or_saturates(hw, rng, sat):
    A = np.full((16, 32), 127, np.int8)
    A[8:] = -128
    B = np.full((32, 8), 127, np.int8)
    C = np.zeros((16, 8), np.int32)
    C[:8], C[8:] = 2**31 - 1000, -(2**31) + 1000          # the products push past the range
    s = ".satfinite" if sat else ""
    out = run(hw, f"mma.sync.aligned.m16n8k32.row.col{s}.s32.s8.s8.s32 {{d}}, {{a}}, {{b}}, {{c}};",
              4, 2, 4, fragments(A.view(np.uint8), a_pos_s8, 16, 8),
              fragments(B.view(np.uint8), b_pos_s8, 8, 8),
              fragments(C.view(np.uint32), c_pos, 4, 32))
    D = unfrag(out, 32).astype(np.uint32)
    exact = A.astype(np.int64) @ B.astype(np.int64) + C
    assert (exact[:8] > 2**31 - 1).all() and (exact[8:] < -2**31).all()
    exp = np.clip(exact, -2**31, 2**31 - 1) if sat else exact     # wrap: low 32 bits
    assert np.array_equal(D, (exp & 0xFFFFFFFF).astype(np.uint32))


F8 = {"e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2}


@pytest.mark.parametrize("atype,btype", [("e5m2", "e5m2"), ("e4m3", "e5m2"), ("e5m2", "e4m3")])
def test_m16n8k32_fp8_to_f32(hw, rng, atype, btype):
    A = rng.integers(-7, 8, (16, 32)).astype(np.float64) / 2     # exact in both formats
    B = rng.integers(-7, 8, (32, 8)).astype(np.float64)
    enc = lambda m, t: m.astype(F8[t]).view(np.uint8)
    assert np.array_equal(enc(A, atype).view(F8[atype]).astype(np.float64), A)
    C = rng.integers(-50, 50, (16, 8)).astype(np.float32)
    out = run(hw, f"mma.sync.aligned.m16n8k32.row.col.f32.{atype}.{btype}.f32 {{d}}, {{a}}, "
              "{b}, {c};", 4, 2, 4, fragments(enc(A, atype), a_pos_s8, 16, 8),
              fragments(enc(B, btype), b_pos_s8, 8, 8), fragments(C.view(np.uint32), c_pos, 4, 32))
    D = unfrag(out, 32).astype(np.uint32).view(np.float32)
    assert np.array_equal(D, (A @ B + C).astype(np.float32))


MX = {"e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2,
      "e2m3": ml_dtypes.float6_e2m3fn, "e3m2": ml_dtypes.float6_e3m2fn,
      "e2m1": ml_dtypes.float4_e2m1fn}


def _container(m, t):
    """ml_dtypes' one-per-byte codes in the instruction's 8-bit container: e2m1 in bits 2-5,
    the 6-bit types in bits 0-5, the 8-bit ones whole."""
    codes = m.astype(MX[t]).view(np.uint8)
    return codes << 2 if t == "e2m1" else codes


@pytest.mark.parametrize("atype,btype", [("e2m1", "e2m1"), ("e2m3", "e3m2"), ("e4m3", "e2m1"),
                                         ("e3m2", "e5m2"), ("e2m1", "e2m3")])
def test_m16n8k32_block_scaled_mxf8f6f4_containers(hw, rng, atype, btype):
    """sm_120a's block-scaled `kind::mxf8f6f4` mma.sync with 6- and 4-bit operands in 8-bit
    containers (mixed with 8-bit ones), against NumPy: values every format holds exactly
    (ml_dtypes encodes them), scales that differ per row (lane 4 (m mod 8) + m / 8's low
    byte) and per column (lane 4 n's), every product and sum exact in f32."""
    vals = np.array([-3, -2, -1.5, -1, -0.5, 0, 0.5, 1, 1.5, 2, 3])
    A, B = rng.choice(vals, (16, 32)), rng.choice(vals, (32, 8))
    for m, t in ((A, atype), (B, btype)):
        assert np.array_equal(m.astype(MX[t]).astype(np.float64), m)
    C = rng.integers(-50, 50, (16, 8)).astype(np.float32)
    pre = ("  and.b32 %r50, %r1, 3;\n  add.u32 %r50, %r50, 125;\n"       # 2^-2 .. 2^1
           "  shr.u32 %r51, %r1, 2;\n  and.b32 %r51, %r51, 1;\n  add.u32 %r51, %r51, 126;")
    mma = (f"mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X.f32"
           f".{atype}.{btype}.f32.ue8m0 {{d}}, {{a}}, {{b}}, {{c}}, %r50, {{{{0, 0}}}}, %r51, "
           "{{0, 0}};")
    out = run(hw, mma, 4, 2, 4, fragments(_container(A, atype), a_pos_s8, 16, 8),
              fragments(_container(B, btype), b_pos_s8, 8, 8),
              fragments(C.view(np.uint32), c_pos, 4, 32), pre=pre, target="sm_120a")
    m, n = np.arange(16), np.arange(8)
    sa = 2.0 ** (((4 * (m % 8) + m // 8) & 3) - 2)
    sb = 2.0 ** (((4 * n) >> 2 & 1) - 1)
    want = (A * sa[:, None]) @ (B * sb[None, :]) + C
    D = unfrag(out, 32).astype(np.uint32).view(np.float32)
    assert np.array_equal(D, want.astype(np.float32))


def test_m16n8k32_e4m3_with_f16_accumulator(hw, rng):
    A = rng.integers(-7, 8, (16, 32)).astype(np.float64)
    B = rng.integers(-7, 8, (32, 8)).astype(np.float64) / 4
    C = quarters(rng, (16, 8))
    out = run(hw, "mma.sync.aligned.m16n8k32.row.col.f16.e4m3.e4m3.f16 {d}, {a}, {b}, {c};",
              4, 2, 2, fragments(A.astype(F8["e4m3"]).view(np.uint8), a_pos_s8, 16, 8),
              fragments(B.astype(F8["e4m3"]).view(np.uint8), b_pos_s8, 8, 8),
              fragments(f16_bits(C), c_pos, 4, 16))
    D = unfrag(out, 16).astype(np.uint16).view(np.float16)
    assert np.array_equal(D, (A @ B + C).astype(np.float16))


def test_m16n8k16_f16_accumulator_in_f32_out(hw, rng):
    # .dtype and .ctype are independent for f16 inputs: f32 D from an f16 C (2 registers)
    A, B, C = quarters(rng, (16, 16)), quarters(rng, (16, 8)), quarters(rng, (16, 8))
    d = hw.dev
    words = [fragments(f16_bits(A), a_pos_f16, 8, 16), fragments(f16_bits(B), b_pos_f16, 4, 16),
             fragments(f16_bits(C), c_pos, 4, 16)]
    body = BODY.format(loads="\n".join(
        [f"  mul.wide.u32 %rd{b}, %r1, {4 * n};\n  add.s64 %rd{b + 1}, {p}, %rd{b};\n" +
         "\n".join(f"  ld.global.b32 %r{b + i}, [%rd{b + 1}+{4 * i}];" for i in range(n))
         for p, n, b in (("%rd2", 4, 10), ("%rd3", 2, 20), ("%rd4", 2, 30))]), pre="",
        mma="mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f16 {%r40,%r41,%r42,%r43}, "
            "{%r10,%r11,%r12,%r13}, {%r20,%r21}, {%r30,%r31};",
        stores="  mul.wide.u32 %rd40, %r1, 16;\n  add.s64 %rd41, %rd1, %rd40;\n" +
               "\n".join(f"  st.global.b32 [%rd41+{4 * i}], %r{40 + i};" for i in range(4)))
    ptrs = [d.to_device(w) for w in words]
    po = d.malloc(16 * 32)
    hw.run(kernel_ptx(body, nparams=4), (1,), (32,), [po] + ptrs)
    D = unfrag(d.from_device(po, (32, 4), np.uint32), 32).astype(np.uint32).view(np.float32)
    assert np.array_equal(D, (A @ B + C).astype(np.float32))


@pytest.mark.parametrize("form,msg", [
    ("m16n8k16.row.col.f16.bf16.bf16.f16", r"\.bf16 inputs take \.f32 accumulators"),
    ("m16n8k16.row.col.f32.f16.bf16.f32", r"\.f16 A takes a \.f16 B"),
    ("m16n8k8.row.col.f16.tf32.tf32.f32", r"\.tf32 inputs take \.f32 accumulators"),
    ("m16n8k32.row.col.f32.s8.s8.s32", r"\.s8 inputs take \.s32 accumulators"),
])
def test_mma_refuses_forms_the_isa_does_not_have(hw, form, msg):
    from tilelang.emulator.errors import PTXParseError
    with pytest.raises(PTXParseError, match=msg):
        run(hw, f"mma.sync.aligned.{form} {{d}}, {{a}}, {{b}}, {{c}};", 4, 2, 4,
            np.zeros((32, 4), np.uint32), np.zeros((32, 2), np.uint32),
            np.zeros((32, 4), np.uint32))


def test_mma_refuses_wrong_register_counts(hw):
    from tilelang.emulator.errors import PTXParseError
    with pytest.raises(PTXParseError, match="expected 4, 4, 2, 4 registers"):
        run(hw, "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {d}, {a}, {b}, {c};",
            4, 3, 4, np.zeros((32, 4), np.uint32), np.zeros((32, 3), np.uint32),
            np.zeros((32, 4), np.uint32))


STM = """
  mov.u32 %r1, %tid.x;
  ld.param.u64 %rd1, [k_p0];
  ld.param.u64 %rd3, [k_p1];
  mov.u32 %r2, smem;
  mul.wide.u32 %rd6, %r1, 4;
  add.s64 %rd7, %rd3, %rd6;
  ld.global.u32 %r9, [%rd7];          // this lane's row offset
  add.s32 %r10, %r2, %r9;
  mad.lo.s32 %r20, %r1, 4, 0x10000;   // register i of lane l holds 0x10000 + 4 l + i
  add.s32 %r21, %r20, 1;
  add.s32 %r22, %r20, 2;
  add.s32 %r23, %r20, 3;
  {stm}
  bar.sync 0;
  // copy the 512 bytes of shared memory out: 16 per thread
  shl.b32 %r11, %r1, 4;
  add.s32 %r12, %r2, %r11;
  ld.shared.v4.u32 {%r30, %r31, %r32, %r33}, [%r12];
  mul.wide.u32 %rd8, %r1, 16;
  add.s64 %rd9, %rd1, %rd8;
  st.global.v4.u32 [%rd9], {%r30, %r31, %r32, %r33};
  ret;
"""


@pytest.mark.parametrize("num", [1, 2, 4])
@pytest.mark.parametrize("trans", [False, True])
def test_stmatrix(hw, rng, num, trans):
    # PTX ISA: lane l holds, in register i, the two 16-bit elements (row l / 4, columns
    # 2 (l % 4) and + 1) of matrix i (with .trans: of its transpose); lane 8 i + r gives the
    # address of row r of matrix i
    slot = rng.permutation(32)
    regs = ", ".join(f"%r{20 + i}" for i in range(num))
    t = ".trans" if trans else ""
    ptx = kernel_ptx(STM.replace("{stm}", f"stmatrix.sync.aligned.m8n8.x{num}{t}.shared.b16 "
                                 f"[%r10], {{{regs}}};"), nparams=2,
                     prelude=".shared .align 16 .b8 smem[512];\n")
    d = hw.dev
    po, pa = d.malloc(512), d.to_device((slot * 16).astype(np.uint32))
    hw.run(ptx, (1,), (32,), [po, pa])
    mem = d.from_device(po, (32, 8), np.uint16)
    for i in range(num):
        m = np.zeros((8, 8), np.uint32)
        for lane in range(32):
            word = 0x10000 + 4 * lane + i
            r, c = lane // 4, 2 * (lane % 4)
            m[r, c], m[r, c + 1] = word & 0xFFFF, word >> 16
        if trans:
            m = m.T
        for r in range(8):
            assert np.array_equal(mem[slot[8 * i + r]], m[r]), (i, r)
