"""Instructions per element, Tile against Triton 3.9: SASS, with the emulator's PTX counts.

For vadd, softmax, layernorm and RMSNorm at widths 256, 1,024 and 4,096, both compilers' PTX
(Tile's at -O3 for sm_90a, Triton's tutorial kernels for GPUTarget("cuda", 90, 32), compiled in
the same run) runs on the PTX emulator on the same data (results checked against NumPy); the
table gives thread-level instructions per element, their ratio, the registers per thread of the
cubins and the theoretical occupancy at 128 threads (sm_90a); "vadd (reqntid = 128)" is
examples/vadd.tile with its block fixed at 128 threads, as Triton's program is (the example's
`maxntid` also serves smaller blocks, which costs a test of the block size):

    python3 benchmarks/instructions.py [--precision ieee|fast|approx] [--triton-python PY]

Units (all per element: a warp-level count x 32 / elements, so "4.25" is 34 instructions per
thread for 8 elements per thread):

* **SASS issued** (the main figure): what the GPU runs. Each side's PTX is assembled by the
  same nvJitLink for sm_90a with a line table naming each instruction's PTX line (-lineinfo;
  the SASS is the same as without it) and disassembled with nvdisasm; every SASS basic block is
  counted as often as the emulator issued its PTX lines (tilelang.tools.sass.sass_issued), its
  predicated-off instructions included, as on the GPU (ncu's `smsp__inst_executed`). Needs the
  nvidia-cuda-nvdisasm wheel ("-" without it).
* **PTX issued**: PTX warp-instructions issued on the emulator (each instruction once per warp
  with an active thread at it, whatever its guard predicate; `LaunchReport.total_issued`).
* **PTX executed**: PTX thread-instructions whose guard was true (the unit of the tables before
  2026-11-24f; `LaunchReport.total_instructions`).

Triton runs in a subprocess with a Python that has it (`--triton-python`, default
$TRITON_PYTHON, else this Python); the same file compiles the Triton kernels when
run as `PY benchmarks/instructions.py --emit-triton DIR`. Triton specializes pointers and
integers divisible by 16 (`tt.divisibility = 16`, what its JIT does for 16-byte-aligned
tensors and such sizes); the emulator passes 0 for the two scratch pointers Triton appends.
Tile compiles with the facts the runtime derives from the same arrays (docs/abi.md: contiguous,
16-byte aligned, extent16, and offsets that fit in 32 bits).

Registers: Tile's from the cubin the driver makes (nvJitLink, and the `.maxnreg` step of
codegen/target/register_fit.py when it reaches an occupancy step without spilling); Triton's from the
cubin Triton's own ptxas made (cuobjdump --dump-resource-usage) and, in brackets, from nvJitLink
on Triton's PTX. Occupancy is at 128 threads per block with those registers (`tilec --report`'s
model). Without Triton the Triton columns are left out.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

WIDTHS = (256, 1024, 4096)
ROWS = 8                       # rows per row-kernel launch (one block / program per row)
VADD_N = 16384                 # elements of the vadd launch
KERNELS = ("vadd", "softmax", "layernorm", "rmsnorm")
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# ---------------------------------------------------------------------------------------------
# Triton side (runs only under a Python with Triton)

TRITON_KERNELS = r'''
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, output_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    block_start = pid * BLOCK_SIZE
    offsets = block_start + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    output = x + y
    tl.store(output_ptr + offsets, output, mask=mask)


@triton.jit
def softmax_kernel(output_ptr, input_ptr, input_row_stride, output_row_stride, n_rows, n_cols,
                   BLOCK_SIZE: tl.constexpr, num_stages: tl.constexpr):
    row_start = tl.program_id(0)
    row_step = tl.num_programs(0)
    for row_idx in tl.range(row_start, n_rows, row_step, num_stages=num_stages):
        row_start_ptr = input_ptr + row_idx * input_row_stride
        col_offsets = tl.arange(0, BLOCK_SIZE)
        input_ptrs = row_start_ptr + col_offsets
        mask = col_offsets < n_cols
        row = tl.load(input_ptrs, mask=mask, other=-float('inf'))
        row_minus_max = row - tl.max(row, axis=0)
        numerator = tl.exp(row_minus_max)
        denominator = tl.sum(numerator, axis=0)
        softmax_output = numerator / denominator
        output_row_start_ptr = output_ptr + row_idx * output_row_stride
        output_ptrs = output_row_start_ptr + col_offsets
        tl.store(output_ptrs, softmax_output, mask=mask)


@triton.jit
def _layer_norm_fwd_fused(X, Y, W, B, Mean, Rstd, stride, N, eps, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    Y += row * stride
    X += row * stride
    mean = 0
    _mean = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        a = tl.load(X + cols, mask=cols < N, other=0.).to(tl.float32)
        _mean += a
    mean = tl.sum(_mean, axis=0) / N
    _var = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        x = tl.load(X + cols, mask=cols < N, other=0.).to(tl.float32)
        x = tl.where(cols < N, x - mean, 0.)
        _var += x * x
    var = tl.sum(_var, axis=0) / N
    rstd = 1 / tl.sqrt(var + eps)
    tl.store(Mean + row, mean)
    tl.store(Rstd + row, rstd)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        mask = cols < N
        w = tl.load(W + cols, mask=mask)
        b = tl.load(B + cols, mask=mask)
        x = tl.load(X + cols, mask=mask, other=0.).to(tl.float32)
        x_hat = (x - mean) * rstd
        y = x_hat * w + b
        tl.store(Y + cols, y, mask=mask)


@triton.jit
def rmsnorm_kernel(X, Y, W, stride, N, eps, BLOCK_SIZE: tl.constexpr):
    # RMSNorm in the style of the layernorm tutorial, one row per program
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < N
    x = tl.load(X + row * stride + cols, mask=mask, other=0.).to(tl.float32)
    ms = tl.sum(x * x, axis=0) / N
    rstd = 1 / tl.sqrt(ms + eps)
    w = tl.load(W + cols, mask=mask)
    tl.store(Y + row * stride + cols, x * rstd * w, mask=mask)
'''

# kernel -> (function, signature, divisible-by-16 parameters, warps rule, scalar args rule)
TRITON_SPECS = {
    "vadd": ("add_kernel", {"x_ptr": "*fp32", "y_ptr": "*fp32", "output_ptr": "*fp32",
                            "n_elements": "i32", "BLOCK_SIZE": "constexpr"},
             ["x_ptr", "y_ptr", "output_ptr", "n_elements"]),
    "softmax": ("softmax_kernel", {"output_ptr": "*fp32", "input_ptr": "*fp32",
                                   "input_row_stride": "i32", "output_row_stride": "i32",
                                   "n_rows": "i32", "n_cols": "i32",
                                   "BLOCK_SIZE": "constexpr", "num_stages": "constexpr"},
                ["output_ptr", "input_ptr", "input_row_stride", "output_row_stride", "n_cols"]),
    "layernorm": ("_layer_norm_fwd_fused", {"X": "*fp32", "Y": "*fp32", "W": "*fp32",
                                            "B": "*fp32", "Mean": "*fp32", "Rstd": "*fp32",
                                            "stride": "i32", "N": "i32", "eps": "fp32",
                                            "BLOCK_SIZE": "constexpr"},
                  ["X", "Y", "W", "B", "Mean", "Rstd", "stride", "N"]),
    "rmsnorm": ("rmsnorm_kernel", {"X": "*fp32", "Y": "*fp32", "W": "*fp32", "stride": "i32",
                                   "N": "i32", "eps": "fp32", "BLOCK_SIZE": "constexpr"},
                ["X", "Y", "W", "stride", "N"]),
}


def triton_warps(kernel: str, width: int, rule: str = "same") -> int:
    """"same": 4 warps, the 128 threads Tile's kernels use (the issue's baseline); "tutorial":
    the tutorials' choices (vadd 4 warps, softmax 8, layernorm and our RMSNorm one warp per
    256 elements, 1 to 8)."""
    if rule == "same" or kernel == "vadd":
        return 4
    if kernel == "softmax":
        return 8
    return min(max(width // 256, 1), 8)


def emit_triton(out: str, rule: str, widths=WIDTHS) -> None:
    """Compile every Triton kernel at each width; write PTX, cubin and a JSON index into
    `out`."""
    os.environ.setdefault("TRITON_CACHE_DIR", tempfile.mkdtemp(prefix="triton-cache-"))
    os.environ.setdefault("TRITON_DISABLE_LINE_INFO", "1")
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")   # its current default, stated
    import importlib.util
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    path = os.path.join(out, "triton_kernels.py")
    with open(path, "w") as f:
        f.write(TRITON_KERNELS)
    spec = importlib.util.spec_from_file_location("triton_kernels", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    index = {"triton": triton.__version__, "kernels": {}}
    for kernel, (fname, sig, div16) in TRITON_SPECS.items():
        for w in widths:
            consts = {"BLOCK_SIZE": w}
            if kernel == "softmax":
                consts["num_stages"] = 2
            names = list(sig)
            attrs = {(names.index(n),): [["tt.divisibility", 16]] for n in div16}
            src = ASTSource(getattr(mod, fname), dict(sig), consts, attrs)
            warps = triton_warps(kernel, w, rule)
            k = triton.compile(src, target=GPUTarget("cuda", 90, 32),
                               options={"num_warps": warps})
            stem = os.path.join(out, f"{kernel}_{w}")
            with open(stem + ".ptx", "w") as f:
                f.write(k.asm["ptx"])
            with open(stem + ".cubin", "wb") as f:
                f.write(k.asm["cubin"])
            index["kernels"][f"{kernel}_{w}"] = {
                "name": k.metadata.name, "warps": warps, "shared": k.metadata.shared,
                "params": [n for n in names if sig[n] != "constexpr"]}
    with open(os.path.join(out, "index.json"), "w") as f:
        json.dump(index, f, indent=1)


# ---------------------------------------------------------------------------------------------
# Tile side

RMSNORM_ROWS_TILE = """
kernel rmsnorm_rows(x: Array[f32, 2], w: Array[f32, 1], y: Array[f32, 2], eps: f32,
                    const R: i32 = 4, const N: i32 = 256) {
    let blk = bid(0);
    let t = load(x, index = (blk, 0), shape = (R, N), padding = 0.0);
    let ms = sum(t * t, axis = 1, keepdims = true) / astype(x.shape[1], f32);
    let scale = load(w, index = (0,), shape = (N,), padding = 0.0);
    store(y, index = (blk, 0), tile = t * rsqrt(ms + eps) * scale);
}
"""
MULTI_ROW = 4        # rows per block of the several-rows variants (examples/*_rows.tile)

RMSNORM_TILE = """
kernel rmsnorm(x: Array[f32, 2], w: Array[f32, 1], y: Array[f32, 2], eps: f32,
               const N: i32 = 1024) {
    let r = bid(0);
    let t = load(x, index = (r, 0), shape = (1, N), padding = 0.0);
    let ms = sum(t * t, axis = 1, keepdims = true) / astype(x.shape[1], f32);
    let scale = load(w, index = (0,), shape = (N,), padding = 0.0);
    store(y, index = (r, 0), tile = t * rsqrt(ms + eps) * scale);
}
"""


def tile_source(kernel: str) -> tuple[str, str, str, str]:
    """(text, path, kernel name, const name) of the Tile kernel ("softmax_rows" etc.: the
    several-rows-per-block variants)."""
    if kernel == "rmsnorm":
        return RMSNORM_TILE, "<rmsnorm>", "rmsnorm", "N"
    if kernel == "rmsnorm_rows":
        return RMSNORM_ROWS_TILE, "<rmsnorm_rows>", "rmsnorm_rows", "N"
    if kernel.endswith("_rows"):
        path = os.path.join(ROOT, "examples", f"{kernel}.tile")
        with open(path) as f:
            return f.read(), path, kernel, "N"
    path = os.path.join(ROOT, "examples", f"{kernel}.tile")
    with open(path) as f:
        text = f.read()
    name = {"vadd": "vadd", "softmax": "softmax_rows", "layernorm": "layernorm"}[kernel]
    return text, path, name, "TILE" if kernel == "vadd" else "N"


def inputs(kernel: str, width: int, rng):
    import numpy as np
    if kernel == "vadd":
        return {"a": rng.standard_normal(VADD_N).astype(np.float32),
                "b": rng.standard_normal(VADD_N).astype(np.float32)}
    x = (rng.standard_normal((ROWS, width)) * 3).astype(np.float32)
    return {"x": x, "w": rng.standard_normal(width).astype(np.float32),
            "b": rng.standard_normal(width).astype(np.float32), "eps": 1e-5}


def reference(kernel: str, d):
    import numpy as np
    if kernel == "vadd":
        return d["a"].astype(np.float64) + d["b"]
    x = d["x"].astype(np.float64)
    if kernel == "softmax":
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)
    if kernel == "layernorm":
        m = x.mean(axis=1, keepdims=True)
        v = ((x - m) ** 2).mean(axis=1, keepdims=True)
        return (x - m) / np.sqrt(v + d["eps"]) * d["w"] + d["b"]
    ms = (x * x).mean(axis=1, keepdims=True)
    return x / np.sqrt(ms + d["eps"]) * d["w"]


def check(kernel: str, got, d, what: str) -> None:
    import numpy as np
    want = reference(kernel, d)
    # against the row's largest value: y = x_hat * w + b cancels to near zero in places
    scale = np.max(np.abs(want), axis=-1, keepdims=True)
    err = float(np.max(np.abs(got - want) / scale))
    if not err < 1e-5:
        raise SystemExit(f"{what} {kernel}: wrong result (relative error {err:.3g})")


# vadd with its block fixed at 128 threads (`reqntid`), as Triton's program is: the example's
# `maxntid` contract also serves smaller blocks, which costs a test of the block size
FIXED_BLOCK = "fixed block"


def run_tile(kernel: str, width: int, d, precision: str | None, rows=1):
    import numpy as np
    from tilelang.codegen.target.link import link_ptx
    from tilelang.targets import get_target
    from tilelang.driver import compile_kernel
    from tilelang.options import CompileOptions
    from tilelang.emulator import EmulatorDevice
    from tilelang.codegen.api import ArrayFacts
    from tilelang.driver import inspect_source
    from tilelang.runtime.args import facts_key, shape_links
    fixed = rows == FIXED_BLOCK
    rows = 1 if fixed else rows
    text, path, name, const = tile_source(kernel if rows == 1 else f"{kernel}_rows")
    if fixed:
        text = text.replace("@launch(maxntid = (128, 1, 1))", "@launch(reqntid = (128, 1, 1))")
        assert "reqntid = (128, 1, 1)" in text
    opts = CompileOptions(target="sm_90a", precision=precision)
    consts = {const: width} if rows == 1 else {const: width, "R": rows}
    arrays = {"a": d.get("a"), "b": d.get("b"), "c": None, "x": d.get("x"), "w": d.get("w"),
              "y": None}
    if kernel == "vadd":
        arrays["c"] = np.zeros(VADD_N, np.float32)
        grid = VADD_N // width
    else:
        arrays["y"] = np.zeros((ROWS, width), np.float32)
        grid = ROWS // rows
    dev = EmulatorDevice()
    ptrs = {k: dev.to_device(a) for k, a in arrays.items() if a is not None}
    # the specialization the runtime would pick for these arrays (docs/abi.md)
    # (same_shape among them: the keys in parameter order)
    order = [p.name for p in inspect_source(text, path, opts).kernels[name].params
             if p.kind == "array"]
    keys = shape_links([facts_key(int(ptrs[k]), arrays[k].shape,
                                  tuple(s // arrays[k].itemsize for s in arrays[k].strides),
                                  arrays[k].itemsize) for k in order],
                       [arrays[k].shape for k in order])
    facts = {k: ArrayFacts.from_key(f) for k, f in zip(order, keys)}
    # linked as the driver links (register_fit may add `.maxnreg`): the PTX run here is the
    # PTX of the cubin whose registers are reported
    ck = compile_kernel(text, path, name, consts=consts, options=opts, link=True, facts=facts)
    art = ck.artifact
    fn = dev.load_module(ck.ptx).get_function(name)
    packed = []
    for p in art.params:
        if p.kind == "array":
            a = arrays[p.name]
            packed.append(ptrs[p.name])
            packed += [np.int64(n) for n in a.shape]
            packed += [np.int64(s // a.itemsize) for s in a.strides]
        else:
            packed.append(np.float32(d[p.name]))
    rep = dev.launch(fn, (grid, 1, 1), art.block, packed, shared_mem=art.dynamic_smem)
    out = "c" if kernel == "vadd" else "y"
    got = dev.from_device(ptrs[out], arrays[out].shape, np.float32)
    check(kernel, got, d, "Tile")
    regs = link_ptx(ck.ptx, get_target("sm_90a")).resources[name].registers
    threads = art.block[0] * art.block[1] * art.block[2]
    return (rep.total_issued, rep.total_instructions, sass_issued(ck.ptx, name, rep)), regs, \
        threads, ck.ptx


def run_triton(kernel: str, width: int, d, folder: str, index):
    import numpy as np
    from tilelang.emulator import EmulatorDevice
    info = index["kernels"][f"{kernel}_{width}"]
    with open(os.path.join(folder, f"{kernel}_{width}.ptx")) as f:
        ptx = f.read()
    dev = EmulatorDevice()
    fn = dev.load_module(ptx).get_function(info["name"])
    if kernel == "vadd":
        out = np.zeros(VADD_N, np.float32)
        px, py, po = dev.to_device(d["a"]), dev.to_device(d["b"]), dev.to_device(out)
        args, grid = [px, py, po, np.int32(VADD_N)], -(-VADD_N // width)
    else:
        out = np.zeros((ROWS, width), np.float32)
        px, po = dev.to_device(d["x"]), dev.to_device(out)
        grid = ROWS
        if kernel == "softmax":
            args = [po, px, np.int32(width), np.int32(width), np.int32(ROWS), np.int32(width)]
        elif kernel == "layernorm":
            mean, rstd = dev.malloc(4 * ROWS), dev.malloc(4 * ROWS)
            args = [px, po, dev.to_device(d["w"]), dev.to_device(d["b"]), mean, rstd,
                    np.int32(width), np.int32(width), np.float32(d["eps"])]
        else:
            args = [px, po, dev.to_device(d["w"]), np.int32(width), np.int32(width),
                    np.float32(d["eps"])]
    rep = dev.launch(fn, (grid, 1, 1), (32 * info["warps"], 1, 1), args + [0, 0],
                     shared_mem=info["shared"])
    got = dev.from_device(po, out.shape, np.float32)
    check(kernel, got, d, "Triton")
    return (rep.total_issued, rep.total_instructions, sass_issued(ptx, info["name"], rep)), ptx


def sass_issued(ptx: str, name: str, rep):
    """SASS warp-instructions issued by the launch `rep` ran: the PTX assembled by nvJitLink
    for sm_90a with a line table (-lineinfo; the same instructions as without it), each SASS
    basic block counted as often as the emulator issued its PTX lines
    (tilelang.tools.sass.sass_issued: an `IssuedEstimate`). None without the nvdisasm wheel."""
    from tilelang.codegen.target.link import link_ptx
    from tilelang.targets import get_target
    from tilelang.tools import sass
    if not sass.tools_available():
        return None
    link = link_ptx(sass.ptx_with_line_table(ptx), get_target("sm_90a"),
                    extra_options=["-lineinfo"])
    return sass.sass_issued(sass.disassemble_with_lines(link.cubin)[name], rep.issued_lines)


def cubin_registers(path: str) -> int | None:
    """Registers per thread from `cuobjdump --dump-resource-usage` (None without it)."""
    from tilelang.tools.sass import find_tool
    exe = find_tool("cuobjdump")       # the nvidia-cuda-cuobjdump wheel's, or one on PATH
    if exe is None:
        return None
    try:
        text = subprocess.run([exe, "--dump-resource-usage", path], capture_output=True,
                              text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"REG:(\d+)", text)
    return int(m.group(1)) if m else None


def occupancy_at_128(regs: int) -> float:
    from tilelang.codegen.occupancy import occupancy
    return occupancy("sm_90a", 128, regs).percent


def per_element(kernel: str, width: int, counts) -> tuple:
    """(PTX warp-instructions issued, PTX thread-instructions executed, SASS warp-instructions
    issued) as thread-level instructions per element: warp figures x 32 / elements, executed
    thread-instructions / elements (None where a count is missing)."""
    elems = VADD_N if kernel == "vadd" else ROWS * width
    issued, executed, sass_issued = counts
    return (issued * 32 / elems, executed / elems,
            None if sass_issued is None else
            Approx(sass_issued.count * 32 / elems, sass_issued.exact))


class Approx(float):
    """A figure, and whether it is exact or the per-line estimate (shown as "~N")."""
    def __new__(cls, value: float, exact: bool = True):
        self = super().__new__(cls, value)
        self.exact = exact
        return self


def _num(v) -> str:
    if v is None:
        return "-"
    return f"{v:.2f}" if getattr(v, "exact", True) else f"~{v:.2f}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--emit-triton", metavar="DIR", help=argparse.SUPPRESS)
    ap.add_argument("--triton-warps", choices=("same", "tutorial"), default="same",
                    help="Triton's warps: 4 like Tile's 128 threads (default), or the "
                         "tutorials' rules")
    ap.add_argument("--precision", choices=("ieee", "fast", "approx"), default=None,
                    help="Tile's math mode (default: the language default, fast)")
    ap.add_argument("--triton-python", default=os.environ.get("TRITON_PYTHON", sys.executable))
    ap.add_argument("--kernels", default=",".join(KERNELS))
    ap.add_argument("--widths", default=",".join(map(str, WIDTHS)))
    args = ap.parse_args(argv)
    kernels = args.kernels.split(",")
    widths = [int(w) for w in args.widths.split(",")]
    if args.emit_triton:
        emit_triton(args.emit_triton, args.triton_warps, widths)
        return 0
    import numpy as np
    sys.path.insert(0, ROOT)
    folder = tempfile.mkdtemp(prefix="tile-instr-")
    index = None
    if os.path.exists(args.triton_python):
        r = subprocess.run([args.triton_python, os.path.abspath(__file__), "--emit-triton",
                            folder, "--triton-warps", args.triton_warps,
                            "--widths", args.widths],
                           capture_output=True, text=True)
        if r.returncode == 0:
            with open(os.path.join(folder, "index.json")) as f:
                index = json.load(f)
        else:
            print("Triton compile failed; Tile columns only:\n" + r.stderr[-2000:],
                  file=sys.stderr)
    rng = np.random.default_rng(0)
    head = "| kernel | width | SASS: Tile | Triton | ratio | PTX issued: Tile | Triton | " \
           "ratio | PTX executed: Tile | Triton | Tile regs | Triton regs | " \
           "Tile occupancy @128 | Triton occupancy @128 |"
    print(f"Instructions per element (thread-level: warp-instructions x 32 / elements), "
          f"sm_90a; SASS issued (nvJitLink's SASS, each basic block counted as often as the "
          f"emulator issued its PTX lines), PTX warp-instructions issued and thread-"
          f"instructions executed on the emulator; Tile precision: "
          f"{args.precision or 'fast (default)'}; Triton "
          f"{index['triton'] if index else '-'}, warps: {args.triton_warps}\n")
    print(head)
    print("|" + "---|" * 14)
    for kernel, w, rows in [(k, w, r) for k in kernels for w in widths
                            for r in ((1, FIXED_BLOCK) if k == "vadd" else
                                      (1,) if w > 256 else (1, MULTI_ROW))]:
            d = inputs(kernel, w, rng)
            t_ins, t_regs, t_threads, _ = run_tile(kernel, w, d, args.precision, rows)
            tile = per_element(kernel, w, t_ins)
            label = kernel if rows == 1 else f"{kernel} (reqntid = 128)" \
                if rows == FIXED_BLOCK else f"{kernel} ({rows} rows/block)"
            if index is not None:
                tr_ins, tr_ptx = run_triton(kernel, w, d, folder, index)
                tri = per_element(kernel, w, tr_ins)
                own = cubin_registers(os.path.join(folder, f"{kernel}_{w}.cubin"))
                from tilelang.codegen.target.link import link_ptx
                from tilelang.targets import get_target
                linked = link_ptx(tr_ptx, get_target("sm_90a")).resources[
                    index["kernels"][f"{kernel}_{w}"]["name"]].registers
                regs = own if own is not None else linked
                tri_regs = f"{own if own is not None else '-'} ({linked})"
                tri_occ = f"{occupancy_at_128(regs):.0f}%"
            else:
                tri, tri_regs, tri_occ = (None, None, None), "-", "-"
            row = [label, f"{w:,}"]
            for k in (2, 0):               # SASS issued, PTX issued: Tile, Triton, ratio
                row += [_num(tile[k]), _num(tri[k]),
                        _num(Approx(tile[k] / tri[k], getattr(tile[k], "exact", True) and
                                    getattr(tri[k], "exact", True)))
                        if tile[k] and tri[k] else "-"]
            row += [_num(tile[1]), _num(tri[1]), str(t_regs), tri_regs,
                    f"{occupancy_at_128(t_regs):.0f}%", tri_occ]
            print("| " + " | ".join(row) + " |", flush=True)
    shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
