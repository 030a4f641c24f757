"""The text of a C export: `NAME.h` (declarations, documented) and `NAME.c` (the cubins and
the launchers). Plain C99 that also compiles as C++; it includes `cuda.h` and standard
headers only, and calls the driver API alone (docs/cli.md "C export").

What a launcher does, in the order the Python runtime does it (docs/abi.md):
1. refuse what the driver would take but the ABI does not (a negative extent) with
   CUDA_ERROR_INVALID_VALUE; then return CUDA_SUCCESS for a grid with a zero extent without
   calling the driver (an empty launch, as the runtime's: the driver refuses a zero extent);
2. pick the variant whose facts every array satisfies (tilelang/aot/export.py), testing them as
   `facts_key` in tilelang/runtime/args.py does;
3. pack the parameter buffer: each PTX parameter at its natural alignment, tensor maps at 64
   bytes, padding zeroed (runtime/packing.py, runtime/tensormap.py), and pass it whole through
   `extra` (CU_LAUNCH_PARAM_BUFFER_POINTER);
4. encode the variant's tensor maps with cuTensorMapEncodeTiled (a host-only call);
5. cuLaunchKernel, or cuLaunchKernelEx with the cluster dimension for cluster kernels.
Nothing is allocated, copied or synchronized: a launch may be captured into a CUDA graph.
"""

from __future__ import annotations

from ..codegen.api import AbiParam, KernelArtifact
from ..runtime.packing import ParamLayout, layout
from ..runtime.signature import ParamInfo
from ..runtime.dtypes import ITEMSIZE
from ..runtime.tensormap import DATA_TYPES, SWIZZLE_CODES, layout_with_maps
from .export import CExport, CompiledVariant, _C_WORDS

_C_TYPES = {"bool": "bool", "i8": "int8_t", "u8": "uint8_t", "i16": "int16_t",
            "u16": "uint16_t", "i32": "int32_t", "u32": "uint32_t", "i64": "int64_t",
            "u64": "uint64_t", "f32": "float", "tf32": "float", "f64": "double",
            "f16": "uint16_t", "bf16": "uint16_t", "f8e4m3": "uint8_t", "f8e5m2": "uint8_t",
            "f4e2m1": "uint8_t", "f6e2m3": "uint8_t", "f6e3m2": "uint8_t", "ue8m0": "uint8_t",
            "f4e2m1x2": "uint8_t"}
_BITS_NOTE = {"f16": "the bits of an IEEE binary16", "bf16": "the bits of a bfloat16",
              "f8e4m3": "the bits of an FP8 E4M3", "f8e5m2": "the bits of an FP8 E5M2",
              "f4e2m1": "an FP4 E2M1 code in bits 0-3", "f6e2m3": "an FP6 E2M3 code in bits 0-5",
              "f6e3m2": "an FP6 E3M2 code in bits 0-5", "ue8m0": "an E8M0 scale 2^(c - 127)",
              "f4e2m1x2": "two FP4 E2M1 codes, the even element in bits 0-3",
              "tf32": "an f32 whose low 13 mantissa bits the kernel ignores"}
_MAP_TYPES = {0: "UINT8", 1: "UINT16", 2: "UINT32", 3: "INT32", 4: "UINT64", 5: "INT64",
              6: "FLOAT16", 7: "FLOAT32", 8: "FLOAT64", 9: "BFLOAT16", 11: "TFLOAT32"}
_SWIZZLES = {0: "NONE", 1: "32B", 2: "64B", 3: "128B"}
_LOCAL = "tile_"                 # every local and static name starts so; parameters never do


def render(ex: CExport, header_name: str) -> tuple[str, str]:
    """(the header's text, the source's text); the source includes `header_name`."""
    names = _param_names(ex)
    return _header(ex, names), _source(ex, names, header_name)


# -- names ---------------------------------------------------------------------------------

def _param_names(ex: CExport) -> dict[str, dict[str, tuple[str, ...]]]:
    """kernel -> Tile parameter -> its C parameter names (an array: pointer, shape, strides),
    renamed with a trailing `_` where they would be a C/C++ keyword or clash."""
    out = {}
    for k in ex.variants[0].kernels:
        taken = {"stream", "grid_x", "grid_y", "grid_z"}
        names = {}
        for p in k.params:
            base = p.name if p.name not in _C_WORDS else p.name + "_"
            wanted = (base, f"{base}_shape", f"{base}_strides") if p.kind == "array" and \
                p.rank else (base,)
            got = []
            for w in wanted:
                while w in taken or w.startswith(_LOCAL):
                    w += "_"
                taken.add(w)
                got.append(w)
            names[p.name] = tuple(got)
        out[k.name] = names
    return out


def _c_params(k: KernelArtifact, names) -> list[str]:
    out = ["CUstream stream", "unsigned int grid_x", "unsigned int grid_y", "unsigned int grid_z"]
    for p in k.params:
        n = names[p.name]
        if p.kind == "array":
            out.append(f"CUdeviceptr {n[0]}")
            if p.rank:
                out += [f"const int64_t {n[1]}[{p.rank}]", f"const int64_t {n[2]}[{p.rank}]"]
        else:
            out.append(f"{_C_TYPES[p.dtype.name]} {n[0]}")
    return out


def _args(k: KernelArtifact, names) -> str:
    return ", ".join(["stream", "grid_x", "grid_y", "grid_z"] +
                     [n for p in k.params for n in names[p.name]])


def _guard(prefix: str) -> str:
    return f"TILE_EXPORT_{prefix.upper()}_H"


# -- the header ----------------------------------------------------------------------------

def _header(ex: CExport, names) -> str:
    p = ex.prefix
    lines = [f"/* {p}.h: Tile kernels from {ex.source} for {ex.target}, exported by",
             " * `tilec --emit c` (docs/cli.md, \"C export\"). Generated: do not edit.",
             " *",
             f" * Call {p}_load() once (after cuInit, with a context current) before launching,",
             f" * and {p}_unload() when done. Each {p}_launch_KERNEL() launches one kernel on",
             " * `stream` in the calling thread's current context and returns the driver's",
             " * status; it neither allocates, copies nor synchronizes, so it may be captured",
             " * into a CUDA graph. Arrays are device pointers with their extents and strides",
             " * in elements (negative and zero strides allowed); the launcher picks the",
             " * kernel variant that the arrays' layout allows:",
             " *"]
    tail = []
    if ex.patterns:
        tail = [" *",
                " * An `Optional[Array[...]]` parameter is None when its pointer is 0 (NULL);",
                " * its shape and strides are then not read (NULL is fine). Each pattern of",
                " * absent optional arrays runs its own compiled kernel."]
    for v in ex.variants:
        lines.append(f" *   {v.variant.name}: {v.variant.meaning}.")
    lines += tail
    lines += [" */", f"#ifndef {_guard(p)}", f"#define {_guard(p)}", "",
              "#include <cuda.h>", "#include <stdint.h>"]
    if any(q.dtype.name == "bool" for k in ex.variants[0].kernels for q in k.params):
        lines.append("#include <stdbool.h>")
    lines += ["", "#ifdef __cplusplus", 'extern "C" {', "#endif", "",
              f"/* Loads the kernels' images; sets the attributes the kernels need on the device",
              " * of the current context, if one is current. CUDA_SUCCESS if already loaded. */",
              f"CUresult {p}_load(void);", "",
              "/* Sets the per-device attributes (large dynamic shared memory, non-portable",
              f" * clusters) for `device`; needed before launching on a device other than the one",
              f" * current when {p}_load() ran. */",
              f"CUresult {p}_prepare_device(CUdevice device);", "",
              "/* Unloads the images; launching afterwards returns CUDA_ERROR_NOT_INITIALIZED. */",
              f"CUresult {p}_unload(void);", ""]
    for ek, k in zip(ex.kernels, ex.variants[0].kernels):
        lines += _kernel_doc(ex, ek, k)
        params = _c_params(k, names[k.name])
        lines.append(f"CUresult {p}_launch_{k.name}(" + params[0] + ",")
        lines += _wrap(params[1:], "    ", ");")
        lines.append("")
    lines += ["#ifdef __cplusplus", "}", "#endif", "", f"#endif /* {_guard(p)} */", ""]
    return "\n".join(lines)


def _kernel_doc(ex: CExport, ek, k: KernelArtifact) -> list[str]:
    out = [f"/* {ek.signature}"]
    for v in ex.variants:
        a = v.kernel(k.name)
        extra = []
        if a.dynamic_smem:
            extra.append(f"{a.dynamic_smem} bytes of dynamic shared memory")
        if a.cluster:
            extra.append("clusters of {}x{}x{} blocks (the grid must be whole clusters)"
                         .format(*a.cluster))
        if a.tensor_maps:
            extra.append(f"{len(a.tensor_maps)} TMA tensor map(s)")
        out.append(f" *   {v.variant.name}: blocks of {a.block[0]}x{a.block[1]}x{a.block[2]} "
                   "threads" + "".join(", " + e for e in extra))
    notes = sorted({f"{p.name}: {_BITS_NOTE[p.dtype.name]}" for p in k.params
                    if p.kind == "scalar" and p.dtype.name in _BITS_NOTE})
    out += [f" *   {n}" for n in notes]
    out[-1] += " */"
    return out


def _wrap(items: list[str], indent: str, end: str) -> list[str]:
    out = []
    for i, it in enumerate(items):
        out.append(indent + it + ("," if i < len(items) - 1 else end))
    return out


# -- the source ----------------------------------------------------------------------------

def _source(ex: CExport, names, header_name: str) -> str:
    p = ex.prefix
    nv, nk = len(ex.variants), len(ex.kernels)
    lines = [f"/* {p}.c: the kernels of {ex.source} for {ex.target} and their launchers;",
             f" * declarations and usage in {header_name}. Generated by `tilec --emit c`: do not",
             " * edit. */", "", f'#include "{header_name}"', "", "#include <string.h>", ""]
    for i, v in enumerate(ex.variants):
        lines += _image(p, i, v.cubin, f"the {v.variant.name} variant's cubin")
    for j, pat in enumerate(ex.patterns):
        lines += _image(p, nv + j, pat.cubin, f"`{pat.kernel}` with {', '.join(pat.absent)} "
                        f"None, {ex.variants[pat.variant].variant.name} variant")
    lines += [f"static CUlibrary {_LOCAL}{p}_libs[{nv + len(ex.patterns)}];",
              f"static CUkernel {_LOCAL}{p}_kernels[{nv}][{nk}];"]
    if ex.patterns:
        lines.append(f"static CUkernel {_LOCAL}{p}_pkernels[{len(ex.patterns)}];")
    lines += [f"static int {_LOCAL}{p}_loaded;", ""]
    lines += _load(ex)
    lines += _facts_helpers(p)
    for ki, k in enumerate(ex.variants[0].kernels):
        for vi, v in enumerate(ex.variants):
            lines += _variant_launcher(ex, names[k.name], f"{_LOCAL}{p}_v{vi}_{k.name}",
                                       f"(CUfunction){_LOCAL}{p}_kernels[{vi}][{ki}]",
                                       v.kernel(k.name), ())
        for j, pat in enumerate(ex.patterns):
            if pat.kernel == k.name:
                lines += _variant_launcher(ex, names[k.name], _pattern_fn(p, pat),
                                           f"(CUfunction){_LOCAL}{p}_pkernels[{j}]",
                                           pat.artifact, pat.absent)
        lines += _dispatcher(ex, names[k.name], ki, k)
    return "\n".join(lines)


def _pattern_fn(p: str, pat) -> str:
    return f"{_LOCAL}{p}_v{pat.variant}_m{pat.mask}_{pat.kernel}"


def _image(p: str, i: int, data: bytes, what: str) -> list[str]:
    out = [f"/* {what} ({len(data)} bytes) */",
           f"static const union {{ unsigned char bytes[{len(data)}]; uint64_t align; }} "
           f"{_LOCAL}{p}_image_{i} = {{{{"]
    for j in range(0, len(data), 16):
        chunk = ", ".join(f"0x{b:02x}" for b in data[j:j + 16])
        out.append(f"    {chunk}" + ("," if j + 16 < len(data) else ""))
    out += ["}};", ""]
    return out


def _load(ex: CExport) -> list[str]:
    p, L = ex.prefix, _LOCAL
    out = [f"CUresult {p}_load(void)", "{", "    CUresult tile_err;", "    CUdevice tile_dev;",
           f"    if ({L}{p}_loaded)", "        return CUDA_SUCCESS;"]
    nv = len(ex.variants)
    for i in range(nv + len(ex.patterns)):
        out += [f"    tile_err = cuLibraryLoadData(&{L}{p}_libs[{i}], {L}{p}_image_{i}.bytes, "
                "NULL, NULL, 0, NULL, NULL, 0);",
                "    if (tile_err != CUDA_SUCCESS)", "        goto fail;"]
        handles = [(f"{L}{p}_kernels[{i}][{j}]", k.name)
                   for j, k in enumerate(ex.variants[i].kernels)] if i < nv else \
            [(f"{L}{p}_pkernels[{i - nv}]", ex.patterns[i - nv].kernel)]
        for handle, kname in handles:
            out += [f"    tile_err = cuLibraryGetKernel(&{handle}, "
                    f'{L}{p}_libs[{i}], "{kname}");',
                    "    if (tile_err != CUDA_SUCCESS)", "        goto fail;"]
    out += [f"    {L}{p}_loaded = 1;",
            "    if (cuCtxGetDevice(&tile_dev) == CUDA_SUCCESS) {",
            f"        tile_err = {p}_prepare_device(tile_dev);",
            "        if (tile_err != CUDA_SUCCESS)", "            goto fail;", "    }",
            "    return CUDA_SUCCESS;", "fail:", f"    {p}_unload();", "    return tile_err;",
            "}", ""]
    out += [f"CUresult {p}_prepare_device(CUdevice device)", "{"]
    sets = []
    kernels = [(f"{L}{p}_kernels[{i}][{j}]", k) for i, v in enumerate(ex.variants)
               for j, k in enumerate(v.kernels)] + \
        [(f"{L}{p}_pkernels[{j}]", pat.artifact) for j, pat in enumerate(ex.patterns)]
    for handle, k in kernels:
        if k.dynamic_smem > 0:
            sets.append((handle, "CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES",
                         k.dynamic_smem))
        if k.cluster and (k.nonportable_cluster or
                          k.cluster[0] * k.cluster[1] * k.cluster[2] > 8):
            sets.append((handle, "CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED", 1))
    if sets:
        out.append("    CUresult tile_err;")
    out += [f"    if (!{L}{p}_loaded)", "        return CUDA_ERROR_NOT_INITIALIZED;"]
    for handle, attr, value in sets:
        out += [f"    tile_err = cuKernelSetAttribute({attr}, {value}, "
                f"{handle}, device);",
                "    if (tile_err != CUDA_SUCCESS)", "        return tile_err;"]
    if not sets:
        out.append("    (void)device;")
    out += ["    return CUDA_SUCCESS;", "}", ""]
    out += [f"CUresult {p}_unload(void)", "{", "    CUresult tile_err = CUDA_SUCCESS, tile_e;",
            "    int tile_i;",
            f"    for (tile_i = 0; tile_i < {len(ex.variants) + len(ex.patterns)}; ++tile_i) {{",
            f"        if ({L}{p}_libs[tile_i] != NULL) {{",
            f"            tile_e = cuLibraryUnload({L}{p}_libs[tile_i]);",
            "            if (tile_err == CUDA_SUCCESS)", "                tile_err = tile_e;",
            f"            {L}{p}_libs[tile_i] = NULL;", "        }", "    }",
            f"    memset({L}{p}_kernels, 0, sizeof {L}{p}_kernels);"] + (
            [f"    memset({L}{p}_pkernels, 0, sizeof {L}{p}_pkernels);"] if ex.patterns
            else []) + [
            f"    {L}{p}_loaded = 0;", "    return tile_err;", "}", ""]
    return out


def _facts_helpers(p: str) -> list[str]:
    """The `fast` variant's facts of one array, as runtime/args.py's facts_key computes them:
    contiguous, aligned16, extent16, tensor_map and small."""
    L = _LOCAL
    return [
        "/* 1 when the array satisfies the fast variant's facts (docs/abi.md, \"Specialization",
        " * facts\"), tested as the Python runtime tests them. */",
        f"static int {L}{p}_fast(CUdeviceptr ptr, const int64_t *shape, const int64_t "
        "*strides, int rank, int64_t size)",
        "{",
        "    int64_t tile_span = 0;",
        "    int tile_i, tile_empty = 0;",
        "    if (ptr % 16 != 0)",
        "        return 0;                                 /* aligned16: the address */",
        "    if (rank == 0)",
        "        return 1;",
        "    if (!(strides[rank - 1] == 1 || shape[rank - 1] <= 1))",
        "        return 0;                                 /* contiguous */",
        "    if (((uint64_t)shape[rank - 1] * (uint64_t)size) % 16 != 0)",
        "        return 0;                                 /* extent16 */",
        "    for (tile_i = 0; tile_i < rank; ++tile_i) {",
        "        int64_t tile_n = shape[tile_i], tile_s = strides[tile_i];",
        "        if (tile_n == 0)",
        "            tile_empty = 1;",
        "        if (tile_n >= ((int64_t)1 << 32))",
        "            return 0;                             /* tensor_map: extents */",
        "        if (tile_n <= 1)",
        "            continue;",
        "        if (tile_i < rank - 1 && ((uint64_t)tile_s * (uint64_t)size) % 16 != 0)",
        "            return 0;                             /* aligned16: the other strides */",
        "        if (tile_s <= 0 || tile_s >= ((int64_t)1 << 40) / size)",
        "            return 0;                             /* tensor_map: byte strides */",
        "    }",
        "    if (tile_empty)",
        "        return 1;                                 /* small: nothing is reached */",
        "    for (tile_i = 0; tile_i < rank; ++tile_i) {",
        "        int64_t tile_n = shape[tile_i], tile_s = strides[tile_i];",
        "        if (tile_n >= ((int64_t)1 << 31))",
        "            return 0;                             /* small: extents */",
        "        if (tile_n <= 1)",
        "            continue;",
        "        if (tile_s >= ((int64_t)1 << 31))",
        "            return 0;                             /* small: the span */",
        "        tile_span += (tile_n - 1) * tile_s;",
        "        if (tile_span >= ((int64_t)1 << 31))",
        "            return 0;",
        "    }",
        "    return 1;",
        "}",
        ""]


def _kernel_layout(k: KernelArtifact) -> ParamLayout:
    base = layout(tuple(ParamInfo(p.name, p.kind, p.dtype.name, p.rank) for p in k.params))
    return layout_with_maps(base, len(k.tensor_maps)) if k.tensor_maps else base


def _variant_launcher(ex: CExport, names, fn_name: str, fn: str, k: KernelArtifact,
                      absent: tuple[str, ...]) -> list[str]:
    """One image's launcher: packs the buffer and launches `fn`. The slots of an `absent`
    optional array stay zero, as the runtime packs None (docs/abi.md)."""
    lay = _kernel_layout(k)
    align = "CUtensorMap" if k.tensor_maps else "uint64_t"
    size = max(lay.size, 8)
    out = [f"static CUresult {fn_name}(" + _c_params(k, names)[0] + ","]
    out += _wrap(_c_params(k, names)[1:], "        ", ")")
    out += ["{", f"    union {{ unsigned char bytes[{size}]; {align} align; }} tile_buf;",
            f"    size_t tile_size = {lay.size};",
            "    void *tile_extra[5];"]
    for q in k.params:
        if q.name in absent:
            out.append(f"    (void){names[q.name][0]};" + "".join(
                f" (void){n};" for n in names[q.name][1:]))
    if k.cluster:
        out += ["    CUlaunchConfig tile_cfg;", "    CUlaunchAttribute tile_attr;"]
    out += ["    memset(&tile_buf, 0, sizeof tile_buf);"]
    slot = 0
    for q in k.params:
        n = names[q.name]
        if q.name in absent:
            slot += 1 + 2 * q.rank
            continue
        if q.kind == "array":
            out.append(f"    {{ uint64_t tile_a = (uint64_t){n[0]}; "
                       f"memcpy(tile_buf.bytes + {lay.offsets[slot]}, &tile_a, 8); }}")
            slot += 1
            for which in (1, 2):
                for i in range(q.rank):
                    out.append(f"    memcpy(tile_buf.bytes + {lay.offsets[slot]}, "
                               f"&{n[which]}[{i}], 8);")
                    slot += 1
        elif q.dtype.name == "bool":
            out.append(f"    {{ uint8_t tile_b = {n[0]} ? 1 : 0; "
                       f"memcpy(tile_buf.bytes + {lay.offsets[slot]}, &tile_b, 1); }}")
            slot += 1
        else:
            out.append(f"    memcpy(tile_buf.bytes + {lay.offsets[slot]}, &{n[0]}, "
                       f"{lay.sizes[slot]});")
            slot += 1
    for spec in k.tensor_maps:
        q = next(x for x in k.params if x.name == spec.array)
        out += _tensor_map(spec, q, names[q.name], lay.offsets[slot])
        slot += 1
    out += ["    tile_extra[0] = CU_LAUNCH_PARAM_BUFFER_POINTER;",
            "    tile_extra[1] = tile_buf.bytes;",
            "    tile_extra[2] = CU_LAUNCH_PARAM_BUFFER_SIZE;",
            "    tile_extra[3] = &tile_size;",
            "    tile_extra[4] = CU_LAUNCH_PARAM_END;"]
    b = k.block
    if not k.cluster:
        out.append(f"    return cuLaunchKernel({fn}, grid_x, grid_y, grid_z, {b[0]}, {b[1]}, "
                   f"{b[2]}, {k.dynamic_smem}, stream, NULL, tile_extra);")
    else:
        c = k.cluster
        out += ["    memset(&tile_cfg, 0, sizeof tile_cfg);",
                "    memset(&tile_attr, 0, sizeof tile_attr);",
                "    tile_cfg.gridDimX = grid_x;", "    tile_cfg.gridDimY = grid_y;",
                "    tile_cfg.gridDimZ = grid_z;",
                f"    tile_cfg.blockDimX = {b[0]};", f"    tile_cfg.blockDimY = {b[1]};",
                f"    tile_cfg.blockDimZ = {b[2]};",
                f"    tile_cfg.sharedMemBytes = {k.dynamic_smem};",
                "    tile_cfg.hStream = stream;",
                "    tile_attr.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;",
                f"    tile_attr.value.clusterDim.x = {c[0]};",
                f"    tile_attr.value.clusterDim.y = {c[1]};",
                f"    tile_attr.value.clusterDim.z = {c[2]};",
                "    tile_cfg.attrs = &tile_attr;", "    tile_cfg.numAttrs = 1;",
                f"    return cuLaunchKernelEx(&tile_cfg, {fn}, NULL, tile_extra);"]
    out += ["}", ""]
    return out


def _tensor_map(spec, q: AbiParam, n: tuple[str, ...], offset: int) -> list[str]:
    """cuTensorMapEncodeTiled's arguments as runtime/tensormap.py's map_args computes them:
    dimensions innermost first (an empty axis described as one element), byte strides of
    dimensions 1.. (an axis of extent 1 takes the packed stride), element strides 1."""
    r = q.rank
    dtype = str(spec.dtype.name)
    size = ITEMSIZE[dtype]
    box = ", ".join(str(b) for b in spec.box)
    ones = ", ".join("1" for _ in range(r))
    shape, strides = n[1], n[2]
    out = ["    {",
           "        CUtensorMap tile_map;",
           f"        cuuint64_t tile_dims[{r}], tile_gstrides[{max(r - 1, 1)}];",
           f"        cuuint32_t tile_box[{r}] = {{{box}}}, tile_es[{r}] = {{{ones}}};",
           "        CUresult tile_e;"]
    if r > 1:
        out += [f"        int64_t tile_sb, tile_inner = {shape}[{r - 1}] > 1 ? "
                f"{shape}[{r - 1}] * {size} : {size};"]
    else:
        out += ["        tile_gstrides[0] = 0;"]
    for j in range(r):
        a = r - 1 - j
        out.append(f"        tile_dims[{j}] = (cuuint64_t)({shape}[{a}] > 1 ? {shape}[{a}] : 1);")
    for j in range(r - 1):
        a = r - 2 - j
        out += [f"        tile_sb = {shape}[{a}] > 1 ? {strides}[{a}] * {size} : "
                "(tile_inner + 15) / 16 * 16;",
                "        if (tile_sb <= 0 || tile_sb % 16 != 0 || tile_sb >= ((int64_t)1 << 40))",
                "            return CUDA_ERROR_INVALID_VALUE;",
                f"        tile_gstrides[{j}] = (cuuint64_t)tile_sb;"]
        if j < r - 2:
            out.append(f"        tile_inner = tile_sb * ({shape}[{a}] > 1 ? {shape}[{a}] : 1);")
    out += [f"        if ({n[0]} % 16 != 0)",
            "            return CUDA_ERROR_INVALID_VALUE;",
            f"        tile_e = cuTensorMapEncodeTiled(&tile_map, CU_TENSOR_MAP_DATA_TYPE_"
            f"{_MAP_TYPES[DATA_TYPES[dtype]]}, {r}, (void *)(uintptr_t){n[0]}, tile_dims, "
            "tile_gstrides, tile_box, tile_es, CU_TENSOR_MAP_INTERLEAVE_NONE, "
            f"CU_TENSOR_MAP_SWIZZLE_{_SWIZZLES[SWIZZLE_CODES[int(spec.swizzle)]]}, "
            "CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);",
            "        if (tile_e != CUDA_SUCCESS)", "            return tile_e;",
            f"        memcpy(tile_buf.bytes + {offset}, &tile_map, sizeof tile_map);",
            "    }"]
    return out


def _dispatcher(ex: CExport, names, ki: int, k: KernelArtifact) -> list[str]:
    p, L = ex.prefix, _LOCAL
    params = _c_params(k, names)
    out = [f"CUresult {p}_launch_{k.name}(" + params[0] + ","]
    out += _wrap(params[1:], "        ", ")")
    out += ["{", f"    if (!{L}{p}_loaded)", "        return CUDA_ERROR_NOT_INITIALIZED;"]
    arrays = [q for q in k.params if q.kind == "array"]
    opt = ex.optional_of(k.name)
    for q in arrays:
        n = names[q.name]
        given = f"{n[0]} != 0 && " if q.name in opt else ""
        for i in range(q.rank):
            out += [f"    if ({given}{n[1]}[{i}] < 0)",
                    "        return CUDA_ERROR_INVALID_VALUE;"]
    out += ["    if (grid_x == 0 || grid_y == 0 || grid_z == 0)",
            "        return CUDA_SUCCESS;"]
    tests = []
    for q in arrays:
        n = names[q.name]
        shape, strides = (n[1], n[2]) if q.rank else ("NULL", "NULL")
        test = f"{L}{p}_fast({n[0]}, {shape}, {strides}, {q.rank}, {ITEMSIZE[q.dtype.name]})"
        tests.append(f"({n[0]} == 0 || {test})" if q.name in opt else test)
    cond = " &&\n            ".join(tests) if tests else "1"
    args = _args(k, names)
    if opt:      # which optional arrays are None (pointer 0) picks the image
        out.insert(1 + out.index("{"), "    int tile_fast, tile_mask = 0;")
        out += [f"    if ({names[o][0]} == 0)\n        tile_mask |= {1 << j};"
                for j, o in enumerate(opt)]
        out += [f"    tile_fast = {cond};"]
        for pat in ex.patterns:
            if pat.kernel == k.name:
                out += [f"    if (tile_mask == {pat.mask} && tile_fast == {1 - pat.variant})",
                        f"        return {_pattern_fn(p, pat)}({args});"]
        cond = "tile_fast"
    out += [f"    if ({cond})", f"        return {L}{p}_v0_{k.name}({args});",
            f"    return {L}{p}_v1_{k.name}({args});", "}", ""]
    return out
