"""The printer's text for each sample kernel, and the effect of each pass, against golden
dumps in tests/ir/golden/ (regenerate with TILE_UPDATE_GOLDEN=1 and review the diff)."""

from __future__ import annotations

import pytest

from ir_golden import check_golden
from tilelang.ir import format_module, module, samples, verify
from tilelang.ir.passes import PASSES, PassManager

SAMPLES = ["vadd", "softmax_rows", "matmul", "collatz_steps", "odd_sum", "signed_scale",
           "optimizable"]


@pytest.mark.parametrize("name", SAMPLES)
def test_sample_dump(name):
    m = module(getattr(samples, name)())
    verify(m)
    check_golden(f"{name}.tir", format_module(m))


@pytest.mark.parametrize("pass_name", list(PASSES))
def test_each_pass_alone(pass_name):
    m = PassManager([pass_name]).run(module(samples.optimizable()))
    check_golden(f"optimizable.after_{pass_name}.tir", format_module(m))


def test_default_pipeline():
    dumps = []
    PassManager(dump=lambda name, m: dumps.append(name)).run(module(samples.optimizable()))
    m = PassManager().run(module(samples.optimizable()))
    assert dumps == ["fold", "cse", "licm", "split", "dce"]
    check_golden("optimizable.optimized.tir", format_module(m))


def test_pipeline_on_matmul_keeps_loop_body():
    m = PassManager().run(module(samples.matmul()))
    check_golden("matmul.optimized.tir", format_module(m))


def test_unknown_pass_is_named():
    with pytest.raises(KeyError, match="unknown pass `gvn`"):
        PassManager(["fold", "gvn"])
