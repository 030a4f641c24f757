"""The built-in registry: every entry's typing rule on an accepted and a rejected call, the
operator table, argument binding and the diagnostics' wording. References are checked in
test_builtins_refs.py. The ArgInfo shorthands below build what the checker would pass."""

from __future__ import annotations

import pytest

from tilelang.diagnostics import Span, TileSemanticError, remember_source, render
from tilelang.sema.builtins import BUILTINS, OPERATORS, builtin_names, lookup
from tilelang.sema.types import VOID, Sym

from tilelang.sema.builtins import ArgInfo, arg_of_const, arg_of_dtype, bind_call, lookup, \
    lookup_operator
from tilelang.sema.builtins_core import CombineType
from tilelang.sema.constants import ConstStr, ConstTuple, ConstValue, const_bool, loose
from tilelang.sema.types import (DTYPES, ArrayListType, ArrayType, SymmetricArrayType, TileType,
                                 TupleType, scalar)


def T(dt: str, *shape: int) -> ArgInfo:
    """A run-time tile (no shape: a run-time scalar)."""
    return ArgInfo(TileType(DTYPES[dt], tuple(shape)))


def C(v) -> ArgInfo:
    """A loose constant (ints, floats) or a bool constant."""
    return arg_of_const(const_bool(v) if isinstance(v, bool) else loose(v))


def SC(dt: str, v) -> ArgInfo:
    """A strict constant."""
    return ArgInfo(scalar(DTYPES[dt]), ConstValue(v, DTYPES[dt]))


def TUP(*vals) -> ArgInfo:
    """A constant tuple of loose integers."""
    return arg_of_const(ConstTuple(tuple(loose(v) for v in vals)))


def RT(*elems: ArgInfo) -> ArgInfo:
    """A tuple expression with run-time elements."""
    return ArgInfo(TupleType(tuple(e.type for e in elems)), None, None, tuple(elems))


def A(dt: str, rank: int) -> ArgInfo:
    return ArgInfo(ArrayType(DTYPES[dt], rank))


def LST(dt: str, rank: int) -> ArgInfo:
    """A `List[Array[dt, rank]]` kernel parameter."""
    return ArgInfo(ArrayListType(ArrayType(DTYPES[dt], rank)))


def SYM(dt: str, rank: int) -> ArgInfo:
    """A `Symmetric[Array[dt, rank]]` kernel parameter."""
    return ArgInfo(SymmetricArrayType(ArrayType(DTYPES[dt], rank)))


def FN(*dts: str) -> ArgInfo:
    """A combine function the checker resolved for states of these dtypes."""
    state = tuple(DTYPES[d] for d in dts)
    return ArgInfo(CombineType("f", state, tuple(scalar(d) for d in state)))


def D(dt: str) -> ArgInfo:
    return arg_of_dtype(DTYPES[dt])


def STR(s: str) -> ArgInfo:
    return arg_of_const(ConstStr(s))


def bind(name: str, *pos: ArgInfo, **kw: ArgInfo):
    b = lookup(name)
    return bind_call(b, list(pos), kw, None)


def call(name: str, *pos: ArgInfo, **kw: ArgInfo):
    bound = bind(name, *pos, **kw)
    return bound.builtin.result_type(bound, None)


def op(spelling: str, *pos: ArgInfo):
    b = lookup_operator(spelling)
    names = [p.name for p in b.params]
    bound = bind_call(b, list(pos), {}, None)
    assert len(names) == len(pos)
    return b.result_type(bound, None)


# ---------------------------------------------------------------------------------------------
# One accepted and one rejected call per entry: name -> (args, kwargs, printed result type,
# rejected args, rejected kwargs, error code).

CASES: dict[str, tuple] = {
    # grid
    "bid": ((C(0),), {}, "i32", (C(3),), {}, "E0507"),
    "num_blocks": ((C(2),), {}, "i32", (T("i32"),), {}, "E0505"),
    "cluster_rank": ((), {}, "i32", (C(1),), {}, "E0502"),
    "cluster_size": ((), {}, "i32", (), {"axis": C(0)}, "E0504"),
    "cdiv": ((T("i32"), C(128)), {}, "i32", (T("f32"), C(2)), {}, "E0506"),
    # memory
    "load": ((A("f32", 2),), {"index": RT(T("i32"), C(0)), "shape": TUP(1, 1024),
                              "padding": C(float("-inf"))}, "Tile[f32, 1, 1024]",
             (A("f32", 2),), {"index": RT(T("i32"), C(0)), "shape": TUP(1, 1000)}, "E0301"),
    "store": ((A("f32", 1),), {"index": RT(T("i32")), "tile": T("f32", 1024)}, "()",
              (A("f32", 1),), {"index": RT(T("i32")), "tile": T("f16", 1024)}, "E0508"),
    "gather": ((A("f32", 1), T("i32", 128)), {}, "Tile[f32, 128]",
               (A("f32", 1), T("f32", 128)), {}, "E0506"),
    "scatter": ((A("f32", 2), RT(T("i32", 16, 1), T("i32", 1, 32)), T("f32", 16, 32)), {},
                "()", (A("f32", 2), RT(T("i32", 16, 1), T("i32", 1, 32)), T("f16", 16, 32)),
                {}, "E0508"),
    "num_tiles": ((A("f16", 2),), {"axis": C(1), "shape": TUP(128, 64)}, "i32",
                  (A("f16", 2),), {"axis": C(2), "shape": TUP(128, 64)}, "E0507"),
    "dim": ((A("f32", 2),), {"axis": C(1)}, "i32", (A("f32", 2),), {"axis": C(2)}, "E0507"),
    "is_none": ((A("f32", 2),), {}, "bool", (T("f32", 4),), {}, "E0506"),
    "list_item": ((LST("f16", 2), T("i32")), {}, "Array[f16, 2]", (A("f16", 2), T("i32")), {},
                  "E0506"),
    "len": ((LST("f32", 1),), {}, "i32", (A("f32", 1),), {}, "E0506"),
    # distributed (builtins_distributed.py)
    "peer": ((SYM("f16", 2), T("i32")), {}, "Array[f16, 2]", (LST("f16", 2), T("i32")), {},
             "E0506"),
    "rank": ((), {}, "i32", (T("i32"),), {}, "E0502"),
    "world_size": ((), {}, "i32", (T("i32"),), {}, "E0502"),
    "signal": ((A("u32", 1), T("i32"), C(1)), {"op": STR("add")}, "()",
               (A("f32", 1), T("i32"), C(1)), {}, "E0508"),
    "wait_until": ((A("i64", 1), C(0), STR("ge"), C(-3)), {}, "()",
                   (A("i64", 1), C(0), STR("gte"), C(1)), {}, "E0507"),
    "barrier": ((SYM("u32", 1),), {"channel": T("i32")}, "()", (A("u32", 1),), {}, "E0506"),
    "multimem_store": ((SYM("f32", 1), T("i32", 128), T("f32", 128)), {}, "()",
                       (SYM("f16", 1), T("i32", 128), T("f16", 128)), {}, "E0508"),
    "multimem_reduce": ((SYM("i64", 2), RT(T("i32", 4, 1), T("i32", 1, 8))), {"op": STR("min")},
                        "Tile[i64, 4, 8]", (SYM("f32", 1), T("i32", 128)), {"op": STR("max")},
                        "E0508"),
    "stride": ((A("f32", 2),), {"axis": C(-2)}, "i32", (T("f32", 4),), {"axis": C(0)},
               "E0506"),
    "atomic_add": ((A("f32", 1), T("i32", 64), C(1.0)), {}, "Tile[f32, 64]",
                   (A("i8", 1), T("i32", 64), C(1)), {}, "E0508"),
    "atomic_max": ((A("i32", 1), T("i32", 64), T("i32", 64)), {}, "Tile[i32, 64]",
                   (A("f16", 1), T("i32", 64), T("f16", 64)), {}, "E0508"),
    "atomic_min": ((A("u64", 1), T("i32", 8), C(3)), {}, "Tile[u64, 8]",
                   (A("u64", 1), T("i32", 8), C(-3)), {}, "E0401"),
    "atomic_and": ((A("u32", 1), T("i32", 8), C(0xFF)), {}, "Tile[u32, 8]",
                   (A("u32", 1), T("i32", 8), T("i32", 8)), {}, "E0508"),
    "atomic_or": ((A("i64", 2), RT(T("i32", 8, 1), T("i32", 1, 4)), C(1)), {},
                  "Tile[i64, 8, 4]", (A("i64", 2), T("i32", 8), C(1)), {}, "E0509"),
    "atomic_xor": ((A("i32", 1), T("i32", 8), C(1)), {"mask": T("bool", 8)}, "Tile[i32, 8]",
                   (A("i32", 1), T("i32", 8), C(1)), {"mask": T("i32", 8)}, "E0508"),
    "atomic_xchg": ((A("f32", 1), T("i32", 4), C(0.5)), {}, "Tile[f32, 4]",
                    (A("f16", 1), T("i32", 4), C(0.5)), {}, "E0508"),
    "atomic_cas": ((A("i32", 1), T("i32", 4), C(0), C(1)), {}, "Tile[i32, 4]",
                   (A("i32", 1), T("i32", 4), C(0), C(2 ** 40)), {}, "E0401"),
    "fence": ((), {"sem": STR("sc"), "scope": STR("block")}, "()", (), {"sem": STR("relaxed")},
              "E0507"),
    # creation
    "arange": ((C(128),), {}, "Tile[i32, 128]", (C(100),), {}, "E0301"),
    "full": ((TUP(4, 8), C(2.5), D("f16")), {}, "Tile[f16, 4, 8]",
             (TUP(4, 8), C(2.5), D("i32")), {}, "E0307"),
    "zeros": ((TUP(128, 128), D("f32")), {}, "Tile[f32, 128, 128]", (TUP(3),), {}, "E0301"),
    "ones": ((TUP(8),), {}, "Tile[f32, 8]", (RT(T("i32")),), {}, "E0505"),
    # shape
    "reshape": ((T("f32", 4, 8), TUP(32)), {}, "Tile[f32, 32]",
                (T("f32", 4, 8), TUP(16)), {}, "E0509"),
    "permute": ((T("f32", 2, 4, 8), TUP(2, 0, 1)), {}, "Tile[f32, 8, 2, 4]",
                (T("f32", 2, 4, 8), TUP(0, 0, 1)), {}, "E0507"),
    "transpose": ((T("f32", 4, 8),), {}, "Tile[f32, 8, 4]", (T("f32", 4),), {}, "E0509"),
    "expand_dims": ((T("f32", 4), C(0)), {}, "Tile[f32, 1, 4]",
                    (T("f32", 4), C(2)), {}, "E0507"),
    "broadcast_to": ((T("f32", 1, 8), TUP(4, 8)), {}, "Tile[f32, 4, 8]",
                     (T("f32", 2, 8), TUP(4, 8)), {}, "E0306"),
    "cat": ((T("f32", 4, 8), T("f32", 4, 4)), {"axis": C(1)}, "Tile[f32, 4, 16]",
            (T("f32", 4, 8), T("f32", 2, 4)), {"axis": C(1)}, "E0509"),
    "pad": ((T("f32", 4, 6 + 2), arg_of_const(ConstTuple((
                ConstTuple((loose(1), loose(3))), ConstTuple((loose(0), loose(8))))))),
            {"value": C(-1.0)}, "Tile[f32, 8, 16]",
            (T("f32", 4, 8), arg_of_const(ConstTuple((
                ConstTuple((loose(1), loose(2))), ConstTuple((loose(0), loose(0))))))),
            {}, "E0509"),
    "extract": ((T("f32", 8, 16), TUP(1, 0), TUP(4, 8)), {}, "Tile[f32, 4, 8]",
                (T("f32", 8, 16), TUP(2, 0), TUP(4, 8)), {}, "E0507"),
    "take": ((T("f32", 8, 16), T("i32")), {"axis": C(1)}, "Tile[f32, 8]",
             (T("f32", 8, 16), C(8)), {}, "E0507"),
    # dtype
    "astype": ((T("f32", 4), D("f16")), {}, "Tile[f16, 4]", (T("f32", 4), C(1)), {}, "E0506"),
    "is_floating": ((D("bf16"),), {}, "bool", (T("f32"),), {}, "E0506"),
    "is_integer": ((D("u8"),), {}, "bool", (C(1),), {}, "E0506"),
    "bits": ((D("f8e4m3"),), {}, "int literal", (T("f32", 4),), {}, "E0506"),
    "bitcast": ((T("f32", 4), D("u32")), {}, "Tile[u32, 4]",
                (T("f32", 4), D("f16")), {}, "E0508"),
    # math
    "floor": ((T("i32", 4),), {}, "Tile[i32, 4]", (T("bool", 4),), {}, "E0508"),
    "ceil": ((T("bf16", 4),), {}, "Tile[bf16, 4]", (T("f8e4m3", 4),), {}, "E0508"),
    "abs": ((C(-3),), {}, "i32", (T("bool"),), {}, "E0508"),
    "minimum": ((T("f32", 4, 1), C(0)), {}, "Tile[f32, 4, 1]",
                (T("i32", 4), T("u32", 4)), {}, "E0302"),
    "maximum": ((T("u8", 4), C(255)), {}, "Tile[u8, 4]", (T("u8", 4), C(256)), {}, "E0401"),
    "pow": ((T("f16", 4), C(2)), {}, "Tile[f16, 4]", (T("i32", 4), C(2)), {}, "E0508"),
    "atan2": ((T("f32", 4), T("f32", 4)), {}, "Tile[f32, 4]",
              (T("f16", 4), T("bf16", 4)), {}, "E0304"),
    "floordiv": ((T("i32", 4), C(2)), {}, "Tile[i32, 4]",
                 (T("i32", 4), T("u32", 4)), {}, "E0302"),
    "fma": ((T("f32", 4), T("f32", 4), C(1.0)), {}, "Tile[f32, 4]",
            (T("f32", 4), T("f32", 8), T("f32", 4)), {}, "E0306"),
    "where": ((T("bool", 4), T("f32", 4), C(0.0)), {}, "Tile[f32, 4]",
              (T("i32", 4), T("f32", 4), C(0.0)), {}, "E0508"),
    "trunc": ((T("f32", 4),), {}, "Tile[f32, 4]", (T("bool", 4),), {}, "E0508"),
    "rint": ((T("i8", 4),), {}, "Tile[i8, 4]", (T("tf32", 4),), {}, "E0508"),
    "round": ((C(2.5),), {}, "f32", (T("bool"),), {}, "E0508"),
    "sign": ((T("i16", 4),), {}, "Tile[i16, 4]", (T("bool", 4),), {}, "E0508"),
    "isnan": ((T("f16", 4),), {}, "Tile[bool, 4]", (T("bool", 4),), {}, "E0508"),
    "isinf": ((T("i32", 4),), {}, "Tile[bool, 4]", (T("f8e5m2", 4),), {}, "E0508"),
    "isfinite": ((T("f64"),), {}, "bool", (T("bool"),), {}, "E0508"),
    "copysign": ((T("f32", 4), C(-1.0)), {}, "Tile[f32, 4]",
                 (T("i32", 4), T("i32", 4)), {}, "E0508"),
    "fmod": ((T("f16", 4), T("f16", 4)), {}, "Tile[f16, 4]", (T("i32", 4), C(2)), {}, "E0508"),
    "hypot": ((T("f32", 4, 1), T("f32", 1, 8)), {}, "Tile[f32, 4, 8]",
              (T("f32", 4), T("f32", 8)), {}, "E0306"),
    "div": ((T("i32", 4), C(2)), {"precision": STR("ieee")}, "Tile[f32, 4]",
            (T("f32", 4), C(2.0)), {"precision": STR("exact")}, "E0507"),
    # reduce / scan
    "sum": ((T("f16", 4, 8),), {"axis": C(1), "keepdims": C(True)}, "Tile[f16, 4, 1]",
            (T("f16", 4, 8),), {"axis": C(2)}, "E0507"),
    "prod": ((T("i8", 4, 8),), {}, "i32", (T("tf32", 4),), {}, "E0508"),
    "max": ((T("f32", 4, 8),), {"axis": C(0)}, "Tile[f32, 8]",
            (T("f32", 4, 8),), {"axis": T("i32")}, "E0505"),
    "min": ((T("u16", 4, 8),), {"keepdims": C(True)}, "Tile[u16, 1, 1]",
            (T("u16", 4, 8),), {"keepdims": C(1)}, "E0507"),
    "argmax": ((T("f32", 4, 8),), {"axis": C(-1)}, "Tile[i32, 4]",
               (T("f32", 4, 8),), {"axis": C(-3)}, "E0507"),
    "argmin": ((T("f64", 16),), {}, "i32", (T("f64", 16),), {"axis": C(0.5)}, "E0507"),
    "cumsum": ((T("u8", 4, 8),), {"axis": C(1)}, "Tile[u32, 4, 8]", (T("f32"),), {}, "E0509"),
    "sort": ((T("bf16", 4, 8),), {"descending": C(True)}, "Tile[bf16, 4, 8]", (T("bool", 8),),
             {}, "E0508"),
    "argsort": ((T("u16", 4, 8),), {"axis": C(0)}, "Tile[i32, 4, 8]", (T("f32"),), {}, "E0509"),
    "topk": ((T("f16", 4, 8), C(4)), {}, "(Tile[f16, 4, 4], Tile[i32, 4, 4])",
             (T("f16", 4, 8), C(3)), {}, "E0507"),
    "reduce": ((RT(T("f32", 4, 8), T("i32", 4, 8)), FN("f32", "i32")), {"axis": C(1)},
               "(Tile[f32, 4], Tile[i32, 4])", (T("f32", 4, 8), C(1.0)), {}, "E0530"),
    "scan": ((T("u8", 4, 8), FN("u8")), {"axis": C(1), "reverse": C(True)}, "Tile[u8, 4, 8]",
             (T("u8", 4, 8), FN("f32")), {}, "E0530"),
    "cumprod": ((T("f32", 4, 8),), {}, "Tile[f32, 4, 8]",
                (T("f32", 4, 8),), {"axis": C(5)}, "E0507"),
    # matmul
    "mma": ((T("f16", 128, 64), T("f16", 64, 128), T("f32", 128, 128)), {},
            "Tile[f32, 128, 128]",
            (T("bf16", 128, 64), T("bf16", 64, 128), T("f16", 128, 128)), {}, "E0508"),
    "mma_scaled": ((T("f4e2m1", 16, 64), T("f8e4m3", 16, 4), T("f4e2m1", 64, 8),
                    T("f8e4m3", 4, 8), T("f32", 16, 8)), {}, "Tile[f32, 16, 8]",
                   (T("f8e4m3", 16, 64), T("ue8m0", 16, 4), T("f8e4m3", 64, 8),
                    T("ue8m0", 2, 8), T("f32", 16, 8)), {}, "E0509"),
    "unpack_f4": ((T("f4e2m1x2", 16, 8),), {"axis": C(0)}, "Tile[f4e2m1, 32, 8]",
                  (T("u8", 16, 8),), {}, "E0508"),
    "matmul": ((T("i8", 16, 32), T("i8", 32, 8)), {}, "Tile[i32, 16, 8]",
               (T("f16", 16, 32), T("f16", 16, 8)), {}, "E0509"),
    # random
    "randint": ((T("i64"), T("i32", 4, 8)), {}, "Tile[u32, 4, 8]",
                (T("i64", 2), T("i32", 4)), {}, "E0509"),
    "rand": ((C(7), T("u64", 16)), {}, "Tile[f32, 16]", (C(1.5), T("i32", 4)), {}, "E0508"),
    "randn": ((T("u32"), C(3)), {}, "f32", (T("i32"), T("f32", 4)), {}, "E0508"),
    # debug
    "print": ((STR("x = {} y = {}"), T("f32"), T("i32", 4)), {}, "()", (STR("{}"),), {},
              "E0507"),
    "assert": ((T("bool", 4), STR("m")), {}, "()", (T("i32"),), {}, "E0508"),
    "static_assert": ((C(True),), {}, "()", (C(False), STR("N too big")), {}, "E0511"),
}

FLOAT_UNARY = ("exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid",
               "erf", "log10", "log1p", "expm1", "cbrt", "tan", "atan", "asin", "acos", "sinh",
               "cosh", "asinh", "acosh", "atanh")
for _n in FLOAT_UNARY:
    CASES[_n] = ((T("f16", 4),), {}, "Tile[f16, 4]", (T("i32", 4),), {}, "E0508")
for _dt, _ok in (("bool", C(True)), ("i8", C(-128)), ("i16", C(5)), ("i32", C(2.0)),
                 ("i64", C(2 ** 62)), ("u8", C(255)), ("u16", C(1)), ("u32", C(1)),
                 ("u64", C(2 ** 64 - 1)), ("f16", C(0.5)), ("bf16", C(1)), ("f32", C(0.5)),
                 ("f64", C(1e300)), ("tf32", C(1.0)), ("f8e4m3", C(448.0)),
                 ("f8e5m2", C(-57344.0)), ("f4e2m1", C(-6.0)), ("f6e2m3", C(7.5)),
                 ("f6e3m2", C(0.25)), ("ue8m0", C(2.0 ** -127)), ("f4e2m1x2", C(0x21))):
    CASES[_dt] = ((_ok,), {}, _dt, (T("i32"),), {}, "E0505")


def test_reduce_part_picks_one_tile():
    x = RT(T("f32", 4, 8), T("i32", 4, 8))
    assert str(call("reduce", x, FN("f32", "i32"), part=C(1))) == "i32"
    with pytest.raises(TileSemanticError) as e:
        call("reduce", x, FN("f32", "i32"), part=C(2))
    assert e.value.diagnostics[0].message == "`reduce`: parameter `part` must be 0 to 1, found 2"


def test_every_builtin_has_a_case():
    assert sorted(CASES) == builtin_names()


@pytest.mark.parametrize("name", sorted(CASES))
def test_accepted_call(name):
    args, kwargs, want = CASES[name][:3]
    assert str(call(name, *args, **kwargs)) == want


@pytest.mark.parametrize("name", sorted(CASES))
def test_rejected_call(name):
    _, _, _, args, kwargs, code = CASES[name]
    with pytest.raises(TileSemanticError) as e:
        call(name, *args, **kwargs)
    assert e.value.code == code, e.value.diagnostics[0].message
    msg = e.value.diagnostics[0].message
    # argument errors name the operation; promotion/constant errors say what clashed
    assert f"`{name}`" in msg or code in ("E0301", "E0302", "E0304", "E0306", "E0307",
                                          "E0401", "E0511"), msg


@pytest.mark.parametrize("pos,kw,code", [
    ((T("f32", 8, 16), T("i32", 8, 4)), {}, "E0503"),                   # no axis
    ((T("f32", 8, 16), T("f32", 8, 4)), {"axis": C(1)}, "E0506"),       # float indices
    ((T("f32", 8, 16), T("i32", 4, 4)), {"axis": C(1)}, "E0509"),       # other extent differs
    ((T("f32", 8, 16), T("i32", 8, 4)), {"axis": C(1), "padding": C(0)}, "E0504"),
    ((A("f32", 2), RT(T("i32", 4), T("i32", 4))), {"axis": C(0)}, "E0504"),
])
def test_gather_within_a_tile_rejections(pos, kw, code):
    with pytest.raises(TileSemanticError) as e:
        call("gather", *pos, **kw)
    assert e.value.code == code, e.value.diagnostics[0].message
    assert str(call("gather", T("u8", 8, 16), T("i64", 8, 2), axis=C(-1))) == "Tile[u8, 8, 2]"


def test_entries_are_consistent():
    for name, b in BUILTINS.items():
        assert b.name == name and b.group in ("grid", "memory", "creation", "shape", "dtype",
                                              "math", "random", "reduce", "scan", "sort",
                                              "matmul",
                                              "debug")
        assert callable(b.typing) and callable(b.ref) and b.doc
    effects = {n for n, b in BUILTINS.items() if b.side_effects}
    assert effects == {"store", "scatter", "print", "assert", "fence", "signal", "wait_until",
                       "barrier", "multimem_store", "multimem_reduce"} | {
        f"atomic_{o}" for o in ("add", "max", "min", "and", "or", "xor", "xchg", "cas")}
    assert BUILTINS["bid"].scalar_only and not BUILTINS["load"].scalar_only
    assert OPERATORS["@"] is BUILTINS["matmul"]


# ---------------------------------------------------------------------------------------------
# Operators: typed exactly like calls.

OPERATOR_CASES = {
    "+": ((T("i8", 4), C(2)), "Tile[i8, 4]", (T("i8", 4), C(200)), "E0401"),
    "-": ((T("f16", 4, 1), T("f16", 8)), "Tile[f16, 4, 8]", (T("bool", 4), T("bool", 4)),
          "E0305"),
    "*": ((T("i32", 4), C(0.5)), "Tile[f32, 4]", (T("u8", 4), T("i8", 4)), "E0302"),
    "/": ((T("i32", 4), C(2)), "Tile[f32, 4]", (T("tf32", 4), T("tf32", 4)), "E0311"),
    "//": ((T("i64"), T("i32")), "i64", (T("f16", 2), T("bf16", 2)), "E0304"),
    "%": ((T("u32", 2), C(7)), "Tile[u32, 2]", (T("u32", 2), C(-7)), "E0401"),
    "**": ((T("f32", 2), C(2)), "Tile[f32, 2]", (T("f32", 2), T("f32", 4)), "E0306"),
    "&": ((T("bool", 8), T("bool", 8)), "Tile[bool, 8]", (T("f32", 8), C(1)), "E0311"),
    "|": ((T("u8", 8), C(1)), "Tile[u8, 8]", (T("f16", 8), T("f16", 8)), "E0311"),
    "^": ((T("i16", 8), T("i8", 8)), "Tile[i16, 8]", (T("f64"), C(1)), "E0311"),
    "<<": ((T("u32", 8), C(3)), "Tile[u32, 8]", (T("bool", 8), T("bool", 8)), "E0311"),
    ">>": ((T("i32", 8), T("i32", 8)), "Tile[i32, 8]", (T("f32", 8), C(1)), "E0311"),
    "==": ((T("f32", 8), C(0.0)), "Tile[bool, 8]", (T("i32", 8), T("u32", 8)), "E0302"),
    "!=": ((T("i32", 8), C(0)), "Tile[bool, 8]", (T("f8e5m2", 8), C(0)), "E0311"),
    "<": ((T("i32", 128), T("i32")), "Tile[bool, 128]", (T("i32", 8), T("i32", 4)), "E0306"),
    "<=": ((C(1), C(2)), "bool", (T("i8"), C(1000)), "E0401"),
    ">": ((T("f64", 2), T("f32", 2)), "Tile[bool, 2]", (T("bf16"), T("f16")), "E0304"),
    ">=": ((T("bool", 2), C(True)), "Tile[bool, 2]", (T("tf32", 2), T("f32", 2)), "E0311"),
    "and": ((T("bool"), C(True)), "bool", (T("bool", 4), T("bool", 4)), "E0510"),
    "or": ((C(False), T("bool")), "bool", (T("i32"), T("bool")), "E0506"),
    "not": ((T("bool"),), "bool", (C(1),), "E0506"),
    "u-": ((T("i8", 4),), "Tile[i8, 4]", (T("bool", 4),), "E0305"),
    "u+": ((C(2.5),), "float literal", (T("f8e4m3", 4),), "E0311"),
    "~": ((T("u8", 4),), "Tile[u8, 4]", (T("f32", 4),), "E0311"),
    "[]": ((A("f32", 2), RT(T("i32"), C(3)), STR("A[i, 3]")), "f32",
           (A("f32", 2), RT(T("i32")), STR("A[i]")), "E0509"),
    "@": ((T("f16", 64, 32), T("f16", 32, 16)), "Tile[f32, 64, 16]",
          (T("f16", 64, 32), T("bf16", 32, 16)), "E0508"),
}


def test_every_operator_has_a_case():
    assert sorted(OPERATOR_CASES) == sorted(OPERATORS)


@pytest.mark.parametrize("spelling", sorted(OPERATOR_CASES))
def test_operator(spelling):
    ok, want, bad, code = OPERATOR_CASES[spelling]
    assert str(op(spelling, *ok)) == want
    with pytest.raises(TileSemanticError) as e:
        op(spelling, *bad)
    assert e.value.code == code, e.value.diagnostics[0].message


def test_operator_and_call_agree():
    # `a @ b` is `matmul(a, b)`; `maximum` promotes like `+`
    args = (T("i8", 16, 32), T("i8", 32, 8))
    assert op("@", *args) == call("matmul", *args)
    assert call("maximum", T("i16", 4), C(3)) == op("+", T("i16", 4), C(3))


def test_loose_operands_fold():
    from tilelang.sema.constants import ConstValue, loose
    from tilelang.sema.types import DTYPES
    b = lookup_operator("+")
    bound = bind_call(b, [SC("i16", 5), C(2)], {}, None)
    assert str(b.result_type(bound)) == "i16" and b.can_fold(bound)
    assert b.fold(bound, None) == ConstValue(7, DTYPES["i16"])  # seed 001_45fa852e188b7288.txt
    bound = bind_call(b, [C(2 ** 70), C(1)], {}, None)
    assert str(b.result_type(bound)) == "int literal"
    assert b.fold(bound, None) == loose(2 ** 70 + 1)
    bound = bind_call(b, [T("i32"), C(1)], {}, None)
    assert not b.can_fold(bound)
    cd = lookup("cdiv")
    bound = bind_call(cd, [C(1000), C(128)], {}, None)
    assert cd.can_fold(bound) and cd.fold(bound, None) == loose(8)
    bound = bind_call(cd, [SC("i32", -7), C(2)], {}, None)
    assert cd.fold(bound, None) == ConstValue(-3, DTYPES["i32"])
    with pytest.raises(TileSemanticError) as e:
        cd.fold(bind_call(cd, [C(1), C(0)], {}, None), None)
    assert e.value.code == "E0403"
    i16 = lookup("i16")
    assert i16.fold(bind_call(i16, [C(5)], {}, None), None) == ConstValue(5, DTYPES["i16"])
    at = lookup("astype")
    assert at.fold(bind_call(at, [C(300), D("i8")], {}, None), None) == \
        ConstValue(44, DTYPES["i8"])
    assert at.fold(bind_call(at, [C(-2.7), D("u8")], {}, None), None) == \
        ConstValue(0, DTYPES["u8"])


# ---------------------------------------------------------------------------------------------
# Binding and the wording of diagnostics

def test_binding_positional_keywords_defaults():
    b = bind("load", A("f16", 2), RT(T("i32"), C(0)), TUP(128, 64))
    assert b["padding"] is None and b["order"] is None and b.given("shape")
    b = bind("sum", T("f32", 4))
    assert b["axis"] is None and b["keepdims"].const.value is False
    b = bind("print", STR("{} {}"), T("f32"), C(1))
    assert len(b.varargs) == 2
    assert lookup("load").signature() == \
        "load(A, index=None, shape, padding=None, order=None, *, mask=None, offset=None)"
    assert lookup("zeros").signature() == "zeros(shape, dtype=f32)"
    assert lookup("print").signature() == "print(fmt, *args)"


@pytest.mark.parametrize("name,pos,kw,code", [
    ("load", (A("f32", 1),), {"shape": TUP(4)}, "E0512"),          # neither index nor offset
    ("load", (A("f32", 1), RT(T("i32"))), {}, "E0503"),
    ("load", (A("f32", 1), RT(T("i32")), TUP(4)), {"shape": TUP(4)}, "E0504"),
    ("load", (A("f32", 1), RT(T("i32")), TUP(4)), {"pad": C(0)}, "E0504"),
    ("bid", (C(0), C(1)), {}, "E0502"),
    ("bid", (T("i32", 4),), {}, "E0505"),
    ("cdiv", (T("i32", 4), C(2)), {}, "E0510"),
    ("astype", (T("f32"), T("i32")), {}, "E0506"),
    ("print", (C(1),), {}, "E0506"),
    ("load", (T("f32", 4), RT(C(0)), TUP(4)), {}, "E0506"),
    ("load", (A("f32", 2), RT(C(0)), TUP(4, 4)), {}, "E0509"),
    ("load", (A("f32", 1), RT(T("f32")), TUP(4)), {}, "E0506"),
    ("load", (A("f32", 1), RT(C(0)), TUP(4, 4)), {}, "E0509"),
    ("load", (A("f32", 2), RT(C(0), C(0)), TUP(4, 4)), {"order": TUP(1, 1)}, "E0507"),
    ("load", (A("f16", 1), RT(C(0)), TUP(4)), {"padding": C(1e6)}, "E0401"),
    ("load", (A("f16", 1), RT(C(0)), TUP(4)), {"padding": T("f16", 4)}, "E0510"),
    ("store", (A("f32", 2), RT(C(0), C(0)), T("f32", 4)), {}, "E0509"),
    ("mma", (T("f16", 16, 16), T("f16", 16, 8), T("f32", 16, 16)), {}, "E0509"),
    ("mma", (T("f32", 2, 2, 2), T("f32", 3 and 2, 2, 2), T("f32", 2, 2, 2)), {}, None),
    ("mma", (T("i32", 16, 16), T("i32", 16, 16), T("i32", 16, 16)), {}, "E0508"),
    ("mma", (T("f8e4m3", 16, 32), T("f8e5m2", 32, 8), T("f32", 16, 8)), {}, None),
    ("full", (TUP(4), T("f32", 4)), {}, "E0510"),
    ("arange", (C(64),), {"dtype": D("tf32")}, "E0508"),
    ("arange", (C(512),), {"dtype": D("i8")}, "E0507"),
    ("reshape", (T("f32", 4), TUP(2, 3)), {}, "E0301"),
    ("static_assert", (T("bool"),), {}, "E0505"),
    ("print", (STR("{"), T("f32")), {}, "E0507"),
    ("bitcast", (C(1), D("f32")), {}, "E0506"),
    ("bitcast", (T("bool", 4), D("u8")), {}, "E0508"),
])
def test_more_rejections(name, pos, kw, code):
    if code is None:
        call(name, *pos, **kw)
        return
    with pytest.raises(TileSemanticError) as e:
        call(name, *pos, **kw)
    assert e.value.code == code, e.value.diagnostics[0].message


def test_unknown_builtin_suggests():
    with pytest.raises(TileSemanticError) as e:
        lookup("lod")
    assert e.value.code == "E0501" and e.value.diagnostics[0].help == "did you mean `load`?"


def test_parameter_error_names_op_parameter_and_source():
    src = "    let t = load(a, index = (i, 0), shape = (1.5, n), padding = 0.0);"
    remember_source("b.tile", src)
    shape = src.index("(1.5")
    from tilelang.sema.builtins import ArgInfo
    from tilelang.sema.constants import ConstTuple, loose
    from tilelang.sema.types import LOOSE_FLOAT, LOOSE_INT, TupleType
    arg_span = Span("b.tile", 1, shape + 1, 1, shape + 9)
    bad = ArgInfo(TupleType((LOOSE_FLOAT, LOOSE_INT)), ConstTuple((loose(1.5), loose(8))),
                  arg_span)
    with pytest.raises(TileSemanticError) as e:
        call("load", A("f32", 2), RT(T("i32"), C(0)), bad)
    assert render(e.value.diagnostics[0]) == "\n".join([
        "error[E0507]: `load`: parameter `shape` must be a tuple of constant integers, "
        "found `(1.5, n)` (element 0 is the float 1.5)",
        " --> b.tile:1:45",
        "  |",
        "1 |     let t = load(a, index = (i, 0), shape = (1.5, n), padding = 0.0);",
        "  |                                             ^^^^^^^^",
        "  |",
        "  = help: shape dimensions are integers: write integer constants, or convert with "
        "`i32(...)`",
    ])


def test_promotion_error_inside_call_gets_a_note():
    with pytest.raises(TileSemanticError) as e:
        call("minimum", T("i32", 4), T("u32", 4))
    assert e.value.diagnostics[0].notes == ("in this call to `minimum`",)
    with pytest.raises(TileSemanticError) as e:
        op("+", T("i32", 4), T("u32", 4))
    assert e.value.diagnostics[0].notes == ("in `+`",)


def test_symbolic_shapes():
    n = Sym("N")
    from tilelang.sema.builtins import arg_of_const
    from tilelang.sema.constants import ConstTuple, ConstValue, loose
    from tilelang.sema.types import DTYPES
    shape = arg_of_const(ConstTuple((loose(1), ConstValue(n, DTYPES["i32"]))))
    t = call("load", A("f32", 2), RT(T("i32"), C(0)), shape, padding=C(float("-inf")))
    assert str(t) == "Tile[f32, 1, N]"
    from tilelang.sema.builtins import ArgInfo
    from tilelang.sema.types import TileType
    x = ArgInfo(TileType(DTYPES["f32"], (1, n)))
    assert str(call("max", x, axis=C(1), keepdims=C(True))) == "Tile[f32, 1, 1]"
    assert str(op("-", x, ArgInfo(TileType(DTYPES["f32"], (1, 1))))) == "Tile[f32, 1, N]"
    assert call("store", A("f32", 2), RT(T("i32"), C(0)), x) == VOID


def test_symbolic_constants_type_but_do_not_fold():
    from tilelang.sema.builtins import ArgInfo, lookup_operator
    from tilelang.sema.constants import ConstValue
    from tilelang.sema.types import LOOSE_INT
    n = ArgInfo(LOOSE_INT, ConstValue(Sym("N")))
    assert str(op("<", T("i32", 128), n)) == "Tile[bool, 128]"  # N takes i32, checked later
    assert str(op("*", n, C(2))) == "int literal"
    b = lookup_operator("*")
    assert not b.can_fold(bind_call(b, [n, C(2)], {}, None))
    assert b.can_fold(bind_call(b, [C(3), C(2)], {}, None))
