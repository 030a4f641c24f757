"""Compile time, Tile next to Triton (issue 18's table), in one run:

    python3 benchmarks/compile_bench.py [--arch sm_90a] [--rounds 5] [--triton-python PY]

Every figure is the median over `--rounds` interleaved rounds; each round runs every
measurement once in a fresh process, Tile and Triton alternating which goes first. Rows:

* import of the compiler: `from tilelang.driver import compile_source` against
  `import triton` with what `triton.compile` needs;
* cold compile in process: the first compile after that import (grammar tables, code
  generation's modules, LLVM and nvJitLink load on first use; Triton's likewise);
* warm compile: the median of the next compiles in the same process, with caches off;
* whole process: `tilec FILE.tile` (the console script's code, `python -c "from tilelang.cli
  import main ..."`) against a script that imports Triton, compiles the same kernel and writes
  its cubin;
* `tilec check` of an example as a whole process, and the parser's speed on the generated
  5,000-line file of benchmarks/frontend_bench.py (Tile only);
* the CPU time of the whole processes and of the cold compiles in process (user + system,
  every thread and every process they waited for, so Triton's ptxas too): unlike wall time,
  it hardly moves with the load of a shared machine.

Caches are off for both: Tile's kernel cache plays no part in `compile_source` or `tilec FILE`
(TILELANG_CACHE_DIR still points at a fresh folder per process); Triton gets a fresh
TRITON_CACHE_DIR per process and TRITON_ALWAYS_COMPILE=1. Triton compiles the tutorial
kernels (benchmarks/instructions.py's softmax at width 1,024 with 4 warps, the 128 threads of
examples/softmax.tile; benchmarks/triton_ref/gen_matmul_ptx.py's matmul at the tile of
examples/matmul.tile with the specialization its JIT gives aligned 4096^3 tensors) for
GPUTarget("cuda", 90, 32): no GPU is needed. Without a Python that has Triton
(`--triton-python`, default $TRITON_PYTHON, else this Python if it has Triton) its column is
left out.

A second table splits Tile's cold and warm compiles into stages (parse, sema, ir, imports: code
generation's modules imported on first use, llvm: building the LLVM IR, ptx: LLVM's passes and
NVPTX, cubin: nvJitLink).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HERE = ROOT / "benchmarks"
STAGES = ("parse", "sema", "ir", "imports", "llvm", "ptx", "cubin")
EXAMPLES = {"softmax": ROOT / "examples" / "softmax.tile",
            "matmul": ROOT / "examples" / "matmul.tile"}

# Tile in one process: the import, then 1 + repeat compiles of one file (stage timings kept).
TILE_INPROC = r"""
import json, sys, time
t0 = time.perf_counter()
from tilelang.driver import compile_source
from tilelang.options import CompileOptions
t_import = time.perf_counter() - t0
path, arch, repeat = sys.argv[1], sys.argv[2], int(sys.argv[3])
text = open(path).read()
runs = []
for _ in range(1 + repeat):
    t, c = time.perf_counter(), time.process_time()
    res = compile_source(text, path, CompileOptions(target=arch))
    total, cpu = time.perf_counter() - t, time.process_time() - c
    if not res.ok:
        print(json.dumps({"error": [d.message for d in res.diagnostics]}))
        sys.exit(1)
    runs.append({"total": total, "cpu": cpu, **res.timings})
print(json.dumps({"import": t_import, "runs": runs}))
"""

TILE_MAIN = "import sys\nfrom tilelang.cli import main\nsys.exit(main(sys.argv[1:]))\n"

TILE_PARSE = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
from frontend_bench import generated_source
from tilelang.frontend.parser import parse
src = generated_source(5000)
parse(src)
times = []
for _ in range(5):
    t = time.perf_counter()
    parse(src, "gen.tile")
    times.append(time.perf_counter() - t)
print(json.dumps({"lines": src.count("\n"), "seconds": min(times)}))
"""

# Triton: `inproc` prints timings; `whole` compiles once and writes the cubin (argv[4]).
TRITON = r"""
import json, os, resource, sys, time
mode, kernel, bench_dir, out, repeat = sys.argv[1:6]
def cpu():     # this process and the ptxas processes it waited for
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + r.ru_utime + r.ru_stime
t0 = time.perf_counter()
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
sys.path.insert(0, bench_dir)
sys.path.insert(0, os.path.join(bench_dir, "triton_ref"))
if kernel == "matmul":
    import gen_matmul_ptx
    def build():
        return gen_matmul_ptx.compile_kernel(90, "jit4096")
else:
    import importlib.util
    from instructions import TRITON_KERNELS, TRITON_SPECS
    path = os.path.join(os.environ["TRITON_CACHE_DIR"], "triton_kernels.py")
    with open(path, "w") as f:
        f.write(TRITON_KERNELS)
    spec = importlib.util.spec_from_file_location("triton_kernels", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    fname, sig, div16 = TRITON_SPECS["softmax"]
    names = list(sig)
    attrs = {(names.index(n),): [["tt.divisibility", 16]] for n in div16}
    def build():
        src = ASTSource(getattr(mod, fname), dict(sig), {"BLOCK_SIZE": 1024, "num_stages": 2},
                        attrs)
        return triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 4})
t_import = time.perf_counter() - t0
if mode == "whole":
    with open(out, "wb") as f:
        f.write(build().asm["cubin"])
    sys.exit(0)
runs = []
for _ in range(1 + int(repeat)):
    t, c = time.perf_counter(), cpu()
    k = build()
    runs.append({"total": time.perf_counter() - t, "cpu": cpu() - c})
assert k.asm["cubin"][:4] == b"\x7fELF"
print(json.dumps({"import": t_import, "runs": runs, "version": triton.__version__}))
"""


def child_env(tmp: str, extra: dict | None = None) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT), TILELANG_CACHE_DIR=os.path.join(tmp, "tile"),
               TRITON_CACHE_DIR=os.path.join(tmp, "triton"), TRITON_ALWAYS_COMPILE="1",
               NO_COLOR="1")
    # measure the compilers, not Python compiling their modules: .pyc files are written once
    # by the warm-up round and used after, as in any installed package
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.update(extra or {})
    os.makedirs(env["TRITON_CACHE_DIR"], exist_ok=True)
    return env


def _children_cpu() -> float:
    import resource
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run(argv: list[str], *, want_json: bool) -> tuple[float, dict | None]:
    """(wall seconds, the JSON the child printed) of one fresh process; the CPU seconds of the
    process and everything it waited for (Triton's ptxas) are in the JSON's `cpu`."""
    import time
    with tempfile.TemporaryDirectory(prefix="compile-bench-") as tmp:
        argv = [a.replace("{tmp}", tmp) for a in argv]
        cpu = _children_cpu()
        t = time.perf_counter()
        p = subprocess.run(argv, capture_output=True, text=True, env=child_env(tmp), cwd=tmp)
        wall = time.perf_counter() - t
        cpu = _children_cpu() - cpu
    if p.returncode:
        raise RuntimeError(f"{argv[:3]} failed:\n{(p.stdout + p.stderr)[-2000:]}")
    out = json.loads(p.stdout.strip().splitlines()[-1]) if want_json else {}
    out["cpu"] = cpu
    return wall, out


class Bench:
    def __init__(self, arch: str, triton_python: str | None, repeat: int):
        self.arch, self.tpy, self.repeat = arch, triton_python, repeat
        self.samples: dict[str, list[float]] = {}
        self.stages: dict[str, list[dict]] = {}
        self.triton_version = None

    def add(self, key: str, value: float) -> None:
        self.samples.setdefault(key, []).append(value)

    def tile_inproc(self, name: str) -> None:
        _, r = run([sys.executable, "-c", TILE_INPROC, str(EXAMPLES[name]), self.arch,
                    str(self.repeat)], want_json=True)
        if name == "softmax":
            self.add("tile import", r["import"])
        cold, warm = r["runs"][0], r["runs"][1:]
        self.add(f"tile {name} cold", cold["total"])
        self.add(f"tile {name} cold cpu", cold["cpu"])
        self.add(f"tile {name} warm", statistics.median(w["total"] for w in warm))
        self.stages.setdefault(name, []).append(r)

    def triton_inproc(self, name: str) -> None:
        _, r = run([self.tpy, "-c", TRITON, "inproc", name, str(HERE), "-", str(self.repeat)],
                   want_json=True)
        self.triton_version = r["version"]
        if name == "softmax":
            self.add("triton import", r["import"])
        self.add(f"triton {name} cold", r["runs"][0]["total"])
        self.add(f"triton {name} cold cpu", r["runs"][0]["cpu"])
        self.add(f"triton {name} warm", statistics.median(w["total"] for w in r["runs"][1:]))

    def tile_whole(self, name: str) -> None:
        wall, r = run([sys.executable, "-c", TILE_MAIN, str(EXAMPLES[name]), "--arch", self.arch,
                       "-o", "{tmp}/out.cubin"], want_json=False)
        self.add(f"tile {name} whole", wall)
        self.add(f"tile {name} whole cpu", r["cpu"])

    def triton_whole(self, name: str) -> None:
        wall, r = run([self.tpy, "-c", TRITON, "whole", name, str(HERE), "{tmp}/out.cubin", "0"],
                      want_json=False)
        self.add(f"triton {name} whole", wall)
        self.add(f"triton {name} whole cpu", r["cpu"])

    def tile_check(self) -> None:
        wall, r = run([sys.executable, "-c", TILE_MAIN, "check", str(EXAMPLES["softmax"])],
                      want_json=False)
        self.add("tile check", wall)
        self.add("tile check cpu", r["cpu"])

    def tile_parse(self) -> None:
        _, r = run([sys.executable, "-c", TILE_PARSE, str(HERE)], want_json=True)
        self.add("tile parse", r["lines"] / r["seconds"])

    def round(self, index: int) -> None:
        pairs = [(self.tile_inproc, self.triton_inproc, "softmax"),
                 (self.tile_inproc, self.triton_inproc, "matmul"),
                 (self.tile_whole, self.triton_whole, "softmax"),
                 (self.tile_whole, self.triton_whole, "matmul")]
        for tile, triton, name in pairs:
            if not self.tpy:
                tile(name)
            elif index % 2 == 0:
                tile(name), triton(name)
            else:
                triton(name), tile(name)
        self.tile_check()
        self.tile_parse()

    def median(self, key: str) -> float | None:
        vals = self.samples.get(key)
        return statistics.median(vals) if vals else None


def ms(x: float | None) -> str:
    return "—" if x is None else f"{x * 1e3:,.0f} ms"


def ratio(a: float | None, b: float | None) -> str:
    return "—" if a is None or b is None else f"{a / b:.2f}"


def report(b: Bench, rounds: int) -> str:
    m = b.median
    rows = [
        ("import of the compiler", m("tile import"), m("triton import"), "1.0 (not a goal)"),
        ("softmax, cold compile in process (import excluded)", m("tile softmax cold"),
         m("triton softmax cold"), "≤ 0.30"),
        ("softmax, warm compile (caches off)", m("tile softmax warm"),
         m("triton softmax warm"), ""),
        ("softmax, whole process (`tilec examples/softmax.tile` vs a Triton script)",
         m("tile softmax whole"), m("triton softmax whole"), "≤ 0.40"),
        ("matmul, cold compile in process (import excluded)", m("tile matmul cold"),
         m("triton matmul cold"), "Tile ≤ 400 ms (issue 13)"),
        ("matmul, warm compile (caches off)", m("tile matmul warm"), m("triton matmul warm"), ""),
        ("matmul, whole process", m("tile matmul whole"), m("triton matmul whole"), ""),
        ("softmax, whole process, CPU time (all threads and child processes)",
         m("tile softmax whole cpu"), m("triton softmax whole cpu"), ""),
        ("matmul, whole process, CPU time", m("tile matmul whole cpu"),
         m("triton matmul whole cpu"), ""),
        ("softmax, cold compile in process, CPU time", m("tile softmax cold cpu"),
         m("triton softmax cold cpu"), ""),
        ("matmul, cold compile in process, CPU time", m("tile matmul cold cpu"),
         m("triton matmul cold cpu"), ""),
    ]
    tv = b.triton_version or "(not run)"
    out = [f"| | Tile | Triton {tv} | ratio | goal |", "|---|---|---|---|---|"]
    for label, t, r, goal in rows:
        out.append(f"| {label} | {ms(t)} | {ms(r)} | {ratio(t, r)} | {goal} |")
    out.append(f"| `tilec check examples/softmax.tile`, whole process | {ms(m('tile check'))} "
               f"| — | — | ≤ 100 ms |")
    out.append(f"| `tilec check examples/softmax.tile`, CPU time | {ms(m('tile check cpu'))} "
               f"| — | — | |")
    lps = m("tile parse")
    out.append(f"| parser, generated 5,000-line file | "
               f"{'—' if lps is None else f'{lps:,.0f} lines/s'} | — | — | ≥ 50,000 lines/s |")
    out.append("")
    out.append(f"(medians of {rounds} interleaved rounds, a fresh process per measurement; "
               "caches off for both compilers)")
    out.append("")
    out.append("Tile's compile by stage (medians, ms):")
    out.append("")
    head = ["example", "import", "cold total"] + [f"cold {s}" for s in STAGES] + \
        ["warm total"] + [f"warm {s}" for s in STAGES]
    out.append("| " + " | ".join(head) + " |")
    out.append("|" + "---|" * len(head))
    for name, results in b.stages.items():
        def med(key, which):
            vals = []
            for r in results:
                runs = r["runs"][:1] if which == "cold" else r["runs"][1:]
                got = [x[key] for x in runs if key in x]
                if got:
                    vals.append(statistics.median(got))
            return statistics.median(vals) if vals else None
        imp = statistics.median(r["import"] for r in results)
        row = [name, f"{imp * 1e3:.1f}"]
        for which in ("cold", "warm"):
            row += [f"{(med(k, which) or 0) * 1e3:.1f}" if med(k, which) is not None else "-"
                    for k in ("total",) + STAGES]
        out.append("| " + " | ".join(row) + " |")
    return "\n".join(out)


def default_triton_python() -> str | None:
    for cand in (os.environ.get("TRITON_PYTHON"), sys.executable):
        if cand and shutil.which(cand):
            p = subprocess.run([cand, "-c", "import triton"], capture_output=True)
            if p.returncode == 0:
                return cand
    return None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", default="sm_90a")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=3, help="warm compiles per process")
    ap.add_argument("--triton-python", default=None,
                    help="a Python with Triton (default $TRITON_PYTHON, else this one)")
    args = ap.parse_args(argv)
    tpy = args.triton_python or default_triton_python()
    b = Bench(args.arch, tpy, args.repeat)
    try:
        Bench(args.arch, tpy, 1).round(0)      # warm-up: writes .pyc files, fills the OS cache
        for i in range(args.rounds):
            b.round(i)
            print(f"round {i + 1}/{args.rounds} done", file=sys.stderr)
    except (RuntimeError, OSError) as e:       # a child failed or could not start
        print(f"compile_bench: {e}", file=sys.stderr)
        return 1
    load = f"; load average {os.getloadavg()[0]:.1f}" if hasattr(os, "getloadavg") else ""
    print(f"# compile time, {args.arch} ({platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores, Python {platform.python_version()}{load}"
          f"{'' if tpy else '; no Triton found'})\n")
    print(report(b, args.rounds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
