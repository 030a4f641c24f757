"""What code generation hands to the rest of the pipeline: the kernel ABI (docs/abi.md), the
per-array facts a kernel is specialized on, and the result of `generate`.

These types are shared by codegen (which produces them), the driver (which caches them) and the
runtime (which packs arguments and launches by them). They are plain frozen data, so a compiled
kernel can be stored on disk as JSON and rebuilt without importing the compiler; records
(tilelang/record.py), not dataclasses, which cost ~1 ms each to create on every cold compile.
"""

from __future__ import annotations

from typing import Any, Mapping

from tilelang.diagnostics import Diagnostic
from tilelang.record import field, record
from tilelang.sema.types import DTYPES, DType

Dims = tuple[int, int, int]


@record(frozen=True)
class ArrayFacts:
    """What a kernel specialization assumes about one `Array` argument (part of the kernel
    key). The runtime computes them from the argument and picks or builds the matching
    specialization; a kernel compiled with a fact set must only be launched with arrays that
    satisfy it."""

    contiguous: bool = True   # the last stride is 1 (element units)
    aligned16: bool = True    # the base address and every stride but the last, in bytes, are
    #                           multiples of 16
    extent16: bool = True     # the last axis's extent, in bytes, is a multiple of 16: with
    #                           `contiguous`, a 16-byte chunk that starts at a multiple of 16
    #                           bytes along that axis lies wholly inside or wholly outside
    small: bool = False       # every element's offset from the address, in elements, lies
    #                           in [-2^31, 2^31) and every extent is below 2^31: offsets are
    #                           computed in 32 bits and widened once, and a row's bounds
    #                           test (an extent-1 tile axis starting at an i32) is 32-bit.
    #                           Not assumed without an argument to look at
    tensor_map: bool = True   # a tensor map (TMA) can describe the array: every stride over
    #                           an extent above 1 is positive (a reversed view or a broadcast
    #                           axis has none), every extent below 2^32, every stride below
    #                           2^40 bytes. With `contiguous` and `aligned16`, what TMA needs
    same_shape: int = -1      # >= 0: the shape equals that of array parameter number
    #                           `same_shape` (counting array parameters only), the first
    #                           earlier one with an equal shape; its extents are used in
    #                           place of this array's, so their bounds tests are shared

    def key(self) -> str:
        """Three characters `c`/`-`, `a`/`-`, `e`/`-`, then `s` when `small` holds, then `n`
        when `tensor_map` does not (so the keys of ordinary arrays are unchanged), then
        `=k` when the shape equals that of array parameter k."""
        return ("c" if self.contiguous else "-") + ("a" if self.aligned16 else "-") + \
            ("e" if self.extent16 else "-") + ("s" if self.small else "") + \
            ("" if self.tensor_map else "n") + \
            (f"={self.same_shape}" if self.same_shape >= 0 else "")

    @staticmethod
    def from_key(text: str) -> "ArrayFacts":
        """The facts of a key; a two-character key (before `extent16` existed) claims no
        extent16, one without `s` no `small`, one without `n` a `tensor_map`, one without
        `=k` no shape equality."""
        text, eq, k = text.partition("=")
        return ArrayFacts(contiguous=text[0] == "c", aligned16=text[1] == "a",
                          extent16=text[2:3] == "e", small="s" in text[3:],
                          tensor_map="n" not in text[3:], same_shape=int(k) if eq else -1)


GENERIC = ArrayFacts(contiguous=False, aligned16=False, extent16=False)
DEFAULT_FACTS = ArrayFacts()


@record(frozen=True)
class AbiParam:
    """One source-level kernel parameter as the ABI passes it (const parameters have none).

    An array expands to 1 + 2 * rank PTX parameters: `.u64` global address, then `rank` `.s64`
    extents, then `rank` `.s64` strides in elements. A scalar is one parameter of its exact
    width (bool as one byte holding 0 or 1; f16/bf16 as 16 bits; f8 as 8 bits; tf32 as 32)."""

    name: str
    kind: str                 # "array" | "scalar" | "list" (`List[Array[dtype, rank]]`) |
                              # "symmetric" (`Symmetric[Array[dtype, rank]]`) | "nvshmem"
                              # (a symmetric array under the NVSHMEM lowering: an array's
                              # parameters, its address in the NVSHMEM symmetric heap)
    dtype: DType
    rank: int = 0
    # arrays and lists: the kernel may store into it (store, scatter, atomics). The runtime refuses
    # read-only and broadcast (zero-stride) arrays here, whose writes would be lost or racy.
    written: bool = True
    # a symmetric array that multimem_* reach: its multicast address follows (`<name>_mc`)
    multicast: bool = False

    def ptx_params(self) -> tuple[tuple[str, str], ...]:
        """(PTX parameter name suffix, NumPy dtype name) for each PTX parameter, in order."""
        if self.kind == "list":              # docs/abi.md, "Lists of arrays"
            return ((f"{self.name}", "uint64"), (f"{self.name}_len", "int64"))
        if self.kind == "symmetric":         # docs/distributed.md, "ABI"
            return ((f"{self.name}", "uint64"), (f"{self.name}_len", "int64"),
                    (f"{self.name}_rank", "int64")) + \
                (((f"{self.name}_mc", "uint64"),) if self.multicast else ())
        if self.kind in ("array", "nvshmem"):
            return ((f"{self.name}", "uint64"),
                    *((f"{self.name}_shape{i}", "int64") for i in range(self.rank)),
                    *((f"{self.name}_stride{i}", "int64") for i in range(self.rank)))
        return ((self.name, scalar_storage(self.dtype)),)

    def to_json(self) -> dict:
        d = {"name": self.name, "kind": self.kind, "dtype": self.dtype.name,
             "rank": self.rank, "written": self.written}
        if self.multicast:
            d["multicast"] = True
        return d

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> "AbiParam":
        return AbiParam(d["name"], d["kind"], DTYPES[d["dtype"]], int(d["rank"]),
                        bool(d.get("written", True)), bool(d.get("multicast", False)))


def scalar_storage(dtype: DType) -> str:
    """The NumPy dtype name a scalar argument is packed as (its exact width)."""
    n = dtype.name
    if n == "bool":
        return "uint8"
    if n in ("f16",):
        return "float16"
    if n in ("bf16",):
        return "uint16"         # raw bits; the runtime converts
    if n in ("f8e4m3", "f8e5m2", "f4e2m1", "f6e2m3", "f6e3m2", "ue8m0", "f4e2m1x2"):
        return "uint8"          # raw bits (one code per byte; packed FP4: two)
    if n == "tf32":
        return "float32"
    return {"i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64", "u8": "uint8",
            "u16": "uint16", "u32": "uint32", "u64": "uint64", "f32": "float32",
            "f64": "float64"}[n]


@record(frozen=True)
class TensorMapSpec:
    """A TMA tensor map the kernel takes as a 128-byte `__grid_constant__` parameter
    (docs/abi.md): it describes array parameter `array` with the box `box` (elements,
    innermost dimension first, as cuTensorMapEncodeTiled takes them) and a `swizzle`-byte
    swizzle (0, 32, 64 or 128); the runtime fills in the address, extents and strides of each
    launch's argument."""

    array: str
    dtype: DType
    box: tuple[int, ...]
    swizzle: int

    def to_json(self) -> dict:
        return {"array": self.array, "dtype": self.dtype.name, "box": list(self.box),
                "swizzle": self.swizzle}

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> "TensorMapSpec":
        return TensorMapSpec(d["array"], DTYPES[d["dtype"]], tuple(int(b) for b in d["box"]),
                             int(d["swizzle"]))


@record(frozen=True)
class KernelArtifact:
    """One compiled kernel of a PTX module: how to launch it."""

    name: str                                # the `.entry` name in the PTX / cubin
    params: tuple[AbiParam, ...]             # in source order, const parameters left out
    block: Dims                              # the block shape the runtime launches with
    attrs: Any                               # contract.NvvmAttrs (reqntid/maxntid, cluster...)
    cluster: Dims | None = None              # cluster shape to launch with (SM90+), if any
    static_smem: int = 0                     # bytes of `.shared` the kernel declares
    dynamic_smem: int = 0                    # bytes of dynamic shared memory to launch with
    facts: Mapping[str, ArrayFacts] = field(default_factory=dict)
    nonportable_cluster: bool = False
    tensor_maps: tuple[TensorMapSpec, ...] = ()  # appended after the source parameters
    # `attrs.maxnreg` is the launch contract's default, not the user's: the link may drop it
    # (codegen/target/register_fit.py)
    default_maxnreg: bool = False


@record(frozen=True)
class CodegenResult:
    target: str
    opt_level: int
    llvm_ir: str                             # the module as generated (before LLVM's passes)
    ptx: str                                 # final PTX, our header and directive blocks
    kernels: tuple[KernelArtifact, ...]
    diagnostics: tuple[Diagnostic, ...] = ()  # notes and warnings (E0720, E0721, E0722...)
    # seconds per stage for benchmarks/compile_bench.py: "llvm" (building the LLVM IR) and
    # "ptx" (LLVM's optimization and NVPTX code generation), when codegen measures them
    timings: Mapping[str, float] = field(default_factory=dict)

    def kernel(self, name: str) -> KernelArtifact:
        for k in self.kernels:
            if k.name == name:
                return k
        raise KeyError(name)
