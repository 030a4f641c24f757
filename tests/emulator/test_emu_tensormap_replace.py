"""Device-side tensor maps: `tensormap.replace` field by field (the PTX ISA's values: rank - 1,
logical sizes, strides in bytes, the PTX .elemtype numbering) and `tensormap.cp_fenceproxy`;
the Triton corpus' `tma_device_desc_*` kernels run them end to end."""

import numpy as np
import pytest

from emu_support import kernel_ptx
from tilelang.emulator import EmulatorDevice, tensormap
from tilelang.emulator.errors import ExecutionError, PTXParseError

ADDR = 0x7000_0000_1000


def _filled(fields):
    raw = bytes(tensormap.SIZE)                      # the zeros a kernel starts from
    for field, ordinal, value in fields:
        raw = tensormap.replace(raw, field, ordinal, value)
    return raw


FIELDS_2D = [("global_address", 0, ADDR), ("rank", 0, 1), ("box_dim", 0, 32),
             ("box_dim", 1, 8), ("global_dim", 0, 80), ("global_dim", 1, 96),
             ("global_stride", 0, 320), ("element_stride", 0, 1), ("element_stride", 1, 1),
             ("elemtype", 0, 7), ("swizzle_mode", 0, 3), ("fill_mode", 0, 1)]


def test_a_map_filled_field_by_field_equals_the_encoded_one():
    want = tensormap.encode("f32", 2, ADDR, (80, 96), (320,), (32, 8), (1, 1), 0, 3, 0, 1)
    assert tensormap.decode(_filled(FIELDS_2D)) == tensormap.decode(want)


@pytest.mark.parametrize("ptx_code,name", [(7, "f32"), (8, "f32_ftz"), (9, "f64"),
                                           (10, "bf16"), (6, "f16"), (0, "u8"), (12,
                                                                                 "tf32_ftz")])
def test_elemtype_uses_the_ptx_numbering(ptx_code, name):
    raw = _filled(FIELDS_2D + [("elemtype", 0, ptx_code)])
    tm = tensormap.decode(raw)
    assert tensormap.DTYPES[tm.dtype][0] == name


def test_replace_edits_one_field_of_an_existing_map():
    raw = tensormap.encode("f16", 3, ADDR, (64, 33, 7), (128, 128 * 33), (64, 4, 2), (1, 1, 1))
    new = tensormap.replace(raw, "global_dim", 2, 9)
    tm, old = tensormap.decode(new), tensormap.decode(raw)
    assert tm.global_dims == (64, 33, 9) and tm.box_dims == old.box_dims
    assert tensormap.decode(tensormap.replace(raw, "global_stride", 1, 4096)).global_strides \
        == (128, 4096)


@pytest.mark.parametrize("field,ordinal,value,msg", [
    ("rank", 0, 5, r"\.rank 5 is not 0\.\.4 \(rank - 1\)"),
    ("box_dim", 0, 0, r"\.box_dim 0 is not 1\.\.256"),
    ("box_dim", 0, 257, r"\.box_dim 257 is not 1\.\.256"),
    ("box_dim", 5, 8, r"\.box_dim: ordinal 5 is not 0\.\.4"),
    ("global_stride", 0, 72, r"\.global_stride 72 is not a positive multiple of 16"),
    ("global_stride", 4, 64, r"\.global_stride: ordinal 4 is not 0\.\.3"),
    ("element_stride", 0, 9, r"\.element_stride 9 is not 1\.\.8"),
    ("global_address", 0, ADDR + 8, r"\.global_address 0x700000001008 is not 16-byte aligned"),
    ("elemtype", 0, 13, r"\.elemtype 13 is not supported"),
    ("swizzle_mode", 0, 4, r"\.swizzle_mode 4 is not 0\.\.3"),
    ("swizzle_atomicity", 0, 1, r"only 0 \(16 bytes, sm_90\) is emulated"),
    ("fill_mode", 0, 2, r"\.fill_mode 2 is not 0 or 1"),
])
def test_values_out_of_range_are_refused(field, ordinal, value, msg):
    with pytest.raises(ValueError, match=msg):
        tensormap.replace(bytes(tensormap.SIZE), field, ordinal, value)


def test_a_field_left_out_is_named_when_the_map_is_read():
    raw = _filled([f for f in FIELDS_2D if f[:2] != ("box_dim", 1)])
    with pytest.raises(ValueError, match=r"box dimension 1 is not set \(zero\)"):
        tensormap.decode(raw)


# thread 0 fills a map in shared memory, copies it to global memory; the test reads it back
FILL = """
  .reg .b64 %m<4>;
  mov.u32 %r1, %tid.x;
  setp.ne.u32 %p1, %r1, 0;
  @%p1 bra DONE;
  mov.u32 %r2, tmap;
  mov.u32 %r3, 0;
  st.shared.v4.u32 [%r2], {{%r3, %r3, %r3, %r3}};
  cvt.u64.u32 %m1, %r2;
  ld.param.u64 %m2, [k_p1];
  tensormap.replace.tile.global_address.shared::cta.b1024.b64 [%m1], %m2;
  tensormap.replace.tile.rank.shared::cta.b1024.b32 [%m1], {rank};
  tensormap.replace.tile.box_dim.shared::cta.b1024.b32 [%m1], 0, 16;
  tensormap.replace.tile.global_dim.shared::cta.b1024.b32 [%m1], 0, 100;
  tensormap.replace.tile.element_stride.shared::cta.b1024.b32 [%m1], 0, 1;
  tensormap.replace.tile.elemtype.shared::cta.b1024.b32 [%m1], 10;
  ld.param.u64 %m3, [k_p0];
  tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned \
      [%m3], [%m1], 128;
  fence.proxy.tensormap::generic.acquire.gpu [%m3], 128;
DONE:
  ret;
"""


def _fill_kernel(rank):
    return kernel_ptx(FILL.format(rank=rank), nparams=2,
                      prelude=".shared .align 128 .b8 tmap[128];\n").replace(
        ".target sm_90", ".target sm_90a")


def test_a_kernel_fills_a_map_and_publishes_it():
    dev = EmulatorDevice()
    out, data = dev.malloc(128), dev.malloc(256)
    dev.memset(out, 0xAB, 128)
    fn = dev.load_module(_fill_kernel(0)).get_function("k")
    dev.launch(fn, (1,), (32,), [out, data])
    tm = tensormap.decode(dev.memcpy_dtoh(None, out, 128))
    assert (tm.rank, tm.global_address, tm.global_dims, tm.box_dims) == (1, int(data), (100,),
                                                                           (16,))
    assert tensormap.DTYPES[tm.dtype][0] == "bf16" and tm.element_strides == (1,)


def test_a_bad_value_stops_the_kernel_naming_it():
    dev = EmulatorDevice()
    fn = dev.load_module(_fill_kernel(7)).get_function("k")
    with pytest.raises(ExecutionError, match=r"tensormap.replace .rank 7 is not 0..4 .*thread "
                       r"\(0, 0, 0\)"):
        dev.launch(fn, (1,), (32,), [dev.malloc(128), dev.malloc(256)])


def test_tensormap_replace_needs_sm_90a():
    with pytest.raises(PTXParseError, match="needs the arch-specific target sm_90a"):
        EmulatorDevice().load_module(_fill_kernel(0).replace("sm_90a", "sm_90")) \
            .get_function("k")
