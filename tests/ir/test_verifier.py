"""The verifier accepts every sample and rejects malformed IR with messages that name the
kernel, show the op as printed and say what is wrong."""

from __future__ import annotations

import pytest

from tilelang.diagnostics import TileSemanticError
from tilelang.ir import (Block, BreakOp, ContinueOp, ForOp, IfOp, IRBuildError, KernelBuilder,
                         IRVerificationError, ReturnOp, Value, YieldOp, module, samples, verify)
from tilelang.record import replace
from tilelang.sema.constants import ConstValue
from tilelang.sema.types import F16, F32, I32, I64, ArrayType, TileType, scalar


def _with_ops(k, ops):
    return replace(k, body=Block((), tuple(ops)))


def _reject(k, pattern):
    with pytest.raises(IRVerificationError, match=pattern):
        verify(module(k))


def test_use_before_def():
    k = samples.vadd()
    ops = list(k.body.ops)
    ops[0], ops[1] = ops[1], ops[0]          # the load now uses bid's result before it
    _reject(_with_ops(k, ops), r"kernel `vadd`: `%1 = load\(%a, index=\(%0,\).*`: "
                               r"%0 is used before its definition")


def test_never_defined():
    k = samples.vadd()
    ghost = Value(999, scalar(I32))
    load = replace(k.body.ops[1], args=(("A", k.params[0]), ("index", ghost)) +
                   k.body.ops[1].args[2:])
    _reject(_with_ops(k, [k.body.ops[0], load] + list(k.body.ops[2:])),
            r"is used but never defined")


def test_result_type_mismatch():
    k = samples.vadd()
    ops = list(k.body.ops)
    ops[3] = replace(ops[3], result=Value(ops[3].result.id, TileType(F16, (1024,))))
    _reject(_with_ops(k, ops), r"the result type is Tile\[f16, 1024\] but `\+` gives "
                               r"Tile\[f32, 1024\]")


def test_operand_types_rejected_by_registry():
    k = samples.vadd()
    ops = list(k.body.ops)
    wrong = Value(ops[2].result.id, TileType(F32, (512,)))   # y now has 512 elements
    ops[2] = replace(ops[2], result=wrong)
    _reject(_with_ops(k, ops), r"load.*the result type is Tile\[f32, 512\]")


def test_registry_rejects_operands():
    kb = KernelBuilder("bad")
    a = kb.param("a", ArrayType(F32, 1))
    i = kb.op("bid", 0)
    x = kb.op("load", a, index=(i,), shape=(8,))
    k = kb.finish()
    # the load's array operand replaced by an i32 scalar
    bad_op = replace(k.body.ops[1], args=(("A", i),) + k.body.ops[1].args[1:])
    _reject(_with_ops(k, [k.body.ops[0], bad_op, k.body.ops[-1]]),
            r"the registry rejects the operand types: `load`: parameter `A` must be an array")
    assert x is not None


def test_wrong_yield_types():
    k = samples.signed_scale()
    ops = list(k.body.ops)
    ifop = next(o for o in ops if isinstance(o, IfOp))
    then = ifop.then
    bad_then = replace(then, ops=then.ops[:-1] + (YieldOp((k.params[0],)),))
    ops[ops.index(ifop)] = replace(ifop, then=bad_then)
    _reject(_with_ops(k, ops), r"yields \(Array\[f32, 1\]\) but \(Tile\[f32, 256\]\) is "
                               r"expected")


def test_loop_carried_type_must_be_kept():
    k = samples.matmul()
    ops = list(k.body.ops)
    loop = next(o for o in ops if isinstance(o, ForOp))
    body = loop.body
    first_load = body.ops[0].result
    bad = replace(body, ops=body.ops[:-1] + (YieldOp((first_load,)),))
    ops[ops.index(loop)] = replace(loop, body=bad)
    _reject(_with_ops(k, ops), r"yields \(Tile\[f16, 32, 16\]\) but \(Tile\[f32, 32, 32\]\)")


def test_break_outside_loop_and_with_wrong_values():
    k = samples.vadd()
    _reject(_with_ops(k, list(k.body.ops[:-1]) + [BreakOp(())]), r"`break` outside a loop")
    k = samples.odd_sum()
    ops = list(k.body.ops)
    loop = next(o for o in ops if isinstance(o, ForOp))
    stop_if = loop.body.ops[1]
    bad_if = replace(stop_if, then=Block((), (ContinueOp(()),)))
    ops[ops.index(loop)] = replace(loop, body=replace(
        loop.body, ops=(loop.body.ops[0], bad_if) + loop.body.ops[2:]))
    _reject(_with_ops(k, ops), r"`continue` gives \(\) but \(i32\) is expected")


def test_value_used_outside_its_region():
    k = samples.signed_scale()
    ops = list(k.body.ops)
    ifop = next(o for o in ops if isinstance(o, IfOp))
    inner = ifop.then.ops[0].result               # t * 2.0, defined in the then branch
    store = ops[-2]
    ops[-2] = replace(store, args=store.args[:2] + (("tile", inner),))
    _reject(_with_ops(k, ops), r"is used outside the region that defines it")


def test_missing_terminator_and_code_after_terminator():
    k = samples.vadd()
    _reject(_with_ops(k, k.body.ops[:-1]), r"a kernel region does not end in a terminator")
    _reject(_with_ops(k, (ReturnOp(),) + k.body.ops), r"a terminator is followed by more")


def test_bool_condition_and_loop_bounds():
    k = samples.signed_scale()
    ops = list(k.body.ops)
    i = next(n for n, o in enumerate(ops) if isinstance(o, IfOp))
    ops[i] = replace(ops[i], cond=ops[0].result)
    _reject(_with_ops(k, ops), r"the condition %0 is i32, not a bool scalar")
    kb = KernelBuilder("bounds")
    n = kb.param("n", scalar(I64))
    loop = kb.for_(kb.constant(0, I32), n, kb.constant(1, I32))
    with loop.body():
        pass
    loop.end()
    _reject(kb.finish(), r"the bounds and induction variable have types \(i64, i32, i32\) "
                         r"but \(i32, i32, i32\) is expected")


def test_double_definition():
    k = samples.vadd()
    ops = list(k.body.ops)
    _reject(_with_ops(k, [ops[0], ops[0]] + ops[1:]), r"%0 is defined more than once")


def test_builder_reports_registry_errors_and_misuse():
    kb = KernelBuilder("k")
    a = kb.param("a", ArrayType(F32, 2))
    with pytest.raises(TileSemanticError, match="index"):
        kb.op("load", a, index=(0,), shape=(4, 4))
    with pytest.raises(IRBuildError, match="not a run-time value"):
        kb.op("+", 1, 2)
    kb.return_()
    with pytest.raises(IRBuildError, match="after the region's terminator"):
        kb.op("bid", 0)


@pytest.mark.parametrize("name", ["vadd", "softmax_rows", "matmul", "collatz_steps",
                                  "odd_sum", "signed_scale", "optimizable"])
def test_samples_verify(name):
    verify(module(getattr(samples, name)()))


def _bid_of_constant():
    kb = KernelBuilder("k")
    a = kb.param("a", ArrayType(F32, 1))
    i = kb.op("bid", kb.constant(0, I32))
    kb.op("store", a, index=(i,), tile=kb.op("load", a, index=(i,), shape=(16,), padding=0.0))
    return kb.finish()


def test_remembered_types_follow_the_constants_an_op_consulted():
    """`verify(module, typed)` skips re-typing an op object it has typed before, but not when
    a constant the registry read for it has changed: `bid`'s axis becomes 5 below while the
    `bid` op itself stays the same object."""
    k = _bid_of_constant()
    typed: dict = {}
    verify(module(k), typed)
    bid = k.body.ops[1]
    assert typed[id(bid)][0] is bid and typed[id(bid)][2] == scalar(I32)
    axis5 = replace(k.body.ops[0], value=ConstValue(5, I32))
    _reject(_with_ops(k, (axis5,) + k.body.ops[1:]), r"`bid`: parameter `axis` must be 0, "
                                                     r"1 or 2 \(x, y, z\), found 5")
    with pytest.raises(IRVerificationError, match=r"`%1 = bid\(%0\) : i32`: the registry "
                                                  r"rejects the operand types"):
        verify(module(_with_ops(k, (axis5,) + k.body.ops[1:])), typed)


def test_remembered_types_still_check_a_changed_op(monkeypatch):
    """An op rebuilt by a pass is a new object and is typed again; ops a pass left alone are
    not (the pass manager's five verifications re-type only what each pass made)."""
    import tilelang.ir.verifier as verifier_mod
    calls = []
    real = verifier_mod.registry_type
    monkeypatch.setattr(verifier_mod, "registry_type",
                        lambda op, const_of: calls.append(op) or real(op, const_of))
    k = samples.vadd()
    typed: dict = {}
    verify(module(k), typed)
    assert len(calls) == 5                    # bid, two loads, + and store
    verify(module(k), typed)
    assert len(calls) == 5
    ops = list(k.body.ops)
    ops[3] = replace(ops[3], result=Value(ops[3].result.id, TileType(F16, (1024,))))
    with pytest.raises(IRVerificationError, match=r"the result type is Tile\[f16, 1024\] but "
                                                  r"`\+` gives Tile\[f32, 1024\]"):
        verify(module(_with_ops(k, ops)), typed)
    assert calls[5:] == [ops[3]]


def test_passes_keep_the_ops_they_do_not_change():
    """CSE, folding, LICM, loop splitting and DCE return an untouched op (and block) as the same object."""
    from tilelang.ir.passes import PASSES
    k = samples.vadd()
    for name in ("fold", "cse", "licm", "split", "dce"):
        after = PASSES[name].run(k)
        assert after.body is k.body, name
