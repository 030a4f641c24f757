"""Code generation entry point: Tile IR module -> PTX with the launch contract.

    result = generate(module, options=CompileOptions(target="sm_90a"), facts=None)

Per kernel: choose the thread shape (the user's reqntid/maxntid, else 128 threads), emit the
LLVM function (emit/kernel.py / walk.py and the `lower/` families) first in
virtual-thread mode and, if an op needs threads to talk to each other, again in exact mode;
decide the launch contract from what the code relies on (`.reqntid` for exact mode,
`.maxntid` otherwise); then LLVM optimizes and emits PTX, and ptx_header writes the header and
the directive blocks. docs/codegen.md describes the layouts and each lowering.
"""

from __future__ import annotations

import time
from math import prod
from typing import Mapping

import llvmlite.ir as ir

# Importing a family registers its lowerings in lower.table (the products' on first use).
from tilelang.codegen.lower import array_list, atomic, combine, creation, debug  # noqa: F401
from tilelang.codegen.lower import distributed  # noqa: F401
from tilelang.codegen.lower import elementwise, grid, index, multimem  # noqa: F401
from tilelang.codegen.lower import memory, random, rearrange, reduce, scan, shape  # noqa: F401
from tilelang.codegen.lower import sort  # noqa: F401
from tilelang.codegen.api import (AbiParam, ArrayFacts, CodegenResult, DEFAULT_FACTS,
                                  KernelArtifact)
from tilelang.codegen.layouts.distributed import floor_pow2
from tilelang.codegen.occupancy import ARCH_LIMITS
from tilelang.codegen.contract import CodegenFeatures, KernelContract, decide_contract
from tilelang.codegen.target.compile import TRIPLE, compile_modules, data_layout
from tilelang.codegen.walk import emit_kernel_body
from tilelang.codegen.emit.kernel import (KernelEmitter, KernelStats, NeedsExactThreads,
                                          kernel_precision)
from tilelang.codegen.lower.table import lookup
from tilelang.codegen.plan.inputs import PlanInputs
from tilelang.codegen.plan.distributed import peer_accesses, plan_distributed
from tilelang.codegen.plan.kernel_plan import KernelPlan, plan_kernel
from tilelang.codegen.emit.map_params import MapParams
from tilelang.codegen.target.ptx_header import plan_module, rewrite_ptx
from tilelang.diagnostics import DiagnosticSink, TileUsageError, register_codes
from tilelang.ir.ops import BuiltinOp, IRModule, Kernel, walk
from tilelang.ir.resources import check_registers, check_shared_memory
from tilelang.sema.launch_attrs import LaunchSpec
from tilelang.sema.launch_verify import DEFAULT_THREADS
from tilelang.sema.types import ArrayListType, ArrayType, SymmetricArrayType, TileType
from tilelang.options import CompileOptions
from tilelang.targets import Target

register_codes({"W0766": "under the NVSHMEM lowering, loads and stores through `peer` reach "
                          "NVLink peers only",
                "E0782": "code generation option out of range",
                "E0783": "a tile needs more elements per thread than code generation allows",
                "E0784": "a kernel has more element operations per thread than code generation "
                         "allows"})

# Every element a thread holds is its own SSA value (tiles are fully unrolled), so a tile's
# elements per thread drive both the registers (255 at most) and LLVM's time, which grows
# faster than linearly with the size of the straight-line code: at 128 elements per thread the
# examples and fuzzed kernels take at most ~7 s of CPU to a cubin, at 256 a softmax takes 10 s,
# at 8192 (a 2^20-element tile) minutes and gigabytes. Refuse before emitting anything. The
# matmul example's 128 x 128 f32 accumulator over 128 threads is exactly 128 per thread.
MAX_ELEMENTS_PER_THREAD = 128
# The same over the whole kernel (every op's elements per thread, after `static for` unrolling
# and inlining; a run-time loop's body counts once): 2^15 simple f32 operations take ~6 s.
MAX_ELEMENT_OPS_PER_THREAD = 1 << 15


def launch_spec(kernel: Kernel) -> LaunchSpec:
    """The kernel's LaunchSpec: the one the frontend resolved, else its IR attributes."""
    if kernel.launch is not None:
        return kernel.launch
    a = kernel.attributes
    return LaunchSpec(maxntid=a.get("maxntid"), reqntid=a.get("reqntid"),
                      minctasm=a.get("minctasm"), maxnreg=a.get("maxnreg"),
                      cluster=a.get("cluster_dim") or a.get("cluster"),
                      maxclusterrank=a.get("maxclusterrank"),
                      blocksareclusters=bool(a.get("blocksareclusters", False)))


def block_shape(spec: LaunchSpec) -> tuple[int, int, int]:
    dims = spec.reqntid or spec.maxntid or DEFAULT_THREADS
    return tuple(dims) + (1,) * (3 - len(dims))  # type: ignore[return-value]


def written_arrays(kernel: Kernel) -> set:
    """The array parameters the kernel may write: the `A` of a store, scatter or atomic, and
    (conservatively) any array that flows into control flow or another op's operands."""
    from tilelang.ir.args import arg_values
    from tilelang.ir.ops import BuiltinOp, walk
    out = set()
    items = {}                 # `ws[e]` (list_item) result -> the list it is read from
    for op in walk(kernel.body):
        if isinstance(op, BuiltinOp):
            b = op.builtin
            if b.name == "list_item":
                items[op.result] = dict(op.args)["L"]
            elif b.name == "peer":                 # a symmetric array's peer buffer
                items[op.result] = dict(op.args)["x"]
            if b.side_effects and b.group == "memory":
                out.update(arg_values(dict(op.args).get("A")))
            if b.name == "multimem_store":         # every rank's buffer of x
                out.update(arg_values(dict(op.args).get("x")))
        else:
            out.update(v for v in getattr(op, "operands", ()) if isinstance(v.type, ArrayType))
    # a write through an entry of a list writes the list's arrays
    out.update(items[v] for v in list(out) if v in items)
    return out


def check_elements_per_thread(kernel: Kernel, block, fused: Mapping | None = None) -> None:
    """E0783 for the first value whose tile gives a thread more than MAX_ELEMENTS_PER_THREAD
    elements (layouts spread a tile over the largest power of two of threads in the block),
    except the values in `fused` (plan/fusion.py: computed one register at a time by their
    consumer, never held); E0784 when all values together give it more than
    MAX_ELEMENT_OPS_PER_THREAD."""
    threads = floor_pow2(prod(block))
    fused = fused or {}
    total = 0
    for op in walk(kernel.body):
        for v in op.results:
            t = v.type
            if not (isinstance(t, TileType) and t.shape):
                total += 1
                continue
            per_thread = -(-prod(t.shape) // threads)
            total += per_thread
            if per_thread > MAX_ELEMENTS_PER_THREAD and v.id not in fused:
                what = f"`{op.name}`" if isinstance(op, BuiltinOp) else "this value"
                raise TileUsageError.at(
                    "E0783", f"{what} makes a {t}: {per_thread} elements for each of the "
                             f"{threads} threads of kernel `{kernel.name}`, more than the "
                             f"{MAX_ELEMENTS_PER_THREAD} a thread can hold",
                    op.span or kernel.span,
                    help="use smaller tiles (and more blocks in the grid), or more threads "
                         "(`@launch(maxntid = ...)`, up to 1024)")
    if total > MAX_ELEMENT_OPS_PER_THREAD:
        raise TileUsageError.at(
            "E0784", f"kernel `{kernel.name}` computes {total} tile elements per thread in all "
                     f"(every operation, `static for` unrolled and calls inlined), more than "
                     f"the {MAX_ELEMENT_OPS_PER_THREAD} code generation takes",
            kernel.span, help="unroll less (a run-time `for` loop is emitted once), or use "
                              "smaller tiles or more threads")


def abi_params(kernel: Kernel, distributed: str = "peers") -> tuple[AbiParam, ...]:
    multicast = plan_distributed(kernel, distributed).multicast if distributed == "peers" \
        else ()
    out = []
    written = written_arrays(kernel)
    for p in kernel.params:
        t = p.type
        if isinstance(t, ArrayType):
            out.append(AbiParam(p.hint, "array", t.dtype, t.rank, p in written))
        elif isinstance(t, ArrayListType):
            kind = "list"
            if isinstance(t, SymmetricArrayType):
                # docs/distributed.md, "ABI": a table per array, or under NVSHMEM one address
                kind = "nvshmem" if distributed == "nvshmem" else "symmetric"
            out.append(AbiParam(p.hint, kind, t.array.dtype, t.array.rank, p in written,
                                multicast=p.hint in multicast))
        else:
            out.append(AbiParam(p.hint, "scalar", t.dtype))
    return tuple(out)


def _warn_nvlink_only(kernel: Kernel, sink: DiagnosticSink) -> None:
    """W0766 once per kernel: loads and stores through `peer` under NVSHMEM reach NVLink
    peers only (docs/distributed.md, "The NVSHMEM lowering")."""
    ops = peer_accesses(kernel)
    if ops:
        sink.warn("W0766", f"kernel `{kernel.name}` loads or stores another PE's buffer through "
                  f"`peer` ({len(ops)} place{'s' if len(ops) != 1 else ''}): under NVSHMEM "
                  f"that reaches PEs of this node's NVLink domain only (nvshmem_ptr), and the "
                  f"kernel traps on a PE of another node", ops[0].span,
                  help="signal, wait_until and barrier reach any PE; another node's buffers "
                       "need NVSHMEM puts and gets, which Tile does not generate yet")


def _new_module(name: str, target: Target) -> ir.Module:
    # its own context: a named type (lower/tensorcore/wgmma_ops.py) is declared only where it is used
    m = ir.Module(name, context=ir.Context())
    m.triple = TRIPLE
    return m


def _lowering_module(name: str, group: str) -> str | None:
    """The module of the lowering `name` (registry group `group`) dispatches to."""
    return getattr(lookup(name, group), "__module__", None)


def plan_for(kernel: Kernel, target: Target, block, facts: Mapping[str, ArrayFacts], *,
             exact: bool, fast_math: bool | str = False, tma: bool = False,
             distributed: str = "peers") -> KernelPlan:
    """The kernel's plan (codegen/plan/) for one thread mode: what the lowerings will read."""
    return plan_kernel(PlanInputs(kernel, target, block, exact=exact, facts=facts, tma=tma,
                                  precision=kernel_precision(kernel, fast_math),
                                  lowered_by=_lowering_module, distributed=distributed))


def emit_kernel(kernel: Kernel, target: Target, block, facts: Mapping[str, ArrayFacts],
                *, exact: bool, layout: str, fast_math: bool = False, tma: bool = False,
                lineinfo: bool = False,
                distributed: str = "peers") -> tuple[ir.Module, KernelStats, bool]:
    """(module holding the kernel, what it used, whether it runs in exact mode). With `tma`,
    the TMA tensor maps that loads and stores ask for become parameters as they are asked for
    (emit/map_params.py); the kernel's `stats.tensor_maps` is then their order."""
    m, kern = _emit(kernel, target, block, facts, exact=exact, layout=layout,
                    fast_math=fast_math, tma=tma, lineinfo=lineinfo, distributed=distributed)
    return m, kern.stats, kern.exact


def _emit(kernel: Kernel, target: Target, block, facts: Mapping[str, ArrayFacts], *,
          exact: bool, layout: str, fast_math: bool | str = False, tma: bool = False,
          lineinfo: bool = False, distributed: str = "peers") -> tuple[ir.Module, KernelEmitter]:
    """emit_kernel's work: (the module, the emitter that filled it, with its plan)."""
    for mode in ((True,) if exact else (False, True)):
        m = _new_module(kernel.name, target)
        m.data_layout = layout
        plan = plan_for(kernel, target, block, facts, exact=mode, fast_math=fast_math, tma=tma,
                        distributed=distributed)
        kern = KernelEmitter(m, kernel, target, block=block, exact=mode, facts=facts,
                             fast_math=fast_math, tma=tma, lineinfo=lineinfo, plan=plan)
        kern.stats.wgmma_declined = plan.products.wgmma_declined
        kern.stats.tmem_columns = plan.products.tmem_columns
        kern.stats.tc5_pair = plan.loops.tc5_pair
        kern.stats.tc5_declined = bool(plan.products.tc5_declined)
        if tma:
            kern.tensor_maps = MapParams(m, kern.fn)
        try:
            emit_kernel_body(kern)
        except NeedsExactThreads:
            continue
        if tma:
            kern.stats.tensor_maps = list(kern.tensor_maps)
        return m, kern
    raise AssertionError("exact mode cannot need exact mode")


def check_limits(kernel: Kernel, spec: LaunchSpec, target: Target,
                 facts: Mapping[str, ArrayFacts], *, fast_math: bool | str = False,
                 tma: bool = False, sink: DiagnosticSink | None = None) -> None:
    """The per-thread limits (E0783, E0784; with `sink`, W0787/E0787) on what is live after
    fusion: the plan of the thread mode emission starts in decides which values the consumers
    compute piecewise (an exact-mode plan, if emission falls back to it, fuses at least as
    much: only streams, which exact mode has fewer of, keep a reduction from fusing)."""
    block = block_shape(spec)
    plan = plan_for(kernel, target, block, facts, exact=spec.reqntid is not None,
                    fast_math=fast_math, tma=tma)
    check_elements_per_thread(kernel, block, plan.fusion.fused)
    if sink is not None:
        check_registers(kernel, block, spec.maxnreg, sink, plan.fusion.piecewise(),
                        plan.loops.tmem_values)


def _software_paths(module: IRModule, target: Target, why: dict | None = None) -> IRModule:
    """Ops the target has no instruction for, rewritten into ordinary ops first: block-scaled
    products without a block-scaled tensor-core form (plan/scaled.py S1-S3) dequantize into a
    bf16 product (ir/passes/scaled.py); `unpack_f4` becomes integer and f32 ops
    (ir/passes/packed_f4.py). `why`, if given, gets (kernel name, result id) ->
    the ScaledPath of each product rewritten (the bf16 `mma` keeps the result's id)."""
    from tilelang.codegen.plan.scaled import scaled_path
    from tilelang.ir.passes.packed_f4 import expand_unpack_f4
    from tilelang.ir.passes.scaled import expand_scaled_products, fresh_ids
    from tilelang.record import replace

    def expanded(k):
        threads = prod(block_shape(launch_spec(k)))

        def keep(op):
            m = op.arg_map
            path = scaled_path(target, m["a"].type, m["a_scale"].type, m["b"].type,
                               op.result.type, threads)
            if why is not None and path.form is None:
                why[(k.name, op.result.id)] = path
            return path.form is not None
        k = expand_scaled_products(k, keep)
        return expand_unpack_f4(k, fresh_ids(k))
    kernels = tuple(expanded(k) for k in module.kernels)
    if all(new is old for new, old in zip(kernels, module.kernels)):
        return module
    return replace(module, kernels=kernels)


def _with_software_paths(plan: KernelPlan, kernel: str, why: dict) -> KernelPlan:
    """`plan` with its products' software-path reasons (`_software_paths`) for the dump."""
    from tilelang.record import replace
    ds = tuple(replace(d, scaled=why[(kernel, d.result)]) if (kernel, d.result) in why else d
               for d in plan.products.decisions)
    if not why:
        return plan
    products = replace(plan.products, decisions=ds, by_result={d.result: d for d in ds})
    return replace(plan, products=products)


def kernel_plans(module: IRModule, options: CompileOptions | None = None,
                 facts: Mapping[str, Mapping[str, ArrayFacts]] | None = None, *,
                 tma: bool = True) -> list[tuple[Kernel, KernelPlan]]:
    """Each kernel's plan as `generate` would use it (`tilec --emit plan`): the plan of the
    thread mode its emission ends in, which needs the kernel emitted (no LLVM runs)."""
    options = options if options is not None else CompileOptions()
    tgt = options.target
    facts = facts or {}
    layout = data_layout(tgt.llvm_cpu, tgt.llvm_features(tgt.min_ptx))
    out = []
    software: dict = {}
    for k in _software_paths(module, tgt, software).kernels:
        spec = launch_spec(k)
        block = block_shape(spec)
        kfacts = {p.hint: facts.get(k.name, {}).get(p.hint, DEFAULT_FACTS)
                  for p in k.params if isinstance(p.type, (ArrayType, ArrayListType))}
        check_limits(k, spec, tgt, kfacts, fast_math=options.precision or False, tma=tma)
        _, kern = _emit(k, tgt, block, kfacts, exact=spec.reqntid is not None, layout=layout,
                        fast_math=options.precision or False, tma=tma,
                        distributed=options.distributed)
        out.append((k, _with_software_paths(kern.plan, k.name, software)))
    return out


def generate(module: IRModule, options: CompileOptions | None = None,
             facts: Mapping[str, Mapping[str, ArrayFacts]] | None = None, *,
             fast_math: bool = False, tma: bool = True) -> CodegenResult:
    """PTX for the kernels of `module` as `options` ask (target, -O level, precision, line
    info); `facts` per kernel and array parameter. `fast_math` and `tma` are for tests."""
    t_start = time.perf_counter()
    options = options if options is not None else CompileOptions()
    tgt, opt_level, precision = options.target, options.opt_level, options.precision
    if opt_level not in (0, 1, 2, 3):
        raise TileUsageError.at("E0782", f"optimization level {opt_level} is not 0-3", None,
                                help="use -O0, -O1, -O2 or -O3")
    facts = facts or {}
    sink = DiagnosticSink()
    contracts: dict[str, KernelContract] = {}
    pending = []
    module = _software_paths(module, tgt)
    for k in module.kernels:
        spec = launch_spec(k)
        block = block_shape(spec)
        kfacts = {p.hint: facts.get(k.name, {}).get(p.hint, DEFAULT_FACTS)
                  for p in k.params if isinstance(p.type, (ArrayType, ArrayListType))}
        # E0783/E0784 and W0787/E0787 before emitting anything
        check_limits(k, spec, tgt, kfacts, fast_math=precision or fast_math, tma=tma, sink=sink)
        if options.distributed == "nvshmem":
            _warn_nvlink_only(k, sink)
        pending.append((k, spec, block, kfacts))
    # Contracts only need to know whether the code relies on the thread count; the PTX plan
    # (and so the LLVM cpu/features) needs the contracts: emit with a provisional layout
    # string, which does not depend on the features.
    texts, stats = [], {}
    for k, spec, block, kfacts in pending:
        layout = data_layout(tgt.llvm_cpu, tgt.llvm_features(tgt.min_ptx))
        m, st, exact = emit_kernel(k, tgt, block, kfacts, exact=spec.reqntid is not None,
                                   layout=layout, fast_math=precision or fast_math, tma=tma,
                                   lineinfo=options.lineinfo, distributed=options.distributed)
        feats = CodegenFeatures(cross_warp_reduction=exact and spec.reqntid is None,
                                threads=None if spec.reqntid else block,
                                wgmma="wgmma" in st.features or st.wgmma_declined,
                                accumulator_regs=st.wgmma_acc_regs,
                                tmem_columns=st.tmem_columns, tc5_pair=st.tc5_pair,
                                tc5_declined=st.tc5_declined)
        contracts[k.name] = decide_contract(k.name, spec, feats, tgt, kernel_span=k.span)
        for d in contracts[k.name].diagnostics:
            sink.add(d)
        check_shared_memory(k, st.smem_bytes, ARCH_LIMITS[tgt.name].smem_per_block)
        texts.append(str(m))
        stats[k.name] = st
    plan = plan_module(tgt, contracts, set().union(*(s.features for s in stats.values())))
    if not texts:
        raise TileUsageError.at("E0782", "the module has no kernels to compile", None)
    t_llvm = time.perf_counter()
    libraries = []
    if any(s.nvshmem for s in stats.values()):
        # NVSHMEM's device library, linked into the module (docs/distributed.md)
        from tilelang.codegen.emit.nvshmem import SIGNATURES
        from tilelang.codegen.target import nvshmem_bitcode
        libraries.append(nvshmem_bitcode.library(tgt.name, SIGNATURES))
    llvm_ir, ptx = compile_modules(texts, plan.llvm_cpu, plan.llvm_features, opt_level,
                                   libraries)
    ptx = rewrite_ptx(ptx, plan, contracts, sink)
    t_ptx = time.perf_counter()
    artifacts = []
    for k, spec, block, kfacts in pending:
        c = contracts[k.name]
        artifacts.append(KernelArtifact(
            name=k.name, params=abi_params(k, options.distributed), block=tuple(c.threads) + (1,) * (3 - len(c.threads)),
            # below SM90 the cluster group is dropped from the PTX (E0720): launch unclustered
            attrs=c.attrs, cluster=spec.cluster if tgt.clusters else None,
            static_smem=stats[k.name].smem_bytes - stats[k.name].dynamic_smem,
            dynamic_smem=stats[k.name].dynamic_smem, facts=dict(kfacts),
            nonportable_cluster=c.nonportable_cluster,
            tensor_maps=tuple(dict.fromkeys(stats[k.name].tensor_maps)),
            default_maxnreg=c.default_maxnreg))
    return CodegenResult(target=tgt.name, opt_level=opt_level, llvm_ir=llvm_ir, ptx=ptx,
                         kernels=tuple(artifacts), diagnostics=tuple(sink.diagnostics),
                         timings={"llvm": t_llvm - t_start, "ptx": t_ptx - t_llvm})

