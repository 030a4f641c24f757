"""TMA tensor maps on the host: the 128 bytes a kernel's `__grid_constant__` tensor-map
parameter holds (docs/abi.md), built per launch from the array argument the map describes
(codegen/api.TensorMapSpec: which array, its dtype, the box and the swizzle).

* CUDA back end: `cuTensorMapEncodeTiled` through cuda-bindings; the driver's encoding is
  opaque, its 128 bytes are passed as they are.
* Emulator back end: the emulator's own encoding of the same arguments
  (tilelang/emulator/tensormap.py, documented in docs/emulator.md).

Arguments follow cuTensorMapEncodeTiled: dimensions innermost first (the array's last axis
is dimension 0), strides in bytes of dimensions 1.., every element stride 1, no interleave,
out-of-bounds elements zero-filled, L2 promotion of 128 bytes.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from .packing import ParamLayout

MAP_BYTES = 128
MAP_ALIGN = 64
# CUtensorMapDataType (the emulator's encoding uses the same numbering)
DATA_TYPES = {"u8": 0, "i8": 0, "f8e4m3": 0, "f8e5m2": 0, "f4e2m1": 0, "f6e2m3": 0, "f6e3m2": 0,
              "ue8m0": 0, "f4e2m1x2": 0, "u16": 1, "u32": 2, "i32": 3,
              "u64": 4, "i64": 5, "f16": 6, "f32": 7, "f64": 8, "bf16": 9, "tf32": 11}
SWIZZLE_CODES = {0: 0, 32: 1, 64: 2, 128: 3}       # CUtensorMapSwizzle
L2_PROMOTION_128B = 2
ITEMSIZE = {"u8": 1, "i8": 1, "f8e4m3": 1, "f8e5m2": 1, "f4e2m1": 1, "f6e2m3": 1, "f6e3m2": 1,
            "ue8m0": 1, "f4e2m1x2": 1, "u16": 2, "f16": 2, "bf16": 2,
            "u32": 4, "i32": 4, "f32": 4, "tf32": 4, "u64": 8, "i64": 8, "f64": 8}


class TensorMapError(ValueError):
    """An array argument that no tensor map can describe (the driver's or our checks)."""


@dataclass(frozen=True)
class MapArgs:
    """cuTensorMapEncodeTiled's arguments for one launch."""

    dtype: int
    rank: int
    address: int
    dims: tuple[int, ...]        # innermost first
    strides: tuple[int, ...]     # bytes, dimensions 1..rank-1
    box: tuple[int, ...]
    swizzle: int                 # CUtensorMapSwizzle code


def map_args(spec, address: int, shape: Sequence[int], strides: Sequence[int]) -> MapArgs:
    """The encoding arguments of `spec` for an array at `address` with `shape` and element
    `strides` (the kernel's ABI view of it)."""
    dtype = str(getattr(spec.dtype, "name", spec.dtype))
    size = ITEMSIZE[dtype]
    rank = len(shape)
    if len(spec.box) != rank:
        raise TensorMapError(f"a {len(spec.box)}-d tensor map for a {rank}-d array")
    # an empty array is never read through its map (its loop runs no iteration): describe
    # one element so that the encoding stays valid
    dims = tuple(max(int(n), 1) for n in reversed(shape))
    # the stride of an axis of extent 1 is never used (its only coordinate is 0; a box that
    # starts further is outside): the packed stride stands in for it, so a view such as one
    # row of a matrix with any pitch still gets a map
    packed, inner = [], size * max(int(shape[-1]), 1)
    for n, st in zip(reversed(tuple(shape)[:-1]), reversed(tuple(strides)[:-1])):
        sb = int(st) * size if int(n) > 1 else -(-inner // 16) * 16
        packed.append(sb)
        inner = abs(sb) * max(int(n), 1)
    gstrides = tuple(packed)
    if address % 16 or any(s % 16 or s <= 0 for s in gstrides):
        raise TensorMapError(f"TMA needs a 16-byte aligned address and positive strides that "
                             f"are multiples of 16 bytes (address {address:#x}, strides "
                             f"{gstrides} bytes)")
    if any(n >= 1 << 32 for n in dims) or any(s >= 1 << 40 for s in gstrides):
        raise TensorMapError(f"an array of shape {tuple(shape)} is too large for a tensor map")
    return MapArgs(DATA_TYPES[dtype], rank, int(address), dims, gstrides, tuple(spec.box),
                   SWIZZLE_CODES[int(spec.swizzle)])


def encode_emulator(args: MapArgs) -> bytes:
    from tilelang.emulator import tensormap as emu
    try:
        return bytes(emu.encode(args.dtype, args.rank, args.address, args.dims, args.strides,
                                args.box, (1,) * args.rank, 0, args.swizzle,
                                L2_PROMOTION_128B, 0))
    except ValueError as e:
        raise TensorMapError(str(e)) from e


def encode_cuda(drv: Any, args: MapArgs) -> bytes:
    """cuTensorMapEncodeTiled through `drv` (cuda.bindings.driver or a stand-in)."""
    # cuda-bindings (12.x and 13.x) takes the four arrays only as lists of its cuuint64_t /
    # cuuint32_t objects: plain ints raise TypeError ("Cannot convert int to cuuint32_t")
    u64, u32 = getattr(drv, "cuuint64_t", int), getattr(drv, "cuuint32_t", int)
    err, tm = drv.cuTensorMapEncodeTiled(
        drv.CUtensorMapDataType(args.dtype), args.rank, args.address,
        [u64(n) for n in args.dims], [u64(s) for s in args.strides],
        [u32(b) for b in args.box], [u32(1)] * args.rank,
        drv.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
        drv.CUtensorMapSwizzle(args.swizzle),
        drv.CUtensorMapL2promotion(L2_PROMOTION_128B),
        drv.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)
    if err != drv.CUresult.CUDA_SUCCESS:
        raise TensorMapError(f"cuTensorMapEncodeTiled failed ({err!r}) for {args}")
    raw = struct.pack("<16Q", *(int(w) for w in tm.opaque))
    assert len(raw) == MAP_BYTES
    return raw


def layout_with_maps(base: ParamLayout, n: int) -> ParamLayout:
    """`base` (the source parameters) followed by `n` tensor maps of 128 bytes, each aligned
    to 64 bytes (`.param .align 64 .b8 [128]`)."""
    fmt, off = base.fmt, base.size
    offsets, sizes = list(base.offsets), list(base.sizes)
    for _ in range(n):
        pad = -off % MAP_ALIGN
        if pad:
            fmt += f"{pad}x"
            off += pad
        fmt += f"{MAP_BYTES}s"
        offsets.append(off)
        sizes.append(MAP_BYTES)
        off += MAP_BYTES
    return ParamLayout(fmt, tuple(offsets), tuple(sizes), off)


def array_slots(params) -> dict[str, tuple[int, int]]:
    """For each array parameter, (index of its address in the flat value list, rank)."""
    out, i = {}, 0
    for p in params:
        if p.kind == "array":
            out[p.name] = (i, p.rank)
            i += 1 + 2 * p.rank
        else:
            i += 1
    return out


class TensorMapLauncher:
    """Wraps a back end's launcher: appends the tensor maps of each launch's arrays (read
    from the flat values: address, extents, strides) to its values."""

    __slots__ = ("inner", "plan", "encode", "_last")

    def __init__(self, inner, params, specs, encode: Callable[[MapArgs], bytes]):
        slots = array_slots(params)
        self.inner, self.encode = inner, encode
        self.plan = [(spec, *slots[spec.array]) for spec in specs]
        self._last: dict = {}

    def maps(self, values: Sequence) -> list[bytes]:
        out = []
        for spec, i, rank in self.plan:
            key = (spec, tuple(values[i:i + 1 + 2 * rank]))
            raw = self._last.get(key)
            if raw is None:
                raw = self.encode(map_args(spec, values[i], values[i + 1:i + 1 + rank],
                                           values[i + 1 + rank:i + 1 + 2 * rank]))
                if len(self._last) > 64:
                    self._last.clear()
                self._last[key] = raw
            out.append(raw)
        return out

    @property
    def kernel(self):
        """The inner launcher's kernel handle (the tuner asks the driver for its registers)."""
        return self.inner.kernel

    def launch(self, values, shape, stream=None):
        if shape.empty:                      # no block reads a map: encode none
            return self.inner.nothing(shape)
        return self.inner.launch(list(values) + self.maps(values), shape, stream)


def prepare_with_maps(backend, built, layout: ParamLayout, params) -> TensorMapLauncher:
    """The back end's launcher for a specialization that takes tensor maps, wrapped to
    append them to each launch's values."""
    maps = built.artifact.tensor_maps
    inner = backend.prepare(built, layout_with_maps(layout, len(maps)))
    if backend.name == "emulator":
        encode = encode_emulator
    else:
        drv = backend.drv

        def encode(args: MapArgs) -> bytes:
            return encode_cuda(drv, args)
    return TensorMapLauncher(inner, params, maps, encode)
