"""Fuzz code generation with odd `const` values and launch attributes (issue 12, item 8).

Accepted programs (the examples and the kernels below: element-wise math, reductions, scans,
padded loads and stores, gathers, atomics, products, control flow) are compiled through the
in-process driver with `const` values that are 0, 1, negative, not powers of two, huge or past
i32/i64, and `@launch` attributes of 0, 1, 33, 1024, 1025 and past i32. Every job must either
produce PTX (with the kernel's `.entry`) or be refused with the project's diagnostics; an
internal error (E9999, E0781, E0799, E0760) or a job taking 10 s or more fails the test. The
jobs run in a child process, so an LLVM abort or a hang fails the test instead of pytest.

The default run draws a small seeded sample; `-m slow` runs the full count.
"""

from __future__ import annotations

import json
import os
import pathlib
import random
import subprocess
import sys
import textwrap

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
LIMIT_S = 10.0
INTERNAL = {"E9999", "E0781", "E0799", "E0760"}

# name -> (source, const parameters with the kinds of value they take)
KERNELS = {
    "elementwise": ("""
kernel ew(a: Array[f32, 1], b: Array[f16, 1], c: Array[f32, 1],
          const T: i32 = 256, const S: f32 = 2.0) {
    let i = bid(0);
    let x = load(a, index = (i,), shape = (T,), padding = 0.0);
    let y = load(b, index = (i,), shape = (T,), padding = 1.0).astype(f32);
    let z = where(x > y, exp(x) * S, sqrt(abs(y)) - S) + fma(x, y, x);
    store(c, index = (i,), tile = minimum(z, maximum(x, y)));
}
""", {"T": "dim", "S": "float"}),
    "reduce": ("""
kernel red(x: Array[f32, 2], s: Array[f32, 1], m: Array[i32, 1],
           const R: i32 = 4, const C: i32 = 64) {
    let r = bid(0);
    let t = load(x, index = (r, 0), shape = (R, C), padding = -inf);
    let u = where(t == -inf, 0.0, t);
    store(s, index = (r,), tile = sum(u, axis = 1) + max(t, axis = 1));
    store(m, index = (r,), tile = argmax(t, axis = 1));
    store(s, index = (r + 1,), tile = prod(u, axis = 0).reshape((C,)).sum(axis = 0, keepdims = true)
        .broadcast_to((R,)));
}
""", {"R": "dim", "C": "dim"}),
    "scan": ("""
kernel scan(x: Array[i32, 1], y: Array[i32, 1], z: Array[f32, 1], const N: i32 = 128) {
    let i = bid(0);
    let t = load(x, index = (i,), shape = (N,), padding = 0);
    store(y, index = (i,), tile = cumsum(t, axis = 0));
    store(z, index = (i,), tile = cumprod(t.astype(f32) * 0.5, axis = 0));
}
""", {"N": "dim"}),
    "padded_2d": ("""
kernel pad2(a: Array[f16, 2], b: Array[f16, 2], const BM: i32 = 32, const BN: i32 = 16,
            const OFF: i32 = 0) {
    let m = bid(0) + OFF;
    let n = bid(1);
    let t = load(a, index = (m, n), shape = (BM, BN), padding = 1.5, order = (1, 0));
    store(b, index = (n, m), tile = t.transpose(0, 1).astype(f16));
}
""", {"BM": "dim", "BN": "dim", "OFF": "int"}),
    "gather_atomic": ("""
kernel ga(a: Array[f32, 1], h: Array[i32, 1], o: Array[f32, 1],
          const N: i32 = 64, const K: i32 = 3, const B: i32 = 8) {
    let idx = arange(N, i32) * K - 5;
    let g = gather(a, indices = idx, mask = idx % 2 == 0, padding = -1.0);
    let old = atomic_add(h, indices = idx % B, value = 1);
    atomic_max(h, indices = idx, value = old + K);
    scatter(o, indices = idx + N, value = g, mask = idx >= 0);
}
""", {"N": "dim", "K": "int", "B": "int"}),
    "control": ("""
kernel ctl(a: Array[f32, 1], b: Array[f32, 1], const T: i32 = 128, const N: i32 = 8,
           const U: i32 = 4, const FLAG: bool = true) {
    let i = bid(0);
    var acc = zeros((T,), f32);
    var k = 0;
    for j in range(N) {
        if j == U {
            continue;
        }
        acc += load(a, index = (j,), shape = (T,), padding = 0.0);
        if sum(acc) > 1000.0 {
            break;
        }
    }
    while k < N {
        k += U + 1;
    }
    static for s in range(U) {
        acc = acc * 0.5;
    }
    if FLAG {
        acc = acc + k.astype(f32);
    }
    if i >= N {
        return;
    }
    store(b, index = (i,), tile = acc);
}
""", {"T": "dim", "N": "int", "U": "int", "FLAG": "bool"}),
    "product": ("""
kernel prod(a: Array[f16, 2], b: Array[f16, 2], c: Array[f32, 2],
            const BM: i32 = 32, const BN: i32 = 32, const BK: i32 = 16) {
    let m = bid(0);
    let n = bid(1);
    var acc = zeros((BM, BN), f32);
    for k in range(num_tiles(a, axis = 1, shape = (BM, BK))) {
        acc = mma(load(a, index = (m, k), shape = (BM, BK), padding = 0),
                  load(b, index = (k, n), shape = (BK, BN), padding = 0), acc);
    }
    store(c, index = (m, n), tile = acc);
}
""", {"BM": "dim", "BN": "dim", "BK": "dim"}),
    "shapes": ("""
kernel shp(a: Array[f32, 2], b: Array[f32, 3], const R: i32 = 8, const C: i32 = 16,
           const AX: i32 = 1) {
    let t = load(a, index = (bid(0), 0), shape = (R, C), padding = 0.0);
    let u = cat(t, t * 2.0, axis = AX);
    let v = expand_dims(u.permute((1, 0)), 0);
    let w = extract(t, index = (1, 0), shape = (R >> 1, C));
    store(b, index = (0, 0, 0), tile = v);
    store(a, index = (1, 1), tile = broadcast_to(w.sum(axis = 0, keepdims = true), (R, C)));
    store(a, index = (2, 0), tile = reshape(t, (C, R)));
}
""", {"R": "dim", "C": "dim", "AX": "int"}),
    "dtypes": ("""
kernel dt(a: Array[i32, 1], b: Array[u8, 1], c: Array[bf16, 1], d: Array[f8e4m3, 1],
          e: Array[i64, 1], const T: i32 = 64, const K: i32 = 3, const SH: i32 = 5,
          const U: u32 = 7) {
    let i = bid(0);
    let x = load(a, index = (i,), shape = (T,), padding = K);
    store(b, index = (i,), tile = (x << SH).astype(u8) ^ U.astype(u8));
    store(c, index = (i,), tile = floordiv(x, K).astype(bf16) + bitcast(x, f32).astype(bf16));
    store(d, index = (i,), tile = (x % K).astype(f8e4m3));
    store(e, index = (i,), tile = x.astype(i64) * i64(K) + cdiv(i, K).astype(i64) +
                                  (x >> SH).astype(i64));
}
""", {"T": "dim", "K": "int", "SH": "int", "U": "int"}),
    "debug": ("""
kernel dbg(a: Array[f32, 1], const T: i32 = 8, const K: i32 = 2) {
    let t = load(a, index = (bid(0),), shape = (T,), padding = 0.0);
    print("block {} first {} k {}", bid(0), t, K);
    assert(sum(t) >= f32(-1.0e30), "sum is finite or +inf");
    static_assert(T > 0, "T must be positive");
    store(a, index = (bid(0),), tile = t * f32(K));
}
""", {"T": "dim", "K": "int"}),
    "atomics_more": ("""
kernel atm(a: Array[f32, 1], h: Array[u32, 2], const N: i32 = 32, const V: i32 = 1) {
    let idx = arange(N, i32);
    let old = atomic_cas(a, indices = idx, expected = 0.0, value = 1.0);
    atomic_xchg(a, indices = idx + N, value = old);
    atomic_or(h, indices = (idx % 4, floordiv(idx, 4)), value = V.astype(u32), mask = idx < N - 1);
    atomic_min(h, indices = (idx, idx), value = u32(0));
}
""", {"N": "dim", "V": "int"}),
}

for _p in sorted((ROOT / "examples").glob("*.tile")):
    KERNELS[f"example_{_p.stem}"] = (_p.read_text(), None)  # consts found in the source below

INT_VALUES = [0, 1, -1, 2, 3, 7, 16, 33, 64, 100, 1000, 1024, 4096, 65536, 1 << 20,
              2 ** 31 - 1, 2 ** 31, -2 ** 31, 2 ** 32, 2 ** 63, -2 ** 63 - 1, 10 ** 30]
DIM_VALUES = [1, 2, 4, 8, 16, 32, 64, 128, 256, 1024, 4096, 1 << 14, 1 << 16, 1 << 20,
              1 << 21, 1 << 31, 0, -4, 3, 33, 1000]
FLOAT_VALUES = ["0.0", "-1.5", "1e30", "1e300", "inf", "-inf", "nan", "3", "abc", "1e400"]
BOOL_VALUES = ["true", "false", "0", "1", "2"]
THREADS = [0, 1, 2, 32, 33, 64, 96, 128, 256, 1024, 1025, 2 ** 31, 2 ** 40]
LAUNCH_KEYS = ["reqntid", "maxntid", "minctasm", "maxnreg", "cluster", "maxclusterrank",
               "num_ctas", "blocksareclusters", "opt_level"]


def _consts_of(source: str) -> dict:
    """`const NAME: dtype` parameters of an example, with the kind of value to draw."""
    import re
    out = {}
    for name, dt in re.findall(r"const (\w+): (\w+)", source):
        out[name] = {"bool": "bool"}.get(dt, "float" if dt.startswith(("f", "bf")) else "dim")
    return out


def _launch_value(rng: random.Random, key: str) -> str:
    def threads():
        n = rng.choice([1, 1, 2, 3, 4])
        vals = [rng.choice(THREADS) for _ in range(min(n, 3))] + [rng.choice([1, 2])] * (n - 3)
        return "(" + ", ".join(map(str, vals)) + ("," if len(vals) == 1 else "") + ")"
    if key in ("reqntid", "maxntid", "cluster"):
        return threads() if rng.random() < 0.8 else str(rng.choice(THREADS))
    if key == "blocksareclusters":
        return rng.choice(["true", "false", "1"])
    return str(rng.choice([0, 1, 2, 3, 4, 8, 24, 33, 64, 128, 168, 255, 256, 1024, 1025,
                           -1, 2 ** 31, 2 ** 40]))


TARGETS = ["sm_80", "sm_86", "sm_89", "sm_90", "sm_90a", "sm_90a", "sm_100a", "sm_120", "sm_120a"]
SANE_THREADS = [1, 2, 32, 33, 64, 96, 128, 256, 512, 1024]


def _sane_launch(rng: random.Random) -> dict:
    """Launch attributes a user could well write: thread shapes 1..1024, valid ranges."""
    out = {}
    t = rng.choice(SANE_THREADS)
    shape = rng.choice([f"({t},)", f"({t}, 1, 1)", f"({max(t // 4, 1)}, 4)",
                        f"({max(t // 8, 1)}, 2, 4)"])
    out[rng.choice(["reqntid", "maxntid"])] = shape
    if rng.random() < 0.3:
        out["maxnreg"] = str(rng.choice([24, 32, 64, 128, 168, 255]))
    if rng.random() < 0.3:
        out["minctasm"] = str(rng.choice([1, 2, 4, 32]))
    if rng.random() < 0.2:
        out["cluster"] = rng.choice(["(1, 1, 1)", "(2, 1, 1)", "(2, 2, 1)", "(8, 1, 1)"])
    return out


def make_jobs(seed: int, count: int) -> list[dict]:
    """Half the jobs draw values a user could write (powers of two, valid launch ranges), so
    code generation itself runs; the other half draw anything, so refusals are exercised."""
    rng = random.Random(seed)
    names = sorted(KERNELS)
    jobs = []
    for i in range(count):
        name = names[i % len(names)] if i < len(names) else rng.choice(names)
        source, consts = KERNELS[name]
        consts = consts if consts is not None else _consts_of(source)
        sane = rng.random() < 0.5
        defines = {}
        for c, kind in consts.items():
            if rng.random() < 0.6:
                if sane:
                    pool = {"dim": [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048],
                            "int": [0, 1, -1, 2, 3, 7, 31, 32, 33, 1000, 2 ** 31 - 1,
                                    -2 ** 31], "float": ["0.0", "-1.5", "1e30", "inf", "nan"],
                            "bool": ["true", "false"]}[kind]
                else:
                    pool = {"dim": DIM_VALUES if rng.random() < 0.7 else INT_VALUES,
                            "int": INT_VALUES, "float": FLOAT_VALUES,
                            "bool": BOOL_VALUES}[kind]
                defines[c] = str(rng.choice(pool))
        launch = {}
        if sane and rng.random() < 0.8:
            launch = _sane_launch(rng)
        elif not sane and rng.random() < 0.7:
            for key in rng.sample(LAUNCH_KEYS, rng.randint(1, 3)):
                launch[key] = _launch_value(rng, key)
        jobs.append({"id": i, "kernel": name, "defines": defines, "launch": launch,
                     "opt": rng.choice([0, 1, 2, 3]),
                     "target": rng.choice(TARGETS),
                     "until": "cubin" if rng.random() < 0.15 else "ptx"})
    return jobs


def with_launch(source: str, launch: dict) -> str:
    """The source with its `@launch(...)` replaced by `launch` (when any is given)."""
    if not launch:
        return source
    import re
    attr = "@launch(" + ", ".join(f"{k} = {v}" for k, v in launch.items()) + ")\n"
    source = re.sub(r"@launch\((?:[^()]|\([^()]*\))*\)\s*\n", "", source)
    return re.sub(r"^kernel ", attr + "kernel ", source, count=1, flags=re.M)


CHILD = textwrap.dedent(r"""
    import json, sys, time
    sys.path.insert(0, %(here)r)
    import test_codegen_fuzz as F
    from tilelang.driver import compile_source
    from tilelang.options import CompileOptions

    for job in json.loads(sys.stdin.read()):
        text = F.with_launch(F.KERNELS[job["kernel"]][0], job["launch"])
        print(json.dumps({"start": job["id"]}), flush=True)
        t0, c0 = time.perf_counter(), time.process_time()
        try:
            res = compile_source(text, job["kernel"] + ".tile",
                                 CompileOptions(defines=job["defines"], target=job["target"],
                                         opt_level=job["opt"]), until=job["until"])
            out = {"codes": [d.code for d in res.diagnostics if d.severity.name == "ERROR"],
                   "messages": [d.message[:300] for d in res.diagnostics
                                if d.code in F.INTERNAL],
                   "ptx_entries": res.ptx.count(".entry ") if res.ok else 0,
                   "cubin": res.cubin is not None}
        except BaseException as e:  # compile_source must never raise
            out = {"raised": f"{type(e).__name__}: {e}"[:300]}
        out.update(id=job["id"], seconds=time.process_time() - c0,
                   wall=time.perf_counter() - t0)
        print(json.dumps(out), flush=True)
""")


def run_jobs(jobs: list[dict], workers: int = 1) -> list[str]:
    """Run the jobs in `workers` children; returns a description of every failure. A job's
    time is the CPU time of its child, so machines shared with other work do not fail it. A
    child that dies (an LLVM abort) or hangs fails its current job; the rest go on in a new
    child."""
    code = CHILD % {"here": str(pathlib.Path(__file__).parent)}
    pending = [jobs[i::workers] for i in range(workers)]
    failures: list[str] = []
    while any(pending):
        procs = [(chunk, subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                          text=True, cwd=ROOT)) for chunk in pending if chunk]
        pending = []
        for chunk, proc in procs:
            try:
                out, err = proc.communicate(json.dumps(chunk),
                                            timeout=120 + 3 * LIMIT_S * len(chunk))
            except subprocess.TimeoutExpired:
                proc.kill()
                out, err = proc.communicate()
            more, rest = _check_results(chunk, out, err, proc.returncode)
            failures += more
            pending.append(rest)
    return failures


def _check_results(jobs: list[dict], stdout: str, stderr: str, returncode: int
                   ) -> tuple[list[str], list[dict]]:
    """(failures, the jobs after the one a dead child was running)."""
    by_id = {j["id"]: j for j in jobs}
    failures, started, done = [], None, set()
    for line in stdout.splitlines():
        if not line.startswith("{"):
            continue
        r = json.loads(line)
        if "start" in r:
            started = r["start"]
            continue
        done.add(r["id"])
        job = by_id[r["id"]]
        what = f"job {job}"
        if "raised" in r:
            failures.append(f"{what}: raised {r['raised']}")
        elif set(r["codes"]) & INTERNAL:
            failures.append(f"{what}: internal error {r['codes']} {r['messages']}")
        elif not r["codes"] and r["ptx_entries"] < 1:
            failures.append(f"{what}: no error and no .entry in the PTX")
        elif not r["codes"] and job["until"] == "cubin" and not r["cubin"]:
            failures.append(f"{what}: no error and no cubin")
        if r["seconds"] >= LIMIT_S:
            failures.append(f"{what}: took {r['seconds']:.1f} s of CPU ({r['wall']:.1f} s)")
    rest: list[dict] = []
    if returncode != 0 or len(done) != len(jobs):
        failures.append(f"child exited with {returncode} while running job "
                        f"{by_id.get(started)}; stderr: {stderr[-2000:]}")
        ids = [j["id"] for j in jobs]
        if started in ids and started not in done:
            rest = jobs[ids.index(started) + 1:]
    return failures, rest


def _nvjitlink() -> bool:
    try:
        from cuda.bindings import nvjitlink  # noqa: F401
    except Exception:
        return False
    return True


def _jobs(seed: int, count: int) -> list[dict]:
    jobs = make_jobs(seed, count)
    if not _nvjitlink():
        for j in jobs:
            j["until"] = "ptx"
    return jobs


def test_every_program_compiles_with_its_defaults():
    """The fuzzer's programs are accepted programs: with no defines and no launch they give
    PTX, so the odd values below are what a refusal comes from."""
    jobs = [{"id": i, "kernel": k, "defines": {}, "launch": {}, "opt": 3, "target": "sm_90a",
             "until": "ptx"} for i, k in enumerate(sorted(KERNELS))]
    text = [with_launch(KERNELS[j["kernel"]][0], {}) for j in jobs]
    assert all("kernel " in t for t in text)
    from tilelang.diagnostics import render_all
    from tilelang.driver import compile_source
    from tilelang.options import CompileOptions
    for j in jobs:
        res = compile_source(KERNELS[j["kernel"]][0], j["kernel"] + ".tile", CompileOptions(),
                             until="tir")
        assert res.ok, render_all(res.diagnostics)


def test_with_launch_replaces_the_attribute():
    src = "@launch(reqntid = (128, 1, 1), maxnreg = 168)\nkernel k(a: Array[f32, 1]) { }\n"
    assert with_launch(src, {"maxntid": "(33,)"}) == \
        "@launch(maxntid = (33,))\nkernel k(a: Array[f32, 1]) { }\n"
    assert with_launch(src, {}) == src


def test_codegen_fuzz_sample():
    failures = run_jobs(_jobs(seed=12, count=30))
    assert not failures, "\n".join(failures)


@pytest.mark.slow
def test_codegen_fuzz_full(request):
    expr = request.config.getoption("markexpr") or ""
    if "slow" not in expr or "not slow" in expr:
        pytest.skip("the full fuzz (1,300 jobs, many minutes) runs with `-m slow`")
    failures = run_jobs(_jobs(seed=1212, count=1300), workers=max(1, min(8, os.cpu_count() or 1)))
    assert not failures, "\n".join(failures)
