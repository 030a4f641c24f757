"""A cache entry sealed with the cache's own key (so forged by someone who can read it, or
written by a broken tilec) whose artifact the compiler could never produce is a miss: the
kernel is rebuilt, the launch is right, and the entry is replaced (runtime/artifact_check.py)."""

from __future__ import annotations

import glob
import os

import pytest

from rt_support import ROOT, fresh_runtime  # noqa: F401 (autouse fixture)
from test_rt_cache_security import entry_dir, launch, reseal
from tilelang.runtime import cache as cache_mod


def _art(body):
    return body["artifact"]


EDITS = {
    "block 2^40": lambda b: _art(b).update(block=[2**40, 1, 1]),
    "block of 2048 threads": lambda b: _art(b).update(block=[1024, 2, 1]),
    "block z 65": lambda b: _art(b).update(block=[1, 1, 65]),
    "block over maxntid": lambda b: _art(b).update(block=[256, 1, 1]),
    "block not reqntid": lambda b: (_art(b).update(block=[64, 1, 1]),
                                    _art(b)["attrs"].update(reqntid=[128, 1, 1])),
    "static shared 2^40": lambda b: _art(b).update(static_smem=2**40),
    "dynamic shared over the target": lambda b: _art(b).update(dynamic_smem=228 * 1024),
    "negative shared": lambda b: _art(b).update(static_smem=-1),
    "cluster of 64": lambda b: _art(b).update(cluster=[4, 4, 4]),
    "cluster of 16, portable": lambda b: _art(b).update(cluster=[4, 4, 1]),
    "array of rank 9": lambda b: _art(b)["params"][0].update(rank=9),
    "scalar with a rank": lambda b: _art(b)["params"][0].update(kind="scalar", rank=1),
    "20,000 parameters": lambda b: _art(b).update(params=[
        {"name": f"p{i}", "kind": "scalar", "dtype": "f32", "rank": 0} for i in range(20000)]),
    "duplicate parameter": lambda b: _art(b).update(params=_art(b)["params"][:1] * 2),
    "maxnreg 1000": lambda b: _art(b)["attrs"].update(maxnreg=1000),
    "minctasm 0": lambda b: _art(b)["attrs"].update(minctasm=0),
    "maxntid of 4096 threads": lambda b: _art(b)["attrs"].update(maxntid=[4096, 1, 1]),
    "facts of no parameter": lambda b: _art(b)["facts"].update(zz="caes"),
    "tensor map swizzle 7": lambda b: _art(b).update(tensor_maps=[
        {"array": "a", "dtype": "f32", "box": [64], "swizzle": 7}]),
    "tensor map box 1000": lambda b: _art(b).update(tensor_maps=[
        {"array": "a", "dtype": "f32", "box": [1000], "swizzle": 0}]),
    "tensor map of no array": lambda b: _art(b).update(tensor_maps=[
        {"array": "zz", "dtype": "f32", "box": [64], "swizzle": 0}]),
    "unknown target": lambda b: b.update(target="sm_1"),
}


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_a_sealed_entry_the_compiler_cannot_produce_is_rebuilt(tmp_path, edit):
    assert launch(tmp_path)[0]
    d = entry_dir(tmp_path)
    with open(tmp_path / "seal.key", "rb") as f:
        secret = f.read()
    reseal(d, os.path.basename(d), secret, edit=EDITS[edit])
    cache_mod.reset_stats()
    with pytest.warns(RuntimeWarning, match="damaged cache entry .* has a bad "):
        ok, fc = launch(tmp_path)
    assert ok and len(fc.builds) == 1 and cache_mod.STATS["corrupt"] == 1
    ok, fc = launch(tmp_path)                      # the entry was replaced: a disk hit
    assert ok and fc.builds == [] and cache_mod.STATS["corrupt"] == 1


def test_an_honest_reseal_still_loads(tmp_path):
    """The check above is the fields', not the reseal's: an unchanged body loads."""
    assert launch(tmp_path)[0]
    d = entry_dir(tmp_path)
    with open(tmp_path / "seal.key", "rb") as f:
        secret = f.read()
    reseal(d, os.path.basename(d), secret)
    ok, fc = launch(tmp_path)
    assert ok and fc.builds == []


def _examples_pass(targets):
    from tilelang.driver import compile_source, inspect_source
    from tilelang.options import CompileOptions
    from tilelang.runtime.artifact_check import artifact_problem
    n = 0
    for path in sorted(glob.glob(os.path.join(ROOT, "examples", "*.tile"))):
        with open(path, encoding="utf-8") as f:
            text = f.read()
        # a generic kernel (`const T: dtype`) also with bf16, as examples/attention.tile takes
        types = {p.name for k in inspect_source(text, path).kernels.values() for p in k.params
                 if p.kind == "const" and p.dtype == "dtype"}
        for target, defines in [(t, d) for t in targets
                                for d in [{}] + ([{n: "bf16" for n in types}] if types else [])]:
            res = compile_source(text, path, CompileOptions(target=target, defines=defines),
                                 until="ptx")
            assert res.ok, path
            for k in res.codegen.kernels:
                assert artifact_problem(k, target) is None, (path, target, k)
                n += 1
    return n


def test_what_the_compiler_produces_passes_the_check():
    assert _examples_pass(["sm_90a"]) >= 20


@pytest.mark.slow
def test_what_the_compiler_produces_passes_the_check_on_every_target():
    from tilelang.targets import TARGETS
    assert _examples_pass(list(TARGETS)) >= 20 * len(TARGETS)
