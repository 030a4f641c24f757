"""Device-side tensor maps (sm_90a): `tensormap.replace` edits one field of a 128-byte map in
shared or global memory, `tensormap.cp_fenceproxy` copies a map from shared to global memory
for the tensor-map proxy. Maps use the emulator's own encoding (tensormap.py): a map filled in
field by field from zeros, as Triton's `tl.make_tensor_descriptor` does, becomes a valid map
once every field a copy reads is set. Memory is sequentially consistent here, so the proxy
fences order nothing more (`fence.proxy.tensormap::generic` is a no-op, ops_mem.build_fence).
"""

from __future__ import annotations

import numpy as np

from . import tensormap
from .access import locate, region_view
from .addressing import Address, space_of
from .decode import op
from .errors import ExecutionError
from .ptx_types import type_info

MAP_ALIGN = 64                 # a CUtensorMap is 64-byte aligned


def _map_bytes(st, addr, t, what):
    """(region, byte offset) of the 128-byte map thread t names."""
    a = addr.get(st)
    a = np.asarray(a if np.ndim(a) == 0 else a[t:t + 1], np.uint64)
    (region, gi, off, _), = locate(st, addr.space, a, np.array([t]), tensormap.SIZE, MAP_ALIGN)
    if region not in ("shared", "global"):
        raise st.error(ExecutionError, f"{what}: the tensor map must be in shared or global "
                       f"memory", t)
    return region, int(off[0])


@op("tensormap")
def build_tensormap(ctx, ins, parts):
    kind = parts[1] if len(parts) > 1 else ""
    if kind == "replace":
        return _build_replace(ctx, ins, parts)
    if kind == "cp_fenceproxy":
        return _build_cp_fenceproxy(ctx, ins, parts)
    ctx.error(f"unsupported instruction {ins.opcode}")


def _build_replace(ctx, ins, parts):
    """tensormap.replace.tile.<field>{.global,.shared::cta}.b1024.{b32,b64} [addr], {ord,} v"""
    if len(parts) < 4 or parts[2] != "tile" or parts[3] not in tensormap.REPLACE_FIELDS:
        ctx.error(f"{ins.opcode}: expected tensormap.replace.tile.<field> with a field of "
                  f"{', '.join(tensormap.REPLACE_FIELDS)}")
    field = parts[3]
    if "b1024" not in parts:
        ctx.error(f"{ins.opcode}: the map operand is .b1024")
    vt = type_info("b64" if "b64" in parts else "b32")
    ops = list(ins.operands)
    with_ord = field in ("box_dim", "global_dim", "global_stride", "element_stride")
    if len(ops) != (3 if with_ord else 2):
        ctx.error(f"{ins.opcode} takes [addr], {'ord, ' if with_ord else ''}new_val")
    addr = Address(ctx, ops[0], space_of(parts))
    gord = ctx.src(ops[1], type_info("b32")) if with_ord else None
    gval = ctx.src(ops[-1], vt)

    def run(st, m):
        idx = st.active_index(m)
        vals = np.broadcast_to(np.asarray(gval(st)), (st.T,))
        ords = None if gord is None else np.broadcast_to(np.asarray(gord(st)), (st.T,))
        for t in idx:                          # in thread order
            region, off = _map_bytes(st, addr, int(t), ins.opcode)
            view = region_view(st, region, np.uint8)
            try:
                new = tensormap.replace(view[off:off + tensormap.SIZE].tobytes(), field,
                                        0 if ords is None else int(ords[t]), int(vals[t]))
            except ValueError as e:
                raise st.error(ExecutionError, str(e), int(t)) from None
            if region == "shared" and st.races is not None:
                st.races.access(st, np.full(tensormap.SIZE, t), off + np.arange(tensormap.SIZE),
                                1, True)
            view[off:off + tensormap.SIZE] = np.frombuffer(new, np.uint8)
    return run


def _build_cp_fenceproxy(ctx, ins, parts):
    """tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned
    [dst], [src], 128: the map copied from shared to global memory (a release for the
    tensor-map proxy: nothing more to order here)."""
    if "global" not in parts or "shared::cta" not in parts:
        ctx.error(f"{ins.opcode}: copies from .shared::cta to .global")
    ops = list(ins.operands)
    if len(ops) != 3:
        ctx.error(f"{ins.opcode} takes [dst], [src], size")
    size = int(ctx.src(ops[2], type_info("u32"))(None))
    if size != tensormap.SIZE:
        ctx.error(f"{ins.opcode}: the size is 128 bytes, not {size}")
    dst, src = Address(ctx, ops[0], "global"), Address(ctx, ops[1], "shared")

    def run(st, m):
        for t in st.active_index(m):
            sr, so = _map_bytes(st, src, int(t), ins.opcode)
            dr, do = _map_bytes(st, dst, int(t), ins.opcode)
            if st.races is not None:
                st.races.access(st, np.full(size, t), so + np.arange(size), 1, False)
            data = region_view(st, sr, np.uint8)[so:so + size].copy()
            gview = region_view(st, dr, np.uint8)
            if st.watch and (gview[do:do + size] != data).any():
                st.epoch += 1
            gview[do:do + size] = data
    return run
