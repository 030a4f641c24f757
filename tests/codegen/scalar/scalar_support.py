"""Helpers of the scalar-semantics tests: build one LLVM kernel per element-wise case (each
thread loads its operands, calls `ScalarEmitter.emit`, stores the result), compile all cases of
a batch into one PTX module, link it with nvJitLink, run every kernel on the emulator and
compare with the registry's reference (`Builtin.evaluate`)."""

from __future__ import annotations

from dataclasses import dataclass, field

import llvmlite.binding as llvm
import llvmlite.ir as ir
import numpy as np

from tilelang.codegen.scalar.emitter import ScalarEmitter
from tilelang.codegen.scalar.cast import llvm_type
from tilelang.emulator import EmulatorDevice
from tilelang.sema.builtins import OPERATORS, REGISTRY, ArgInfo, arg_of_dtype, bind_call
from tilelang.sema.builtins_dtype import from_bits, to_bits
from tilelang.sema.constants import ConstValue
from tilelang.sema.types import (DTYPES, LOOSE_FLOAT, LOOSE_INT, DType, TileType,
                                 round_to_dtype)
from tilelang.targets import validate_target
from tilelang.targets import get_target

llvm.initialize_all_targets()
llvm.initialize_all_asmprinters()

I32 = ir.IntType(32)
PTR = ir.PointerType(addrspace=1)


CODE_BYTES = ("f8e4m3", "f8e5m2", "f4e2m1", "f6e2m3", "f6e3m2", "ue8m0")


def storage_np(dt: DType) -> np.dtype:
    """How a dtype lies in device memory (bf16 as its 16 bits, f8/f6/f4/ue8m0 as its code
    byte)."""
    if dt.is_bool:
        return np.dtype(np.uint8)
    if dt.name == "bf16":
        return np.dtype(np.uint16)
    if dt.name in CODE_BYTES:
        return np.dtype(np.uint8)
    return dt.storage_np_dtype


def to_device_values(x, dt: DType) -> np.ndarray:
    x = np.asarray(x)
    if dt.is_bool:
        return x.astype(np.uint8)
    if dt.name == "bf16" or dt.name in CODE_BYTES:
        return to_bits(np.asarray(x, dtype=np.float32), dt)
    if dt.name == "tf32":
        return round_to_dtype(x, dt)
    return x.astype(dt.storage_np_dtype)


def from_device_values(raw: np.ndarray, dt: DType) -> np.ndarray:
    if dt.is_bool:
        return raw != 0
    if dt.name == "bf16" or dt.name in CODE_BYTES:
        return from_bits(raw, dt)
    return raw


def dtype(name: str) -> DType:
    return DTYPES[name]


def entry(op: str):
    return OPERATORS[op] if op in OPERATORS else REGISTRY[op]


def reference(op: str, operands: list, dts: list, params: dict | None = None):
    """(result dtype, reference values) from the registry. An operand with dtype None is a
    loose Python constant; others are NumPy arrays (bf16/f8 as float32 values)."""
    b = entry(op)
    params = params or {}
    infos = []
    values = {}
    names = [p.name for p in b.params]
    vi = 0
    n = max((np.asarray(x).size for x, d in zip(operands, dts) if d is not None), default=1)
    for p in b.params:
        if p.kind == "dtype":
            infos.append(arg_of_dtype(params["dtype"]))
            continue
        if p.kind == "string":      # `precision=`: the reference is exact in every mode
            continue
        x, d = operands[vi], dts[vi]
        vi += 1
        if d is None:
            kind = LOOSE_FLOAT if isinstance(x, float) and not isinstance(x, bool) else LOOSE_INT
            infos.append(ArgInfo(kind, ConstValue(x)))
            values[p.name] = x
        else:
            infos.append(ArgInfo(TileType(d, () if b.scalar_only else (n,))))
            values[p.name] = np.asarray(x)
    bound = bind_call(b, infos, {}, None)
    t = b.result_type(bound)
    del names
    vals = {k: v for k, v in values.items()}
    if "dtype" in params:
        vals["dtype"] = params["dtype"]
    with np.errstate(all="ignore"):
        return t.dtype, np.asarray(b.evaluate(bound, vals))


@dataclass
class Case:
    op: str
    operands: list
    dts: list
    params: dict
    result_dtype: DType
    name: str
    out: np.ndarray | None = None


@dataclass
class KernelBatch:
    """Many element-wise cases compiled into one module and run on the emulator."""

    target: str = "sm_90a"
    fast_math: bool = False
    cases: list = field(default_factory=list)
    ptx: str = ""
    features: set = field(default_factory=set)   # targets.FEATURES the element code used

    def add(self, op: str, operands: list, dts: list, params: dict | None = None,
            result_dtype: DType | None = None) -> Case:
        params = params or {}
        if result_dtype is None:
            result_dtype, _ = reference(op, operands, dts, params)
        c = Case(op, operands, dts, params, result_dtype, f"k{len(self.cases)}")
        self.cases.append(c)
        return c

    def _module(self) -> ir.Module:
        m = ir.Module()
        m.triple = "nvptx64-nvidia-cuda"
        m.data_layout = "e-i64:64-i128:128-v16:16-v32:32-n16:32:64"
        for c in self.cases:
            self._kernel(m, c)
        return m

    def _kernel(self, m: ir.Module, c: Case) -> None:
        ins = [d for d in c.dts if d is not None]
        fn = ir.Function(m, ir.FunctionType(ir.VoidType(), [PTR] * (1 + len(ins)) + [I32]),
                         c.name)
        fn.calling_convention = "ptx_kernel"
        b = ir.IRBuilder(fn.append_basic_block("entry"))

        def sreg(name):
            f = m.globals.get(f"llvm.nvvm.read.ptx.sreg.{name}") or ir.Function(
                m, ir.FunctionType(I32, []), f"llvm.nvvm.read.ptx.sreg.{name}")
            return b.call(f, [])
        i = b.add(b.mul(sreg("ctaid.x"), sreg("ntid.x")), sreg("tid.x"))
        body = fn.append_basic_block("body")
        done = fn.append_basic_block("done")
        b.cbranch(b.icmp_signed("<", i, fn.args[-1]), body, done)
        b.position_at_end(body)
        se = ScalarEmitter(b, m, get_target(self.target), fast_math=self.fast_math)
        se.features = self.features         # arch-specific conversions (mx_cvt on sm_100a)
        args = []
        pi = 1
        for x, d in zip(c.operands, c.dts):
            if d is None:
                args.append(x)
                continue
            mem = _mem_type(d)
            v = b.load(b.gep(fn.args[pi], [i], source_etype=mem), typ=mem)
            pi += 1
            reg = se.llvm_type(d)
            if d.is_bool:
                v = b.trunc(v, reg)
            elif mem != reg:
                v = b.bitcast(v, reg)
            args.append(v)
        if c.op.startswith("combine:"):          # a reduction step instead of an op
            r = se.combine(c.op[len("combine:"):], args[0], args[1], c.result_dtype)
        else:
            r = se.emit(c.op, args, c.dts, c.result_dtype, c.params)
        out_mem = _mem_type(c.result_dtype)
        if c.result_dtype.is_bool:
            r = se.builder.zext(r, out_mem)
        elif r.type != out_mem:
            r = se.builder.bitcast(r, out_mem)
        se.builder.store(r, se.builder.gep(fn.args[0], [i], source_etype=out_mem))
        se.builder.branch(done)
        b.position_at_end(done)
        b.ret_void()

    def compile(self) -> str:
        mod = llvm.parse_assembly(str(self._module()))
        plan = validate_target(self.target, self.features)
        mod.verify()
        tm = llvm.Target.from_triple("nvptx64-nvidia-cuda").create_target_machine(
            cpu=plan.llvm_cpu, features=plan.llvm_features, opt=3)
        pb = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=3))
        pb.getModulePassManager().run(mod, pb)
        self.ptx = tm.emit_assembly(mod)
        return self.ptx

    def run(self, dev: EmulatorDevice | None = None) -> list[Case]:
        ptx = self.ptx or self.compile()
        dev = dev or EmulatorDevice(counters=False)
        mod = dev.load_module(ptx)
        for c in self.cases:
            ins = [(x, d) for x, d in zip(c.operands, c.dts) if d is not None]
            n = max(np.asarray(x).size for x, _ in ins) if ins else 1
            ptrs = [dev.to_device(np.ascontiguousarray(
                np.broadcast_to(to_device_values(x, d), (n,)))) for x, d in ins]
            st = storage_np(c.result_dtype)
            out = dev.malloc(max(n, 1) * st.itemsize)
            block = 128
            dev.launch(mod.get_function(c.name), ((n + block - 1) // block, 1, 1),
                       (block, 1, 1), [out] + ptrs + [np.int32(n)])
            c.out = from_device_values(dev.from_device(out, (n,), st), c.result_dtype)
        return self.cases


def _mem_type(d: DType) -> ir.Type:
    if d.is_bool:
        return ir.IntType(8)
    if d.name == "bf16":
        return ir.IntType(16)
    return llvm_type(d)


# ---------------------------------------------------------------------------------------------
# Comparison helpers

def same(actual: np.ndarray, expected: np.ndarray) -> np.ndarray:
    """Element-wise equality where NaN equals NaN and -0 differs from +0 for floats."""
    a, e = np.asarray(actual), np.asarray(expected)
    if a.dtype.kind == "f" or e.dtype.kind == "f":
        with np.errstate(invalid="ignore"):
            a64, e64 = a.astype(np.float64), e.astype(np.float64)
        return ((a64 == e64) & (np.signbit(a64) == np.signbit(e64))) | \
            (np.isnan(a64) & np.isnan(e64))
    return a == e


def assert_same(actual, expected, inputs=(), what=""):
    ok = same(actual, expected)
    if not ok.all():
        bad = np.flatnonzero(~ok)[:8]
        rows = [f"  [{i}] in={[np.asarray(x).reshape(-1)[i] if np.ndim(x) else x for x in inputs]}"
                f" got={np.asarray(actual).reshape(-1)[i]!r} want={np.asarray(expected).reshape(-1)[i]!r}"
                for i in bad]
        raise AssertionError(f"{what}: {(~ok).sum()} of {ok.size} differ\n" + "\n".join(rows))


def ulp_distance(actual: np.ndarray, expected: np.ndarray, np_dtype) -> np.ndarray:
    """Distance in units in the last place of `np_dtype` (float32/float64/float16), counting
    representable values between the two; NaN vs NaN is 0, NaN vs number is huge."""
    fdt = np.dtype(np_dtype)
    a = np.asarray(actual).astype(fdt)
    e = np.asarray(expected).astype(fdt)
    it = {2: np.int16, 4: np.int32, 8: np.int64}[fdt.itemsize]
    ai = a.view(it).astype(np.int64)
    ei = e.view(it).astype(np.int64)
    top = np.int64(1) << (fdt.itemsize * 8 - 1)
    ai = np.where(ai < 0, -(ai + top), ai)      # monotonic integer order
    ei = np.where(ei < 0, -(ei + top), ei)
    d = np.abs(ai - ei)
    both_nan = np.isnan(a) & np.isnan(e)
    one_nan = np.isnan(a) ^ np.isnan(e)
    d = np.where(both_nan, 0, d)
    return np.where(one_nan, np.int64(1) << 62, d)


def link_all(ptx: str, arches=("sm_80", "sm_90a")) -> None:
    from tilelang.codegen.target.link import link_ptx
    for arch in arches:
        link_ptx(ptx, get_target(arch), verbose=False)
