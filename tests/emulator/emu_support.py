"""Shared helpers of the emulator tests (a module with a unique name: several test folders have a
conftest.py, so tests must not import from `conftest`)."""

from __future__ import annotations

import numpy as np
import pytest

from tilelang.emulator.device import EmulatorDevice

HEADER = ".version 8.0\n.target sm_90\n.address_size 64\n"


def kernel_ptx(body: str, nparams: int = 4, name: str = "k", directives: str = "",
               extra_regs: str = "", prelude: str = "") -> str:
    """A kernel with u64 params k_p0..k_pN and a standard register file."""
    params = ",\n".join(f"  .param .u64 {name}_p{i}" for i in range(nparams))
    return (HEADER + prelude + f".visible .entry {name}(\n{params}\n){directives}\n{{\n"
            "  .reg .pred %p<16>;\n  .reg .b16 %h<16>;\n  .reg .b32 %r<64>;\n"
            "  .reg .b64 %rd<64>;\n  .reg .f32 %f<32>;\n  .reg .f64 %fd<16>;\n"
            f"{extra_regs}\n{body}\n}}\n")


# Loads input i (element width w_i) into %x{i}, makes %ro the output address.
def _elementwise_body(op: str, widths: list, out_width: int) -> str:
    lines = ["  mov.u32 %r60, %tid.x;", "  mov.u32 %r61, %ctaid.x;", "  mov.u32 %r62, %ntid.x;",
             "  mad.lo.s32 %r63, %r61, %r62, %r60;"]
    regs = []
    for i, w in enumerate(widths):
        lines.append(f"  ld.param.u64 %rd{40 + i}, [k_p{i + 1}];")
        lines.append(f"  mul.wide.u32 %rd{50 + i}, %r63, {w // 8};")
        lines.append(f"  add.s64 %rd{40 + i}, %rd{40 + i}, %rd{50 + i};")
        lines.append(f"  ld.global.b{w} %x{i}, [%rd{40 + i}];")
        regs.append(f"%x{i}")
    lines.append("  ld.param.u64 %rd39, [k_p0];")
    ow = 32 if out_width == 1 else out_width
    lines.append(f"  mul.wide.u32 %rd38, %r63, {ow // 8};")
    lines.append("  add.s64 %rd39, %rd39, %rd38;")
    lines.append("  " + op.format(d="%xd" if out_width != 1 else "%pd", a=regs[0] if regs else "",
                                  b=regs[1] if len(regs) > 1 else "",
                                  c=regs[2] if len(regs) > 2 else ""))
    if out_width == 1:
        lines.append("  selp.u32 %xd, 1, 0, %pd;")
    lines.append(f"  st.global.b{ow} [%rd39], %xd;")
    lines.append("  ret;")
    return "\n".join(lines)


class Harness:
    def __init__(self):
        self.dev = EmulatorDevice()

    def run(self, ptx: str, grid, block, args, kernel: str = "k", **kw):
        mod = self.dev.load_module(ptx)
        return self.dev.launch(mod.get_function(kernel), grid, block, args, **kw)

    def elementwise(self, op: str, inputs: list, out_dtype, block: int = 64, out_pred=False):
        """Run `op` (with {d} {a} {b} {c}) once per element; returns the output array."""
        inputs = [np.ascontiguousarray(x) for x in inputs]
        n = inputs[0].size
        widths = [x.dtype.itemsize * 8 for x in inputs]
        out_dtype = np.dtype(np.uint32 if out_pred else out_dtype)
        ow = 1 if out_pred else out_dtype.itemsize * 8
        regs = "".join(f"  .reg .b{w} %x{i};\n" for i, w in enumerate(widths))
        regs += f"  .reg .b{32 if out_pred else ow} %xd;\n  .reg .pred %pd;\n"
        ptx = kernel_ptx(_elementwise_body(op, widths, ow), nparams=len(inputs) + 1,
                         extra_regs=regs)
        ptrs = [self.dev.to_device(x) for x in inputs]
        out = self.dev.malloc(n * out_dtype.itemsize)
        assert n % block == 0
        self.run(ptx, (n // block,), (block,), [out] + ptrs)
        return self.dev.from_device(out, (n,), out_dtype)


# shared-memory matrices as wgmma and tcgen05 descriptors describe them (test_emu_wgmma.py,
# test_emu_tcgen05.py)
def _swz(addr, sw):
    """Byte address after a CUTLASS-style Swizzle<B,4,3> (XOR of the 16-byte chunk index)."""
    if not sw:
        return addr
    b = {32: 1, 64: 2, 128: 3}[sw]
    return addr ^ (((addr >> 7) & ((1 << b) - 1)) << 4)


def place(img, base, mat, esize, k_major, sw, lbo, sbo):
    """Write `mat` (rows = M or N, cols = K) into the byte image as the descriptor describes.
    Written from the PTX ISA's canonical-layout table, one element at a time."""
    rows, cols = mat.shape
    T = 16 // esize
    raw = np.ascontiguousarray(mat).view(np.uint8).reshape(rows, cols, esize)
    for r in range(rows):
        for c in range(cols):
            if k_major:
                if sw == 0:
                    off = (r % 8) * 16 + (r // 8) * sbo + (c % T) * esize + (c // T) * lbo
                else:
                    off = (r // 8) * sbo + (r % 8) * sw + c * esize
            else:
                if sw == 0:
                    off = (r % T) * esize + (r // T) * sbo + (c % 8) * 16 + (c // 8) * lbo
                else:
                    per = sw // esize
                    off = (r // per) * lbo + (r % per) * esize + (c % 8) * sw + (c // 8) * sbo
            a = _swz(base + off, sw)
            img[a:a + esize] = raw[r, c]
