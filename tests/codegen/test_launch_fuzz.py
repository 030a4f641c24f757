"""Fuzz the launch contract end to end: random @launch values (random ints, tuples of wrong
length, wrong kinds, by_target), random codegen features, every target. Each case ends in
success (LLVM -> our header -> nvJitLink accepts the PTX) or a TileError; none may make LLVM
abort the process. The loop runs in a child process so an abort fails the test instead of
killing pytest. Seeds 000_b9a08466c2c6e888.txt and 002_a8aa28be357af1ac.txt give the rules."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import textwrap

CHILD = textwrap.dedent(r"""
    import json, random, sys
    sys.path.insert(0, %(here)r)
    from test_launch_support import llvm_ptx
    from tilelang.codegen.contract import CodegenFeatures, decide_contract
    from tilelang.sema.launch_attrs import AttrValue, ByTarget, KINDS, resolve_launch
    from tilelang.codegen.target.link import link_ptx
    from tilelang.codegen.target.ptx_header import rewrite_ptx
    from tilelang.targets import FEATURES, TARGETS, get_target, validate_target
    from tilelang.diagnostics import (DiagnosticSink, InternalCompilerError, Span, TileError)

    rng = random.Random(%(seed)d)
    SP = Span("f.tile", 1, 1, 1, 2)
    INTS = [0, 1, 2, 3, 4, 8, 16, 24, 32, 64, 96, 128, 168, 255, 256, 1024, 1025, -1, 7, 65]

    def rand_value():
        r = rng.random()
        if r < 0.35:
            return rng.choice(INTS)
        if r < 0.75:
            return tuple(rng.choice(INTS) for _ in range(rng.randint(0, 4)))
        if r < 0.85:
            return True
        if r < 0.9:
            return rng.choice([1.5, "x", None, False])
        opts = {t: rand_value_simple() for t in rng.sample(list(TARGETS), rng.randint(0, 2))}
        if rng.random() < 0.6:
            opts["default"] = rand_value_simple()
        if rng.random() < 0.1:
            opts["sm_99"] = 1
        return ByTarget(opts, SP)

    def rand_value_simple():
        return rng.choice([rng.choice(INTS), (rng.choice([32, 64, 128, 256]), 1, 1), True])

    def sensible():
        # half the cases are drawn near valid values, so success paths are exercised too
        a = {}
        if rng.random() < 0.8:
            a[rng.choice(["reqntid", "maxntid"])] = rng.choice(
                [(128, 1, 1), (256,), (64, 2), (96, 1, 1), (32, 4, 2), 512])
        if rng.random() < 0.4:
            a[rng.choice(["cluster", "num_ctas"])] = rng.choice(
                [(2, 1, 1), (1, 1, 1), (2, 2, 1), 2, 4, (16, 1, 1)])
        for k, vals in (("maxnreg", [64, 168, 232]), ("minctasm", [1, 2]),
                        ("maxclusterrank", [4, 8]), ("blocksareclusters", [True]),
                        ("nonportable_cluster", [True]), ("opt_level", [0, 3])):
            if rng.random() < 0.2:
                a[k] = rng.choice(vals)
        return a

    def ir_for(features, name="k"):
        body = ""
        decl = ""
        if "setmaxnreg" in features:
            decl = "declare void @llvm.nvvm.setmaxnreg.inc.sync.aligned.u32(i32 immarg)\n"
            body = "  call void @llvm.nvvm.setmaxnreg.inc.sync.aligned.u32(i32 232)\n"
        return ('target triple = "nvptx64-nvidia-cuda"\n' + decl +
                "define ptx_kernel void @" + name + "(ptr addrspace(1) %%p, i32 %%n) {\n" + body +
                "  store i32 %%n, ptr addrspace(1) %%p\n  ret void\n}\n")

    stats = {"ok": 0, "tile_error": 0, "codes": {}}
    for i in range(%(n)d):
        target = rng.choice(list(TARGETS))
        if rng.random() < 0.5:
            raw = sensible()
        else:
            keys = rng.sample(list(KINDS) + ["occupancy", "bogus"], rng.randint(0, 5))
            raw = {k: rand_value() for k in keys}
        attrs = {k: AttrValue(v, SP) for k, v in raw.items()}
        feats = CodegenFeatures(
            wgmma=rng.random() < 0.3, warp_specialized=rng.random() < 0.2,
            named_barriers=rng.random() < 0.1, cross_warp_reduction=rng.random() < 0.1,
            explicit_wgmma_request=rng.random() < 0.3, accumulator_regs=rng.choice([0, 64, 128]))
        extra = rng.sample(sorted(FEATURES), rng.randint(0, 2))
        try:
            spec = resolve_launch(attrs, get_target(target), launch_span=SP)
            c = decide_contract("k", spec, feats, get_target(target), kernel_span=SP)
            plan = validate_target(target, c.features(get_target(target)) | set(extra))
            ptx = llvm_ptx(ir_for(set(extra)), plan.llvm_cpu, plan.llvm_features)
            out = rewrite_ptx(ptx, plan, {"k": c}, DiagnosticSink())
            link_ptx(out, get_target(target), verbose=False, env={})
            stats["ok"] += 1
        except InternalCompilerError as e:
            print("ICE", i, target, raw, feats, extra, e.diagnostics, file=sys.stderr)
            raise
        except TileError as e:
            stats["tile_error"] += 1
            stats["codes"][e.code] = stats["codes"].get(e.code, 0) + 1
    print(json.dumps(stats))
""")


def test_fuzz_launch_values_never_crash():
    here = str(pathlib.Path(__file__).parent)
    # (the seed moved when `precision` joined KINDS: rng.sample over the keys draws anew)
    code = CHILD % {"here": here, "seed": 20261130, "n": 600}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    stats = json.loads(proc.stdout.strip().splitlines()[-1])
    assert stats["ok"] + stats["tile_error"] == 600
    assert stats["ok"] >= 60 and stats["tile_error"] >= 60
    # the rejecting paths really were exercised
    for code_ in ("E0701", "E0702", "E0703", "E0705", "E0751", "E0752"):
        assert stats["codes"].get(code_, 0) > 0, stats
