"""Compile time per example and per stage: parse, sema, IR, LLVM, PTX, cubin.

    python3 benchmarks/compile_bench.py [--arch sm_90a] [--repeat 5]

For each example a fresh Python process imports the compiler (timed apart: `import`) and then
compiles the file twice: the first compile is **cold** (grammar tables, LLVM's target and
nvJitLink are loaded on first use), the following ones are **warm** (the median is shown).
The goal (issue 5) is a cold in-process compile of softmax.tile for sm_90a in at most 0.25 s.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STAGES = ("parse", "sema", "ir", "llvm", "ptx", "cubin")

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
from tilelang.driver import Options, compile_source
t_import = time.perf_counter() - t0
path, arch, repeat = sys.argv[1], sys.argv[2], int(sys.argv[3])
text = open(path).read()
runs = []
for _ in range(1 + repeat):
    t = time.perf_counter()
    res = compile_source(text, path, Options(target=arch))
    total = time.perf_counter() - t
    if not res.ok:
        print(json.dumps({"error": [d.message for d in res.diagnostics]}))
        sys.exit(1)
    runs.append({"total": total, **res.timings})
print(json.dumps({"import": t_import, "runs": runs}))
"""


def measure(path: Path, arch: str, repeat: int) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    # measure the compiler, not Python compiling our modules: let .pyc files be written and
    # used, as in any installed package (some sandboxes set PYTHONDONTWRITEBYTECODE)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    p = subprocess.run([sys.executable, "-c", CHILD, str(path), arch, str(repeat)],
                       capture_output=True, text=True, env=env)
    if p.returncode:
        return {"error": (p.stdout + p.stderr).strip().splitlines()[-1:]}
    return json.loads(p.stdout)


def ms(x: float | None) -> str:
    return "-" if x is None else f"{x * 1e3:.1f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", default="sm_90a")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    print(f"# compile time, {args.arch} ({platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores, Python {platform.python_version()})\n")
    head = ["example", "import", "cold total"] + [f"cold {s}" for s in STAGES] + \
        ["warm total"] + [f"warm {s}" for s in STAGES]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    measure(ROOT / "examples" / "vadd.tile", args.arch, 0)   # writes the .pyc files once
    for path in sorted((ROOT / "examples").glob("*.tile")):
        r = measure(path, args.arch, args.repeat)
        if "error" in r:
            print(f"| {path.name} | failed: {' '.join(r['error'])} |")
            continue
        cold, warm = r["runs"][0], r["runs"][1:]

        def med(key):
            vals = [w[key] for w in warm if key in w]
            return statistics.median(vals) if vals else None
        row = [path.name, ms(r["import"]), ms(cold["total"])] + \
            [ms(cold.get(s)) for s in STAGES] + [ms(med("total"))] + [ms(med(s)) for s in STAGES]
        print("| " + " | ".join(row) + " |")
    print("\n(milliseconds; `-`: the stage is not measured separately)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
