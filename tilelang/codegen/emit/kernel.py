"""One kernel as an LLVM function: the ABI, the thread index, values of the Tile IR, shared
memory and barriers; each op goes to the dispatch the region walker hands in (walk.py).

Execution model (docs/language.md §1): every block of the grid runs the body once; a tile value is spread
over the block's threads by its layout (layouts/distributed.py), one SSA value per element a thread holds;
a scalar is a 0-d tile that every thread computes. Two thread modes:

- *exact*: the code relies on the thread count (shuffles, shared-memory exchanges, barriers):
  the layouts use `threads` = the launch block's thread count (largest power of two of it)
  and the contract gets `.reqntid`;
- *virtual*: no thread talks to another, the contract keeps `.maxntid`, and the body is wrapped
  in `for v in range(tid, threads, ntid)` so that a smaller launch block does the work of
  `threads` virtual threads. Side effects of replicated values are gated on the owning
  virtual thread, so nothing happens twice.

An op that needs exact mode while emitting in virtual mode raises `NeedsExactThreads`;
generate.py then emits the kernel again in exact mode.
"""

from __future__ import annotations

from math import prod
from typing import Any, Callable, Mapping

import llvmlite.ir as ir

from tilelang.codegen.api import ArrayFacts, DEFAULT_FACTS
from tilelang.codegen.layouts.defaults import (DefaultLayouts, row_reduced_shapes,  # noqa: F401
                                              rows_in_warps)
from tilelang.codegen.layouts.distributed import Layout, floor_pow2, scalar_layout
from tilelang.codegen.emit.lineinfo import LineInfo
from tilelang.codegen.emit import nvshmem
from tilelang.codegen.emit.values import ArrayVal, ListVal, TileVal
from tilelang.codegen.scalar.emitter import ScalarEmitter
from tilelang.diagnostics import InternalCompilerError, register_codes
from tilelang.ir.args import TupleArg
from tilelang.ir.ops import BuiltinOp, ConstantOp, Kernel
from tilelang.ir.values import Value
from tilelang.record import field as rfield, record, replace
from tilelang.sema.builtins_math import DEFAULT_PRECISION, PRECISIONS
from tilelang.sema.constants import ConstTuple, ConstValue
from tilelang.sema.types import ArrayListType, ArrayType, DType, SymmetricArrayType, TileType

register_codes({
    "E0780": "an operation has no code generation yet",
    "E0781": "internal: code generation failed on an operation",
})

I1, I8, I32, I64 = ir.IntType(1), ir.IntType(8), ir.IntType(32), ir.IntType(64)
STATIC_SMEM_LIMIT = 48 * 1024      # bytes of static shared memory a block may declare
DYNAMIC_SMEM_ALIGN = 1024          # dynamic_smem's array: a wgmma image's 128-byte swizzle


def kernel_precision(kernel: Kernel, module_mode: bool | str | None) -> str:
    """The kernel's precision mode: its `@launch(precision = ...)`, else the module's (the
    `precision` option of tilec / tilelang.compile, passed as generate's `fast_math`: a mode
    name, or True for "approx"), else the language's default."""
    spec = getattr(kernel, "launch", None)
    own = getattr(spec, "precision", None) if spec is not None else None
    if own:
        return own
    if module_mode is True:
        return "approx"
    if isinstance(module_mode, str) and module_mode in PRECISIONS:
        return module_mode
    return DEFAULT_PRECISION


def _successors(block) -> list | None:
    """The successor blocks of a finished block (None: no terminator yet)."""
    if not block.is_terminated:
        return None
    term = block.instructions[-1]
    if isinstance(term, ir.SwitchInstr):
        return [term.default] + [b for _, b in term.cases]
    if isinstance(term, ir.IndirectBranch):
        return None
    return [op for op in term.operands if isinstance(op, ir.Block)]


class NeedsExactThreads(Exception):
    """Raised in virtual-thread mode by an op that communicates between threads."""


class _DynamicAddress(ir.values.FormattedConstant):
    """The address `offset` bytes into the dynamic shared memory array `g`: a constant
    expression (as a static buffer's address is, so ptxas folds it into the instructions'
    immediates) printed when the module is, after finish_smem has placed it for good."""

    def __init__(self, g: ir.GlobalVariable, offset: int):
        ir.values.Constant.__init__(self, ir.PointerType(I8, addrspace=3), "")
        self.g, self.offset = g, offset

    @property
    def constant(self) -> str:
        return (f"getelementptr ({self.g.value_type}, {self.g.type} {self.g.get_reference()}, "
                f"i32 0, i32 {self.offset})")

    @constant.setter
    def constant(self, _value) -> None:
        pass


@record
class KernelStats:
    """What the emission used: reported to the launch contract and the tests."""

    shuffles: int = 0
    barriers: int = 0
    smem_bytes: int = 0
    exchanges: int = 0           # layout conversions through shared memory
    features: set = rfield(default_factory=set)  # targets.FEATURES names the code uses
    dynamic_smem: int = 0        # of smem_bytes: the part launched as dynamic shared memory
    wgmma_acc_regs: int = 0      # accumulator registers per thread of its warp-group MMAs
    wgmma_declined: bool = False # a product could use wgmma but for the block's thread count
    wgmma_unbounded: bool = False  # a wgmma product outside a pipelined loop (.maxnreg 255)
    ws_share: int = 0            # a warp-specialized prefetch loop's even register share
    tensor_maps: list = rfield(default_factory=list)  # TensorMapSpecs the TMA loads want
    nvshmem: bool = False        # calls NVSHMEM: its device library is linked in (generate.py)
    tmem_columns: int = 0        # tensor-memory columns its tcgen05 products allocate
    tc5_pair: bool = False       # a tcgen05 ring on the cluster's CTA pair (cta_group::2)
    tc5_declined: bool = False   # a product fits tcgen05 but for the block's thread count


class KernelEmitter:
    def __init__(self, module: ir.Module, kernel: Kernel, target, *, block: tuple[int, ...],
                 exact: bool, facts: Mapping[str, ArrayFacts] | None = None,
                 fast_math: bool | str = False, tma: bool = False, tensor_maps: tuple = (),
                 lineinfo: bool = False, plan: Any = None):
        self.module = module
        self.kernel = kernel
        self.target = target
        self.block = tuple(block) + (1,) * (3 - len(block))
        self.declared_threads = prod(self.block)
        self.threads = floor_pow2(self.declared_threads)
        self.exact = exact
        self.facts = dict(facts or {})
        self.env: dict[int, Any] = {}
        self.stats = KernelStats()
        self.consts: dict[int, ConstValue] = {}
        self.loops: list[Any] = []          # walk.LoopFrame stack
        self._smem: ir.GlobalVariable | None = None
        self._kept_smem = 0           # bytes of buffers from kept_smem (static)
        # dynamic_smem's buffers: the `.extern` array (made on first use), the bytes live now
        # (a stack: the rings of loops that run one after another share their bytes), the most
        # ever live, and each buffer's offset (constants, moved in finish_smem past the
        # scratch buffer when that is dynamic too)
        self._dyn: ir.GlobalVariable | None = None
        self._dyn_top = 0
        self._dyn_bytes = 0
        self._dyn_offsets: list[_DynamicAddress] = []
        # LLVM values made once per kernel in its entry block and reused by every lowering
        # that needs them (both copies of a versioned body see them: docs/codegen.md, Plans)
        self.elected_issuer: ir.Value | None = None   # lower/tensorcore/tma_load.issuer's elect.sync
        self.cluster_rank: ir.Value | None = None     # lower/tensorcore/tma_multicast's %cluster_ctarank
        self.narrowed: dict[int, ir.Value] = {}        # lower/memory.py: i64 parameter -> i32
        # lower/tensorcore/wgmma_product.kept_image: (loop header, registers, image shape,
        # rows, span) -> (image, address), and without the header -> (its fill block, same)
        self.kept_images: dict[tuple, tuple] = {}
        # ... and per loop header the last fill block, which now enters the loop: a loop's
        # second kept image is filled after its first
        self.kept_fill_exits: dict[int, ir.Block] = {}
        # lower/tensorcore/tcgen05_tmem.Tmem: the kernel's tensor memory, when it has any
        self.tmem = None
        # lower/tensorcore/mma_prefetch.py: load result id -> (SmemOperand, image, slot,
        # DeferredLoad) of the operand
        # the enclosing loop copies ahead (set while its body is emitted)
        self.prefetched: dict[int, tuple] = {}
        # ... and the loads beside them (plan/loops.py R10): load result id -> the 32-bit
        # shared address of this iteration's tile (row-major)
        self.prefetched_sides: dict[int, ir.Value] = {}
        # rings of prefetched loops that have finished: (buffer, bytes), for a later loop's
        self.free_rings: list[tuple[ir.Value, int]] = []
        # emit/sync.py: (loop header, registers, layout, need) -> a loop-invariant tile's
        # registers converted before that loop
        self.hoisted: dict[tuple, tuple] = {}
        self.remat_cost: dict[int, int] = {}    # emit/remat.py: value id -> ops per element
        self.barrier_threads = 0      # > 0: barriers are named ones of that many threads
        # Shared-memory events for exchange_slot: a sequence number per event, the barriers
        # emitted (block -> seqs), the last use of the buffer by anyone else, and each slot's
        # reads (seq, block).
        self._smem_seq = 0
        self._bars: dict[Any, list[int]] = {}
        self._untracked_at = -1
        self._slot_reads: dict[int, list[tuple[int, Any]]] = {}

        self.default_layouts = DefaultLayouts(kernel, self.threads)
        self.row_shapes = self.default_layouts.row_shapes
        # the kernel's plan (codegen/plan/): decisions made from the IR before emission
        self.plan = plan
        self.builder = ir.IRBuilder()
        self.precision = kernel_precision(kernel, fast_math)
        self.se = ScalarEmitter(self.builder, module, target, precision=self.precision)
        self.se.features = self.stats.features   # arch-specific conversions it uses
        params = list(kernel.params)
        argtys: list[ir.Type] = []
        for p in params:
            t = p.type
            if isinstance(t, ArrayType):
                argtys += [I64] * (1 + 2 * t.rank)
            elif isinstance(t, SymmetricArrayType) and plan is not None and \
                    plan.distributed.nvshmem:
                argtys += [I64] * (1 + 2 * t.array.rank)   # an array in the symmetric heap
            elif isinstance(t, ArrayListType):
                argtys += [I64, I64]          # the table's address, the number of arrays
                if isinstance(t, SymmetricArrayType):
                    argtys.append(I64)        # the launching rank (docs/distributed.md)
                    if plan is not None and (p.hint or f"p{p.id}") in plan.distributed.multicast:
                        argtys.append(I64)    # its multicast address (multimem_*)
            else:
                argtys.append(self.storage_type(t.dtype))
        # TMA tensor maps (lower/tensorcore/tma_load.py): 128-byte grid-constant parameters after the
        # source parameters, `.param .align 64 .b8 [128]` (docs/abi.md)
        self.tma = tma
        map_ty = ir.ArrayType(I8, 128)
        argtys += [ir.PointerType(map_ty)] * len(tensor_maps)
        self.fn = ir.Function(module, ir.FunctionType(ir.VoidType(), argtys), kernel.name)
        self.fn.calling_convention = "ptx_kernel"
        self.tensor_maps = {}
        first = len(argtys) - len(tensor_maps)
        for i, spec in enumerate(tensor_maps):
            a = self.fn.args[first + i]
            a.add_attribute("byval")
            a.attributes.align = 64
            a.name = f"{spec.array}_tmap{i}"
            self.tensor_maps[spec] = a
            md = module.add_named_metadata("nvvm.annotations")
            md.add(module.add_metadata([self.fn, ir.MetaDataString(module, "grid_constant"),
                                        module.add_metadata([ir.Constant(I32, first + i + 1)])]))
        self.entry = self.fn.append_basic_block("entry")
        self.builder.position_at_end(self.entry)
        # with line information every instruction carries a location (LLVM's verifier wants one
        # on each inlinable call in a function that has a subprogram): the kernel's line first
        self.lineinfo = LineInfo(module, self.fn, kernel.name, kernel.span) if lineinfo else None
        if self.lineinfo is not None:
            self.builder.debug_metadata = self.lineinfo.kernel_loc
        # the op dispatch (walk.py's `emit_builtin`), handed in by the walker before it emits
        # the body, as mypyc wires its builder to its visitor: see docs/codegen.md, "Layers"
        self.dispatch: Callable[[KernelEmitter, BuiltinOp], None] | None = None
        # symmetric arrays through NVSHMEM (plan/distributed.py) instead of peer tables
        self.nvshmem = plan is not None and plan.distributed.nvshmem
        self.stats.nvshmem = self.nvshmem
        if self.nvshmem:
            self.stats.features.add("nvshmem")
        self._bind_params(params)

    # ------------------------------------------------------------------ types
    def llvm_type(self, dtype: DType) -> ir.Type:
        return self.se.llvm_type(dtype)

    def storage_type(self, dtype: DType) -> ir.Type:
        """How a value of `dtype` sits in memory and in kernel parameters (bool: one byte)."""
        return I8 if dtype.is_bool else self.llvm_type(dtype)

    def to_storage(self, v: ir.Value, dtype: DType) -> ir.Value:
        return self.builder.zext(v, I8) if dtype.is_bool else v

    def from_storage(self, v: ir.Value, dtype: DType) -> ir.Value:
        return self.builder.icmp_unsigned("!=", v, ir.Constant(I8, 0)) if dtype.is_bool else v

    # ------------------------------------------------------------------ parameters
    def _bind_params(self, params) -> None:
        args = iter(self.fn.args)
        arrays: list[ArrayVal] = []       # the array parameters so far, for `same_shape`
        for p in params:
            t = p.type
            name = p.hint or f"p{p.id}"
            if isinstance(t, ArrayType):
                addr = next(args)
                addr.name = name
                extents = []
                for i in range(t.rank):
                    a = next(args)
                    a.name = f"{name}_shape{i}"
                    extents.append(a)
                strides = []
                for i in range(t.rank):
                    a = next(args)
                    a.name = f"{name}_stride{i}"
                    strides.append(a)
                facts = self.facts.get(name, DEFAULT_FACTS)
                if facts.contiguous and t.rank:
                    strides[-1] = ir.Constant(I64, 1)   # the ABI: the last stride is ignored
                k = facts.same_shape
                if 0 <= k < len(arrays) and arrays[k].rank == t.rank:
                    # the shape equals an earlier array's: its extents, the same SSA values,
                    # so LLVM shares the bounds tests and never loads these parameters
                    extents = list(arrays[k].extents)
                v = ArrayVal(t.dtype, t.rank, addr, tuple(extents), tuple(strides), facts, name)
                arrays.append(v)
                self.env[p.id] = v
            elif isinstance(t, SymmetricArrayType) and self.nvshmem:
                self.env[p.id] = self._bind_nvshmem(args, t.array, name)
            elif isinstance(t, ArrayListType):
                table, length = next(args), next(args)
                table.name, length.name = name, f"{name}_len"
                me = next(args) if isinstance(t, SymmetricArrayType) else None
                if me is not None:
                    me.name = f"{name}_rank"
                mc = None
                if me is not None and self.plan is not None and \
                        name in self.plan.distributed.multicast:
                    mc = next(args)
                    mc.name = f"{name}_mc"
                # an entry is no earlier array's shape, and never a tensor map's operand
                facts = replace(self.facts.get(name, DEFAULT_FACTS), same_shape=-1,
                                tensor_map=False)
                self.env[p.id] = ListVal(t.array.dtype, t.array.rank, table, length, facts,
                                         name, me, mc=mc)
            else:
                a = next(args)
                a.name = name
                v = self.from_storage(a, t.dtype)
                self.env[p.id] = TileVal(t.dtype, self.scalar_layout, (v,))

    def _bind_nvshmem(self, args, t: ArrayType, name: str) -> ListVal:
        """A symmetric array under the NVSHMEM lowering (docs/distributed.md): an array's
        parameters (this rank's buffer in the symmetric heap); the world from NVSHMEM."""
        addr = next(args)
        addr.name = name
        extents, strides = [], []
        for i in range(t.rank):
            extents.append(next(args))
            extents[-1].name = f"{name}_shape{i}"
        for i in range(t.rank):
            strides.append(next(args))
            strides[-1].name = f"{name}_stride{i}"
        facts = replace(self.facts.get(name, DEFAULT_FACTS), same_shape=-1, tensor_map=False)
        if facts.contiguous and t.rank:
            strides[-1] = ir.Constant(I64, 1)           # the ABI: the last stride is ignored
        local = ArrayVal(t.dtype, t.rank, addr, tuple(extents), tuple(strides), facts, name)
        b = self.builder
        me = b.sext(nvshmem.call(b, "nvshmem_my_pe", []), I64, name=f"{name}_rank")
        n = b.sext(nvshmem.call(b, "nvshmem_n_pes", []), I64, name=f"{name}_len")
        return ListVal(t.dtype, t.rank, addr, n, facts, name, me, local)

    # ------------------------------------------------------------------ threads
    def layout_for(self, t: TileType) -> Layout:
        """The default (blocked) layout of a tile type."""
        return self.layout_for_shape(tuple(t.shape), t.dtype)

    def layout_for_shape(self, shape: tuple[int, ...], dtype: DType) -> Layout:
        return self.default_layouts.for_shape(shape, dtype)

    @property
    def scalar_layout(self) -> Layout:
        return scalar_layout(self.threads)

    def sreg(self, name: str) -> ir.Value:
        fn = self.se.declare(f"llvm.nvvm.read.ptx.sreg.{name}", I32, [])
        return self.builder.call(fn, [])

    def setup_threads(self) -> None:
        """Compute the linear thread id in the entry block (x fastest)."""
        b = self.builder
        if self.block[1] == self.block[2] == 1:
            # a 1-D block (`.maxntid`/`.reqntid` x, 1, 1): tid.y = tid.z = 0, ntid.y = ntid.z = 1
            self.tid = self.sreg("tid.x")
            if not self.exact:
                self.nthreads = self.sreg("ntid.x")
        else:
            tx, ty, tz = self.sreg("tid.x"), self.sreg("tid.y"), self.sreg("tid.z")
            if self.exact:
                nx, ny = (ir.Constant(I32, n) for n in self.block[:2])
            else:
                nx, ny = self.sreg("ntid.x"), self.sreg("ntid.y")
            self.tid = b.add(tx, b.mul(nx, b.add(ty, b.mul(ny, tz))), name="tid")
            if not self.exact:
                self.nthreads = b.mul(b.mul(nx, ny), self.sreg("ntid.z"), name="ntid")
        if self.declared_threads == self.threads:
            # the launch has at most `threads` threads (.maxntid, .reqntid): the first virtual
            # thread exists, so the loop needs no entry test, and a thread's offsets need no
            # mask (layernorm@4,096 kept `tid * 4` and `tid * 4 & 508`: 38 -> 32 registers)
            fn = self.se.declare("llvm.assume", ir.VoidType(), [I1])
            b.call(fn, [b.icmp_unsigned("<", self.tid, ir.Constant(I32, self.threads))])
        # The layouts' thread index: a power of two range; extra real threads replicate.
        if self.exact and self.threads != self.declared_threads:
            self.vtid = b.and_(self.tid, ir.Constant(I32, self.threads - 1), name="v")
            self.primary = b.icmp_unsigned("<", self.tid, ir.Constant(I32, self.threads))
        else:
            self.vtid = self.tid
            self.primary = None

    def lane(self) -> ir.Value:
        return self.builder.and_(self.vtid, ir.Constant(I32, 31))

    def thread_linear(self, weights: tuple[int, ...]) -> ir.Value:
        """XOR over thread-index bits b of bit_b(v) * weights[b], as i32 (i64-safe for tiles
        below 2^31 elements). One-hot weights never overlap, so this is their sum; the weights
        of an XOR layout may have several bits and overlap (layouts/distributed.py)."""
        b = self.builder
        # (input bit, output bit) pairs; a run of consecutive input bits moving by the same
        # shift becomes one mask+shift, runs in order of their first input bit.
        runs: list[tuple[int, int, int]] = []          # (first input bit, count, shift)
        open_run: dict[int, int] = {}                  # shift -> index of its last run
        for i, w in enumerate(weights):
            p = 0
            while w >> p:
                if w >> p & 1:
                    d = p - i
                    k = open_run.get(d)
                    if k is not None and runs[k][0] + runs[k][1] == i:
                        runs[k] = (runs[k][0], runs[k][1] + 1, d)
                    else:
                        open_run[d] = len(runs)
                        runs.append((i, 1, d))
                p += 1
        runs.sort()
        acc, covered = None, 0
        for i, n, shift in runs:
            part = b.and_(self.vtid, ir.Constant(I32, ((1 << n) - 1) << i))
            if shift > 0:
                part = b.shl(part, ir.Constant(I32, shift))
            elif shift < 0:
                part = b.lshr(part, ir.Constant(I32, -shift))
            bits = ((1 << n) - 1) << (i + shift)
            if acc is None:
                acc = part
            else:
                acc = b.xor(acc, part) if covered & bits else b.or_(acc, part)
            covered |= bits
        return acc if acc is not None else ir.Constant(I32, 0)

    def thread_coord(self, layout: Layout, axis: int) -> ir.Value:
        """This thread's coordinate offset along `axis` (i32). Callers add register offsets to
        it, which is right for one-hot layouts only (an XOR layout is converted first)."""
        assert layout.is_one_hot(), f"thread_coord: an XOR layout needs XOR addressing: {layout}"
        weights = tuple(basis[axis] for basis in layout.thread_bases)
        return self.thread_linear(weights)

    def owner(self, layout: Layout) -> ir.Value | None:
        """i1: this (virtual) thread is the one that performs side effects for its elements of
        `layout` (None: every thread owns its elements)."""
        b = self.builder
        mask = layout.replicated_thread_mask()
        cond = None
        if mask:
            cond = b.icmp_unsigned("==", b.and_(self.vtid, ir.Constant(I32, mask)),
                                   ir.Constant(I32, 0))
        if self.primary is not None:
            cond = self.primary if cond is None else b.and_(cond, self.primary)
        return cond

    def require_exact(self) -> None:
        if not self.exact:
            raise NeedsExactThreads()

    # ------------------------------------------------------------------ values
    def tile(self, a) -> TileVal:
        v = self.env[a.id]
        assert isinstance(v, TileVal), a
        return v

    def array(self, a) -> ArrayVal:
        v = self.env[a.id]
        assert isinstance(v, ArrayVal), a
        return v

    def scalar_value(self, a, dtype: DType) -> ir.Value:
        """A scalar argument (Value or constant) as an LLVM value of `dtype`."""
        if isinstance(a, Value):
            t = self.tile(a)
            if t.dtype == dtype:
                return t.value
            return self.se.cast(t.value, t.dtype, dtype)
        if isinstance(a, ConstValue):
            return self.se.constant(a.value, dtype)
        raise InternalCompilerError.at("E0781", f"expected a scalar, found {a!r}", None)

    def index_i64(self, a) -> ir.Value:
        """An integer scalar argument widened to i64 by its signedness."""
        b = self.builder
        if isinstance(a, ConstValue):
            return ir.Constant(I64, int(a.value))
        t = self.tile(a)
        v = t.value
        if v.type.width == 64:
            return v
        return b.sext(v, I64) if t.dtype.signed and not t.dtype.is_bool else b.zext(v, I64)

    def const_of(self, a):
        """The constant behind an argument (inline or a ConstantOp result), else None."""
        if isinstance(a, (ConstValue, ConstTuple)):
            return a
        if isinstance(a, Value):
            return self.consts.get(a.id)
        return None

    @staticmethod
    def tuple_items(a) -> tuple:
        if isinstance(a, TupleArg):
            return a.items
        if isinstance(a, ConstTuple):
            return a.items
        return (a,)

    @staticmethod
    def const_ints(a) -> tuple[int, ...]:
        if isinstance(a, ConstTuple):
            return tuple(int(i.value) for i in a.items)
        if isinstance(a, ConstValue):
            return (int(a.value),)
        raise InternalCompilerError.at("E0781", f"expected constant integers, found {a!r}",
                                       None)

    def splat(self, value, dtype: DType, layout: Layout) -> TileVal:
        """A tile of `layout` whose registers all hold one value (LLVM value or constant)."""
        v = value if isinstance(value, ir.Value) else self.se.constant(value, dtype)
        return TileVal(dtype, layout, (v,) * layout.num_regs)

    # ------------------------------------------------------------------ shared memory
    def smem(self, nbytes: int, ty: ir.Type, offset: int = 0) -> ir.Value:
        """A pointer to `ty` (addrspace 3) at byte `offset` of the kernel's shared scratch
        buffer. Every user starts at the buffer's beginning and brackets its accesses with
        barriers; the buffer is sized to the largest use when the kernel is finished
        (`finish_smem`)."""
        self.require_exact()
        self._smem_seq += 1
        self._untracked_at = self._smem_seq
        return self._smem_ptr(nbytes, ty, offset)

    # Two slots of EXCHANGE_SLOT bytes at the start of the buffer for small exchanges that
    # alternate (a row's max, then its sum): a slot needs no leading barrier when every path
    # from each of its reads to here passes a barrier (the other exchange's), or when nothing
    # has used shared memory before, outside any loop.
    EXCHANGE_SLOT = 256

    def exchange_slot(self, nbytes: int, ty: ir.Type) -> tuple[ir.Value, int | None]:
        """(pointer, slot) for a small barrier-bracketed exchange, with its leading barrier
        already emitted where one is needed; slot None: an ordinary `smem` use (leading
        barrier emitted). Call `slot_read(slot)` after the exchange's loads."""
        self.require_exact()
        if nbytes <= self.EXCHANGE_SLOT:
            for slot in (0, 1):
                if self._slot_free(slot):
                    self._smem_seq += 1
                    return self._smem_ptr(nbytes, ty, slot * self.EXCHANGE_SLOT), slot
        ptr = self.smem(nbytes, ty)
        self.barrier()
        return ptr, None

    def _slot_free(self, slot: int) -> bool:
        if self.loops or self._untracked_at >= 0:
            # in a loop a later read in the body precedes this write on the next iteration;
            # another user's accesses are not tracked
            return False
        return all(self._barrier_between(seq, block)
                   for seq, block in self._slot_reads.get(slot, ()))

    def _barrier_between(self, seq: int, block) -> bool:
        """Every path from the event `seq` in `block` to the current point passes a barrier
        (over the control-flow graph emitted so far; an unfinished block other than the
        current one counts as a path without one)."""
        if any(s > seq for s in self._bars.get(block, ())):
            return True
        here = self.builder.block
        if block is here:
            return False
        first = _successors(block)
        if first is None:
            return False
        seen, todo = set(), list(first)
        while todo:
            blk = todo.pop()
            if id(blk) in seen:
                continue
            seen.add(id(blk))
            if blk in self._bars:
                continue                      # a barrier runs on the way through this block
            if blk is here:
                return False
            succ = _successors(blk)
            if succ is None:
                return False
            todo.extend(succ)
        return True

    def slot_read(self, slot: int | None) -> None:
        if slot is not None:
            self._smem_seq += 1
            self._slot_reads.setdefault(slot, []).append((self._smem_seq,
                                                          self.builder.block))

    def _smem_ptr(self, nbytes: int, ty: ir.Type, offset: int) -> ir.Value:
        self.stats.smem_bytes = max(self.stats.smem_bytes, offset + nbytes)
        if self._smem is None:
            self._smem = ir.GlobalVariable(self.module, ir.ArrayType(I8, 1),
                                           f"__tile_smem_{self.kernel.name}", addrspace=3)
            self._smem.linkage = "internal"
            self._smem.align = 16
        b = self.builder
        p = b.bitcast(self._smem, ir.PointerType(I8, addrspace=3))
        if offset:
            p = b.gep(p, [ir.Constant(I32, offset)])
        return b.bitcast(p, ir.PointerType(ty, addrspace=3))

    def kept_smem(self, nbytes: int, align: int) -> ir.Value:
        """A static shared buffer of its own (i8 pointer), outside the scratch buffer every
        user starts at: for data written once before a loop and read in every iteration."""
        self.require_exact()
        ty = ir.ArrayType(I8, nbytes)
        g = ir.GlobalVariable(self.module, ty, f"__tile_kept{self._kept_smem}_"
                              f"{self.kernel.name}", addrspace=3)
        g.linkage = "internal"
        g.align = align
        g.initializer = ir.Constant(ty, ir.Undefined)
        self._kept_smem += -(-nbytes // align) * align
        return g.bitcast(ir.PointerType(I8, addrspace=3))     # a constant: valid anywhere

    def dynamic_smem(self, nbytes: int, align: int) -> tuple[ir.Value, int]:
        """A buffer in the dynamic shared memory the launch provides (docs/codegen.md,
        Dynamic shared memory), for a buffer larger than the static room (a block declares at
        most 48 KB statically): (its 32-bit shared address, computed here; the mark to give
        `release_dynamic_smem` once the buffer is dead). `align` divides 1024, the array's."""
        self.require_exact()
        if self._dyn is None:
            self._dyn = ir.GlobalVariable(self.module, ir.ArrayType(I8, 0),
                                          f"__tile_dyn_{self.kernel.name}", addrspace=3)
            self._dyn.linkage = "external"
            self._dyn.align = DYNAMIC_SMEM_ALIGN
        mark = self._dyn_top
        ptr = _DynamicAddress(self._dyn, -(-mark // align) * align)
        self._dyn_offsets.append(ptr)
        self._dyn_top = ptr.offset + nbytes
        self._dyn_bytes = max(self._dyn_bytes, self._dyn_top)
        b = self.builder
        return b.trunc(b.ptrtoint(ptr, I64), I32), mark

    def release_dynamic_smem(self, mark: int) -> None:
        """The buffers dynamic_smem made since `mark` are dead: later ones reuse their bytes."""
        self._dyn_top = mark

    def finish_smem(self) -> None:
        """Give the scratch buffer its final size (instructions refer to it by name and print
        its type lazily, so retyping the global here is safe)."""
        kept = self._kept_smem
        dyn = -(-self._dyn_bytes // 16) * 16
        if self._smem is None:
            self.stats.smem_bytes = kept + dyn
            self.stats.dynamic_smem = dyn
            return
        scratch = -(-self.stats.smem_bytes // 16) * 16   # whole 16-byte units
        self.stats.smem_bytes = scratch + kept + dyn
        self.stats.dynamic_smem = dyn
        if scratch + kept > STATIC_SMEM_LIMIT:
            # More than a block may declare statically (a pipelined ring): the buffer becomes
            # the dynamic shared memory the launch provides (`.extern .shared ... []`), and
            # dynamic_smem's buffers, which start there too, move past it.
            shift = -(-scratch // DYNAMIC_SMEM_ALIGN) * DYNAMIC_SMEM_ALIGN if dyn else 0
            for c in self._dyn_offsets:
                c.offset += shift
            self.stats.dynamic_smem = shift + dyn if dyn else scratch
            self.stats.smem_bytes = kept + self.stats.dynamic_smem
            ty = ir.ArrayType(I8, 0)
            self._smem.linkage = "external"
            self._smem.value_type = ty
            self._smem.type = ir.PointerType(ty, addrspace=3)
            return
        ty = ir.ArrayType(I8, max(scratch, 16))
        self._smem.value_type = ty
        self._smem.type = ir.PointerType(ty, addrspace=3)
        self._smem.initializer = ir.Constant(ty, ir.Undefined)

    def barrier(self) -> None:
        self.require_exact()
        self.stats.barriers += 1
        self._smem_seq += 1
        self._bars.setdefault(self.builder.block, []).append(self._smem_seq)
        if self.barrier_threads:
            # after a warp-specialized loop only the consumers go on: a named barrier of
            # their count (lower/tensorcore/wgmma_product._ws_loop)
            asm = ir.InlineAsm(ir.FunctionType(ir.VoidType(), []),
                               f"barrier.sync 1, {self.barrier_threads};", "~{memory}",
                               side_effect=True)
            self.builder.call(asm, [])
            return
        fn = self.se.declare("llvm.nvvm.barrier0", ir.VoidType(), [])
        self.builder.call(fn, [])

    # ------------------------------------------------------------------ ops
    def emit_builtin(self, op: BuiltinOp) -> None:
        """Emit one op through the dispatch the region walker handed in (walk.py): the
        lowering families sit above this module, which never imports them."""
        self.dispatch(self, op)

    def emit_constant(self, op: ConstantOp) -> None:
        c = op.value
        t = op.result.type
        assert isinstance(t, TileType)
        self.consts[op.result.id] = c
        self.env[op.result.id] = TileVal(t.dtype, self.scalar_layout,
                                         (self.se.constant(c.value, t.dtype),))
